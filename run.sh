#!/usr/bin/env bash
# Canopy's one entry point.
#   ./run.sh demo [--seconds S] [--connections N]
#                                      the main job: the HTTP example under load
#                                      (--cpu: the CPU demo instead; --tls: HTTPS under
#                                      wrk, then the handshake rate)
#   ./run.sh test [--sanitize=thread|address] [--compiler=clang]
#                                      build and run every test; last line:
#                                      "tests: N passed, M failed" (CI: the
#                                      plain suite, TSan with clang, ASan+UBSan)
#   ./run.sh test --fuzz=SECONDS       run every libFuzzer target (tests/fuzz) for
#                                      SECONDS each (clang, ASan+UBSan)
#   ./run.sh test --mutants            the model check and Relacy against each mutant
#                                      of their tables (tests/model/mutants.sh; CI runs it)
#   ./run.sh test --mutants=model      the model check's table only
#   ./run.sh soak [--minutes M | --seconds S] [--sanitize=thread] [--seed N]
#                                      mixed load with exactly-once accounting (soak/)
#   ./run.sh bench [--compiler=clang] [--scaling] [--instructions] [--rounds K] [--no-comparison]
#                                      Release build, Canopy vs oneTBB, Boost.Asio, rayon
#                                      and tokio (and libfork, TooManyCooks when
#                                      ../shared/peers-src holds them); --compiler=clang:
#                                      built with clang 19
#                                      (bench/README.md has every option)
# Missing Debian packages are installed with apt-get (as root, or via sudo).
set -euo pipefail
cd "$(dirname "$0")"

core_packages=(g++ meson ninja-build pkg-config doctest-dev libboost-context-dev cmake relacy-dev curl apache2-utils liburing-dev libssl-dev openssl)
bench_packages=(libtbb-dev libboost-dev gnuplot-nox python3 valgrind strace wrk nginx
  cargo rustc librust-rayon-dev librust-tokio-dev librust-hyper-dev librust-tokio-rustls-dev
  librust-rustls-pemfile-dev librust-libc-dev
  clang-19 libhwloc-dev libgoogle-perftools-dev time)

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

# configure DIR [meson options...]: set DIR up (once).
configure() {
  local dir=$1
  shift
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" >&2
  elif meson introspect "$dir" --buildoptions 2>/dev/null |
    grep -q '"name": "default_library", "value": "shared"'; then
    # Set up before the libraries became static by default (meson keeps an
    # existing folder's options): LTO and the instruction counts assume static.
    meson configure "$dir" -Ddefault_library=static >&2
  fi
}

# record_failure TITLE [LOG]: print a failed step's title and the tail of its
# log on stderr and, where CANOPY_FAILURE_LOG names a file (.ci/run sets it),
# append both there too, so that CI can print every failure again at the end
# of its output, where a log excerpt shows it.
record_failure() {
  local title=$1 log=${2:-}
  {
    echo "-- $title"
    if [ -n "$log" ] && [ -f "$log" ]; then tail -60 "$log"; fi
  } | if [ -n "${CANOPY_FAILURE_LOG:-}" ]; then tee -a "$CANOPY_FAILURE_LOG" >&2; else cat >&2; fi
}

