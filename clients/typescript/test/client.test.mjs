// AssistantClient against the real server binary (builtin:echo, which reads
// commands: `say`, `call <tool> <json>`, `slow <ms>`, `hold`).
import assert from "node:assert/strict";
import { createServer, request as httpRequest } from "node:http";
import { connect } from "node:net";
import { after, before, test } from "node:test";

import { AssistantClient, AssistantError } from "../dist/index.js";
import { sessionId, startServer } from "./server.mjs";

const CONTEXT = {
  version: 1,
  host: { name: "client-tests", kind: "service" },
  view: { name: "tasks", data: { issues: [42, 43] } },
};

let server;
const clients = [];

before(async () => {
  server = await startServer();
});

after(() => {
  for (const client of clients) client.close();
  server?.stop();
});

function client(options = {}) {
  const made = new AssistantClient({
    url: server.url,
    sessionId: sessionId("client"),
    token: server.token,
    hostContext: CONTEXT,
    ...options,
  });
  clients.push(made);
  return made;
}

async function collect(exchange) {
  const events = [];
  for await (const event of exchange) events.push(event);
  return events;
}

const names = (events) => events.map((event) => event.type.replace("assistant:", ""));

async function storedTools(session) {
  const { status, body } = await server.get(`/api/sessions/${session}/messages`);
  assert.equal(status, 200, JSON.stringify(body));
  return body
    .filter((message) => message.role === "assistant")
    .flatMap((message) => message.segments)
    .filter((segment) => segment.kind === "tool_group")
    .flatMap((segment) => segment.tools);
}

test("a streamed turn: deltas then the final response, in order", async () => {
  const assistant = client();
  const exchange = assistant.send("say Hello from the client");
  const events = await collect(exchange);
  const final = await exchange.final;
  assert.equal(final.content, "Hello from the client");
  assert.equal(final.pending_tool_call, null);
  assert.deepEqual(names(events).slice(0, 2), ["status", "text_delta"]);
  assert.deepEqual(names(events).slice(-2), ["final_response", "status"]);
  const text = events
    .filter((event) => event.type === "assistant:text_delta")
    .map((event) => event.data.content)
    .join("");
  assert.equal(text, "Hello from the client");
});

test("a registered action that resolves: its value is the continuation, on the same message", async () => {
  const assistant = client();
  const seen = [];
  assistant.registerAction(
    "select_issue",
    { description: "Select an issue.", parameters: { type: "object", properties: { number: { type: "integer" } } } },
    async (args) => {
      seen.push(args);
      return { selected: args.number };
    },
  );
  const exchange = assistant.send('call select_issue {"number": 42}');
  const events = await collect(exchange);
  const final = await exchange.final;
  assert.deepEqual(seen, [{ number: 42 }]);
  assert.equal(final.pending_tool_call, null);
  assert.match(final.content, /Tool results: select_issue/);
  const call = events.find((event) => event.type === "assistant:tool_call");
  assert.equal(call.data.message_id, final.message_id);
  const finals = events.filter((event) => event.type === "assistant:final_response");
  assert.equal(finals.length, 2, "the call's turn and the continuation's");
  assert.equal(finals[0].data.pending_tool_call.tool_name, "select_issue");
  const [tool] = await storedTools(exchange.sessionId);
  assert.equal(tool.outcome, "success");
  assert.deepEqual(tool.output, { selected: 42 });
});

test("an action that throws is answered as failed with the error's message", async () => {
  const assistant = client();
  assistant.registerAction("select_issue", { description: "Select an issue." }, () => {
    throw new Error("no such issue");
  });
  const exchange = assistant.send('call select_issue {"number": 7}');
  const final = await exchange.final;
  assert.equal(final.pending_tool_call, null);
  const [tool] = await storedTools(exchange.sessionId);
  assert.equal(tool.status, "failed");
  assert.equal(tool.outcome, "failed");
  assert.match(JSON.stringify(tool.output), /no such issue/);
});

