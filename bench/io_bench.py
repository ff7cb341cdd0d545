#!/usr/bin/python3
"""The I/O benchmarks: Canopy on both I/O backends against Boost.Asio, driven by
the same load generator.

usage: io_bench.py BUILD_DIR [--rounds K] [--seconds S] [--server-threads T]
                   [--client-threads T] [--storm-threads T] [--rust-peers PATH]
                   [--syscall-seconds S] [--servers-only] [--only-storm] [--no-build]

Every Canopy server runs twice, with CANOPY_IO_BACKEND=epoll and with
CANOPY_IO_BACKEND=io_uring (its exit line "io_backend ..." is checked); the
load generator (itself a Canopy program) always runs on epoll, so the
client is the same for every server. Builds (unless --no-build) and runs,
K rounds over, interleaved (each round starts the servers in another order):
  http_50       examples/http_hello vs bench/asio_io_server --mode http, under
                demo/canopy_load with 50 keep-alive connections;
  http_1        the same with 1 connection;
  http_conn_50  the same servers, a connection per request (canopy_load
                --mode http-close: 50 clients, each connects, sends one
                request with Connection: close, reads the answer, closes);
  echo_50       bench/canopy_echo_server vs asio_io_server --mode echo, 64-byte
                messages, 50 connections;
each with requests (round trips) per second, p50/p99/p99.9 latency and
server CPU us per request: the server process's CPU time, summed over its
threads from /proc/PID/task/*/schedstat (from /proc/PID/stat when a thread
came or went during the run, as io_uring's io-wq workers may). After the
rounds, one short run per server and workload (--syscall-seconds, default
1, no warm-up) under `perf stat -e raw_syscalls:sys_enter -p PID` (or
`strace -c -f -p PID` where perf cannot count) gives system calls per
request: the count over the requests that run served.
  timers    bench/timer_bench: lateness of 1 ms sleeps (p50 / p99) idle and
            with every worker busy, and 10^6 timers armed then cancelled.
  storm     bench/timer_bench --test storm (Canopy, Asio) and canopy_rust_peers
            timer_storm (tokio): 10^5 and 10^6 sleeps of random lengths
            (0..1000 ms), half of them cancelled shortly after they start,
            on --storm-threads workers; lateness p50/p99/max of the sleeps
            that fired, time until the last one fired, peak resident set
            (each run a process of its own). Printed as a table of its own
            (medians over rounds) with the toolchain under it.
--servers-only skips the timers and the storm.
The Asio server runs in both of its layouts (one io_context per thread with
SO_REUSEPORT listeners, or one shared io_context); the table's Asio column
is the better layout of each round (by requests/s), and both are kept in
the JSON lines. Servers get T threads, the load generator the other
hardware threads (default: half each, at least one).

Every JSON line goes to results/io_latest.jsonl (the previous file becomes
results/io_previous.jsonl; --results DIR puts both in DIR), the system-call
counts as lines with "syscalls_per_request", and one "run" line with the
load average before and after. The server table shows medians over rounds
and, per metric, the median over rounds of that round's io_uring / epoll and
io_uring / Asio ratios (drift between rounds cancels); "better" says which
side of 1 is better. The toolchain (compiler, kernel, liburing, Boost) is
printed under it.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "io"))
from server_runs import count_syscalls, run_server  # noqa: E402  (bench/io/server_runs.py)

RESULTS_DIRECTORY = Path(__file__).resolve().parent / "results"
TARGETS = ["examples/http_hello", "demo/canopy_load", "bench/asio_io_server",
           "bench/canopy_echo_server", "bench/timer_bench"]


def parse_arguments():
    parser = argparse.ArgumentParser(description="Canopy vs Boost.Asio on I/O workloads.")
    parser.add_argument("build", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    hardware = os.cpu_count() or 1
    parser.add_argument("--server-threads", type=int, default=max(1, hardware // 2))
    parser.add_argument("--client-threads", type=int, default=max(1, hardware - hardware // 2))
    parser.add_argument("--storm-threads", type=int, default=2,
                        help="workers of every peer in the timer storm (default 2)")
    parser.add_argument("--rust-peers", type=Path, default=None,
                        help="canopy_rust_peers for tokio's storm "
                             "(default: BUILD_DIR/rust-peers/release/canopy_rust_peers)")
    parser.add_argument("--only-storm", action="store_true",
                        help="run the timer storm only")
    parser.add_argument("--servers-only", action="store_true",
                        help="run the server workloads only (no timers, no storm)")
    parser.add_argument("--syscall-seconds", type=float, default=1.0,
                        help="length of each system-call counting run (0: none)")
    parser.add_argument("--no-build", action="store_true")
    parser.add_argument("--results", type=Path, default=RESULTS_DIRECTORY,
                        help="directory of io_latest.jsonl (default: bench/results)")
    arguments = parser.parse_args()
    if arguments.rounds < 1 or not 0 < arguments.seconds <= 60:
        parser.error("--rounds >= 1 and --seconds in (0, 60]")
    if not 0 <= arguments.syscall_seconds <= 60:
        parser.error("--syscall-seconds in [0, 60]")
    if arguments.servers_only and arguments.only_storm:
        parser.error("--servers-only and --only-storm exclude each other")
    return arguments


def server_workloads(build, arguments):
    """[(workload, {peer: (command, backend or None)}, load command)]."""
    threads = str(arguments.server_threads)
    asio = str(build / "bench/asio_io_server")

    def peers(canopy_program, mode):
        canopy = [str(build / canopy_program), "0", "--threads", threads]
        return {
            "canopy_epoll": (canopy, "epoll"),
            "canopy_io_uring": (canopy, "io_uring"),
            "asio_per_thread": ([asio, "0", "--mode", mode, "--threads", threads, "--layout",
                                 "per-thread"], None),
            "asio_shared": ([asio, "0", "--mode", mode, "--threads", threads, "--layout",
                             "shared"], None),
        }

    http = peers("examples/http_hello", "http")
    echo = peers("bench/canopy_echo_server", "echo")
    load = [str(build / "demo/canopy_load"), "--seconds", str(arguments.seconds), "--threads",
            str(arguments.client_threads)]
    return [
        ("http_50", http, load + ["--connections", "50"]),
        ("http_1", http, load + ["--connections", "1"]),
        ("http_conn_50", http, load + ["--connections", "50", "--mode", "http-close"]),
        ("echo_50", echo, load + ["--connections", "50", "--mode", "echo",
                                  "--message-bytes", "64"]),
    ]


def timer_runs(build, arguments):
    binary = str(build / "bench/timer_bench")
    threads = str(arguments.server_threads)
    runs = []
    for test in ("lateness", "lateness_loaded", "insert_cancel"):
        for peer in ("canopy", "asio"):
            runs.append((test, peer, [binary, "--peer", peer, "--test", test, "--threads",
                                      threads, "--samples", "2000"]))
    return runs


STORM_SIZES = (100_000, 1_000_000)
STORM_PEERS = ("canopy", "asio", "tokio")
STORM_METRICS = (("p50_us", "p50 late us"), ("p99_us", "p99 late us"), ("max_us", "max late us"),
                 ("all_fired_ms", "all fired ms"), ("peak_rss_mib", "peak MiB"),
                 ("spawn_ms", "spawning ms"), ("p99_after_spawn_us", "p99 after sp."))


def storm_runs(build, arguments):
    binary = str(build / "bench/timer_bench")
    # ./run.sh bench names a canopy_rust_peers built with the newest rustc.
    rust = (os.environ.get("CANOPY_STORM_RUST_PEERS") or arguments.rust_peers
            or build / "rust-peers/release/canopy_rust_peers")
    threads = str(arguments.storm_threads)
    runs = []
    for timers in STORM_SIZES:
        for peer in STORM_PEERS:
            if peer == "tokio":
                command = [str(rust), "timer_storm", "--timers", str(timers), "--threads", threads]
            else:
                command = [binary, "--peer", peer, "--test", "storm", "--timers", str(timers),
                           "--threads", threads]
            runs.append((timers, peer, command))
    return runs


def command_version(command):
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=30,
                              check=False).stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "unknown"


def cxx_toolchain(build):
    """The C++ compiler of BUILD_DIR, its build type and Boost's version."""
    compiler = "unknown"
    try:
        # The compiler of the build's first C++ command (compile_commands.json).
        commands = json.loads((build / "compile_commands.json").read_text())
        compiler = command_version([commands[0]["command"].split()[0], "--version"])
    except (OSError, ValueError, IndexError, KeyError):
        pass
    boost = "unknown"
    try:
        for line in Path("/usr/include/boost/version.hpp").read_text().splitlines():
            if line.startswith("#define BOOST_LIB_VERSION"):
                boost = line.split('"')[1].replace("_", ".")
    except (OSError, IndexError):
        pass
    buildtype = "?"
    try:
        options = json.loads((build / "meson-info/intro-buildoptions.json").read_text())
        values = {option["name"]: option["value"] for option in options}
        buildtype = f"{values.get('buildtype')}, b_lto={values.get('b_lto')}"
    except (OSError, ValueError, KeyError):
        pass
    return f"{compiler} ({buildtype}), Boost.Asio {boost}"