run_tests() {
  local sanitize="" compiler=gcc fuzz_seconds="" mutants=""
  for argument in "$@"; do
    case "$argument" in
      --mutants) mutants=all ;;
      --mutants=model) mutants=model ;;
      --fuzz=*)
        fuzz_seconds=${argument#--fuzz=}
        if ! [[ "$fuzz_seconds" =~ ^[1-9][0-9]*$ ]]; then
          echo "run.sh test: --fuzz needs a whole number of seconds, got '$fuzz_seconds'" >&2
          exit 2
        fi
        ;;
      --sanitize=thread | --sanitize=address) sanitize=${argument#--sanitize=} ;;
      --compiler=gcc | --compiler=clang) compiler=${argument#--compiler=} ;;
      *)
        echo "run.sh test: unknown option '$argument'" \
          "(use --sanitize=thread|address, --compiler=gcc|clang (either or both), --fuzz=SECONDS, --mutants[=model])" >&2
        exit 2
        ;;
    esac
  done
  ensure_packages "${core_packages[@]}"
  if [ -n "$mutants" ]; then
    # The model check's mutation table (tests/model/mutants.sh): each safety
    # step removed in a scratch copy; one test per row (the real sources'
    # row of each table included). --mutants=model: not the Relacy table.
    local summary log options=()
    [ "$mutants" = model ] && options=(--model-only)
    log=$(mktemp)
    bash tests/model/mutants.sh "${options[@]}" 2>&1 | tee "$log" >&2 || true
    summary=$(grep -E '^mutants: ' "$log" | tail -1 || true)
    if [[ "$summary" =~ ^mutants:\ ([0-9]+)\ as\ expected,\ ([0-9]+)\ not$ ]]; then
      passed=${BASH_REMATCH[1]} failed=${BASH_REMATCH[2]}
    else
      passed=0 failed=1
    fi
    if [ "$failed" -ne 0 ]; then
      record_failure "tests/model/mutants.sh ${options[*]}: not as its tables say; its output:" "$log"
    fi
    rm -f "$log"
    echo "tests: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    return
  fi
  if [ -n "$fuzz_seconds" ]; then
    passed=0 failed=0
    run_fuzzers "$fuzz_seconds"
    echo "tests: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
    return
  fi
  local dir=build runner=() options=()
  # The sanitizer builds compile at -O1 with line tables only (-g1), what
  # the sanitizers' own documentation advises: at -O2 -g the ASan+UBSan
  # build took most of a CI run's time, and a report still names file
  # and line. The clang build does too: it is there for a second
  # compiler's reading of the code, the optimised build is the gcc one,
  # and at -O2 -g it was a fifth of CI's time.
  local sanitizer_codegen=(-Doptimization=1 -Dcpp_args=-g1)
  # The plain gcc build keeps -O2, the optimisation users build with, and
  # takes line tables only too: a failure's stack still names file and
  # line, and the compiles and links write a fraction of the debug
  # information (variables, types) that no test reads.
  options=(-Dcpp_args=-g1)
  if [ "$compiler" = clang ]; then
    # Debian 12's clang 19, the compiler ./run.sh bench --compiler=clang
    # measures (the default clang is 14).
    ensure_packages clang-19
    dir=build-clang19
    export CXX=clang++-19
    options=("${sanitizer_codegen[@]}")
  fi
  # A sanitizer suite's folder names the compiler when it is clang.
  local dir_suffix=""
  [ "$compiler" = clang ] && dir_suffix=-clang19
  export CANOPY_STRESS_DIVISOR=1 CANOPY_TIMEOUT_SCALE=1
  case "$sanitize" in
    thread)
      dir=build-tsan$dir_suffix
      options=(-Db_sanitize=thread -Db_lundef=false "${sanitizer_codegen[@]}")
      export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
      export CANOPY_STRESS_DIVISOR=20 CANOPY_TIMEOUT_SCALE=10
      # TSan's shadow memory layout rejects high-entropy ASLR on new kernels:
      # run without address randomisation where the sandbox allows it.
      if setarch "$(uname -m)" -R true 2>/dev/null; then
        runner=(setarch "$(uname -m)" -R)
      fi
      ;;
    address)
      dir=build-asan$dir_suffix
      # shellcheck disable=SC2054 # the comma is inside one meson option
      options=(-Db_sanitize=address,undefined -Db_lundef=false "${sanitizer_codegen[@]}")
      export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
      export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
      export CANOPY_STRESS_DIVISOR=10 CANOPY_TIMEOUT_SCALE=5
      ;;
  esac
  if [ "$compiler" = clang ] && [ -n "$sanitize" ]; then
    # clang links its sanitizer runtimes statically by default, and TSan's
    # then defines operator new itself: a test that replaces it to count
    # allocations (tests/allocation_counter.cpp) would not link. The shared
    # runtime, as g++ uses, lets the program's own operator new win; the
    # run path names its folder.
    ensure_packages libclang-rt-19-dev  # clang 19's sanitizer runtimes
    local runtime
    runtime=$(dirname "$(clang++-19 -print-file-name=libclang_rt.tsan-x86_64.so)")
    options+=("-Dcpp_link_args=['-shared-libsan', '-Wl,-rpath,$runtime']")
  fi
  # The examples this suite runs itself (below), and those the tests run
  # (http_hello: the HTTP tests; kv_server: kv_server_test).
  local run_examples=(quick_start embed_in_epoll_loop embed_in_asio)
  local build_targets=()
  if [ -n "$sanitize" ]; then
    # A sanitizer suite builds only what it runs: the tests, those
    # examples and the soak. The other programs (demo, the other
    # examples) would only be compiled again with the sanitizer's
    # instrumentation and never run, so they could report nothing; the
    # plain and clang suites build every program, and the consumer check
    # builds the examples against the installed tree.
    build_targets=(meson-test-prereq "${run_examples[@]/#/examples/}" examples/http_hello
      examples/kv_server soak/canopy_soak)
  fi
  local suite_start=$SECONDS step_start=$SECONDS
  if ! { configure "$dir" "${options[@]}" && ninja -C "$dir" "${build_targets[@]}" >&2; }; then
    local build_log
    build_log=$(mktemp)
    ninja -C "$dir" "${build_targets[@]}" >"$build_log" 2>&1 || true
    record_failure "the build of $dir failed; ninja's output:" "$build_log"
    rm -f "$build_log"
    echo "tests: 0 passed, 1 failed (the build failed)"
    exit 1
  fi
  echo "== build of $dir: $((SECONDS - step_start)) s" >&2

  passed=0 failed=0
  local binaries
  binaries=$(find "$dir/tests" -maxdepth 1 -type f -name '*_test' -perm -u+x | sort)
  # The I/O suite runs twice, once per backend (CANOPY_IO_BACKEND=epoll,
  # then io_uring). In a build without the io_uring backend (liburing-dev
  # not found, or -Dio_uring=disabled: ninja knows no io_uring_test) the I/O
  # tests run once, on epoll, and the io_uring tests not at all. Otherwise
  # io_uring_test's probe says first whether io_uring runs on this machine;
  # where it does not, that is said once with the reason, the io_uring tests
  # accept it (CANOPY_IO_URING_UNAVAILABLE_OK=1) and the rest of the I/O
  # suite runs on epoll only. The summary says which.
  local io_tests='^(io_[a-z_]+|timer|http_server(_[a-z]+)?|chat_server|kv_server|buffered_reader)_test$'
  local uring_tests='^io_uring(_[a-z]+)?_test$'
  # The clang suite is there for a second compiler's reading of the code.
  # The I/O tests whose subject sits above the backend (HTTP, TLS, the
  # buffered reader, the example servers) reach the backends through the
  # same stream operations that the socket-level tests exercise, and the
  # gcc suites run them on both backends: the plain clang suite runs them
  # once, on io_uring where it runs (the backend with more of its own code
  # under those operations), else on epoll. The socket-level, timer and
  # io_uring tests still run on both there too. A clang sanitizer suite
  # runs every I/O test on both backends, as the gcc ones do.
  local above_backend_tests='^(http_server(_[a-z]+)?|chat_server|kv_server|buffered_reader|io_tls(_[a-z]+)?)_test$'
  local uring_built=1 uring_usable=1 uring_note="" probe_line runs=() binary
  if ! ninja -C "$dir" -t query tests/io_uring_test >/dev/null 2>&1; then
    uring_built=0 uring_usable=0
    uring_note="io_uring: not built (liburing-dev not found or -Dio_uring=disabled);"
    uring_note+=" the I/O tests ran once, on epoll"
    echo "== $uring_note" >&2
  else
    probe_line=$(env -u CANOPY_IO_BACKEND "${runner[@]}" "$dir/tests/io_uring_test" \
      --test-case='probe:*' 2>&1 | grep -m1 '^canopy-io-probe: ' || true)
    if [[ "$probe_line" != *"io_uring=runs"* ]]; then
      uring_usable=0
      if [ -z "$probe_line" ]; then
        record_failure "io_uring probe FAILED: $dir/tests/io_uring_test printed no probe line"
        failed=$((failed + 1))
      fi
      uring_note="io_uring: built, unavailable on this machine (${probe_line#canopy-io-probe: });"
      uring_note+=" the I/O tests ran on epoll, the io_uring tests accepted that"
      echo "== io_uring unavailable on this machine, its pass runs only the io_uring tests:" \
        "${probe_line#canopy-io-probe: }" >&2
    fi
  fi
  # The model check and Relacy run every thread of their scenarios on one
  # OS thread (fibers, Relacy's own scheduler): ThreadSanitizer has no race
  # to see there, and the model check under it took a tenth of the TSan
  # suite. They run in the other three suites and in the mutant tables; a
  # TSan build does not build them (tests/meson.build), and a binary left
  # by an earlier configuration is not run.
  local one_thread_checkers='^(model_check|relacy_wake)_test$' checker
  if [ "$sanitize" = thread ]; then
    for checker in model_check_test relacy_wake_test; do
      echo "== $checker (thread): not built or run, its scenarios share one OS thread" >&2
    done
  fi
  for binary in $binaries; do
    if [ "$sanitize" = thread ] && [[ $(basename "$binary") =~ $one_thread_checkers ]]; then
      continue
    fi
    if [ "$compiler" = clang ] && [ -z "$sanitize" ] &&
      [[ $(basename "$binary") =~ $above_backend_tests ]]; then
      if [ "$uring_usable" -eq 1 ]; then
        runs+=("$binary io_uring")
      else
        runs+=("$binary epoll")
      fi
    elif [[ $(basename "$binary") =~ $io_tests ]]; then
      runs+=("$binary epoll" "$binary io_uring")
    else
      runs+=("$binary -")
    fi
  done
  if [ "$compiler" = clang ] && [ -z "$sanitize" ]; then
    echo "== the I/O tests above the backend (HTTP, TLS, buffered reader, example servers):" \
      "once, on $([ "$uring_usable" -eq 1 ] && echo io_uring || echo epoll), in this suite" >&2
  fi
  # The model check explores on one OS thread and is among a suite's
  # longest runs: it runs as two halves side by side, so that the second
  # core is not idle meanwhile.
  local run two_halves='^model_check_test$'
  for run in "${runs[@]}"; do
    local name log status summary backend=${run##* } environment=()
    binary=${run% *}
    name=$(basename "$binary")
    if [ "$backend" != - ]; then
      environment=("CANOPY_IO_BACKEND=$backend")
      if [ "$uring_usable" -eq 0 ]; then
        if [[ "$name" =~ $uring_tests ]]; then
          if [ "$uring_built" -eq 0 ]; then
            continue  # not built: a binary left here by an earlier configuration
          fi
          environment+=(CANOPY_IO_URING_UNAVAILABLE_OK=1)
        elif [ "$backend" = io_uring ]; then
          continue
        fi
      fi
      name="$name [$backend]"
    fi
    log=$(mktemp)
    echo "== $name${sanitize:+ ($sanitize)}" >&2
    step_start=$SECONDS
    set +e
    if [[ "$name" =~ $two_halves ]]; then
      # Its cases in two processes side by side, the "model: " cases and
      # the others (one filter, kept and left out: every case runs once);
      # LOG gets both outputs, each with its summary line, a failed half
      # last (where a failure's excerpt, LOG's tail, shows it).
      local half_log other_status
      half_log=$(mktemp)
      timeout 1500 env "${environment[@]}" "${runner[@]}" "$binary" --test-case='model: *' \
        >"$half_log" 2>&1 &
      timeout 1500 env "${environment[@]}" "${runner[@]}" "$binary" \
        --test-case-exclude='model: *' >"$log" 2>&1
      other_status=$?
      wait $!
      status=$?
      if [ "$other_status" -ne 0 ]; then
        cat "$log" >>"$half_log"
        mv "$half_log" "$log"
        status=$other_status
      else
        cat "$half_log" >>"$log"
        rm -f "$half_log"
      fi
    else
      timeout 1500 env "${environment[@]}" "${runner[@]}" "$binary" >"$log" 2>&1
      status=$?
    fi
    set -e
    summary=$(grep -E '^\[doctest\] test cases:' "$log" || true)
    if [ -n "$summary" ]; then
      local ok=0 bad=0 line
      while read -r line; do
        ok=$((ok + $(echo "$line" | sed -E 's/.*\| *([0-9]+) passed.*/\1/')))
        bad=$((bad + $(echo "$line" | sed -E 's/.*\| *([0-9]+) failed.*/\1/')))
      done <<<"$summary"
      summary=$(echo "$summary" | paste -sd '+' | sed 's/+/ + /g')
      passed=$((passed + ok))
      failed=$((failed + bad))
      if [ "$status" -ne 0 ] && [ "$bad" -eq 0 ]; then
        failed=$((failed + 1))  # clean summary but non-zero exit: a sanitizer report
      fi
    else
      failed=$((failed + 1))    # crashed, hung (watchdog) or killed before its summary
    fi
    if [ "$status" -ne 0 ]; then
      record_failure "$name${sanitize:+ ($sanitize)} FAILED (exit $status, after $((SECONDS - step_start)) s); its output:" "$log"
    else
      echo "   $summary ($((SECONDS - step_start)) s)" >&2
    fi
    rm -f "$log"
  done
  # The README's example and the embedding examples must build and run
  # (each exits 0 only if its own checks held).
  local example arguments
  for example in "${run_examples[@]}"; do
    arguments=()
    if [ "$example" = embed_in_epoll_loop ]; then
      arguments=($((20000 / CANOPY_STRESS_DIVISOR)))
    fi
    if [ -x "$dir/examples/$example" ]; then
      echo "== $example (example)" >&2
      log=$(mktemp)
      if timeout 300 "${runner[@]}" "$dir/examples/$example" "${arguments[@]}" >"$log" 2>&1; then
        cat "$log" >&2
        passed=$((passed + 1))
      else
        record_failure "$example${sanitize:+ ($sanitize)} FAILED (exit $?); its output:" "$log"
        failed=$((failed + 1))
      fi
      rm -f "$log"
    else
      record_failure "$example FAILED: not built"
      failed=$((failed + 1))
    fi
  done
  # A short soak (soak/): exactly-once accounting under mixed load, counted
  # as one test; its monitor exits with a dump instead of hanging.
  if ninja -C "$dir" soak/canopy_soak >&2; then
    echo "== canopy_soak (5 s)${sanitize:+ ($sanitize)}" >&2
    log=$(mktemp)
    if timeout 900 "${runner[@]}" "$dir/soak/canopy_soak" --seconds 5 >"$log" 2>&1; then
      cat "$log" >&2
      passed=$((passed + 1))
    else
      record_failure "canopy_soak${sanitize:+ ($sanitize)} FAILED (exit $?); its output:" "$log"
      failed=$((failed + 1))
    fi
    rm -f "$log"
  else
    record_failure "canopy_soak FAILED: not built"
    failed=$((failed + 1))
  fi
  # The fuzz targets, a few seconds each, in the plain gcc run only (they
  # have their own clang + ASan/UBSan build).
  if [ -z "$sanitize" ] && [ "$compiler" = gcc ]; then
    step_start=$SECONDS
    run_fuzzers 3
    echo "== fuzz targets: $((SECONDS - step_start)) s" >&2
  fi
  # Canopy as a user gets it: install this suite's build into a temporary
  # prefix and build a small program against it three ways
  # (tests/consumer/run.sh), counted as one test each; the meson subproject
  # and the build without fibers, io_uring and TLS are its own builds.
  # Plain gcc suite only: the sanitizer and clang suites would not test
  # anything new in it.
  if [ -z "$sanitize" ] && [ "$compiler" = gcc ]; then
    ensure_packages clang-19  # the consumer builds one program with clang++ too
    local consumer_summary consumer_log
    consumer_log=$(mktemp)
    step_start=$SECONDS
    consumer_summary=$(bash tests/consumer/run.sh --install-from "$dir" 2>"$consumer_log" | tail -1) || true
    cat "$consumer_log" >&2
    echo "== consumer: $((SECONDS - step_start)) s" >&2
    if [[ "$consumer_summary" =~ ^consumer:\ ([0-9]+)\ passed,\ ([0-9]+)\ failed ]]; then
      passed=$((passed + BASH_REMATCH[1]))
      failed=$((failed + BASH_REMATCH[2]))
      if [ "${BASH_REMATCH[2]}" -ne 0 ]; then
        record_failure "consumer test: ${BASH_REMATCH[2]} FAILED; its output:" "$consumer_log"
      fi
    else
      record_failure "consumer test FAILED: no summary line; its output:" "$consumer_log"
      failed=$((failed + 1))
    fi
    rm -f "$consumer_log"
  else
    echo "== consumer (install + pkg-config/CMake/meson): skipped, runs in the plain gcc suite" >&2
  fi
  # Every file a comment or a document cites exists (one test).
  if [ -z "$sanitize" ] && [ "$compiler" = gcc ]; then
    local cited_log
    cited_log=$(mktemp)
    echo "== cited paths" >&2
    if bash tests/check_cited_paths.sh >"$cited_log" 2>&1; then
      tail -1 "$cited_log" >&2
      passed=$((passed + 1))
    else
      record_failure "cited paths: a comment or document names a file that does not exist" "$cited_log"
      failed=$((failed + 1))
    fi
    rm -f "$cited_log"
  fi
  # The public wall: no implementation type outside canopy::detail, no
  # implementation file including <canopy/...> (one test).
  if [ -z "$sanitize" ] && [ "$compiler" = gcc ]; then
    local namespaces_log
    namespaces_log=$(mktemp)
    echo "== namespaces" >&2
    if bash tests/check_namespaces.sh >"$namespaces_log" 2>&1; then
      tail -1 "$namespaces_log" >&2
      passed=$((passed + 1))
    else
      record_failure "namespaces: an implementation type outside canopy::detail, or a facade include" \
        "$namespaces_log"
      failed=$((failed + 1))
    fi
    rm -f "$namespaces_log"
  fi
  if [ -n "$uring_note" ]; then
    echo "$uring_note"
  fi
  echo "== ./run.sh test $*: $((SECONDS - suite_start)) s in all" >&2
  echo "tests: $passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}

# run_fuzzers SECONDS: build the libFuzzer targets (tests/fuzz) with clang,
# ASan and UBSan in build-fuzz, run each for SECONDS from its committed seed
# corpus (new inputs go to a scratch folder, crashes to build-fuzz/artifacts),
# and count each target in the caller's passed / failed.
run_fuzzers() {
  local seconds=$1
  ensure_packages clang libclang-rt-dev
  if [ ! -f build-fuzz/build.ninja ]; then
    CXX=clang++ meson setup build-fuzz -Dfuzz=true -Db_sanitize=address,undefined \
      -Db_lundef=false >&2
  fi
  local targets=(summary_tree_fuzz task_arena_fuzz task_state_fuzz http_parser_fuzz timer_queue_fuzz)
  if ! ninja -C build-fuzz "${targets[@]/#/tests/fuzz/}" >&2; then
    record_failure "fuzz targets: the build failed"
    failed=$((failed + ${#targets[@]}))
    return
  fi
  mkdir -p build-fuzz/artifacts
  for target in "${targets[@]}"; do
    local scratch
    scratch=$(mktemp -d)
    echo "== $target (${seconds} s)" >&2
    if ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
      timeout $((seconds + 120)) "build-fuzz/tests/fuzz/$target" -max_total_time="$seconds" \
      -timeout=60 -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$target-" \
      "$scratch" "tests/fuzz/corpus/$target" >"$scratch.log" 2>&1; then
      grep -E '^(#[0-9]+[[:space:]]+DONE|stat::number_of_executed_units)' "$scratch.log" >&2 || true
      passed=$((passed + 1))
    else
      record_failure "$target FAILED; its output:" "$scratch.log"
      failed=$((failed + 1))
    fi
    rm -rf "$scratch" "$scratch.log"
  done
}

# ./run.sh soak: the soak for as long as asked (default 1 minute).
run_soak() {
  local seconds=60 sanitize="" seed=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --minutes) seconds=$(awk "BEGIN { print 60 * ($2) }"); shift 2 ;;
      --seconds) seconds=$2; shift 2 ;;
      --seed) seed=(--seed "$2"); shift 2 ;;
      --sanitize=thread) sanitize=thread; shift ;;
      *)
        echo "run.sh soak: unknown option '$1' (use --minutes M, --seconds S, --seed N," \
          "--sanitize=thread)" >&2
        exit 2
        ;;
    esac
  done
  ensure_packages "${core_packages[@]}"
  local dir=build runner=()
  if [ "$sanitize" = thread ]; then
    dir=build-tsan
    configure "$dir" -Db_sanitize=thread -Db_lundef=false
    export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" CANOPY_TIMEOUT_SCALE=10
    if setarch "$(uname -m)" -R true 2>/dev/null; then
      runner=(setarch "$(uname -m)" -R)
    fi
  else
    configure "$dir"
  fi
  ninja -C "$dir" soak/canopy_soak >&2
  "${runner[@]}" "$dir/soak/canopy_soak" --seconds "$seconds" "${seed[@]}"
}

