#!/usr/bin/python3
"""fib, skynet and nqueens on Canopy beside libfork and TooManyCooks.

usage: forkjoin_peers.py CANOPY_BENCH [--peers-src DIR] [--build DIR] [--rounds K]
                         [--threads T,T...] [--timeout S] [--instructions | --memory]

The peers are the tzcnt/runtime-benchmarks suite's programs for libfork and
TooManyCooks, built from their unmodified public sources in
../shared/peers-src (beside the repository root; --peers-src names another
folder; its README.md gives the suite's flags, which PEER_FLAGS repeats) into
BUILD_DIR/forkjoin-peers, BUILD_DIR being CANOPY_BENCH's build folder.
Nothing of them is copied into the repository. When the folder is absent the
script says so in one line and exits 0: the rest of ./run.sh bench goes on.

The sizes are Canopy's (bench/workloads/*/parameters.hpp): fib(30), skynet
of depth 6 (1,000,000 leaves), nqueens on a 12 x 12 board. fib takes N on
its command line; the suite's skynet (depth 8) and nqueens (14) fix theirs at
compile time, so their sources are built through a copy in the build folder
with only those constants changed (SIZE_EDITS; an edit that no longer
matches exactly once leaves that program out, never a half-edited one).

Every program does one warm-up and one timed run per process (canopy_bench
with --reps 1, the suite's programs as written); for each thread count the
three runtimes run interleaved (canopy, libfork, TooManyCooks, then the next
workload), K rounds over. The table gives the median over rounds of each
runtime's ms and, per peer, the median over rounds of that round's
Canopy / peer (drift of the machine cancels within a round). Lower is better.

--instructions counts instead, with valgrind's callgrind on one worker, the
instructions of one steady-state fib(30) (1,346,268 forks) on each runtime,
as the difference of two runs that differ only by it (canopy_bench --reps 2
minus --reps 1; the suite's `fib 30 1` minus `fib 1 1`, whose built-in
fib(30) warm-up both share), divided by the forks, and prints where they go
(callgrind's self cost per function, the same difference, per fork).

--memory measures instead the peak resident memory (GNU time's %M, the
kernel's maxrss of the process) of one fib(35): Canopy's examples/coroutine_fib as shipped (its
default worker count, one per CPU) beside the suite's fib programs with one
thread per CPU, K rounds each, interleaved; the table gives the median peak
per runtime and each peer's ratio.

Needs python3's standard library, clang++-19, libhwloc-dev and
libgoogle-perftools-dev (tcmalloc_minimal), valgrind for --instructions and GNU time for --memory.
"""

import argparse
import concurrent.futures
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import toolchains

REPOSITORY = Path(__file__).resolve().parent.parent
DEFAULT_PEERS_SOURCE = REPOSITORY.parent / "shared" / "peers-src"
WORKLOADS = ("fib", "skynet", "nqueens")
RUNTIMES = ("canopy", "libfork", "TooManyCooks")
PEERS = ("libfork", "TooManyCooks")
FIB_ARGUMENT = 30
# fib(n) forks once per call with n >= 2: F(n + 1) - 1 forks (fib/parameters.hpp).
FIB_FORKS = 1_346_268
COMPILER = "clang++-19"
COMMON_FLAGS = ["-O3", "-march=native", "-DNDEBUG", "-pthread"]
PEER_FLAGS = {
    "libfork": ["-std=c++23", "-DLF_USE_HWLOC", "-I{src}/libfork/include"],
    "TooManyCooks": ["-std=c++20", "-DTMC_PRIORITY_COUNT=1", "-DTMC_TRIVIAL_TASK",
                     "-DTMC_USE_HWLOC", "-I{src}/TooManyCooks/include"],
}
PROGRAM_FLAGS = {"nqueens": ["-falign-loops=64"]}
LIBRARIES = ["-lhwloc", "-ltcmalloc_minimal"]
# (old, new) text edits that give the suite's fixed-size programs Canopy's
# sizes; each old text must occur exactly once.
SIZE_EDITS = {
    "skynet": [("skynet<8>(); // warmup", "skynet<6>(); // warmup"),
               ("loop_skynet<8>()", "loop_skynet<6>()"),
               ("skynet<8>); // warmup", "skynet<6>); // warmup"),
               ("loop_skynet<8>)", "loop_skynet<6>)"),
               ("4999999950000000", "499999500000")],
    "nqueens": [("nqueens_work = 14;", "nqueens_work = 12;")],
}
DURATION = re.compile(r"duration:\s*(\d+)\s*us")


