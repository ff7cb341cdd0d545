#!/usr/bin/python3
"""The thread-scaling sweep: every scaling workload on Canopy and every peer
at a list of worker counts, interleaved, within a time budget.

usage: run_scaling.py (--bundle DIR | CANOPY_BENCH) [--rust-peers PATH] [--tbb-bench PATH]
                      [--threads 1,2,4,8,16] [--workloads W,W...] [--peers P,P...]
                      [--budget S] [--rounds K] [--reps R] [--out PREFIX]
       run_scaling.py --report-only --out PREFIX

A round runs every (workload, worker count, peer) once, peers innermost, so
that the machine's drift between minutes moves all peers of a point alike;
idle_cpu also runs once a round with no executor at all ("baseline", the
floor of the measurement). Rounds repeat until --rounds or the budget: no run
starts when the budget has less time left than that run took in an earlier
round, and a run still going at the end of the budget is killed and recorded
as cut, so the sweep ends within --budget seconds plus the writing of its
report. The programs and how one run is parsed are run_bench.py's
(run_one); a peer a program has no implementation of (exit status 2, e.g.
rayon's yield_many or oneTBB in a build without it) shows as "–".

--bundle DIR runs the binaries that bench/scaling/build_bundle.sh puts in
DIR: canopy_bench (static: Canopy and Asio), canopy_bench_tbb (oneTBB through
the bundled loader and libraries), canopy_rust_peers (static: rayon, tokio)
and toolchains.txt, so that a machine without Boost, oneTBB or network runs
them. Without it, CANOPY_BENCH runs every C++ peer and --rust-peers (default
as run_bench.py's) rayon and tokio.

Writes PREFIX.jsonl (one line per run, with "round" and the 1-minute load
average as it started, "load_1min"; a cut or failed run has "failed": its
reason), PREFIX.meta.json (machine, load average at the start
and the end, toolchains, budget), PREFIX.md (per workload: the median over
rounds at each worker count, its speedup over 1 worker, and canopy ÷ the best
peer) and PREFIX.svg (time against workers, one line per runtime, one panel
per workload; needs gnuplot). --report-only rewrites PREFIX.md and
PREFIX.svg from PREFIX.jsonl and PREFIX.meta.json, e.g. after a run on a
machine without gnuplot; a "## Reading" section written by hand at the end
of PREFIX.md is kept. Needs only python3's standard library.
"""

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

BENCH = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BENCH))
import run_bench  # noqa: E402  (bench/ is put on the path first)
import toolchains  # noqa: E402

WORKLOADS = ("spawn_remote", "spawn_local", "chained_spawn", "fan_out", "fib", "fib_join",
             "irregular_tree", "wake_latency", "idle_cpu")
THREAD_COUNTS = (1, 2, 4, 8, 16)
DEFAULT_BUDGET_S = 540
DEFAULT_ROUNDS = 3
# Measured repetitions per run (after canopy_bench's warm-up). Fewer than
# run_bench.py's 5, since rounds, not repetitions, cancel the drift; the two
# workloads that take fixed time (wake_latency sleeps 2 s a repetition,
# idle_cpu 1 s) take one, or they alone would fill the budget.
DEFAULT_REPS = 2
FIXED_TIME_REPS = {"wake_latency": 1, "idle_cpu": 1}
# Their values are a latency and an idle cost, not work done: the report
# gives no speedup for them.
NO_SPEEDUP = ("wake_latency", "idle_cpu")
# A section of PREFIX.md written by hand (what the numbers say): --report-only
# keeps it, from this heading to the end, when it rewrites the file (a new
# sweep does not: the notes were about the old numbers).
NOTES_HEADING = "## Reading"
# The longest one run may take, whatever the budget leaves.
RUN_TIMEOUT_S = 120


