"""Drives the /assistant namespace with the stock python-socketio client and
prints one JSON document: for each step, the acknowledgement and every
`assistant:*` event received for it, in arrival order.

usage: sio_decision.py URL SCENARIO_JSON

SCENARIO_JSON is {"steps": [STEP, ...]} where a STEP is one of
  {"message": BODY}                 emit assistant_message with an ack, then
                                    collect events until status completed
                                    (or, when refused, the assistant:error)
  {"message": BODY, "cancel_after_ms": N}
                                    the same, emitting assistant_cancel for
                                    BODY's session N ms after the ack
"""

import json
import sys
import threading
import time

import socketio

NAMESPACE = "/assistant"
# Generous bounds: the test asserts "eventually", never a timing.
WAIT_SECONDS = 15


def main():
    url, scenario = sys.argv[1], json.loads(sys.argv[2])
    result = {"client": "python-socketio", "connected": False, "error": None, "steps": []}
    lock = threading.Lock()
    current = {"events": None, "done": threading.Event()}
    sio = socketio.Client(reconnection=False)

    @sio.on("*", namespace=NAMESPACE)
    def on_any(event, data=None):
        if not event.startswith("assistant:"):
            return
        with lock:
            events = current["events"]
            if events is None:
                result.setdefault("stray", []).append({"event": event, "data": data})
                return
            events.append({"event": event, "data": data})
            completed = event == "assistant:status" and isinstance(data, dict) \
                and data.get("status") == "completed"
            if completed:
                current["done"].set()

    try:
        sio.connect(url, namespaces=[NAMESPACE], transports=["websocket"],
                    wait_timeout=WAIT_SECONDS)
    except socketio.exceptions.ConnectionError as error:
        result["error"] = str(error)
        print(json.dumps(result))
        return

    try:
        result["connected"] = True
        for step in scenario["steps"]:
            body = step["message"]
            record = {"ack": None, "events": [], "timed_out": False}
            with lock:
                current["events"] = record["events"]
                current["done"] = threading.Event()
            done = current["done"]
            ack = sio.call("assistant_message", body, namespace=NAMESPACE, timeout=WAIT_SECONDS)
            record["ack"] = ack
            if isinstance(ack, dict) and ack.get("ok"):
                if "cancel_after_ms" in step:
                    time.sleep(step["cancel_after_ms"] / 1000.0)
                    record["cancel_ack"] = sio.call(
                        "assistant_cancel", {"session_id": body["session_id"]},
                        namespace=NAMESPACE, timeout=WAIT_SECONDS)
                if not done.wait(WAIT_SECONDS):
                    record["timed_out"] = True
            else:
                # The refusal's assistant:error is emitted before the ack; give
                # anything else a moment to show up, so extra events are seen.
                time.sleep(0.2)
            with lock:
                current["events"] = None
            result["steps"].append(record)
    except Exception as error:  # report, do not crash: the test reads stdout
        result["error"] = repr(error)
    finally:
        sio.disconnect()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
