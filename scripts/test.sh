#!/usr/bin/env bash
# Install what the tests need (CPU build of torch, the project with its test extras and the amd
# extra: clang 22 from the ziglang wheel for the gfx950/gfx1250 compile probes; clang-19 for the
# gfx942 HIP checks) and run the test suite. Safe to run again: installed pieces are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-19 >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get update -qq && apt-get install -y -qq clang-19 >/dev/null
    else
        echo "note: clang-19 missing and not installable here; the HIP compile checks will be skipped" >&2
    fi
fi
python3 -m pip install -q torch==2.13.0 -e ".[test,amd,ray]"   # ray: the local-cluster test (installs in ~50 s)
# Ray ships a console script named `tune` as well, which pip may write after ours: install our
# entry points again, last, so that `tune` stays occtune's (tests/repo/test_entry_points.py checks).
python3 -m pip install -q --no-deps -e .
export TRITON_INTERPRET=1
exec python3 -m pytest -q -p no:cacheprovider tests "$@"
