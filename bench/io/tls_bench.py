#!/usr/bin/python3
"""HTTPS: examples/https_hello --tls-cert/--tls-key beside nginx with ssl
(Debian's), Asio's ssl::stream (bench/asio_io_server --tls-cert/--tls-key)
and hyper over tokio-rustls (canopy_rust_peers hyper_server --mode tls).

usage: tls_bench.py BUILD_DIR [--rounds K] [--seconds S] [--connections 1,50]
                    [--rust-peers PATH] [--results DIR] [--no-build]

One certificate for every server, made for the run in a temporary folder:
EC P-256, self-signed, CN=localhost, SAN DNS:localhost and IP:127.0.0.1.
TLS 1.3 with TLS_AES_128_GCM_SHA256 and X25519 for every server: the
clients pin them (an OPENSSL_CONF that wrk and openssl read: MinProtocol
TLSv1.3, those Ciphersuites and Groups), since the rustls peer has no
option for them; examples/https_hello (--tls-ciphersuites, --tls-groups:
tls_server_options' ciphersuites and groups), nginx (ssl_protocols,
ssl_conf_command Ciphersuites, ssl_ecdh_curve) and the Asio peer pin them
on the server side too. Before the rounds each server's negotiated
protocol, suite and key exchange is printed (openssl s_client with the
pinned client configuration), and, beside it, what the server picks for
OpenSSL's default client.

Per server and round (servers in another order every round; nothing
pinned to cores, load generator and server share every core, every server
at its defaults: one worker per hardware thread):
  requests    wrk -t1 -cN --latency https://localhost:PORT/ (keep-alive;
              localhost, not 127.0.0.1: rustls refuses an IP address as
              SNI): requests/s, p50, p99, server CPU per request
  handshakes  openssl s_time -connect localhost:PORT -new (full) and
              -reuse (resumed) -www / (one client, one connection at a
              time, each a handshake and a GET /): handshakes/s over the
              wall time, server CPU per handshake and handshakes per server
              CPU-second, and how many -reuse connections did resume
Server CPU is the schedstat of every thread of the server's processes
(server_runs.py). The table shows medians over rounds and, for Canopy, the
ratio of its median to the best peer's (the highest rate, the lowest CPU).
JSON lines go to RESULTS/io_tls_latest.jsonl (default bench/results).
"""

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from defaults_bench import ROOT, Nginx, git, median, wrk  # noqa: E402
from server_runs import cpu_used_ns, process_cpu, start_server, stop_server  # noqa: E402

SUITE, GROUP = "TLS_AES_128_GCM_SHA256", "X25519"
CLIENT_CONF = f"""openssl_conf = openssl_init
[openssl_init]
ssl_conf = ssl_sect
[ssl_sect]
system_default = system_default_sect
[system_default_sect]
MinProtocol = TLSv1.3
Ciphersuites = {SUITE}
Groups = {GROUP}
"""


def parse_arguments():
    parser = argparse.ArgumentParser(description="HTTPS beside nginx, Asio and tokio-rustls.")
    parser.add_argument("build", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", default="1,50")
    parser.add_argument("--rust-peers", type=Path,
                        default=ROOT / "build-release/rust-peers/release/canopy_rust_peers")
    parser.add_argument("--results", type=Path, default=ROOT / "bench/results")
    parser.add_argument("--no-build", action="store_true")
    arguments = parser.parse_args()
    arguments.connections = [int(n) for n in arguments.connections.split(",") if n]
    if not arguments.connections:
        parser.error("--connections takes a list of numbers")
    return arguments


def make_certificate(folder):
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=DNS:localhost,IP:127.0.0.1"], check=True,
                   capture_output=True)
    return cert, key


def servers(arguments, cert, key):
    """name -> command (None: nginx)."""
    build = arguments.build
    tls = ["--tls-cert", str(cert), "--tls-key", str(key)]
    listed = {
        "canopy": [str(build / "examples/https_hello"), "0", *tls, "--tls-ciphersuites",
                   "TLS_AES_128_GCM_SHA256", "--tls-groups", "X25519"],
        "asio": [str(build / "bench/asio_io_server"), "0", "--mode", "http", "--threads",
                 str(os.cpu_count() or 1), "--layout", "shared", *tls],
    }
    if arguments.rust_peers.exists():
        listed["tokio_rustls"] = [str(arguments.rust_peers), "hyper_server", "--mode", "tls",
                                  "--cert", str(cert), "--key", str(key)]
    if Path("/usr/sbin/nginx").exists():
        listed["nginx"] = None
    return listed


class Server:
    """One server of the table, started; pids() for its CPU, stop()."""

    def __init__(self, command, cert, key):
        self.nginx = self.process = None
        if command is None:
            self.nginx = Nginx(" ssl", f"""
    ssl_certificate {cert};
    ssl_certificate_key {key};
    ssl_protocols TLSv1.3;
    ssl_conf_command Ciphersuites {SUITE};
    ssl_ecdh_curve {GROUP};
    ssl_session_cache shared:SSL:10m;""")
            self.port = self.nginx.port
        else:
            self.process, self.port = start_server(command, None)

    def pids(self):
        return self.nginx.pids() if self.nginx else [self.process.pid]

    def stop(self):
        if self.nginx:
            self.nginx.stop()
        else:
            stop_server(self.process)