# Release builds use link-time optimisation: it inlines the executor's
# spawn and switch paths across the library's translation units (the
# measurement is in docs/history/performance-log.md, entry 7).
release_options=(--buildtype=release -Db_lto=true)

# ./run.sh demo [--seconds S] [--connections N] [--server-threads T] [--client-threads T]:
# examples/http_hello under canopy_load on 127.0.0.1, then a summary
# (demo/http_demo.py). ./run.sh demo --cpu [...]: the CPU demo (canopy_demo).
# ./run.sh demo --tls [same options]: https_hello serving HTTPS (a self-signed
# certificate made in a temporary folder) under wrk, then handshakes per
# second with openssl s_time (demo/https_demo.sh).
run_demo() {
  ensure_packages "${core_packages[@]}" python3
  configure build-release "${release_options[@]}"
  if [ "${1:-}" = "--cpu" ]; then
    shift
    ninja -C build-release demo/canopy_demo >&2  # only what runs: LTO links are slow
    ./build-release/demo/canopy_demo "$@"
    return
  fi
  if [ "${1:-}" = "--tls" ]; then
    shift
    ensure_packages wrk
    ninja -C build-release examples/https_hello >&2
    demo/https_demo.sh build-release "$@"
    return
  fi
  ninja -C build-release examples/http_hello demo/canopy_load >&2
  python3 demo/http_demo.py build-release "$@"
}

