#!/usr/bin/env bash
# check_cited_paths.sh — every repository file a comment or a document cites
# exists. Scans README.md, docs/*.md (not docs/history/, a log of its time)
# and the sources, tests, benchmarks and examples for paths that start with
# one of the repository's folders and end in a file extension, and reports
# each one that names no file. Run by ./run.sh test (plain suite).
# Last line: "cited paths: N checked, M missing".
set -uo pipefail
cd "$(dirname "$0")/.."
folders='sync|summary_tree|signal_waker|executor|fork_join|wait|coroutine|fiber|io|embed|task_sync|blocking|task_group|tests|bench|docs|examples|demo|soak|packaging|include'
pattern="(^|[^A-Za-z0-9_./-])(${folders})/[A-Za-z0-9_./-]*[A-Za-z0-9_]\.(hpp|cpp|h|md|sh|py|rs|build|txt|in|ini|json)\b"
checked=0
missing=0
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
  done < <(grep -oE "$pattern" "$file" | sed -E "s/^[^A-Za-z0-9_]//" | sort -u)
done < <(
  {
    echo README.md
    find docs -maxdepth 1 -name '*.md'
    find sync summary_tree signal_waker executor fork_join wait coroutine fiber io embed task_sync \
      blocking task_group include tests bench \
      examples demo soak -type f \( -name '*.hpp' -o -name '*.cpp' -o -name '*.sh' -o -name '*.py' \
      -o -name 'meson.build' -o -name '*.rs' \) -not -path '*/corpus/*' 2>/dev/null
    find . -maxdepth 1 -name meson.build
  } | sort -u
)
echo "cited paths: $checked checked, $missing missing"
[ "$missing" -eq 0 ]
