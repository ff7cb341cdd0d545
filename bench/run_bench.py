#!/usr/bin/python3
"""Runs every canopy_bench workload on canopy and its peers and compares them.

usage: run_bench.py CANOPY_BENCH [--rounds K] [--threads N] [--reps R]
                    [--timeout S] [--scaling] [--instructions] [--no-comparison]
                    [--rust-peers PATH] [--rustc PATH] [--only W,W...] [--results DIR]

The toolkit workloads (channels, the async mutex) run after the table, in
toolkit_bench.py's table beside tokio alone; then fib, skynet and nqueens
beside libfork and TooManyCooks (forkjoin_peers.py, at 1 worker and at
--threads, when ../shared/peers-src holds their sources), and their peak
memory on fib(35) (forkjoin_peers.py --memory). For each other workload the
peers run interleaved (canopy, tbb, asio, rayon, tokio,
then the next workload), K rounds over; rayon and tokio run in the Rust
program bench/peers/rust (canopy_rust_peers: the same command line,
parameters and JSON line as canopy_bench), found at --rust-peers or else at
BUILD_DIR/rust-peers/release/canopy_rust_peers beside CANOPY_BENCH's BUILD_DIR
(where ./run.sh bench builds it); idle_cpu also runs with no executor in the process
("baseline"), which is the floor of the measurement itself, and its JSON
lines carry "other_threads": the part spent by the executor's own threads. Every JSON line goes to results/latest.jsonl
(or DIR/latest.jsonl with --results DIR: ./run.sh bench --compiler=clang keeps
the clang build's runs in results/clang/, compared only with each other) (the
previous latest.jsonl is kept as results/previous.jsonl first), a table goes
to stdout (values are medians over rounds; the ratio is the median over
rounds of canopy ÷ the best peer of the same round, so that drift between
rounds cancels), and results/ratios.svg plots each peer's value divided by
the best peer's. Lower is better for every workload. A peer that has no
implementation of a workload (exit status 2, or its program is not built)
shows as "–", a run that fails as n/a; the driver carries on.

Under the table: the toolchain of every peer (toolchains.py: the C++
compiler and flags of canopy_bench, which holds Canopy, oneTBB and Asio; the
rustc recorded in canopy_rust_peers, and --rustc, the path ./run.sh bench
built it with) and the load average before and after the run.

--only W,W... runs the table for those workloads alone and skips the
toolkit, I/O and hand-off tables after it (for a quick comparison of a few
rows, e.g. --only fib,fib_join,skynet,nqueens).

--scaling additionally runs the thread-scaling sweep (bench/scaling/run_scaling.py)
on the same programs at 1, 2, 4, ... up to nproc threads, into
results/scaling.{jsonl,meta.json,md,svg}.

--no-comparison skips the side-by-side table (results/latest.jsonl and
previous.jsonl are left as they are), to run --scaling or --instructions on
their own.

--instructions additionally counts, with valgrind's callgrind, the
instructions canopy executes for each CPU-bound workload on 1 worker
(warm-up + 1 rep) into results/instructions.jsonl, and compares them with
the previous count (results/instructions_previous.jsonl). Unlike wall time
these counts repeat to within ~0.1 % on this VM, so a change of more than
10 % is a real regression of the code, not drift. It also runs
forkjoin_peers.py --instructions: instructions per fork of fib on Canopy,
libfork and TooManyCooks.

Needs only python3's standard library, and gnuplot for the plots.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import toolchains

PEERS = ("canopy", "tbb", "asio", "rayon", "tokio")
PEER_COLORS = {"canopy": "#d95f02", "tbb": "#1f78b4", "asio": "#33a02c", "rayon": "#7570b3",
               "tokio": "#e7298a"}
COMPARED_PEERS = ("tbb", "asio", "rayon", "tokio")
# Peers run by the Rust program (bench/peers/rust), not by canopy_bench.
RUST_PEERS = ("rayon", "tokio")
# The exit status of canopy_bench and canopy_rust_peers for a workload the
# peer has no implementation of (also for a usage error).
EXIT_NOT_IMPLEMENTED = 2
NOT_IMPLEMENTED = "–"
# Workloads that also run with no executor at all ("baseline"): the floor of
# the measurement itself, printed under the table, not compared.
BASELINE_WORKLOADS = ("idle_cpu",)
# The task toolkit (channels, the async mutex): tokio is their only peer, so
# they have a table of their own, at --threads and at 1 worker
# (toolkit_bench.py), not a row here.
TOOLKIT_WORKLOADS = ("channel_ping_pong", "channel_throughput", "mutex_contention")
INSTRUCTION_WORKLOADS = ("spawn_remote", "spawn_local", "yield_many", "chained_spawn", "fib", "fib_fiber")
REGRESSION_THRESHOLD_PERCENT = 10.0
RESULTS_DIRECTORY = Path(__file__).resolve().parent / "results"


def parse_arguments():
    parser = argparse.ArgumentParser(description="Compare canopy with oneTBB, Boost.Asio, rayon and tokio.")
    parser.add_argument("binary", type=Path, help="path of the built canopy_bench")
    parser.add_argument("--rust-peers", type=Path, default=None,
                        help="path of the built canopy_rust_peers (rayon, tokio); default: "
                        "BUILD_DIR/rust-peers/release/canopy_rust_peers beside canopy_bench")
    parser.add_argument("--rustc", default=None,
                        help="the rustc ./run.sh bench built canopy_rust_peers with (printed "
                        "under the table beside the version the program records)")
    parser.add_argument("--only", default=None,
                        help="comma-separated workloads: the table for those alone, without "
                        "the toolkit, I/O and hand-off tables")
    parser.add_argument("--rounds", type=positive_integer, default=3,
                        help="times every (workload, peer) runs, interleaved; the table "
                        "shows the median (default 3: one round drifts by more than 10 %%)")
    parser.add_argument("--threads", type=positive_integer, default=os.cpu_count() or 1,
                        help="worker threads for the comparison (default: nproc)")
    parser.add_argument("--reps", type=positive_integer, default=None,
                        help="repetitions per run (default: canopy_bench's own)")
    parser.add_argument("--timeout", type=positive_integer, default=300,
                        help="seconds one run may take before it counts as failed (default 300)")
    parser.add_argument("--scaling", action="store_true",
                        help="also run the thread-scaling sweep (bench/scaling/run_scaling.py) "
                        "at 1, 2, 4, ... nproc threads")
    parser.add_argument("--instructions", action="store_true",
                        help="also count canopy's instructions (callgrind, 1 worker) for "
                        + ", ".join(INSTRUCTION_WORKLOADS))
    parser.add_argument("--no-comparison", action="store_true",
                        help="skip the side-by-side table and leave results/latest.jsonl as "
                        "it is (with --scaling or --instructions)")
    parser.add_argument("--results", type=Path, default=RESULTS_DIRECTORY,
                        help="directory of latest.jsonl, instructions.jsonl and the plots, each "
                        "compared with the previous run in the same directory (default: "
                        "bench/results)")
    arguments = parser.parse_args()
    if arguments.no_comparison and not (arguments.scaling or arguments.instructions):
        parser.error("--no-comparison leaves nothing to run: add --scaling or --instructions")
    if arguments.rust_peers is None:
        arguments.rust_peers = (arguments.binary.resolve().parent.parent / "rust-peers" / "release"
                                / "canopy_rust_peers")
    return arguments


def positive_integer(text):
    number = int(text)
    if number <= 0:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return number


def list_workloads(binary):
    completed = subprocess.run([str(binary), "--list"], capture_output=True, text=True, check=True)
    return completed.stdout.split()


def peer_binary(arguments, peer):
    return arguments.rust_peers if peer in RUST_PEERS else arguments.binary


def run_one(arguments, workload, peer, threads):
    """Returns (record, None) on success or (None, reason) on failure; the
    reason starts with NOT_IMPLEMENTED when the peer has no implementation
    of the workload or its program is not built."""
    binary = peer_binary(arguments, peer)
    if not os.access(binary, os.X_OK):
        return None, f"{NOT_IMPLEMENTED} {binary} is not built"
    reps, timeout = arguments.reps, arguments.timeout
    command = [str(binary), workload, "--peer", peer, "--threads", str(threads)]
    if reps is not None:
        command += ["--reps", str(reps)]
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    if completed.returncode != 0:
        message = completed.stderr.strip().splitlines()
        reason = message[0] if message else f"exit status {completed.returncode}"
        if completed.returncode == EXIT_NOT_IMPLEMENTED:
            reason = f"{NOT_IMPLEMENTED} {reason}"
        return None, reason
    try:
        record = json.loads(completed.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return None, "no JSON line on stdout"
    return record, None


def load_average():
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except (OSError, IndexError):
        return "unknown"


def progress(text):
    print(text, file=sys.stderr, flush=True)


def run_comparison(arguments, workloads, results_file):
    """Runs every (workload, peer) arguments.rounds times; returns the
    records and the set of (workload, peer) that have no implementation."""
    records = []
    not_implemented = set()
    with results_file.open("w") as output:
        for round_number in range(1, arguments.rounds + 1):
            for index, workload in enumerate(workloads, start=1):
                for peer in PEERS + (("baseline",) if workload in BASELINE_WORKLOADS else ()):
                    prefix = f"[round {round_number}/{arguments.rounds}] " if arguments.rounds > 1 else ""
                    progress(f"{prefix}[{index}/{len(workloads)}] {workload}: {peer} ...")
                    record, failure = run_one(arguments, workload, peer, arguments.threads)
                    if failure is not None:
                        if failure.startswith(NOT_IMPLEMENTED):
                            not_implemented.add((workload, peer))
                            progress(f"    {failure}")
                        else:
                            progress(f"    n/a: {failure}")
                        continue
                    record["round"] = round_number
                    records.append(record)
                    output.write(json.dumps(record) + "\n")
                    output.flush()
    return records, not_implemented


def read_records(path):
    if not path.exists():
        return []
    with path.open() as lines:
        return [json.loads(line) for line in lines if line.strip()]


def median_by_key(records, field):
    """{(workload, peer): median of field over rounds} for records that have it."""
    grouped = {}
    for record in records:
        if field in record and record[field] is not None:
            grouped.setdefault((record["workload"], record["peer"]), []).append(record[field])
    return {key: statistics.median(values) for key, values in grouped.items()}


def ratio_to_best_peer(value, peer_values):
    """value ÷ the lowest peer value, or None when either is missing."""
    available = [peer_value for peer_value in peer_values if peer_value is not None]
    if value is None or not available:
        return None
    best = min(available)
    if best == 0:
        return 1.0 if value == 0 else None
    return value / best


def paired_ratio(records, workload, field):
    """Median over rounds of canopy ÷ the best peer *in that round*.

    The peers of one round run back to back, so the machine's drift (which
    moves by tens of per cent over minutes here) cancels in each round's
    ratio; a ratio of medians taken from different rounds would not cancel
    it. None when no round has canopy and a compared peer."""
    by_round = {}
    for record in records:
        if record["workload"] == workload and record.get(field) is not None:
            by_round.setdefault(record.get("round", 1), {})[record["peer"]] = record[field]
    ratios = []
    for values in by_round.values():
        ratio = ratio_to_best_peer(values.get("canopy"), [values.get(peer) for peer in COMPARED_PEERS])
        if ratio is not None:
            ratios.append(ratio)
    return statistics.median(ratios) if ratios else None


def comparison_rows(workloads, records, not_implemented=frozenset()):
    """One row per workload (and one more for wake_latency's p99). Values
    are medians over rounds; the ratio is paired_ratio(). A peer in a
    row's "not_implemented" has no implementation of the workload."""
    medians = median_by_key(records, "value")
    p99_medians = median_by_key(records, "p99")
    other_thread_medians = median_by_key(records, "other_threads")
    units = {record["workload"]: record["unit"] for record in records}
    rows = []
    for workload in workloads:
        metrics = [("value", workload, medians)]
        if any(key[0] == workload for key in p99_medians):
            metrics.append(("p99", workload + " p99", p99_medians))
        for metric, label, table in metrics:
            values = {peer: table.get((workload, peer)) for peer in PEERS}
            rows.append({
                "workload": workload,
                "metric": metric,
                "label": label,
                "unit": units.get(workload, ""),
                "values": values,
                "ratio": paired_ratio(records, workload, metric),
                "not_implemented": {peer for peer in PEERS if (workload, peer) in not_implemented},
                "baseline": table.get((workload, "baseline")),
                "other_threads": {peer: other_thread_medians.get((workload, peer)) for peer in PEERS}
                                 if metric == "value" else {},
            })
    return rows


def format_number(number):
    return "n/a" if number is None else f"{number:.4g}"


def percent_change(current, previous):
    if current is None or previous is None or previous == 0:
        return None
    return (current / previous - 1.0) * 100.0


def format_percent(change):
    return "n/a" if change is None else f"{change:+.1f}%"


def print_table(rows, previous_rows, threads):
    """The comparison table. With a previous run, two more columns: the
    change of canopy's own value, and of its ratio to the best peer. This
    machine's speed drifts by tens of percent over minutes, which moves
    every peer's value alike and cancels in the ratio; a peer's own noise
    moves the ratio but not canopy's value. So a row counts as a regression
    only when both grew by more than the threshold."""
    previous_by_key = {(row["workload"], row["metric"]): row for row in previous_rows}
    header = ["workload", "unit", *PEERS, "ratio"]
    if previous_rows:
        header += ["canopy vs previous", "ratio vs previous"]
    lines = [header]
    regressions = []
    for row in rows:
        line = [row["label"], row["unit"],
                *(NOT_IMPLEMENTED if row["values"][peer] is None and peer in row.get("not_implemented", ())
                  else format_number(row["values"][peer]) for peer in PEERS),
                format_number(row["ratio"])]
        if previous_rows:
            before = previous_by_key.get((row["workload"], row["metric"]))
            value_change = percent_change(row["values"]["canopy"],
                                          before["values"]["canopy"] if before else None)
            ratio_change = percent_change(row["ratio"], before["ratio"] if before else None)
            regressed = (value_change is not None and ratio_change is not None
                         and value_change > REGRESSION_THRESHOLD_PERCENT
                         and ratio_change > REGRESSION_THRESHOLD_PERCENT)
            line += [format_percent(value_change),
                     format_percent(ratio_change) + ("  REGRESSION" if regressed else "")]
            if regressed:
                regressions.append(row["label"])
        lines.append(line)
    widths = [max(len(line[column]) for line in lines) for column in range(len(header))]
    print(f"threads: {threads}; values: medians over rounds; ratio: median over rounds of canopy / "
          f"best of {', '.join(COMPARED_PEERS)} in the same round; lower is better")
    for line in lines:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())
    for row in rows:
        if row["baseline"] is not None:
            print(f"{row['label']} baseline (the same measurement in a process with no executor): "
                  f"{format_number(row['baseline'])} {row['unit']}")
        if any(value is not None for value in row["other_threads"].values()):
            shares = ", ".join(f"{peer} {format_number(value)}" for peer, value in row["other_threads"].items())
            print(f"{row['label']} of the executor's own threads (all but the measuring one): "
                  f"{shares} {row['unit']}")
    if regressions:
        print(f"canopy regressed by more than {REGRESSION_THRESHOLD_PERCENT:.0f}% "
              f"(its value and its ratio to the best peer) on: {', '.join(regressions)}")


