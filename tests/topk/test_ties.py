"""The coarse key and per-row tie statistics against a slow, exact, pure-Python reference."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from occtune.kernels.topk import ties
from occtune.errors import UserError
from occtune.kernels.topk.ties import TieStats, coarse_bins, fp16_bits, tie_stats

# ----------------------------------------------------------------------------- the reference


def f32(bits: int) -> float:
    """The float32 with these bits, as an exact Python float."""
    return struct.unpack("<f", struct.pack("<I", bits & 0xFFFFFFFF))[0]


def ref_fp16_bits(x: float) -> int:
    """fp16 bits of x, round to nearest even (CPython's own packer), NaN -> +NaN, overflow -> inf."""
    if math.isnan(x):
        return 0x7E00
    try:
        return struct.unpack("<H", struct.pack("<e", x))[0]
    except OverflowError:
        return 0x7C00 if x > 0 else 0xFC00


def ref_bin(x: float, bits: int) -> int:
    u = ref_fp16_bits(x)
    key = (u ^ 0xFFFF) if u & 0x8000 else (u | 0x8000)
    return key >> (16 - bits)


def ref_row(values, bits: int, k: int):
    """(candidates, threshold bin) of one row by walking bins from the top, one at a time."""
    if len(values) <= k:
        return 0, -1
    counts = {}
    for v in values:
        b = ref_bin(v, bits)
        counts[b] = counts.get(b, 0) + 1
    above = 0
    for b in range(2**bits - 1, -1, -1):
        c = counts.get(b, 0)
        if above < k <= above + c:
            return c, b
        above += c
    raise AssertionError("no threshold bin")


def adversarial_bits() -> list[int]:
    """float32 bit patterns a conversion gets wrong first."""
    pats = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000,              # +-0, +-inf
            0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF,  # NaNs, both signs
            0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00400000,  # fp32 denormals
            0x7F7FFFFF, 0xFF7FFFFF]                                      # +-FLT_MAX
    for v in (65504.0, 65519.99, 65520.0, 65536.0, 2.0**-24, 2.0**-25, 1.5 * 2.0**-25,
              2.0**-14, 2.0**-14 - 2.0**-25, 1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11, 2.0, 2.5):
        for s in (1.0, -1.0):
            pats.append(struct.unpack("<I", struct.pack("<f", s * v))[0])
    # every fp16 exponent: the exact midpoints between neighbours (ties) and one fp32 ulp around
    for h in range(0, 0x7C00, 37):
        lo = struct.unpack("<e", struct.pack("<H", h))[0]
        hi = struct.unpack("<e", struct.pack("<H", h + 1))[0]
        mid = struct.unpack("<I", struct.pack("<f", (lo + hi) / 2))[0]
        for sign in (0, 0x80000000):
            pats += [sign | mid, sign | (mid - 1), sign | (mid + 1)]
    rng = np.random.default_rng(1)
    pats += [int(b) for b in rng.integers(0, 2**32, 4000, dtype=np.uint64)]
    return pats


ADV = np.array(adversarial_bits(), dtype=np.uint32).view(np.float32)


@pytest.fixture(params=["torch", "numpy"])
def backend(request):
    if request.param == "torch":
        pytest.importorskip("torch")
    old = ties._backend["name"]
    ties.set_fp16_backend(request.param)
    yield request.param
    ties.set_fp16_backend(old)


# ----------------------------------------------------------------------------- the key


def test_reference_itself_on_known_values():
    assert ref_fp16_bits(1.0) == 0x3C00
    assert ref_fp16_bits(65504.0) == 0x7BFF
    assert ref_fp16_bits(65520.0) == 0x7C00           # the tie past the top rounds to inf
    assert ref_fp16_bits(-1e-45) == 0x8000            # fp32 denormal -> -0
    assert ref_fp16_bits(2.0**-25) == 0x0000          # tie between 0 and min subnormal -> even
    assert ref_fp16_bits(1.0 + 2.0**-11) == 0x3C00    # tie -> even mantissa
    assert ref_fp16_bits(1.0 + 3 * 2.0**-11) == 0x3C02
    assert ref_bin(-0.0, 16) + 1 == ref_bin(0.0, 16)   # -0 just below +0
    assert ref_bin(float("nan"), 16) > ref_bin(float("inf"), 16)