def progress(text):
    print(text, file=sys.stderr, flush=True)


def parse_arguments():
    parser = argparse.ArgumentParser(description="Canopy beside libfork and TooManyCooks.")
    parser.add_argument("binary", type=Path, help="path of the built canopy_bench")
    parser.add_argument("--peers-src", type=Path, default=DEFAULT_PEERS_SOURCE,
                        help="the peers' sources (default: ../shared/peers-src)")
    parser.add_argument("--build", type=Path, default=None,
                        help="where the peers are built (default: BUILD_DIR/forkjoin-peers)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per run (default 300)")
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions per fork of fib(30) with callgrind instead")
    parser.add_argument("--memory", action="store_true",
                        help="measure the peak resident memory of fib(35) instead")
    arguments = parser.parse_args()
    if arguments.build is None:
        arguments.build = arguments.binary.resolve().parent.parent / "forkjoin-peers"
    return arguments


def edited_source(arguments, peer, program):
    """The source to compile: the suite's own, or for a fixed-size program a
    copy in the build folder with SIZE_EDITS applied. None if an edit does
    not match exactly once (the suite's program changed)."""
    source = arguments.peers_src / "runtime-benchmarks" / "cpp" / peer / f"{program}.cpp"
    if program not in SIZE_EDITS:
        return source
    text = source.read_text()
    applied = 0
    for old, new in SIZE_EDITS[program]:
        count = text.count(old)
        if count > 1:
            return None
        if count == 1:
            text = text.replace(old, new)
            applied += 1
    if applied == 0 or re.search(r"skynet<8>|nqueens_work = 14", text):
        return None
    copy = arguments.build / f"{peer}_{program}_sized.cpp"
    if not copy.exists() or copy.read_text() != text:
        copy.write_text(text)
    return copy


def compile_command(arguments, peer, program, source, output):
    src = str(arguments.peers_src)
    return ([COMPILER, *COMMON_FLAGS, *(flag.format(src=src) for flag in PEER_FLAGS[peer]),
             f"-I{src}/runtime-benchmarks/cpp/2common", *PROGRAM_FLAGS.get(program, []),
             "-w", str(source), "-o", str(output), *LIBRARIES])


def build_one(arguments, peer, program):
    """The path of the built program, or None (with a line saying why)."""
    source = edited_source(arguments, peer, program)
    if source is None:
        progress(f"forkjoin_peers: {peer} {program}: the suite's size constants changed; left out")
        return None
    output = arguments.build / f"{peer}_{program}"
    command = compile_command(arguments, peer, program, source, output)
    stamp = output.with_suffix(".command")
    text = " ".join(command)
    if output.exists() and stamp.exists() and stamp.read_text() == text \
            and output.stat().st_mtime >= source.stat().st_mtime:
        return output
    progress(f"forkjoin_peers: building {peer} {program} ...")
    completed = subprocess.run(["nice", "-n", "5", *command], capture_output=True, text=True)
    if completed.returncode != 0:
        progress(f"forkjoin_peers: {peer} {program} failed to build: "
                 f"{(completed.stderr.strip().splitlines() or ['?'])[-1]}")
        return None
    stamp.write_text(text)
    return output


def build_peers(arguments):
    """{(peer, program): path} of the programs that built."""
    arguments.build.mkdir(parents=True, exist_ok=True)
    jobs = [(peer, program) for peer in PEERS for program in WORKLOADS]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        built = dict(zip(jobs, pool.map(lambda job: build_one(arguments, *job), jobs)))
    return {job: path for job, path in built.items() if path is not None}


