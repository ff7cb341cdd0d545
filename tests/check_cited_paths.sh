#!/usr/bin/env bash
# check_cited_paths.sh — every repository file and folder a comment or a
# document cites exists. Scans README.md, docs/*.md (not docs/history/, a
# log of its time), run.sh, .ci/run and, in every folder below, the sources,
# scripts, build files and documents (not bench/results/, dated logs like
# docs/history/) for paths that start with one of the repository's folders
# and end in a file extension (executor/task_arena.hpp) or a slash
# (executor/host/), and reports each one that names nothing. Also fails on a
# link under include/ (include/canopy/detail/<folder>) whose folder is gone.
# Run by ./run.sh test (plain suite).
# Last line: "cited paths: N checked, M missing".
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# The folders are read from the repository, so a new library folder is
# checked without editing this script: every top-level folder that holds a
# meson.build or C++ sources, and the non-library ones named below. Hidden
# folders, build directories and subprojects are not the repository's own.
folder_list=()
for dir in */; do
  dir=${dir%/}
  case "$dir" in
  build* | subprojects | _* | node_modules) continue ;;
  esac
  # A Meson build directory under another name.
  [ -d "$dir/meson-private" ] && continue
  case "$dir" in
  docs | bench | demo | soak | examples | packaging | include | tests)
    folder_list+=("$dir")
    continue
    ;;
  esac
  if [ -f "$dir/meson.build" ] ||
    [ -n "$(find "$dir" \( -name '*.hpp' -o -name '*.cpp' -o -name '*.h' \) -print -quit)" ]; then
    folder_list+=("$dir")
  fi
done
folders=$(
  IFS='|'
  echo "${folder_list[*]}"
)
# docs/ is scanned apart (its top level only); every other folder in full.
scan_list=()
for dir in "${folder_list[@]}"; do
  [ "$dir" = docs ] || scan_list+=("$dir")
done
extensions="hpp|cpp|h|md|sh|py|rs|build|txt|in|ini|json|jsonl|toml|svg|csv"
file_pattern="(^|[^A-Za-z0-9_./-])(${folders})/[A-Za-z0-9_./-]*[A-Za-z0-9_]\.(${extensions})\b"
folder_pattern="(^|[^A-Za-z0-9_./-])(${folders})/([A-Za-z0-9_.-]+/)*"
checked=0
missing=0
# The links that give the public headers their detail/ paths.
while IFS= read -r link; do
  checked=$((checked + 1))
  if [ ! -e "$link" ]; then
    echo "-- $link links to $(readlink "$link"), which does not exist" >&2
    missing=$((missing + 1))
  fi
done < <(find include -type l | sort)
while IFS= read -r file; do
  while IFS= read -r cited; do
    checked=$((checked + 1))
    # A path in a public header under include/canopy/ may be relative to it
    # (detail/executor/...); a path may also be relative to the citing file.
    if [ ! -e "$cited" ] && [ ! -e "$(dirname "$file")/$cited" ] &&
      [ ! -e "include/canopy/$cited" ]; then
      echo "-- $file cites $cited, which does not exist" >&2
      missing=$((missing + 1))
    fi
  done < <({
    grep -oE "$file_pattern" "$file"
    grep -oE "$folder_pattern" "$file"
  } | sed -E "s/^[^A-Za-z0-9_]//" | sort -u)
done < <(
  {
    echo README.md
    echo run.sh
    echo .ci/run
    find docs -maxdepth 1 -name '*.md'
    find "${scan_list[@]}" -type f \( -name '*.hpp' -o -name '*.cpp' -o -name '*.h' -o -name '*.sh' \
      -o -name '*.py' -o -name 'meson.build' -o -name '*.rs' -o -name '*.md' -o -name '*.toml' \
      -o -name '*.ini' -o -name '*.in' -o -name 'CMakeLists.txt' \) \
      -not -path '*/corpus/*' -not -path 'bench/results/*' -not -path '*/target/*' 2>/dev/null
    find . -maxdepth 1 -name meson.build
  } | sort -u
)
echo "cited paths: $checked checked, $missing missing"
[ "$missing" -eq 0 ]
