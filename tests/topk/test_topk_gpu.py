"""GPU exactness tests of the radix top-k kernel (kernels/topk/topk.cuh), checked on the CPU
with the tie-aware reference. Run on a GPU machine:

    python3 -m pytest -q tests/topk/test_topk_gpu.py
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA/ROCm GPU")]

from occtune.kernels import topk as tk  # noqa: E402
from occtune.kernels.topk import reference as ref  # noqa: E402

BUDGETS = [32768, 40960, 49152, 131072]
K = 2048


def _budgets():
    """Budgets this device can grant (gfx942: 64 KB per workgroup, so not 128 KB)."""
    if not torch.cuda.is_available():
        return BUDGETS
    props = torch.cuda.get_device_properties(0)
    limit = getattr(props, "shared_memory_per_block_optin", 0) or 65536
    return [b for b in BUDGETS if b + 20000 <= limit]


def _run(s, lens, k=K, lds_budget=40960, bits=8, starts=None, **kw):
    dev = "cuda"
    st = torch.from_numpy(np.ascontiguousarray(s)).to(dev)
    lt = None if lens is None else torch.from_numpy(np.asarray(lens, np.int32)).to(dev)
    rt = None if starts is None else torch.from_numpy(np.asarray(starts, np.int32)).to(dev)
    out, diag = tk.topk(st, k, lt, rt, lds_budget=lds_budget, bits=bits, return_diagnostics=True, **kw)
    torch.cuda.synchronize()
    return out.cpu().numpy(), diag


def _cluster_ok():
    """Thread-block clusters (topk_cluster_kernel): CUDA sm_90 and later."""
    return torch.version.hip is None and torch.cuda.get_device_capability(0)[0] >= 9


CLUSTER_MODES = [False, pytest.param(True, marks=pytest.mark.skipif(
    not torch.cuda.is_available() or not _cluster_ok(), reason="needs sm_90+ (clusters)"))]


def _assert_exact(s, lens, k, out, starts=None, what=""):
    ok, why = ref.check_topk(s, lens, k, out, row_starts=starts)
    assert ok, f"{what}: {why}"


@pytest.mark.parametrize("bits", [8, 12])
@pytest.mark.parametrize("budget", _budgets())
def test_adversarial_cases_exact(budget, bits):
    L = 20000 + 3                      # not a multiple of the block size
    for name, s, lens in ref.adversarial_cases(8, L, K, seed=budget + bits):
        out, diag = _run(s, lens, K, budget, bits)
        _assert_exact(s, lens, K, out, what=f"{name} lds_budget={budget} bits={bits}")
        pred = ref.threshold_bin_counts(s, lens, K, bits)
        got = diag["bin_counts"].cpu().numpy()
        assert np.array_equal(got, pred), f"{name}: threshold-bin counts {got} != predicted {pred}"
        assert diag["overflow_rows"] == int((pred > diag["capacity"]).sum())   # resident: the list after the slice


@pytest.mark.parametrize("bits", [8, 12])
def test_overflow_path_exact_and_counted(bits):
    s, lens = ref.make_case("one_bin_77", 16, 65536, K, seed=5)
    lens[::4] = 30000
    out, diag = _run(s, lens, K, 32768, bits)
    _assert_exact(s, lens, K, out, what="one_bin_77 overflow")
    pred = ref.threshold_bin_counts(s, lens, K, bits)
    if bits == 8:
        assert (pred > 4096).sum() == 16           # the case must really overflow
    assert diag["overflow_rows"] == int((pred > 4096).sum())
    assert np.array_equal(diag["bin_counts"].cpu().numpy(), pred)


@pytest.mark.parametrize("k", [1, 7, 100, 1024, 2047])
def test_runtime_k(k):
    for name in ("random_normal", "heavy_ties", "few_distinct", "edge_lengths"):
        s, lens = ref.make_case(name, 8, 9000, k, seed=k)
        out, _ = _run(s, lens, k, 40960, 8)
        _assert_exact(s, lens, k, out, what=f"{name} k={k}")


def test_random_rows_many_seeds():
    for seed in range(6):
        rng = np.random.default_rng(seed)
        L = int(rng.integers(2049, 70000))
        s = (rng.standard_normal((16, L)) * rng.uniform(0.01, 100)).astype(np.float32)
        lens = rng.integers(0, L + 1, 16).astype(np.int32)
        out, _ = _run(s, lens, K, 49152, 8)
        _assert_exact(s, lens, K, out, what=f"seed {seed}")


def test_row_starts():
    rng = np.random.default_rng(1)
    B, L = 8, 12000
    s = rng.standard_normal((B, L)).astype(np.float32)
    starts = rng.integers(0, 3000, B).astype(np.int32)
    lens = np.array([L - st if b % 2 else int(rng.integers(0, L - st)) for b, st in enumerate(starts)],
                    np.int32)
    out, _ = _run(s, lens, K, 40960, 8, starts=starts)
    _assert_exact(s, lens, K, out, starts=starts, what="row_starts")


@pytest.mark.parametrize("page_bits", [0, 4, 6])
def test_page_table_transform(page_bits):
    rng = np.random.default_rng(page_bits)
    B, L = 4, 10000 + 7
    s, lens = ref.make_case("heavy_ties", B, L, K, seed=2)
    lens[0] = 1000
    pages = (L + (1 << page_bits) - 1) >> page_bits
    table = np.stack([rng.permutation(4 * pages)[:pages] for _ in range(B)]).astype(np.int32)
    out, _ = _run(s, lens, K, 40960, 8, page_table=torch.from_numpy(table).cuda(), page_bits=page_bits)
    inv = []
    for b in range(B):
        m = np.full(4 * pages, -1, np.int64)
        m[table[b]] = np.arange(pages)
        valid = out[b] >= 0
        idx = np.full(K, -1, np.int64)
        d = out[b][valid].astype(np.int64)
        mask = (1 << page_bits) - 1
        idx[valid] = (m[d >> page_bits] << page_bits) | (d & mask)
        inv.append(idx)
    _assert_exact(s, lens, K, np.stack(inv), what=f"page table page_bits={page_bits}")


def test_ragged_offsets_transform():
    s, lens = ref.make_case("random_lengths", 8, 9000, K, seed=3)
    offsets = (np.arange(8) * 100000 + 17).astype(np.int32)
    out, _ = _run(s, lens, K, 40960, 8, offsets=torch.from_numpy(offsets).cuda())
    back = np.where(out >= 0, out.astype(np.int64) - offsets[:, None], -1)
    _assert_exact(s, lens, K, back, what="ragged offsets")


@pytest.mark.parametrize("name", ["random_normal", "one_bin_77", "heavy_ties", "specials",
                                  "neg_inf_padding", "all_equal"])
def test_prefix_single_pass_path(name):
    """The long-row path (prefix bound + scratch list) forced on shorter rows, every fallback."""
    s, lens = ref.make_case(name, 8, 65536 + 5, K, seed=9)
    out, diag = _run(s, lens, K, 40960, 8, prefix_min_row=0, resident=False)
    _assert_exact(s, lens, K, out, what=f"prefix path {name}")
    assert np.array_equal(diag["bin_counts"].cpu().numpy(), ref.threshold_bin_counts(s, lens, K, 8))


@pytest.mark.parametrize("name", ["random_normal", "one_bin_77", "neg_inf_padding", "edge_lengths"])
def test_one_million_columns(name):
    s, lens = ref.make_case(name, 4, 1 << 20, K, seed=11)
    out, diag = _run(s, lens, K, 40960, 8)
    _assert_exact(s, lens, K, out, what=f"L=1M {name}")
    assert diag["overflow_rows"] == int((ref.threshold_bin_counts(s, lens, K, 8) > 5120).sum())


# ---- split main pass (rows spread over several blocks) ----------------------------------------
@pytest.mark.parametrize("cluster", [False, None])
@pytest.mark.parametrize("B,L", [(1, 131072), (8, 131072), (1, 1 << 20), (8, 1 << 20), (64, 131072)])
def test_split_path_auto_exact(B, L, cluster):
    """Small B, long rows: the launcher splits each row over several blocks by itself (on
    sm_90+, by default, over one thread-block cluster where the kept values fit the budget)."""
    s, lens = ref.make_case("random_normal", B, L, K, seed=B + L)
    for bits in (8, 12):
        out, diag = _run(s, lens, K, 32768, bits, cluster=cluster, resident=False)
        assert diag["split"] >= 2, f"B={B} L={L}: split path not taken ({diag['split']})"
        # the cluster kernel where a cluster the automatic plan takes (AUTO_CLUSTER blocks at
        # most; MAX_CLUSTER only when forced) covers the whole one-wave split and its stages fit
        want = (cluster is None and _cluster_ok() and diag["split"] <= tk.AUTO_CLUSTER
                and tk.cluster_fits(L, K, 32768, diag["split"]))
        assert bool(diag["cluster"]) == want, (diag["split"], diag["cluster"])
        _assert_exact(s, lens, K, out, what=f"split auto B={B} L={L} bits={bits}")
        assert np.array_equal(diag["bin_counts"].cpu().numpy(),
                              ref.threshold_bin_counts(s, lens, K, bits))


@pytest.mark.parametrize("cluster", CLUSTER_MODES)
@pytest.mark.parametrize("name", ref.CASES)
def test_split_path_adversarial(name, cluster):
    """Every family through the forced split path (odd block count, unaligned row ends),
    including the fallbacks: kept < K and scratch-list (or cluster stage) overflow (one_bin_77,
    all_equal)."""
    s, lens = ref.make_case(name, 8, 65536 + 5, K, seed=13)
    for nsplit in (3, 7):
        out, diag = _run(s, lens, K, 40960, 8, prefix_min_row=0, split=nsplit, cluster=cluster)
        assert diag["split"] == nsplit and diag["cluster"] == (nsplit if cluster else 0)
        _assert_exact(s, lens, K, out, what=f"split={nsplit} cluster={cluster} {name}")
        assert np.array_equal(diag["bin_counts"].cpu().numpy(), ref.threshold_bin_counts(s, lens, K, 8))


@pytest.mark.parametrize("cluster", CLUSTER_MODES)
def test_split_path_row_starts_unaligned(cluster):
    rng = np.random.default_rng(4)
    B, L = 8, 70000
    s = rng.standard_normal((B, L)).astype(np.float32)
    starts = rng.integers(1, 2000, B).astype(np.int32)     # mostly not 16-byte aligned
    lens = (L - starts).astype(np.int32)
    lens[::3] -= 1001
    out, diag = _run(s, lens, K, 40960, 12, starts=starts, prefix_min_row=0, split=5, cluster=cluster)
    assert diag["split"] == 5 and bool(diag["cluster"]) == cluster
    _assert_exact(s, lens, K, out, starts=starts, what=f"split row_starts cluster={cluster}")


@pytest.mark.parametrize("cluster", CLUSTER_MODES)
def test_split_path_overflow_fallback_1m(cluster):
    """1M-column rows whose threshold bin holds 77%: the split scratch lists (cluster: the
    blocks' stages) overflow and the rows are redone exactly by the plain path."""
    s, lens = ref.make_case("one_bin_77", 2, 1 << 20, K, seed=17)
    out, diag = _run(s, lens, K, 40960, 8, split=16, cluster=cluster)
    assert diag["split"] == (tk.MAX_CLUSTER if cluster else 16)
    _assert_exact(s, lens, K, out, what=f"split one_bin_77 1M cluster={cluster}")
    pred = ref.threshold_bin_counts(s, lens, K, 8)
    assert np.array_equal(diag["bin_counts"].cpu().numpy(), pred)


@pytest.mark.parametrize("cluster", CLUSTER_MODES)
@pytest.mark.parametrize("order", ["ascending", "descending"])
def test_split_path_stage_spills_to_global(order, cluster):
    """Rows whose kept elements all sit in one slice (sorted rows: the large values at one end,
    as with recency-biased scores): that block's shared-memory stage (TOPK_SPLIT_STAGE entries)
    fills and the excess goes straight to the row's global list. Exact either way."""
    rng = np.random.default_rng(21)
    B, L = 4, 131072
    s = np.sort(rng.standard_normal((B, L)).astype(np.float32), axis=1)
    if order == "descending":
        s = np.ascontiguousarray(s[:, ::-1])
    lens = np.full(B, L, np.int32)
    for bits in (8, 12):
        out, diag = _run(s, lens, K, 32768, bits, split=4, cluster=cluster)
        assert diag["split"] == 4
        _assert_exact(s, lens, K, out, what=f"split sorted {order} bits={bits} cluster={cluster}")


# Appended to topk.cuh by the test below (never shipped): one warp a coarse bin, the 32-lane
# floor search against the serial binary search; bad[0] counts differences, bad[1] = the last bin.
_FLOOR_CHECK = r"""
extern "C" __global__ void topk_floor_check(int* bad) {
  const int t0 = (int)(blockIdx.x * (blockDim.x / 32u) + (threadIdx.x >> 5));
  if (t0 >= TOPK_BINS) return;                     // warp-uniform: whole warps leave
  const topk_u32 w = topk_fine_floor_of_bin_warp(t0);
  if ((threadIdx.x & 31u) == 0u && w != topk_fine_floor_of_bin(t0)) {
    atomicAdd(bad, 1);
    bad[1] = t0;
  }
}
"""


@pytest.mark.skipif(bool(getattr(torch.version, "hip", None)), reason="the 32-lane search is CUDA's")
@pytest.mark.parametrize("bits", [8, 12])
def test_warp_floor_search_equals_the_serial_one(bits):
    """The long-row floor f0 and the narrowing's bin range come from a 32-lane search on CUDA;
    it must give the serial binary search's answer for every coarse bin (all 2^bits of them,
    including the NaN, inf and denormal bins), not only for the bins some input reaches."""
    from occtune.build import rtc

    d = tk.defines(32768, 512, bits)
    kern = rtc.compile_kernel(tk.read_source() + _FLOOR_CHECK, "topk_floor_check", d, None)
    bad = torch.zeros(2, dtype=torch.int32, device="cuda")
    rtc.launch(kern, ((1 << bits) // 16,), (512,), [bad], shared_mem=0)
    torch.cuda.synchronize()
    n, last = bad.tolist()
    assert n == 0, f"{n} of {1 << bits} bins differ, the last one {last} (bits={bits})"


# ---- cluster kernel (sm_90+: a row over one thread-block cluster, lists in shared memory) ------
@pytest.mark.skipif(not torch.cuda.is_available() or not _cluster_ok(), reason="needs sm_90+ (clusters)")
@pytest.mark.parametrize("name", ref.CASES)
@pytest.mark.parametrize("bits,threads", [(8, 512), (12, 512), (12, 256)])
def test_cluster_kernel_families(name, bits, threads):
    """Cluster sizes 2, 3 (odd), 4 and 8 with the page-table transform on: outputs exact, bin
    counts as predicted (rows that fall back report the same threshold-bin population)."""
    s, lens = ref.make_case(name, 6, 131072 + 12, K, seed=31)
    pages = (131072 + 12 + 63) >> 6
    perm = np.stack([np.random.default_rng(r).permutation(pages) for r in range(6)]).astype(np.int32)
    table = torch.from_numpy(perm).cuda()
    invperm = np.argsort(perm, axis=1)
    for S in (2, 3, 4, tk.MAX_CLUSTER):
        out, diag = _run(s, lens, K, 49152, bits, split=S, cluster=True, threads=threads,
                         page_table=table, page_bits=6)
        assert diag["cluster"] == S
        pos = np.maximum(out, 0)                 # table position -> row index (inverse pages)
        inv = np.where(out >= 0, (invperm[np.arange(6)[:, None], pos >> 6] << 6) | (pos & 63), -1)
        _assert_exact(s, lens, K, inv.astype(np.int32), what=f"cluster S={S} {name} bits={bits} t={threads}")
        assert np.array_equal(diag["bin_counts"].cpu().numpy(), ref.threshold_bin_counts(s, lens, K, bits))


@pytest.mark.skipif(not torch.cuda.is_available() or not _cluster_ok(), reason="needs sm_90+ (clusters)")
@pytest.mark.parametrize("name", ref.CASES)
@pytest.mark.parametrize("bits,threads", [(8, 512), (12, 512), (12, 1024)])
def test_cluster_register_path_families(name, bits, threads):
    """The cluster kernel's register path (each block's slice in registers, no sample, no kept
    list) at S=8 on 128K rows: every family with ragged lengths (an odd one, a row too short for
    the long-row path, one of at most K) exact and its bin counts as predicted. Rows whose bin t
    does not fit a stage (heavy ties) are narrowed in the blocks' registers: flagged, never a
    second read of the row. Rows that do not start 16-byte aligned take the sampled path in the
    same kernel, also exact."""
    s, lens = ref.make_case(name, 6, 131072, K, seed=37)
    lens = np.array(lens, np.int32)
    lens[1], lens[2], lens[3] = 131072 - 3, 70001, K - 1
    out, diag = _run(s, lens, K, 32768, bits, split=8, cluster=True, threads=threads)
    assert diag["cluster"] == 8 and diag["cluster_regs"] == tk.cluster_regs(131072, 8, threads) > 0
    _assert_exact(s, lens, K, out, what=f"register path {name} bits={bits} t={threads}")
    pred = ref.threshold_bin_counts(s, lens, K, bits)
    assert np.array_equal(diag["bin_counts"].cpu().numpy(), pred)
    f = _flags(diag)
    assert np.array_equal((f & BIN_OVF) != 0, (pred > diag["capacity"]) & (lens > K)), (name, f, pred)
    assert not (f & (ROW_PASSES | REPLAY | SPILL)).any(), (name, f)
    starts = np.array([1, 0, 2, 0, 3, 0], np.int32)           # unaligned rows: the sampled path
    slens = np.minimum(lens, 131072 - starts).astype(np.int32)
    out, diag = _run(s, slens, K, 32768, bits, starts=starts, split=8, cluster=True, threads=threads)
    _assert_exact(s, slens, K, out, starts=starts, what=f"register build, row starts {name} bits={bits}")


@pytest.mark.skipif(not torch.cuda.is_available() or not _cluster_ok(), reason="needs sm_90+ (clusters)")
@pytest.mark.parametrize("name", ref.CASES)
@pytest.mark.parametrize("L,budget", [(8192, 49152), (40000, 8192)])
def test_short_rows_take_one_cluster_each(name, L, budget):
    """Short rows on sm_90's automatic plan: one cluster a row, each block's slice in registers
    (policy.short_cluster). Every family with ragged lengths (an odd one, K, K + 1) exact, its bin
    counts as predicted, and the rows whose bin t overflows block 0's stage flagged (narrowed by
    radix passes over the blocks' registers: no pass over the row, no replay); then the same rows
    captured in a CUDA graph."""
    s, lens = ref.make_case(name, 5, L, K, seed=L + budget)
    lens = np.array(lens, np.int32)
    lens[1], lens[2], lens[3] = L - 3, K, K + 1
    out, diag = _run(s, lens, K, budget, 12, threads=1024)
    want = tk.policy.short_cluster(5, L, K, torch.cuda.get_device_properties(0).multi_processor_count)
    assert (diag["cluster"], diag["cluster_regs"]) == (want.size, want.regs)
    _assert_exact(s, lens, K, out, what=f"short row cluster {name} L={L}")
    pred = ref.threshold_bin_counts(s, lens, K, 12)
    long_rows = lens > K
    assert np.array_equal(diag["bin_counts"].cpu().numpy()[long_rows], pred[long_rows])
    over = (pred > diag["capacity"]) & long_rows
    assert np.array_equal((_flags(diag) & BIN_OVF) != 0, over), (pred, diag["capacity"])
    assert not (_flags(diag) & (ROW_PASSES | REPLAY | SPILL)).any(), _flags(diag)
    x = torch.from_numpy(s).cuda()
    lt = torch.from_numpy(lens).cuda()
    o = torch.empty(5, K, dtype=torch.int32, device="cuda")
    tk.topk(x, K, lt, lds_budget=budget, bits=12, threads=1024, out=o)       # the plan, made eagerly
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        tk.topk(x, K, lt, lds_budget=budget, bits=12, threads=1024, out=o)
    o.fill_(-5)
    g.replay()
    torch.cuda.synchronize()
    _assert_exact(s, lens, K, o.cpu().numpy(), what=f"short row cluster, graph {name} L={L}")


@pytest.mark.skipif(not torch.cuda.is_available() or not _cluster_ok(), reason="needs sm_90+ (clusters)")
def test_the_plan_takes_the_register_path_for_8_rows_of_128k_without_the_resident_kernel():
    s, lens = ref.make_case("random_normal", 8, 131072, K, seed=3)
    for threads in (512, 1024):
        out, diag = _run(s, None, K, 32768, 12, threads=threads, resident=False)
        assert (diag["cluster"], diag["cluster_regs"]) == (8, 4096 // threads), diag
        _assert_exact(s, lens, K, out, what=f"register path by plan, t={threads}")


@pytest.mark.skipif(not torch.cuda.is_available() or not _cluster_ok(), reason="needs sm_90+ (clusters)")
def test_cluster_kernel_many_rows_and_row_starts():
    """B >= SMs with 256-thread blocks (a forced cluster of 2), per-row lengths and starts, rows
    short enough for the plain path and rows of at most K among them."""
    rng = np.random.default_rng(8)
    B, L = 160, 140000
    s = rng.standard_normal((B, L)).astype(np.float32)
    starts = rng.integers(0, 3000, B).astype(np.int32)
    lens = (L - starts).astype(np.int32)
    lens[::7] = rng.integers(0, K + 2, len(lens[::7]))
    lens[1::9] = 40000                                      # too short for the long-row path
    out, diag = _run(s, lens, K, 40960, 12, starts=starts, threads=256, split=2, cluster=True)
    assert diag["cluster"] == 2, diag["split"]
    _assert_exact(s, lens, K, out, starts=starts, what="cluster many rows")


# ---- overflow at streaming speed (issue 17, item 5): every overflow exact, counted, and flagged --
BIN_OVF, SPILL, REPLAY, ROW_PASSES = (tk.ROW_FLAGS[n] for n in ("bin_overflow_rows", "spilled_rows",
                                                                "replayed_rows", "row_pass_rows"))


def _flags(diag):
    return diag["row_flags"].cpu().numpy()


def _check_gpu(x, lens, k, out, what):
    """The tie-aware check in torch on the device (rows of 1M columns: the CPU check is slow)."""
    ok, why = ref.check_topk_torch(x, lens, k, out)
    assert ok, f"{what}: {why}"


@pytest.mark.parametrize("bits", [8, 12])
@pytest.mark.parametrize("budget", [64, 4096])
def test_bin_overflow_narrowing_exact_and_flagged(budget, bits):
    """Tiny candidate lists (8 and 512 entries; 16 and 1024 narrowing bins): nearly every
    family's threshold bin overflows on the plain path and is narrowed by passes over the row.
    Exact, bin counts as predicted, and exactly the rows over the capacity flagged."""
    L = 20000 + 3
    for name, s, lens in ref.adversarial_cases(8, L, K, seed=budget + bits):
        out, diag = _run(s, lens, K, budget, bits, resident=False)      # the two-pass path's narrowing
        _assert_exact(s, lens, K, out, what=f"{name} lds_budget={budget} bits={bits}")
        pred = ref.threshold_bin_counts(s, lens, K, bits)
        assert np.array_equal(diag["bin_counts"].cpu().numpy(), pred), name
        over = pred > budget // 8
        f = _flags(diag)
        assert np.array_equal((f & BIN_OVF) != 0, over), f"{name}: flags {f} vs over capacity {over}"
        assert np.array_equal((f & ROW_PASSES) != 0, over), name        # plain path: passes over the row
        assert not (f & (SPILL | REPLAY)).any(), name
        assert diag["overflow_rows"] == diag["bin_overflow_rows"] == int(over.sum())


@pytest.mark.parametrize("k", [1, 100, 2047])
def test_bin_overflow_narrowing_runtime_k(k):
    for name in ("heavy_ties", "few_distinct", "all_equal", "one_bin_77", "denormals", "specials"):
        s, lens = ref.make_case(name, 8, 9000, k, seed=k)
        out, diag = _run(s, lens, k, 4096, 8)
        _assert_exact(s, lens, k, out, what=f"{name} k={k}")


@pytest.mark.parametrize("name", ["all_equal", "heavy_ties", "one_bin_77", "few_distinct", "specials"])
def test_long_row_list_overflow_finishes_from_its_histogram(name):
    """The one-block long-row path with a kept list that overflows (ties at the threshold: most
    of the row is kept): the row is finished from the list's complete histogram (one collect
    pass, no second histogram pass), flagged REPLAY; exact, bin counts as predicted."""
    s, lens = ref.make_case(name, 8, 65536 + 5, K, seed=9)
    for budget in (4096, 40960):
        out, diag = _run(s, lens, K, budget, 8, prefix_min_row=0, split=0)
        _assert_exact(s, lens, K, out, what=f"list overflow {name} {budget}")
        pred = ref.threshold_bin_counts(s, lens, K, 8)
        assert np.array_equal(diag["bin_counts"].cpu().numpy(), pred)
        f = _flags(diag)
        assert np.array_equal((f & BIN_OVF) != 0, pred > budget // 8), (name, f, pred)
        if name == "all_equal":                   # every value kept: the list (L/8) overflows
            assert ((f & REPLAY) != 0).all(), f


@pytest.mark.skipif(not torch.cuda.is_available() or not _cluster_ok(), reason="needs sm_90+ (clusters)")
@pytest.mark.parametrize("bits,budget", [(8, 40960), (8, 32768), (12, 32768)])
def test_cluster_64x1m_random_rows_overflow_exact(bits, budget):
    """Issue 17's case: random normal rows, B=64, L=1M, on the cluster kernel. 8-bit at 40 KiB:
    bin t (~5.2K) overflows the 5,120-entry list on most rows and is refined over the blocks'
    kept lists (no pass over the row). 12-bit at 32 KiB: the README's unexplained 623 us; the
    flags say which path each row took (printed)."""
    g = torch.Generator(device="cuda")
    g.manual_seed(64 + bits)
    x = torch.randn(64, 1 << 20, device="cuda", generator=g)
    out, diag = tk.topk(x, K, lds_budget=budget, bits=bits, threads=512, return_diagnostics=True)
    torch.cuda.synchronize()
    print(f"\n{bits}-bit {budget}: split {diag['split']} cluster {diag['cluster']} overflow {diag['overflow_rows']} "
          + " ".join(f"{n} {diag[n]}" for n in tk.ROW_FLAGS))
    _check_gpu(x, None, K, out, f"64x1M {bits}-bit {budget}")
    counts = diag["bin_counts"].cpu().numpy()
    assert np.array_equal((_flags(diag) & BIN_OVF) != 0, counts > budget // 8)
    assert diag["row_pass_rows"] == 0 and diag["replayed_rows"] == 0      # no row re-read
    if (bits, budget) == (8, 40960):
        assert diag["overflow_rows"] > 0                                   # the case must overflow


@pytest.mark.skipif(not torch.cuda.is_available() or not _cluster_ok(), reason="needs sm_90+ (clusters)")
@pytest.mark.parametrize("order", ["ascending", "descending"])
def test_cluster_stage_spills_to_the_scratch_list(order):
    """Sorted 1M-column rows: every kept value sits in one block's slice (~7K of them, over a
    32 KiB stage of 4,096): the excess spills to that block's region of the row's scratch list
    (flag SPILL) instead of block 0 redoing the row; exact."""
    rng = np.random.default_rng(23)
    B, L = 4, 1 << 20
    s = np.sort(rng.standard_normal((B, L)).astype(np.float32), axis=1)
    if order == "descending":
        s = np.ascontiguousarray(s[:, ::-1])
    x = torch.from_numpy(s).cuda()
    for bits in (8, 12):
        out, diag = tk.topk(x, K, lds_budget=32768, bits=bits, split=4, cluster=True, return_diagnostics=True)
        torch.cuda.synchronize()
        assert diag["cluster"] == 4
        _check_gpu(x, None, K, out, f"sorted {order} {bits}-bit")
        assert diag["spilled_rows"] == B and diag["replayed_rows"] == 0, diag


def _floor_too_low(B, L, seed):
    """Rows of one repeated value with K + 100 distinct larger values scattered over them: the
    sample's floor lands in the repeated value's bin, so every block keeps its whole slice and its
    list overflows, while bin t (among the larger values) is small."""
    rng = np.random.default_rng(seed)
    s = np.full((B, L), 0.5, np.float32)
    for b in range(B):
        s[b, rng.choice(L, K + 100, replace=False)] = rng.uniform(1.0, 2.0, K + 100).astype(np.float32)
    return s, np.full(B, L, np.int32)


def _sample_positions(n):
    """The indices a long row of n values is sampled at (topk_sample_floor: 256 evenly spaced
    runs of 4 float4 from the row's start), ascending."""
    runs, run = 256, 4
    nv = n >> 2
    sc = np.arange(runs * run)
    i4 = (sc // run) * (nv - run) // (runs - 1) + sc % run
    return np.sort((4 * i4[:, None] + np.arange(4)).ravel())


def _sample_misses(B, L, starts):
    """Rows of one repeated value (1.0) except at the positions the long-row sample reads, which
    hold -10 but for the first 200: the sample sees 200 values at the floor, the row keeps nearly
    all of it. The lists are kept, overflow, and bin t (all 1.0) is narrowed over the slices."""
    s = np.full((B, L), 1.0, np.float32)
    for b in range(B):
        s[b, int(starts[b]) + _sample_positions(L - int(starts[b]))[200:]] = -10.0
    return s, np.full(B, L, np.int32)


@pytest.mark.skipif(not torch.cuda.is_available() or not _cluster_ok(), reason="needs sm_90+ (clusters)")
@pytest.mark.parametrize("S,threads", [(2, 1024), (3, 512), (4, 512)])
def test_cluster_overflowed_lists_finish_over_the_slices(S, threads):
    """128K rows through the sampled cluster path whose kept values overflow the blocks' stages
    and spill regions (issue 33: all-equal (64, 128K) at a cluster of 2 took 4.9x the clean run).
    Where the sample says so (all-equal rows; a floor that keeps far too many) the blocks only
    count (flag ROW_PASSES, no SPILL); where it does not (a sample that misses the row's bulk) the
    lists overflow (SPILL and ROW_PASSES). Either way the counts are whole, each block reads its
    slice again and the cluster finishes bin t over the slices, never block 0 alone (REPLAY):
    all-equal rows (one key: each block takes its share and stops), a floor that kept far too many
    (bin t small: no radix pass, pushed to block 0's stage), a missed sample (bin t one key,
    narrowed), four values. Exact, with row starts off 16 bytes; counts as predicted."""
    L = 131072 + 12
    starts = np.array([0, 1, 0, 3], np.int32)
    for name in ("all_equal", "floor_too_low", "sample_misses", "few_distinct"):
        if name == "floor_too_low":
            s, lens = _floor_too_low(4, L, 43)
        elif name == "sample_misses":
            s, lens = _sample_misses(4, L, starts)
        else:
            s, lens = ref.make_case(name, 4, L, K, seed=41)
        lens = np.minimum(lens, L - starts).astype(np.int32)
        out, diag = _run(s, lens, K, 49152, 12, starts=starts, split=S, cluster=True, threads=threads)
        assert diag["cluster"] == S and not diag["cluster_regs"], diag["cluster_regs"]
        _assert_exact(s, lens, K, out, starts=starts, what=f"cluster S={S} {name} t={threads}")
        pred = ref.threshold_bin_counts(s, lens, K, 12, row_starts=starts)
        assert np.array_equal(diag["bin_counts"].cpu().numpy(), pred), name
        f = _flags(diag)
        if name == "few_distinct":
            continue
        spill = SPILL if name == "sample_misses" else 0      # the lists kept only where not predicted
        assert ((f & (SPILL | ROW_PASSES | REPLAY)) == (spill | ROW_PASSES)).all(), (name, f)
        assert np.array_equal((f & BIN_OVF) != 0, pred > diag["capacity"]), (name, f, pred)


@pytest.mark.skipif(not torch.cuda.is_available() or not _cluster_ok(), reason="needs sm_90+ (clusters)")
def test_cluster_count_only_nan_floor_replays_the_partial_inf_bin():
    """1M rows whose sample is NaN at 1,200 points (its floor in the NaN bins, so the keep test's
    threshold is +inf and the cluster only counts), with 1,000 +inf and 100,000 of 1e5 elsewhere:
    K = 2047 reaches into bin(+inf), whose finite values (>= 65520) the threshold did not count,
    so the slices' re-read would find more values than the counts gave slots: the row takes block
    0's exact replay instead."""
    rng = np.random.default_rng(47)
    B, L, k = 2, 1 << 20, 2047
    s = rng.standard_normal((B, L)).astype(np.float32)
    lens = np.full(B, L, np.int32)
    pos = _sample_positions(L)
    rest = np.setdiff1d(np.arange(L), pos)
    for b in range(B):
        s[b, pos[rng.choice(len(pos), 1200, replace=False)]] = np.nan
        big = rng.choice(rest, 101000, replace=False)
        s[b, big[:1000]] = np.inf
        s[b, big[1000:]] = 1e5
    out, diag = _run(s, lens, k, 49152, 12, split=2, cluster=True, threads=1024)
    assert diag["cluster"] == 2 and not diag["cluster_regs"]
    _assert_exact(s, lens, k, out, what="count-only NaN floor")
    f = _flags(diag)
    assert ((f & (REPLAY | SPILL | ROW_PASSES)) == REPLAY).all(), f
    assert np.array_equal(diag["bin_counts"].cpu().numpy(), ref.threshold_bin_counts(s, lens, k, 12))


@pytest.mark.skipif(not torch.cuda.is_available() or not _cluster_ok(), reason="needs sm_90+ (clusters)")
@pytest.mark.parametrize("name", ["all_equal", "heavy_ties", "one_bin_77", "few_distinct", "denormals",
                                  "specials"])
def test_cluster_bin_overflow_families(name):
    """Tie-heavy families through the cluster kernel with a small stage: bin t overflows (refined
    over the lists) or the stages spill; exact whatever the mix; counts as predicted."""
    s, lens = ref.make_case(name, 6, 131072 + 12, K, seed=37)
    for budget, S in ((4096, 2), (40960, 3), (4096, 8), (16384, 5)):   # S >= 4: the two-level search
        out, diag = _run(s, lens, K, budget, 8, split=S, cluster=True)
        assert diag["cluster"] == S
        _assert_exact(s, lens, K, out, what=f"cluster {name} budget={budget} S={S}")
        pred = ref.threshold_bin_counts(s, lens, K, 8)
        assert np.array_equal(diag["bin_counts"].cpu().numpy(), pred), (name, budget, S)
        assert diag["overflow_rows"] == int((pred > budget // 8).sum())


@pytest.mark.parametrize("cluster", CLUSTER_MODES)
@pytest.mark.parametrize("name", ["all_equal", "few_distinct"])
def test_split_list_overflow_1m_flagged(name, cluster):
    """1M-column rows whose threshold bin holds a quarter or all of the row: the split path's
    list (the cluster's spill regions) overflows and bin t overflows the candidate list; the
    rows are finished exactly, from the list's histogram (split kernel) or over the blocks'
    slices read again (cluster; block 0's plain path where the sample's floor cut bin t), and
    every one is flagged."""
    s, lens = ref.make_case(name, 2, 1 << 20, K, seed=17)
    out, diag = _run(s, lens, K, 40960, 8, split=8, cluster=cluster)
    _assert_exact(s, lens, K, out, what=f"split {name} 1M cluster={cluster}")
    f = _flags(diag)
    again = ROW_PASSES | REPLAY if cluster else REPLAY
    assert ((f & BIN_OVF) != 0).all() and ((f & again) != 0).all(), f
    if cluster and name == "all_equal":          # one bin, nothing cut: never block 0 alone
        assert not (f & REPLAY).any(), f
    assert np.array_equal(diag["bin_counts"].cpu().numpy(), ref.threshold_bin_counts(s, lens, K, 8))