def parse_arguments():
    parser = argparse.ArgumentParser(description="Thread-scaling sweep of canopy_bench and its peers.")
    parser.add_argument("binary", type=Path, nargs="?", help="canopy_bench (all C++ peers)")
    parser.add_argument("--bundle", type=Path, help="folder made by build_bundle.sh")
    parser.add_argument("--rust-peers", type=Path, help="canopy_rust_peers (rayon, tokio)")
    parser.add_argument("--tbb-bench", type=Path, help="the program that runs --peer tbb")
    parser.add_argument("--rustc", help="the rustc canopy_rust_peers was built with (printed only)")
    parser.add_argument("--threads", type=number_list, default=THREAD_COUNTS,
                        help="worker counts, comma-separated (default 1,2,4,8,16)")
    parser.add_argument("--workloads", type=name_list, default=WORKLOADS)
    parser.add_argument("--peers", type=name_list, default=run_bench.PEERS)
    parser.add_argument("--budget", type=run_bench.positive_integer, default=DEFAULT_BUDGET_S,
                        help=f"seconds the sweep may take (default {DEFAULT_BUDGET_S})")
    parser.add_argument("--rounds", type=run_bench.positive_integer, default=DEFAULT_ROUNDS)
    parser.add_argument("--reps", type=run_bench.positive_integer, default=DEFAULT_REPS,
                        help=f"measured repetitions per run (default {DEFAULT_REPS}; "
                        "wake_latency and idle_cpu take 1)")
    parser.add_argument("--out", type=Path, default=BENCH / "results" / "scaling",
                        help="prefix of the files written (default bench/results/scaling)")
    parser.add_argument("--report-only", action="store_true",
                        help="rewrite PREFIX.md and PREFIX.svg from PREFIX.jsonl and PREFIX.meta.json")
    arguments = parser.parse_args()
    if arguments.report_only:
        return arguments
    unknown = [peer for peer in arguments.peers if peer not in run_bench.PEERS]
    if unknown:
        parser.error(f"unknown peer {', '.join(unknown)} (known: {', '.join(run_bench.PEERS)})")
    if arguments.bundle is not None:
        if arguments.binary is not None:
            parser.error("give either --bundle or CANOPY_BENCH, not both")
        arguments.binary = arguments.bundle / "canopy_bench"
        arguments.tbb_bench = arguments.tbb_bench or arguments.bundle / "canopy_bench_tbb"
        arguments.rust_peers = arguments.rust_peers or arguments.bundle / "canopy_rust_peers"
    if arguments.binary is None:
        parser.error("give CANOPY_BENCH or --bundle DIR")
    if not os.access(arguments.binary, os.X_OK):
        parser.error(f"{arguments.binary} is not an executable canopy_bench")
    arguments.tbb_bench = arguments.tbb_bench or arguments.binary
    if arguments.rust_peers is None:
        arguments.rust_peers = (arguments.binary.resolve().parent.parent / "rust-peers" / "release"
                                / "canopy_rust_peers")
    known = set(run_bench.list_workloads(arguments.binary))
    missing = [workload for workload in arguments.workloads if workload not in known]
    if missing:
        parser.error(f"{arguments.binary} has no workload {', '.join(missing)}")
    return arguments


def with_extension(prefix, extension):
    """PREFIX + extension (a dot in PREFIX's name is kept, not replaced)."""
    return prefix.parent / (prefix.name + extension)


def number_list(text):
    numbers = [run_bench.positive_integer(item) for item in text.split(",") if item]
    if not numbers:
        raise argparse.ArgumentTypeError("expected comma-separated positive integers")
    return tuple(numbers)


def name_list(text):
    names = tuple(item for item in text.split(",") if item)
    if not names:
        raise argparse.ArgumentTypeError("expected comma-separated names")
    return names


