# /health latency while N chats with a 1.1 MB tool call (uniqueItems over
# 70,000 objects: the worst validation the schema budget allows) run at once.
# Usage: python3 health_during_big_chats.py PORT [N=2] [ROUNDS=3]
import json, sys, threading, time, http.client
PFX = str(time.time()); port = int(sys.argv[1]); n = int(sys.argv[2]) if len(sys.argv) > 2 else 2
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
items = [{"i": i} for i in range(70000)]
args = json.dumps({"xs": items})
schema = {"type": "object", "properties": {"xs": {"type": "array", "uniqueItems": True, "items": {"type": "object"}}}}
ctx = {"version": 1, "actions": [{"name": "act", "description": "d", "parameters": schema}]}
def chat(i, r, out):
    body = json.dumps({"id": "m1", "session_id": f"u{PFX}-{r}-{i}", "content": f"call act {args}", "host_context": ctx})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/api/chat", body, {"content-type": "application/json"})
    resp = c.getresponse(); resp.read(); out.append(resp.status)
lat = []
for r in range(rounds):
    out = []
    ts = [threading.Thread(target=chat, args=(i, r, out)) for i in range(n)]
    for t in ts: t.start()
    h = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    while any(t.is_alive() for t in ts):
        s = time.perf_counter(); h.request("GET", "/health"); h.getresponse().read()
        lat.append((time.perf_counter() - s) * 1000); time.sleep(0.005)
    for t in ts: t.join()
    print("round", r, "statuses", out)
lat.sort()
print(f"/health n={len(lat)} p50={lat[len(lat)//2]:.2f} ms p99={lat[int(len(lat)*0.99)]:.2f} ms max={lat[-1]:.2f} ms")
