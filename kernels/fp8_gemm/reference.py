"""The float64 reference of the block-scaled FP8 GEMM and the verification tolerance.

Reference: dequantise A and B to float64 (fp8 value x its scale; both conversions are exact, an
fp8 e4m3 value has 4 significant bits and the product with an fp32 scale fits in a double), then
one float64 matmul. Its own error (about ``K * 2**-53`` relative to ``sum |a_k b_k|``) is below
anything measured here by more than six orders of magnitude, so it stands for the exact result.

Tolerance (a kernel passes when both hold; ``ref`` the float64 result, ``out`` the bf16 output):

- relative L2 error ``||out - ref|| / ||ref|| <= 2**-7`` (7.8e-3), and
- max-abs error ``max|out - ref| <= 2**-7 * max|ref|`` (7.8e-3 of the largest output).

Why these numbers. The output is bf16, unit roundoff ``u = 2**-9`` (1.95e-3). Rounding the exact
result to nearest costs at most ``u`` of each element, so at most ``u`` in relative L2 and
``u * max|ref|`` in max-abs (on the family's random inputs: 1.6e-3 relative L2). Not every path
rounds to nearest: the Triton interpreter converts fp32 to bf16 by truncation, which costs up to
``2u`` per element (3.3e-3 relative L2 on the same inputs, checked). Accumulation adds little: the
fp32 sum over K is off by about ``sqrt(K) * 2**-24`` of ``sum |a_k b_k|`` in practice (1e-5
relative for K = 32768), and Hopper's FP8 tensor cores, which keep about 14 significant bits while
summing one instruction's products (DeepSeek-V3 technical report, section 3.3.2, the reason every
implementation here rescales into an fp32 accumulator every 128 or fewer K), add ~2**-13 of one
step's magnitude per 128-wide step. Both bounds are therefore ``4u``: twice the truncation worst
case, which leaves an equal share for accumulation error.

What they catch: a doubled scale of one 1 x 128 activation group moves its row by about
``1/sqrt(K/128)`` of the row's values (9% at K = 16384, more for smaller K), an order of magnitude
over the max-abs bound even where the relative L2 over many rows hides it; a transposed or
misindexed scale, a skipped K step or an unwritten tile (NaN poison, see family.py) fail both.
"""

from __future__ import annotations

import math

REL_L2_TOL = 2.0 ** -7
MAX_ABS_TOL = 2.0 ** -7          # relative to max |ref|
SCALE = 128


def dequantize_a(a, a_s, rows=None):
    """float64 ``[len(rows), K]`` of A's rows (all rows by default) times their 1 x 128 scales."""
    K = a.shape[1]
    a_rows = a if rows is None else a[rows]
    s_rows = a_s if rows is None else a_s[rows]
    s = s_rows.double().repeat_interleave(SCALE, dim=1)[:, :K]
    return a_rows.double() * s


def dequantize_b(b, b_s):
    """float64 ``[N, K]``: B times its 128 x 128 block scales."""
    N, K = b.shape
    s = b_s.double().repeat_interleave(SCALE, dim=0)[:N].repeat_interleave(SCALE, dim=1)[:, :K]
    return b.double() * s


def reference(a, a_s, b, b_s, rows=None):
    """float64 ``(A * a_s)[rows] @ (B * b_s)^T`` (all rows by default)."""
    return dequantize_a(a, a_s, rows) @ dequantize_b(b, b_s).t()


def check_rows(out_rows, ref_rows) -> tuple[bool, str, dict]:
    """Compare output rows with reference rows: (ok, reason, {rel_l2, max_abs_err, max_abs_ref})."""
    import torch

    o = out_rows.double()
    if not bool(torch.isfinite(o).all()):
        return False, "NaN or inf in the output (an unwritten tile, or an overflow)", {}
    diff = o - ref_rows
    num, den = float(diff.square().sum()), float(ref_rows.square().sum())
    rel = math.sqrt(num / den) if den > 0 else (0.0 if num == 0 else math.inf)
    max_err = float(diff.abs().max()) if diff.numel() else 0.0
    max_ref = float(ref_rows.abs().max()) if ref_rows.numel() else 0.0
    diag = {"rel_l2": float(f"{rel:.4g}"), "max_abs_err": float(f"{max_err:.4g}"),
            "max_abs_ref": float(f"{max_ref:.4g}")}
    if not rel <= REL_L2_TOL:
        return False, f"relative L2 error {rel:.3g} > {REL_L2_TOL:.3g}", diag
    if not max_err <= MAX_ABS_TOL * max_ref:
        return False, f"max abs error {max_err:.3g} > {MAX_ABS_TOL:.3g} x max|ref| {max_ref:.3g}", diag
    return True, "", diag
