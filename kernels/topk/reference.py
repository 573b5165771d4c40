"""Reference, tie-aware checker, key model and adversarial inputs of the top-k family.

Everything here but the torch section at the end runs on CPU tensors/numpy so that tests and
the GPU tests share one definition of "correct"; ``check_topk_torch`` is the same check in torch
on the tensors' own device (the tuner verifies on the GPU with it, the CPU check is the
fallback; tests hold the two to the same verdicts):
- ``check_topk``: the output of each row must be k distinct valid indices whose multiset of
  values equals the true top-k multiset (any choice among exactly equal values is fine; all NaNs
  are one value that ranks above +inf; -0.0 equals +0.0); rows with length <= k must read
  0..length-1 then -1.
- ``coarse_bins`` / ``threshold_bin_counts``: the coarse key exactly as the kernel (and
  ``tune ties``) define it, and the population of each row's threshold bin, i.e. the number of
  candidates the kernel must hold (an overflow when it exceeds the budget / 8).
- ``adversarial_cases``: named input families for tests and the tuner.
"""

from __future__ import annotations

import numpy as np

CANON_NAN = np.uint32(0x7FC00000)


def _as_numpy(x):
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def canonical_bits(scores) -> np.ndarray:
    """fp32 bits with every NaN -> 0x7FC00000 (the kernel's NaN policy)."""
    a = np.ascontiguousarray(_as_numpy(scores), dtype=np.float32)
    b = a.view(np.uint32).copy()
    b[np.isnan(a)] = CANON_NAN
    return b


def fine_keys(scores) -> np.ndarray:
    """Order-preserving uint32 key of canonical fp32 bits (the kernel's refinement key)."""
    b = canonical_bits(scores)
    neg = (b & np.uint32(0x80000000)) != 0
    return np.where(neg, ~b, b | np.uint32(0x80000000)).astype(np.uint32)


def value_keys(scores) -> np.ndarray:
    """Like ``fine_keys`` but -0.0 == +0.0: the key used to compare value multisets."""
    b = canonical_bits(scores)
    b[b == np.uint32(0x80000000)] = 0
    neg = (b & np.uint32(0x80000000)) != 0
    return np.where(neg, ~b, b | np.uint32(0x80000000)).astype(np.uint32)