def server_toolchain(build):
    """The lines under the server table: compiler, kernel, liburing."""
    liburing = command_version(["pkg-config", "--modversion", "liburing"])
    package = command_version(["dpkg-query", "-W", "-f", "${Version}", "liburing-dev"])
    return [f"Canopy, Asio: {cxx_toolchain(build)}",
            f"kernel {platform.release()}, liburing {liburing} (liburing-dev {package})"]


def storm_toolchain(build, arguments):
    """One line per side: the C++ compiler of BUILD_DIR and Boost, the rustc
    that built canopy_rust_peers and the tokio it was built against."""
    rustc = (os.environ.get("CANOPY_STORM_RUSTC") or os.environ.get("CANOPY_BENCH_RUSTC")
             or "/usr/bin/rustc")
    tokio = "unknown"
    lock = Path(__file__).resolve().parent / "peers/rust/Cargo.lock"
    try:
        lines = lock.read_text().splitlines()
        for index, line in enumerate(lines):
            if line == 'name = "tokio"' and index + 1 < len(lines):
                tokio = lines[index + 1].split('"')[1]
    except (OSError, IndexError):
        pass
    return [f"Canopy, Asio: {cxx_toolchain(build)}",
            f"tokio {tokio}: {command_version([rustc, '--version'])} ({rustc}), release, LTO"]


