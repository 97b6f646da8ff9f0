// The playground: a Socket.IO client of the /assistant namespace (the stock
// browser bundle, served beside this file) plus the session routes over
// fetch. Plain script, no build step.
"use strict";

const $ = (id) => document.getElementById(id);

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

// The assistant message being streamed, by message_id.
const turns = new Map();
let pending = null;

const socket = io("/assistant", { transports: ["polling", "websocket"] });

socket.on("connect", () => setStatus(true));
socket.on("disconnect", () => setStatus(false));
socket.on("connect_error", (error) => { setStatus(false); log("connect_error", { message: error.message }); });
socket.onAny((event, data) => {
  log(event, data);
  const handler = HANDLERS[event];
  if (handler) handler(data || {});
});

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
  user.className = "user";
  user.textContent = (note ? `[${note}] ` : "") + (text || "(empty)");
  turn.append(user);
  $("transcript").append(turn);
  turn.scrollIntoView({ block: "end" });
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

function lastBox() {
  const boxes = $("transcript").querySelectorAll(".assistant");
  return boxes[boxes.length - 1] || $("transcript");
}

const HANDLERS = {
  "assistant:thinking_delta": delta("thinking"),
  "assistant:text_delta": delta("text"),
  "assistant:tool_call": (data) => {
    const call = document.createElement("div");
    call.className = "tool-call " + data.category;
    call.dataset.callId = data.call_id;
    call.textContent = `${data.category} ${data.tool_name}(${JSON.stringify(data.arguments)})`;
    lastBox().append(call);
  },
  "assistant:tool_result": (data) => {
    const result = document.createElement("div");
    result.className = "tool-result";
    result.textContent = `→ ${data.tool_name}: ${JSON.stringify(data.output)}`;
    lastBox().append(result);
  },
  "assistant:tool_error": (data) => {
    const result = document.createElement("div");
    result.className = "tool-result";
    result.textContent = `✗ ${data.tool_name}: ${data.error}`;
    lastBox().append(result);
  },
  "assistant:final_response": (data) => {
    const box = turnBox(data.message_id).box;
    const ending = document.createElement("div");
    ending.className = "ending" + (data.error ? " failed" : "");
    const parts = [`turn ${data.turn_number}`, data.model, `${data.usage?.total_tokens ?? 0} tokens`];
    if (data.decision) parts.push(`decision: ${data.decision}`);
    if (data.error_type) parts.push(`error: ${data.error_type}`);
    ending.textContent = parts.join(" · ");
    box.append(ending);
    showPending(data.pending_tool_call);
  },
  "assistant:error": (data) => {
    if (data.type !== "validation") return;
    const target = String(data.message).startsWith("host_context") ? "context-error" : "message-error";
    $(target).textContent = data.message;
  },
};

function showPending(call) {
  pending = call || null;
  $("pending").hidden = !pending;
  if (pending) {
    $("pending-call").textContent = `${pending.tool_name}(${JSON.stringify(pending.arguments)}) · ${pending.call_id}` +
      (pending.queued.length ? ` · then ${pending.queued.join(", ")}` : "");
  }
}

// ---- sending ---------------------------------------------------------------

function clearErrors() {
  $("context-error").textContent = "";
  $("message-error").textContent = "";
}

// The editor's JSON, or undefined (and the error shown) when it does not parse.
function hostContext() {
  if (!$("with-context").checked) return null;
  try {
    return JSON.parse($("host-context").value);
  } catch (error) {
    $("context-error").textContent = `host_context: invalid JSON: ${error.message}`;
    return undefined;
  }
}

function send(extra, note) {
  clearErrors();
  const context = hostContext();
  if (context === undefined) return;
  const body = { id: newId("m"), session_id: $("session").value, content: $("message").value, ...extra };
  if (context) body.host_context = context;
  if ($("silent").checked && !extra.tool_call_id) body.output_mode = "host_tools";
  if (extra.tool_call_id) {
    // A continuation resumes the same assistant message: note it in place.
    const answered = document.createElement("div");
    answered.className = "tool-result";
    answered.textContent = `[${note}] ${JSON.stringify(extra.tool_result)}`;
    lastBox().append(answered);
  } else {
    userLine(body.content, note);
  }
  socket.emit("assistant_message", body, (ack) => log("ack assistant_message", ack));
}

$("send").onclick = () => send({}, null);
$("steer").onclick = () => send({ message_type: "steering" }, "steering");
$("cancel").onclick = () => {
  socket.emit("assistant_cancel", { session_id: $("session").value }, (ack) => log("ack assistant_cancel", ack));
};
$("join").onclick = () => {
  clearErrors();
  const context = hostContext();
  if (context === undefined) return;
  const body = { session_id: $("session").value };
  if (context) body.host_context = context;
  socket.emit("assistant_join_session", body, (ack) => log("ack assistant_join_session", ack));
};

function answer(outcome) {
  if (!pending) return;
  let result;
  try {
    result = JSON.parse($("result").value);
  } catch (error) {
    $("message-error").textContent = `tool_result: invalid JSON: ${error.message}`;
    return;
  }
  const extra = { content: "", tool_call_id: pending.call_id, tool_result: result };
  if (outcome === "failed") extra.tool_outcome = "failed";
  send(extra, `result ${outcome} for ${pending.tool_name}`);
  showPending(null);
}
$("answer-success").onclick = () => answer("success");
$("answer-failed").onclick = () => answer("failed");

$("new-session").onclick = () => {
  $("session").value = newId("playground");
  $("transcript").replaceChildren();
  turns.clear();
  showPending(null);
};

// ---- sessions --------------------------------------------------------------

async function refreshSessions() {
  const response = await fetch("/api/sessions?limit=50");
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
  const response = await fetch(`/api/sessions/${encodeURIComponent(sessionId)}/tree`);
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
refreshSessions();