def key16(scores) -> np.ndarray:
    """fp16 coarse key: RNE to half (numpy's conversion), u -> (u & 0x8000) ? ~u : u | 0x8000."""
    a = np.ascontiguousarray(_as_numpy(scores), dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        u = a.astype(np.float16).view(np.uint16).astype(np.uint32)
    u[np.isnan(a)] = 0x7E00   # every NaN is canonical +NaN (0x7FC00000 -> half 0x7E00)
    return np.where(u & 0x8000, u ^ 0xFFFF, u | 0x8000).astype(np.uint32)


def coarse_bins(scores, bits: int = 8) -> np.ndarray:
    if bits not in (8, 12):
        raise ValueError("bits must be 8 or 12")
    return (key16(scores) >> (16 - bits)).astype(np.int64)


def _rows(scores, lengths, row_starts=None):
    s = np.ascontiguousarray(_as_numpy(scores), dtype=np.float32)
    B, L = s.shape
    lens = np.full(B, L, dtype=np.int64) if lengths is None else _as_numpy(lengths).astype(np.int64)
    starts = np.zeros(B, dtype=np.int64) if row_starts is None else _as_numpy(row_starts).astype(np.int64)
    for b in range(B):
        st = int(starts[b])
        n = int(max(0, min(lens[b], L - st)))
        yield b, s[b, st:st + n]


def threshold_bin_counts(scores, lengths, k: int, bits: int = 8, row_starts=None) -> np.ndarray:
    """Per row: population of the coarse bin holding the k-th largest value (0 if length <= k)."""
    out = []
    for _, row in _rows(scores, lengths, row_starts):
        if row.size <= k:
            out.append(0)
            continue
        hist = np.bincount(coarse_bins(row, bits), minlength=1 << bits)
        above = np.cumsum(hist[::-1])           # above[j] = count of bins >= (nbins-1-j)
        j = int(np.searchsorted(above, k))      # first j with cumulative >= k
        out.append(int(hist[(1 << bits) - 1 - j]))
    return np.asarray(out, dtype=np.int64)


def reference_topk(scores, lengths, k: int, row_starts=None):
    """torch.topk per row (NaN-canonicalised), -1 padded: one valid answer among the tie choices."""
    import torch

    s = np.ascontiguousarray(_as_numpy(scores), dtype=np.float32)
    out = np.full((s.shape[0], k), -1, dtype=np.int32)
    for b, row in _rows(s, lengths, row_starts):
        n = row.size
        if n <= k:
            out[b, :n] = np.arange(n)
            continue
        # order by the exact value key (NaN above +inf, -0 == +0) rather than by floats
        keys = torch.from_numpy(value_keys(row).astype(np.int64))
        out[b] = torch.topk(keys, k, sorted=False).indices.numpy().astype(np.int32)
    return out


def check_topk(scores, lengths, k: int, out, row_starts=None) -> tuple[bool, str]:
    """(ok, reason): is ``out`` a correct top-k answer for every row? CPU, tie-aware."""
    o = _as_numpy(out)
    s = _as_numpy(scores)
    if o.ndim != 2 or o.shape != (s.shape[0], k):
        return False, f"output shape {tuple(o.shape)} != {(s.shape[0], k)}"
    o = o.astype(np.int64)
    for b, row in _rows(scores, lengths, row_starts):
        n = row.size
        got = o[b]
        if n <= k:
            if not np.array_equal(got[:n], np.arange(n)) or np.any(got[n:] != -1):
                return False, f"row {b}: length {n} <= k={k} must read 0..{n - 1} then -1"
            continue
        if np.any(got < 0) or np.any(got >= n):
            bad = got[(got < 0) | (got >= n)][0]
            return False, f"row {b}: index {bad} outside [0, {n}) (length {n} > k, no padding allowed)"
        if np.unique(got).size != k:
            return False, f"row {b}: {k - np.unique(got).size} duplicated indices"
        keys = value_keys(row)
        want = np.sort(np.partition(keys, n - k)[n - k:])
        have = np.sort(keys[got])
        if not np.array_equal(want, have):
            i = int(np.argmax(want != have))
            return False, (f"row {b}: value multiset differs from the true top-{k} "
                           f"(sorted position {i}: want key {want[i]:#x}, got {have[i]:#x})")
    return True, ""


# --------------------------------------------------------------------------------------------
# Adversarial inputs.
CASES = ("random_normal", "all_equal", "few_distinct", "heavy_ties", "one_bin_77", "edge_lengths",
         "neg_inf_padding", "denormals", "specials", "random_lengths")


def one_bin_values(rng, n):
    """Values that all fall in one 8-bit coarse bin: fp16 exponent 15, top mantissa bits 00."""
    return rng.uniform(1.0, 1.2, size=n).astype(np.float32)


def make_case(name: str, B: int, L: int, k: int, seed: int = 0):
    """(scores float32 [B, L], lengths int32 [B]) numpy arrays for one adversarial family."""
    rng = np.random.default_rng(seed)
    s = rng.standard_normal((B, L)).astype(np.float32)
    lens = np.full(B, L, dtype=np.int32)
    if name == "random_normal":
        pass
    elif name == "all_equal":
        s[:] = np.float32(0.5)
    elif name == "few_distinct":
        s = rng.choice(np.array([-1.0, 0.0, 0.25, 3.0], np.float32), size=(B, L))
    elif name == "heavy_ties":
        # k/2 clearly larger values, then many copies of the threshold value, then smaller ones
        s = rng.uniform(-5, 0, size=(B, L)).astype(np.float32)
        for b in range(B):
            idx = rng.permutation(L)
            s[b, idx[: k // 2]] = rng.uniform(10, 20, size=k // 2)
            s[b, idx[k // 2: k // 2 + min(L - k // 2, 3 * k)]] = np.float32(7.0)
    elif name == "one_bin_77":
        m = rng.random((B, L)) < 0.77
        s[m] = one_bin_values(rng, int(m.sum()))
    elif name == "edge_lengths":
        choices = [0, 1, k - 1, k, k + 1, L, max(k + 2, L - 3), min(L, k + 513)]
        lens = np.array([min(L, max(0, choices[b % len(choices)])) for b in range(B)], np.int32)
    elif name == "neg_inf_padding":
        for b in range(B):
            valid = int(rng.integers(1, L + 1)) if b % 2 else min(L, k + 5)
            s[b, valid:] = -np.inf
    elif name == "denormals":
        tiny = np.array([1e-45, -1e-45, 1e-40, -1e-40, 1.1754942e-38, 0.0, -0.0, 6e-8, 3e-8, 2.98e-8],
                        np.float32)
        s = rng.choice(tiny, size=(B, L)).astype(np.float32)
        m = rng.random((B, L)) < 0.001
        s[m] = rng.standard_normal(int(m.sum())).astype(np.float32) * 1e-6
    elif name == "specials":
        r = rng.random((B, L))
        s[r < 0.0005] = np.inf
        s[(r >= 0.0005) & (r < 0.001)] = np.nan
        s[(r >= 0.001) & (r < 0.0015)] = -np.nan
        s[(r >= 0.0015) & (r < 0.2)] = -np.inf
        s[(r >= 0.2) & (r < 0.21)] = 70000.0   # rounds to fp16 inf
    elif name == "random_lengths":
        lens = rng.integers(0, L + 1, size=B).astype(np.int32)
    else:
        raise ValueError(f"unknown adversarial case {name!r}; known: {', '.join(CASES)}")
    return np.ascontiguousarray(s, dtype=np.float32), lens


def adversarial_cases(B: int, L: int, k: int, seed: int = 0, names=CASES):
    """Yield (name, scores, lengths) numpy arrays for every family in ``names``."""
    for i, name in enumerate(names):
        s, lens = make_case(name, B, L, k, seed + i)
        yield name, s, lens


# --------------------------------------------------------------------------------------------
# The same check in torch, on whatever device the tensors are on (the GPU in the tuner).
_KEY_MIN = -(2 ** 31)          # below every value key: marks positions past a row's length


def value_keys_torch(scores):
    """int32 keys ordered like the values (``value_keys`` shifted by 2**31): every NaN is one
    value above +inf, -0.0 == +0.0. Works on any device."""
    import torch

    s = scores.contiguous()
    b = s.view(torch.int32)
    b = torch.where(torch.isnan(s), torch.full_like(b, 0x7FC00000), b)
    b = torch.where(b == _KEY_MIN, torch.zeros_like(b), b)          # -0.0 -> +0.0
    return torch.where(b < 0, b ^ 0x7FFFFFFF, b)


def _windows(scores, lengths, row_starts):
    """(keys [B, L] with positions past each row's length set to _KEY_MIN, lengths n [B])."""
    import torch

    B, L = scores.shape
    keys = value_keys_torch(scores)
    dev = scores.device
    starts = torch.zeros(B, dtype=torch.int64, device=dev) if row_starts is None else row_starts.to(dev).long()
    lens = torch.full((B,), L, dtype=torch.int64, device=dev) if lengths is None else lengths.to(dev).long()
    n = torch.clamp(torch.minimum(lens, L - starts), min=0)
    col = torch.arange(L, device=dev)
    if row_starts is not None:
        keys = keys.gather(1, (starts[:, None] + col).clamp(max=max(L - 1, 0)))
    return torch.where(col[None, :] < n[:, None], keys, torch.full_like(keys, _KEY_MIN)), n


def reference_keys(scores, lengths, k: int, row_starts=None):
    """Per row, the value keys of the true top-k, largest first (int32 [B, min(k, L)]): what
    :func:`check_topk_torch` compares against; compute it once per input set and pass it back."""
    import torch

    keys, _ = _windows(scores, lengths, row_starts)
    return torch.topk(keys, min(int(k), keys.shape[1]), dim=1).values


def check_topk_torch(scores, lengths, k: int, out, row_starts=None, want=None) -> tuple[bool, str]:
    """(ok, reason): :func:`check_topk` in torch on the tensors' device (one host sync at the
    end). ``want``: :func:`reference_keys` of these inputs, if already computed."""
    import torch

    B, L = scores.shape
    if out.dim() != 2 or tuple(out.shape) != (B, k):
        return False, f"output shape {tuple(out.shape)} != {(B, k)}"
    if L == 0:                       # every row is empty: all padding
        return (True, "") if bool((out == -1).all()) else (False, f"row 0: length 0 <= k={k} must read 0..-1 then -1")
    keys, n = _windows(scores, lengths, row_starts)
    got = out.to(scores.device).long()
    col = torch.arange(k, device=scores.device)
    short = n <= k
    expect = torch.where(col[None, :] < n[:, None], col[None, :], torch.full_like(got, -1))
    bad_short = short & (got != expect).any(dim=1)
    out_of_range = ~short & ((got < 0) | (got >= n[:, None])).any(dim=1)
    srt = torch.sort(got, dim=1).values
    dup = ~short & ~out_of_range & (srt[:, 1:] == srt[:, :-1]).any(dim=1) if k > 1 else torch.zeros_like(short)
    if want is None:
        want = reference_keys(scores, lengths, k, row_starts)
    have = torch.sort(keys.gather(1, got.clamp(0, max(L - 1, 0))), dim=1, descending=True).values
    if want.shape[1] < k:
        want = torch.nn.functional.pad(want, (0, k - want.shape[1]), value=_KEY_MIN)
    differs = ~short & ~out_of_range & ~dup & (have != want).any(dim=1)
    verdicts = torch.stack([bad_short, out_of_range, dup, differs]).cpu()
    if not bool(verdicts.any()):
        return True, ""
    return False, _first_failure(verdicts, n.cpu(), got.cpu(), have.cpu(), want.cpu(), k)


def _first_failure(verdicts, n, got, have, want, k: int) -> str:
    """The reason for the first failing row, worded like :func:`check_topk`."""
    b = int(verdicts.any(dim=0).nonzero()[0])
    kind = int(verdicts[:, b].nonzero()[0])
    nb = int(n[b])
    if kind == 0:
        return f"row {b}: length {nb} <= k={k} must read 0..{nb - 1} then -1"
    if kind == 1:
        g = got[b]
        bad = int(g[(g < 0) | (g >= nb)][0])
        return f"row {b}: index {bad} outside [0, {nb}) (length {nb} > k, no padding allowed)"
    if kind == 2:
        return f"row {b}: {k - int(got[b].unique().numel())} duplicated indices"
    i = int((have[b] != want[b]).nonzero()[0])
    return (f"row {b}: value multiset differs from the true top-{k} "
            f"(sorted position {i}: want key {int(want[b, i]) + 2 ** 31:#x}, got {int(have[b, i]) + 2 ** 31:#x})")
