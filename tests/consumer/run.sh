#!/usr/bin/env bash
# Install Canopy into a temporary prefix, then build and run tests/consumer's
# two programs (app.cpp: "canopy", no Boost; fiber_app.cpp: "canopy-fiber")
# three ways, as a user would: pkg-config + g++, CMake find_package(canopy),
# and a meson project with Canopy as its subproject, and app.cpp once more
# with clang++-19 against the library g++ built. Each run must print the
# expected line. Then every program of examples/ must build against the
# installed tree alone (so a public header that includes one not installed
# fails here), every program of misuse/ must fail to compile with the
# explanation its "// expect:" line names as the first error, and every C++
# block of the documentation must compile (doc_blocks.py). Last, a build
# without fibers, io_uring and TLS: app.cpp and epoll_app.cpp against it. Run by
# `./run.sh test` (plain suite); needs meson, ninja, g++, clang++-19,
# pkg-config, cmake, python3, Boost.Context and Boost.Asio's headers.
# Last line: "consumer: N passed, M failed".
#
#   tests/consumer/run.sh [--install-from BUILD]
#   --install-from BUILD  install BUILD, a configured build folder of this
#                         Canopy (./run.sh test passes its own, built
#                         already), instead of setting up and building a
#                         copy with -Dprograms=false: its prefix is pointed
#                         at the temporary one for the install and set back
#                         after it. The meson subproject and the build
#                         without fibers, io_uring and TLS build their own.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/canopy_consumer.XXXXXX")
trap 'rm -rf "$work"' EXIT
expected_app="canopy consumer: fib(20) = 6765, callable 7 = 7, join 3 = 3, fork-join 7 = 7"
expected_fiber="canopy consumer: fiber 42 = 42"
expected_epoll="canopy consumer without io_uring: automatic runs epoll, echo ping = ping, io_uring refused"
passed=0
failed=0
install_from=""
while [ $# -gt 0 ]; do
  case "$1" in
    --install-from)
      if [ $# -lt 2 ] || [ ! -f "$2/build.ninja" ]; then
        echo "consumer/run.sh: --install-from needs a configured build folder" >&2
        exit 2
      fi
      install_from=$(cd "$2" && pwd)
      shift 2
      ;;
    *)
      echo "consumer/run.sh: unknown option '$1' (use --install-from BUILD)" >&2
      exit 2
      ;;
  esac
done

# check NAME BINARY EXPECTED: run it, compare its output with the expected line.
check() {
  local name=$1 binary=$2 expected=$3 output
  if ! output=$(timeout 60 "$binary" 2>&1); then
    echo "-- consumer ($name) FAILED: the program exited non-zero: $output" >&2
    failed=$((failed + 1))
  elif [ "$output" != "$expected" ]; then
    echo "-- consumer ($name) FAILED: printed '$output', expected '$expected'" >&2
    failed=$((failed + 1))
  else
    echo "   consumer ($name): $output" >&2
    passed=$((passed + 1))
  fi
}

# quietly LOG COMMAND...: run it, show LOG's tail if it fails.
quietly() {
  local log=$1
  shift
  if ! "$@" >"$log" 2>&1; then
    echo "-- consumer: '$*' failed; its output:" >&2
    tail -40 "$log" >&2
    return 1
  fi
}

# phase_done WHAT: print how long WHAT took (since the last phase_done).
phase_start=$SECONDS
phase_done() {
  echo "   consumer: $1: $((SECONDS - phase_start)) s" >&2
  phase_start=$SECONDS
}

prefix="$work/prefix"
# install_build BUILD: point BUILD's prefix at $prefix, install it, and set
# its own prefix back (whether or not the install worked).
install_build() {
  local build=$1 own_prefix status=0
  own_prefix=$(meson introspect "$build" --buildoptions | python3 -c \
    'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))') ||
    return 1
  quietly "$work/install.log" meson configure "$build" --prefix="$prefix" || return 1
  quietly "$work/install.log" meson install -C "$build" || status=1
  quietly "$work/restore.log" meson configure "$build" --prefix="$own_prefix" || status=1
  return "$status"
}
if [ -n "$install_from" ]; then
  echo "== consumer: install $install_from into $prefix" >&2
  install_ok=true
  install_build "$install_from" || install_ok=false