def peer_command(path, workload, threads, fib_argument=FIB_ARGUMENT):
    if workload == "fib":
        return [str(path), str(fib_argument), str(threads)]
    return [str(path), str(threads)]


def run_ms(arguments, built, runtime, workload, threads):
    """Milliseconds of the timed run, or None (with a line saying why)."""
    if runtime == "canopy":
        command = [str(arguments.binary), workload, "--peer", "canopy", "--threads", str(threads),
                   "--reps", "1"]
    elif (runtime, workload) in built:
        command = peer_command(built[(runtime, workload)], workload, threads)
    else:
        return None
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=arguments.timeout)
    except subprocess.TimeoutExpired:
        progress(f"    {runtime} {workload}: timed out")
        return None
    if completed.returncode != 0 or "error" in completed.stdout.lower():
        progress(f"    {runtime} {workload}: failed ({completed.returncode}): "
                 f"{(completed.stdout + completed.stderr).strip()[-200:]}")
        return None
    if runtime == "canopy":
        return json.loads(completed.stdout.strip().splitlines()[-1])["value"]
    found = DURATION.search(completed.stdout)
    return int(found.group(1)) / 1000.0 if found else None


def median_or_none(values):
    values = [value for value in values if value is not None]
    return statistics.median(values) if values else None


def number(value):
    return "n/a" if value is None else f"{value:.4g}"


def print_table(rounds_by_threads, thread_counts):
    header = ["workload", "threads", "canopy ms", "libfork ms", "TooManyCooks ms",
              "canopy/libfork", "canopy/TooManyCooks"]
    lines = [header]
    for threads in thread_counts:
        rounds = rounds_by_threads[threads]
        for workload in WORKLOADS:
            values = [round_values.get(workload, {}) for round_values in rounds]
            medians = [median_or_none([value.get(runtime) for value in values]) for runtime in RUNTIMES]
            ratios = []
            for peer in PEERS:
                ratios.append(median_or_none(
                    [value["canopy"] / value[peer] for value in values
                     if value.get("canopy") is not None and value.get(peer)]))
            lines.append([workload, str(threads), *map(number, medians), *map(number, ratios)])
    widths = [max(len(line[column]) for line in lines) for column in range(len(header))]
    for line in lines:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())


def peer_toolchains(arguments):
    compiler = toolchains.first_line([COMPILER, "--version"])
    lines = [f"canopy: {toolchains.cpp_toolchain(arguments.binary)}"]
    for peer in PEERS:
        flags = " ".join([*COMMON_FLAGS, *(flag for flag in PEER_FLAGS[peer] if not flag.startswith("-I"))])
        lines.append(f"{peer} ({arguments.peers_src / peer}): {compiler} ({flags}; "
                     f"{' '.join(LIBRARIES)}; nqueens also -falign-loops=64)")
    return lines


def run_table(arguments, built, thread_counts):
    load_before = toolchains_load()
    rounds_by_threads = {}
    for threads in thread_counts:
        rounds = []
        for round_number in range(1, arguments.rounds + 1):
            round_values = {}
            for workload in WORKLOADS:
                progress(f"[{threads} thread(s), round {round_number}/{arguments.rounds}] {workload}")
                round_values[workload] = {runtime: run_ms(arguments, built, runtime, workload, threads)
                                          for runtime in RUNTIMES}
            rounds.append(round_values)
        rounds_by_threads[threads] = rounds
    print(f"fork-join beside libfork and TooManyCooks: fib({FIB_ARGUMENT}), skynet depth 6, "
          f"nqueens 12; ms of one run after one warm-up, median of {arguments.rounds} "
          f"interleaved rounds; ratio: median of each round's canopy / peer; lower is better")
    print_table(rounds_by_threads, thread_counts)
    print("toolchains:")
    for line in peer_toolchains(arguments):
        print(f"  {line}")
    print(f"load average (1 min) before: {load_before}, after: {toolchains_load()} "
          f"({os.cpu_count()} CPUs)")


