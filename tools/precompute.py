#!/usr/bin/env python3
"""Regenerate the families' shipped tables of precomputed results (kernels/<family>/precomputed.json).

    python3 tools/precompute.py              # every family of occtune.kernels
    python3 tools/precompute.py topk         # one family (after editing kernels/topk/topk.cuh, say)
    python3 tools/precompute.py --fresh ...  # compile everything again, reading no table

Runs each family's default analytic commands for every known target in this process, recording
every cache key they use (occtune.build.diskcache.recording): ``tune analyze FAMILY`` over all
targets, ``tune sweep FAMILY --target T --analytic`` and the family's own verb (``tune topk``,
``tune rope``, ``tune fp8-gemm``). Each family's table then holds exactly those keys and values:
compiled resources keyed by (kernel source hash, macros or Triton specialisation and launch options,
target, compiler version) and, for top-k, the default tie bound keyed by its code's hash. A machine
with the same compilers (the `amd` extra's clang, the test extra's NVRTC, the installed Triton)
then compiles nothing for these commands; any other key compiles as before. Run it after changing
a kernel source, a family's default configs or a compiler: tests/build/test_precomputed.py fails until
then, naming this command. A config the compiler refuses is recorded with its error (a compile
that timed out is not: run the tool again). A command that exits 2 (a target a family does not
support) is reported and skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TABLE = "precomputed.json"

# family -> its own verb's default analytic run, beside `tune sweep` and `tune analyze`
VERB_RUNS = {
    "topk": "topk --target {target} --no-write",
    "rope": "rope --target {target}",
    "fp8_gemm": "fp8-gemm --target {target}",
}


def command_for(family: str) -> str:
    return f"python3 tools/precompute.py {family}"


def families() -> list[str]:
    """The families that ship with occtune (occtune.kernels.*)."""
    from occtune.engine.registry import families as found

    return sorted(n for n, spec in found().items() if spec.module.startswith("occtune.kernels."))


def runs(family: str) -> list[list[str]]:
    """The ``tune`` argument lists whose keys ``family``'s table holds."""
    from occtune.model.targets import all_targets

    targets = sorted(all_targets())
    out = [["analyze", family, "--target", ",".join(targets)]]
    for t in targets:
        out.append(["sweep", family, "--target", t, "--analytic", "--no-write"])
        if family in VERB_RUNS:
            out.append(VERB_RUNS[family].format(target=t).split())
    return out


def run(argv: list[str]) -> int:
    """``tune ARGV`` in this process, its stdout discarded (progress and errors show on stderr):
    the exit code."""
    from occtune.cli import main

    with contextlib.redirect_stdout(io.StringIO()):
        try:
            main(argv)
        except SystemExit as e:
            return e.code if isinstance(e.code, int) else 1
    return 0


def table_path(family: str) -> Path:
    from occtune.engine.registry import families as found

    return Path(found()[family].load_module().__file__).with_name(TABLE)


def about(family: str) -> str:
    return (f"occtune's shipped results of {family}'s default analytic runs on every target, keyed like the "
            f"disk cache (occtune.build.diskcache): an entry is used only where the whole key matches (source "
            f"hash, macros or specialisation, target, compiler version). Regenerate: {command_for(family)}")


def regenerate(family: str, fresh: bool = False) -> tuple[Path, int, bool]:
    """Run ``family``'s default runs, write its table: (path, entries, changed)."""
    from occtune.build.diskcache import recording, write_table

    with recording(read_shipped=not fresh) as rec:
        for argv in runs(family):
            t0 = time.perf_counter()
            code = run(argv)
            note = "" if code == 0 else f" (exit {code}: skipped)"
            print(f"tune {' '.join(argv)}: {time.perf_counter() - t0:.1f} s{note}", file=sys.stderr, flush=True)
    path = table_path(family)
    entries = list(rec.tables.get(path, {}).values())
    changed = write_table(path, entries, about(family))
    return path, len(entries), changed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("families", nargs="*", help="families to regenerate (default: every family of occtune.kernels)")
    ap.add_argument("--fresh", action="store_true", help="read no shipped table: compile every key again")
    a = ap.parse_args(argv)
    os.environ["OCCTUNE_NO_REPLAY"] = "1"
    known = families()
    unknown = [f for f in a.families if f not in known]
    if unknown:
        print(f"error: unknown family {', '.join(unknown)}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="occtune-precompute-") as cache:
        if a.fresh:                   # an empty disk cache too: every value is this run's compile
            os.environ["OCCTUNE_CACHE_DIR"] = cache
        for fam in a.families or known:
            path, n, changed = regenerate(fam, a.fresh)
            print(f"{'wrote' if changed else 'unchanged'} {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: "
                  f"{n} entries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
