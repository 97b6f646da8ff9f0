// Several stock socket.io-client (v4) sockets on one server, for session
// rooms: runs the steps in order and prints one JSON document with each
// socket's `assistant:*` events (in arrival order, each with `t`, the
// milliseconds since the script started), the acks, and `marks`: the time
// each step began, by its `mark` name.
//
// usage: node sio_room.mjs URL < SCENARIO_JSON (on stdin: it may be megabytes)
// SCENARIO: {"sockets": [{"mode": "websocket", "headers"?: {...}, "brief"?: true}, ...],
//            "steps": [
//   {"socket": i, "call": EVENT, "data": {...}, "mark"?: NAME}   emit with ack (acks[i])
//   {"socket": i, "emit": EVENT, "data": {...}, "mark"?: NAME}   emit, no ack
//   {"http": PATH, "body": {...}, "method"?: "PATCH", "headers"?: {...}, "mark"?: NAME}
//                                     a request (POST by default), not awaited; its
//                                     answer in `http` (JSON, or `text` when it is not)
//   {"socket": i, "wait": EVENT, "count"?: n, "match"?: {...}}
//   {"http_done": true}                                          await every POST
// ]}
import { io } from "socket.io-client";
import { performance } from "node:perf_hooks";

const NAMESPACE = "/assistant";
// Generous bounds: the tests assert "eventually", never a timing.
const WAIT_MS = 20000;

const [url] = process.argv.slice(2);
let input = "";
for await (const chunk of process.stdin) input += chunk;
const scenario = JSON.parse(input);
const started = performance.now();
const now = () => Math.round((performance.now() - started) * 1000) / 1000;
const result = { error: null, sockets: [], marks: {}, http: [] };
const waiters = new Set();
const posts = [];

function finish(sockets) {
  for (const socket of sockets) socket.disconnect();
  // Exit once the whole document is written (a pipe takes it in pieces).
  process.stdout.write(JSON.stringify(result) + "\n", () => process.exit(0));
}

const matches = (data, match) =>
  data !== null && typeof data === "object" &&
  Object.entries(match).every(([key, value]) => JSON.stringify(data[key]) === JSON.stringify(value));

function connect(spec, index) {
  const record = { events: [], acks: [] };
  result.sockets.push(record);
  const socket = io(url + NAMESPACE, {
    transports: { websocket: ["websocket"], polling: ["polling"] }[spec.mode] ?? ["polling", "websocket"],
    reconnection: false,
    forceNew: true,
    timeout: WAIT_MS,
    ...(spec.headers ? { extraHeaders: spec.headers } : {}),
  });
  socket.onAny((event, ...args) => {
    let data = args.length ? args[0] : null;
    // `brief` sockets keep a delta's place, not its text (long turns).
    if (spec.brief && event.endsWith("_delta")) data = { ...data, content: data.content.length };
    record.events.push({ event, data, t: now() });
    for (const waiter of waiters) waiter();
  });
  return new Promise((resolve, reject) => {
    socket.once("connect", () => resolve(socket));
    socket.once("connect_error", (err) => reject(new Error(`socket ${index}: connect: ${err.message}`)));
  });
}

function waitFor(record, name, count, match) {
  const enough = () =>
    record.events.filter((item) => item.event === name && matches(item.data, match)).length >= count;
  return new Promise((resolve, reject) => {
    if (enough()) return resolve();
    const waiter = () => {
      if (enough()) {
        clearTimeout(timer);
        waiters.delete(waiter);
        resolve();
      }
    };
    const timer = setTimeout(() => {
      waiters.delete(waiter);
      reject(new Error(`waited for ${count} x ${name} ${JSON.stringify(match)}`));
    }, WAIT_MS);
    waiters.add(waiter);
  });
}

let sockets = [];
const deadline = setTimeout(() => { result.error = "timed out"; finish(sockets); }, 6 * WAIT_MS);
try {
  sockets = await Promise.all(scenario.sockets.map(connect));
  for (const step of scenario.steps) {
    if (step.mark) result.marks[step.mark] = now();
    const socket = sockets[step.socket ?? 0];
    const record = result.sockets[step.socket ?? 0];
    if ("call" in step) {
      record.acks.push(await socket.timeout(WAIT_MS).emitWithAck(step.call, step.data ?? null));
    } else if ("emit" in step) {
      socket.emit(step.emit, step.data ?? null);
    } else if ("http" in step) {
      posts.push(
        fetch(url + step.http, {
          method: step.method ?? "POST",
          headers: { "content-type": "application/json", ...(step.headers ?? {}) },
          body: JSON.stringify(step.body),
        }).then(async (response) => {
          const text = await response.text();
          let body;
          try { body = JSON.parse(text); } catch { body = { text }; }
          result.http.push({ path: step.http, status: response.status, body, t: now() });
        }),
      );
    } else if ("wait" in step) {
      await waitFor(record, step.wait, step.count ?? 1, step.match ?? {});
    } else if (step.http_done) {
      await Promise.all(posts);
    }
  }
  await Promise.all(posts);
} catch (err) {
  result.error = String(err);
}
clearTimeout(deadline);
finish(sockets);
