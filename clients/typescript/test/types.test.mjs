// Keeps src/types.ts true to the server:
// - the fields of the body and the final response are those of the server's
//   OpenAPI document (`GET /openapi.json`), both ways;
// - a host context with every field of the TypeScript types (checked by the
//   compiler against them) is accepted by the server, which refuses unknown
//   fields at every level, and each limit named in the doc comments is the
//   server's: one past it is refused naming the field;
// - every server event a session produces has exactly the fields its
//   interface declares (the required ones always, the optional ones may be
//   absent).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import ts from "typescript";
import { fileURLToPath } from "node:url";

import { AssistantClient } from "../dist/index.js";
import { sessionId, startServer } from "./server.mjs";

const typesFile = fileURLToPath(new URL("../src/types.ts", import.meta.url));

let server;
before(async () => {
  server = await startServer();
});
after(() => server?.stop());

/** The member names of each interface in src/types.ts (`required`: without `?`). */
function interfaces({ required = false } = {}) {
  const program = ts.createProgram([typesFile], { strict: true });
  const source = program.getSourceFile(typesFile);
  const found = new Map();
  ts.forEachChild(source, (node) => {
    if (ts.isInterfaceDeclaration(node)) {
      found.set(
        node.name.text,
        node.members
          .filter(ts.isPropertySignature)
          .filter((member) => !required || !member.questionToken)
          .map((member) => member.name.getText(source))
          .sort(),
      );
    }
  });
  return found;
}

test("the body, final response, usage and pending call match the OpenAPI document", async () => {
  const { status, body: document } = await server.get("/openapi.json");
  assert.equal(status, 200);
  const schemas = document.components.schemas;
  const ours = interfaces();
  for (const name of ["MessageBody", "FinalResponse", "Usage", "PendingToolCall"]) {
    assert.ok(schemas[name], `the document has no ${name} schema`);
    const theirs = Object.keys(schemas[name].properties).sort();
    assert.deepEqual(ours.get(name), theirs, name);
  }
});

/** A value of every field, type-checked against `DeepRequired<HostContext>`. */
const FULL_CONTEXT = {
  version: 1,
  host: { name: "types-test", kind: "browser", version: "1.0" },
  view: { name: "tasks", description: "the list", data: { rows: [1] }, state: { filter: "open" } },
  navigation: [{ name: "agents", description: "Running agents", route: "/agents" }],
  actions: [{ name: "select_issue", description: "Select one.", parameters: { type: "object", properties: {} } }],
  attachments: [
    { kind: "text", purpose: "reference", name: "notes", description: "some notes", media_type: "text/plain", text: "hello" },
  ],
  background: { agents: { state: "idle", summary: { count: 3 } } },
  captured_at: "2026-09-05T10:00:00Z",
  extensions: { tenant: "acme" },
};

test("every HostContext field the types declare is one the server accepts", async () => {
  const check = `
    import type { HostContext, Attachment } from ${JSON.stringify(typesFile.replace(/\.ts$/, ".js"))};
    type DeepRequired<T> = T extends (infer U)[] ? DeepRequired<U>[] : T extends object ? { [K in keyof T]-?: DeepRequired<T[K]> } : T;
    type Full = Omit<DeepRequired<HostContext>, "attachments" | "view" | "background"> & {
      view: Required<NonNullable<HostContext["view"]>>;
      attachments: Required<Omit<Attachment, "data_uri" | "url">>[];
      background: { [name: string]: Required<NonNullable<HostContext["background"]>[string]> };
    };
    export const full: Full = ${JSON.stringify(FULL_CONTEXT)};
  `;
  const host = ts.createCompilerHost({});
  const original = host.getSourceFile;
  host.getSourceFile = (name, language) =>
    name === "/virtual/check.ts" ? ts.createSourceFile(name, check, language) : original(name, language);
  const program = ts.createProgram(["/virtual/check.ts"], {
    strict: true, noEmit: true, types: [], lib: ["lib.es2020.d.ts"],
    moduleResolution: ts.ModuleResolutionKind.Bundler, module: ts.ModuleKind.ES2020,
  }, host);
  const problems = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n"));
  assert.deepEqual(problems, []);

  const { status, body } = await server.post("/api/chat", {
    id: "m1",
    session_id: sessionId("types"),
    content: "say ok",
    host_context: FULL_CONTEXT,
  });
  assert.equal(status, 200, JSON.stringify(body));
});

