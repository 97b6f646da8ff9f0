"""Drives the server with the stock python-socketio client and prints one JSON
document: whether it connected, the echo and ack round trips, the burst of
server emits in arrival order, and the final transport.

usage: sio_probe.py URL NAMESPACE {default,websocket} BURST_COUNT
"""

import json
import sys
import threading

import socketio

# Generous bounds: the test asserts "eventually", never a timing.
WAIT_SECONDS = 10


def main():
    url, namespace, mode, burst_count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    transports = ["websocket"] if mode == "websocket" else ["polling", "websocket"]
    result = {"client": "python-socketio", "mode": mode, "connected": False,
              "connect_error": None, "error": None, "echo": None, "ack": None,
              "burst": [], "transport": None}
    echoed = threading.Event()
    burst_done = threading.Event()
    sio = socketio.Client(reconnection=False)

    @sio.on("echo", namespace=namespace)
    def on_echo(data):
        result["echo"] = data
        echoed.set()

    @sio.on("burst_item", namespace=namespace)
    def on_burst_item(data):
        result["burst"].append(data["i"])
        if len(result["burst"]) >= burst_count:
            burst_done.set()

    @sio.on("connect_error", namespace=namespace)
    def on_connect_error(data):
        result["connect_error"] = data.get("message") if isinstance(data, dict) else data

    try:
        sio.connect(url, namespaces=[namespace], transports=transports, wait_timeout=WAIT_SECONDS)
    except socketio.exceptions.ConnectionError as error:
        result["error"] = str(error)
        print(json.dumps(result))
        return

    try:
        result["connected"] = True
        result["sid"] = sio.get_sid(namespace)
        sio.emit("echo", {"hello": "world", "n": 1}, namespace=namespace)
        if not echoed.wait(WAIT_SECONDS):
            result["error"] = "no echo"
        ack = sio.call("ack_me", (1, "two"), namespace=namespace, timeout=WAIT_SECONDS)
        result["ack"] = list(ack) if isinstance(ack, tuple) else [ack]
        sio.emit("burst", {"count": burst_count}, namespace=namespace)
        if burst_count and not burst_done.wait(WAIT_SECONDS):
            result["error"] = "burst incomplete"
        result["transport"] = sio.transport()
    except Exception as error:  # report, do not crash: the test reads stdout
        result["error"] = repr(error)
    finally:
        sio.disconnect()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