def count_instructions(binary, workload, timeout):
    """Instructions callgrind counts for canopy running `workload` on one
    worker (warm-up + 1 rep, the whole process), or None if the run failed."""
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
               str(binary), workload, "--threads", "1", "--reps", "1"]
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout * 20)
    except subprocess.TimeoutExpired:
        return None
    match = re.search(r"Collected\s*:\s*(\d+)", completed.stderr)
    if completed.returncode != 0 or match is None:
        progress(f"{workload}: callgrind run failed (exit {completed.returncode})")
        return None
    return int(match.group(1))


def run_instruction_counts(arguments, workloads):
    """Counts, writes results/instructions.jsonl (the previous one kept), and
    prints the comparison. A count that grew by more than the threshold is
    flagged: the counts repeat to within ~0.1 %, so this is not drift."""
    if shutil.which("valgrind") is None:
        progress("--instructions needs valgrind (Debian package valgrind); skipped")
        return
    latest = arguments.results / "instructions.jsonl"
    previous = arguments.results / "instructions_previous.jsonl"
    if latest.exists():
        shutil.copyfile(latest, previous)
    before = {record["workload"]: record["instructions"] for record in read_records(previous)}
    measured = [workload for workload in INSTRUCTION_WORKLOADS if workload in workloads]
    lines = [["workload", "instructions", "previous", "change"]]
    regressions = []
    with latest.open("w") as output:
        for index, workload in enumerate(measured, 1):
            progress(f"[instructions] [{index}/{len(measured)}] {workload} ...")
            count = count_instructions(arguments.binary, workload, arguments.timeout)
            if count is None:
                lines.append([workload, "n/a", format_number(before.get(workload)), "n/a"])
                continue
            output.write(json.dumps({"peer": "canopy", "workload": workload, "instructions": count,
                                     "threads": 1, "reps": 1}) + "\n")
            change = percent_change(count, before.get(workload))
            flagged = change is not None and change > REGRESSION_THRESHOLD_PERCENT
            if flagged:
                regressions.append(workload)
            lines.append([workload, str(count), str(before.get(workload, "n/a")),
                          format_percent(change) + ("  REGRESSION" if flagged else "")])
    widths = [max(len(line[column]) for line in lines) for column in range(len(lines[0]))]
    print("instructions (callgrind, canopy on 1 worker, warm-up + 1 rep):")
    for line in lines:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())
    if regressions:
        print(f"canopy's instruction count grew by more than {REGRESSION_THRESHOLD_PERCENT:.0f}% on: "
              f"{', '.join(regressions)}")


