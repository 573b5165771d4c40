"""GPU tests of the resident path (kernels/topk/topk_resident.cuh): every score read once into the
blocks' LDS, one block a row or a row spread over several blocks that merge in a workspace.
Exactness is the tie-aware reference; counts and flags as predicted; eager and in captured graphs.

    python3 -m pytest -q tests/topk/test_topk_resident_gpu.py
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA/ROCm GPU")]

from occtune.kernels import topk as tk  # noqa: E402
from occtune.kernels.topk import reference as ref  # noqa: E402

K = 2048
BIN_OVF = tk.ROW_FLAGS["bin_overflow_rows"]


def _run(s, lens, k=K, starts=None, **kw):
    st = torch.from_numpy(np.ascontiguousarray(s)).cuda()
    lt = None if lens is None else torch.from_numpy(np.asarray(lens, np.int32)).cuda()
    rt = None if starts is None else torch.from_numpy(np.asarray(starts, np.int32)).cuda()
    out, diag = tk.topk(st, k, lt, rt, return_diagnostics=True, **kw)
    torch.cuda.synchronize()
    return out.cpu().numpy(), diag


def _check(s, lens, k, out, diag, bits, what, starts=None):
    ok, why = ref.check_topk(s, lens, k, out, row_starts=starts)
    assert ok, f"{what}: {why}"
    if starts is None:
        pred = ref.threshold_bin_counts(s, lens, k, bits)
        got = diag["bin_counts"].cpu().numpy()
        long_rows = np.asarray(lens) > k
        assert np.array_equal(got[long_rows], pred[long_rows]), f"{what}: counts {got} != {pred}"
        over = (pred > diag["capacity"]) & long_rows
        flags = diag["row_flags"].cpu().numpy()
        assert np.array_equal((flags & BIN_OVF) != 0, over), f"{what}: flags {flags} vs over {over}"
        assert diag["overflow_rows"] == int(over.sum())


# (blocks a row, budget, L): one block with room for the list; one block whose list is small
# (tie-heavy rows refine over the slice); rows spread over 3 and 8 blocks; a budget of 4 KiB
# (16 blocks a row of 1K-score slices, a 512-entry global list: tie-heavy rows refine over every
# block's slice; 8 rows x 16 blocks stay resident at one 1024-thread block a SM)
LAYOUTS = [(1, 98304, 20003), (1, 38912, 9000), (3, 32768, 20003), (8, 32768, 20003), (16, 4096, 16003)]


@pytest.mark.parametrize("bits,threads", [(8, 512), (12, 1024)])
@pytest.mark.parametrize("parts,budget,L", LAYOUTS)
def test_every_family_exact_counted_and_flagged(parts, budget, L, bits, threads):
    for name, s, lens in ref.adversarial_cases(8, L, K, seed=parts + bits):
        out, diag = _run(s, lens, lds_budget=budget, bits=bits, threads=threads, resident=parts)
        assert diag["resident"] == parts
        _check(s, lens, K, out, diag, bits, f"{name} parts={parts} budget={budget} bits={bits} t={threads}")


@pytest.mark.parametrize("k", [1, 100, 2047])
def test_runtime_k_on_both_layouts(k):
    for name in ("random_normal", "heavy_ties", "all_equal", "one_bin_77", "specials"):
        s, lens = ref.make_case(name, 4, 9000, k, seed=k)
        for parts, budget in ((1, 40960), (5, 8192)):
            out, diag = _run(s, lens, k, lds_budget=budget, bits=12, threads=512, resident=parts)
            _check(s, lens, k, out, diag, 12, f"{name} k={k} parts={parts}")


@pytest.mark.parametrize("parts", [1, 4])
def test_unaligned_row_starts_and_transforms(parts):
    rng = np.random.default_rng(parts)
    B, L = 6, 12000
    s = rng.standard_normal((B, L)).astype(np.float32)
    starts = rng.integers(1, 999, B).astype(np.int32)          # mostly not 16-byte aligned
    lens = (L - starts).astype(np.int32)
    lens[1] = K - 3
    budget = 49152 if parts == 1 else 16384
    out, _ = _run(s, lens, starts=starts, lds_budget=budget, bits=12, threads=512, resident=parts)
    ok, why = ref.check_topk(s, lens, K, out, row_starts=starts)
    assert ok, f"row starts parts={parts}: {why}"
    offsets = (np.arange(B) * 100000 + 17).astype(np.int32)
    out, _ = _run(s, lens, starts=starts, lds_budget=budget, bits=12, threads=512, resident=parts,
                  offsets=torch.from_numpy(offsets).cuda())
    back = np.where(out >= 0, out.astype(np.int64) - offsets[:, None], -1)
    ok, why = ref.check_topk(s, lens, K, back.astype(np.int32), row_starts=starts)
    assert ok, f"offsets parts={parts}: {why}"


def test_the_plan_keeps_rows_on_chip_where_they_fit():
    """Decode shapes: the whole GPU for one 1M row (32 KiB slices); 8 rows of 128K fit on chip, but
    on sm_90 a cluster takes them (faster there); 64 rows of 128K do not fit on chip; 8K rows fit
    one block, which the plan takes where rows are 16-byte aligned (else only when asked), but
    on sm_90 one row of 8K takes a cluster (policy.short_cluster)."""
    kern = tk.build(32768, 512, 12)
    x = torch.empty(1, 1 << 20, device="cuda")
    assert tk.plan_for(x, K, kernel=kern).nresident == 128
    want = 0 if torch.version.hip is None and torch.cuda.get_device_capability(0)[0] >= 9 else 16
    assert tk.plan_for(torch.empty(8, 131072, device="cuda"), K, kernel=kern).nresident == want   # sm_90: a cluster
    assert tk.plan_for(torch.empty(8, 131072, device="cuda"), K, kernel=kern, resident=True).nresident == 16
    assert tk.plan_for(torch.empty(64, 131072, device="cuda"), K, kernel=kern).nresident == 0
    kern40 = tk.build(40960, 1024, 12)
    for B in (1, 64):           # rows that fit one block: one block a row (on sm_90 a single row:
        plan = tk.plan_for(torch.empty(B, 8192, device="cuda"), K, kernel=kern40)   # one cluster)
        if B == 1 and want == 0:
            assert (plan.ncluster, plan.nresident) == (8, 0)
        else:
            assert plan.nresident == 1 and len(plan.launches) == 1 and plan.ws_numel == 0
        odd = torch.empty(B, 8193, device="cuda")[:, :8192]
        assert tk.plan_for(odd, K, kernel=kern40).nresident == 0
        assert tk.plan_for(odd, K, kernel=kern40, resident=True).nresident == 1


def _zero_part(plan):
    """Every row's workspace counters and merge tables (the part each call must leave zero)."""
    ws_row = plan.ws_numel // plan.out_like.shape[0]
    zero = ws_row - 2 * plan.capacity
    return [w.view(-1, ws_row)[:, :zero] for w in plan.ws_by_stream.values()]


