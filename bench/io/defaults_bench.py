#!/usr/bin/python3
"""The examples as shipped: examples/http_hello and examples/echo_server at
their defaults (no flags, no CANOPY_IO_BACKEND: the default backend and one
worker per hardware thread), with the load generator on the same cores,
beside each backend forced, the same examples built at a baseline commit
(the A/B a change to a default needs), tokio, hyper, Asio and nginx.

usage: defaults_bench.py BUILD_DIR [--baseline REV] [--rounds K] [--seconds S]
                         [--connections 1,50] [--workloads http,echo]
                         [--rust-peers PATH] [--results DIR] [--no-build]

Nothing is pinned: servers and load generator share every core, as a user
who runs the example and a client on one machine has them. HTTP load is
`wrk -t1 -cN --latency` (GET /, keep-alive); echo load is demo/canopy_load
--mode echo --threads 1 (64-byte messages; the client stays on epoll). The
servers, each run K times, in another order every round:
  canopy            BUILD_DIR's example, default environment
  canopy_epoll      ... with CANOPY_IO_BACKEND=epoll
  canopy_io_uring   ... with CANOPY_IO_BACKEND=io_uring
  baseline          the example built at --baseline (default HEAD~1) in a
                    worktree of its own (BUILD_DIR's build type), default
                    environment
  tokio             canopy_rust_peers tokio_server (bench/peers/rust), one
                    worker per hardware thread (#[tokio::main]'s default).
                    For HTTP it parses nothing: it counts the empty lines
                    that end request heads and answers each with a fixed
                    response, so its row is a floor of what a tokio server
                    can cost, not a peer of http_hello's parser
  hyper             (HTTP only) canopy_rust_peers hyper_server: hyper 0.14's
                    HTTP/1.1 server on the same runtime (one worker per
                    hardware thread), keep-alive, pipeline flush,
                    TCP_NODELAY, answering as http_hello does (plus the date
                    header hyper always adds). A full HTTP/1.1 server that
                    parses every request: the fair peer of http_hello
  asio              bench/asio_io_server, one shared io_context, a thread per
                    hardware thread
  nginx             (HTTP only, when /usr/sbin/nginx exists) worker_processes
                    auto, answering every request with http_hello's body
Per run: requests (round trips) per second, p50 and p99 latency, and server
CPU per request (schedstat of every thread of the server's processes, as
bench/io/server_runs.py reads it). The table shows medians over rounds and,
for the Canopy rows, the median of each round's ratio to the baseline. JSON
lines go to RESULTS/io_defaults_latest.jsonl (default bench/results).
"""

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from server_runs import (CLIENT_ENVIRONMENT, check_backend, cpu_used_ns,  # noqa: E402
                         process_cpu, start_server, stop_server)

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLES = {"http": "examples/http_hello", "echo": "examples/echo_server"}
NGINX_BODY = "Hello, World!"


def parse_arguments():
    parser = argparse.ArgumentParser(description="The examples at their defaults, A/B and peers.")
    parser.add_argument("build", type=Path)
    parser.add_argument("--baseline", default="HEAD~1")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", default="1,50")
    parser.add_argument("--workloads", default="http,echo")
    parser.add_argument("--rust-peers", type=Path,
                        default=ROOT / "build-release/rust-peers/release/canopy_rust_peers")
    parser.add_argument("--results", type=Path, default=ROOT / "bench/results")
    parser.add_argument("--no-build", action="store_true")
    arguments = parser.parse_args()
    arguments.connections = [int(n) for n in arguments.connections.split(",") if n]
    arguments.workloads = [w for w in arguments.workloads.split(",") if w]
    if any(w not in EXAMPLES for w in arguments.workloads) or not arguments.connections:
        parser.error("--workloads takes http and/or echo; --connections a list of numbers")
    return arguments


def git(*command):
    return subprocess.run(["git", "-C", str(ROOT), *command], capture_output=True, text=True,
                          check=True).stdout.strip()


