"""GPU tests of the top-k serving path: the driver-API launcher against torch's launcher, fresh
pointers on every call, CUDA graph capture and exact replay on new inputs (every path: one block
per row, cluster, split kernel; ragged lengths), the caller's own output buffer (out=), and torch.ops.occtune.topk under
torch.compile(fullgraph=True) and inside a captured graph. Exactness is the tie-aware CPU check.

    python3 -m pytest -q tests/topk/test_topk_serving_gpu.py
"""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA/ROCm GPU")]

from occtune.kernels import topk as tk  # noqa: E402
from occtune.kernels.topk import reference as ref  # noqa: E402

K = 2048
# (1, 8K), (64, 8K): one block per row (two passes); (2, 1M): the resident kernel, each row over
# several blocks (its workspace; a captured call its own); (8, 128K), (64, 128K): cluster on sm_90+
# (elsewhere: the resident kernel and the split kernel)
SHAPES = [(1, 8192), (64, 8192), (8, 131072), (64, 131072), (2, 1 << 20)]
CHECK_ROWS = 4


def _kern():
    return tk.build(49152, 512, 12)


def _randn(B, L, seed):
    g = torch.Generator(device="cuda")
    g.manual_seed(seed)
    return torch.randn(B, L, device="cuda", generator=g)


def _exact(x, out, lengths=None, what=""):
    n = min(CHECK_ROWS, x.shape[0])
    lens = None if lengths is None else lengths[:n].cpu()
    ok, why = ref.check_topk(x[:n].cpu(), lens, K, out[:n].cpu())
    assert ok, f"{what}: {why}"


def _capture(fn):
    """A CUDA graph of one call of ``fn`` and its (static) output; warmed up outside the capture."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    torch.cuda.synchronize()
    return g, out


def test_launcher_is_the_driver_api_where_installed():
    try:
        try:
            from cuda.bindings import driver  # noqa: F401
        except ImportError:
            from cuda import cuda  # noqa: F401
        has = torch.version.hip is None
    except ImportError:
        has = False
    from occtune.build import native

    want = "native" if native.module() is not None else "cuda-python" if has else "torch"
    assert _kern().launcher == want, (_kern().launcher, native.error())


@pytest.mark.parametrize("B,L", SHAPES)
def test_driver_launch_matches_torch_launcher(B, L):
    kern = _kern()
    x = _randn(B, L, 1)
    fast = tk.topk(x, K, kernel=kern)
    slow = tk.topk(x, K, kernel=dataclasses.replace(kern, launcher="torch", fn=None))
    _exact(x, fast, what="driver launch")
    _exact(x, slow, what="torch launcher")


def test_every_call_uses_its_own_pointers():
    kern = _kern()
    xs = [_randn(16, 131072, seed) for seed in range(3)]
    outs = [tk.topk(x, K, kernel=kern) for x in xs]          # all alive: distinct pointers
    for x, out in zip(xs, outs):
        _exact(x, out, what="re-packed call")


@pytest.mark.parametrize("B,L", SHAPES)
def test_graph_capture_replays_exactly_on_new_inputs(B, L):
    kern = _kern()
    static_x = _randn(B, L, 0)
    g, static_out = _capture(lambda: tk.topk(static_x, K, kernel=kern))
    for seed in (11, 12, 13):
        new = _randn(B, L, seed)
        static_x.copy_(new)
        g.replay()
        torch.cuda.synchronize()
        _exact(new, static_out, what=f"replay seed {seed}")
        eager = tk.topk(new, K, kernel=kern)
        _exact(new, eager, what="eager after replay")


@pytest.mark.parametrize("B,L", SHAPES)
def test_out_buffer_is_written_in_place(B, L):
    """out=: every path writes the caller's buffer (poisoned first), eagerly and in a graph."""
    kern = _kern()
    out = torch.full((B, K), -7, dtype=torch.int32, device="cuda")
    for seed in (41, 42):
        x = _randn(B, L, seed)
        assert tk.topk(x, K, kernel=kern, out=out) is out
        _exact(x, out, what=f"out= seed {seed}")
    static_x = _randn(B, L, 43)
    out.fill_(-7)
    g, got = _capture(lambda: tk.topk(static_x, K, kernel=kern, out=out))
    assert got is out
    static_x.copy_(_randn(B, L, 44))
    out.fill_(-7)
    g.replay()
    torch.cuda.synchronize()
    _exact(static_x, out, what="out= replay")


def test_graph_capture_with_ragged_lengths():
    kern = _kern()
    B, L = 32, 131072
    static_x, static_len = _randn(B, L, 0), torch.full((B,), L, dtype=torch.int32, device="cuda")
    g, static_out = _capture(lambda: tk.topk(static_x, K, static_len, kernel=kern))
    for seed in (21, 22):
        static_x.copy_(_randn(B, L, seed))
        static_len.copy_(torch.randint(1000, L + 1, (B,), device="cuda", dtype=torch.int32))
        g.replay()
        torch.cuda.synchronize()
        _exact(static_x, static_out, static_len, what=f"ragged replay seed {seed}")


def test_op_under_torch_compile_fullgraph():
    import occtune.kernels.topk.op  # noqa: F401

    torch._dynamo.reset()

    def f(s):
        return torch.ops.occtune.topk(s * 2.0 + 1.0, K, lds_budget=49152, threads=512, bits=12)

    cf = torch.compile(f, fullgraph=True)
    for B, L in ((4, 8192), (8, 131072)):
        x = _randn(B, L, B)
        out = cf(x)
        assert out.dtype == torch.int32 and out.shape == (B, K)
        _exact(x, out, what=f"compiled op ({B}, {L})")


