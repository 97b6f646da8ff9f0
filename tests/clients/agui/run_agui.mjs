// Drives POST /api/agui with the stock @ag-ui/client HttpAgent, so the
// stream is checked by the real client's verifier and schemas. Used by
// tests/api/agui.rs.
//
// Usage: node run_agui.mjs '<scenario JSON>'   (or the scenario on stdin)
//
// Scenario: {
//   "url": "http://127.0.0.1:PORT/api/agui", "threadId": "t1",
//   "tools": [...], "context": [...], "state": {...}, "forwardedProps": {...},
//   "runs": [
//     {"user": "say hi", "id": "u1"},                   // a user message
//     {"answer": [{"result": "{\"ok\":1}"}, {"error": "no"}], "reverse": false},
//                                                        // results for the host calls
//     {"reload": true, "connect": false}                 // a new agent with no messages (a reloaded page);
//                                                        // connect: through connectAgent() instead of runAgent()
//   ]
// }                                                      // the previous run left open
//
// Prints {"runs": [{"events", "error", "result"}], "messages", "before_reload"} as JSON.

import { HttpAgent } from "@ag-ui/client";

async function readScenario() {
  if (process.argv[2]) return JSON.parse(process.argv[2]);
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

/** Host tool calls of a run: started, never given a result in the stream. */
function openCalls(events) {
  const results = new Set(
    events.filter((e) => e.type === "TOOL_CALL_RESULT").map((e) => e.toolCallId),
  );
  return events
    .filter((e) => e.type === "TOOL_CALL_START" && !results.has(e.toolCallId))
    .map((e) => e.toolCallId);
}

const scenario = await readScenario();
// AG-UI's way back into a thread is `connectAgent()`, which calls
// `connect(input)`; HttpAgent 1.0 leaves it unimplemented. Against this
// server it is one POST of the run input with no new message, answered with
// MESSAGES_SNAPSHOT.
class ConnectingHttpAgent extends HttpAgent {
  connect(input) {
    return this.run(input);
  }
}

const newAgent = () => new ConnectingHttpAgent({
  url: scenario.url,
  threadId: scenario.threadId,
  initialState: scenario.state ?? {},
});
let agent = newAgent();
let beforeReload = null;

const runs = [];
let previous = [];
for (const [index, step] of scenario.runs.entries()) {
  if (step.reload) {
    beforeReload ??= agent.messages;
    agent = newAgent();
  }
  if (step.answer !== undefined) {
    let calls = openCalls(previous);
    if (step.reverse) calls = [...calls].reverse();
    step.answer.forEach((answer, i) => {
      if ((answer.toolCallId ?? calls[i]) === undefined) {
        throw new Error(`run ${index}: answer ${i} has no open host call to answer`);
      }
      const message = {
        id: `${scenario.threadId}-tool-${index}-${i}`,
        role: "tool",
        toolCallId: answer.toolCallId ?? calls[i],
        content: answer.result ?? "",
      };
      if (answer.error !== undefined) message.error = answer.error;
      agent.addMessage(message);
    });
  }
  // After the answers: a user message typed while the results were pending.
  if (step.user !== undefined) {
    agent.addMessage({ id: step.id ?? `user-${index}`, role: "user", content: step.user });
  }
  const events = [];
  const run = { events, error: null, result: null };
  try {
    const outcome = await (step.connect ? agent.connectAgent.bind(agent) : agent.runAgent.bind(agent))(
      {
        runId: `${scenario.threadId}-run-${index}`,
        tools: scenario.tools ?? [],
        context: scenario.context ?? [],
        forwardedProps: scenario.forwardedProps ?? {},
      },
      {
        onEvent: ({ event }) => {
          events.push(event);
        },
        onRunFailed: ({ error }) => {
          run.failed = { message: String(error?.message ?? error), status: error?.status ?? null };
        },
      },
    );
    run.result = outcome.result ?? null;
  } catch (error) {
    run.error = {
      message: String(error?.message ?? error),
      status: error?.status ?? null,
      payload: error?.payload ?? null,
    };
  }
  runs.push(run);
  previous = events;
}

process.stdout.write(JSON.stringify({ runs, messages: agent.messages, before_reload: beforeReload }) + "\n");
