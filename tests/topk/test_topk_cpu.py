"""CPU tests of the top-k family: checker, key model, adversarial inputs, build plumbing, and
offline compilation of the real kernel source for sm_90 (NVRTC or nvcc) and gfx942 (clang HIP)."""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

from occtune.kernels import topk as tk
from occtune.kernels.topk import runtime as rt
from occtune.build import compiled
from occtune.kernels.topk import reference as ref
from occtune.build import rtc
from occtune.errors import UserError
from clihelp import REPO, load_benchmark
from doubles import fake_sms

K = 64


def _true_topk(s, k):
    return np.argsort(-s, kind="stable")[:k].astype(np.int32)


# ---- checker ---------------------------------------------------------------------------------
def test_check_accepts_reference_and_tie_swaps():
    s = np.array([[5, 1, 3, 3, 3, 0]], np.float32)
    ok, why = ref.check_topk(s, None, 3, np.array([[0, 2, 3]], np.int32))
    assert ok, why
    ok, why = ref.check_topk(s, None, 3, np.array([[4, 0, 3]], np.int32))   # other tie choice
    assert ok, why


def test_check_catches_wrong_set():
    s = np.array([[5, 1, 3, 2, 4, 0]], np.float32)
    ok, why = ref.check_topk(s, None, 3, np.array([[0, 4, 3]], np.int32))  # 2 instead of 3
    assert not ok and "multiset" in why


def test_check_catches_duplicate_index():
    s = np.array([[3, 3, 3, 1, 0, 0]], np.float32)
    ok, why = ref.check_topk(s, None, 3, np.array([[0, 1, 1]], np.int32))
    assert not ok and "duplicated" in why


def test_check_catches_missing_padding_and_bad_index():
    s = np.zeros((1, 8), np.float32)
    lens = np.array([2], np.int32)
    ok, why = ref.check_topk(s, lens, 4, np.array([[0, 1, 2, -1]], np.int32))
    assert not ok and "then -1" in why
    ok, _ = ref.check_topk(s, lens, 4, np.array([[0, 1, -1, -1]], np.int32))
    assert ok
    ok, why = ref.check_topk(np.arange(8, dtype=np.float32)[None], np.array([6]), 3,
                             np.array([[5, 4, 7]], np.int32))   # 7 is beyond the row length
    assert not ok and "outside" in why


def test_check_nan_ranks_above_inf_and_signed_zero():
    s = np.array([[np.inf, -np.nan, 1.0, np.nan, -0.0, 0.0]], np.float32)
    assert ref.check_topk(s, None, 2, np.array([[1, 3]], np.int32))[0]
    assert not ref.check_topk(s, None, 2, np.array([[0, 3]], np.int32))[0]
    z = np.array([[-0.0, 0.0, -1.0]], np.float32)
    assert ref.check_topk(z, None, 1, np.array([[0]], np.int32))[0]   # -0 == +0


def test_check_row_starts():
    s = np.array([[9, 9, 1, 5, 2, 0]], np.float32)
    ok, why = ref.check_topk(s, np.array([4]), 2, np.array([[1, 2]], np.int32), row_starts=np.array([2]))
    assert ok, why
    assert not ref.check_topk(s, np.array([4]), 2, np.array([[0, 1]], np.int32), row_starts=np.array([2]))[0]


@pytest.mark.parametrize("name", ref.CASES)
def test_reference_passes_own_check_on_every_case(name):
    s, lens = ref.make_case(name, 6, 4096 + 3, K, seed=1)
    out = ref.reference_topk(s, lens, K)
    ok, why = ref.check_topk(s, lens, K, out)
    assert ok, f"{name}: {why}"


def test_reference_matches_plain_sort_on_distinct_values():
    rng = np.random.default_rng(3)
    s = rng.permutation(5000).astype(np.float32)[None]
    out = ref.reference_topk(s, None, 100)
    assert set(out[0].tolist()) == set(_true_topk(s[0], 100).tolist())


# ---- the torch (device-side) check agrees with the CPU check --------------------------------
def _variants(s, lens, k, rng):
    """A correct answer and answers broken in each way the check must see (or must accept)."""
    import torch

    good = ref.reference_topk(s, lens, k)
    out = {"reference": good}
    n = np.minimum(np.asarray(lens, np.int64), s.shape[1])
    long_rows = [b for b in range(s.shape[0]) if n[b] > k]
    short_rows = [b for b in range(s.shape[0]) if n[b] <= k]
    if long_rows:
        b = long_rows[0]
        keys = ref.value_keys(s[b, :n[b]])
        order = np.argsort(keys, kind="stable")[::-1]
        alt = good.copy()                     # the same values through other indices (ties)
        alt[b] = order[:k][rng.permutation(k)].astype(np.int32)
        out["tie_choice"] = alt
        x = good.copy()
        x[b, 0] = x[b, 1]
        out["duplicate"] = x
        x = good.copy()
        x[b, -1] = n[b]
        out["past_length"] = x
        x = good.copy()
        x[b, 0] = -1
        out["padding_in_long_row"] = x
        chosen = set(good[b].tolist())
        outside = [int(i) for i in order[k:] if int(i) not in chosen]
        lowest = int(np.argmin(keys[good[b]]))
        if outside and keys[outside[-1]] != keys[good[b][lowest]]:
            x = good.copy()
            x[b, lowest] = outside[-1]            # a value below the k-th largest
            out["smaller_value"] = x
    if short_rows:
        b = short_rows[0]
        x = good.copy()
        x[b, -1] = 0
        out["short_row_no_padding"] = x
    return {name: torch.from_numpy(o) for name, o in out.items()}


@pytest.mark.parametrize("name", ref.CASES)
def test_torch_check_agrees_with_the_cpu_check(name):
    import torch

    rng = np.random.default_rng(7)
    for B, L, k in ((5, 300, 16), (9, 97, 32)):
        s, lens = ref.make_case(name, B, L, k, seed=2)
        st, lt = torch.from_numpy(s), torch.from_numpy(lens)
        want = ref.reference_keys(st, lt, k)
        for what, out in _variants(s, lens, k, rng).items():
            cpu_ok, cpu_why = ref.check_topk(s, lens, k, out.numpy())
            dev_ok, dev_why = ref.check_topk_torch(st, lt, k, out)
            cached_ok, _ = ref.check_topk_torch(st, lt, k, out, want=want)
            assert cpu_ok == dev_ok == cached_ok, f"{name} {B}x{L} {what}: cpu {cpu_why!r}, torch {dev_why!r}"
            assert cpu_ok == (what in ("reference", "tie_choice")), f"{name} {what}: {cpu_why}"
            if not dev_ok:
                assert dev_why.split(":")[0] == cpu_why.split(":")[0], (dev_why, cpu_why)   # same row


def test_torch_check_nan_signed_zero_and_row_starts():
    import torch

    t = torch.tensor
    s = t([[np.inf, -np.nan, 1.0, np.nan, -0.0, 0.0]], dtype=torch.float32)
    assert ref.check_topk_torch(s, None, 2, t([[1, 3]], dtype=torch.int32))[0]        # every NaN alike, on top
    assert not ref.check_topk_torch(s, None, 2, t([[0, 3]], dtype=torch.int32))[0]
    z = t([[-0.0, 0.0, -1.0]], dtype=torch.float32)
    assert ref.check_topk_torch(z, None, 1, t([[0]], dtype=torch.int32))[0]             # -0 == +0
    r = t([[9, 9, 1, 5, 2, 0]], dtype=torch.float32)
    four, two = t([4], dtype=torch.int32), t([2], dtype=torch.int32)
    assert ref.check_topk_torch(r, four, 2, t([[1, 2]], dtype=torch.int32), row_starts=two)[0]
    assert not ref.check_topk_torch(r, four, 2, t([[0, 1]], dtype=torch.int32), row_starts=two)[0]
    ok, why = ref.check_topk_torch(r, None, 2, t([[0, 1, 2]], dtype=torch.int32))
    assert not ok and "shape" in why


