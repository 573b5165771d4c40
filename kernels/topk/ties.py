"""Tie-candidate statistics of score rows, computed exactly as the radix top-k kernel does.

The kernel's coarse key (docs/ties.md; kernels/topk implements the same on the GPU):

1. x is float32 (bf16 and fp16 inputs are widened exactly); NaN of either sign becomes +NaN,
   so NaN ranks above +inf as in ``torch.topk``.
2. h = fp16(x), round to nearest even: beyond the fp16 range -> +-inf, fp32 denormals -> +-0.
3. u = the 16 bits of h; key16 = u ^ 0xFFFF if the sign bit is set, else u | 0x8000
   (unsigned order == float order; -0.0 sits just below +0.0).
4. coarse bin = key16 >> (16 - bits).

Per row with n valid values (the first n; ``lengths`` default to L): if n <= K, radix selects
nothing and the row has 0 candidates. Otherwise, walking the bins from the top, the threshold bin
is the one with ``count_above < K <= count_above + count_in_bin``; its population is the number
of tie candidates the kernel stores in dynamic LDS, ``bytes_per_entry`` (8) bytes each.

Everything is vectorised: one fp16 conversion (torch's vectorised converter when importable,
else numpy's), a few numpy integer ops and one ``bincount`` per tile of ~256K values, tiles spread
over a worker pool (numpy and torch drop the GIL in those loops). While binning, torch is held to
one intra-op thread (restored afterwards): its OpenMP workers spin after each call and steal the
cores the numpy half of the work needs (measured 5-8x slower on a 2-core VM).
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from occtune.errors import UserError

BYTES_PER_ENTRY = 8            # 4-byte index, double-buffered
CANONICAL_NAN16 = 0x7E00       # +qNaN in fp16 (the bin of any NaN is the same for bits <= 12)
TILE_ELEMS = 1 << 18           # values per work item: temporaries stay in L2
MAX_HIST_BYTES = 64 << 20      # cap on one chunk's per-row histograms
NONFINITE_POLICY = ("NaN and inf are binned as the kernel bins them (NaN above +inf, as torch.topk ranks it), "
                    "so rows holding them count toward the bound")


# ----------------------------------------------------------------------------- the key


# The fp32 -> fp16 conversion dominates the cost: torch's (vectorised, round to nearest even) is
# ~10x faster on the CPU than numpy's; both are exact and tests check both against a reference.
FP16_BACKENDS = ("auto", "torch", "numpy")
_backend = {"name": os.environ.get("OCCTUNE_FP16_BACKEND", "auto")}


def set_fp16_backend(name: str) -> None:
    """Pick the fp32 -> fp16 converter: 'torch', 'numpy' or 'auto' (torch when importable)."""
    if name not in FP16_BACKENDS:
        raise UserError(f"fp16 backend must be one of {', '.join(FP16_BACKENDS)}, got {name!r}")
    _backend["name"] = name


@lru_cache(maxsize=None)
def _torch_or_none():
    try:
        import torch
    except ImportError:
        return None
    return torch


def _to_fp16(x: np.ndarray) -> np.ndarray:
    name = _backend["name"]
    torch = _torch_or_none() if name in ("auto", "torch") else None
    if torch is None:
        if name == "torch":
            raise UserError("the torch fp16 backend was asked for but torch is not installed")
        with np.errstate(over="ignore"):     # beyond the fp16 range -> inf is the rule
            return x.astype(np.float16).view(np.uint16)
    if not x.flags.writeable or not x.flags.c_contiguous:   # torch.from_numpy wants both
        x = np.array(x, dtype=np.float32, order="C")
    return torch.from_numpy(x).half().numpy().view(np.uint16)


def fp16_bits(x: np.ndarray) -> np.ndarray:
    """float32 values -> uint16 bits of fp16(x) (round to nearest even), NaN -> +NaN."""
    x = np.asarray(x, dtype=np.float32)
    u = _to_fp16(x)
    nan = np.isnan(x)
    if nan.any():
        u = u.copy() if not u.flags.writeable else u
        u[nan] = CANONICAL_NAN16
    return u


def key16(u: np.ndarray) -> np.ndarray:
    """fp16 bits -> order-preserving unsigned key: flip all bits of negatives, set sign of others."""
    s = np.asarray(u, dtype=np.uint16).view(np.int16)
    return (s ^ ((s >> 15) | np.int16(-0x8000))).view(np.uint16)


def coarse_bins(x: np.ndarray, bits: int) -> np.ndarray:
    """float32 values -> coarse bin (0 .. 2**bits - 1) of each, as uint16."""
    _check_bits([bits])
    return key16(fp16_bits(x)) >> np.uint16(16 - bits)


def widen_bf16(bits16: np.ndarray) -> np.ndarray:
    """Raw bf16 bit patterns (uint16) -> float32, exactly."""
    return (np.asarray(bits16, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


@lru_cache(maxsize=16)
def _lut(dtype: str, bits: int) -> np.ndarray:
    """Coarse bin of every 16-bit pattern of a bf16 or fp16 input (65536 entries)."""
    pat = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    x = widen_bf16(pat) if dtype == "bfloat16" else pat.view(np.float16).astype(np.float32)
    lut = coarse_bins(x, bits)
    lut.flags.writeable = False
    return lut


def bins_of(chunk: np.ndarray, dtype: str, bits: int) -> np.ndarray:
    """Coarse bins of a chunk as a reader hands it out (float32, float16, or bf16 bits)."""
    if dtype == "float32":
        return coarse_bins(chunk, bits)
    if dtype in ("bfloat16", "float16"):
        return _lut(dtype, bits)[chunk.view(np.uint16)]
    raise UserError(f"unsupported score dtype {dtype}; use float32, bf16 or fp16")


# ----------------------------------------------------------------------------- per-row histograms


def _tiles(n_valid: np.ndarray, length: int):
    """Work items (r0, r1, c0, c1) covering the valid prefix of every row."""
    rows, tile = len(n_valid), TILE_ELEMS
    if length >= tile:
        for r in range(rows):
            for c0 in range(0, int(n_valid[r]), tile):
                yield r, r + 1, c0, min(int(n_valid[r]), c0 + tile)
        return
    per = max(1, tile // length)
    for r0 in range(0, rows, per):
        r1 = min(rows, r0 + per)
        c1 = int(n_valid[r0:r1].max())
        if c1 > 0:
            yield r0, r1, 0, c1


def _tile_hist(chunk, dtype, bits, n_valid, r0, r1, c0, c1):
    nb = 1 << bits
    b = bins_of(chunk[r0:r1, c0:c1], dtype, bits)
    valid = np.clip(n_valid[r0:r1] - c0, 0, c1 - c0)
    if r1 - r0 == 1 and valid[0] == c1 - c0:
        return r0, r1, np.bincount(b.ravel(), minlength=nb)[None, :]
    idx = b.astype(np.intp)
    idx += (np.arange(r1 - r0, dtype=np.intp) * (nb + 1))[:, None]
    if (valid < c1 - c0).any():   # values past a row's length go to a discarded extra bin
        past = np.arange(c1 - c0)[None, :] >= valid[:, None]
        idx[past] = (np.nonzero(past)[0] * (nb + 1) + nb)
    h = np.bincount(idx.ravel(), minlength=(r1 - r0) * (nb + 1)).reshape(r1 - r0, nb + 1)
    return r0, r1, h[:, :nb]


def row_histograms(chunk: np.ndarray, dtype: str, bits: int, n_valid: np.ndarray,
                   pool: ThreadPoolExecutor | None = None) -> np.ndarray:
    """Histogram [rows, 2**bits] of the coarse bins of the first n_valid[r] values of each row."""
    rows, length = chunk.shape
    hist = np.zeros((rows, 1 << bits), dtype=np.int64)
    work = list(_tiles(n_valid, length))
    run = (lambda w: _tile_hist(chunk, dtype, bits, n_valid, *w))
    results = pool.map(run, work) if pool is not None else map(run, work)
    for r0, r1, h in results:
        hist[r0:r1] += h
    return hist


def nonfinite_counts(chunk: np.ndarray, dtype: str, n_valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: (NaN count, +-inf count) among its first n_valid values (bf16 as raw bits)."""
    if dtype == "bfloat16":
        mag = chunk.view(np.uint16) & np.uint16(0x7FFF)
        nan, inf = mag > 0x7F80, mag == 0x7F80
    else:
        nan, inf = np.isnan(chunk), np.isinf(chunk)
    if (n_valid < chunk.shape[1]).any():
        valid = np.arange(chunk.shape[1])[None, :] < n_valid[:, None]
        nan &= valid
        inf &= valid
    return nan.sum(axis=1, dtype=np.int64), inf.sum(axis=1, dtype=np.int64)