def test_fp16_bits_match_reference(backend):
    got = fp16_bits(ADV)
    want = [ref_fp16_bits(float(v)) for v in ADV]
    bad = [(hex(int(b)), hex(int(g)), hex(w)) for b, g, w in
           zip(ADV.view(np.uint32), got, want) if int(g) != w]
    assert not bad, bad[:10]


@pytest.mark.parametrize("bits", [8, 12, 16, 1])
def test_coarse_bins_match_reference(backend, bits):
    got = coarse_bins(ADV, bits)
    want = np.array([ref_bin(float(v), bits) for v in ADV])
    assert got.dtype == np.uint16
    np.testing.assert_array_equal(got.astype(np.int64), want)


def test_key_orders_like_floats(backend):
    finite = ADV[np.isfinite(ADV)]
    h = fp16_bits(finite).view(np.float16).astype(np.float64)
    key = coarse_bins(finite, 16).astype(np.int64)
    order = np.argsort(key, kind="stable")
    hs = h[order]
    assert np.all(hs[1:] >= hs[:-1])               # key order never contradicts float order
    assert len(np.unique(key)) == len(np.unique(fp16_bits(finite)))   # and loses nothing


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_lut_inputs_match_widened_float32(dtype):
    pats = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    x = (ties.widen_bf16(pats) if dtype == "bfloat16"
         else pats.view(np.float16).astype(np.float32))
    sample = np.random.default_rng(2).choice(1 << 16, 3000, replace=False)
    want = [ref_bin(float(v), 12) for v in x[sample]]
    np.testing.assert_array_equal(ties.bins_of(pats[sample], dtype, 12).astype(np.int64), want)


def test_widen_bf16_is_exact():
    assert ties.widen_bf16(np.array([0x3F80, 0xBF80, 0x7F80, 0x0001], np.uint16)).tolist()[:3] == \
        [1.0, -1.0, float("inf")]
    assert ties.widen_bf16(np.array([0x0001], np.uint16)).view(np.uint32)[0] == 0x00010000


# ----------------------------------------------------------------------------- per-row statistics


def _ref_stats(x, lengths, bits, k):
    out = {b: [] for b in bits}
    for r in range(x.shape[0]):
        vals = [float(v) for v in x[r, : lengths[r]]]
        for b in bits:
            out[b].append(ref_row(vals, b, k))
    return out


def _adversarial_rows(rows=12, length=300, seed=3):
    rng = np.random.default_rng(seed)
    x = rng.choice(ADV, size=(rows, length))
    x[0] = 1.0                                   # all equal: every value is a candidate
    x[1] = np.float32(1.0) + rng.integers(0, 8, length).astype(np.float32) * np.float32(2.0**-14)
    x[2, ::2] = np.float32(np.nan)               # NaNs rank on top
    x[3] = -0.0
    x[3, ::3] = 0.0                              # -0 below +0, different bins at 16 bits
    x[4] = rng.standard_normal(length).astype(np.float32)
    return x


@pytest.mark.parametrize("k", [1, 7, 150, 299, 300])
def test_row_stats_match_reference(backend, k):
    x = _adversarial_rows()
    lengths = np.array([300, 300, 300, 300, 300, 299, 8, 0, 151, 150, 301 - 1, 200])
    st = tie_stats(x, bits=(8, 12, 16), k=k, lengths=lengths, threads=2)
    want = _ref_stats(x, lengths, (8, 12, 16), k)
    for b in (8, 12, 16):
        got = list(zip(st.candidates[b].tolist(), st.threshold_bin[b].tolist()))
        assert got == want[b], (b, k)