def build_option(build, name):
    options = json.loads(subprocess.run(["meson", "introspect", str(build), "--buildoptions"],
                                        capture_output=True, text=True, check=True).stdout)
    return next(str(o["value"]).lower() for o in options if o["name"] == name)


def build_baseline(build, revision):
    """The examples at `revision`, built as BUILD_DIR is, in a worktree kept
    under BUILD_DIR (rebuilt only when the revision changes)."""
    commit = git("rev-parse", "--verify", f"{revision}^{{commit}}")
    source = build.resolve() / f"baseline-{commit[:12]}"
    if not source.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(source),
                        commit], check=True, stdout=sys.stderr, stderr=sys.stderr)
    baseline_build = source / "build"
    if not (baseline_build / "build.ninja").exists():
        subprocess.run(["meson", "setup", str(baseline_build), str(source),
                        f"--buildtype={build_option(build, 'buildtype')}",
                        f"-Db_lto={build_option(build, 'b_lto')}", "-Ddefault_library=static"],
                       check=True, stdout=sys.stderr)
    subprocess.run(["ninja", "-C", str(baseline_build), *EXAMPLES.values()], check=True,
                   stdout=sys.stderr)
    return commit, baseline_build


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


class Nginx:
    """nginx in a scratch directory on a port of its own, answering 200 with
    http_hello's body; SIGTERM stops it (master and workers). listen_options
    and server_directives go into the server block (tls_bench.py's ssl)."""

    def __init__(self, listen_options="", server_directives=""):
        self.scratch = tempfile.TemporaryDirectory()
        self.port = free_port()
        scratch = Path(self.scratch.name)
        (scratch / "nginx.conf").write_text(f"""
worker_processes auto;
daemon off;
pid {scratch}/nginx.pid;
error_log {scratch}/error.log;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 1000000000;
  client_body_temp_path {scratch}/body;
  proxy_temp_path {scratch}/proxy;
  fastcgi_temp_path {scratch}/fastcgi;
  uwsgi_temp_path {scratch}/uwsgi;
  scgi_temp_path {scratch}/scgi;
  server {{
    listen 127.0.0.1:{self.port}{listen_options};
    default_type text/plain;{server_directives}
    location / {{ return 200 "{NGINX_BODY}"; }}
  }}
}}
""")
        self.process = subprocess.Popen(["/usr/sbin/nginx", "-p", str(scratch), "-c",
                                         str(scratch / "nginx.conf")],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", int(self.port)), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("nginx did not start")

    def pids(self):
        found = [self.process.pid]
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                if stat[1] == str(self.process.pid):
                    found.append(int(entry.name))
        return found

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.scratch.cleanup()


def wrk(port, connections, seconds, url=None, environment=None):
    """url: the address (default http://127.0.0.1:PORT/); environment: wrk's."""
    run = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency",
                          url or f"http://127.0.0.1:{port}/"], capture_output=True, text=True,
                         timeout=seconds + 60, check=True, env=environment).stdout

    def micros(text):
        for unit, scale in (("us", 1.0), ("ms", 1e3), ("s", 1e6)):
            if text.endswith(unit):
                return float(text[:-len(unit)]) * scale
        raise ValueError(text)

    result = {"errors": 0}
    for line in run.splitlines():
        fields = line.split()
        if line.startswith("Requests/sec:"):
            result["requests_per_second"] = float(fields[1])
        elif len(fields) >= 2 and fields[0] in ("50%", "99%"):
            result[f"p{fields[0][:-1]}_us"] = micros(fields[1])
        elif "requests in" in line:
            result["requests"] = int(fields[0])
        elif line.strip().startswith("Socket errors:") or "Non-2xx" in line:
            result["errors"] += sum(int(f.strip(",")) for f in fields if f.strip(",").isdigit())
    if "requests_per_second" not in result:
        raise RuntimeError(f"wrk printed no rate: {run[-300:]!r}")
    return result


