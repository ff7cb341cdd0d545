#!/usr/bin/env bash
# Install Canopy into a temporary prefix, then build and run tests/consumer's
# program three ways, as a user would: pkg-config + g++, CMake
# find_package(canopy), and a meson project with Canopy as its subproject.
# Each run must print the expected line. Run by `./run.sh test` (plain
# suite); needs meson, ninja, g++, pkg-config, cmake, Boost.Context.
# Last line: "consumer: N passed, M failed".
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/canopy_consumer.XXXXXX")
trap 'rm -rf "$work"' EXIT
expected="canopy consumer: fib(20) = 6765, fiber 42 = 42, callable 7 = 7"
passed=0
failed=0

# check NAME BINARY: run it, compare its output with the expected line.
check() {
  local name=$1 binary=$2 output
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

echo "== consumer: install into $work/prefix" >&2
prefix="$work/prefix"
if ! quietly "$work/install.log" meson setup "$work/build" "$root" --prefix="$prefix" \
  --buildtype=debug -Dprograms=false ||
  ! quietly "$work/install.log" meson install -C "$work/build"; then
  echo "consumer: 0 passed, 3 failed (the install failed)"
  exit 1
fi

# The installed layout: Canopy's folders only under include/canopy/.
for generic in executor coroutine fiber sync; do
  if [ -e "$prefix/include/$generic" ]; then
    echo "-- consumer: install put a generic folder on the include path: include/$generic" >&2
    failed=$((failed + 1))
  fi
done
if [ ! -f "$prefix/include/canopy/canopy.hpp" ]; then
  echo "-- consumer: include/canopy/canopy.hpp was not installed" >&2
  failed=$((failed + 1))
fi

# 1. pkg-config + g++
pc=$(find "$prefix" -name canopy.pc -print -quit)
if [ -z "$pc" ]; then
  echo "-- consumer (pkg-config) FAILED: no canopy.pc under $prefix" >&2
  failed=$((failed + 1))
else
  flags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs canopy)
  if quietly "$work/pkgconfig.log" g++ -std=c++20 "$here/app.cpp" $flags -o "$work/app_pkgconfig"; then
    check pkg-config "$work/app_pkgconfig"
  else
    failed=$((failed + 1))
  fi
fi

# 2. CMake find_package(canopy)
if quietly "$work/cmake.log" cmake -S "$here" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Debug &&
  quietly "$work/cmake.log" cmake --build "$work/cmake"; then
  check cmake "$work/cmake/app"
else
  failed=$((failed + 1))
fi

# 3. meson, Canopy as a subproject (the fallback forced, so an installed
#    Canopy cannot stand in for it)
project="$work/meson_project"
mkdir -p "$project/subprojects"
cp "$here/app.cpp" "$here/meson.build" "$project/"
ln -s "$root" "$project/subprojects/canopy"
if quietly "$work/meson.log" env -u PKG_CONFIG_PATH meson setup "$project/build" "$project" \
  --buildtype=debug --force-fallback-for=canopy &&
  quietly "$work/meson.log" ninja -C "$project/build"; then
  check "meson subproject" "$project/build/app"
else
  failed=$((failed + 1))
fi

echo "consumer: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
