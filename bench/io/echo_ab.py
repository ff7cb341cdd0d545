"""A/B of echo servers: echo_ab.py ROUNDS BINARY... (each BINARY an
echo_server-like program that prints "listening on 127.0.0.1:PORT"). Each
round serves demo/canopy_load (echo, 50 connections, 64-byte messages, one
client thread, 4 s) from each binary in turn, on the same cores; prints the
medians of requests/s, server CPU per round trip (/proc) and p99.
CANOPY_LOAD names the load generator (default build-release/demo/canopy_load)."""
import subprocess, sys, time, os, json, statistics
load = os.environ.get("CANOPY_LOAD", "build-release/demo/canopy_load")
bins = sys.argv[2:]
rounds = int(sys.argv[1])
res = {b: [] for b in bins}
tck = os.sysconf('SC_CLK_TCK')
def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")",1)[1].split()
    return (int(f[11]) + int(f[12])) / tck
for r in range(rounds):
    for b in bins:
        p = subprocess.Popen([b, "0"], stdout=subprocess.PIPE, text=True, env={k:v for k,v in os.environ.items() if k!="CANOPY_IO_BACKEND"})
        port = p.stdout.readline().split(":")[-1].strip()
        time.sleep(0.2)
        c0 = cpu(p.pid)
        out = subprocess.run([load, "--port", port, "--mode", "echo", "--connections", "50", "--threads", "1", "--seconds", "4", "--message-bytes", "64", "--json"], capture_output=True, text=True).stdout
        c1 = cpu(p.pid)
        p.terminate(); p.wait()
        j = json.loads(out.strip().splitlines()[-1])
        n = j.get("requests") or j.get("round_trips") or j.get("operations")
        rps = j.get("requests_per_second") or j.get("rate")
        res[b].append((rps, (c1-c0)*1e6/ n if n else 0, j.get("p99_us")))
for b in bins:
    print(os.path.basename(b), "req/s med %.0f" % statistics.median(x[0] for x in res[b]), "cpu us/req med %.2f" % statistics.median(x[1] for x in res[b]), "p99", statistics.median(x[2] or 0 for x in res[b]))
