#!/usr/bin/env python3
# Usage: python3 scripts/measure-startup.py N sqlite|postgres  (release build; PostgreSQL at 127.0.0.1:5432)
# Seed N memories into `memwarden serve` (hash embedder), restart it, time /readyz; for both stores.
import json, os, subprocess, sys, time, urllib.request, signal, socket, tempfile

EXE = os.environ.get("MEMWARDEN_EXE", "target/release/memwarden")
ADMIN = "mwa_startup-measure-0123456789abcdef"
N = int(sys.argv[1]); BACKEND = sys.argv[2]; PG = "host=127.0.0.1 port=5432 user=postgres dbname=test"

def port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def req(base, method, path, token, body=None):
    data = json.dumps(body).encode() if body is not None else None
    r = urllib.request.Request(base + path, data=data, method=method, headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(r, timeout=600) as resp: return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e: return e.code, json.loads(e.read() or b"null")

work = tempfile.mkdtemp(prefix="mw-startup-")
schema = "mw_startup_%d" % os.getpid()
def spawn():
    p = port()
    args = [EXE, "--data", work + "/data", "--embedder", "hash", "serve", "--addr", "127.0.0.1:%d" % p, "--rate-per-sec", "0", "--batch-max", "100"]
    if BACKEND == "postgres": args += ["--store", PG + " schema=" + schema, "--store-key-dir", work + "/key"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWARDEN_")}; env["MEMWARDEN_ADMIN_TOKEN"] = ADMIN
    log = open(work + "/server.log", "a")
    t0 = time.time(); proc = subprocess.Popen(args, env=env, stdout=log, stderr=log)
    base = "http://127.0.0.1:%d" % p
    while True:
        try:
            with urllib.request.urlopen(base + "/readyz", timeout=5) as r:
                if r.status == 200: break
        except Exception: pass
        if proc.poll() is not None: raise SystemExit("server exited")
        time.sleep(0.02)
    return proc, base, time.time() - t0

proc, base, _ = spawn()
req(base, "POST", "/v1/admin/principals", ADMIN, {"tenant": "t", "id": "w", "kind": "agent"})
tok = req(base, "POST", "/v1/admin/keys", ADMIN, {"tenant": "t", "principal": "w", "label": "m"})[1]["token"]
t0 = time.time()
words = ["alpha","bravo","charlie","delta","echo","foxtrot","golf","hotel","india","juliet","kilo","lima","mike","november","oscar","papa"]
for b in range(N // 100):
    mems = [{"namespace": "docs", "content": "note %d about %s %s and %s" % (b*100+i, words[(b+i)%16], words[(b*7+i)%16], words[(i*3)%16])} for i in range(100)]
    st, out = req(base, "POST", "/v1/memories", tok, {"memories": mems})
    if st >= 300: raise SystemExit("seed failed %s %s" % (st, out))
seed_s = time.time() - t0
proc.send_signal(signal.SIGTERM); proc.wait()
results = []
for i in range(3):
    proc, base, ready = spawn()
    t1 = time.time(); st, out = req(base, "POST", "/v1/search", tok, {"namespace": "docs", "query": "note 77 about bravo", "k": 5}); first_search_ms = (time.time() - t1) * 1000
    results.append((ready, st, first_search_ms))
    time.sleep(1 if i < 2 else 0)
    proc.send_signal(signal.SIGTERM); proc.wait()
print(json.dumps({"backend": BACKEND, "memories": N, "seed_s": seed_s, "restarts": [{"ready_s": r, "search_status": s, "first_search_ms": m} for r, s, m in results]}))
os.system("grep -h 'opened\\|graphs built\\|opening\\|loaded' %s/server.log | tail -8" % work)
if BACKEND == "postgres":
    subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", "test", "-c", "DROP SCHEMA %s CASCADE" % schema], capture_output=True)