def measured(server, work):
    """(work's result, server CPU ns while it ran)."""
    pids = server.pids()
    before = [process_cpu(pid) for pid in pids]
    result = work()
    after = [process_cpu(pid) for pid in pids]
    return result, sum(cpu_used_ns(b, a) for b, a in zip(before, after))


def negotiated(port, environment):
    """'TLSv1.3 TLS_AES_128_GCM_SHA256 X25519' as openssl s_client saw it."""
    out = subprocess.run(["openssl", "s_client", "-connect", f"localhost:{port}",
                          "-servername", "localhost"], stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=30, env=environment).stdout
    found = re.search(r"New, (\S+), Cipher is (\S+)", out)
    key = re.search(r"Server Temp Key: ([^,\n]+)", out)
    if not found:
        return "no handshake"
    return f"{found.group(1)} {found.group(2)} {key.group(1) if key else '?'}"


def s_time(port, mode, seconds, environment):
    """(handshakes, resumed, wall seconds) of one openssl s_time run."""
    started = time.monotonic()
    out = subprocess.run(["openssl", "s_time", "-connect", f"localhost:{port}", mode, "-www",
                          "/", "-time", str(seconds)], capture_output=True, text=True,
                         timeout=seconds + 60, env=environment).stdout
    wall = time.monotonic() - started
    counts = [int(m) for m in re.findall(r"^(\d+) connections in .* real seconds", out, re.M)]
    resumed = sum(line.count("r") for line in out.splitlines() if re.fullmatch(r"[*r]+", line))
    if not counts:
        raise RuntimeError(f"s_time printed no count: {out[-300:]!r}")
    return counts[-1], resumed, wall


def run_server(arguments, name, command, cert, key, environment, round_index):
    server = Server(command, cert, key)
    entries = []
    base = {"bench": "io_tls", "server": name, "round": round_index + 1,
            "seconds": arguments.seconds}
    try:
        for connections in arguments.connections:
            result, cpu = measured(server, lambda c=connections: wrk(
                server.port, c, arguments.seconds, f"https://localhost:{server.port}/",
                environment))
            entries.append({**base, "workload": f"https_{connections}",
                            "requests_per_second": result["requests_per_second"],
                            "p50_us": result.get("p50_us"), "p99_us": result.get("p99_us"),
                            "server_cpu_us_per_request":
                                cpu / 1000.0 / max(1, result.get("requests", 1)),
                            "errors": result.get("errors", 0)})
        for mode, label in (("-new", "handshake_full"), ("-reuse", "handshake_resumed")):
            (count, resumed, wall), cpu = measured(server, lambda m=mode: s_time(
                server.port, m, arguments.seconds, environment))
            entries.append({**base, "workload": label, "handshakes_per_second": count / wall,
                            "handshakes": count, "resumed": resumed,
                            "server_cpu_us_per_handshake": cpu / 1000.0 / max(1, count),
                            "handshakes_per_cpu_second": count / (cpu / 1e9) if cpu else None})
    finally:
        server.stop()
    return entries


def toolchain(arguments):
    def first_line(command):
        run = subprocess.run(command, capture_output=True, text=True)
        return ((run.stdout or run.stderr).strip().splitlines() or ["?"])[0]

    lines = [first_line(["c++", "--version"]), f"kernel {platform.release()}",
             f"{os.cpu_count()} hardware threads", first_line(["openssl", "version"])]
    boost = Path("/usr/include/boost/version.hpp")
    if boost.exists():
        found = re.search(r'BOOST_LIB_VERSION "(\S+)"', boost.read_text())
        lines.append(f"Boost {found.group(1) if found else '?'} (asio peer)")
    if arguments.rust_peers.exists():
        rustc = os.environ.get("CANOPY_BENCH_RUSTC") or str(Path.home() / ".cargo/bin/rustc")
        if not Path(rustc).exists():
            rustc = "/usr/bin/rustc"
        lines.append("tokio-rustls peer: " + first_line([rustc, "--version"]))
    if Path("/usr/sbin/nginx").exists():
        lines.append(first_line(["/usr/sbin/nginx", "-v"]))
    return lines


