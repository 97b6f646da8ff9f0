// The playground: a page over the TypeScript client (clients/typescript,
// bundled as /playground/assistant-client.js: `AssistantRuntime`) plus the
// session routes over fetch. The client speaks the protocol; this file only
// draws it. Host actions of the edited context are answered by hand.
"use strict";

const { AssistantClient } = window.AssistantRuntime;
// Where the server mounted the assistant ("" standalone, e.g. "/assistant"
// inside a host's app): the session routes and Socket.IO live under it.
const PREFIX = window.ASSISTANT_PREFIX || "";
const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "assistant-runtime.playground.token";

const EXAMPLE_CONTEXT = {
  version: 1,
  host: { name: "playground", kind: "browser" },
  view: {
    name: "tasks",
    description: "The issue list, filtered to open bugs.",
    data: { issues: [{ number: 42, title: "Fix login" }, { number: 43, title: "Slow search" }] },
    state: { filters: { label: "bug" } },
  },
  actions: [{
    name: "select_issue",
    description: "Select an issue in the list.",
    parameters: { type: "object", properties: { number: { type: "integer" } }, required: ["number"] },
  }],
};

let counter = 0;
const newId = (prefix) => `${prefix}-${Date.now().toString(36)}-${(counter++).toString(36)}`;

// The assistant messages drawn so far, by message_id.
const turns = new Map();
// The host call waiting for the buttons: {call, messageId, resolve, reject}.
let pending = null;
// The message id of the latest final response (where a pending call lives).
let latestMessageId = null;
let client = null;
let unregister = [];

// ---- the connection --------------------------------------------------------

function token() {
  return $("token").value.trim();
}

function authHeaders() {
  return token() ? { authorization: `Bearer ${token()}` } : {};
}

// One client per session and token: the session travels in the handshake.
function connection() {
  const sessionId = $("session").value;
  if (client && client.sessionId === sessionId && client.token === (token() || undefined)) return client;
  if (client) client.close();
  client = new AssistantClient({
    sessionId,
    token: token() || undefined,
    socketOptions: { transports: ["polling", "websocket"], path: `${PREFIX}/socket.io` },
  });
  client.on("connect", () => setStatus(true));
  client.on("disconnect", () => setStatus(false));
  client.on("connect_error", (error) => { setStatus(false); log("connect_error", { message: error.message }); });
  client.socket.onAny((event, data) => log(event, data));
  for (const [event, handler] of Object.entries(HANDLERS)) client.on(event, handler);
  return client;
}

function setStatus(on) {
  const status = $("status");
  status.textContent = on ? "connected" : "disconnected";
  status.className = "status " + (on ? "on" : "off");
}

function log(event, data) {
  const line = document.createElement("div");
  line.className = "event";
  line.dataset.event = event;
  const name = document.createElement("b");
  name.textContent = event + " ";
  line.append(name, JSON.stringify(data));
  $("log").prepend(line);
}

// ---- the conversation ------------------------------------------------------

// The box of one assistant message, made in the latest turn the first time
// any of its events arrives (a delta, a tool call or its final response).
function turnBox(messageId) {
  let turn = turns.get(messageId);
  if (!turn) {
    const box = document.createElement("div");
    box.className = "assistant";
    box.dataset.messageId = messageId;
    ($("transcript").lastElementChild || $("transcript")).append(box);
    turn = { box, segments: new Map() };
    turns.set(messageId, turn);
  }
  return turn;
}

function userLine(text, note) {
  const turn = document.createElement("div");
  turn.className = "turn";
  const user = document.createElement("div");
  user.className = "user sending";
  user.textContent = (note ? `[${note}] ` : "") + (text || "(empty)");
  turn.append(user);
  $("transcript").append(turn);
  turn.scrollIntoView({ block: "end" });
  return user;
}