def gnuplot_available():
    return shutil.which("gnuplot") is not None


def run_gnuplot(script, output):
    if not gnuplot_available():
        progress(f"gnuplot not found; {output.name} not written")
        return
    completed = subprocess.run(["gnuplot"], input=script, capture_output=True, text=True)
    if completed.returncode != 0:
        progress(f"gnuplot failed, {output.name} not written: {completed.stderr.strip()}")


def gnuplot_cell(number):
    return "NaN" if number is None else repr(number)


def plot_ratios(rows, output):
    """Clustered bars: every peer's value divided by the best compared peer's."""
    data = []
    for row in rows:
        best_peer_values = [row["values"][peer] for peer in COMPARED_PEERS]
        ratios = [row["ratio"] if peer == "canopy" else ratio_to_best_peer(row["values"][peer], best_peer_values)
                  for peer in PEERS]
        data.append(f'"{row["label"]}" ' + " ".join(gnuplot_cell(ratio) for ratio in ratios))
    bars = [f'$ratios using {column}{":xtic(1)" if column == 2 else ""} title "{peer}" linecolor "{PEER_COLORS[peer]}"'
            for column, peer in enumerate(PEERS, start=2)]
    script = f"""
set terminal svg size 1100,500 dynamic noenhanced font "sans,11"
set output "{output}"
set title "value / best of {', '.join(COMPARED_PEERS)} (log scale, lower is better; canopy's bar is the ratio)"
set style data histogram
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -30 scale 0
set logscale y
set yrange [0.1:*]
set grid ytics
set key top left
set datafile missing "NaN"
$ratios << EOD
{chr(10).join(data)}
EOD
plot {", ".join(bars)}, 1 with lines dashtype 2 linecolor "black" notitle
"""
    run_gnuplot(script, output)


