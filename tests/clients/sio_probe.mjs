// Drives the server with the stock socket.io-client (v4) and prints one JSON
// document: whether it connected, the echo and ack round trips, the burst of
// server emits in arrival order, and the final transport.
//
// usage: node sio_probe.mjs URL NAMESPACE {default,websocket} BURST_COUNT
import { io } from "socket.io-client";

// Generous bounds: the test asserts "eventually", never a timing.
const WAIT_MS = 10000;

const [url, namespace, mode, burstArg] = process.argv.slice(2);
const burstCount = Number(burstArg);
const result = {
  client: "socket.io-client", mode, connected: false, connect_error: null,
  error: null, echo: null, ack: null, burst: [], transport: null,
};

function finish(socket) {
  if (socket) socket.disconnect();
  console.log(JSON.stringify(result));
  process.exit(0);
}

const deadline = setTimeout(() => { result.error = "timed out"; finish(); }, 3 * WAIT_MS);

const socket = io(url + namespace, {
  transports: mode === "websocket" ? ["websocket"] : ["polling", "websocket"],
  reconnection: false,
  timeout: WAIT_MS,
});

socket.on("connect_error", (err) => {
  result.connect_error = err.message;
  clearTimeout(deadline);
  finish(socket);
});

function once(event) {
  return new Promise((resolve) => socket.once(event, resolve));
}

socket.on("connect", async () => {
  try {
    result.connected = true;
    result.sid = socket.id;
    const echo = once("echo");
    socket.emit("echo", { hello: "world", n: 1 });
    result.echo = await echo;
    result.ack = await new Promise((resolve, reject) => {
      socket.timeout(WAIT_MS).emit("ack_me", 1, "two", (err, ...args) => (err ? reject(err) : resolve(args)));
    });
    const burstDone = new Promise((resolve) => {
      if (burstCount === 0) resolve();
      socket.on("burst_item", (data) => {
        result.burst.push(data.i);
        if (result.burst.length >= burstCount) resolve();
      });
    });
    socket.emit("burst", { count: burstCount });
    await burstDone;
    if (mode !== "websocket") {
      // The upgrade runs beside the connection; give it a bounded while.
      const until = Date.now() + WAIT_MS;
      while (socket.io.engine.transport.name !== "websocket" && Date.now() < until) {
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    result.transport = socket.io.engine.transport.name;
  } catch (err) {
    result.error = String(err);
  }
  clearTimeout(deadline);
  finish(socket);
});