// Marks the user's line once the server answered the message's ack.
function markSent(line, exchange) {
  exchange.accepted.then((ack) => {
    line.classList.remove("sending");
    line.classList.add(ack.ok ? "sent" : "refused");
    if (!ack.ok) line.title = ack.error.message;
  });
}

// Deltas carry segment_id "<message_id>:<index>"; the message id is the rest.
function messageIdOf(segmentId) {
  return segmentId.slice(0, segmentId.lastIndexOf(":"));
}

function delta(kind) {
  return (data) => {
    const turn = turnBox(messageIdOf(data.segment_id));
    let segment = turn.segments.get(data.segment_id);
    if (!segment) {
      segment = document.createElement("div");
      segment.className = kind;
      turn.segments.set(data.segment_id, segment);
      turn.box.append(segment);
    }
    segment.textContent += data.content;
  };
}

function note(messageId, className, text) {
  const line = document.createElement("div");
  line.className = className;
  line.textContent = text;
  turnBox(messageId).box.append(line);
  return line;
}

const HANDLERS = {
  "assistant:thinking_delta": delta("thinking"),
  "assistant:text_delta": delta("text"),
  "assistant:tool_call": (data) => {
    const call = note(data.message_id, "tool-call " + data.category,
      `${data.category} ${data.tool_name}(${JSON.stringify(data.arguments)})`);
    call.dataset.callId = data.call_id;
  },
  "assistant:tool_result": (data) => note(data.message_id, "tool-result", `→ ${data.tool_name}: ${JSON.stringify(data.output)}`),
  "assistant:tool_error": (data) => note(data.message_id, "tool-result", `✗ ${data.tool_name}: ${data.error}`),
  "assistant:final_response": (data) => {
    latestMessageId = data.message_id;
    const parts = [`turn ${data.turn_number}`, data.model, `${data.usage?.total_tokens ?? 0} tokens`];
    if (data.decision) parts.push(`decision: ${data.decision}`);
    if (data.error_type) parts.push(`error: ${data.error_type}`);
    note(data.message_id, "ending" + (data.error ? " failed" : ""), parts.join(" · "));
  },
  "assistant:error": (data) => {
    if (data.type !== "validation") return;
    const target = String(data.message).startsWith("host_context") ? "context-error" : "message-error";
    $(target).textContent = data.message;
  },
};

// ---- host actions, answered by hand ----------------------------------------

// Every action of the edited context is registered with a handler that waits
// for the answer buttons; the client sends the continuation.
function registerActions(context) {
  for (const off of unregister) off();
  unregister = [];
  for (const action of (context && context.actions) || []) {
    unregister.push(connection().registerAction(action.name, action, (args, call) =>
      new Promise((resolve, reject) => showPending({ call, messageId: latestMessageId, resolve, reject }))));
  }
}

function showPending(waiting) {
  pending = waiting;
  $("pending").hidden = !pending;
  if (pending) {
    const { call } = pending;
    $("pending-call").textContent = `${call.tool_name}(${JSON.stringify(call.arguments)}) · ${call.call_id}` +
      (call.queued.length ? ` · then ${call.queued.join(", ")}` : "");
  }
}

function answer(outcome) {
  if (!pending) return;
  let result;
  try {
    result = JSON.parse($("result").value);
  } catch (error) {
    $("message-error").textContent = `tool_result: invalid JSON: ${error.message}`;
    return;
  }
  const { call, messageId, resolve, reject } = pending;
  // A continuation resumes the same assistant message: note it in place.
  note(messageId || call.call_id, "tool-result", `[result ${outcome} for ${call.tool_name}] ${JSON.stringify(result)}`);
  showPending(null);
  if (outcome === "failed") {
    reject(new Error(typeof result?.error === "string" ? result.error : JSON.stringify(result)));
  } else {
    resolve(result);
  }
}
$("answer-success").onclick = () => answer("success");
$("answer-failed").onclick = () => answer("failed");

// ---- sending ---------------------------------------------------------------

function clearErrors() {
  $("context-error").textContent = "";
  $("message-error").textContent = "";
}

