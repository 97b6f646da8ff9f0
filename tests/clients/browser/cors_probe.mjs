// Loads a page from another origin (a static server on 127.0.0.1, its own
// port) in headless Debian chromium and, from the page, calls the runtime the
// way a frontend would: fetch POST /api/chat (JSON, so with a preflight),
// @ag-ui/client's HttpAgent on /api/agui, socket.io-client over polling, and
// a no-cors text/plain POST (a CSRF-style request). Prints one JSON document.
//
// usage: node cors_probe.mjs RUNTIME_URL SESSION_PREFIX
import http from "node:http";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";

const [runtime, prefix] = process.argv.slice(2);
const here = path.dirname(new URL(import.meta.url).pathname);
const bundle = fs.readFileSync(path.join(here, "dist/clients.js"));

// The page's own code: each probe records what the page could see.
const pageScript = `
const runtime = ${JSON.stringify(runtime)};
const prefix = ${JSON.stringify(prefix)};
async function probeChat() {
  try {
    const response = await fetch(runtime + "/api/chat", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ id: "m1", session_id: prefix + "-chat", content: "hello from a page" }),
    });
    const body = await response.json();
    return { ok: true, status: response.status, content: body.content ?? null };
  } catch (error) {
    return { ok: false, error: String(error) };
  }
}
async function probeAgui() {
  const agent = new Clients.HttpAgent({ url: runtime + "/api/agui", threadId: prefix + "-agui" });
  agent.messages = [{ id: "u1", role: "user", content: "hello from AG-UI" }];
  const types = [];
  try {
    await agent.runAgent({ runId: "run-1" }, { onEvent: ({ event }) => { types.push(event.type); } });
    return { ok: true, types };
  } catch (error) {
    return { ok: false, error: String(error), types };
  }
}
function probeSocket() {
  return new Promise((resolve) => {
    const socket = Clients.io(runtime + "/assistant", { transports: ["polling"], reconnection: false, timeout: 10000 });
    const done = (result) => { socket.disconnect(); resolve(result); };
    const timer = setTimeout(() => done({ ok: false, error: "timed out" }), 15000);
    socket.on("connect_error", (error) => { clearTimeout(timer); done({ ok: false, error: String(error) }); });
    socket.on("connect", async () => {
      const events = [];
      socket.on("assistant:final_response", (data) => {
        events.push(data.content);
        clearTimeout(timer);
        done({ ok: true, transport: socket.io.engine.transport.name, content: data.content });
      });
      socket.emit("assistant_message", { id: "m1", session_id: prefix + "-socket", content: "hello over Socket.IO" });
    });
  });
}
async function probeTextPlain() {
  // A form-like cross-site POST: no preflight, opaque reply.
  try {
    await fetch(runtime + "/api/chat", {
      method: "POST", mode: "no-cors",
      headers: { "Content-Type": "text/plain" },
      body: JSON.stringify({ id: "m1", session_id: prefix + "-plain", content: "csrf" }),
    });
    return { sent: true };
  } catch (error) {
    return { sent: false, error: String(error) };
  }
}
window.runProbes = async () => ({
  origin: location.origin,
  chat: await probeChat(),
  agui: await probeAgui(),
  socket: await probeSocket(),
  text_plain: await probeTextPlain(),
});
`;

const server = http.createServer((request, response) => {
  if (request.url === "/clients.js") {
    response.writeHead(200, { "Content-Type": "text/javascript" });
    return response.end(bundle);
  }
  if (request.url === "/page.js") {
    response.writeHead(200, { "Content-Type": "text/javascript" });
    return response.end(pageScript);
  }
  response.writeHead(200, { "Content-Type": "text/html" });
  response.end('<!doctype html><title>host page</title><script src="/clients.js"></script><script src="/page.js"></script>');
});
await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
const pageUrl = `http://127.0.0.1:${server.address().port}/`;

const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), "cors-chromium-"));
let result;
let context;
try {
  context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
    ],
  });
  const page = await context.newPage();
  await page.goto(pageUrl);
  result = await page.evaluate(() => window.runProbes());
} catch (error) {
  result = { error: String(error) };
} finally {
  if (context) await context.close();
  server.close();
  fs.rmSync(userDataDir, { recursive: true, force: true });
}
console.log(JSON.stringify(result));
process.exit(0);