class Sweep:
    """The rounds, the budget and the JSON lines of one sweep."""

    def __init__(self, arguments, output):
        self.arguments = arguments
        self.output = output
        self.start = time.monotonic()
        self.deadline = self.start + arguments.budget
        self.took = {}  # (workload, peer, threads) -> seconds its last run took
        self.runs = self.failures = self.cut = self.skipped = 0
        self.rounds_completed = 0

    def program(self, peer):
        """The run_bench.run_one view of where a peer's program is."""
        binary = self.arguments.tbb_bench if peer == "tbb" else self.arguments.binary
        return SimpleNamespace(binary=binary, rust_peers=self.arguments.rust_peers)

    def points(self, round_number):
        """(workload, threads, peer) of one round, peers innermost."""
        for workload in self.arguments.workloads:
            for threads in self.arguments.threads:
                for peer in self.arguments.peers:
                    yield workload, threads, peer
            if workload in run_bench.BASELINE_WORKLOADS:
                yield workload, 1, "baseline"

    def run_round(self, round_number):
        """Returns False when the budget ended the round early."""
        complete = True
        for workload, threads, peer in self.points(round_number):
            key = (workload, peer, threads)
            left = self.deadline - time.monotonic()
            if left <= 0 or self.took.get(key, 0) > left:
                self.skipped += 1
                complete = False
                continue
            reps = FIXED_TIME_REPS.get(workload, self.arguments.reps)
            options = self.program(peer)
            options.reps, options.timeout = reps, max(1, int(min(RUN_TIMEOUT_S, left)))
            run_bench.progress(f"[round {round_number}, {time.monotonic() - self.start:.0f} s] "
                               f"{workload} --threads {threads}: {peer} ...")
            began, load = time.monotonic(), run_bench.load_average()
            record, failure = run_bench.run_one(options, workload, peer, threads)
            self.took[key] = time.monotonic() - began
            self.runs += 1
            if failure is not None and failure.startswith(run_bench.NOT_IMPLEMENTED):
                continue  # the report shows "–" for a peer with no record
            if failure is not None:
                cut = failure.startswith("timed out") and options.timeout < RUN_TIMEOUT_S
                self.cut += cut
                self.failures += not cut
                run_bench.progress(f"    {'cut by the budget' if cut else 'n/a: ' + failure}")
                record = {"workload": workload, "peer": peer, "threads": threads,
                          "failed": "cut by the budget" if cut else failure}
                complete = False
            # The 1-minute load average as the run started: on a shared
            # machine it says which points ran beside other work.
            record["round"], record["load_1min"] = round_number, float(load) if load != "unknown" else None
            self.output.write(json.dumps(record) + "\n")
            self.output.flush()
        return complete

    def run(self):
        for round_number in range(1, self.arguments.rounds + 1):
            if time.monotonic() >= self.deadline:
                break
            if self.run_round(round_number):
                self.rounds_completed = round_number
        return time.monotonic() - self.start


def load_averages():
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_limit():
    try:
        return Path("/sys/fs/cgroup/cpu.max").read_text().strip()
    except OSError:
        return "none"


def git_commit():
    """The commit of the bundle (its COMMIT file) or of the working tree."""
    try:
        return subprocess.run(["git", "-C", str(BENCH), "describe", "--always", "--dirty"],
                              capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def toolchain_lines(arguments):
    if arguments.bundle is not None and (arguments.bundle / "toolchains.txt").exists():
        return (arguments.bundle / "toolchains.txt").read_text().splitlines()
    return toolchains.describe(arguments.binary, arguments.rust_peers, arguments.rustc)


def sweep(arguments):
    """Runs the sweep; writes PREFIX.jsonl and PREFIX.meta.json."""
    arguments.out.parent.mkdir(parents=True, exist_ok=True)
    meta = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpus": os.cpu_count(), "cpu_model": cpu_model(), "cgroup_cpu_max": cpu_limit(),
        "kernel": platform.release(), "load_average_start": load_averages(),
        "toolchains": toolchain_lines(arguments),
        "commit": ((arguments.bundle / "COMMIT").read_text().strip()
                   if arguments.bundle is not None and (arguments.bundle / "COMMIT").exists()
                   else git_commit()),
        "command": " ".join(shlex.quote(word) for word in sys.argv),
        "threads": list(arguments.threads), "workloads": list(arguments.workloads),
        "peers": list(arguments.peers), "budget_s": arguments.budget,
        "rounds_asked": arguments.rounds, "reps": arguments.reps, "fixed_time_reps": FIXED_TIME_REPS,
    }
    run_bench.progress(f"scaling sweep: {len(arguments.workloads)} workloads x threads "
                       f"{','.join(map(str, arguments.threads))} x {len(arguments.peers)} peers, "
                       f"up to {arguments.rounds} rounds within {arguments.budget} s; "
                       f"load average {meta['load_average_start']}")
    with with_extension(arguments.out, ".jsonl").open("w") as output:
        runner = Sweep(arguments, output)
        elapsed = runner.run()
    meta.update({"load_average_end": load_averages(), "elapsed_s": round(elapsed, 1),
                 "runs": runner.runs, "failures": runner.failures, "cut_by_budget": runner.cut,
                 "skipped_for_budget": runner.skipped, "rounds_completed": runner.rounds_completed})
    with_extension(arguments.out, ".meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    run_bench.progress(f"{runner.runs} runs in {elapsed:.0f} s: {runner.failures} failed, "
                       f"{runner.cut} cut and {runner.skipped} not started for the budget")