// The editor's JSON, null when not sent, or undefined (and the error shown)
// when it does not parse.
function hostContext() {
  if (!$("with-context").checked) return null;
  try {
    return JSON.parse($("host-context").value);
  } catch (error) {
    $("context-error").textContent = `host_context: invalid JSON: ${error.message}`;
    return undefined;
  }
}

function send() {
  clearErrors();
  const context = hostContext();
  if (context === undefined) return;
  const assistant = connection();
  registerActions(context);
  const content = $("message").value;
  const line = userLine(content, $("silent").checked ? "silent" : null);
  const options = context ? { hostContext: context, id: newId("m") } : { id: newId("m") };
  const exchange = $("silent").checked ? assistant.decide(content, options) : assistant.send(content, options);
  exchange.accepted.then((ack) => log("ack assistant_message", ack));
  markSent(line, exchange);
  exchange.final.catch(() => showPending(null));
}

$("send").onclick = send;
$("steer").onclick = async () => {
  clearErrors();
  const content = $("message").value;
  const line = userLine(content, "steering");
  const ack = await connection().steer(content);
  log("ack assistant_message", ack);
  line.classList.remove("sending");
  line.classList.add(ack.ok ? "sent" : "refused");
};
$("cancel").onclick = async () => {
  log("ack assistant_cancel", await connection().cancel());
};
$("join").onclick = async () => {
  clearErrors();
  const context = hostContext();
  if (context === undefined) return;
  registerActions(context);
  log("ack assistant_join_session", await connection().setHostContext(context || undefined));
};

$("new-session").onclick = () => {
  $("session").value = newId("playground");
  $("transcript").replaceChildren();
  turns.clear();
  showPending(null);
  connection();
};

$("token").value = sessionStorage.getItem(TOKEN_KEY) || "";
$("token").onchange = () => {
  sessionStorage.setItem(TOKEN_KEY, token());
  connection();
  refreshSessions();
};

// ---- sessions --------------------------------------------------------------

async function refreshSessions() {
  const response = await fetch(`${PREFIX}/api/sessions?limit=50`, { headers: authHeaders() });
  const sessions = await response.json();
  const list = $("sessions");
  list.replaceChildren();
  for (const session of Array.isArray(sessions) ? sessions : []) {
    const item = document.createElement("li");
    const link = document.createElement("a");
    link.textContent = session.session_id;
    link.dataset.sessionId = session.session_id;
    link.onclick = () => showTree(session.session_id);
    item.append(link, ` · ${session.message_count} messages`);
    list.append(item);
  }
}

async function showTree(sessionId) {
  const response = await fetch(`${PREFIX}/api/sessions/${encodeURIComponent(sessionId)}/tree`, { headers: authHeaders() });
  const messages = await response.json();
  if (!Array.isArray(messages)) {
    $("tree").textContent = JSON.stringify(messages, null, 2);
    return;
  }
  const lines = [`${sessionId}:`];
  const depth = new Map();
  for (const message of messages) {
    const level = message.parent_id ? (depth.get(message.parent_id) ?? 0) + 1 : 0;
    depth.set(message.id, level);
    const summary = message.role === "user"
      ? message.content
      : (message.segments || []).map((segment) =>
          segment.kind === "tool_group"
            ? segment.tools.map((tool) => `[${tool.name} ${tool.status || tool.outcome || "pending"}]`).join(" ")
            : segment.text).join(" ");
    const oneLine = String(summary).replace(/\s+/g, " ").slice(0, 80);
    lines.push(`${"  ".repeat(level)}${message.role} ${message.id}: ${oneLine}`);
  }
  $("tree").textContent = lines.join("\n");
}

$("refresh-sessions").onclick = refreshSessions;
$("clear-log").onclick = () => $("log").replaceChildren();

$("host-context").value = JSON.stringify(EXAMPLE_CONTEXT, null, 2);
$("session").value = newId("playground");
connection();
refreshSessions();