def threshold_from_hist(hist: np.ndarray, k: int, n_valid: np.ndarray):
    """Per row: (candidates, threshold bin); rows with n <= k get (0, -1)."""
    rows, nb = hist.shape
    rev = hist[:, ::-1]
    above_incl = np.cumsum(rev, axis=1)
    j = np.argmax(above_incl >= k, axis=1)
    active = n_valid > k
    cand = np.where(active, rev[np.arange(rows), j], 0)
    tbin = np.where(active, nb - 1 - j, -1)
    return cand.astype(np.int64), tbin.astype(np.int64)


def coarsen(hist: np.ndarray, from_bits: int, to_bits: int) -> np.ndarray:
    """Sum a 2**from_bits-bin histogram into 2**to_bits bins (bins nest: bin >> shift)."""
    if to_bits == from_bits:
        return hist
    return hist.reshape(hist.shape[0], 1 << to_bits, -1).sum(axis=2)


# ----------------------------------------------------------------------------- statistics


@dataclass
class TieStats:
    """Per-row tie candidates for each coarse-key width, plus what budgets they need."""

    rows: int
    length: int
    k: int
    bits: tuple[int, ...]
    lengths: np.ndarray                       # valid values per row
    candidates: dict[int, np.ndarray]         # bits -> int64 [rows]
    threshold_bin: dict[int, np.ndarray]      # bits -> int64 [rows], -1 where n <= k
    source: str = ""
    dtype: str = "float32"
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)
    nan: np.ndarray | None = None             # NaN values per row (among its valid values)
    inf: np.ndarray | None = None             # +-inf values per row

    def _nonfinite(self) -> np.ndarray:
        zero = np.zeros(self.rows, dtype=np.int64)
        return (zero if self.nan is None else self.nan) + (zero if self.inf is None else self.inf)

    @property
    def nonfinite_rows(self) -> int:
        """Rows holding at least one NaN or inf among their valid values."""
        return int((self._nonfinite() > 0).sum())

    @property
    def all_nonfinite_rows(self) -> int:
        """Rows whose every valid value (at least one) is NaN or inf."""
        return int(((self._nonfinite() == self.lengths) & (self.lengths > 0)).sum())

    def finite_max_candidates(self, bits: int) -> int:
        """The largest candidate count among rows without NaN or inf."""
        c = self._cand(bits)[self._nonfinite() == 0]
        return int(c.max()) if c.size else 0

    def nonfinite_summary(self) -> dict:
        """NaN/inf counts and how the statistics treat them (see NONFINITE_POLICY)."""
        return {"nan_values": int(0 if self.nan is None else self.nan.sum()),
                "inf_values": int(0 if self.inf is None else self.inf.sum()),
                "rows_with_nonfinite": self.nonfinite_rows, "rows_all_nonfinite": self.all_nonfinite_rows,
                "max_candidates_finite_rows": {str(b): self.finite_max_candidates(b) for b in self.bits},
                "policy": NONFINITE_POLICY}

    def nonfinite_note(self) -> str:
        """One line for the user when rows hold NaN/inf ("" when none do)."""
        if not self.nonfinite_rows:
            return ""
        s = self.nonfinite_summary()
        finite = ", ".join(f"{b}-bit {v}" for b, v in s["max_candidates_finite_rows"].items())
        return (f"{s['rows_with_nonfinite']} of {self.rows} rows hold NaN/inf ({s['nan_values']} NaN, "
                f"{s['inf_values']} inf values; {s['rows_all_nonfinite']} rows are nothing else): "
                f"{NONFINITE_POLICY}; rows without NaN/inf need at most {finite} candidates")

    def require_finite_data(self, what: str) -> None:
        """A UserError when no row holds a finite value: nothing can be recommended from such data."""
        if self.rows and self.all_nonfinite_rows == int((self.lengths > 0).sum()):
            s = self.nonfinite_summary()
            raise UserError(f"{what}: every valid value of every row is NaN or inf ({s['nan_values']} NaN, "
                            f"{s['inf_values']} inf); no budget can be recommended from it; check the dump")

    @property
    def radix_rows(self) -> int:
        """Rows long enough (n > K) for the radix pass to store candidates at all."""
        return int((self.lengths > self.k).sum())

    def short_rows_note(self) -> str:
        """One line for the user when no row is longer than k ("" when one is): top-k then keeps
        whole rows, no row stores a candidate, and the measured bound (0) says nothing about the
        longer rows a kernel will see."""
        if self.radix_rows or not self.rows:
            return ""
        return (f"no row is longer than k={self.k} (the longest holds {int(self.lengths.max())} valid scores): "
                f"top-k keeps whole rows, so the measured bound of 0 candidates says nothing about longer rows; "
                f"measure rows longer than k")

    @property
    def max_candidates(self) -> dict[int, int]:
        return {b: int(c.max()) if c.size else 0 for b, c in self.candidates.items()}

    def _cand(self, bits: int) -> np.ndarray:
        if bits not in self.candidates:
            raise UserError(f"no statistics for {bits}-bit keys (computed: "
                            f"{', '.join(map(str, self.bits))}); add it to --bits")
        return self.candidates[bits]

    def quantile(self, bits: int, q: float) -> int:
        """Smallest candidate count c such that a fraction >= q of the rows has <= c candidates."""
        if not 0.0 <= q <= 1.0:
            raise UserError(f"quantile must lie in [0, 1], got {q}")
        c = self._cand(bits)
        if c.size == 0:
            return 0
        return int(np.quantile(c, q, method="inverted_cdf"))

    def required_budget_bytes(self, bits: int, q: float = 1.0,
                              bytes_per_entry: int = BYTES_PER_ENTRY) -> int:
        """Smallest dynamic LDS budget that holds the candidates of a fraction q of the rows."""
        return self.quantile(bits, q) * int(bytes_per_entry)

    def overflow_rows(self, bits: int, budget_bytes: int,
                      bytes_per_entry: int = BYTES_PER_ENTRY) -> int:
        """How many rows have more candidates than ``budget_bytes // bytes_per_entry``."""
        return int((self._cand(bits) > int(budget_bytes) // int(bytes_per_entry)).sum())

    def to_dict(self, budgets: Iterable[int] = (), bytes_per_entry: int = BYTES_PER_ENTRY,
                per_row: bool = False) -> dict:
        budgets = list(budgets)
        out = {"source": self.source, "dtype": self.dtype, "rows": self.rows,
               "length": self.length, "k": self.k, "radix_rows": self.radix_rows,
               "bytes_per_entry": int(bytes_per_entry), "bits": {}}
        for b in self.bits:
            c = self.candidates[b]
            d = {"bins": 1 << b, "mean": float(c.mean()) if c.size else 0.0,
                 "p50": self.quantile(b, 0.5), "p99": self.quantile(b, 0.99),
                 "p99.9": self.quantile(b, 0.999), "max": self.max_candidates[b],
                 "required_budget_bytes": {
                     "all": self.required_budget_bytes(b, 1.0, bytes_per_entry),
                     "p99.9": self.required_budget_bytes(b, 0.999, bytes_per_entry)},
                 "overflow_rows": {str(x): self.overflow_rows(b, x, bytes_per_entry) for x in budgets}}
            if per_row:
                d["candidates"] = c.tolist()
                d["threshold_bin"] = self.threshold_bin[b].tolist()
            out["bits"][str(b)] = d
        out["nonfinite"] = self.nonfinite_summary()
        if self.seconds > 0:
            out["seconds"] = round(self.seconds, 4)
            out["gb_per_s"] = round(self.extra.get("bytes", 0) / self.seconds / 1e9, 3)
        return out


def _check_bits(bits) -> tuple[int, ...]:
    out = tuple(sorted(set(int(b) for b in bits)))
    if not out or any(b < 1 or b > 16 for b in out):
        raise UserError(f"--bits: coarse key widths must lie in 1..16, got {list(bits)}")
    return out


def _check_k(k) -> int:
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise UserError(f"--k must be a positive integer, got {k!r}")
    return int(k)


class _Accumulator:
    """Collects per-row results chunk by chunk; one thread pool for the whole run."""

    def __init__(self, rows, length, bits, k, lengths, threads):
        self.bits, self.k, self.rows, self.length = _check_bits(bits), _check_k(k), rows, length
        self.fine = max(self.bits)
        self.lengths = (np.full(rows, length, dtype=np.int64) if lengths is None
                        else np.asarray(lengths, dtype=np.int64))
        self.cand = {b: np.zeros(rows, dtype=np.int64) for b in self.bits}
        self.tbin = {b: np.full(rows, -1, dtype=np.int64) for b in self.bits}
        self.nan, self.inf = np.zeros(rows, dtype=np.int64), np.zeros(rows, dtype=np.int64)
        if _backend["name"] not in FP16_BACKENDS:
            raise UserError(f"OCCTUNE_FP16_BACKEND must be one of {', '.join(FP16_BACKENDS)}, "
                            f"got {_backend['name']!r}")
        # Our pool is the parallelism: torch's own OpenMP workers would spin between calls and
        # steal cores (5-8x slower on 2 cores), so torch runs one intra-op thread while we bin.
        self.torch = _torch_or_none() if _backend["name"] != "numpy" else None
        self.torch_threads = self.torch.get_num_threads() if self.torch is not None else None
        if self.torch is not None:
            self.torch.set_num_threads(1)
        threads = threads or min(4, os.cpu_count() or 1)
        self.pool = ThreadPoolExecutor(threads)
        self.bytes = 0

    def max_chunk_rows(self) -> int:
        return max(1, MAX_HIST_BYTES // (8 * (1 << self.fine)))

    def add(self, r0: int, chunk: np.ndarray, dtype: str) -> None:
        r1 = r0 + chunk.shape[0]
        n = self.lengths[r0:r1]
        n_hist = np.where(n > self.k, n, 0)          # rows with n <= K store no candidates
        hist = row_histograms(chunk, dtype, self.fine, n_hist, self.pool)
        for b in self.bits:
            c, t = threshold_from_hist(coarsen(hist, self.fine, b), self.k, n)
            self.cand[b][r0:r1], self.tbin[b][r0:r1] = c, t
        self.nan[r0:r1], self.inf[r0:r1] = nonfinite_counts(chunk, dtype, n)
        self.bytes += int(n_hist.sum()) * 4

    def close(self) -> None:
        self.pool.shutdown()
        if self.torch is not None:
            self.torch.set_num_threads(self.torch_threads)

    def stats(self, source: str, dtype: str, seconds: float) -> TieStats:
        return TieStats(self.rows, self.length, self.k, self.bits, self.lengths, self.cand,
                        self.tbin, source, dtype, seconds, {"bytes": self.bytes}, self.nan, self.inf)


def tie_stats(scores, bits=(8, 12), k: int = 2048, lengths=None, dtype: str | None = None,
              chunk_rows: int | None = None, threads: int | None = None) -> TieStats:
    """Tie statistics of an in-memory ``[B, L]`` array (numpy float32/float16, or a torch tensor)."""
    arr, dtype = _to_numpy(scores, dtype)
    if arr.ndim == 1:
        arr = arr.reshape(1, -1)
    if arr.ndim != 2:
        raise UserError(f"scores must be 2-D [rows, length], got shape {list(arr.shape)}")
    rows, length = arr.shape
    if lengths is not None:
        from occtune.kernels.topk.scorefiles import check_lengths
        lengths = check_lengths("lengths", np.asarray(lengths), rows, length)
    acc = _Accumulator(rows, length, bits, k, lengths, threads)
    step = chunk_rows or max(1, min(rows, acc.max_chunk_rows(), (64 << 20) // (4 * length)))
    t0 = time.perf_counter()
    try:
        for r0 in range(0, rows, step):
            acc.add(r0, np.ascontiguousarray(arr[r0:r0 + step]), dtype)
    finally:
        acc.close()
    return acc.stats("array", dtype, time.perf_counter() - t0)


def _to_numpy(scores, dtype):
    if type(scores).__module__.startswith("torch"):
        import torch

        name = str(scores.dtype).replace("torch.", "")
        t = scores.detach().cpu().contiguous()
        if name == "bfloat16":
            return t.view(torch.int16).numpy().view(np.uint16), "bfloat16"
        return _to_numpy(t.numpy(), dtype)
    arr = np.asarray(scores)
    if dtype == "bfloat16" and arr.dtype == np.uint16:
        return arr, "bfloat16"
    if arr.dtype == np.float32 or arr.dtype == np.float16:
        return arr, arr.dtype.name
    raise UserError(f"scores must be float32, float16 or bf16, got {arr.dtype}")


def _prefetched(chunks):
    """Yield the items of an iterator while the next one is read on a background thread."""
    with ThreadPoolExecutor(1) as reader:
        pending = reader.submit(next, chunks, None)
        while True:
            item = pending.result()
            if item is None:
                return
            pending = reader.submit(next, chunks, None)
            yield item


def tie_stats_from_file(path, bits=(8, 12), k: int = 2048, lengths=None, chunk_rows=None, *,
                        key: str | None = None, threads: int | None = None,
                        progress: Callable[[int, int], None] | None = None) -> TieStats:
    """Stream a score file (.pt, .npy, .npz, .safetensors) and compute its tie statistics.

    ``lengths``: an array of valid lengths per row, or a path to a lengths file; None uses the
    file's own ``lengths`` if it has them, else the full row length. ``progress(done, total)``
    is called after every chunk with row counts.
    """
    from occtune.kernels.topk.scorefiles import check_lengths, load_lengths, open_scores

    src = open_scores(path, key)
    if isinstance(lengths, (str, Path)):
        lengths = load_lengths(lengths, src.rows, src.length)
    elif lengths is not None:
        lengths = check_lengths(path, np.asarray(lengths), src.rows, src.length)
    else:
        lengths = src.lengths
    acc = _Accumulator(src.rows, src.length, bits, k, lengths, threads)
    step = chunk_rows or min(src.default_chunk_rows(), acc.max_chunk_rows())
    t0 = time.perf_counter()
    try:
        for r0, chunk in _prefetched(src.iter_chunks(step)):
            acc.add(r0, chunk, src.dtype)
            if progress is not None:
                progress(r0 + chunk.shape[0], src.rows)
    finally:
        acc.close()
    return acc.stats(str(path), src.dtype, time.perf_counter() - t0)