# ---- adversarial generators --------------------------------------------------------------------
def test_one_bin_case_puts_over_77_percent_in_one_coarse_bin():
    s, _ = ref.make_case("one_bin_77", 4, 50000, 2048, seed=0)
    for row in s:
        counts = np.bincount(ref.coarse_bins(row, 8), minlength=256)
        assert counts.max() / row.size > 0.75


def test_edge_lengths_cover_the_boundaries():
    _, lens = ref.make_case("edge_lengths", 16, 10000, 2048)
    assert {0, 1, 2047, 2048, 2049, 10000} <= set(lens.tolist())


def test_special_cases_contain_what_they_claim():
    s, _ = ref.make_case("specials", 4, 20000, 64)
    assert np.isnan(s).any() and np.isposinf(s).any() and np.isneginf(s).any()
    d, _ = ref.make_case("denormals", 2, 20000, 64)
    assert ((np.abs(d) > 0) & (np.abs(d) < np.finfo(np.float32).tiny)).any()


# ---- key model -------------------------------------------------------------------------------
def test_key16_orders_like_floats():
    v = np.array([-np.inf, -65504, -1.5, -1e-7, -0.0, 0.0, 6e-8, 1.0, 65504, 70000, np.inf, np.nan],
                 np.float32)
    k = ref.key16(v)
    assert np.all(np.diff(k.astype(np.int64)) >= 0)
    assert k[-1] > k[-2]            # NaN above +inf
    assert ref.key16(np.array([-np.nan], np.float32))[0] == k[-1]


def test_threshold_bin_counts_known_row():
    # 10 values in one fp16 bin (1.0..1.2), 5 far above: k=8 needs 3 from the bin of 10
    row = np.concatenate([np.full(5, 100.0), np.linspace(1.0, 1.1, 10), np.full(20, -3.0)]).astype(np.float32)
    assert ref.threshold_bin_counts(row[None], None, 8)[0] == 10
    assert ref.threshold_bin_counts(row[None], None, 5)[0] == 5    # the five 100.0 share a bin
    assert ref.threshold_bin_counts(row[None], None, 16)[0] == 20  # the -3.0 bin
    assert ref.threshold_bin_counts(row[None], None, 35)[0] == 0   # length <= k


def _host_harness(tmp_path, source, name):
    """Build a host program that includes topk.cuh (its TOPK_HD functions run on the CPU)."""
    src = tmp_path / f"{name}.cu"
    src.write_text(source)
    exe = tmp_path / name
    subprocess.run(["nvcc", "-I", str(tk.SOURCE_PATH.parent), "-x", "cu", str(src), "-o", str(exe)],
                   check=True, capture_output=True, timeout=240)
    return exe


