#!/bin/bash
# coop_fairness.sh ECHO_SERVER [PINGS]: an echo server on 1 worker, two
# clients flooding it for 8 s (bench/io/flood_client.c: 64 KiB writes as
# fast as the socket takes them, reads on a second thread), and PINGS (60)
# new connections 50 ms apart, each timed over connect + one 5-byte echo.
# Prints the median and worst round trip. 127.0.0.1 only; bounded in time.
set -euo pipefail
bin=$1
pings=${2:-60}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -pthread -o "$work/flood" "$here/flood_client.c"
"$bin" 0 --threads 1 > "$work/server.log" 2>&1 &
server=$!
for _ in $(seq 1 50); do grep -q listening "$work/server.log" && break; sleep 0.1; done
port=$(grep -o ':[0-9]*' "$work/server.log" | head -1 | tr -d :)
"$work/flood" "$port" 8 & f1=$!
"$work/flood" "$port" 8 & f2=$!
sleep 0.5
python3 - "$port" "$pings" <<'PY'
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
times = []
for _ in range(n):
    start = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"ping\n"); s.recv(100); s.close()
    times.append(time.perf_counter() - start); time.sleep(0.05)
times.sort()
print("new connection round trip ms: median %.2f max %.2f" % (times[len(times)//2] * 1e3, times[-1] * 1e3))
PY
wait $f1 $f2
kill -INT $server; wait $server 2>/dev/null || true