def test_op_inside_a_captured_graph():
    import occtune.kernels.topk.op  # noqa: F401

    static_x = _randn(64, 8192, 0)
    g, static_out = _capture(lambda: torch.ops.occtune.topk(static_x, K, lds_budget=49152, threads=512, bits=12))
    for seed in (31, 32):
        new = _randn(64, 8192, seed)
        static_x.copy_(new)
        g.replay()
        torch.cuda.synchronize()
        _exact(new, static_out, what=f"op replay seed {seed}")


# ---- torch.ops.occtune.topk's C++ kernel (op_native.cpp) ----------------------------------------

def _op():
    from occtune.kernels.topk import op

    return op


def _stats() -> dict:
    return dict(zip(("plans", "hits", "misses", "python", "errors"), torch.ops.occtune._topk_native_stats()))


def test_the_op_kernel_is_the_cpp_one():
    import os

    if os.environ.get("OCCTUNE_NATIVE_OP") == "0":
        pytest.skip("OCCTUNE_NATIVE_OP=0")
    assert _op().native_error() is None


@pytest.mark.parametrize("B,L", SHAPES)
def test_op_repeated_calls_launch_from_cpp_exactly(B, L):
    op = _op()
    if op.native_error() is not None:
        pytest.skip(op.native_error())
    tk.clear_plans()
    assert _stats()["plans"] == 0
    lengths = torch.randint(L // 2, L + 1, (B,), dtype=torch.int32, device="cuda")
    for call in range(3):          # the first call plans in Python; then C++, on fresh inputs each time
        x = _randn(B, L, 100 + call)
        before = _stats()
        out = torch.ops.occtune.topk(x, K, lds_budget=49152, threads=512, bits=12)
        ragged = torch.ops.occtune.topk(x, K, lengths, lds_budget=49152, threads=512, bits=12)
        after = _stats()
        torch.cuda.synchronize()
        _exact(x, out, what=f"C++ op call {call}")
        _exact(x, ragged, lengths, what=f"C++ op ragged call {call}")
        assert (after["misses"] - before["misses"], after["hits"] - before["hits"]) == ((2, 0) if call == 0 else (0, 2))
    assert after["errors"] == 0 and after["plans"] == 2


def test_op_row_starts_and_the_default_config_through_cpp():
    if _op().native_error() is not None:
        pytest.skip(_op().native_error())
    B, L = 4, 8192
    wide = _randn(B, L + 128, 7)
    starts = torch.tensor([0, 5, 64, 128], dtype=torch.int32, device="cuda")
    lengths = torch.full((B,), L, dtype=torch.int32, device="cuda")
    for _ in range(2):
        before = _stats()
        out = torch.ops.occtune.topk(wide, K, lengths, starts)
        plain = torch.ops.occtune.topk(wide[:, :L], K)
    assert _stats()["hits"] - before["hits"] == 2          # the second round: both from C++
    want = tk.topk(wide, K, lengths, starts)
    torch.cuda.synchronize()
    assert torch.equal(out.sort(dim=1).values, want.sort(dim=1).values)
    _exact(wide[:, :L], plain, what="default config through C++")


def test_op_on_a_second_stream_keeps_its_own_workspace():
    if _op().native_error() is not None:
        pytest.skip(_op().native_error())
    B, L = 2, 1 << 20                # the resident kernel over several blocks a row: a workspace
    x = _randn(B, L, 3)
    torch.ops.occtune.topk(x, K)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    before = _stats()
    with torch.cuda.stream(side):
        outs = [torch.ops.occtune.topk(x, K) for _ in range(3)]
    torch.cuda.current_stream().wait_stream(side)
    main = torch.ops.occtune.topk(x, K)
    assert _stats()["hits"] - before["hits"] == 4
    torch.cuda.synchronize()
    for out in (*outs, main):
        _exact(x, out, what="second stream")


def test_op_bad_input_still_says_what_is_wrong():
    x = _randn(2, 8192, 0)
    with pytest.raises(Exception, match="CUDA/ROCm device"):            # CPU scores, GPU lengths
        torch.ops.occtune.topk(x.cpu(), K, torch.full((2,), 8192, dtype=torch.int32, device="cuda"))
    torch.ops.occtune.topk(x, K, threads=1024)
    with pytest.raises(Exception, match="threads"):                     # not the plan of threads unset
        torch.ops.occtune.topk(x, K, threads=-1)
    with pytest.raises(Exception, match="k must be between"):
        torch.ops.occtune.topk(x, 0)
    with pytest.raises(Exception, match="lengths must be contiguous int32"):
        torch.ops.occtune.topk(x, K, torch.zeros(2, dtype=torch.int64, device="cuda"))


def test_clear_plans_forgets_the_cpp_plans_too():
    if _op().native_error() is not None:
        pytest.skip(_op().native_error())
    x = _randn(1, 8192, 0)
    torch.ops.occtune.topk(x, K)
    assert _stats()["plans"] >= 1
    tk.clear_plans()
    assert _stats()["plans"] == 0
    _exact(x, torch.ops.occtune.topk(x, K), what="after clear_plans")