def run_storm(build, arguments, lines):
    """The timer storm, interleaved (canopy, asio, tokio per size) for every
    round; returns {(timers, peer): [result per round]}."""
    results = {}
    for round_index in range(arguments.rounds):
        print(f"io bench: timer storm, round {round_index + 1} of {arguments.rounds}",
              file=sys.stderr)
        for timers, peer, command in storm_runs(build, arguments):
            try:
                output = subprocess.run(command, capture_output=True, text=True, timeout=300,
                                        check=True).stdout
                result = json.loads(output.strip().splitlines()[-1])
            except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired,
                    json.JSONDecodeError, IndexError) as error:
                print(f"io bench: timer storm {timers} on {peer} failed: {error}", file=sys.stderr)
                continue
            result["round"] = round_index + 1
            lines.append(result)
            results.setdefault((timers, peer), []).append(result)
    return results


def print_storm(results, build, arguments):
    print()
    print(f"Timer storm: N sleeps of 0..1000 ms (uniform), every other one cancelled; "
          f"{arguments.storm_threads} workers each; medians over {arguments.rounds} round(s)")
    header = f"{'timers':>9} {'peer':<7}" + "".join(f" {title:>13}" for _, title in STORM_METRICS)
    print(header + f" {'fired':>8}")
    for timers in STORM_SIZES:
        for peer in STORM_PEERS:
            runs = results.get((timers, peer), [])
            cells = []
            for key, _ in STORM_METRICS:
                value = median([run.get(key) for run in runs])
                cells.append(f" {value:13.1f}" if value is not None else f" {'n/a':>13}")
            fired = median([run.get("fired") for run in runs])
            print(f"{timers:>9} {peer:<7}" + "".join(cells) +
                  (f" {fired:8.0f}" if fired is not None else f" {'n/a':>8}"))
    for line in storm_toolchain(build, arguments):
        print(f"  {line}")


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


SERVER_METRICS = ("requests_per_second", "p50_us", "p99_us", "p999_us",
                  "server_cpu_us_per_request", "syscalls_per_request", "errors")
HIGHER_BETTER = {"requests_per_second"}


