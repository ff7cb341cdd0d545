#!/bin/bash
# Builds the programs of the scaling sweep (run_scaling.py --bundle) so that
# they run on a machine with no Boost, no oneTBB, no Rust and no network, such
# as a lent device machine:
#
#   bench/scaling/build_bundle.sh [--build DIR] [--commit REV]
#
# DIR (default build-scale, git-ignored as every build-*) gets:
#   src/     `git archive REV` (default HEAD): the bundle is of a commit, not
#            of a working tree other engineers may be editing
#   obj/     its meson build: release, LTO, -Dbench=true (as ./run.sh bench)
#   rust/    the cargo target of bench/peers/rust, built with crt-static
#   bundle/  what the sweep runs, carried to the other machine:
#     canopy_bench        fully static: Canopy and Asio (relinked from obj/'s
#                         own LTO objects without the oneTBB ones: Debian has
#                         no static libtbb, so it answers --peer tbb with 2)
#     canopy_bench_dyn    obj/'s canopy_bench, dynamic, with every peer
#     lib/                the loader and the libraries canopy_bench_dyn uses
#     canopy_bench_tbb    runs canopy_bench_dyn through lib/'s loader
#     canopy_rust_peers   fully static: rayon and tokio, by the newest rustc
#     toolchains.txt      what built each peer (bench/toolchains.py)
#     COMMIT              REV's hash
#
# The rustc is $CANOPY_BENCH_RUSTC, else ~/.cargo/bin/rustc when there is one
# (bench/README.md, "The Rust peers", says why the newest), else Debian's.
set -euo pipefail
repository=$(cd "$(dirname "$0")/../.." && pwd)
build=$repository/build-scale
commit=HEAD
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$(realpath -m "$2"); shift 2 ;;
    --commit) commit=$2; shift 2 ;;
    *) echo "usage: build_bundle.sh [--build DIR] [--commit REV]" >&2; exit 2 ;;
  esac
done
hash=$(git -C "$repository" rev-parse --verify "$commit^{commit}")
source=$build/src objects=$build/obj rust=$build/rust bundle=$build/bundle
rustc=${CANOPY_BENCH_RUSTC:-$HOME/.cargo/bin/rustc}
[ -x "$rustc" ] || rustc=/usr/bin/rustc
cargo=$(dirname "$rustc")/cargo
[ -x "$cargo" ] || cargo=/usr/bin/cargo

# The sources of the commit (a fresh copy whenever the commit changes).
if [ "$(cat "$source/.commit" 2>/dev/null)" != "$hash" ]; then
  rm -rf "$source"
  mkdir -p "$source"
  git -C "$repository" archive "$hash" | tar -x -C "$source"
  echo "$hash" >"$source/.commit"
fi

# canopy_bench, as ./run.sh bench builds it.
[ -f "$objects/build.ninja" ] ||
  meson setup "$objects" "$source" --buildtype=release -Db_lto=true -Dbench=true >/dev/null
ninja -C "$objects" bench/canopy_bench >/dev/null

# The static relink: ninja's own link command for canopy_bench, without the
# oneTBB workload objects and libtbb, each shared library replaced by its
# static archive, and -static.
read -ra link <<<"$(ninja -C "$objects" -t commands bench/canopy_bench | tail -n 1)"
static_link=()
for word in "${link[@]}"; do
  case "$word" in
    bench/canopy_bench) static_link+=(bench/canopy_bench_static) ;;
    *_tbb.cpp.o | */libtbb.so*) ;;
    *.so | *.so.*)
      archive=${word%%.so*}.a
      [ -f "$archive" ] || { echo "build_bundle.sh: no static archive $archive for $word" >&2; exit 1; }
      static_link+=("$archive")
      ;;
    *) static_link+=("$word") ;;
  esac
done
(cd "$objects" && "${static_link[@]}" -static)

rm -rf "$bundle"
mkdir -p "$bundle/lib"
cp "$objects/bench/canopy_bench_static" "$bundle/canopy_bench"
cp "$objects/bench/canopy_bench" "$bundle/canopy_bench_dyn"
# Every library the dynamic program loads (the loader too), as resolved here.
ldd "$objects/bench/canopy_bench" | awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}' |
  while read -r library; do cp -L "$library" "$bundle/lib/"; done
loader=$(cd "$bundle/lib" && ls ld-linux-*.so.*)
cat >"$bundle/canopy_bench_tbb" <<EOF
#!/bin/sh
# canopy_bench with oneTBB: the dynamic build through the libraries beside it.
here=\$(dirname "\$0")
exec "\$here/lib/$loader" --library-path "\$here/lib" "\$here/canopy_bench_dyn" "\$@"
EOF
chmod +x "$bundle/canopy_bench_tbb"

# The Rust peers, static (an explicit --target keeps crt-static off build scripts).
target=$("$rustc" -vV | awk '/^host:/{print $2}')
(cd "$source/bench/peers/rust" &&
  RUSTC="$rustc" RUSTFLAGS="-C target-feature=+crt-static" \
    "$cargo" build --release --quiet --target "$target" --target-dir "$rust")
cp "$rust/$target/release/canopy_rust_peers" "$bundle/canopy_rust_peers"

# A program that names a loader (ELF interpreter) is not static; ldd cannot
# tell, since it calls a static-pie "statically linked" and succeeds.
for program in canopy_bench canopy_rust_peers; do
  if readelf -l "$bundle/$program" | grep -q "program interpreter"; then
    echo "build_bundle.sh: $program is not statically linked" >&2
    exit 1
  fi
done
"$bundle/canopy_bench" fib_join --peer canopy --threads 1 --reps 1 >/dev/null
"$bundle/canopy_bench_tbb" fib_join --peer tbb --threads 1 --reps 1 >/dev/null
"$bundle/canopy_rust_peers" fib_join --peer rayon --threads 1 --reps 1 >/dev/null

echo "$hash" >"$bundle/COMMIT"
/usr/bin/python3 - "$objects/bench/canopy_bench" "$bundle/canopy_rust_peers" "$rustc" \
  "$source/bench" >"$bundle/toolchains.txt" <<'EOF'
import sys
sys.path.insert(0, sys.argv[4])
import toolchains
for line in toolchains.describe(sys.argv[1], sys.argv[2], sys.argv[3]):
    print(line)
print("canopy and asio: canopy_bench relinked -static (glibc, libstdc++, Boost.Context archives); "
      "tbb: the dynamic canopy_bench through its bundled loader and libraries; "
      "rayon and tokio: -C target-feature=+crt-static")
EOF
du -sh "$bundle"
cat "$bundle/toolchains.txt"