def toolchains_load():
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except (OSError, IndexError):
        return "unknown"


# "N (P%)  FILE:FUNCTION [OBJECT]" of callgrind_annotate; FILE has no colon,
# FUNCTION's first colon is one of a "::".
FUNCTION_LINE = re.compile(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(?:[^:\s]*:(?!:))?(.+?)(?:\s+\[(?:/|\?\?\?)[^\]]*\])?\s*$")


def callgrind(command, timeout):
    """(total instructions, {function: self instructions}) of one run, or None."""
    with tempfile.TemporaryDirectory() as directory:
        output = Path(directory) / "callgrind.out"
        completed = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={output}",
                                    *command], capture_output=True, text=True, timeout=timeout)
        total = re.search(r"Collected\s*:\s*(\d+)", completed.stderr)
        if completed.returncode != 0 or total is None:
            progress(f"callgrind failed on {' '.join(command)}: {completed.stderr.strip()[-300:]}")
            return None
        annotated = subprocess.run(["callgrind_annotate", "--threshold=100", str(output)],
                                   capture_output=True, text=True).stdout
    functions = {}
    started = False
    for line in annotated.splitlines():
        if "file:function" in line:
            started = True
            continue
        match = FUNCTION_LINE.match(line) if started else None
        if match:
            name = match.group(2)
            functions[name] = functions.get(name, 0) + int(match.group(1).replace(",", ""))
    return int(total.group(1)), functions


LIBFORK_TAGS = {"(lf::core::tag)1": "call", "(lf::core::tag)2": "fork"}


def shorten(name):
    """A readable function name: template arguments collapsed to <>, the
    recursion-level suffix callgrind adds ('2) dropped, and for libfork the
    kind of frame (call or fork) that the collapsed arguments named."""
    kinds = [kind for tag, kind in LIBFORK_TAGS.items() if tag in name]
    short = re.sub(r"'\d+$", "", name)
    while True:
        collapsed = re.sub(r"<[^<>]*>", "<>", short)
        if collapsed == short:
            break
        short = collapsed
    return "".join(f"[{kind}] " for kind in kinds) + short


def run_instructions(arguments, built):
    if subprocess.run(["which", "valgrind"], capture_output=True).returncode != 0:
        progress("forkjoin_peers --instructions needs valgrind; skipped")
        return
    pairs = {"canopy": ([str(arguments.binary), "fib", "--peer", "canopy", "--threads", "1", "--reps", "1"],
                        [str(arguments.binary), "fib", "--peer", "canopy", "--threads", "1", "--reps", "2"])}
    for peer in PEERS:
        if (peer, "fib") in built:
            path = built[(peer, "fib")]
            pairs[peer] = (peer_command(path, "fib", 1, 1), peer_command(path, "fib", 1, FIB_ARGUMENT))
    timeout = arguments.timeout * 20
    print(f"instructions per fork of fib({FIB_ARGUMENT}) ({FIB_FORKS:,} forks), callgrind, "
          f"1 worker: the difference of two runs that differ by one steady-state fib({FIB_ARGUMENT})")
    summary = []
    for runtime, (shorter, longer) in pairs.items():
        progress(f"[instructions] {runtime} ...")
        first, second = callgrind(shorter, timeout), callgrind(longer, timeout)
        if first is None or second is None:
            summary.append((runtime, None))
            continue
        per_fork = (second[0] - first[0]) / FIB_FORKS
        summary.append((runtime, per_fork))
        print(f"\n{runtime}: {per_fork:.1f} instructions per fork "
              f"({second[0]:,} - {first[0]:,} instructions)")
        merged = {}
        for sign, functions in ((-1, first[1]), (1, second[1])):
            for name, count in functions.items():
                merged[shorten(name)] = merged.get(shorten(name), 0) + sign * count
        for name, delta in sorted(merged.items(), key=lambda item: -item[1]):
            if delta / FIB_FORKS < 0.5:
                break
            print(f"  {delta / FIB_FORKS:8.1f}  {name}")
    print("\nsummary: " + ", ".join(f"{runtime} {number(value)}" for runtime, value in summary)
          + " instructions per fork")
    print("toolchains:")
    for line in peer_toolchains(arguments):
        print(f"  {line}")