@pytest.mark.parametrize("name", ["random_normal", "all_equal", "one_bin_77"])
def test_spread_rows_leave_their_workspace_zeroed_and_repeat_exactly(name):
    """The workspace is zeroed once: every call (overflowing rows too) leaves it zeroed, so that
    the next call on the stream starts clean; five calls on fresh rows, each exact."""
    kern = tk.build(16384, 512, 12)
    for seed in range(5):
        s, lens = ref.make_case(name, 3, 65536 + 12, K, seed=seed)
        x = torch.from_numpy(s).cuda()
        out = tk.topk(x, K, kernel=kern)
        plan = tk.plan_for(x, K, kernel=kern)
        assert plan.nresident > 1
        torch.cuda.synchronize()
        ok, why = ref.check_topk(s, None, K, out.cpu().numpy())
        assert ok, f"{name} call {seed}: {why}"
        assert all(int(z.abs().sum()) == 0 for z in _zero_part(plan)), f"{name}: workspace left dirty"


def test_split_records_are_left_zeroed_by_each_call():
    """The split path's records (the plan's workspace, zeroed once): repeated calls stay exact."""
    for seed in range(3):
        s, lens = ref.make_case("random_normal", 2, 1 << 20, K, seed=seed)
        x = torch.from_numpy(s).cuda()
        out, diag = tk.topk(x, K, lds_budget=32768, bits=12, threads=512, split=16, cluster=False,
                            return_diagnostics=True)
        torch.cuda.synchronize()
        assert diag["split"] == 16 and diag["resident"] == 0
        ok, why = ref.check_topk_torch(x, None, K, out)
        assert ok, f"split call {seed}: {why}"
        plan = tk.plan_for(x, K, lds_budget=32768, bits=12, threads=512, split=16, cluster=False)
        assert all(int(w.abs().sum()) == 0 for w in plan.ws_by_stream.values())


@pytest.mark.parametrize("B,L,budget,threads", [(64, 8192, 40960, 1024), (1, 1 << 20, 32768, 1024),
                                               (2, 1 << 20, 49152, 512)])
def test_graph_replays_exactly_beside_eager_calls(B, L, budget, threads):
    """A captured call (its own workspace) replayed on new inputs, eager calls of the same plan
    in between (the stream's workspace): all exact."""
    kern = tk.build(budget, threads, 12)
    x = torch.randn(B, L, device="cuda")
    tk.topk(x, K, kernel=kern, resident=True)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        tk.topk(x, K, kernel=kern, resident=True)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        gout = tk.topk(x, K, kernel=kern, resident=True)
    assert tk.plan_for(x, K, kernel=kern, resident=True).nresident >= 1
    for seed in range(3):
        x.copy_(torch.randn(B, L, device="cuda", generator=torch.Generator(device="cuda").manual_seed(seed)))
        g.replay()
        eager = tk.topk(x, K, kernel=kern, resident=True)
        torch.cuda.synchronize()
        for what, out in (("replay", gout), ("eager", eager)):
            ok, why = ref.check_topk_torch(x, None, K, out)
            assert ok, f"({B}, {L}) {what} {seed}: {why}"
