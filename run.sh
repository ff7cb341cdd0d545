#!/usr/bin/env bash
# Canopy's one entry point.
#   ./run.sh demo [--seconds S] [--connections N]
#                                      the main job: the HTTP example under load
#                                      (--cpu: the CPU demo instead)
#   ./run.sh test [--sanitize=thread|address | --compiler=clang]
#                                      build and run every test; last line:
#                                      "tests: N passed, M failed"
#   ./run.sh bench [--scaling] [--instructions] [--rounds K] [--no-comparison]
#                                      Release build, Canopy vs oneTBB vs Boost.Asio
#                                      (bench/README.md has every option)
# Missing Debian packages are installed with apt-get (as root, or via sudo).
set -euo pipefail
cd "$(dirname "$0")"

core_packages=(g++ meson ninja-build pkg-config doctest-dev libboost-context-dev cmake)
bench_packages=(libtbb-dev libboost-dev gnuplot-nox python3 valgrind)

ensure_packages() {
  local missing=()
  for package in "$@"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
      missing+=("$package")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "run.sh: installing missing packages: ${missing[*]}" >&2
  local sudo=()
  [ "$(id -u)" -ne 0 ] && sudo=(sudo)
  "${sudo[@]}" apt-get update -qq >&2 || true
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >&2
}

# configure DIR [meson options...]: set up (once) and build DIR.
configure() {
  local dir=$1
  shift
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" >&2
  fi
}

configure_and_build() {
  configure "$@"
  ninja -C "$1" >&2
}

run_tests() {
  local sanitize="" compiler=gcc
  for argument in "$@"; do
    case "$argument" in
      --sanitize=thread | --sanitize=address) sanitize=${argument#--sanitize=} ;;
      --compiler=gcc | --compiler=clang) compiler=${argument#--compiler=} ;;
      *)
        echo "run.sh test: unknown option '$argument'" \
          "(use --sanitize=thread|address, --compiler=gcc|clang)" >&2
        exit 2
        ;;
    esac
  done
  if [ "$compiler" = clang ] && [ -n "$sanitize" ]; then
    echo "run.sh test: --compiler=clang runs the plain suite only" >&2
    exit 2
  fi
  ensure_packages "${core_packages[@]}"
  local dir=build runner=() options=()
  if [ "$compiler" = clang ]; then
    ensure_packages clang
    dir=build-clang
    export CXX=clang++
  fi
  export CANOPY_STRESS_DIVISOR=1 CANOPY_TIMEOUT_SCALE=1
  case "$sanitize" in
    thread)
      dir=build-tsan
      options=(-Db_sanitize=thread -Db_lundef=false)
      export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
      export CANOPY_STRESS_DIVISOR=20 CANOPY_TIMEOUT_SCALE=10
      # TSan's shadow memory layout rejects high-entropy ASLR on new kernels:
      # run without address randomisation where the sandbox allows it.
      if setarch "$(uname -m)" -R true 2>/dev/null; then
        runner=(setarch "$(uname -m)" -R)
      fi
      ;;
    address)
      dir=build-asan
      options=(-Db_sanitize=address,undefined -Db_lundef=false)
      export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
      export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
      export CANOPY_STRESS_DIVISOR=10 CANOPY_TIMEOUT_SCALE=5
      ;;
  esac
  if ! configure_and_build "$dir" "${options[@]}"; then
    echo "tests: 0 passed, 1 failed (the build failed)"
    exit 1
  fi

  local passed=0 failed=0
  local binaries
  binaries=$(find "$dir/tests" -maxdepth 1 -type f -name '*_test' -perm -u+x | sort)
  for binary in $binaries; do
    local name log status summary
    name=$(basename "$binary")
    log=$(mktemp)
    echo "== $name${sanitize:+ ($sanitize)}" >&2
    set +e
    timeout 1500 "${runner[@]}" "$binary" >"$log" 2>&1
    status=$?
    set -e
    summary=$(grep -E '^\[doctest\] test cases:' "$log" | tail -1 || true)
    if [ -n "$summary" ]; then
      local ok bad
      ok=$(echo "$summary" | sed -E 's/.*\| *([0-9]+) passed.*/\1/')
      bad=$(echo "$summary" | sed -E 's/.*\| *([0-9]+) failed.*/\1/')
      passed=$((passed + ok))
      failed=$((failed + bad))
      if [ "$status" -ne 0 ] && [ "$bad" -eq 0 ]; then
        failed=$((failed + 1))  # clean summary but non-zero exit: a sanitizer report
      fi
    else
      failed=$((failed + 1))    # crashed, hung (watchdog) or killed before its summary
    fi
    if [ "$status" -ne 0 ]; then
      echo "-- $name FAILED (exit $status); its output:" >&2
      tail -60 "$log" >&2
    else
      echo "   $summary" >&2
    fi
    rm -f "$log"
  done
  # The README's example must build and run (exit 0 checks its results).
  if [ -x "$dir/examples/quick_start" ]; then
    echo "== quick_start (README example)" >&2
    if timeout 300 "${runner[@]}" "$dir/examples/quick_start" >&2; then
      passed=$((passed + 1))
    else
      echo "-- quick_start FAILED" >&2
      failed=$((failed + 1))
    fi
  fi
  # Canopy as a user gets it: install into a temporary prefix and build a
  # small program against it three ways (tests/consumer/run.sh), counted as
  # one test each. Plain gcc suite only: it builds its own unsanitized
  # copy, which the sanitizer and clang suites would not test anything new in.
  if [ -z "$sanitize" ] && [ "$compiler" = gcc ]; then
    local consumer_summary
    consumer_summary=$(bash tests/consumer/run.sh | tail -1) || true
    if [[ "$consumer_summary" =~ ^consumer:\ ([0-9]+)\ passed,\ ([0-9]+)\ failed ]]; then
      passed=$((passed + BASH_REMATCH[1]))
      failed=$((failed + BASH_REMATCH[2]))
    else
      echo "-- consumer test FAILED: no summary line" >&2
      failed=$((failed + 1))
    fi
  else
    echo "== consumer (install + pkg-config/CMake/meson): skipped, runs in the plain gcc suite" >&2
  fi
  echo "tests: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}

