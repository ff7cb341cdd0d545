"""What built each peer of the comparison table: printed under it by
run_bench.py, so that a ratio is never read without the compilers behind it.

Canopy, oneTBB and Asio are all in canopy_bench: one C++ compiler and one set
of flags (those of a workload's own compile command in the build folder's
compile_commands.json). rayon and tokio are in canopy_rust_peers; the rustc
that built it is read from the program itself (its .comment section holds
"rustc version ..."), so the line is right even when the program was built by
hand; --rustc only names the path ./run.sh bench used.

Needs only python3's standard library.
"""

import json
import re
import subprocess
from pathlib import Path

# The flags that decide how fast the code is; the rest of a compile command
# is include paths, warnings and dependency files.
SPEED_FLAG = re.compile(r"^(-O\S*|-std=\S+|-march=\S+|-mtune=\S+|-flto\S*|-fno-plt|-DNDEBUG|-g\S*)$")
BENCH_SOURCE = "bench/workloads/fib/canopy.cpp"


def first_line(command):
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=30,
                              check=False).stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "unknown"


def header_define(path, name):
    """The value of `#define name VALUE` in a header (quotes dropped), or
    "unknown"."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(f"#define {name} "):
                return line.split(None, 2)[2].strip().strip('"')
    except (OSError, IndexError):
        pass
    return "unknown"


def locked_version(crate):
    lock = Path(__file__).resolve().parent / "peers/rust/Cargo.lock"
    try:
        lines = lock.read_text().splitlines()
        for index, line in enumerate(lines):
            if line == f'name = "{crate}"' and index + 1 < len(lines):
                return lines[index + 1].split('"')[1]
    except (OSError, IndexError):
        pass
    return "unknown"


def cpp_toolchain(binary):
    """'compiler (flags; meson options)' of canopy_bench's build folder."""
    build = Path(binary).resolve().parent.parent
    compiler, flags, options = "unknown", "?", "?"
    try:
        commands = json.loads((build / "compile_commands.json").read_text())
        command = next((entry["command"] for entry in commands
                        if entry["file"].endswith(BENCH_SOURCE)), commands[0]["command"])
        words = command.split()
        if Path(words[0]).name == "ccache":
            # meson puts ccache in front of the compiler when it finds it.
            words = words[1:]
        compiler = first_line([words[0], "--version"])
        flags = " ".join(dict.fromkeys(word for word in words[1:] if SPEED_FLAG.match(word)))
    except (OSError, ValueError, IndexError, KeyError, StopIteration):
        pass
    try:
        values = {option["name"]: option["value"] for option in
                  json.loads((build / "meson-info/intro-buildoptions.json").read_text())}
        options = f"buildtype={values.get('buildtype')}, b_lto={values.get('b_lto')}"
    except (OSError, ValueError, KeyError):
        pass
    return f"{compiler} ({flags}; {options})"


def embedded_rustc(program):
    """The 'rustc version X (hash date)' a Rust program records, or None."""
    try:
        found = re.search(rb"rustc version [0-9][^\x00]*", Path(program).read_bytes())
    except OSError:
        return None
    return found.group(0).decode(errors="replace") if found else None


def describe(binary, rust_peers, rustc=None):
    """The lines printed under the table: one per program, naming its peers."""
    version_header = "/usr/include/oneapi/tbb/version.h"
    tbb = (f"{header_define(version_header, 'TBB_VERSION_MAJOR')}."
           f"{header_define(version_header, 'TBB_VERSION_MINOR')}")
    boost = header_define("/usr/include/boost/version.hpp", "BOOST_LIB_VERSION").replace("_", ".")
    lines = [f"canopy, tbb (oneTBB {tbb}), asio (Boost.Asio {boost}): {cpp_toolchain(binary)}"]
    rust = embedded_rustc(rust_peers)
    if rust is None and rustc is not None:
        rust = first_line([str(rustc), "--version"])
    where = f", {rustc}" if rustc else ""
    lines.append(f"rayon {locked_version('rayon')}, tokio {locked_version('tokio')}: "
                 f"{rust or 'not built'}{where} (release, LTO, codegen-units=1)")
    return lines