# ./run.sh bench [--compiler=gcc|clang] [driver options]: the Release + LTO
# build of canopy_bench (g++ into build-release; with --compiler=clang, Debian's
# clang-19 with lld and llvm-ar into build-release-clang, results in
# bench/results/clang/), the Rust peers, then bench/run_bench.py (which also
# builds libfork and TooManyCooks with clang-19, hwloc and tcmalloc_minimal from
# ../shared/peers-src into the build folder: bench/forkjoin_peers.py).
run_bench() {
  local compiler=gcc dir=build-release results=() driver_options=()
  for argument in "$@"; do
    case "$argument" in
      --compiler=gcc | --compiler=clang) compiler=${argument#--compiler=} ;;
      --compiler=*)
        echo "run.sh bench: unknown compiler '${argument#--compiler=}' (use --compiler=gcc|clang)" >&2
        exit 2
        ;;
      *) driver_options+=("$argument") ;;
    esac
  done
  ensure_packages "${core_packages[@]}" "${bench_packages[@]}"
  local toolchain=()
  if [ "$compiler" = clang ]; then
    # clang 19 with its own llvm-ar and lld (bench/clang-19.ini says why).
    ensure_packages clang-19 lld-19 llvm-19
    dir=build-release-clang
    toolchain=(--native-file bench/clang-19.ini)
    results=(--results bench/results/clang)
  fi
  configure "$dir" "${toolchain[@]}" "${release_options[@]}"
  meson configure "$dir" -Dbench=true -Db_lto=true >&2
  ninja -C "$dir" bench/canopy_bench >&2
  # The rayon and tokio peers (bench/peers/rust), built once for every table
  # (the comparison, the toolkit, the timer storm) with the newest rustc on
  # the machine (newest_rustc; CANOPY_BENCH_RUSTC and CANOPY_BENCH_CARGO
  # choose another): Debian's 1.63 makes rayon's join about 2.5x slower than
  # a current one (bench/README.md, "The Rust peers"). Offline against the
  # crate sources of the librust-*-dev packages (bench/peers/rust/.cargo).
  # They do not depend on the C++ compiler: both builds share them.
  local rust_peers_target="$PWD/build-release/rust-peers" rustc cargo
  rustc=${CANOPY_BENCH_RUSTC:-$(newest_rustc)}
  cargo=${CANOPY_BENCH_CARGO:-$(dirname "$rustc")/cargo}
  [ -x "$cargo" ] || cargo=/usr/bin/cargo
  echo "run.sh bench: the Rust peers with $("$rustc" --version) ($rustc)" >&2
  (cd bench/peers/rust &&
    RUSTC="$rustc" "$cargo" build --release --quiet --target-dir "$rust_peers_target") >&2
  # The toolkit table (bench/toolkit_bench.py) and the timer storm
  # (bench/io_bench.py) run the same program and print its rustc.
  export CANOPY_STORM_RUSTC="$rustc" CANOPY_TOOLKIT_RUSTC="$rustc"
  export CANOPY_STORM_RUST_PEERS="$rust_peers_target/release/canopy_rust_peers"
  export CANOPY_TOOLKIT_RUST_PEERS="$CANOPY_STORM_RUST_PEERS"
  bash bench/run_bench.sh "$dir/bench/canopy_bench" \
    --rust-peers "$rust_peers_target/release/canopy_rust_peers" --rustc "$rustc" \
    "${results[@]}" "${driver_options[@]}"
}

