// Runs one scenario against the `/assistant` namespace with the stock
// socket.io-client (v4) and prints one JSON document: every `assistant:*`
// event in arrival order, the acks, and the final transport. The scenario
// format is the one sio_scenario.py documents.
//
// usage: node sio_scenario.mjs URL {default,websocket,polling} SCENARIO_JSON
import { io } from "socket.io-client";

const NAMESPACE = "/assistant";
// Generous bounds: the tests assert "eventually", never a timing.
const WAIT_MS = 20000;

const [url, mode, scenarioArg] = process.argv.slice(2);
const scenario = JSON.parse(scenarioArg);
const result = {
  client: "socket.io-client", mode, connected: false, error: null,
  events: [], acks: [], transport: null,
};
// Resolvers of the current `wait` step, re-checked on every event.
let waiter = null;

function finish(socket) {
  if (socket) socket.disconnect();
  console.log(JSON.stringify(result));
  process.exit(0);
}

const matches = (data, match) =>
  data !== null && typeof data === "object" &&
  Object.entries(match).every(([key, value]) => JSON.stringify(data[key]) === JSON.stringify(value));

function pendingCallId() {
  for (let i = result.events.length - 1; i >= 0; i--) {
    const item = result.events[i];
    if (item.event === "assistant:final_response") {
      return item.data?.pending_tool_call?.call_id ?? null;
    }
  }
  return null;
}

function substitute(value) {
  if (value === "$pending_call_id") return pendingCallId();
  if (Array.isArray(value)) return value.map(substitute);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, substitute(v)]));
  }
  return value;
}

const deadline = setTimeout(() => { result.error = "timed out"; finish(); }, 6 * WAIT_MS);

// Optional credentials: `auth` goes in the CONNECT packet, `headers` on
// every HTTP request of the connection (as an authenticating proxy would set).
// `scenario.query` rides on every Engine.IO request of the connection (the
// handshake, each poll, the websocket upgrade), so a balancer can route by it
// (config/nginx-sticky.conf hashes on `session_id`).
const socket = io(url + NAMESPACE, {
  transports: { websocket: ["websocket"], polling: ["polling"] }[mode] ?? ["polling", "websocket"],
  reconnection: false,
  timeout: WAIT_MS,
  ...(scenario.auth ? { auth: scenario.auth } : {}),
  ...(scenario.headers ? { extraHeaders: scenario.headers } : {}),
  query: scenario.query ?? {},
});

socket.onAny((event, ...args) => {
  result.events.push({ event, data: args.length ? args[0] : null });
  if (waiter) waiter();
});

socket.on("connect_error", (err) => {
  result.error = `connect: ${err.message}`;
  clearTimeout(deadline);
  finish(socket);
});

function waitFor(name, count, match) {
  const enough = () =>
    result.events.filter((item) => item.event === name && matches(item.data, match)).length >= count;
  return new Promise((resolve, reject) => {
    if (enough()) return resolve();
    const timer = setTimeout(() => {
      waiter = null;
      reject(new Error(`waited for ${count} x ${name} ${JSON.stringify(match)}`));
    }, WAIT_MS);
    waiter = () => {
      if (enough()) {
        clearTimeout(timer);
        waiter = null;
        resolve();
      }
    };
  });
}

async function waitForWebsocket() {
  // The upgrade runs beside the connection; give it a bounded while.
  const until = Date.now() + WAIT_MS;
  while (socket.io.engine.transport.name !== "websocket" && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 50));
  }
}

socket.once("connect", async () => {
  result.connected = true;
  let disconnected = false;
  try {
    for (const step of scenario.steps) {
      if ("emit" in step) {
        socket.emit(step.emit, substitute(step.data ?? null));
      } else if ("call" in step) {
        const ack = await socket.timeout(WAIT_MS).emitWithAck(step.call, substitute(step.data ?? null));
        result.acks.push(ack);
      } else if ("wait" in step) {
        await waitFor(step.wait, step.count ?? 1, step.match ?? {});
      } else if (step.disconnect) {
        result.transport = socket.io.engine.transport.name;
        socket.disconnect();
        disconnected = true;
        break;
      }
    }
    if (!disconnected) {
      if (mode === "default") await waitForWebsocket();
      result.transport = socket.io.engine.transport.name;
    }
  } catch (err) {
    result.error = String(err);
  }
  clearTimeout(deadline);
  finish(disconnected ? null : socket);
});
