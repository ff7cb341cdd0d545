#!/usr/bin/python3
"""The I/O benchmarks: Canopy against Boost.Asio, driven by the same load generator.

usage: io_bench.py BUILD_DIR [--rounds K] [--seconds S] [--server-threads T]
                   [--client-threads T] [--storm-threads T] [--rust-peers PATH]
                   [--only-storm] [--no-build]

Builds (unless --no-build) and runs, K rounds over, interleaved:
  http_50   examples/http_hello vs bench/asio_io_server --mode http, under
            demo/canopy_load with 50 keep-alive connections: requests/s,
            server CPU us per request (the server process's CPU time, summed
            over its threads from /proc/PID/task/*/schedstat), p99;
  http_1    the same with 1 connection: p50 round trip;
  echo_50   bench/canopy_echo_server vs asio_io_server --mode echo, 64-byte
            messages, 50 connections: round trips/s, server CPU per round trip;
  timers    bench/timer_bench: lateness of 1 ms sleeps (p50 / p99) idle and
            with every worker busy, and 10^6 timers armed then cancelled.
  storm     bench/timer_bench --test storm (Canopy, Asio) and canopy_rust_peers
            timer_storm (tokio): 10^5 and 10^6 sleeps of random lengths
            (0..1000 ms), half of them cancelled shortly after they start,
            on --storm-threads workers; lateness p50/p99/max of the sleeps
            that fired, time until the last one fired, peak resident set
            (each run a process of its own). Printed as a table of its own
            (medians over rounds) with the toolchain under it.
The Asio server runs in both of its layouts (one io_context per thread with
SO_REUSEPORT listeners, or one shared io_context); the table's Asio column
is the better layout of each round (by requests/s), and both are kept in
the JSON lines. Servers get T threads, the load generator the other
hardware threads (default: half each, at least one).

Every JSON line goes to results/io_latest.jsonl (the previous file becomes
results/io_previous.jsonl; --results DIR puts both in DIR). The table shows
medians over rounds and, per metric, the median over rounds of that round's
Canopy / Asio ratio (drift between rounds cancels); "better" says which side
of 1 is better.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

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
    parser.add_argument("--no-build", action="store_true")
    parser.add_argument("--results", type=Path, default=RESULTS_DIRECTORY,
                        help="directory of io_latest.jsonl (default: bench/results)")
    arguments = parser.parse_args()
    if arguments.rounds < 1 or not 0 < arguments.seconds <= 60:
        parser.error("--rounds >= 1 and --seconds in (0, 60]")
    return arguments


def process_cpu_ns(pid):
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def run_server(command, load_command):
    """Start a server, run the load against it, return (load JSON, server CPU ns)."""
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        if not line.startswith("listening on 127.0.0.1:"):
            raise RuntimeError(f"{command[0]} did not start: {line!r}")
        port = line.rsplit(":", 1)[1].strip()
        cpu_before = process_cpu_ns(server.pid)
        load = subprocess.run(load_command + ["--port", port, "--json"], capture_output=True,
                              text=True, timeout=120, check=False)
        cpu_used = process_cpu_ns(server.pid) - cpu_before
        result = json.loads(load.stdout.strip().splitlines()[-1])
        if load.returncode != 0 and result.get("errors", 0) == 0:
            raise RuntimeError(f"canopy_load failed: {load.stderr.strip()}")
        return result, cpu_used
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def server_workloads(build, arguments):
    threads = str(arguments.server_threads)
    canopy_http = [str(build / "examples/http_hello"), "0", "--threads", threads]
    canopy_echo = [str(build / "bench/canopy_echo_server"), "0", "--threads", threads]
    asio = str(build / "bench/asio_io_server")
    peers_http = {
        "canopy": canopy_http,
        "asio_per_thread": [asio, "0", "--mode", "http", "--threads", threads, "--layout",
                            "per-thread"],
        "asio_shared": [asio, "0", "--mode", "http", "--threads", threads, "--layout", "shared"],
    }
    peers_echo = {
        "canopy": canopy_echo,
        "asio_per_thread": [asio, "0", "--mode", "echo", "--threads", threads, "--layout",
                            "per-thread"],
        "asio_shared": [asio, "0", "--mode", "echo", "--threads", threads, "--layout", "shared"],
    }
    load = [str(build / "demo/canopy_load"), "--seconds", str(arguments.seconds), "--threads",
            str(arguments.client_threads)]
    return [
        ("http_50", peers_http, load + ["--connections", "50"]),
        ("http_1", peers_http, load + ["--connections", "1"]),
        ("echo_50", peers_echo, load + ["--connections", "50", "--mode", "echo",
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


def storm_toolchain(build, arguments):
    """One line per side: the C++ compiler of BUILD_DIR and Boost, the rustc
    that built canopy_rust_peers and the tokio it was built against."""
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
    return [f"Canopy, Asio: {compiler} ({buildtype}), Boost.Asio {boost}",
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


def main():
    arguments = parse_arguments()
    build = arguments.build
    if not arguments.no_build:
        targets = ["bench/timer_bench"] if arguments.only_storm else TARGETS
        subprocess.run(["ninja", "-C", str(build)] + targets, check=True,
                       stdout=sys.stderr)
    arguments.results.mkdir(parents=True, exist_ok=True)
    latest = arguments.results / "io_latest.jsonl"
    if latest.exists():
        latest.replace(arguments.results / "io_previous.jsonl")
    lines = []
    # rows[(metric)] -> list per round of (canopy, asio)
    per_round = {}

    def record(metric, round_index, peer, value):
        per_round.setdefault(metric, {}).setdefault(round_index, {})[peer] = value

    storm = run_storm(build, arguments, lines)
    for round_index in range(0 if arguments.only_storm else arguments.rounds):
        print(f"io bench: round {round_index + 1} of {arguments.rounds}", file=sys.stderr)
        for workload, peers, load in server_workloads(build, arguments):
            measured = {}
            for peer, command in peers.items():
                try:
                    result, cpu_ns = run_server(command, load)
                except (RuntimeError, json.JSONDecodeError, IndexError,
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
            asio_layouts = [measured[p] for p in ("asio_per_thread", "asio_shared") if p in measured]
            if "canopy" not in measured or not asio_layouts:
                continue
            best_asio = max(asio_layouts, key=lambda e: e["requests_per_second"])
            for key in ("requests_per_second", "server_cpu_us_per_request", "p50_us", "p99_us",
                        "errors"):
                record((workload, key), round_index, "canopy", measured["canopy"][key])
                record((workload, key), round_index, "asio", best_asio[key])
            record((workload, "asio layout"), round_index, "asio", best_asio["peer"])
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
                record(("timers_insert_cancel", "ns_per_timer"), round_index, peer, result["value"])
                record(("timers_insert_cancel", "bytes_per_pending_timer"), round_index, peer,
                       result["bytes_per_pending_timer"])
            else:
                record((result["workload"], "p50_us"), round_index, peer, result["value"])
                record((result["workload"], "p99_us"), round_index, peer, result["p99"])

    with latest.open("w") as output:
        for entry in lines:
            output.write(json.dumps(entry) + "\n")

    print_storm(storm, build, arguments)
    if arguments.only_storm:
        return 0
    higher_better = {"requests_per_second"}
    print()
    print(f"I/O workloads, {arguments.server_threads} server thread(s), "
          f"{arguments.client_threads} load thread(s), {arguments.rounds} round(s) of "
          f"{arguments.seconds:g} s (medians; ratio = median of each round's Canopy / Asio)")
    print(f"{'workload':<24} {'metric':<28} {'Canopy':>10} {'Asio':>10} {'ratio':>7}  better")
    for (workload, metric), rounds in per_round.items():
        if metric == "asio layout":
            layouts = [r.get("asio") for r in rounds.values()]
            print(f"{workload:<24} {'asio layout (per round)':<28} {', '.join(layouts)}")
            continue
        canopy_values = [r.get("canopy") for r in rounds.values()]
        asio_values = [r.get("asio") for r in rounds.values()]
        ratios = [r["canopy"] / r["asio"] for r in rounds.values()
                  if r.get("canopy") is not None and r.get("asio")]
        canopy_median, asio_median = median(canopy_values), median(asio_values)
        ratio = median(ratios)
        def show(value):
            return f"{value:10.1f}" if value is not None else f"{'n/a':>10}"
        print(f"{workload:<24} {metric:<28} {show(canopy_median)} {show(asio_median)} "
              f"{(f'{ratio:7.2f}' if ratio is not None else '    n/a')}  "
              f"{'> 1' if metric in higher_better else '< 1'}")
    errors = sum(entry.get("errors", 0) for entry in lines)
    print(f"load-generator errors over every run: {errors}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