test("an unknown action is answered as failed, naming it", async () => {
  const assistant = client({
    hostContext: { ...CONTEXT, actions: [{ name: "open_page", description: "Open a page.", parameters: { type: "object" } }] },
  });
  const exchange = assistant.send("call open_page {}");
  await exchange.final;
  const [tool] = await storedTools(exchange.sessionId);
  assert.equal(tool.status, "failed");
  assert.match(JSON.stringify(tool.output), /no handler for host action \\"open_page\\"/);
});

test("two calls of one response are handed over one at a time, in order", async () => {
  const assistant = client();
  const log = [];
  let running = 0;
  const handler = (name) => async (args) => {
    running += 1;
    assert.equal(running, 1, "one handler at a time");
    log.push(`${name} ${args.n}`);
    await new Promise((r) => setTimeout(r, 20));
    running -= 1;
    return { done: name };
  };
  assistant.registerAction("first", { description: "First." }, handler("first"));
  assistant.registerAction("second", { description: "Second." }, handler("second"));
  const exchange = assistant.send('call first {"n": 1}\ncall second {"n": 2}');
  const events = await collect(exchange);
  const final = await exchange.final;
  assert.deepEqual(log, ["first 1", "second 2"]);
  assert.equal(final.pending_tool_call, null);
  const pending = events
    .filter((event) => event.type === "assistant:final_response")
    .map((event) => event.data.pending_tool_call?.tool_name ?? null);
  assert.deepEqual(pending, ["first", "second", null]);
  const tools = await storedTools(exchange.sessionId);
  assert.deepEqual(tools.map((tool) => tool.outcome), ["success", "success"]);
});

test("cancel ends the live exchange with a cancelled final response", async () => {
  const assistant = client();
  const exchange = assistant.send("slow 300\nsay one two three four five six seven eight nine ten");
  for await (const event of exchange) {
    if (event.type === "assistant:text_delta") break;
  }
  const ack = await assistant.cancel();
  assert.equal(ack.ok, true);
  assert.equal(ack.cancel_requested, true);
  const final = await exchange.final;
  assert.equal(final.error, true);
  assert.equal(final.error_type, "cancelled");
});