HARNESS = r"""
#include "topk.cuh"
#include <cstdio>
int main(int argc, char** argv) {
  FILE* f = fopen(argv[1], "rb"); FILE* g = fopen(argv[2], "wb");
  unsigned b;
  while (fread(&b, 4, 1, f) == 1) {
    unsigned c = topk_canon(b);
    unsigned r[2] = {topk_key16(c), topk_fine_key(c)};
    fwrite(r, 4, 2, g);
  }
  fclose(f); fclose(g); return 0;
}
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_kernel_key_functions_match_numpy(tmp_path):
    """The kernel's own fp32->fp16 bit arithmetic (host-compiled) against numpy's conversion."""
    exe = _host_harness(tmp_path, HARNESS, "h")
    rng = np.random.default_rng(0)
    special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001,
                        0x477FEFFF, 0x477FF000, 0x477FF001, 0x38800000, 0x387FFFFF, 0x33000000,
                        0x33000001, 0x33800000, 0x00000001, 0x807FFFFF, 0x3F800FFF, 0x3F801000,
                        0x3F803000, 0x3F802FFF], np.uint32)
    bits = np.concatenate([special, rng.integers(0, 2**32, 200000, dtype=np.uint64).astype(np.uint32),
                           (rng.standard_normal(100000).astype(np.float32)).view(np.uint32),
                           np.arange(0x33000000, 0x38900000, 97, dtype=np.uint32)])
    (tmp_path / "in.bin").write_bytes(bits.tobytes())
    subprocess.run([str(exe), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")], check=True, timeout=60)
    got = np.frombuffer((tmp_path / "out.bin").read_bytes(), np.uint32).reshape(-1, 2)
    vals = bits.view(np.float32)
    want16 = ref.key16(vals)
    bad = np.nonzero(got[:, 0] != want16)[0]
    assert bad.size == 0, f"key16 differs for bits {bits[bad[:5]]}: {got[bad[:5], 0]} vs {want16[bad[:5]]}"
    assert np.array_equal(got[:, 1], ref.fine_keys(vals))


THR_HARNESS = r"""
#include "topk.cuh"
#include <cstdio>
int main(int argc, char** argv) {
  FILE* f = fopen(argv[1], "rb"); FILE* g = fopen(argv[2], "wb");
  unsigned f0;
  while (fread(&f0, 4, 1, f) == 1) {
    unsigned t = topk_bits(topk_keep_threshold(f0));
    fwrite(&t, 4, 1, g);
  }
  fclose(f); fclose(g); return 0;
}
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_keep_threshold_is_an_upper_set_holding_every_key_from_f0(tmp_path):
    """The long-row pass keeps x when !(x < thr(f0)); that set must contain every value with fine
    key >= f0 and be an upper set of the fine-key order (so its top K is the row's), adding at
    most -0.0 (the key just below +0.0), or +inf when f0 lies among the NaN keys."""
    exe = _host_harness(tmp_path, THR_HARNESS, "t")
    rng = np.random.default_rng(1)
    xs = np.concatenate([np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001,
                                   0x00000001, 0x80000001, 0x3F800000, 0xBF800000], np.uint32),
                         rng.integers(0, 2**32, 4000, dtype=np.uint64).astype(np.uint32),
                         rng.standard_normal(4000).astype(np.float32).view(np.uint32)])
    fine_x = ref.fine_keys(xs.view(np.float32)).astype(np.int64)
    f0s = np.concatenate([np.array([0, 1, 0x007FFFFF, 0x00800000, 0x7FFFFFFF, 0x80000000, 0x80000001,
                                    0xFF800000, 0xFF800001, 0xFFBFFFFF, 0xFFC00000], np.uint32),
                          fine_x[rng.integers(0, fine_x.size, 300)].astype(np.uint32),
                          rng.integers(0, 2**32, 300, dtype=np.uint64).astype(np.uint32)])
    f0s = np.minimum(f0s, np.uint32(0xFFC00000))   # the floor of a bin is at most fine(NaN)
    (tmp_path / "in.bin").write_bytes(f0s.tobytes())
    subprocess.run([str(exe), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")], check=True, timeout=60)
    thr = np.frombuffer((tmp_path / "out.bin").read_bytes(), np.uint32).view(np.float32)
    vals = xs.view(np.float32)
    order = np.argsort(fine_x, kind="stable")
    neg0 = xs == 0x80000000
    with np.errstate(invalid="ignore"):
        for f0, t in zip(f0s.astype(np.int64), thr):
            kept = ~(vals < t)
            assert kept[fine_x >= f0].all(), f"f0={f0:#x}: a key >= f0 is dropped (thr {t})"
            extra = kept & (fine_x < f0)
            allowed = neg0 | ((xs == 0x7F800000) & (f0 > 0xFF800000))
            assert allowed[extra].all(), f"f0={f0:#x}: keeps {xs[extra & ~allowed][:3]} below f0"
            k_sorted = kept[order]
            first = np.argmax(k_sorted) if k_sorted.any() else k_sorted.size
            assert k_sorted[first:].all(), f"f0={f0:#x}: kept set is not an upper set"


PREFILTER_HARNESS = r"""
#define TOPK_COARSE_BITS @B@
#include "topk.cuh"
#include <cstdio>
int main(int argc, char** argv) {
  FILE* g = fopen(argv[1], "wb");
  for (int t = 0; t < TOPK_BINS; ++t) {
    unsigned b = topk_bits(topk_bin_prefilter(t));
    fwrite(&b, 4, 1, g);
  }
  fclose(g); return 0;
}
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("bits", [8, 12])
def test_bin_prefilter_passes_every_value_of_bin_t_and_above(tmp_path, bits):
    """The register path skips x when x <= topk_bin_prefilter(t): no value of bin >= t may be
    skipped (every fp16 value, its fp32 neighbours, the rounding midpoints between fp16 values and
    theirs, specials, random bits), and no value two bins below t may pass."""
    exe = _host_harness(tmp_path, PREFILTER_HARNESS.replace("@B@", str(bits)), f"p{bits}")
    subprocess.run([str(exe), str(tmp_path / "out.bin")], check=True, timeout=60)
    thr = np.frombuffer((tmp_path / "out.bin").read_bytes(), np.uint32).view(np.float32)
    nb = 1 << bits
    assert thr.size == nb
    halves = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    h = halves[np.isfinite(halves)]
    hs = np.sort(h)
    mids = ((hs[1:].astype(np.float64) + hs[:-1]) / 2).astype(np.float32)
    base = np.concatenate([h, mids, np.float32([np.inf, -np.inf, 65520.0, -65520.0, 1e-30, -1e-30, 0.0, -0.0])])
    ub = base.view(np.uint32)
    rng = np.random.default_rng(3)
    xs = np.concatenate([ub, ub + 1, ub - 1, rng.integers(0, 2**32, 200000, dtype=np.uint64).astype(np.uint32),
                         rng.standard_normal(100000).astype(np.float32).view(np.uint32)])
    xs = xs[(xs & 0x7FFFFFFF) <= 0x7F800000].view(np.float32)   # NaN passes every compare-based skip
    bins = (ref.key16(xs) >> (16 - bits)).astype(np.int64)
    lo = np.full(nb, np.inf, np.float32)
    np.minimum.at(lo, bins, xs)
    lo_ge = np.minimum.accumulate(lo[::-1])[::-1]            # smallest value of bin >= t
    hi = np.full(nb, -np.inf, np.float32)
    np.maximum.at(hi, bins, xs)
    hi_le = np.maximum.accumulate(hi)                        # largest value of bin <= t
    for t in range(nb):
        if np.isnan(thr[t]):
            assert t == 0 or lo_ge[t] == np.inf or lo_ge[t] <= -65504, f"t={t}: NaN threshold"
            continue
        assert lo_ge[t] > thr[t], f"bits={bits} t={t}: {lo_ge[t]} of bin >= t is skipped (thr {thr[t]})"
        if t >= 2:
            assert hi_le[t - 2] <= thr[t], f"bits={bits} t={t}: {hi_le[t - 2]} two bins below passes"


def _nvrtc_lib():
    """NVRTC from the nvidia-cuda-nvrtc wheel (a test extra), or None."""
    import ctypes
    from pathlib import Path

    try:
        import nvidia.cuda_nvrtc as m
    except ImportError:
        return None
    for root in m.__path__:
        for name in ("libnvrtc.so.12", "libnvrtc.so"):
            f = Path(root) / "lib" / name
            if f.exists():
                return ctypes.CDLL(str(f))
    return None


def _nvrtc_compile(lib, source, options, want_ptx: bool = False):
    """(NVRTC's return code, its log[, the PTX when ``want_ptx``: needs a compute_XX architecture])."""
    import ctypes

    prog = ctypes.c_void_p()
    assert lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"topk.cu", 0, None, None) == 0
    opts = [o.encode() for o in options]
    rc = lib.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    n = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
    log = ctypes.create_string_buffer(n.value)
    lib.nvrtcGetProgramLog(prog, log)
    ptx = ""
    if want_ptx and rc == 0:
        lib.nvrtcGetPTXSize(prog, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value)
        lib.nvrtcGetPTX(prog, buf)
        ptx = buf.value.decode(errors="replace")
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    return (rc, log.value.decode(errors="replace")) + ((ptx,) if want_ptx else ())


@pytest.mark.parametrize("extra,emitted", [
    ({}, {tk.KERNEL_NAME, tk.SPLIT_KERNEL_NAME}),
    ({"TOPK_SPLIT_ONLY": 1}, {tk.SPLIT_KERNEL_NAME}),
    ({"TOPK_CLUSTER": 4}, {tk.CLUSTER_KERNEL_NAME}), ({"TOPK_RESIDENT": 1}, {tk.RESIDENT_KERNEL_NAME})])
def test_each_build_emits_only_what_it_launches(extra, emitted):
    """A build costs seconds per kernel in it: the split and cluster builds of the launcher
    (TOPK_SPLIT_ONLY, TOPK_CLUSTER=S) carry their one kernel, the main build its two."""
    import re

    lib = _nvrtc_lib()
    if lib is None:
        pytest.skip("NVRTC not installed (pip install -e '.[test]' brings it on Linux x86_64)")
    opts = rtc.build_options({**tk.defines(40960, 512, 12), **extra}) + ["--gpu-architecture=compute_90"]
    rc, log, ptx = _nvrtc_compile(lib, tk.read_source(), opts, want_ptx=True)
    assert rc == 0, log[:2000]
    assert set(re.findall(r"\.entry\s+(\w+)", ptx)) == emitted


NVRTC_BUILDS = [{}, {"TOPK_PROF": 1}, {"TOPK_KEEP_UNROLL": 4, "TOPK_SAMPLE_RUN": 1}, {"TOPK_SPLIT_ONLY": 1},
                {"TOPK_CLUSTER": 2}, {"TOPK_CLUSTER": 8, "TOPK_PROF": 1},
                {"TOPK_CLUSTER": 3, "TOPK_CLUSTER_TWO_LEVEL": 2}, {"TOPK_RESIDENT": 1},
                {"TOPK_CLUSTER": 8, "TOPK_CLUSTER_REGS": 8},
                {"TOPK_CLUSTER": 16, "TOPK_CLUSTER_REGS": 8, "TOPK_PROF": 1}]


def _nvrtc_options(bits: int, extra: dict) -> list:
    return rtc.build_options({**tk.defines(40960, 512, bits), **extra}) + ["--gpu-architecture=sm_90"]


@pytest.fixture(scope="module")
def nvrtc_builds():
    """{(bits, index in NVRTC_BUILDS): (rc, log)} of every build below, compiled side by side (NVRTC
    compiles separate programs concurrently; ctypes releases the GIL): 20 builds of 10-25 s each."""
    from concurrent.futures import ThreadPoolExecutor

    lib = _nvrtc_lib()
    if lib is None:
        pytest.skip("NVRTC not installed (pip install -e '.[test]' brings it on Linux x86_64)")
    src = tk.read_source()
    keys = [(bits, i) for bits in (8, 12) for i in range(len(NVRTC_BUILDS))]
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as ex:
        done = ex.map(lambda key: _nvrtc_compile(lib, src, _nvrtc_options(key[0], NVRTC_BUILDS[key[1]])), keys)
        return dict(zip(keys, done))


@pytest.mark.parametrize("extra", range(len(NVRTC_BUILDS)), ids=[f"extra{i}" for i in range(len(NVRTC_BUILDS))])
@pytest.mark.parametrize("bits", [8, 12])
def test_compiles_under_nvrtc(bits, extra, nvrtc_builds):
    """The GPU builds go through NVRTC (torch's _compile_kernel), which lacks some of nvcc's
    builtins: compile the real source the same way, for sm_90, with every macro set we use."""
    rc, log = nvrtc_builds[(bits, extra)]
    assert rc == 0, f"NVRTC failed ({' '.join(_nvrtc_options(bits, NVRTC_BUILDS[extra]))}): {log[:2000]}"
    assert "error" not in log.lower(), log[:2000]


def test_register_path_rule_and_the_kernels_twin_constant():
    """cluster_regs: R float4 per thread where a two-level build's slice (topk_cluster_slice's
    chunk) fits CLUSTER_REGS_VALUES values; CLUSTER_TWO_LEVEL is the kernel's default."""
    import re

    src = tk.read_source()
    assert re.search(r"#define TOPK_CLUSTER_TWO_LEVEL (\d+)", src).group(1) == str(tk.CLUSTER_TWO_LEVEL)
    assert tk.cluster_regs(131072, 8, 512) == 8 and tk.cluster_regs(131072, 8, 1024) == 4
    assert tk.cluster_regs(131072, 16, 256) == 16
    assert tk.cluster_regs(131072 + 1, 8, 512) == 0          # 16388 values per slice
    assert tk.cluster_regs(131072, 7, 512) == 0
    assert tk.cluster_regs(65536, 3, 512) == 0               # one-level builds: no register path
    assert tk.cluster_regs(65536, 4, 512) == 8 and tk.cluster_regs(65536, 4, 128) == 0
    assert tk.cluster_regs(131072, 8, 384) == 0                # R = 10 holds 15360 of 16384 values
    assert tk.cluster_regs(120000, 8, 384) == 10               # 15000 values a slice


# ---- build plumbing --------------------------------------------------------------------------
def test_build_options_from_defines():
    opts = rtc.build_options(tk.defines(40960, 512, 12))
    assert opts == ["-DSGL_TOPK_DYNAMIC_SMEM_BYTES=40960", "-DTOPK_COARSE_BITS=12", "-DTOPK_THREADS=512"]
    assert rtc.build_options({"A": None, "B": True}) == ["-DA", "-DB=1"]
    with pytest.raises(UserError):
        rtc.build_options({"bad name": 1})
    with pytest.raises(UserError):
        rtc.build_options({"A": "1 -DB=2"})


def test_defines_validate():
    with pytest.raises(UserError):
        tk.defines(40960, 512, 10)
    with pytest.raises(UserError):
        tk.defines(40960, 500, 8)
    with pytest.raises(UserError):
        tk.defines(40961, 512, 8)
    from occtune.kernels.topk.capacity import candidate_entries
    assert candidate_entries(40960) == 5120 and candidate_entries(131072) == 16384


def test_long_row_plan():
    assert tk.long_row_plan(65536, 2048) == (0, 0)
    assert tk.long_row_plan(20000, 2048, prefix_min_row=0) == (0, 0)     # shorter than 16k
    for L in (131072, 1 << 20, 65541):
        p, cap = tk.long_row_plan(L, 2048, prefix_min_row=0)
        assert p >= 2048 and 2 * p < L and cap >= 4 * 2048


def test_split_plan_fills_one_wave():
    # 64 rows on 132 SMs x 2 resident blocks: 4 blocks per row (256 <= 264), not 5 (two waves)
    assert tk.split_plan(64, 131072, 16384, 132) == 4
    assert tk.split_plan(64, 131072, 16384, 132, blocks_per_sm=1) == 2
    assert tk.split_plan(1, 1 << 20, 131072, 132) == 64              # slices >= SPLIT_MIN_SLICE
    assert tk.split_plan(132, 1 << 20, 131072, 132) == 1             # B >= SMs: one block per row
    assert tk.split_plan(100, 131072, 16384, 132) == 2               # 200 blocks <= 264
    assert tk.split_plan(8, 131072, 0, 132) == 1                     # no long-row path: no split
    assert tk.split_plan(8, 131072, 16384, 132, split=3) == 3
    assert tk.split_plan(8, 131072, 16384, 132, split=0) == 1
    with pytest.raises(UserError):
        tk.split_plan(8, 131072, 16384, 132, split=-1)


def test_rtc_without_gpu_is_a_user_error():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(UserError):
        rtc.compile_kernel("extern \"C\" __global__ void k() {}", "k", {})


def test_topk_rejects_cpu_tensors():
    import torch

    with pytest.raises(UserError):
        tk.topk(torch.zeros(2, 10), k=4)


# ---- offline compilation of the real source (occtune.build.compiled) ----------------------------------
def _built_or_skip(build, *args):
    try:
        return build(*args)
    except compiled.NoCompilerError as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("bits", [8, 12])
def test_compiles_for_sm90(bits):
    _, kernels = _built_or_skip(compiled.compile_cuda, tk.read_source(), "sm_90", tk.defines(40960, 512, bits))
    r = kernels[tk.KERNEL_NAME]
    assert r["regs"] > 0 and r["spill_stores"] == 0
    assert r["smem"] < (20000 if bits == 12 else 8192)


REMARKS = """x.cu:1:1: remark: Function Name: other [-Rpass-analysis=kernel-resource-usage]
x.cu:1:1: remark:     VGPRs: 99 [-Rpass-analysis=kernel-resource-usage]
x.cu:9:1: remark: Function Name: topk_transform_kernel [-Rpass-analysis=kernel-resource-usage]
x.cu:9:1: remark:     SGPRs: 88 [-Rpass-analysis=kernel-resource-usage]
x.cu:9:1: remark:     VGPRs: 38 [-Rpass-analysis=kernel-resource-usage]
x.cu:9:1: remark:     Occupancy [waves/SIMD]: 8 [-Rpass-analysis=kernel-resource-usage]
x.cu:9:1: remark:     LDS Size [bytes/block]: 3104 [-Rpass-analysis=kernel-resource-usage]
"""


def test_parse_remarks_per_kernel():
    r = compiled.parse_remarks(REMARKS)
    assert r == {"other": {"vgprs": 99}, "topk_transform_kernel": {"sgprs": 88, "vgprs": 38, "occupancy": 8, "lds": 3104}}
    # clang 22 names the SGPR count TotalSGPRs
    assert compiled.parse_remarks(REMARKS.replace(" SGPRs: 88", " TotalSGPRs: 90"))["topk_transform_kernel"]["sgprs"] == 90


@pytest.mark.parametrize("bits", [8, 12])
def test_compiles_for_gfx942(bits):
    _, kernels = _built_or_skip(compiled.compile_hip, tk.read_source(), "gfx942", tk.defines(49152, 512, bits))
    r = kernels[tk.KERNEL_NAME]
    assert r.get("vgprs", 0) > 0 and r.get("sgprs", 0) > 0
    assert r.get("vgpr_spill", 0) == 0
    assert 0 < r["lds"] < (20000 if bits == 12 else 8192)
    assert 1 <= r["occupancy"] <= 8


def test_launcher_plumbing_with_a_fake_device(monkeypatch):
    """The host side of occtune.kernels.topk.topk without a GPU: which kernels it launches, on what grid,
    with what split and record sizes, and that the driver's occupancy answer is asked once."""

    import torch

    launches, occ_calls = [], []
    fake_sms(monkeypatch)
    monkeypatch.setattr(rtc, "launch_packed", lambda h, grid, block, smem, pack, stream, tensors:
                        launches.append((h.name, (grid,), (block,), pack.values(tensors))))
    monkeypatch.setattr(rtc, "occupancy_query", lambda h, thr, smem: occ_calls.append((h.name, thr)) or 2)
    tk.clear_plans()
    d = tk.defines(32768, 512, 12)
    main = rtc.RtcKernel(None, tk.KERNEL_NAME, "sm_90", d, [], 0.0, 32768)
    split = rtc.RtcKernel(None, tk.SPLIT_KERNEL_NAME, "sm_90", d, [], 0.0)

    B, L = 8, 131072
    x = torch.zeros(B, L)
    for _ in range(2):
        launches.clear()
        tk.topk(x, 2048, kernel=main, split_kernel=split, cluster=False)
        assert [n for n, *_ in launches] == [tk.SPLIT_KERNEL_NAME, tk.KERNEL_NAME]
        (_, sgrid, sblock, sargs), (_, mgrid, mblock, margs) = launches
        prefix, scap = tk.long_row_plan(L, 2048)
        s = tk.split_plan(B, L, scap, 132, None, 2)
        assert s == 8 and sgrid == (B * s,) and sargs[-1] == s and sblock == (512,)
        assert sargs[-2].numel() == B * (2 + 4096)          # per row: kept count, 12-bit histogram, cut bin
        assert mgrid == (B,) and margs[-1] == 1 and margs[-2] is sargs[-2]
        assert margs[-4:-2] == [scap, prefix]
    assert occ_calls == [(tk.SPLIT_KERNEL_NAME, 512)]        # asked once, then remembered

    launches.clear()
    tk.topk(torch.zeros(200, L), 2048, kernel=main, split_kernel=split, cluster=False)   # B >= SMs
    assert [(n, g) for n, g, *_ in launches] == [(tk.KERNEL_NAME, (200,))]
    assert launches[0][3][-1] == 0
    launches.clear()
    tk.topk(torch.zeros(4, 8192), 2048, kernel=main, split_kernel=split, split=5, cluster=False)
    assert [(n, g) for n, g, *_ in launches] == [(tk.KERNEL_NAME, (4,))]


def test_cluster_plan_and_launch_with_a_fake_device(monkeypatch):
    """The cluster path's host side: sm_90 picks it for split rows whose kept values fit the
    budget, sizes the cluster for one wave (driver's blocks/SM and resident-cluster answers),
    launches one kernel (its scratch list holds only spills), and keeps the split kernel where it
    does not fit."""

    import torch

    launches, built = [], []
    fake_sms(monkeypatch)
    monkeypatch.setattr(rtc, "launch_packed", lambda h, grid, block, smem, pack, stream, tensors:
                        launches.append((h.name, (grid,), pack.values(tensors))))
    monkeypatch.setattr(rtc, "occupancy_query", lambda h, thr, smem: 2)
    tk.clear_plans()
    most = {}      # resident clusters by cluster size (default: plenty)
    monkeypatch.setattr(rtc, "max_active_clusters",
                        lambda h, grid, thr, smem: most.get(h.defines["TOPK_CLUSTER"], 1000))
    handles = {}

    def fake_cluster(handle, S, budget, threads, bits, dev, regs=0, block=0):
        built.append(S)
        extra = {"TOPK_CLUSTER": S, **({"TOPK_CLUSTER_REGS": regs} if regs else {}),
                 **({"TOPK_THREADS": block} if block else {})}
        return handles.setdefault((S, regs, block), rtc.RtcKernel(None, tk.CLUSTER_KERNEL_NAME, "90",
                                                                  {**handle.defines, **extra}, [], 0.0, 49152))
    monkeypatch.setattr(rt, "_cluster_handle", fake_cluster)
    monkeypatch.setattr(tk.policy, "RES_MAX_PARTS", 0)      # the long-row paths that do not fit on chip
    split = rtc.RtcKernel(None, tk.SPLIT_KERNEL_NAME, "90", tk.defines(49152), [], 0.0)
    main = rtc.RtcKernel(None, tk.KERNEL_NAME, "90", tk.defines(49152, 512, 12), [], 0.0, 49152)
    main32 = rtc.RtcKernel(None, tk.KERNEL_NAME, "90", tk.defines(32768, 512, 12), [], 0.0, 32768)
    L = 131072
    prefix, scap = tk.long_row_plan(L, 2048)

    tk.topk(torch.zeros(64, L), 2048, kernel=main, split_kernel=split)
    (name, grid, args), = launches
    assert name == tk.CLUSTER_KERNEL_NAME and grid == (64 * 4,) and args[-3:-1] == [scap, prefix]
    assert len(args) == 17 and args[-1].numel() == 64 * 2 * scap   # spill list, no split record
    # fewer resident clusters than rows: a smaller cluster keeps one wave
    launches.clear()
    handles.clear()
    tk.clear_plans()                 # the fake driver's answers changed: plan again
    most.update({4: 62, 3: 85})   # GPC granularity: 62 clusters of 4, not 66
    tk.topk(torch.zeros(64, L), 2048, kernel=main, split_kernel=split)
    assert launches[0][1] == (64 * 3,)
    most.clear()
    # B >= SMs: one block per row (as without clusters); forced, the cluster kernel splits
    launches.clear()
    handles.clear()
    tk.clear_plans()                 # the fake driver's answers changed: plan again
    monkeypatch.setattr(rtc, "occupancy_query", lambda h, thr, smem: 4)
    main.info.clear()                                        # (the answer is kept per kernel)
    tk.topk(torch.zeros(256, L), 2048, kernel=main, split_kernel=split)
    assert [(n, g) for n, g, _ in launches] == [(tk.KERNEL_NAME, (256,))]
    launches.clear()
    tk.topk(torch.zeros(256, L), 2048, kernel=main, split_kernel=split, split=2, cluster=True)
    assert [(n, g) for n, g, _ in launches] == [(tk.CLUSTER_KERNEL_NAME, (512,))]
    # few rows wanting more blocks than a cluster holds: the split kernel's wider split
    launches.clear()
    tk.topk(torch.zeros(1, 1 << 20), 2048, kernel=main, split_kernel=split)
    assert [(n, g) for n, g, _ in launches] == [(tk.SPLIT_KERNEL_NAME, (64,)), (tk.KERNEL_NAME, (1,))]
    launches.clear()
    tk.topk(torch.zeros(8, L), 2048, kernel=main, split_kernel=split)    # 8 x 8 = one wave
    assert [(n, g) for n, g, _ in launches] == [(tk.CLUSTER_KERNEL_NAME, (64,))]
    # a budget too small for a block's expected kept values: the split kernel instead
    launches.clear()
    small = rtc.RtcKernel(None, tk.KERNEL_NAME, "90", tk.defines(4096, 512, 8), [], 0.0, 4096)
    tk.topk(torch.zeros(64, L), 2048, kernel=small, split_kernel=split)
    assert [n for n, _, _ in launches] == [tk.SPLIT_KERNEL_NAME, tk.KERNEL_NAME]
    # the residency loop lowers S; a size whose stages would not fit ends it (split kernel)
    launches.clear()
    handles.clear()
    tk.clear_plans()                 # the fake driver's answers changed: plan again
    most.update({S: 0 for S in range(3, 9)})   # 66 rows: 8 per row fill one wave (4 blocks/SM)
    tk.topk(torch.zeros(66, 1 << 20), 2048, kernel=main32, split_kernel=split)
    assert built[-2:] == [4, 3]                   # S=8..3 tried, S=2 not: its stages would overflow
    assert [n for n, _, _ in launches] == [tk.SPLIT_KERNEL_NAME, tk.KERNEL_NAME]
    most.clear()
    # a cluster kernel that cannot be built with this budget: the split kernel (automatic only)
    launches.clear()

    def no_build(*a):
        raise UserError("cannot grant the shared memory")
    monkeypatch.setattr(rt, "_cluster_handle", no_build)
    tk.clear_plans()
    tk.topk(torch.zeros(8, L), 2048, kernel=main, split_kernel=split)
    assert [n for n, _, _ in launches] == [tk.SPLIT_KERNEL_NAME, tk.KERNEL_NAME]
    with pytest.raises(UserError, match="shared memory"):
        tk.topk(torch.zeros(8, L), 2048, kernel=main, split_kernel=split, cluster=True)
    monkeypatch.setattr(rt, "_cluster_handle", fake_cluster)
    # a given split with cluster unset keeps the split kernel; cluster=True and split < 2 is an error
    launches.clear()
    tk.topk(torch.zeros(8, L), 2048, kernel=main, split_kernel=split, split=4)
    assert [(n, g) for n, g, _ in launches] == [(tk.SPLIT_KERNEL_NAME, (32,)), (tk.KERNEL_NAME, (8,))]
    with pytest.raises(UserError, match="split >= 2"):
        tk.topk(torch.zeros(8, L), 2048, kernel=main, split_kernel=split, split=1, cluster=True)
    # cluster=True with no resident cluster size: an error that says what to do
    most.update({S: 0 for S in range(2, 9)})
    handles.clear()
    tk.clear_plans()                 # the fake driver's answers changed: plan again
    with pytest.raises(UserError, match="split=S"):
        tk.topk(torch.zeros(8, L), 2048, kernel=main, split_kernel=split, cluster=True)
    most.clear()
    # forced: cluster=True with split beyond a cluster's size is capped; not on gfx or sm_80
    launches.clear()
    out, diag = tk.topk(torch.zeros(8, L), 2048, kernel=main, split_kernel=split, split=16,
                        cluster=True, return_diagnostics="lazy")
    assert launches[0][1] == (8 * tk.MAX_CLUSTER,)
    for arch in ("80", "gfx942"):
        other = rtc.RtcKernel(None, tk.KERNEL_NAME, arch, tk.defines(49152), [], 0.0, 49152)
        with pytest.raises(UserError, match="sm_90"):
            tk.topk(torch.zeros(8, L), 2048, kernel=other, split_kernel=split, cluster=True)
    with pytest.raises(UserError, match="long rows"):     # neither long nor short
        tk.topk(torch.zeros(8, 100000), 2048, kernel=main, split_kernel=split, cluster=True)
    launches.clear()
    tk.topk(torch.zeros(0, L), 2048, kernel=main, split_kernel=split, cluster=True)   # no rows: nothing
    assert launches == []


def test_short_rows_take_one_cluster_a_row_on_sm_90(monkeypatch):
    """Short rows (policy.short_cluster): on sm_90 the automatic plan launches the cluster kernel's
    register build, one cluster a row, with the policy's block size (not the config's); rows that
    are not 16-byte aligned, too many rows for one block a SM, sm_80, or any path option given
    keep the other paths; cluster=True with split=S sets the cluster."""
    import torch

    launches = []
    fake_sms(monkeypatch)
    monkeypatch.setattr(rtc, "launch_packed", lambda h, grid, block, smem, pack, stream, tensors:
                        launches.append((h.name, grid, block, h.defines, pack.values(tensors))))
    monkeypatch.setattr(rtc, "occupancy_query", lambda h, thr, smem: 2)
    monkeypatch.setattr(rt, "_cluster_handle", lambda handle, S, budget, threads, bits, dev, regs=0, block=0:
                        rtc.RtcKernel(None, tk.CLUSTER_KERNEL_NAME, "90", {**handle.defines, "TOPK_CLUSTER": S,
                                      "TOPK_CLUSTER_REGS": regs, "TOPK_THREADS": block}, [], 0.0, 49152))
    monkeypatch.setattr(rt, "_resident_handle", lambda handle, *a: rtc.RtcKernel(
        None, tk.RESIDENT_KERNEL_NAME, "90", handle.defines, [], 0.0, 49152))
    tk.clear_plans()
    main = rtc.RtcKernel(None, tk.KERNEL_NAME, "90", tk.defines(49152, 1024, 12), [], 0.0, 49152)

    def path(x, **kw):
        launches.clear()
        tk.topk(x, 2048, kernel=main, **kw)
        (name, grid, block, d, args), = launches
        return name, grid, block, d.get("TOPK_CLUSTER"), d.get("TOPK_CLUSTER_REGS")

    c = tk.CLUSTER_KERNEL_NAME
    assert path(torch.zeros(1, 8192)) == (c, 8, 256, 8, 1)
    assert path(torch.zeros(16, 16384)) == (c, 128, 512, 8, 1)
    assert path(torch.zeros(2, 65536)) == (c, 32, 512, 16, 2)
    (_, _, _, _, args), = launches
    assert args[-3:-1] == [0, 0]                          # no long-row pass, no scratch list
    assert path(torch.zeros(64, 8192))[0] == tk.RESIDENT_KERNEL_NAME      # 64 x 4 blocks > 132 SMs
    assert path(torch.zeros(1, 8192), resident=True)[0] == tk.RESIDENT_KERNEL_NAME
    assert path(torch.zeros(1, 8192), cluster=False)[0] == tk.KERNEL_NAME       # options given: no automatic path
    assert path(torch.zeros(1, 8194)[:, :8193])[0] != c                   # row stride 8194: unaligned rows
    assert path(torch.zeros(1, 8192), lengths=torch.full((1,), 8000, dtype=torch.int32))[0] == c   # lengths: fine
    assert path(torch.zeros(1, 8192), cluster=True, split=4) == (c, 4, 512, 4, 1)
    with pytest.raises(UserError, match="4 to 16 blocks"):
        path(torch.zeros(1, 8192), cluster=True, split=2)
    sm80 = rtc.RtcKernel(None, tk.KERNEL_NAME, "80", tk.defines(49152, 1024, 12), [], 0.0, 49152)
    launches.clear()
    tk.topk(torch.zeros(1, 8192), 2048, kernel=sm80)
    assert launches[0][0] != c


def test_cluster_fits():
    # 64 x 128K over 4 blocks: ~1.15K kept per block x 1.5 fits 32 KiB (4096 entries)
    assert tk.cluster_fits(131072, 2048, 32768, 4)
    assert not tk.cluster_fits(131072, 2048, 32768, 1)       # a whole row's ~4.6K x 1.5
    assert tk.cluster_fits(1 << 20, 2048, 49152, 2) and not tk.cluster_fits(1 << 20, 2048, 40960, 2)


@pytest.mark.parametrize("vendor", ["amd", "nvidia"])
def test_cluster_kernel_refuses_targets_without_clusters(vendor):
    """-DTOPK_CLUSTER builds stop with a message that says why on HIP (gfx942) and on sm_80,
    and build for sm_90 with the cluster kernel in the output."""
    macros = {**tk.defines(32768, 512, 12), "TOPK_CLUSTER": 2}
    src = tk.read_source()
    if vendor == "amd":
        with pytest.raises(compiled.CompileError, match="TOPK_CLUSTER needs CUDA thread-block clusters"):
            _built_or_skip(compiled.compile_hip, src, "gfx942", macros)
        return
    with pytest.raises(compiled.CompileError, match="needs sm_90 or later"):
        _built_or_skip(compiled.compile_cuda, src, "sm_80", macros)
    _, kernels = compiled.compile_cuda(src, "sm_90", macros)
    assert "topk_cluster_kernel" in kernels          # ptxas -v names every entry it compiled


def test_family_warm_compiles_every_kernel_the_launcher_then_uses(monkeypatch):
    """TopkFamily.warm (the engine's ahead-of-time build) runs the launcher's own planning: after
    it, planning the launches of every default workload (and of its adversarial sets' shapes)
    compiles nothing."""

    import torch

    from occtune.kernels.topk.family import TopkFamily

    compiled = {}

    def fake_compile(source, name, defines=None, device=None, dynamic_smem=0, extra_options=None):
        key = (name, tuple(sorted((defines or {}).items())), int(dynamic_smem))   # rtc caches by these
        return compiled.setdefault(key, rtc.RtcKernel(None, name, "90", dict(defines or {}), [], 0.0,
                                                      int(dynamic_smem)))
    monkeypatch.setattr(rtc, "compile_kernel", fake_compile)
    monkeypatch.setattr(rtc, "occupancy_query", lambda h, thr, smem: 2)
    monkeypatch.setattr(rtc, "max_active_clusters", lambda h, grid, thr, smem: 40)   # S=8 not for 64 rows
    monkeypatch.setattr(rtc, "allow_nonportable_cluster", lambda h: None)          # short rows' S=16
    fake_sms(monkeypatch)
    monkeypatch.setattr(rt, "_DERIVED_HANDLES", {})
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_device", lambda dev: None)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    fam = TopkFamily()
    for cfg in ({"lds_budget": 32768, "threads": 512, "bits": 8}, {"lds_budget": 131072, "threads": 512, "bits": 8}):
        main = tk.build(cfg["lds_budget"], cfg["threads"], cfg["bits"])
        for w in fam.workloads():
            fam.warm(main, w, "cuda")
        warmed = set(compiled)
        try:
            for w in fam.workloads():
                for B in {w["B"], min(w["B"], 8)}:
                    tk.plan_for(torch.empty(1).expand(B, w["L"]), w["K"], kernel=main)
        finally:
            tk.clear_plans()              # plans of these fake kernels must not outlive the test
        assert set(compiled) == warmed, set(compiled) - warmed
    names = {k[0] for k in compiled}
    assert names == {tk.KERNEL_NAME, tk.SPLIT_KERNEL_NAME, tk.CLUSTER_KERNEL_NAME, tk.RESIDENT_KERNEL_NAME}   # all were needed


def test_a_shape_s_first_call_builds_the_cluster_sizes_it_may_try_side_by_side(monkeypatch):
    """Each cluster build takes seconds and the plan may try S, S-1, S-2 in turn: they are built
    at once, on threads of their own (the barrier breaks, and nothing is recorded, otherwise)."""
    import threading

    barrier, done = threading.Barrier(3, timeout=20), []

    def fake_cluster(handle, S, budget, threads, bits, dev):
        barrier.wait()
        done.append((S, threading.current_thread().name))
    monkeypatch.setattr(rt, "_cluster_handle", fake_cluster)
    monkeypatch.setattr(rt, "_DERIVED_HANDLES", {})
    main = rtc.RtcKernel(None, tk.KERNEL_NAME, "90", tk.defines(49152, 512, 12), [], 0.0, 49152)
    rt._prefetch_clusters(main, [8, 7, 6], 49152, 512, 12, "cuda:0")
    assert sorted(done) == [(6, "occtune-cluster-6"), (7, "occtune-cluster-7"), (8, "occtune-cluster-8")]
    done.clear()
    rt._prefetch_clusters(main, [8], 49152, 512, 12, "cuda:0")     # one size: the plan builds it itself
    assert done == []


def test_warm_plans_the_workloads_rows_and_its_adversarial_rows_side_by_side(monkeypatch):
    """(64, 128K) warms the plans of 64 rows and of 8 (the adversarial sets) at once: each may wait
    seconds for a cluster compile, and in sequence the second compile started only after the first
    (the H200 sweep's last compile, 7 s on the critical path)."""
    import threading
    import types

    import torch

    from occtune.kernels.topk.family import TopkFamily

    both, planned = threading.Barrier(2, timeout=20), []

    def fake_plan(handle, B, *args):
        both.wait()                    # BrokenBarrierError: the plans ran one after the other
        planned.append(B)
        return 4
    monkeypatch.setattr(rt, "_cluster_plan", fake_plan)
    monkeypatch.setattr(rt, "_cluster_kernel", lambda handle, S, B, *a: planned.append(("kernel", S, B)))
    monkeypatch.setattr(tk.policy, "RES_MAX_PARTS", 0)      # rows that do not fit on chip
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_device", lambda dev: None)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda dev: types.SimpleNamespace(multi_processor_count=132))
    main = rtc.RtcKernel(None, tk.KERNEL_NAME, "90", tk.defines(49152, 512, 12), [], 0.0, 49152)
    TopkFamily().warm(main, {"B": 64, "L": 131072, "K": 2048}, "cuda")
    assert sorted(b for b in planned if isinstance(b, int)) == [8, 64]
    assert sorted(b for b in planned if isinstance(b, tuple)) == [("kernel", 4, 8), ("kernel", 4, 64)]


@pytest.mark.parametrize("B,built_sizes", [(1, [(8, 0), (8, 8)]), (64, [(2, 0), (3, 0), (4, 0)])])
def test_a_first_call_builds_lower_cluster_sizes_only_where_the_first_may_not_fit(monkeypatch, B, built_sizes):
    """One row per cluster of 8 on 132 SMs fits for sure: build S=8 alone (and its register
    build: 16K-value slices); 64 rows in clusters of 4 with 2 blocks/SM fill the GPU: S=3 and S=2
    are built alongside S=4 (the driver may refuse 4)."""

    import torch

    built = []
    fake_sms(monkeypatch)
    monkeypatch.setattr(rtc, "launch_packed", lambda *a: None)
    monkeypatch.setattr(rtc, "occupancy_query", lambda h, thr, smem: 2)
    monkeypatch.setattr(rtc, "max_active_clusters", lambda h, grid, thr, smem: 1000)
    monkeypatch.setattr(rt, "_DERIVED_HANDLES", {})
    tk.clear_plans()

    def fake_compile(source, name, defines, dev, dynamic_smem=0):
        built.append((defines.get("TOPK_CLUSTER"), defines.get("TOPK_CLUSTER_REGS", 0)))
        return rtc.RtcKernel(None, name, "90", dict(defines), [], 0.0, dynamic_smem)
    monkeypatch.setattr(rtc, "compile_kernel", fake_compile)
    main = rtc.RtcKernel(None, tk.KERNEL_NAME, "90", tk.defines(49152, 512, 12), [], 0.0, 49152)
    tk.topk(torch.zeros(B, 131072), 2048, kernel=main, resident=False)
    assert sorted(s for s in built if s[0]) == built_sizes


@pytest.mark.parametrize("args, says", [
    (["--clusters", "8,x"], "--clusters: 'x'"), (["--splits", "0"], "--splits: '0'"),
    (["--shapes", "64x"], "--shapes: '64x'"), (["--budgets", "4Q"], "--budgets: cannot read '4Q'"),
    (["--threads", "512,-1"], "--threads: '-1'"), (["--shapes", ","], "--shapes: ',' names no shape"),
    (["--bits", "9"], "coarse key width"), (["--threads", "100"], "threads"), (["--budgets", "4"], "LDS budget"),
    (["--clusters", "1"], "--clusters: 1 is not a cluster size")])
def test_bench_topk_bad_list_is_one_error_line(capsys, args, says):
    """benchmarks/topk/bench_topk.py reads its list options before it needs a GPU: a bad item is one
    line naming the option, exit 2 (it was a ValueError traceback for --splits and --clusters)."""
    bench = load_benchmark("topk/bench_topk")
    assert bench.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and says in err[0], err
    a = bench.argparse.Namespace(shapes="8x131072, 1x8192,", budgets="32K", bits="12", threads="512",
                                 splits="", clusters="8,16")
    assert bench.parse_lists(a) == {"shapes": [(8, 131072), (1, 8192)], "budgets": [32768], "bits": [12],
                                    "threads": [512], "splits": [], "clusters": [8, 16]}


def test_bench_topk_path_says_when_the_plan_changed_the_threads():
    """A short row's cluster takes policy.short_cluster's threads, not the config's: the path label
    says so ("8cr@256"), so a table's "1024" never stands for blocks of 256."""
    bench = load_benchmark("topk/bench_topk")
    run = {"resident": 0, "split": 8, "cluster": 8, "cluster_regs": 1, "threads": 1024, "block_threads": 256}
    assert bench._path(run) == "8cr@256"
    assert bench._path({**run, "block_threads": 1024}) == "8cr"
    assert bench._path({**run, "resident": 128, "block_threads": 512}) == "r128@512"
    assert bench._path({"resident": 0, "split": 2, "cluster": 0, "cluster_regs": 0, "threads": 512}) == "2"

# The probe's kernels under Triton's interpreter, in a child process: the interpreter must be on
# before Triton is first imported (its own @jit library functions, e.g. tl.max's combine, are
# decorated then), so an earlier test in this process that imported Triton without it would fail
# the kernel with "Cannot call @triton.jit'd outside of the scope of a kernel".
READ_PROBE_CHILD = r"""
import json, sys
import torch
sys.path.insert(0, %r)
import read_probe as probe
x = torch.rand(3, 10000, generator=torch.Generator().manual_seed(0))
flat = x.reshape(-1)
n = flat.numel()
wrong = []
for c, block, warps in (*probe.CONFIGS, (6144, 4096, 4)):
    for first in (True, False):
        at = [i * c if first else min((i + 1) * c, n) - 1 for i in range(-(-n // c))]
        y = flat.clone()
        y[at] = 2.0 + torch.arange(len(at), dtype=torch.float32)
        got = probe.chunk_max(y, c, block, warps).tolist()
        if got != [2.0 + i for i in range(len(at))]:
            wrong.append({"chunk": c, "first": first, "got": got})
print(json.dumps({"wrong": wrong, "checks": [check() for _, _, check in probe.probes(x)],
                  "configs": len(probe.CONFIGS)}))
"""


def test_read_probe_sees_each_chunks_first_and_last_value():
    """The read-once probe (benchmarks/read_probe.py) is a floor only if each program reads its own
    chunk, all of it: a chunk's max planted at its first or its last value (the last chunk is
    short; one chunk is not a multiple of the step) must come back, and nothing from the next
    chunk; the probes' own checks pass on random rows."""
    from childproc import child_json

    got = child_json(READ_PROBE_CHILD % str(REPO / "benchmarks"), {"TRITON_INTERPRET": "1"})
    assert got["wrong"] == [], got["wrong"]
    assert len(got["checks"]) > got["configs"] and all(got["checks"]), got["checks"]


def test_read_probe_refuses_a_wrong_probe(monkeypatch):
    """A probe whose result is wrong is an error, not a time."""
    import torch

    probe = load_benchmark("read_probe")
    monkeypatch.setattr(probe, "probes", lambda x: [("bad", lambda: None, lambda: False)])
    with pytest.raises(RuntimeError, match="read probe 'bad' gave a wrong result"):
        probe.read_once_us(torch.zeros(1, 8))


def test_profile_reads_only_rows_a_profiled_block_wrote():
    """profile_topk.py's phase table: a row holding top-k indices (a path whose blocks return before
    TOPK_PROF_DUMP) is "not reached", not cycles; a written row keeps its place and its phases."""
    prof = load_benchmark("topk/profile_topk")
    t0, t1 = 5 << 32, (5 << 32) + 20_000                     # global timer: a 20 us block
    written = [0, 100, 300, 500, 700, -1, -1, -1, -1, 900,
               t0 & 0xFFFFFFFF, t0 >> 32, t1 & 0xFFFFFFFF, t1 >> 32, 7]
    indices = list(range(15))                                 # an all-equal row's first outputs
    rows = prof.stamped([indices, written, [3] + written[1:]])
    assert rows[1] == written and rows[0] == [-1] * 15 and rows[2] == [-1] * 15
    table = prof.phase_table(rows, 1.0)
    assert table["sample"] == 0.1 and table["kernel"] == 0.9 and table["sms"] == 1
    assert [r["row"] for r in prof.block_rows(rows, 1.0, {})] == [1]
    # its path label is the bench's, from a call's diagnostics (no block_threads there)
    assert prof._path({"resident": 0, "split": 8, "cluster": 8, "cluster_regs": 4}) == "8cr"
    assert prof._path({"resident": 128, "split": 1, "cluster": 0, "cluster_regs": 0}) == "r128"


def test_profile_names_the_phases_of_the_path_the_rows_took():
    """profile_topk.py labels a cluster row's stamps 4-7 as the narrowing's (topk_cluster_narrow) only
    where the call says a cluster narrowed rows: its register path with bin t over the stage, or
    kept lists that overflowed (row passes); the resident kernel's and the others' stay theirs."""
    prof = load_benchmark("topk/profile_topk")
    base = {"resident": 0, "cluster": 8, "cluster_regs": 4, "bin_overflow_rows": 0, "row_pass_rows": 0}
    assert prof.phases_of(base) is prof.PHASES
    assert prof.phases_of({**base, "bin_overflow_rows": 8}) is prof.NARROW_PHASES
    sampled = {**base, "cluster": 2, "cluster_regs": 0, "bin_overflow_rows": 64}
    assert prof.phases_of(sampled) is prof.PHASES                      # block 0 refines the lists
    assert prof.phases_of({**sampled, "row_pass_rows": 64}) is prof.NARROW_PHASES
    assert prof.phases_of({**base, "cluster": 0, "row_pass_rows": 3}) is prof.PHASES   # one block a row
    assert prof.phases_of({**base, "resident": 128, "row_pass_rows": 1}) is prof.RESIDENT_PHASES
    assert [p[0] for p in prof.NARROW_PHASES][3:7] == ["pass1", "digits", "emit", "wait"]


def test_profile_times_the_one_key_finish_as_the_narrowing_finish():
    """A one-key row (topk_cluster_one_key) writes stamps 0-3 and 9 only: the narrowing's inner
    phases are not reached (nan), its finish is the span from the threshold to the end."""
    import math
    prof = load_benchmark("topk/profile_topk")
    one_key = [0, 2000, 5000, 6000, -1, -1, -1, -1, -1, 9000]
    full = [0, 2000, 5000, 6000, 7000, 7500, 8000, 8500, -1, 9000]
    res = prof.phase_table([one_key], 1.0, prof.NARROW_PHASES)
    assert math.isnan(res["pass1"]) and math.isnan(res["emit"]) and math.isnan(res["wait"])
    assert res["finish"] == 3.0 and res["thresh"] == 1.0 and res["kernel"] == 9.0     # us at 1 GHz
    res = prof.phase_table([full], 1.0, prof.NARROW_PHASES)
    assert (res["pass1"], res["emit"], res["finish"]) == (1.0, 0.5, 3.0)
