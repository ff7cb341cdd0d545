#!/usr/bin/python3
"""The HTTP demo behind ./run.sh demo: a Canopy HTTP server under Canopy load.

usage: http_demo.py BUILD_DIR [--seconds S] [--connections N]
                    [--server-threads T] [--client-threads T]

Starts BUILD_DIR/examples/http_hello on 127.0.0.1 (a free port), drives it
with BUILD_DIR/demo/canopy_load (N keep-alive connections for S seconds; a
live progress line when stdout is a terminal), then stops the server
(SIGTERM) and prints a summary: requests/s, latency p50 / p99 / p99.9, the
server's CPU time per request (from /proc/PID/task/*/schedstat, in
nanoseconds), errors, and the server executor's statistics. The machine's
hardware threads are split between the server and the load generator
(half each, at least one) unless the options say otherwise.
Exit status 0 when the run had no error.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def parse_arguments():
    parser = argparse.ArgumentParser(description="Canopy HTTP server under load.")
    parser.add_argument("build", type=Path, help="the meson build directory")
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds (default 3)")
    parser.add_argument("--connections", type=int, default=50,
                        help="keep-alive connections (default 50)")
    hardware = os.cpu_count() or 1
    parser.add_argument("--server-threads", type=int, default=max(1, hardware // 2),
                        help="server workers (default: half the hardware threads)")
    parser.add_argument("--client-threads", type=int, default=max(1, hardware - hardware // 2),
                        help="load generator workers (default: the other half)")
    parser.add_argument("--trace", type=Path, metavar="FILE",
                        help="write the server's worker trace to FILE (Chrome trace JSON) and "
                        "its SVG timeline beside it (docs/tracing.md)")
    arguments = parser.parse_args()
    if arguments.seconds <= 0 or arguments.seconds > 600:
        parser.error("--seconds must be in (0, 600]")
    if not 1 <= arguments.connections <= 10000:
        parser.error("--connections must be 1..10000")
    if arguments.server_threads < 1 or arguments.client_threads < 1:
        parser.error("thread counts must be at least 1")
    return arguments


def process_cpu_ns(pid):
    """CPU time of every thread of `pid`, in nanoseconds (schedstat)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    return total


def start_server(binary, threads, trace=None):
    # CANOPY_TRACE turns the server executor's trace on; it is written when
    # the server shuts its executor down on SIGTERM (stop_server).
    environment = dict(os.environ)
    if trace is not None:
        environment["CANOPY_TRACE"] = str(trace.resolve())
    server = subprocess.Popen([str(binary), "0", "--threads", str(threads)],
                              stdout=subprocess.PIPE, text=True, env=environment)
    line = server.stdout.readline()
    if not line.startswith("listening on 127.0.0.1:"):
        server.kill()
        sys.exit(f"http_demo: the server did not start (said {line!r})")
    return server, int(line.rsplit(":", 1)[1])


def stop_server(server):
    server.send_signal(signal.SIGTERM)
    try:
        output, _ = server.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        sys.exit("http_demo: the server did not stop within 30 s of SIGTERM")
    stats = {}
    for line in output.splitlines():
        if line.startswith("io_backend "):
            stats["io_backend"] = line.split()[1]
        if line.startswith("stats "):
            for pair in line.split()[1:]:
                key, _, value = pair.partition("=")
                stats[key] = int(value)
    return stats


def main():
    arguments = parse_arguments()
    server_binary = arguments.build / "examples" / "http_hello"
    load_binary = arguments.build / "demo" / "canopy_load"
    for binary in (server_binary, load_binary):
        if not binary.exists():
            sys.exit(f"http_demo: {binary} is not built")

    print(f"Canopy HTTP demo: examples/http_hello ({arguments.server_threads} workers) under "
          f"canopy_load ({arguments.connections} keep-alive connections, "
          f"{arguments.client_threads} workers, {arguments.seconds:g} s), on 127.0.0.1")
    sys.stdout.flush()
    server, port = start_server(server_binary, arguments.server_threads, arguments.trace)
    try:
        cpu_before = process_cpu_ns(server.pid)
        started = time.monotonic()
        load = subprocess.run(
            [str(load_binary), "--port", str(port), "--connections", str(arguments.connections),
             "--seconds", str(arguments.seconds), "--threads", str(arguments.client_threads),
             "--warmup", "0", "--progress", "--json", "--label", "canopy"],
            stdout=subprocess.PIPE, text=True, check=False)
        elapsed = time.monotonic() - started
        cpu_used = process_cpu_ns(server.pid) - cpu_before
    finally:
        stats = stop_server(server)

    lines = load.stdout.splitlines()
    for line in lines[:-1]:  # the progress line, if any, then the JSON summary
        print(line)
    try:
        result = json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        sys.exit(f"http_demo: the load generator failed (exit {load.returncode})")
    requests = result["requests"]
    errors = result["errors"]
    cpu_per_request = cpu_used / 1000.0 / requests if requests else float("nan")

    print()
    print(f"  requests/s          {result['requests_per_second']:12,.0f}"
          f"   ({requests:,} requests in {result['seconds']:g} s)")
    print(f"  latency p50         {result['p50_us']:12.1f} us")
    print(f"  latency p99         {result['p99_us']:12.1f} us")
    print(f"  latency p99.9       {result['p999_us']:12.1f} us")
    print(f"  server CPU/request  {cpu_per_request:12.2f} us"
          f"   ({cpu_used / 1e9:.2f} s CPU over {elapsed:.1f} s)")
    print(f"  errors              {errors:12d}")
    if stats:
        print("  server executor     "
              f"tasks run {stats.get('tasks_run', 0):,}, steals {stats.get('steals', 0):,}, "
              f"parks {stats.get('parks', 0):,}, wakes by permit "
              f"{stats.get('wakes_by_permit', 0):,} / by JEC {stats.get('wakes_by_jec', 0):,}")
        print("                      (a permit wake: a leaf of the summary tree became active; "
              "a JEC wake: work posted\n                      without a permit while too few "
              "workers were awake; docs/architecture.md)")
        print(f"  server I/O backend  {stats.get('io_backend', 'unknown')}"
              " (CANOPY_IO_BACKEND=epoll|io_uring chooses; auto takes epoll)")
        if stats.get("io_backend") == "io_uring":
            print("  server ring         "
                  f"io_uring_enter calls {stats.get('ring_enters', 0):,}, completions "
                  f"{stats.get('ring_completions', 0):,}")
        print("  server reactor      "
              f"blocking polls {stats.get('reactor_blocking_waits', 0):,}, non-blocking polls "
              f"{stats.get('reactor_polls', 0):,}, events {stats.get('reactor_events', 0):,}, "
              f"eventfd wakes {stats.get('reactor_notifies', 0):,}")
        print("  server connections  "
              f"{stats.get('connections', 0):,} accepted, {stats.get('requests', 0):,} requests "
              f"served, {stats.get('bad_requests', 0)} bad, {stats.get('timeouts', 0)} timed out")
    if arguments.trace is not None:
        svg = arguments.trace.with_suffix(".svg") if arguments.trace.suffix == ".json" \
            else Path(str(arguments.trace) + ".svg")
        print(f"  trace               {arguments.trace} (Perfetto, chrome://tracing) and {svg}")
    return 0 if errors == 0 and load.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
