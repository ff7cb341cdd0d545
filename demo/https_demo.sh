#!/usr/bin/env bash
# The HTTPS demo behind ./run.sh demo --tls: examples/https_hello serving
# HTTPS under load.
#
#   demo/https_demo.sh BUILD_DIR [--seconds S] [--connections N]
#                      [--server-threads T] [--client-threads T]
#
# Makes a self-signed certificate (EC P-256, for 127.0.0.1) with the openssl
# command in a temporary folder (mktemp -d; removed when the script ends),
# starts BUILD_DIR/examples/https_hello --tls-cert/--tls-key on 127.0.0.1 (a
# free port), then two phases:
#   1. requests: wrk on https://127.0.0.1:PORT/ (N keep-alive connections,
#      each one handshake then requests, for S seconds): requests/s, latency;
#   2. handshakes: `openssl s_time` (one client, one connection at a time,
#      each a handshake and a GET /, 3 s each): new TLS connections per
#      second with a full handshake (-new), then resuming the first one's
#      session (-reuse: the server's session tickets,
#      tls_server_options::session_resumption), with how many resumed.
# Then stops the server (SIGTERM) and prints its statistics line. The
# hardware threads are split between the server and wrk (half each, at
# least one) unless the options say otherwise. Exit status 0 when wrk saw
# no error.
set -euo pipefail

build=${1:?usage: demo/https_demo.sh BUILD_DIR [--seconds S] [--connections N] [--server-threads T] [--client-threads T]}
shift
seconds=3
connections=50
hardware=$(nproc)
server_threads=$(((hardware / 2) > 0 ? hardware / 2 : 1))
client_threads=$(((hardware - hardware / 2) > 0 ? hardware - hardware / 2 : 1))
while [ $# -gt 0 ]; do
  case "$1" in
  --seconds) seconds=$2 ;;
  --connections) connections=$2 ;;
  --server-threads) server_threads=$2 ;;
  --client-threads) client_threads=$2 ;;
  *)
    echo "https_demo: unknown option $1" >&2
    exit 2
    ;;
  esac
  shift 2
done
if [ "$connections" -lt "$client_threads" ]; then
  client_threads=$connections # wrk needs a connection per thread
fi
server_binary=$build/examples/https_hello
for tool in "$server_binary" openssl wrk; do
  if ! command -v "$tool" >/dev/null; then
    echo "https_demo: $tool is missing" >&2
    exit 1
  fi
done

certs=$(mktemp -d "${TMPDIR:-/tmp}/canopy_https_demo.XXXXXX")
server_pid=
cleanup() {
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$certs"
}
trap cleanup EXIT

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
  -keyout "$certs/key.pem" -out "$certs/cert.pem" -days 1 -subj /CN=127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1 2>/dev/null

# The server's stdout: its "listening on" line first, its statistics at the end.
"$server_binary" 0 --threads "$server_threads" --tls-cert "$certs/cert.pem" \
  --tls-key "$certs/key.pem" >"$certs/server.out" &
server_pid=$!
port=
for _ in $(seq 100); do
  if line=$(head -n1 "$certs/server.out") && [[ "$line" == "listening on 127.0.0.1:"* ]]; then
    port=${line##*:}
    break
  fi
  sleep 0.05
done
if [ -z "$port" ]; then
  echo "https_demo: the server did not start" >&2
  exit 1
fi

echo "Canopy HTTPS demo: examples/https_hello (workers: $server_threads; a self-signed"
echo "EC P-256 certificate made for this run), on 127.0.0.1:$port"
echo
echo "1. requests: wrk, $connections keep-alive connections, threads: $client_threads, ${seconds} s"
wrk_out=$(wrk -t "$client_threads" -c "$connections" -d "${seconds}s" --latency \
  "https://127.0.0.1:$port/")
requests_per_second=$(awk '/^Requests\/sec:/ {print $2}' <<<"$wrk_out")
errors=$(awk '/Non-2xx|Socket errors/ {found = 1} END {print found ? 1 : 0}' <<<"$wrk_out")
p50=$(awk '$1 == "50%" {print $2}' <<<"$wrk_out")
p99=$(awk '$1 == "99%" {print $2}' <<<"$wrk_out")
printf '  requests/s            %12.0f\n' "$requests_per_second"
printf '  latency p50 / p99     %12s / %s\n' "$p50" "$p99"
if [ "$errors" != 0 ]; then
  grep -E 'Non-2xx|Socket errors' <<<"$wrk_out" | sed 's/^/  wrk: /'
fi

# s_time: one client, one connection at a time for 3 s, each a handshake
# and a GET / (so a TLS 1.3 client reads the server's ticket); prints a
# mark per connection ('*' new, 'r' resumed) and "N connections in ...".
# The rate is over the measured wall time.
handshakes() {
  local mode=$1 out started ended count resumed
  started=$(date +%s.%N)
  out=$(openssl s_time -connect "127.0.0.1:$port" "$mode" -www / -time 3 2>/dev/null || true)
  ended=$(date +%s.%N)
  count=$(awk '/connections in .* real seconds/ {n = $1} END {print n + 0}' <<<"$out")
  resumed=$({ grep -E '^[*r]+$' <<<"$out" || true; } | tr -cd 'r' | wc -c)
  awk -v c="$count" -v r="$resumed" -v s="$started" -v e="$ended" \
    'BEGIN {printf "%8.0f   (%d connections in %.1f s, %d resumed)", c / (e - s), c, e - s, r}'
}
echo
echo "2. handshakes: openssl s_time, one client, one connection at a time (a handshake"
echo "   and a GET / each), 3 s per line"
echo "  new, full handshakes/s    $(handshakes -new)"
echo "  resumed handshakes/s      $(handshakes -reuse)"

kill -TERM "$server_pid"
wait "$server_pid" || true
server_pid=
stats=$(grep '^stats ' "$certs/server.out" || true)
pick() { tr ' ' '\n' <<<"$stats" | awk -F= -v key="$1" '$1 == key {print $2}'; }
echo
echo "  server connections    $(pick connections) accepted, $(pick requests) requests served," \
  "$(pick bad_requests) bad, $(pick timeouts) timed out"
echo "  server I/O backend    $(awk '/^io_backend / {print $2}' "$certs/server.out")" \
  "(CANOPY_IO_BACKEND=epoll|io_uring chooses)"
[ "$errors" = 0 ]