def scaling_thread_counts():
    processors = os.cpu_count() or 1
    counts = []
    threads = 1
    while threads < processors:
        counts.append(threads)
        threads *= 2
    counts.append(processors)
    return counts


def run_scaling(arguments):
    """--scaling: bench/scaling/run_scaling.py on this run's programs (its
    workloads, budget and report), at every scaling_thread_counts()."""
    command = [sys.executable, str(Path(__file__).resolve().parent / "scaling" / "run_scaling.py"),
               str(arguments.binary), "--rust-peers", str(arguments.rust_peers),
               "--threads", ",".join(str(count) for count in scaling_thread_counts()),
               "--rounds", str(arguments.rounds), "--out", str(arguments.results / "scaling")]
    if arguments.rustc is not None:
        command += ["--rustc", str(arguments.rustc)]
    if arguments.reps is not None:
        command += ["--reps", str(arguments.reps)]
    subprocess.run(command, check=False)


def forkjoin_peers_command(arguments):
    """bench/forkjoin_peers.py on this run's canopy_bench, at 1 worker and
    at --threads, the same rounds."""
    thread_counts = sorted({1, arguments.threads})
    return [sys.executable, str(Path(__file__).resolve().parent / "forkjoin_peers.py"),
            str(arguments.binary), "--rounds", str(arguments.rounds),
            "--threads", ",".join(str(count) for count in thread_counts),
            "--timeout", str(arguments.timeout)]


