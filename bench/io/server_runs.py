"""Running one server of bench/io_bench.py under the load generator: its CPU
time per run, the backend it reported, and its system calls per request.
Imported by io_bench.py (bench/io is on its path); not a program.

A server is (command, backend): backend "epoll" or "io_uring" runs it with
CANOPY_IO_BACKEND set to that and checks its exit line "io_backend NAME";
None (Asio) runs it as it is. Errors are RuntimeError (a server that did
not start or ran the wrong backend, a load generator that failed, a
counter that counted nothing), OSError, json.JSONDecodeError or
subprocess.TimeoutExpired; the caller reports them and goes on.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# The load generator is a Canopy program too: it stays on one backend.
CLIENT_ENVIRONMENT = {**os.environ, "CANOPY_IO_BACKEND": "epoll"}


def process_cpu(pid):
    """(ns summed over the live threads' schedstat, their ids, ns from
    /proc/PID/stat's utime + stime, which keeps the time of exited threads
    but counts in clock ticks)."""
    total, threads = 0, set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
            threads.add(task.name)
        except (OSError, ValueError, IndexError):
            pass
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    return total, threads, ticks * 1_000_000_000 // CLOCK_TICKS


def cpu_used_ns(before, after):
    """Precise schedstat sums when the threads stayed the same; else the
    coarser process total, which also counts threads that exited."""
    if before[1] == after[1]:
        return after[0] - before[0]
    return after[2] - before[2]


def start_server(command, environment):
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=environment)
    line = server.stdout.readline()
    if not line.startswith("listening on 127.0.0.1:"):
        stop_server(server)
        raise RuntimeError(f"{command[0]} did not start: {line!r}")
    return server, line.rsplit(":", 1)[1].strip()


def stop_server(server):
    """SIGTERM, wait, and the rest of its output (the Canopy servers print
    "io_backend NAME" on the way out)."""
    server.send_signal(signal.SIGTERM)
    try:
        rest, _ = server.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        rest, _ = server.communicate()
    return rest or ""


def check_backend(backend, output, command):
    if backend is None:
        return
    ran = [line.split()[1] for line in output.splitlines() if line.startswith("io_backend ")]
    if ran != [backend]:
        raise RuntimeError(f"{command[0]} asked for {backend} but reported {ran or 'nothing'}")


def run_load(load_command, port):
    load = subprocess.run(load_command + ["--port", port, "--json"], capture_output=True,
                          text=True, timeout=120, check=False, env=CLIENT_ENVIRONMENT)
    result = json.loads(load.stdout.strip().splitlines()[-1])
    if load.returncode != 0 and result.get("errors", 0) == 0:
        raise RuntimeError(f"canopy_load failed: {load.stderr.strip()}")
    if result.get("errors", 0):
        print(f"io bench: canopy_load reported errors: {load.stderr.strip()}", file=sys.stderr)
    return result


def run_server(peer, load_command):
    """Start a server, run the load against it, return (load JSON, server CPU ns)."""
    command, backend = peer
    environment = {**os.environ, "CANOPY_IO_BACKEND": backend} if backend else None
    server, port = start_server(command, environment)
    try:
        before = process_cpu(server.pid)
        result = run_load(load_command, port)
        cpu_used = cpu_used_ns(before, process_cpu(server.pid))
    finally:
        output = stop_server(server)
    check_backend(backend, output, command)
    return result, cpu_used


def count_syscalls(peer, load_command, seconds):
    """One short run under a system-call counter: (calls, requests served,
    the counter used, {name: calls} for the main calls)."""
    command, backend = peer
    environment = {**os.environ, "CANOPY_IO_BACKEND": backend} if backend else None
    server, port = start_server(command, environment)
    load = load_command + ["--seconds", str(seconds), "--warmup", "0"]
    counted = {}
    try:
        with tempfile.TemporaryDirectory() as scratch:
            report = Path(scratch) / "count"
            names = ["raw_syscalls:sys_enter"] + [f"syscalls:sys_enter_{name}"
                                                  for name in TRACKED_SYSCALLS]
            try:
                counter = subprocess.Popen(["perf", "stat", "-x", ",", "-o", str(report), "-e",
                                            ",".join(names), "-p", str(server.pid)],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                tool = "perf"
                time.sleep(0.5)  # attached to every thread before the load starts
            except FileNotFoundError:  # no perf on this machine
                counter = None
            if counter is None or counter.poll() is not None:  # perf cannot count here: strace
                counter = subprocess.Popen(["strace", "-c", "-f", "-o", str(report), "-p",
                                            str(server.pid)], stdout=subprocess.DEVNULL,
                                           stderr=subprocess.DEVNULL)
                tool = "strace"
                time.sleep(0.5)
            result = run_load(load, port)
            counter.send_signal(signal.SIGINT)
            counter.wait(timeout=30)
            text = report.read_text()
    finally:
        output = stop_server(server)
    check_backend(backend, output, command)
    for line in text.splitlines():
        if tool == "perf":  # "COUNT,,EVENT,..." per event; comments start with '#'
            fields = line.split(",")
            if len(fields) > 2 and fields[0].strip().isdigit():
                name = fields[2].strip()
                name = "total" if name == "raw_syscalls:sys_enter" else name.split("enter_")[-1]
                counted[name] = int(fields[0])
        else:  # strace -c: "% time  seconds  usecs/call  calls  [errors]  syscall|total"
            fields = line.split()
            try:
                float(fields[0])
                counted[fields[-1]] = int(fields[3])
            except (ValueError, IndexError):
                pass
    if "total" not in counted:
        raise RuntimeError(f"{tool} counted nothing: {text.strip()[:200]!r}")
    return counted.pop("total"), max(1, result["requests"]), tool, counted


TRACKED_SYSCALLS = ("io_uring_enter", "epoll_wait", "epoll_pwait", "recvfrom", "sendto", "read",
                    "write", "writev", "accept4", "close", "shutdown", "setsockopt", "epoll_ctl",
                    "futex")