def test_values_rounding_to_one_fp16_are_one_bin():
    # 1000 distinct float32 values in (1, 1 + 2^-11): all round to fp16 1.0
    x = (np.float32(1.0) + np.arange(1, 1001, dtype=np.float32) * np.float32(2.0**-22))[None, :]
    assert len(np.unique(x)) == 1000
    st = tie_stats(x, bits=(8, 12, 16), k=10)
    assert st.candidates[16][0] == 1000 and st.candidates[8][0] == 1000


def test_tiling_and_chunking_do_not_change_results(monkeypatch):
    rng = np.random.default_rng(4)
    x = np.round(rng.standard_normal((9, 700)) * 3).astype(np.float32)
    lengths = rng.integers(0, 701, 9)
    want = _ref_stats(x, lengths, (8, 12), 40)
    for tile in (64, 700, 1400, 1 << 18):                 # column tiles, row tiles, one tile
        monkeypatch.setattr(ties, "TILE_ELEMS", tile)
        for chunk in (1, 4, None):
            st = tie_stats(x, bits=(8, 12), k=40, lengths=lengths, chunk_rows=chunk, threads=2)
            for b in (8, 12):
                assert list(zip(st.candidates[b].tolist(), st.threshold_bin[b].tolist())) == want[b]


def test_bf16_and_torch_inputs():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    t = torch.from_numpy(rng.standard_normal((4, 500)).astype(np.float32)).to(torch.bfloat16)
    widened = t.float().numpy()
    want = _ref_stats(widened, [500] * 4, (8, 12), 30)
    st = tie_stats(t, bits=(8, 12), k=30)
    assert st.dtype == "bfloat16"
    for b in (8, 12):
        assert list(zip(st.candidates[b].tolist(), st.threshold_bin[b].tolist())) == want[b]
    st16 = tie_stats(widened.astype(np.float16), bits=(8, 12), k=30)
    assert st16.dtype == "float16"


# ----------------------------------------------------------------------------- budgets


def _stats_with(cands):
    c = np.asarray(cands, dtype=np.int64)
    return TieStats(rows=len(c), length=10**6, k=2048, bits=(8,),
                    lengths=np.full(len(c), 10**6), candidates={8: c},
                    threshold_bin={8: np.zeros(len(c), dtype=np.int64)})


def test_quantiles_budgets_and_overflow():
    st = _stats_with(np.arange(1, 1001)[::-1])        # candidates 1..1000, shuffled order
    assert st.max_candidates[8] == 1000
    assert st.quantile(8, 0.999) == 999                # 999 of 1000 rows hold <= 999
    assert st.quantile(8, 0.99) == 990
    assert st.required_budget_bytes(8) == 8000
    assert st.required_budget_bytes(8, 0.999) == 7992
    assert st.required_budget_bytes(8, 1.0, bytes_per_entry=4) == 4000
    assert st.overflow_rows(8, 8000) == 0
    assert st.overflow_rows(8, 7999) == 1              # 7999 // 8 = 999 entries
    assert st.overflow_rows(8, 4000) == 500
    d = st.to_dict(budgets=[4000, 8000])
    assert d["bits"]["8"]["overflow_rows"] == {"4000": 500, "8000": 0}
    assert d["bits"]["8"]["required_budget_bytes"] == {"all": 8000, "p99.9": 7992}
    with pytest.raises(UserError, match="12-bit"):
        st.quantile(12, 0.5)


def test_all_equal_rows_need_their_length():
    x = np.zeros((3, 5000), dtype=np.float32)
    st = tie_stats(x, bits=(8, 12), k=2048, lengths=[5000, 2049, 2048])
    assert st.candidates[8].tolist() == [5000, 2049, 0]
    assert st.radix_rows == 2
    assert st.required_budget_bytes(12) == 40000
    assert st.overflow_rows(12, 40 * 1024) == 0 and st.overflow_rows(12, 32 * 1024) == 1


@pytest.mark.parametrize("bad", [dict(bits=(0,)), dict(bits=(17,)), dict(k=0), dict(k=-3),
                                 dict(lengths=[1, 2]), dict(lengths=[10**9] * 3)])