def canopy_load(build, port, connections, seconds):
    run = subprocess.run([str(build / "demo/canopy_load"), "--port", port, "--mode", "echo",
                          "--connections", str(connections), "--threads", "1", "--seconds",
                          str(seconds), "--message-bytes", "64", "--json"],
                         capture_output=True, text=True, timeout=seconds + 60, check=False,
                         env=CLIENT_ENVIRONMENT)
    return json.loads(run.stdout.strip().splitlines()[-1])


def servers(arguments, workload, baseline_build):
    build = arguments.build
    example = str(build / EXAMPLES[workload])
    plain = {k: v for k, v in os.environ.items() if k != "CANOPY_IO_BACKEND"}
    listed = {
        "canopy": ([example], plain, None),
        "canopy_epoll": ([example], {**plain, "CANOPY_IO_BACKEND": "epoll"}, "epoll"),
        "canopy_io_uring": ([example], {**plain, "CANOPY_IO_BACKEND": "io_uring"}, "io_uring"),
        "baseline": ([str(baseline_build / EXAMPLES[workload])], plain, None),
        "asio": ([str(build / "bench/asio_io_server"), "0", "--mode", workload, "--threads",
                  str(os.cpu_count() or 1), "--layout", "shared"], plain, None),
    }
    if arguments.rust_peers.exists():
        listed["tokio"] = ([str(arguments.rust_peers), "tokio_server", "--mode", workload],
                           plain, None)
        if workload == "http":
            listed["hyper"] = ([str(arguments.rust_peers), "hyper_server", "--mode", "http"],
                               plain, None)
    if workload == "http" and Path("/usr/sbin/nginx").exists():
        listed["nginx"] = (None, plain, None)
    return listed


