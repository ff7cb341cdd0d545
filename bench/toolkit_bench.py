#!/usr/bin/python3
"""The task toolkit beside tokio (issue 31): channels and the async mutex.

usage: toolkit_bench.py CANOPY_BENCH [--rust-peers PATH] [--rustc PATH]
                        [--rounds K] [--threads N] [--reps R] [--timeout S]
                        [--results DIR]

Runs canopy_bench's toolkit workloads (channel_ping_pong,
channel_throughput, mutex_contention) on Canopy and on tokio
(canopy_rust_peers --peer tokio: tokio::sync::mpsc and tokio::sync::Mutex),
each on --threads workers (default nproc) and on 1, interleaved: every
round runs every (workload, threads) on Canopy, then on tokio, K rounds
over (default 3). Prints a table of medians over rounds with the ratio
canopy / tokio (the median over rounds of each round's own ratio, which
cancels the machine's drift between rounds), the same as operations per
second, the toolchain of each side and the load average before and after;
writes every JSON line to DIR/toolkit_latest.jsonl (the previous one kept as
toolkit_previous.jsonl). Lower is better (time per operation).

The Rust program is --rust-peers, else $CANOPY_TOOLKIT_RUST_PEERS (which
./run.sh bench sets to the build with the newest rustc on the machine),
else BUILD_DIR/rust-peers/release/canopy_rust_peers beside CANOPY_BENCH.
--rustc (else $CANOPY_TOOLKIT_RUSTC, else /usr/bin/rustc) is only printed.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from run_bench import (RESULTS_DIRECTORY, TOOLKIT_WORKLOADS, format_number, positive_integer,
                       progress, run_one)

TOOLKIT_PEERS = ("canopy", "tokio")


def parse_arguments():
    parser = argparse.ArgumentParser(description="Canopy's channels and mutex beside tokio's.")
    parser.add_argument("binary", type=Path, help="path of the built canopy_bench")
    parser.add_argument("--rust-peers", type=Path, default=None,
                        help="canopy_rust_peers to run tokio from")
    parser.add_argument("--rustc", default=None, help="the rustc that built it (printed only)")
    parser.add_argument("--rounds", type=positive_integer, default=3)
    parser.add_argument("--threads", type=positive_integer, default=os.cpu_count() or 1,
                        help="workers of both runtimes; 1 worker runs too (default: nproc)")
    parser.add_argument("--reps", type=positive_integer, default=None)
    parser.add_argument("--timeout", type=positive_integer, default=300)
    parser.add_argument("--results", type=Path, default=RESULTS_DIRECTORY)
    arguments = parser.parse_args()
    if arguments.rust_peers is None:
        named = os.environ.get("CANOPY_TOOLKIT_RUST_PEERS")
        arguments.rust_peers = (Path(named) if named else
                                arguments.binary.resolve().parent.parent / "rust-peers" / "release"
                                / "canopy_rust_peers")
    if arguments.rustc is None:
        arguments.rustc = os.environ.get("CANOPY_TOOLKIT_RUSTC") or "/usr/bin/rustc"
    return arguments


def first_line(command):
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=30,
                              check=False).stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "unknown"


def load_average():
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except (OSError, IndexError):
        return "unknown"


def toolchains(arguments):
    """One line per side: the C++ compiler and options of canopy_bench's
    build folder, and the rustc that built canopy_rust_peers."""
    build = arguments.binary.resolve().parent.parent
    compiler, options = "unknown", "?"
    try:
        commands = json.loads((build / "compile_commands.json").read_text())
        compiler = first_line([commands[0]["command"].split()[0], "--version"])
        values = {option["name"]: option["value"] for option in
                  json.loads((build / "meson-info/intro-buildoptions.json").read_text())}
        options = f"{values.get('buildtype')}, b_lto={values.get('b_lto')}"
    except (OSError, ValueError, IndexError, KeyError):
        pass
    return [f"canopy: {compiler} ({options})",
            f"tokio 1.24 (Debian's librust-tokio-dev sources): "
            f"{first_line([arguments.rustc, '--version'])} ({arguments.rustc}), release, LTO"]


def thread_counts(arguments):
    return sorted({arguments.threads, 1}, reverse=True)


def run_rounds(arguments, results_file):
    records = []
    with results_file.open("w") as output:
        for round_number in range(1, arguments.rounds + 1):
            for workload in TOOLKIT_WORKLOADS:
                for threads in thread_counts(arguments):
                    for peer in TOOLKIT_PEERS:
                        progress(f"[toolkit round {round_number}/{arguments.rounds}] {workload} "
                                 f"--threads {threads}: {peer} ...")
                        record, failure = run_one(arguments, workload, peer, threads)
                        if failure is not None:
                            progress(f"    {failure}")
                            continue
                        record["round"] = round_number
                        records.append(record)
                        output.write(json.dumps(record) + "\n")
                        output.flush()
    return records


def print_table(arguments, records, loads):
    cells = {}
    for record in records:
        key = (record["workload"], record["threads"])
        cells.setdefault(key, {}).setdefault(record["round"], {})[record["peer"]] = record["value"]
    units = {record["workload"]: record["unit"] for record in records}
    lines = [["workload", "unit", "threads", "canopy", "tokio", "ratio", "canopy /s", "tokio /s"]]
    for workload in TOOLKIT_WORKLOADS:
        for threads in thread_counts(arguments):
            rounds = cells.get((workload, threads), {})
            medians = {}
            for peer in TOOLKIT_PEERS:
                values = [values[peer] for values in rounds.values() if peer in values]
                medians[peer] = statistics.median(values) if values else None
            ratios = [values["canopy"] / values["tokio"] for values in rounds.values()
                      if values.get("canopy") and values.get("tokio")]
            ratio = statistics.median(ratios) if ratios else None
            per_second = [None if medians[peer] in (None, 0) else 1e9 / medians[peer]
                          for peer in TOOLKIT_PEERS]
            lines.append([workload, units.get(workload, ""), str(threads),
                          *(format_number(medians[peer]) for peer in TOOLKIT_PEERS),
                          format_number(ratio), *(format_number(value) for value in per_second)])
    widths = [max(len(line[column]) for line in lines) for column in range(len(lines[0]))]
    print(f"toolkit beside tokio: values are medians over {arguments.rounds} rounds; ratio: median "
          f"over rounds of canopy / tokio in the same round; lower is better (/s: 1e9 / value, "
          f"higher is better)")
    for line in lines:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())
    for line in toolchains(arguments):
        print(line)
    print(f"load average (1 min) before: {loads[0]}, after: {loads[1]}; {os.cpu_count()} CPUs")


def main():
    arguments = parse_arguments()
    if not os.access(arguments.binary, os.X_OK):
        sys.exit(f"toolkit_bench.py: {arguments.binary} is not an executable canopy_bench")
    arguments.results.mkdir(parents=True, exist_ok=True)
    latest = arguments.results / "toolkit_latest.jsonl"
    if latest.exists():
        shutil.copyfile(latest, arguments.results / "toolkit_previous.jsonl")
    before = load_average()
    records = run_rounds(arguments, latest)
    print_table(arguments, records, (before, load_average()))


if __name__ == "__main__":
    main()