else
  echo "== consumer: install into $prefix" >&2
  install_ok=true
  quietly "$work/install.log" meson setup "$work/build" "$root" --prefix="$prefix" \
    --buildtype=plain -Dprograms=false &&
    quietly "$work/install.log" meson install -C "$work/build" || install_ok=false
fi
if ! "$install_ok"; then
  echo "consumer: 0 passed, 7 failed (the install failed)"
  exit 1
fi
phase_done "the install"

# The installed layout: Canopy's folders only under include/canopy/, the
# public headers at its top, the rest under canopy/detail/, and none of the
# headers only the model checks or the executor's own sources use (the
# runtime, executor_core, is reached through its face, scheduler.hpp).
for generic in executor coroutine fiber atomics; do
  if [ -e "$prefix/include/$generic" ] || [ -e "$prefix/include/canopy/$generic" ]; then
    echo "-- consumer: install put an implementation folder outside canopy/detail: $generic" >&2
    failed=$((failed + 1))
  fi
done
for public in canopy executor task fork_join fiber io io/fiber io/http embed/asio; do
  if [ ! -f "$prefix/include/canopy/$public.hpp" ]; then
    echo "-- consumer: include/canopy/$public.hpp was not installed" >&2
    failed=$((failed + 1))
  fi
done
# The io_uring backend's headers are the library's own: no installed header
# includes <liburing.h>, so a consumer needs no liburing-dev.
if grep -rl 'include <liburing' "$prefix/include" >&2 || [ -e "$prefix/include/canopy/detail/io/uring" ]; then
  echo "-- consumer: an installed header includes <liburing.h>, or io/uring/ was installed" >&2
  failed=$((failed + 1))
fi
for private in atomics/model_atomic.hpp atomics/relacy_atomic.hpp executor/pending_claim.hpp \
  executor/drain_check.hpp executor/core_inline.hpp executor/executor_core.hpp \
  executor/core_access.hpp executor/host/host_runner.hpp; do
  if [ -e "$prefix/include/canopy/detail/$private" ]; then
    echo "-- consumer: an internal header was installed: $private" >&2
    failed=$((failed + 1))
  fi
done

# 1. pkg-config + g++
pc=$(find "$prefix" -name canopy.pc -print -quit)
if [ -z "$pc" ]; then
  echo "-- consumer (pkg-config) FAILED: no canopy.pc under $prefix" >&2
  failed=$((failed + 3))