def run_and_print_comparison(arguments, workloads):
    """The side-by-side run: latest.jsonl (old one kept as previous.jsonl),
    the table against the previous run, and ratios.svg."""
    latest = arguments.results / "latest.jsonl"
    previous = arguments.results / "previous.jsonl"
    if latest.exists():
        shutil.copyfile(latest, previous)
    missing = sorted({str(peer_binary(arguments, peer)) for peer in PEERS
                      if not os.access(peer_binary(arguments, peer), os.X_OK)})
    for binary in missing:
        progress(f"note: {binary} is not built; its peers show as {NOT_IMPLEMENTED}")
    load_before = load_average()
    records, not_implemented = run_comparison(arguments, workloads, latest)
    load_after = load_average()
    rows = comparison_rows(workloads, records, not_implemented)
    previous_records = read_records(previous)
    previous_rows = comparison_rows(workloads, previous_records) if previous_records else []
    previous_threads = {record["threads"] for record in previous_records}
    if previous_threads and previous_threads != {arguments.threads}:
        progress(f"note: the previous run used {sorted(previous_threads)} threads, this one {arguments.threads}")
    print_table(rows, previous_rows, arguments.threads)
    print("toolchains:")
    for line in toolchains.describe(arguments.binary, arguments.rust_peers, arguments.rustc):
        print(f"  {line}")
    print(f"load average (1 min) before the run: {load_before}, after: {load_after} "
          f"({os.cpu_count()} CPUs)")
    plot_ratios(rows, arguments.results / "ratios.svg")


