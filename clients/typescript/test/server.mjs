// Starts the real server binary for the tests: $ASSISTANT_RUNTIME_BIN, or
// target/debug/assistant-runtime of this repository, built with cargo first
// when it is missing (a clean clone; .ci/run builds it before `npm test`).
// In memory, `builtin:echo`, a local token, a free port.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { request } from "node:http";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
export const TOKEN = "test-token-7f3a";

export function binary() {
  const given = process.env.ASSISTANT_RUNTIME_BIN;
  if (given) return given;
  const built = join(repo, "target/debug/assistant-runtime");
  if (!existsSync(built)) {
    const cargo = spawnSync("cargo", ["build", "--bin", "assistant-runtime"], { cwd: repo, stdio: "inherit" });
    if (cargo.status !== 0) throw new Error("cargo build failed");
  }
  return built;
}

function freePort() {
  return new Promise((resolvePort, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolvePort(port));
    });
  });
}

export async function startServer(env = {}) {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "ar-client-test-"));
  const child = spawn(binary(), ["serve"], {
    cwd: dir,
    env: {
      PATH: process.env.PATH,
      RUST_LOG: "warn",
      SERVER__PORT: String(port),
      ACCESS__LOCAL_TOKEN: TOKEN,
      ...env,
    },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const url = `http://127.0.0.1:${port}`;
  // Until it answers; the bound is generous (a cold debug binary), not a timing.
  for (let attempt = 0; ; attempt++) {
    try {
      const response = await fetch(`${url}/health`);
      if (response.status === 200) break;
    } catch {}
    if (attempt > 600 || child.exitCode !== null) throw new Error("the server did not start");
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    token: TOKEN,
    get: (path) => call(url, "GET", path),
    post: (path, body) => call(url, "POST", path, body),
    stop() {
      child.kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// A connection per request: a kept-alive one the server closed while a test
// was busy would fail the next request for no fault of the server's.
function call(url, method, path, body) {
  return new Promise((resolveCall, reject) => {
    const headers = { authorization: `Bearer ${TOKEN}` };
    if (body !== undefined) headers["content-type"] = "application/json";
    const outgoing = request(url + path, { method, headers, agent: false }, (incoming) => {
      const chunks = [];
      incoming.on("data", (chunk) => chunks.push(chunk));
      incoming.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        resolveCall({ status: incoming.statusCode, body: text ? JSON.parse(text) : null });
      });
    });
    outgoing.on("error", reject);
    outgoing.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

let seq = 0;
export const sessionId = (name) => `${name}-${process.pid}-${seq++}`;