else
  PKG_CONFIG_PATH=$(dirname "$pc")
  export PKG_CONFIG_PATH
  flags=$(pkg-config --cflags --libs canopy)
  read -ra flag_words <<< "$flags"
  if [[ "$flags" == *boost* ]]; then
    echo "-- consumer: pkg-config canopy names Boost ($flags): a program without fibers needs none" >&2
    failed=$((failed + 1))
  fi
  if quietly "$work/pkgconfig.log" g++ -std=c++20 "$here/app.cpp" "${flag_words[@]}" -o "$work/app_pkgconfig"; then
    check pkg-config "$work/app_pkgconfig" "$expected_app"
  else
    failed=$((failed + 1))
  fi
  # The same program built by clang++ against the library g++ built: the
  # headers' compiler decides how a fork-join child starts, and the
  # library must not assume its own compiler's choice.
  if quietly "$work/pkgconfig.log" clang++-19 -std=c++20 "$here/app.cpp" "${flag_words[@]}" \
    -o "$work/app_clang"; then
    check "pkg-config, clang++ against the g++ library" "$work/app_clang" "$expected_app"
  else
    failed=$((failed + 1))
  fi
  read -ra fiber_words <<< "$(pkg-config --cflags --libs canopy-fiber)"
  if quietly "$work/pkgconfig.log" g++ -std=c++20 "$here/fiber_app.cpp" "${fiber_words[@]}" \
    -o "$work/fiber_app_pkgconfig"; then
    check "pkg-config, canopy-fiber" "$work/fiber_app_pkgconfig" "$expected_fiber"
  else
    failed=$((failed + 1))
  fi
  phase_done "the pkg-config programs"

  # 4. every example against the installed tree, as many at a time as
  #    there are cores (each its own log; the verdicts in name order)
  build_example() {  # build_example EXAMPLE: $work/example_NAME.ok when it built
    local example=$1 name package
    name=$(basename "$example" .cpp)
    package=canopy
    if grep -q '<canopy/fiber.hpp>\|<canopy/io/fiber.hpp>' "$example"; then
      package=canopy-fiber
    fi
    if grep -q '<canopy/io/tls.hpp>' "$example"; then
      package=canopy-tls
    fi
    # shellcheck disable=SC2046 # pkg-config's flags are words
    if g++ -std=c++20 "$example" $(pkg-config --cflags --libs "$package") \
      -o "$work/example_$name" >"$work/example_$name.log" 2>&1; then
      touch "$work/example_$name.ok"
    fi
  }
  running=0
  for example in "$root"/examples/*.cpp; do
    if [ "$running" -ge "$(nproc)" ]; then
      wait -n || true
      running=$((running - 1))
    fi
    build_example "$example" &
    running=$((running + 1))
  done
  wait
  for example in "$root"/examples/*.cpp; do
    name=$(basename "$example" .cpp)
    if [ -f "$work/example_$name.ok" ]; then
      echo "   consumer (example $name against the installed tree): built" >&2
      passed=$((passed + 1))
    else
      echo "-- consumer (example $name) FAILED to build against the installed tree; its output:" >&2
      tail -40 "$work/example_$name.log" >&2
      failed=$((failed + 1))
    fi
  done
  phase_done "the examples"

  # 5. misuse: each program in misuse/ must fail to compile, and the first
  #    error must be the one its "// expect:" line names (Canopy's own
  #    explanation, not a symptom deep in its headers).
  for misuse in "$here"/misuse/*.cpp; do
    name=$(basename "$misuse" .cpp)
    expected=$(sed -n 's|^// expect: ||p' "$misuse" | head -1)
    # shellcheck disable=SC2046 # pkg-config's flags are words
    if g++ -std=c++20 -fsyntax-only "$misuse" $(pkg-config --cflags canopy) \
      >"$work/misuse.log" 2>&1; then
      echo "-- consumer (misuse $name) FAILED: it compiled" >&2
      failed=$((failed + 1))
    elif [[ "$(grep -m1 'error' "$work/misuse.log")" == *"$expected"* ]]; then
      echo "   consumer (misuse $name): the first error explains it" >&2
      passed=$((passed + 1))
    else
      echo "-- consumer (misuse $name) FAILED: the first error is not \"$expected\":" >&2
      grep -m3 'error' "$work/misuse.log" >&2
      failed=$((failed + 1))
    fi
  done
  phase_done "the misuse programs"

  # 6. the documentation's code: every C++ block of README.md, docs/*.md and
  #    the installed headers' usage comments compiles against the installed
  #    tree, and a block with a main runs (doc_blocks.py: the annotations
  #    that say how a block is compiled). Each block counts as one check.
  fiber_flags=""
  if pkg-config --exists canopy-fiber; then
    fiber_flags=$(pkg-config --cflags --libs canopy-fiber)
  fi
  mkdir -p "$work/docs"
  docs_summary=$(python3 "$here/doc_blocks.py" --root "$root" --prefix "$prefix" \
    --flags "$(pkg-config --cflags --libs canopy)" --fiber-flags "$fiber_flags" \
    --work "$work/docs" --jobs "$(nproc)" | tail -1)
  if [[ "$docs_summary" =~ ^docs:\ ([0-9]+)\ compiled,\ [0-9]+\ ran,\ [0-9]+\ skipped,\ ([0-9]+)\ failed ]]; then
    echo "   consumer: $docs_summary" >&2
    passed=$((passed + BASH_REMATCH[1]))
    failed=$((failed + BASH_REMATCH[2]))
  else
    echo "-- consumer (documentation blocks) FAILED: no summary line" >&2
    failed=$((failed + 1))
  fi
  phase_done "the documentation's blocks"
  unset PKG_CONFIG_PATH
fi

# 2. CMake find_package(canopy)
if quietly "$work/cmake.log" cmake -S "$here" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Debug &&
  quietly "$work/cmake.log" cmake --build "$work/cmake"; then
  check cmake "$work/cmake/app" "$expected_app"
  check "cmake, canopy::fiber" "$work/cmake/fiber_app" "$expected_fiber"
else
  failed=$((failed + 2))
fi
phase_done "CMake"

# 3. meson, Canopy as a subproject (the fallback forced, so an installed
#    Canopy cannot stand in for it); only the two programs are built, with
#    the subproject's libraries they link: the others (TLS) are compiled
#    by the suite's own build, and the subproject adds nothing to them.
project="$work/meson_project"
mkdir -p "$project/subprojects"
cp "$here/app.cpp" "$here/fiber_app.cpp" "$here/meson.build" "$project/"
ln -s "$root" "$project/subprojects/canopy"
if quietly "$work/meson.log" env -u PKG_CONFIG_PATH meson setup "$project/build" "$project" \
  --buildtype=plain --force-fallback-for=canopy,canopy-fiber &&
  quietly "$work/meson.log" ninja -C "$project/build" app fiber_app; then
  check "meson subproject" "$project/build/app" "$expected_app"
  check "meson subproject, canopy-fiber" "$project/build/fiber_app" "$expected_fiber"
else
  failed=$((failed + 2))
fi
phase_done "the meson subproject"

# 4. the libraries alone, without fibers, io_uring and TLS (-Dprograms=false
#    -Dfibers=disabled -Dio_uring=disabled -Dtls=disabled): nothing of the
#    fibers, of liburing or of TLS is installed or named, the summary says
#    io_uring was left out, and programs without them build and run against
#    what is: app.cpp, and epoll_app.cpp (TCP over loopback on epoll;
#    io_uring asked for throws the error naming the build).
bare="$work/bare_prefix"
if quietly "$work/bare.log" meson setup "$work/bare_build" "$root" --prefix="$bare" \
  --buildtype=plain -Dprograms=false -Dfibers=disabled -Dio_uring=disabled -Dtls=disabled &&
  quietly "$work/bare_install.log" ninja -C "$work/bare_build" install; then
  leftovers=$(find "$bare" -name '*fiber*' -o -name '*uring*' -o -name '*tls*' | head -3)
  uring_mentions=$(grep -rlI 'include <liburing\|-luring\|;uring;' "$bare" | head -3)
  bare_pc=$(find "$bare" -name canopy.pc -print -quit)
  if [ -n "$leftovers$uring_mentions" ]; then
    echo "-- consumer (without fibers, io_uring, TLS) FAILED: installed anyway: $leftovers$uring_mentions" >&2
    failed=$((failed + 1))
  elif ! grep -q 'io_uring backend (liburing) *: left out' "$work/bare.log"; then
    echo "-- consumer (without io_uring) FAILED: the summary does not say io_uring was left out" >&2
    failed=$((failed + 1))
  elif [ -z "$bare_pc" ]; then
    echo "-- consumer (without fibers) FAILED: no canopy.pc under $bare" >&2
    failed=$((failed + 1))
  else
    bare_flags=$(PKG_CONFIG_PATH=$(dirname "$bare_pc") pkg-config --cflags --libs canopy)
    # shellcheck disable=SC2086 # pkg-config's flags are words
    if quietly "$work/bare.log" g++ -std=c++20 "$here/app.cpp" $bare_flags -o "$work/app_bare"; then
      check "without fibers, io_uring, TLS (-Dfibers=disabled -Dio_uring=disabled -Dtls=disabled)" \
        "$work/app_bare" "$expected_app"
    else
      failed=$((failed + 1))
    fi
    # shellcheck disable=SC2086 # pkg-config's flags are words
    if quietly "$work/bare.log" g++ -std=c++20 "$here/epoll_app.cpp" $bare_flags \
      -o "$work/epoll_app_bare"; then
      check "without io_uring, TCP on epoll" "$work/epoll_app_bare" "$expected_epoll"
    else
      failed=$((failed + 1))
    fi
  fi
else
  failed=$((failed + 1))
fi
phase_done "the build without fibers, io_uring and TLS, and its programs"

echo "consumer: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