test("the limits in the doc comments are the server's", async () => {
  const cases = [
    ["host.name", { host: { name: "x".repeat(65) } }],
    ["host.version", { host: { name: "h", version: "x".repeat(33) } }],
    ["view.name", { view: { name: "x".repeat(129) } }],
    ["navigation", { navigation: Array.from({ length: 51 }, (_, i) => ({ name: `n${i}` })) }],
    ["navigation[0].route", { navigation: [{ name: "n", route: "x".repeat(513) }] }],
    ["actions", { actions: Array.from({ length: 33 }, (_, i) => ({ name: `a${i}`, description: "d", parameters: { type: "object" } })) }],
    ["actions[0].name", { actions: [{ name: "bad name", description: "d", parameters: { type: "object" } }] }],
    [": view.data, view.state and extensions", { view: { name: "v", data: { big: "x".repeat(32001) } } }],
    ["version", { version: 2 }],
  ];
  for (const [path, patch] of cases) {
    const { status, body } = await server.post("/api/chat", {
      id: "m1",
      session_id: sessionId("limits"),
      content: "say ok",
      host_context: { version: 1, ...patch },
    });
    assert.equal(status, 422, `${path}: ${JSON.stringify(body)}`);
    const prefix = path.startsWith(":") ? `host_context${path}` : `host_context.${path}`;
    assert.ok(body.error.startsWith(prefix), `${path}: ${body.error}`);
  }
});

const EVENT_TYPES = {
  "assistant:status": "StatusEvent",
  "assistant:thinking_delta": "DeltaEvent",
  "assistant:text_delta": "DeltaEvent",
  "assistant:tool_call": "ToolCallEvent",
  "assistant:tool_result": "ToolResultEvent",
  "assistant:tool_error": "ToolErrorEvent",
  "assistant:steering_delivered": "SteeringDeliveredEvent",
  "assistant:context_delivered": "ContextDeliveredEvent",
  "assistant:final_response": "FinalResponse",
  "assistant:error": "ErrorEvent",
};

test("every server event has the fields of its interface", async () => {
  const client = new AssistantClient({
    url: server.url,
    token: server.token,
    sessionId: sessionId("events"),
    hostContext: { version: 1, view: { name: "tasks" } },
  });
  const seen = [];
  client.socket.onAny((name, data) => seen.push([name, data]));
  client.registerAction("pick", { description: "Pick one.", parameters: { type: "object", properties: { n: { type: "integer" } } } }, () => ({ ok: true }));
  try {
    // thinking, text, a refused call, a host call, its result and the context after it
    await client.send('think hmm\nsay hi\ncall pick {"n": "x"}').final;
    await client.send('call pick {"n": 1}').final;
    // steering delivered; a cancel (final with error, then error)
    const live = client.send("slow 150\nsay a b c d e f");
    for await (const event of live) if (event.type === "assistant:text_delta") break;
    await client.steer("say steered");
    await live.final;
    const cancelled = client.send("slow 200\nsay a b c d e f");
    for await (const event of cancelled) if (event.type === "assistant:text_delta") break;
    await client.cancel();
    await cancelled.final;
    // a refused message: assistant:error of type validation
    await client.send("say hi", { hostContext: { version: 1, view: { name: "v", colour: "red" } } }).final.catch(() => null);
  } finally {
    client.close();
  }
  const all = interfaces();
  const required = interfaces({ required: true });
  const names = new Set();
  for (const [name, data] of seen) {
    const type = EVENT_TYPES[name];
    assert.ok(type, `an event the types do not name: ${name}`);
    names.add(name);
    const keys = Object.keys(data);
    for (const key of keys) assert.ok(all.get(type).includes(key), `${name}: ${key} is not in ${type}`);
    for (const key of required.get(type)) assert.ok(keys.includes(key), `${name}: ${type}.${key} is missing`);
  }
  assert.deepEqual([...names].sort(), Object.keys(EVENT_TYPES).sort());
});