# ---- the report -------------------------------------------------------------


def medians(records, workload, peer, field="value"):
    """{threads: (median of field over rounds, count)}."""
    grouped = {}
    for record in records:
        if (record["workload"], record["peer"]) == (workload, peer) and record.get(field) is not None:
            grouped.setdefault(record["threads"], []).append(record[field])
    return {threads: (statistics.median(values), len(values)) for threads, values in grouped.items()}


def format_value(value):
    return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"


def workload_table(records, meta, workload, field):
    """Markdown rows: a worker count per row, a peer per column."""
    peers = list(meta["peers"])
    table = {peer: medians(records, workload, peer, field) for peer in peers}
    rounds = max((count for peer in peers for _, count in table[peer].values()), default=0)
    lines = ["| workers | " + " | ".join(peers) + " | canopy ÷ best peer |",
             "|---:|" + "---:|" * (len(peers) + 1)]
    for threads in meta["threads"]:
        cells = []
        for peer in peers:
            if threads not in table[peer]:
                cells.append("–")
                continue
            value, count = table[peer][threads]
            base = table[peer].get(1, (None,))[0]
            cell = format_value(value)
            if base and threads != 1 and workload not in NO_SPEEDUP:
                cell += f" ({base / value:.2f}×)"
            if count < rounds:
                cell += f" n={count}"
            cells.append(cell)
        at_threads = [record for record in records if record["threads"] == threads]
        ratio = run_bench.paired_ratio(at_threads, workload, field)
        label = f"{threads}" + (" *" if threads > meta["cpus"] else "")
        ratio_cell = "–" if ratio is None else f"{ratio:.2f}"
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {ratio_cell} |")
    return lines


def load_range(records):
    """', as runs started: LOW to HIGH (median M)' of the runs' load_1min, or ''."""
    loads = [record["load_1min"] for record in records if record.get("load_1min") is not None]
    if not loads:
        return ""
    return (f"; as the runs started, {min(loads):.2f} to {max(loads):.2f} "
            f"(median {statistics.median(loads):.2f})")


def write_markdown(records, meta, path, keep_notes):
    measured = [record for record in records if "failed" not in record]
    failed = [record for record in records if "failed" in record]
    units = {record["workload"]: record["unit"] for record in measured}
    oversubscribed = [threads for threads in meta["threads"] if threads > meta["cpus"]]
    lines = [
        f"# Thread scaling on {meta['cpus']} CPUs ({', '.join(map(str, meta['threads']))} workers)",
        "",
        f"Written by `bench/scaling/run_scaling.py` from `{with_extension(path, '.jsonl').name}` "
        f"(one JSON line a run) and `{with_extension(path, '.meta.json').name}`; plot: "
        f"`{with_extension(path, '.svg').name}`.",
        "",
        f"* **When and where.** {meta['date']}; {meta['cpus']} CPUs, {meta['cpu_model']}, kernel "
        f"{meta['kernel']}, cgroup cpu.max `{meta['cgroup_cpu_max']}`; code `{meta['commit']}`.",
        f"* **Load average** (1, 5, 15 min) at the start: {meta['load_average_start']}; at the end: "
        f"{meta.get('load_average_end', 'unknown')}{load_range(records)}.",
        f"* **Runs.** {meta.get('runs', '?')} in {meta.get('elapsed_s', '?')} s of a "
        f"{meta['budget_s']} s budget; rounds asked {meta['rounds_asked']}, completed "
        f"{meta.get('rounds_completed', '?')}; {meta.get('failures', '?')} failed, "
        f"{meta.get('cut_by_budget', '?')} cut and {meta.get('skipped_for_budget', '?')} not started "
        f"for the budget. Each run: canopy_bench's warm-up, then {meta['reps']} measured "
        f"repetitions (wake_latency and idle_cpu: 1), `value` their median.",
        f"* **Command.** `{meta['command']}`",
        "* **Toolchains.**",
        *[f"  * {line}" for line in meta["toolchains"]],
        "",
        "Each cell: the median over rounds, (its speedup: the 1-worker value ÷ this one; for a "
        "per-task unit, the throughput gain; below 1 is a slowdown), and n= where fewer rounds "
        "than the most any cell has. canopy ÷ best peer: the median over rounds of each round's "
        "own ratio. Lower is better everywhere; wake_latency (submit-to-start time) and idle_cpu "
        "(CPU time of an idle second) get no speedup. `–`: no run (the peer has no "
        "implementation of the workload, or the budget left no time for it). spawn_remote has "
        "one submitting thread by design: its speedup shows how the submit path stands more "
        "workers, not parallel work.",
    ]
    if oversubscribed:
        lines += ["", f"\\* {', '.join(map(str, oversubscribed))} workers are **oversubscribed** on "
                  f"this {meta['cpus']}-CPU machine: more runnable threads than CPUs, so those rows "
                  "measure time-sharing, not parallel speedup."]
    for workload in meta["workloads"]:
        fields = [("value", "")] + ([("p99", " p99")] if workload == "wake_latency" else [])
        for field, suffix in fields:
            lines += ["", f"## {workload}{suffix} ({units.get(workload, '?')})", ""]
            lines += workload_table(measured, meta, workload, field)
        baseline = medians(measured, workload, "baseline")
        if baseline:
            value, count = baseline[1]
            lines += ["", f"Baseline (the same measurement with no executor in the process): "
                      f"{format_value(value)} {units[workload]} (n={count})."]
    if failed:
        lines += ["", "## Runs that did not finish", ""]
        lines += [f"* round {record['round']}: {record['workload']} --peer {record['peer']} --threads "
                  f"{record['threads']}: {record['failed']}" for record in failed]
    markdown = with_extension(path, ".md")
    if keep_notes and markdown.exists() and NOTES_HEADING in markdown.read_text():
        lines += ["", NOTES_HEADING + markdown.read_text().split(NOTES_HEADING, 1)[1].rstrip("\n")]
    markdown.write_text("\n".join(lines) + "\n")