test("a second client on the session sees the other's turn, and never takes it as its own", async () => {
  const session = sessionId("room");
  const first = client({ sessionId: session });
  const second = client({ sessionId: session });
  await Promise.all([first.join(), second.join()]);
  const seen = [];
  second.on("assistant:text_delta", (data) => seen.push(data.segment_id));
  const firstExchange = first.send("slow 150\nsay one two three four five six seven eight");
  while (seen.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
  // Supersedes the first client's turn: its cancelled end reaches the
  // second client through the room just as the second one's exchange opens.
  const mine = second.send("say mine");
  const events = await collect(mine);
  const final = await mine.final;
  assert.equal(final.error, undefined, JSON.stringify(final));
  assert.equal(final.content, "mine");
  const messages = new Set(events.map((event) => event.data.message_id ?? event.data.segment_id?.replace(/:\d+$/, "")).filter(Boolean));
  assert.deepEqual([...messages], [final.message_id], JSON.stringify(events));
  assert.deepEqual(names(events), ["status", "text_delta", "final_response", "status"]);
  const theirs = await firstExchange.final;
  assert.equal(theirs.error_type, "cancelled");
  assert.notEqual(seen[0].replace(/:\d+$/, ""), final.message_id, "the room's deltas were the other turn's");
});

test("steering reaches the live turn and is delivered on its stream", async () => {
  const assistant = client();
  const exchange = assistant.send("slow 200\nsay one two three four five six");
  const iterator = exchange[Symbol.asyncIterator]();
  for (;;) {
    const { value } = await iterator.next();
    if (value.type === "assistant:text_delta") break;
  }
  const ack = await assistant.steer("say steered");
  assert.equal(ack.ok, true);
  assert.equal(ack.accepted_as, "steering");
  const rest = [];
  for (;;) {
    const { value, done } = await iterator.next();
    if (done) break;
    rest.push(value);
  }
  const delivered = rest.find((event) => event.type === "assistant:steering_delivered");
  assert.equal(delivered?.data.content, "say steered");
  const final = await exchange.final;
  assert.equal(final.error, undefined);
});

test("a silent decision runs the picked action and resolves to its receipt", async () => {
  const assistant = client();
  const performed = [];
  assistant.registerAction("select_issue", { description: "Select an issue." }, (args) => {
    performed.push(args.number);
    return { selected: args.number };
  });
  const decision = assistant.decide('call select_issue {"number": 5}', { sessionId: sessionId("decision") });
  const events = await collect(decision);
  const receipt = await decision.final;
  assert.deepEqual(performed, [5]);
  const finals = events.filter((event) => event.type === "assistant:final_response").map((event) => event.data);
  assert.equal(finals[0].decision, "pending");
  assert.equal(finals[0].content, null);
  assert.equal(receipt.decision, "completed");
  assert.equal(receipt.pending_tool_call, null);
  assert.equal(events.some((event) => event.type === "assistant:text_delta"), false);

  const hold = await assistant.decide("hold", { sessionId: sessionId("decision") }).final;
  assert.equal(hold.decision, "hold");
});

test("reconnect during a pending action: the handler runs once and the exchange completes", async () => {
  const assistant = client();
  let runs = 0;
  let joins = 0;
  assistant.on("connect", () => (joins += 1));
  assistant.registerAction("select_issue", { description: "Select an issue." }, async (args) => {
    runs += 1;
    const reconnected = new Promise((resolve) => assistant.socket.once("connect", resolve));
    // The network drops while the host performs the action.
    assistant.socket.io.engine.close();
    await reconnected;
    return { selected: args.number };
  });
  const exchange = assistant.send('call select_issue {"number": 9}');
  const final = await exchange.final;
  assert.equal(runs, 1);
  assert.ok(joins >= 1, "connected again");
  assert.equal(final.pending_tool_call, null);
  assert.match(final.content, /select_issue/);
  const [tool] = await storedTools(exchange.sessionId);
  assert.equal(tool.outcome, "success");
  // The joined context after the reconnect is the client's current one.
  const { body } = await server.get(`/api/sessions/${exchange.sessionId}`);
  assert.equal(body.host_context.view.name, "tasks");
  assert.deepEqual(body.host_context.actions.map((action) => action.name), ["select_issue"]);
});

test("a continuation whose ack was lost is sent again and the 409 'already recorded' counts as done", async () => {
  const assistant = client();
  let runs = 0;
  assistant.registerAction("select_issue", { description: "Select an issue." }, () => {
    runs += 1;
    return { ok: true };
  });
  // Drop the connection right after the continuation leaves, before its ack.
  const emit = assistant.socket.emit.bind(assistant.socket);
  let dropped = false;
  assistant.socket.emit = (name, body, ...rest) => {
    const sent = emit(name, body, ...rest);
    if (name === "assistant_message" && body.tool_call_id && !dropped) {
      dropped = true;
      setTimeout(() => assistant.socket.io.engine.close(), 0);
    }
    return sent;
  };
  const exchange = assistant.send('call select_issue {"number": 1}');
  await exchange.final;
  assert.equal(runs, 1);
  const tools = await storedTools(exchange.sessionId);
  assert.equal(tools.length, 1);
  assert.equal(tools[0].outcome, "success");
});

test("a continuation recorded through a dropped connection: the next queued call is still answered, each handler once", async () => {
  const assistant = client();
  const log = [];
  assistant.registerAction("first", { description: "First." }, () => (log.push("first"), { one: 1 }));
  assistant.registerAction("second", { description: "Second." }, () => (log.push("second"), { two: 2 }));
  // The first continuation reaches the server by another way while the
  // connection is down (so its turn's events, which the session's room would
  // bring, go elsewhere): after the reconnect the client sends it again and
  // hears "already recorded".
  const emit = assistant.socket.emit.bind(assistant.socket);
  let diverted = false;
  assistant.socket.emit = (name, body, ...rest) => {
    if (name === "assistant_message" && body.tool_call_id && !diverted) {
      diverted = true;
      assistant.socket.io.engine.close();
      server.post("/api/chat", body);
      return assistant.socket;
    }
    return emit(name, body, ...rest);
  };
  const exchange = assistant.send('call first {"n": 1}\ncall second {"n": 2}');
  const final = await exchange.final;
  assert.ok(diverted);
  assert.deepEqual(log, ["first", "second"]);
  assert.equal(final.pending_tool_call, null);
  assert.match(final.content, /Tool results: first .*second/s);
  const tools = await storedTools(exchange.sessionId);
  assert.deepEqual(tools.map((tool) => [tool.name, tool.outcome]), [["first", "success"], ["second", "success"]]);
});

test("an opening message recorded through a dropped connection: the exchange picks up the call it led to", async () => {
  const assistant = client();
  let runs = 0;
  assistant.registerAction("select_issue", { description: "Select an issue." }, () => (runs += 1, { ok: true }));
  const emit = assistant.socket.emit.bind(assistant.socket);
  let diverted = false;
  assistant.socket.emit = (name, body, ...rest) => {
    if (name === "assistant_message" && !body.tool_call_id && !diverted) {
      diverted = true;
      server.post("/api/chat", body).then(() => assistant.socket.io.engine.close());
      return assistant.socket;
    }
    return emit(name, body, ...rest);
  };
  const exchange = assistant.send('call select_issue {"number": 3}');
  assert.equal((await exchange.accepted).ok, true);
  const final = await exchange.final;
  assert.ok(diverted);
  assert.equal(runs, 1);
  assert.equal(final.pending_tool_call, null);
  assert.match(final.content, /Tool results: select_issue/);
});

test("a duplicate message id on the first send is the caller's mistake, not a delivery", async () => {
  const assistant = client();
  await assistant.send("say one", { id: "same-id" }).final;
  await assert.rejects(assistant.send("say two", { id: "same-id" }).final, /already exists/);
});

test("a refused message rejects final with the server's error, naming the field", async () => {
  const assistant = client({ hostContext: { ...CONTEXT, view: { name: "tasks", colour: "red" } } });
  const exchange = assistant.send("say hi");
  await assert.rejects(exchange.final, (error) => {
    assert.ok(error instanceof AssistantError);
    assert.equal(error.event.type, "validation");
    assert.match(error.message, /host_context\.view\.colour/);
    return true;
  });
});

test("a wrong token is refused at connect", async () => {
  const assistant = client({ token: "wrong", socketOptions: { reconnection: false } });
  const error = await new Promise((resolve) => assistant.on("connect_error", resolve));
  assert.match(String(error.message), /unauthorized|token/i);
});

test("session_id travels in the handshake query, so a proxy can route by it", async () => {
  const seen = [];
  const target = new URL(server.url);
  const proxy = createServer((incoming, outgoing) => {
    seen.push(incoming.url);
    const forward = httpRequest(
      { host: target.hostname, port: target.port, path: incoming.url, method: incoming.method, headers: incoming.headers },
      (answer) => {
        outgoing.writeHead(answer.statusCode, answer.headers);
        answer.pipe(outgoing);
      },
    );
    // A connection the client or server resets as the test closes is no failure.
    forward.on("error", () => outgoing.destroy());
    incoming.pipe(forward);
  });
  proxy.on("upgrade", (incoming, socket, head) => {
    seen.push(incoming.url);
    const upstream = connect(Number(target.port), target.hostname, () => {
      const headers = Object.entries(incoming.headers).map(([k, v]) => `${k}: ${v}`).join("\r\n");
      upstream.write(`${incoming.method} ${incoming.url} HTTP/1.1\r\n${headers}\r\n\r\n`);
      upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
    upstream.on("error", () => socket.destroy());
    socket.on("error", () => upstream.destroy());
  });
  await new Promise((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  const session = sessionId("routed");
  const assistant = client({ url: `http://127.0.0.1:${proxy.address().port}`, sessionId: session });
  const final = await assistant.send("say routed").final;
  assert.equal(final.content, "routed");
  assistant.close();
  proxy.close();
  assert.ok(seen.length > 0);
  for (const url of seen) {
    assert.equal(new URL(url, "http://x").searchParams.get("session_id"), session, url);
  }
});