def run_server_rounds(build, arguments, lines, round_index, table):
    """One round of every server workload; table[(workload, metric)][round]
    gets {"epoll", "io_uring", "asio"} (Asio's better layout by requests/s)."""
    for workload, peers, load in server_workloads(build, arguments):
        names = list(peers)
        shift = round_index % len(names)  # another start order each round
        measured = {}
        for peer in names[shift:] + names[:shift]:
            try:
                result, cpu_ns = run_server(peers[peer], load)
            except (RuntimeError, OSError, json.JSONDecodeError, IndexError,
                    subprocess.TimeoutExpired) as error:
                print(f"io bench: {workload} on {peer} failed: {error}", file=sys.stderr)
                continue
            requests = max(1, result["requests"])
            entry = {"peer": peer, "workload": workload, "round": round_index + 1,
                     "requests_per_second": result["requests_per_second"],
                     "server_cpu_us_per_request": cpu_ns / 1000.0 / requests,
                     "p50_us": result["p50_us"], "p99_us": result["p99_us"],
                     "p999_us": result["p999_us"], "errors": result["errors"],
                     "server_threads": arguments.server_threads,
                     "client_threads": arguments.client_threads,
                     "seconds": arguments.seconds}
            lines.append(entry)
            measured[peer] = entry
        layouts = [measured[p] for p in ("asio_per_thread", "asio_shared") if p in measured]
        columns = {"epoll": measured.get("canopy_epoll"),
                   "io_uring": measured.get("canopy_io_uring"),
                   "asio": max(layouts, key=lambda e: e["requests_per_second"]) if layouts
                   else None}
        for key in ("requests_per_second", "p50_us", "p99_us", "p999_us",
                    "server_cpu_us_per_request", "errors"):
            for column, entry in columns.items():
                if entry is not None:
                    table.setdefault((workload, key), {}).setdefault(round_index, {})[column] = \
                        entry[key]
        if columns["asio"] is not None:
            table.setdefault((workload, "asio layout"), {})[round_index] = columns["asio"]["peer"]


def run_syscall_counts(build, arguments, lines, table):
    """One short counted run per server and workload; the Asio column takes
    the layout that was better in most rounds."""
    for workload, peers, load in server_workloads(build, arguments):
        layouts = list(table.get((workload, "asio layout"), {}).values())
        best = max(set(layouts), key=layouts.count) if layouts else "asio_per_thread"
        for peer, column in (("canopy_epoll", "epoll"), ("canopy_io_uring", "io_uring"),
                             (best, "asio")):
            try:
                calls, requests, tool, detail = count_syscalls(peers[peer], load,
                                                               arguments.syscall_seconds)
            except (RuntimeError, OSError, json.JSONDecodeError, IndexError,
                    subprocess.TimeoutExpired) as error:
                print(f"io bench: counting {workload} on {peer} failed: {error}", file=sys.stderr)
                continue
            per_request = calls / requests
            lines.append({"peer": peer, "workload": workload, "counter": tool,
                          "syscalls": calls, "requests": requests,
                          "syscalls_per_request": per_request,
                          "per_request": {name: count / requests
                                          for name, count in detail.items() if count},
                          "seconds": arguments.syscall_seconds})
            table.setdefault((workload, "syscalls_per_request"), {}).setdefault(0, {})[column] = \
                per_request


def print_server_table(table, build, arguments, load_before, load_after):
    print()
    print(f"I/O servers, {arguments.server_threads} server thread(s), "
          f"{arguments.client_threads} load thread(s), {arguments.rounds} round(s) of "
          f"{arguments.seconds:g} s; medians; a ratio is the median of each round's ratio; "
          f"Asio = its better layout per round")
    print(f"{'workload':<13} {'metric':<26} {'epoll':>10} {'io_uring':>10} {'Asio':>10} "
          f"{'uring/epoll':>11} {'uring/Asio':>10}  better")

    def show(value, width=10):
        return f"{value:{width}.2f}" if value is not None else f"{'n/a':>{width}}"

    workloads = []
    for workload, _ in table:
        if workload not in workloads:
            workloads.append(workload)
    for workload in workloads:
        layouts = list(table.get((workload, "asio layout"), {}).values())
        for metric in SERVER_METRICS:
            rounds = table.get((workload, metric))
            if not rounds:
                continue
            values = {column: median([r.get(column) for r in rounds.values()])
                      for column in ("epoll", "io_uring", "asio")}
            ratios = {peer: median([r["io_uring"] / r[peer] for r in rounds.values()
                                    if r.get("io_uring") is not None and r.get(peer)])
                      for peer in ("epoll", "asio")}
            name = metric + (" (1 run)" if metric == "syscalls_per_request" else "")
            print(f"{workload:<13} {name:<26} {show(values['epoll'])} {show(values['io_uring'])} "
                  f"{show(values['asio'])} {show(ratios['epoll'], 11)} {show(ratios['asio'])}  "
                  f"{'> 1' if metric in HIGHER_BETTER else '< 1'}")
        if layouts:
            print(f"{workload:<13} {'asio layout (per round)':<26} {', '.join(layouts)}")
    print(f"load average (1 min) before {load_before:.2f}, after {load_after:.2f}; "
          f"{os.cpu_count()} hardware threads")
    for line in server_toolchain(build):
        print(f"  {line}")