def plot(records, meta, output):
    """One panel per workload, value against workers (both log scale), one
    line per runtime: the medians over rounds."""
    measured = [record for record in records if "failed" not in record]
    blocks, panels = [], []
    for index, workload in enumerate(meta["workloads"]):
        unit = next((record["unit"] for record in measured if record["workload"] == workload), "")
        lines = []
        for peer in meta["peers"]:
            points = sorted((threads, value) for threads, (value, _) in
                            medians(measured, workload, peer).items())
            if not points:
                continue
            name = f"$d{index}_{peer}"
            blocks.append(f"{name} << EOD\n" + "\n".join(f"{x} {y!r}" for x, y in points) + "\nEOD")
            lines.append(f'{name} using 1:2 with linespoints title "{peer}" linewidth 2 '
                         f'pointtype 7 pointsize 0.6 '
                         f'linecolor "{run_bench.PEER_COLORS[peer]}"')
        if lines:
            panels.append(f'set title "{workload}"\nset ylabel "{unit}"\nplot ' + ", ".join(lines))
        else:  # gnuplot refuses a plot with no point: an invisible line keeps the panel
            panels.append(f'set title "{workload} (no data)"\nplot 1 notitle linecolor "white"')
    columns = 3
    rows = (len(panels) + columns - 1) // columns
    counts = meta["threads"]
    title = f"time against workers on {meta['cpus']} CPUs (log-log, lower is better)"
    script = f"""
set terminal svg size 1400,{380 * rows} dynamic noenhanced font "sans,11"
set output "{output}"
{chr(10).join(blocks)}
set multiplot layout {rows},{columns} title "{title}"
set xlabel "workers"
set logscale xy 2
set xtics ({", ".join(str(count) for count in counts)})
set xrange [{min(counts) * 0.8}:{max(counts) * 1.25}]
set format y "%g"
set grid
set key outside right top vertical font ",9"
{chr(10).join(panels)}
unset multiplot
"""
    run_bench.run_gnuplot(script, output)


def report(prefix, keep_notes):
    records = run_bench.read_records(with_extension(prefix, ".jsonl"))
    meta = json.loads(with_extension(prefix, ".meta.json").read_text())
    write_markdown(records, meta, prefix, keep_notes)
    plot(records, meta, with_extension(prefix, ".svg"))
    print(with_extension(prefix, ".md").read_text())


def main():
    arguments = parse_arguments()
    if not arguments.report_only:
        sweep(arguments)
    report(arguments.out, keep_notes=arguments.report_only)


if __name__ == "__main__":
    main()
