"""Runs one scenario against the `/assistant` namespace with the stock
python-socketio client and prints one JSON document: every `assistant:*`
event in arrival order, the acks, and the final transport.

usage: sio_scenario.py URL {default,websocket,polling} SCENARIO_JSON

The scenario is `{"steps": [...]}` with an optional `"query"` object: its
parameters go on the connect URL, so they ride on every Engine.IO request of
the connection (a balancer can route by `session_id`). Optional too:
`"auth"` (the connect payload), `"headers"` (sent on every Engine.IO
request) and `"socketio_path"` (for a server mounted under a prefix, e.g.
`assistant/socket.io`). Each step is one of
- `{"emit": EVENT, "data": {...}}`: emit without an ack;
- `{"call": EVENT, "data": {...}}`: emit with an ack and record the ack;
- `{"wait": EVENT, "count": N, "match": {...}}`: wait until N events named
  EVENT whose payload has those fields have arrived (counted from the start);
- `{"disconnect": true}`: disconnect now, print what was received.
The string "$pending_call_id" anywhere in `data` becomes the call id of the
newest `assistant:final_response`'s `pending_tool_call`.

Events are recorded where python-engineio receives each packet, in wire
order: the client then runs every message handler on a thread of its own
(`run_async=True` in `engineio.Client._receive_packet`), so the order in which
`@sio.on` handlers run is not the order the server sent.
"""

import json
import sys
import threading
import urllib.parse

import engineio
import socketio
from socketio import packet as sio_packet

NAMESPACE = "/assistant"
# Generous bounds: the tests assert "eventually", never a timing.
WAIT_SECONDS = 20


def matches(data, match):
    return isinstance(data, dict) and all(data.get(key) == value for key, value in match.items())


def substitute(value, pending_call_id):
    if value == "$pending_call_id":
        return pending_call_id
    if isinstance(value, dict):
        return {key: substitute(item, pending_call_id) for key, item in value.items()}
    if isinstance(value, list):
        return [substitute(item, pending_call_id) for item in value]
    return value


def main():
    url, mode, scenario = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    transports = {"websocket": ["websocket"], "polling": ["polling"]}.get(mode, ["polling", "websocket"])
    result = {"client": "python-socketio", "mode": mode, "connected": False, "error": None,
              "events": [], "acks": [], "transport": None}
    received = threading.Condition()
    sio = socketio.Client(reconnection=False)

    handled = {"count": 0}

    @sio.on("*", namespace=NAMESPACE)
    def on_any(event, *args):
        with received:
            handled["count"] += 1
            received.notify_all()

    receive_packet = sio.eio._receive_packet

    def receive_in_order(pkt):
        if pkt.packet_type == engineio.packet.MESSAGE and isinstance(pkt.data, str):
            decoded = sio_packet.Packet(encoded_packet=pkt.data)
            if decoded.packet_type == sio_packet.EVENT and decoded.namespace == NAMESPACE:
                event, *args = decoded.data
                with received:
                    result["events"].append({"event": event, "data": args[0] if args else None})
                    received.notify_all()
        receive_packet(pkt)

    sio.eio._receive_packet = receive_in_order

    def pending_call_id():
        with received:
            for item in reversed(result["events"]):
                if item["event"] == "assistant:final_response":
                    pending = (item["data"] or {}).get("pending_tool_call") or {}
                    return pending.get("call_id")
        return None

    try:
        query = scenario.get("query")
        connect_url = f"{url}?{urllib.parse.urlencode(query)}" if query else url
        sio.connect(connect_url, namespaces=[NAMESPACE], transports=transports,
                    wait_timeout=WAIT_SECONDS, auth=scenario.get("auth"),
                    headers=scenario.get("headers") or {},
                    socketio_path=scenario.get("socketio_path", "socket.io"))
    except socketio.exceptions.ConnectionError as error:
        result["error"] = f"connect: {error}"
        print(json.dumps(result))
        return

    result["connected"] = True
    disconnected = False
    try:
        for step in scenario["steps"]:
            if "emit" in step:
                sio.emit(step["emit"], substitute(step.get("data"), pending_call_id()),
                         namespace=NAMESPACE)
            elif "call" in step:
                ack = sio.call(step["call"], substitute(step.get("data"), pending_call_id()),
                               namespace=NAMESPACE, timeout=WAIT_SECONDS)
                result["acks"].append(ack)
            elif "wait" in step:
                name, count, match = step["wait"], step.get("count", 1), step.get("match", {})

                def enough():
                    return sum(1 for item in result["events"]
                               if item["event"] == name and matches(item["data"], match)) >= count

                with received:
                    if not received.wait_for(enough, WAIT_SECONDS):
                        raise TimeoutError(f"waited for {count} x {name} {match}")
            elif step.get("disconnect"):
                result["transport"] = sio.transport()
                sio.disconnect()
                disconnected = True
                break
        if not disconnected:
            result["transport"] = sio.transport()
            # Every recorded event also reached the stock handler.
            with received:
                if not received.wait_for(lambda: handled["count"] >= len(result["events"]), WAIT_SECONDS):
                    raise TimeoutError("handlers did not see every event")
    except Exception as error:  # report, do not crash: the test reads stdout
        result["error"] = repr(error)
    finally:
        if not disconnected:
            sio.disconnect()
    with received:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