def print_table(arguments, table, head, dirty):
    print(f"\nHTTPS (head {head[:10]}{' +changes' if dirty else ''}); {arguments.rounds} rounds "
          f"of {arguments.seconds} s, medians; TLS 1.3 {SUITE} {GROUP}; load generator on "
          "the same cores")
    print(f"{'workload':<18} {'server':<13} {'req/s':>9} {'p50 us':>8} {'p99 us':>9} "
          f"{'CPU us/req':>10}")
    for workload, rows in table.items():
        if not workload.startswith("https"):
            continue
        for name, entries in rows.items():
            p50 = median([e["p50_us"] for e in entries])
            p99 = median([e["p99_us"] for e in entries])
            print(f"{workload:<18} {name:<13} "
                  f"{median([e['requests_per_second'] for e in entries]):>9,.0f} "
                  f"{p50 or 0:>8.0f} {p99 or 0:>9.0f} "
                  f"{median([e['server_cpu_us_per_request'] for e in entries]):>10.2f}")
    print(f"{'workload':<18} {'server':<13} {'hs/s':>9} {'CPU us/hs':>10} {'hs/CPU-s':>9} "
          f"{'resumed':>8}")
    for workload, rows in table.items():
        if workload.startswith("https"):
            continue
        for name, entries in rows.items():
            print(f"{workload:<18} {name:<13} "
                  f"{median([e['handshakes_per_second'] for e in entries]):>9,.0f} "
                  f"{median([e['server_cpu_us_per_handshake'] for e in entries]):>10.1f} "
                  f"{median([e['handshakes_per_cpu_second'] for e in entries]) or 0:>9,.0f} "
                  f"{sum(e['resumed'] for e in entries):>4}/"
                  f"{sum(e['handshakes'] for e in entries)}")
    print("Canopy / best peer (targets: rates >= 1, CPU <= 1):")
    keys = {"https": (("requests_per_second", max), ("p99_us", min),
                      ("server_cpu_us_per_request", min)),
            "handshake": (("handshakes_per_second", max), ("server_cpu_us_per_handshake", min),
                          ("handshakes_per_cpu_second", max))}
    for workload, rows in table.items():
        if "canopy" not in rows:
            continue
        parts = []
        for key, best in keys["https" if workload.startswith("https") else "handshake"]:
            ours = median([e[key] for e in rows["canopy"]])
            peers = {n: median([e[key] for e in es]) for n, es in rows.items() if n != "canopy"}
            peers = {n: v for n, v in peers.items() if v}
            if ours is None or not peers:
                continue
            peer = best(peers, key=peers.get)
            parts.append(f"{key} {ours / peers[peer]:.2f} (vs {peer})")
        print(f"  {workload:<18} " + "; ".join(parts))


def main():
    arguments = parse_arguments()
    arguments.build = arguments.build.resolve()
    if not arguments.no_build:
        subprocess.run(["ninja", "-C", str(arguments.build), "examples/https_hello",
                        "bench/asio_io_server"], check=True, stdout=sys.stderr)
    for tool in ("wrk", "openssl"):
        if not shutil.which(tool):
            sys.exit(f"tls_bench.py: {tool} is not installed (./run.sh bench installs it)")
    head = git("rev-parse", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    load_before = os.getloadavg()[0]
    lines, table = [], {}
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        cert, key = make_certificate(folder)
        (folder / "client.cnf").write_text(CLIENT_CONF)
        pinned = {**os.environ, "OPENSSL_CONF": str(folder / "client.cnf")}
        listed = servers(arguments, cert, key)
        negotiation = {}
        for name, command in listed.items():
            try:
                server = Server(command, cert, key)
            except (RuntimeError, OSError) as error:
                print(f"tls bench: {name} did not start: {error}", file=sys.stderr)
                continue
            try:
                negotiation[name] = (negotiated(server.port, pinned),
                                     negotiated(server.port, None))
            finally:
                server.stop()
        for round_index in range(arguments.rounds):
            names = list(listed)
            shift = round_index % len(names)
            for name in names[shift:] + names[:shift]:
                print(f"tls bench: round {round_index + 1}, {name}", file=sys.stderr)
                try:
                    entries = run_server(arguments, name, listed[name], cert, key, pinned,
                                         round_index)
                except (RuntimeError, OSError, ValueError, IndexError,
                        subprocess.SubprocessError) as error:
                    print(f"tls bench: {name} failed: {error}", file=sys.stderr)
                    continue
                for entry in entries:
                    lines.append(entry)
                    table.setdefault(entry["workload"], {}).setdefault(name, []).append(entry)
    load_after = os.getloadavg()[0]
    tools = toolchain(arguments)
    lines.append({"run": "io_tls", "head": head + (" (uncommitted changes)" if dirty else ""),
                  "load_average_before": load_before, "load_average_after": load_after,
                  "negotiated": negotiation, "toolchain": tools})
    arguments.results.mkdir(parents=True, exist_ok=True)
    with (arguments.results / "io_tls_latest.jsonl").open("w") as output:
        for entry in lines:
            output.write(json.dumps(entry) + "\n")

    print_table(arguments, table, head, dirty)
    print("negotiated (pinned clients; in brackets: the server's pick for OpenSSL's default "
          "client):")
    for name, (pinned_choice, own_choice) in negotiation.items():
        print(f"  {name:<13} {pinned_choice}   [{own_choice}]")
    for line in tools:
        print(line)
    print(f"load average before {load_before:.2f}, after {load_after:.2f}; errors: "
          f"{sum(e.get('errors', 0) for e in lines)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