def main():
    arguments = parse_arguments()
    if not os.access(arguments.binary, os.X_OK):
        sys.exit(f"run_bench.py: {arguments.binary} is not an executable canopy_bench")
    arguments.results.mkdir(parents=True, exist_ok=True)
    workloads = [workload for workload in list_workloads(arguments.binary)
                 if workload not in TOOLKIT_WORKLOADS]
    if arguments.only is not None:
        chosen = [name for name in arguments.only.split(",") if name]
        unknown = [name for name in chosen if name not in workloads]
        if unknown or not chosen:
            sys.exit(f"run_bench.py: --only names no workload of the table: {', '.join(unknown)} "
                     f"(the table's: {', '.join(workloads)})")
        workloads = chosen
    if not arguments.no_comparison:
        run_and_print_comparison(arguments, workloads)
    if not arguments.no_comparison and arguments.only is None:
        # Channels and the async mutex beside tokio's, with the tokio that
        # ./run.sh bench built with the newest rustc when it names one.
        toolkit = [sys.executable, str(Path(__file__).resolve().parent / "toolkit_bench.py"),
                   str(arguments.binary), "--rounds", str(arguments.rounds),
                   "--threads", str(arguments.threads), "--timeout", str(arguments.timeout),
                   "--results", str(arguments.results), "--rust-peers",
                   os.environ.get("CANOPY_TOOLKIT_RUST_PEERS") or str(arguments.rust_peers)]
        if arguments.reps is not None:
            toolkit += ["--reps", str(arguments.reps)]
        subprocess.run(toolkit, check=False)
        # fib, skynet and nqueens beside libfork and TooManyCooks, built from
        # ../shared/peers-src (one line and nothing else when it is absent).
        subprocess.run(forkjoin_peers_command(arguments), check=False)
        # Their peak memory on fib(35), Canopy's as examples/coroutine_fib ships.
        build_directory = Path(arguments.binary).resolve().parent.parent
        if subprocess.run(["ninja", "-C", str(build_directory), "examples/coroutine_fib"],
                          stdout=subprocess.DEVNULL, check=False).returncode == 0:
            subprocess.run(forkjoin_peers_command(arguments) + ["--memory"], check=False)
        # The I/O workloads (HTTP, echo, timers): their own driver, the same
        # build directory (bench/io_bench.py builds its servers there).
        io_driver = Path(__file__).resolve().parent / "io_bench.py"
        build_directory = Path(arguments.binary).resolve().parent.parent
        if (build_directory / "build.ninja").exists():
            # The timer storm's tokio peer is canopy_rust_peers too; its
            # workers are --threads, as every peer's in the table above.
            subprocess.run([sys.executable, str(io_driver), str(build_directory),
                            "--rounds", str(arguments.rounds), "--results", str(arguments.results),
                            "--storm-threads", str(arguments.threads),
                            "--rust-peers", str(peer_binary(arguments, "tokio"))],
                           check=False)
            # The examples as shipped (their default backend and worker
            # count, the load generator on the same cores) beside each
            # backend forced, the previous commit's build, tokio, Asio and
            # nginx: where a default that got slower shows.
            subprocess.run([sys.executable,
                            str(Path(__file__).resolve().parent / "io" / "defaults_bench.py"),
                            str(build_directory), "--rounds", str(arguments.rounds),
                            "--results", str(arguments.results),
                            "--rust-peers", str(arguments.rust_peers)], check=False)
            # HTTPS (keep-alive requests, full and resumed handshakes)
            # beside nginx with ssl, Asio's ssl::stream and tokio-rustls.
            subprocess.run([sys.executable,
                            str(Path(__file__).resolve().parent / "io" / "tls_bench.py"),
                            str(build_directory), "--rounds", str(arguments.rounds),
                            "--results", str(arguments.results),
                            "--rust-peers", str(arguments.rust_peers)], check=False)
            # The embedding hand-off (loop thread -> pool -> loop thread) beside Asio.
            handoff = build_directory / "bench" / "handoff_bench"
            if subprocess.run(["ninja", "-C", str(build_directory), "bench/handoff_bench"],
                              stdout=subprocess.DEVNULL, check=False).returncode == 0:
                subprocess.run([str(handoff), "--rounds", str(arguments.rounds),
                                "--workers", str(arguments.threads)], check=False)

    if arguments.scaling:
        run_scaling(arguments)
    if arguments.instructions:
        run_instruction_counts(arguments, workloads)
        subprocess.run(forkjoin_peers_command(arguments) + ["--instructions"], check=False)
    progress(f"results in {arguments.results}")


if __name__ == "__main__":
    main()