def run_one(arguments, workload, connections, command, environment, backend):
    """(load result, server CPU ns, backend the Canopy server reported)."""
    nginx = None
    if command is None:
        nginx = Nginx()
        port, pids = nginx.port, nginx.pids()
    else:
        server, port = start_server(command, environment)
        pids = [server.pid]
    reported = None
    try:
        before = [process_cpu(pid) for pid in pids]
        if workload == "http":
            result = wrk(port, connections, arguments.seconds)
        else:
            result = canopy_load(arguments.build, port, connections, arguments.seconds)
        after = [process_cpu(pid) for pid in pids]
        cpu = sum(cpu_used_ns(b, a) for b, a in zip(before, after))
    finally:
        if nginx is not None:
            nginx.stop()
        else:
            output = stop_server(server)
            check_backend(backend, output, command)
            ran = [line.split()[1] for line in output.splitlines()
                   if line.startswith("io_backend ")]
            reported = ran[0] if ran else None
    return result, cpu, reported


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def main():
    arguments = parse_arguments()
    build = arguments.build.resolve()
    arguments.build = build
    if not arguments.no_build:
        subprocess.run(["ninja", "-C", str(build), *EXAMPLES.values(), "demo/canopy_load",
                        "bench/asio_io_server"], check=True, stdout=sys.stderr)
    if not shutil.which("wrk") and "http" in arguments.workloads:
        sys.exit("defaults_bench.py: wrk is not installed (./run.sh bench installs it)")
    commit, baseline_build = build_baseline(build, arguments.baseline)
    head = git("rev-parse", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    load_before = os.getloadavg()[0]
    lines, table = [], {}
    for round_index in range(arguments.rounds):
        for workload in arguments.workloads:
            listed = servers(arguments, workload, baseline_build)
            for connections in arguments.connections:
                names = list(listed)
                shift = (round_index + connections) % len(names)
                for name in names[shift:] + names[:shift]:
                    command, environment, backend = listed[name]
                    print(f"defaults bench: round {round_index + 1}, {workload} "
                          f"c={connections}, {name}", file=sys.stderr)
                    try:
                        result, cpu, reported = run_one(arguments, workload, connections,
                                                        command, environment, backend)
                    except (RuntimeError, OSError, ValueError, IndexError,
                            subprocess.SubprocessError, json.JSONDecodeError) as error:
                        print(f"defaults bench: {workload} on {name} failed: {error}",
                              file=sys.stderr)
                        continue
                    entry = {"bench": "io_defaults", "workload": f"{workload}_{connections}",
                             "server": name, "round": round_index + 1,
                             "requests_per_second": result["requests_per_second"],
                             "p50_us": result.get("p50_us"), "p99_us": result.get("p99_us"),
                             "server_cpu_us_per_request":
                                 cpu / 1000.0 / max(1, result.get("requests", 1)),
                             "errors": result.get("errors", 0), "io_backend": reported,
                             "seconds": arguments.seconds}
                    lines.append(entry)
                    table.setdefault(entry["workload"], {}).setdefault(name, []).append(entry)
    load_after = os.getloadavg()[0]
    toolchain = [subprocess.run(["c++", "--version"], capture_output=True,
                                text=True).stdout.splitlines()[0],
                 f"kernel {platform.release()}", f"{os.cpu_count()} hardware threads"]
    if arguments.rust_peers.exists():
        rustc = os.environ.get("CANOPY_BENCH_RUSTC") or str(Path.home() / ".cargo/bin/rustc")
        if not Path(rustc).exists():
            rustc = "/usr/bin/rustc"
        toolchain.append("tokio peer: " + subprocess.run([rustc, "--version"], capture_output=True,
                                                         text=True).stdout.strip())
    lines.append({"run": "io_defaults", "head": head + (" (uncommitted changes)" if dirty else ""),
                  "baseline": commit, "load_average_before": load_before,
                  "load_average_after": load_after, "toolchain": toolchain})
    arguments.results.mkdir(parents=True, exist_ok=True)
    with (arguments.results / "io_defaults_latest.jsonl").open("w") as output:
        for entry in lines:
            output.write(json.dumps(entry) + "\n")

    print(f"\nThe examples at their defaults (head {head[:10]}{' +changes' if dirty else ''}, "
          f"baseline {commit[:10]} = {arguments.baseline}); {arguments.rounds} rounds of "
          f"{arguments.seconds} s, medians; load generator on the same cores")
    print(f"{'workload':<9} {'server':<16} {'backend':<9} {'req/s':>10} {'p50 us':>8} "
          f"{'p99 us':>9} {'CPU us/req':>10} {'req/s vs base':>13} {'CPU vs base':>11}")
    for workload, rows in table.items():
        base = {e["round"]: e for e in rows.get("baseline", [])}
        for name, entries in rows.items():
            def ratio(key, entries=entries):
                return median([e[key] / base[e["round"]][key] for e in entries
                               if e["round"] in base and base[e["round"]][key]])
            backend = entries[-1]["io_backend"] or "-"
            rate, cpu = ratio("requests_per_second"), ratio("server_cpu_us_per_request")
            p50, p99 = median([e["p50_us"] for e in entries]), median([e["p99_us"] for e in entries])
            print(f"{workload:<9} {name:<16} {backend:<9} "
                  f"{median([e['requests_per_second'] for e in entries]):>10,.0f} "
                  f"{p50 if p50 is not None else 0:>8.0f} {p99 if p99 is not None else 0:>9.0f} "
                  f"{median([e['server_cpu_us_per_request'] for e in entries]):>10.2f} "
                  f"{(f'{rate:.3f}' if rate and name.startswith(('canopy', 'base')) else '-'):>13} "
                  f"{(f'{cpu:.3f}' if cpu and name.startswith(('canopy', 'base')) else '-'):>11}")
    for line in toolchain:
        print(line)
    print(f"load average before {load_before:.2f}, after {load_after:.2f}; errors: "
          f"{sum(e.get('errors', 0) for e in lines)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
