// `npm pack` makes a tarball a stranger can install: it is installed into an
// empty folder (its one dependency from the npm cache or registry) and a
// ten-line Node script uses it against the server.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";

import { sessionId, startServer } from "./server.mjs";

const root = fileURLToPath(new URL("..", import.meta.url));
let server;
let dir;
before(async () => {
  server = await startServer();
  dir = mkdtempSync(join(tmpdir(), "ar-pack-"));
});
after(() => {
  server?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const SCRIPT = `import { AssistantClient } from "@assistant-runtime/client";
const [url, token, sessionId] = process.argv.slice(2);
const client = new AssistantClient({ url, token, sessionId });
client.registerAction("select_issue", { description: "Select an issue" }, ({ number }) => ({ selected: number }));
const exchange = client.send('call select_issue {"number": 42}');
let deltas = 0;
for await (const event of exchange) if (event.type === "assistant:text_delta") deltas++;
const final = await exchange.final;
console.log(JSON.stringify({ content: final.content, deltas }));
client.close();
`;

test("the packed tarball installs into an empty folder and runs against the server", () => {
  const packed = JSON.parse(execFileSync("npm", ["pack", "--json", "--pack-destination", dir], { cwd: root }).toString());
  const tarball = join(dir, packed[0].filename);
  const files = packed[0].files.map((file) => file.path);
  assert.ok(files.includes("dist/index.js") && files.includes("dist/index.d.ts") && files.includes("dist/react.js"), files.join());
  const app = join(dir, "app");
  execFileSync("mkdir", ["-p", app]);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  execFileSync("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", tarball], { cwd: app, stdio: "ignore" });
  writeFileSync(join(app, "main.mjs"), SCRIPT);
  assert.equal(SCRIPT.trim().split("\n").length, 10);
  const output = execFileSync("node", ["main.mjs", server.url, server.token, sessionId("packed")], { cwd: app }).toString();
  const result = JSON.parse(output.trim().split("\n").pop());
  assert.match(result.content, /Tool results: select_issue/);
  assert.ok(result.deltas > 0);
});
