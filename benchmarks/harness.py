"""The one harness of the benchmark scripts: what each of them would otherwise repeat.

- ``gpu_missing`` / ``refuse``: the one error line (exit 2) where there is no GPU or bad input;
- ``parse_shapes``: ``BxL`` lists (``64x131072,256x1048576``);
- ``kernel_time``: one call's GPU time on the engine's timer (occtune.engine.bench.BenchTimer:
  the L2 flushed before each run, CUDA events, the launch hidden behind a GPU spin);
- ``serving_loop``: host and GPU time per call of back-to-back calls, as serving code runs them;
- ``graph_of``: a CUDA graph of one call; ``copy_bandwidth``: the copy floor's bandwidth;
- ``provenance``: the one provenance record (occtune.outputs.provenance) as CSV columns;
- ``write_csv``: rows into a CSV, atomically, de-duplicated on a key: the rows an earlier run
  left in the file at another key stay (each with its own provenance), the same key's row is
  replaced by this run's; ``check_csv`` refuses a file it could not add to, before measuring.

Scripts live in benchmarks/<family>/ and put benchmarks/ on ``sys.path`` to import this module
(and read_probe.py, the read-once probe of topk and fp8_gemm).
"""

from __future__ import annotations

import csv
import io
import sys
import time
from pathlib import Path

from occtune.errors import UserError

# the columns of ``provenance``, in order (occtune.outputs.provenance's record, flattened)
PROVENANCE = ("device", "arch", "driver", "runtime", "torch", "triton", "python", "git", "date", "timer")


def refuse(why) -> int:
    """The one error line of bad input, on stderr; the exit code 2 to return."""
    print(f"error: {why}", file=sys.stderr)
    return 2


def gpu_missing(torch) -> bool:
    """True, after the one error line, where torch sees no GPU (the caller exits 2)."""
    if torch.cuda.is_available():
        return False
    refuse("no GPU visible to torch; run this on the GPU machine")
    return True


def parse_shapes(text: str, option: str = "--shapes") -> list[tuple[int, int]]:
    """``64x131072,256x1048576`` as [(64, 131072), (256, 1048576)] (a UserError names a bad item)."""
    def shape(item):
        b, x, n = item.strip().partition("x")
        if not (x and b.isdigit() and n.isdigit() and int(b) > 0 and int(n) > 0):
            raise UserError(f"{option}: {item!r} is not BxL; write e.g. 64x131072,256x1048576")
        return int(b), int(n)

    shapes = [shape(t) for t in text.split(",") if t.strip()]
    if not shapes:
        raise UserError(f"{option}: {text!r} names no shape; write e.g. 64x131072,256x1048576")
    return shapes


def kernel_time(fn, reps: int) -> tuple[float, float, float]:
    """(median, IQR, p90) in microseconds of one call's GPU time over ``reps`` runs on the
    engine's timer (L2 flushed, launch hidden behind a GPU spin); p90 is the nearest-rank 90th
    percentile of the runs."""
    from occtune.engine.bench import BenchTimer

    t = BenchTimer(reps=reps, flush_l2=True)(fn)       # on the GPU where torch sees one
    s = sorted(t.samples_us)
    return t.median_us, t.iqr_us, s[min(len(s) - 1, -(-9 * len(s) // 10) - 1)]


def serving_loop(torch, fn, calls: int, warmup: int = 20) -> tuple[float, float]:
    """(host us, GPU us) per call of ``calls`` back-to-back calls of ``fn`` with no flush, no
    spin and no synchronisation between them: the host's wall time of issuing them, and the
    GPU time of the whole loop (events around it) divided by ``calls``."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    end.record()
    torch.cuda.synchronize()
    return 1e6 * (t1 - t0) / calls, start.elapsed_time(end) * 1e3 / calls


def graph_of(torch, fn):
    """A CUDA graph of one call of ``fn`` (warmed up on a side stream first)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    torch.cuda.synchronize()
    return g


def copy_bandwidth(torch, nbytes: int = 2 << 30) -> float:
    """Bytes read + written per second of a large device-to-device copy (median of 10, L2 flushed)."""
    a = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda")
    b = torch.empty_like(a)
    a.fill_(1.0)
    med, *_ = kernel_time(lambda: b.copy_(a), 10)
    del a, b
    return 2 * nbytes / (med * 1e-6)


def provenance(timer: str) -> dict:
    """The one provenance record (occtune.outputs.provenance) of this GPU, as CSV columns."""
    from occtune.outputs.provenance import for_device

    p = for_device("cuda", timer=timer)
    return {**{c: p.get(c) for c in PROVENANCE}, "git": p["git_revision"] or "unknown"}


def _key(row: dict, key: tuple[str, ...]) -> tuple[str, ...]:
    return tuple("" if row.get(c) is None else str(row.get(c)) for c in key)


def write_csv(path, rows: list[dict], key: tuple[str, ...]) -> str:
    """Write ``rows`` to the CSV ``path`` atomically, with the rows an earlier run left there at
    another ``key`` (their own provenance with them); a row at the same key is replaced. Returns
    the line that says so. A file without the key's columns is a UserError (nothing written)."""
    from occtune.fsutil import atomic_write_text

    old = _read_rows(Path(path), key)
    mine = {_key(r, key) for r in rows}
    kept = [r for r in old if _key(r, key) not in mine]
    table = kept + list(rows)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(dict.fromkeys(c for r in table for c in r)))
    w.writeheader()
    w.writerows(table)
    atomic_write_text(path, buf.getvalue())
    return f"wrote {path}: {len(rows)} rows of this run" + (
        f", {len(kept)} kept from the file before (other {', '.join(key)})" if kept else "")


def check_csv(path, key: tuple[str, ...]) -> None:
    """The UserError ``write_csv`` would raise on ``path``, before anything is measured."""
    _read_rows(Path(path), key)


def _read_rows(path: Path, key: tuple[str, ...]) -> list[dict]:
    if not path.exists():
        return []
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            rows = list(reader)
            cols = reader.fieldnames or []
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise UserError(f"cannot read {path} to add rows to it ({e}); pick another --out") from None
    missing = [c for c in key if c not in cols]
    if rows and missing:
        raise UserError(f"{path} is not this benchmark's CSV (no column {', '.join(missing)}); pick another --out")
    return rows