MEMORY_FIB_ARGUMENT = 35
TIME = "/usr/bin/time"  # GNU time (Debian's package `time`)


def peak_memory_kib(command, timeout):
    """The peak resident memory in KiB of one run of `command`, or None (with
    a line saying why). Measured by GNU time (its %M, the child's maxrss):
    a child forked from this Python process would start with Python's own
    high-water mark, which Linux carries across exec; GNU time's is about
    1 MiB, the same floor for every runtime."""
    with tempfile.NamedTemporaryFile(mode="r") as report:
        try:
            completed = subprocess.run([TIME, "-f", "%M", "-o", report.name, *command],
                                       capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            progress(f"    {' '.join(command)}: timed out")
            return None
        text = completed.stdout + completed.stderr
        if completed.returncode != 0 or "error" in text.lower():
            progress(f"    {command[0]}: failed ({completed.returncode}): {text.strip()[-200:]}")
            return None
        lines = report.read().split()
    return int(lines[-1]) if lines and lines[-1].isdigit() else None


def run_memory(arguments, built):
    if not os.access(TIME, os.X_OK):
        progress(f"forkjoin_peers --memory needs GNU time ({TIME}, Debian package time); skipped")
        return
    example = arguments.binary.resolve().parent.parent / "examples" / "coroutine_fib"
    commands = {"canopy": [str(example), str(MEMORY_FIB_ARGUMENT)]}
    if not os.access(example, os.X_OK):
        progress(f"forkjoin_peers --memory: {example} is not built; canopy left out")
        commands = {}
    threads = os.cpu_count() or 1
    for peer in PEERS:
        if (peer, "fib") in built:
            commands[peer] = peer_command(built[(peer, "fib")], "fib", threads, MEMORY_FIB_ARGUMENT)
    peaks = {runtime: [] for runtime in commands}
    for round_number in range(1, arguments.rounds + 1):
        for runtime, command in commands.items():
            progress(f"[memory, round {round_number}/{arguments.rounds}] {runtime}")
            peaks[runtime].append(peak_memory_kib(command, arguments.timeout))
    print(f"peak resident memory of fib({MEMORY_FIB_ARGUMENT}), {threads} worker(s) each "
          f"(Canopy: examples/coroutine_fib as shipped); median of {arguments.rounds} rounds; "
          "lower is better")
    canopy_peak = median_or_none(peaks.get("canopy", []))
    for runtime in RUNTIMES:
        peak = median_or_none(peaks.get(runtime, []))
        ratio = ""
        if runtime != "canopy" and peak and canopy_peak:
            ratio = f"  canopy/{runtime} {canopy_peak / peak:.2f}"
        shown = "n/a" if peak is None else f"{peak / 1024:.1f} MiB"
        print(f"  {runtime:<13} {shown}{ratio}")
    print("toolchains:")
    for line in peer_toolchains(arguments):
        print(f"  {line}")


def main():

    arguments = parse_arguments()
    if not (arguments.peers_src / "runtime-benchmarks").is_dir():
        print(f"forkjoin_peers: {arguments.peers_src} is absent: libfork and TooManyCooks "
              "are not built or run (the rest of the bench goes on)")
        return
    if not os.access(arguments.binary, os.X_OK):
        sys.exit(f"forkjoin_peers.py: {arguments.binary} is not an executable canopy_bench")
    try:
        thread_counts = [int(count) for count in arguments.threads.split(",") if count]
    except ValueError:
        sys.exit("forkjoin_peers.py: --threads takes comma-separated integers")
    built = build_peers(arguments)
    if arguments.instructions:
        run_instructions(arguments, built)
    elif arguments.memory:
        run_memory(arguments, built)
    else:
        run_table(arguments, built, thread_counts)


if __name__ == "__main__":
    main()