# Release builds use link-time optimisation: callgrind counted 5.5 % fewer
# instructions for fib(30) and 11 % fewer for fib_fiber with it
# (docs/performance.md, entry 7).
release_options=(--buildtype=release -Db_lto=true)

run_demo() {
  ensure_packages "${core_packages[@]}" python3
  configure build-release "${release_options[@]}"
  if [ "${1:-}" = "--cpu" ]; then
    shift
    ninja -C build-release demo/canopy_demo >&2  # only what runs: LTO links are slow
    ./build-release/demo/canopy_demo "$@"
    return
  fi
  ninja -C build-release examples/http_hello demo/canopy_load >&2
  python3 demo/http_demo.py build-release "$@"
}

run_bench() {
  ensure_packages "${core_packages[@]}" "${bench_packages[@]}"
  configure build-release "${release_options[@]}"
  meson configure build-release -Dbench=true -Db_lto=true >&2
  ninja -C build-release bench/canopy_bench >&2
  bash bench/run_bench.sh build-release/bench/canopy_bench "$@"
}

command=${1:-}
[ $# -gt 0 ] && shift
case "$command" in
  test) run_tests "$@" ;;
  demo) run_demo "$@" ;;
  bench) run_bench "$@" ;;
  *)
    echo "usage: ./run.sh demo | test [--sanitize=thread|address | --compiler=clang] | bench [--scaling] [--instructions] [--rounds K] [--no-comparison]" >&2
    exit 2
    ;;
esac
# ./run.sh demo [--seconds S] [--connections N] [--server-threads T] [--client-threads T]:
# examples/http_hello under canopy_load on 127.0.0.1, then a summary
# (demo/http_demo.py). ./run.sh demo --cpu [...]: the CPU demo (canopy_demo).