# The newest rustc on the machine, with a cargo beside it: the rustup
# toolchain's (~/.cargo/bin) when its version is above Debian's
# /usr/bin/rustc, else Debian's.
newest_rustc() {
  local best=/usr/bin/rustc best_version candidate version
  best_version=$("$best" --version 2>/dev/null | awk '{print $2}') || best_version=0
  candidate=$HOME/.cargo/bin/rustc
  if [ -x "$candidate" ] && [ -x "$HOME/.cargo/bin/cargo" ]; then
    version=$("$candidate" --version 2>/dev/null | awk '{print $2}') || version=
    if [ -n "$version" ] && [ "$version" != "$best_version" ] &&
      [ "$(printf '%s\n%s\n' "$best_version" "$version" | sort -V | tail -n 1)" = "$version" ]; then
      best=$candidate best_version=$version
    fi
  fi
  echo "$best"
}

command=${1:-}
[ $# -gt 0 ] && shift
case "$command" in
  test) run_tests "$@" ;;
  soak) run_soak "$@" ;;
  demo) run_demo "$@" ;;
  bench) run_bench "$@" ;;
  *)
    echo "usage: ./run.sh demo [--cpu | --tls] | test [--sanitize=thread|address | --compiler=clang | --fuzz=SECONDS | --mutants[=model]] | soak [--minutes M] [--sanitize=thread] | bench [--compiler=clang] [--scaling] [--instructions] [--rounds K] [--no-comparison]" >&2
    exit 2
    ;;
esac