def print_timers(per_round, arguments):
    print()
    print(f"Timers, {arguments.server_threads} thread(s), {arguments.rounds} round(s) "
          f"(medians; ratio = median of each round's Canopy / Asio)")
    print(f"{'workload':<24} {'metric':<28} {'Canopy':>10} {'Asio':>10} {'ratio':>7}  better")
    for (workload, metric), rounds in per_round.items():
        canopy_median = median([r.get("canopy") for r in rounds.values()])
        asio_median = median([r.get("asio") for r in rounds.values()])
        ratio = median([r["canopy"] / r["asio"] for r in rounds.values()
                        if r.get("canopy") is not None and r.get("asio")])

        def show(value):
            return f"{value:10.1f}" if value is not None else f"{'n/a':>10}"
        print(f"{workload:<24} {metric:<28} {show(canopy_median)} {show(asio_median)} "
              f"{(f'{ratio:7.2f}' if ratio is not None else '    n/a')}  < 1")


def run_timers(build, arguments, lines, round_index, per_round):
    def record(metric, peer, value):
        per_round.setdefault(metric, {}).setdefault(round_index, {})[peer] = value

    for test, peer, command in timer_runs(build, arguments):
        try:
            output = subprocess.run(command, capture_output=True, text=True, timeout=300,
                                    check=True).stdout
            result = json.loads(output.strip().splitlines()[-1])
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired,
                json.JSONDecodeError, IndexError) as error:
            print(f"io bench: timers {test} on {peer} failed: {error}", file=sys.stderr)
            continue
        result["round"] = round_index + 1
        lines.append(result)
        if test == "insert_cancel":
            record(("timers_insert_cancel", "ns_per_timer"), peer, result["value"])
            record(("timers_insert_cancel", "bytes_per_pending_timer"), peer,
                   result["bytes_per_pending_timer"])
        else:
            record((result["workload"], "p50_us"), peer, result["value"])
            record((result["workload"], "p99_us"), peer, result["p99"])


def main():
    arguments = parse_arguments()
    build = arguments.build
    if not arguments.no_build:
        targets = (["bench/timer_bench"] if arguments.only_storm else
                   [t for t in TARGETS if t != "bench/timer_bench"] if arguments.servers_only
                   else TARGETS)
        subprocess.run(["ninja", "-C", str(build)] + targets, check=True,
                       stdout=sys.stderr)
    arguments.results.mkdir(parents=True, exist_ok=True)
    latest = arguments.results / "io_latest.jsonl"
    if latest.exists():
        latest.replace(arguments.results / "io_previous.jsonl")
    load_before = os.getloadavg()[0]
    lines = []
    servers, timers = {}, {}
    storm = {} if arguments.servers_only else run_storm(build, arguments, lines)
    for round_index in range(0 if arguments.only_storm else arguments.rounds):
        print(f"io bench: round {round_index + 1} of {arguments.rounds}", file=sys.stderr)
        run_server_rounds(build, arguments, lines, round_index, servers)
        if not arguments.servers_only:
            run_timers(build, arguments, lines, round_index, timers)
    if not arguments.only_storm and arguments.syscall_seconds > 0:
        print("io bench: system-call counts", file=sys.stderr)
        run_syscall_counts(build, arguments, lines, servers)
    load_after = os.getloadavg()[0]
    lines.append({"run": "io_bench", "load_average_before": load_before,
                  "load_average_after": load_after, "hardware_threads": os.cpu_count(),
                  "toolchain": server_toolchain(build)})
    with latest.open("w") as output:
        for entry in lines:
            output.write(json.dumps(entry) + "\n")

    if not arguments.servers_only:
        print_storm(storm, build, arguments)
    if arguments.only_storm:
        return 0
    print_server_table(servers, build, arguments, load_before, load_after)
    if timers:
        print_timers(timers, arguments)
    errors = sum(entry.get("errors", 0) for entry in lines)
    print(f"load-generator errors over every run: {errors}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