def test_bad_arguments_are_user_errors(bad):
    with pytest.raises(UserError):
        tie_stats(np.zeros((3, 10), np.float32), **bad)


def test_synthetic_families_are_deterministic_and_shaped():
    from occtune.kernels.topk.synthetic import FAMILIES, parse_families, synthetic_scores
    for fam in FAMILIES:
        a = synthetic_scores(fam, 3, 1000, seed=7)
        b = synthetic_scores(fam, 2, 1000, seed=7, first_row=1)
        assert a.dtype == np.float32 and a.shape == (3, 1000)
        np.testing.assert_array_equal(a[1:], b)
    relu = synthetic_scores("relu", 1, 100000, 0)
    assert 0.80 < (relu == 0).mean() < 0.88
    low = synthetic_scores("low-entropy", 1, 100000, 0)
    assert len(np.unique(low)) < 50
    bf = synthetic_scores("bf16-rounded", 1, 1000, 0)
    assert not (bf.view(np.uint32) & 0xFFFF).any()
    narrow = synthetic_scores("narrow", 1, 100000, 0)
    assert 0.75 < ((narrow >= 2) & (narrow < 2.5)).mean() < 0.83
    with pytest.raises(UserError, match="unknown"):
        parse_families("normal,cauchy")


def test_agrees_with_the_topk_kernel_reference():
    """kernels/topk's own model of the key must stay identical to ours (they share one contract)."""
    ref = pytest.importorskip("occtune.kernels.topk.reference")
    x = _adversarial_rows(rows=8, length=400, seed=9)
    lengths = np.array([400, 399, 200, 50, 400, 301, 0, 128])
    for bits in (8, 12):
        for k in (16, 128, 300):
            want = ref.threshold_bin_counts(x, lengths, k, bits=bits)
            got = tie_stats(x, bits=(bits,), k=k, lengths=lengths).candidates[bits]
            np.testing.assert_array_equal(got, want)


def test_torch_thread_count_is_restored(tmp_path):
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    tie_stats(np.zeros((2, 5000), np.float32))
    np.save(tmp_path / "z.npy", np.zeros((2, 10), np.float64))
    with pytest.raises(UserError):
        ties.tie_stats_from_file(tmp_path / "z.npy")
    assert torch.get_num_threads() == before


# ----------------------------------------------------------------------------- NaN and inf


def test_nonfinite_values_are_counted_per_row_in_every_dtype():
    import torch

    x = np.random.default_rng(3).standard_normal((4, 5000)).astype(np.float32)
    x[0, :10] = np.nan
    x[1, 4990:] = np.inf            # past the row's length below: not counted
    x[2, :] = -np.inf
    lengths = np.array([5000, 4990, 5000, 5000])
    for scores in (x, x.astype(np.float16), torch.from_numpy(x).bfloat16()):
        st = tie_stats(scores, bits=(8,), k=64, lengths=lengths)
        assert st.nan.tolist() == [10, 0, 0, 0] and st.inf.tolist() == [0, 0, 5000, 0]
        assert (st.nonfinite_rows, st.all_nonfinite_rows) == (2, 1)
        assert st.finite_max_candidates(8) == max(st.candidates[8][1], st.candidates[8][3])
        summary = st.to_dict()["nonfinite"]
        assert summary["nan_values"] == 10 and summary["inf_values"] == 5000
        assert "binned as the kernel bins them" in summary["policy"] and "2 of 4 rows" in st.nonfinite_note()


def test_all_nonfinite_data_recommends_nothing():
    st = tie_stats(np.full((3, 4096), np.nan, np.float32), bits=(8,), k=64)
    assert st.max_candidates[8] == 4096                   # the kernel's view: one bin holds the row
    with pytest.raises(UserError, match="every valid value of every row is NaN or inf"):
        st.require_finite_data("dump.npy")
    tie_stats(np.ones((3, 4096), np.float32), bits=(8,), k=64).require_finite_data("fine.npy")
