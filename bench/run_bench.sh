#!/bin/bash
# Entry point for `./run.sh bench`: the driver itself is run_bench.py (see its
# docstring for the options); this only runs it with Debian's python3.
set -euo pipefail
exec /usr/bin/python3 "$(dirname "$0")/run_bench.py" "$@"
