"""The FP8 GEMM's serving path on the CPU (issue 32): the split-K decode kernel (PIPE 8) under
TRITON_INTERPRET=1 against the float64 reference on odd shapes, its split rule and cross-compiles,
the launch plans (what a repeated call skips, when a plan or a TMA descriptor is made again), and
the torch op's schema and fake implementation."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

if os.environ["TRITON_INTERPRET"] != "1":
    pytest.skip("CPU tests: run with TRITON_INTERPRET=1", allow_module_level=True)

from occtune.errors import UserError  # noqa: E402
from occtune.kernels.fp8_gemm import DECODE_TRITON, default_config, fp8_gemm, plan as plans, splitk  # noqa: E402
from occtune.kernels.fp8_gemm.config import PIPES_SPLITK, config_problem, pipe_runs_on  # noqa: E402
from occtune.kernels.fp8_gemm.family import make_gemm_inputs, verify  # noqa: E402

DEC = dict(DECODE_TRITON)


@pytest.fixture(autouse=True)
def _fresh_plans():
    plans.clear_plans()
    yield
    plans.clear_plans()


def _force_split(monkeypatch, split):
    monkeypatch.setattr(splitk, "split_of", lambda M, N, K, config, sms: split)


@pytest.mark.parametrize("M,N,K,bm,bn,split", [
    (1, 200, 320, 16, 64, 2),       # M = 1, N not a multiple of 128, K = 2.5 steps over 2 splits (2 + 1 steps)
    (37, 200, 320, 16, 32, 3),      # a ragged M tile, one K step per split, the last one ragged
    (64, 130, 384, 64, 128, 2),     # one M tile of 64, N = 128 + 2: a second tile of wrapped rows
    (5, 256, 1024, 32, 64, 1),      # no split: bf16 straight from the program
    (8, 192, 896, 16, 64, 4),       # 7 K steps over 4 splits (2, 2, 2, 1)
])
def test_split_k_kernel_matches_reference_on_odd_shapes(monkeypatch, M, N, K, bm, bn, split):
    _force_split(monkeypatch, split)
    inp = make_gemm_inputs(M, N, K, 11, "cpu")
    cfg = {**DEC, "BLOCK_M": bm, "BLOCK_N": bn}
    out = fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, cfg, out=inp.out)
    res = verify(out, inp)
    assert res.ok, res.reason
    assert res.diagnostics["rows_checked"] == M and 0 < res.diagnostics["rel_l2"] < 2 ** -7
    assert plans.cached(plans.plan_key(cfg, inp.a, inp.a_s, inp.b, inp.b_s, inp.out)).out_shape == (M, N)


def test_a_call_with_one_tensor_as_a_and_b_has_a_plan_of_its_own():
    """a @ a^T first, then a call of the same shapes with two tensors: the second must not reuse
    the first's plan, whose pointer slots took one tensor for both."""
    inp, other = make_gemm_inputs(16, 16, 256, 17, "cpu"), make_gemm_inputs(16, 16, 256, 18, "cpu")
    cfg = {**DEC, "BLOCK_N": 64, "PIPE": 8}
    same = fp8_gemm(inp.a, inp.a_s, inp.a, inp.b_s, cfg)
    both = fp8_gemm(other.a, other.a_s, other.b, other.b_s, cfg)
    assert verify(both, other).ok
    alias = make_gemm_inputs(16, 16, 256, 17, "cpu")
    alias.b.copy_(alias.a)                      # the aliased call's reference: b holds a's values
    assert verify(same, alias).ok


def test_split_k_partials_are_reduced_in_order_and_a_wrong_scale_is_caught(monkeypatch):
    """Two splits: the result is the sum of both partials (a dropped split or a misplaced weight
    scale block fails the check)."""
    _force_split(monkeypatch, 2)
    from occtune.kernels.fp8_gemm.family import expected_rows

    two = {**DEC, "PIPE": 8}
    inp = make_gemm_inputs(8, 256, 512, 12, "cpu")
    exp = expected_rows(inp)
    assert verify(fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, two), inp, exp).ok
    bad = inp.b_s.clone()
    bad[1, 3] *= 2                                     # the second split's last K block of N rows 128..255
    assert not verify(fp8_gemm(inp.a, inp.a_s, inp.b, bad, two), inp, exp).ok
    monkeypatch.setattr(splitk, "fp8_gemm_splitk_reduce", _first_split_only())
    plans.clear_plans()
    assert not verify(fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, two), inp, exp).ok   # a lost split is caught


def _first_split_only():
    """A reduction that drops every split but the first (what the check must catch)."""
    real = splitk.fp8_gemm_splitk_reduce

    class Broken:
        def __getitem__(self, grid):
            return lambda ws, c, M, N, split, *rest, **kw: real[grid](ws, c, M, N, 1, *rest, **kw)
    return Broken()


@pytest.mark.parametrize("M,N,K,bm,bn,split", [(1, 200, 320, 16, 64, 2), (37, 200, 320, 16, 32, 3),
                                                (64, 130, 384, 64, 128, 2), (8, 192, 896, 16, 64, 4)])
def test_one_pass_reduction_gives_the_two_pass_bits(monkeypatch, M, N, K, bm, bn, split):
    """PIPE 9 (the tile's last program adds the partials) adds them in the order PIPE 8's second
    kernel does: the same bits; its tickets are left at zero for the next call."""
    _force_split(monkeypatch, split)
    inp = make_gemm_inputs(M, N, K, 21, "cpu")
    two = fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, {**DEC, "BLOCK_M": bm, "BLOCK_N": bn, "PIPE": 8})
    one = fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, {**DEC, "BLOCK_M": bm, "BLOCK_N": bn, "PIPE": 9})
    assert verify(one, inp).ok and torch.equal(one, two)


def test_one_pass_tickets_come_back_to_zero():
    from occtune.kernels.fp8_gemm.kernel import launches

    inp = make_gemm_inputs(8, 192, 896, 22, "cpu")
    cfg = {**DEC, "PIPE": 9}
    cnt = torch.zeros(splitk.tiles(8, 192, cfg), dtype=torch.int32)
    ws = torch.empty(splitk.workspace_numel(8, 192, 4), dtype=torch.float32)
    orig = splitk.split_of
    splitk.split_of = lambda *a: 4
    try:
        (fn, grid, args, kw), = launches(inp.a, inp.a_s, inp.b, inp.b_s, inp.out, cfg, ws, cnt)
    finally:
        splitk.split_of = orig
    for _ in range(2):
        inp.out.fill_(float("nan"))
        fn[grid](*args, **kw)
        assert verify(inp.out, inp).ok and not cnt.any()


def test_split_rule_fills_the_sms_without_an_empty_split():
    cfg = {**DEC, "BLOCK_N": 64}
    # (4096, 7168) at M = 8: 64 tiles of 64 rows, 56 K steps: 2 programs per SM on 132 SMs -> 4 splits
    # of 14 steps; (512, 7168): 8 tiles -> 33 wanted, but at least 4 steps each: 14 splits of 4 steps
    assert (splitk.WAVES, splitk.MIN_STEPS) == (2, 4)
    assert splitk.split_of(8, 4096, 7168, cfg, 132) == 4 and splitk.steps_of(7168, cfg, 4) == 14
    assert splitk.split_of(1, 512, 7168, cfg, 132) == 14 and splitk.steps_of(7168, cfg, 14) == 4
    assert splitk.split_of(1, 2112, 7168, cfg, 132) == 8 and splitk.steps_of(7168, cfg, 8) == 7
    assert splitk.split_of(8, 32768, 8192, cfg, 132) == 1           # 512 tiles fill 132 SMs alone
    assert splitk.split_of(1, 7168, 256, cfg, 132) == 1             # 2 K steps: fewer than MIN_STEPS
    for M, N, K in ((1, 2112, 7168), (64, 512, 7168), (32, 7168, 2304), (1, 200, 320)):
        s = splitk.split_of(M, N, K, cfg, 132)
        steps = splitk.steps_of(K, cfg, s)
        nk = -(-K // 128)
        assert s >= 1 and (s - 1) * steps < nk <= s * steps, (M, N, K, s, steps)


def test_pipe_8_is_portable_and_keeps_one_scale_block_per_tile():
    assert all(pipe_runs_on({**DEC, "PIPE": p}, t) for t in ("sm_80", "sm_90", "sm_100", "gfx942", "gfx950")
               for p in (8, 9))
    assert config_problem(DEC, "gfx950") == ""
    assert "BLOCK_N <= 128" in config_problem({**DEC, "BLOCK_N": 256}, "sm_90")
    assert default_config(64)["PIPE"] in PIPES_SPLITK and default_config(65)["PIPE"] == 0


def test_the_default_decode_kernel_is_pipe_10_on_sm90_only():
    for M, bm in ((1, 16), (16, 16), (17, 32), (64, 32)):
        cfg = default_config(M, "sm_90")
        assert cfg["PIPE"] == 10 and cfg["BLOCK_M"] == bm and config_problem(cfg, "sm_90") == "", M
    for target in ("", "sm_80", "sm_100", "gfx942", "gfx950"):
        assert default_config(8, target)["PIPE"] == 9 and config_problem(default_config(8, target), target or "sm_90") == ""
    assert default_config(65, "sm_90")["PIPE"] == 0
    inp = make_gemm_inputs(3, 200, 384, 1, "cpu")                     # the interpreter: PIPE 9's default
    assert verify(fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s), inp).ok


@pytest.mark.parametrize("target", ["sm_90", "gfx942", "gfx950"])
def test_split_k_kernel_cross_compiles_without_spills(target):
    """The family's cross-compile path (resources.compiled_resources) on the decode shapes, both
    reductions (PIPE 9 compiles its tickets' atomic and the partials' L2 loads)."""
    from occtune.kernels.fp8_gemm.resources import compiled_resources

    amd = {"matrix_instr_nonkdim": 16, "waves_per_eu": 0, **({"kpack": 2} if target == "gfx942" else {})}
    for w, bm, pipe in (({"M": 8, "N": 4096, "K": 7168}, 16, 8), ({"M": 64, "N": 512, "K": 7168}, 64, 9)):
        cfg = {"backend": "triton", **DEC, "BLOCK_M": bm, "PIPE": pipe, **(amd if target.startswith("gfx") else {})}
        r = compiled_resources(cfg, target, w)
        assert r.source.startswith("compiled: triton") and r.dynamic_lds > 0
        assert not r.scratch_bytes and (r.regs if target == "sm_90" else r.vgprs) > 0


def test_split_k_sass_uses_fp8_wgmma_and_async_copies():
    """On sm_90 the weights reach the fp8 wgmma (QGMMA) through cp.async (LDGSTS), pipelined; PIPE
    9 takes its ticket once per program (one thread, acquire-release at GPU scope, after a CTA
    barrier) and reads the partials from L2 (ld.global.cg)."""
    import subprocess
    import tempfile

    import triton

    from occtune.kernels.fp8_gemm.resources import signature
    from occtune.build.tritonxc import compilable_module, cuobjdump, gpu_target

    if not cuobjdump():
        pytest.skip("no cuobjdump to read the SASS")
    fn = compilable_module(splitk, "fp8_gemm_splitk_kernel").fp8_gemm_splitk_kernel
    k = triton.compile(triton.compiler.ASTSource(fn, *signature("sm_90", 8, 4096, 7168, DEC)),
                       target=gpu_target("sm_90"), options={"num_warps": 4, "num_stages": 4})
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(k.asm["cubin"])
        f.flush()
        sass = subprocess.run([cuobjdump(), "-sass", f.name], capture_output=True, text=True, check=True).stdout
    assert "QGMMA" in sass and sass.count("LDGSTS") >= 4
    one = triton.compile(triton.compiler.ASTSource(fn, *signature("sm_90", 8, 4096, 7168, {**DEC, "PIPE": 9})),
                         target=gpu_target("sm_90"), options={"num_warps": 4, "num_stages": 4}).asm["ptx"]
    import re

    atom = re.findall(r"bar\.sync\s+0;\s*(?:[^\n]*\n){0,12}?\s*@%p\d+ atom\.global\.gpu\.acq_rel\.add", one)
    assert len(atom) == 1 and "ld.global.cg" in one


# --- launch plans ------------------------------------------------------------------------------

class StubLauncher:
    """Stands in for a compiled kernel: records each launch and each descriptor encoding."""

    def __init__(self, log):
        self.log, self.direct, self.scratch_bytes = log, True, 0

    def descriptor(self, index, ptr, shape, strides):
        self.log.append(("encode", index, ptr))
        return [f"desc{index}@{ptr}"]

    def __call__(self, grid, stream, args, scratch=None):
        self.log.append(("launch", grid, args))


def _stub_plan(monkeypatch, inp, cfg, log):
    monkeypatch.setattr(plans, "current_stream", lambda index: 0)
    return plans.build(inp.a, inp.a_s, inp.b, inp.b_s, inp.out, cfg,
                       compile_kernel=lambda fn, grid, args, kw: StubLauncher(log))


def test_plan_fills_pointer_slots_and_the_workspace(monkeypatch):
    _force_split(monkeypatch, 2)
    log = []
    inp = make_gemm_inputs(8, 256, 512, 13, "cpu")
    two = {**DEC, "BLOCK_N": 64, "PIPE": 8}
    p = _stub_plan(monkeypatch, inp, two, log)
    p(inp.a, inp.a_s, inp.b, inp.b_s, inp.out)
    (_, g1, main), (_, g2, red) = log
    assert g1 == (1, 4, 2) and main[:5] == (inp.a.data_ptr(), inp.b.data_ptr(), inp.out.data_ptr(),
                                            inp.a_s.data_ptr(), inp.b_s.data_ptr())
    assert main[5] == red[0] != 0 and red[1] == inp.out.data_ptr()      # partials: written, then reduced into out
    assert main[7:10] == (8, 256, 512) and g2 == (splitk.reduce_grid(8, 256)[0], 1, 1)
    other = make_gemm_inputs(8, 256, 512, 14, "cpu")
    log.clear()
    p(other.a, other.a_s, other.b, other.b_s, other.out)
    assert log[0][2][0] == other.a.data_ptr() and log[0][2][5] == main[5]       # same stream: same workspace
    log.clear()
    one = _stub_plan(monkeypatch, inp, {**two, "PIPE": 9}, log)
    one(inp.a, inp.a_s, inp.b, inp.b_s, inp.out)
    (_, g, args), = log                                  # one launch: the tile's last program reduces
    assert g == (1, 4, 2) and args[5] == main[5] and args[6] not in (0, main[5], inp.out.data_ptr())


def test_plan_encodes_a_tma_descriptor_again_only_when_its_tensor_moved(monkeypatch):
    log = []
    wg = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8, "num_warps": 4, "num_stages": 3, "PIPE": 4}
    inp = make_gemm_inputs(64, 256, 512, 15, "cpu")
    p = _stub_plan(monkeypatch, inp, wg, log)
    call = lambda a, out: p(a, inp.a_s, inp.b, inp.b_s, out)   # noqa: E731
    call(inp.a, inp.out)
    call(inp.a, inp.out)
    encodes = [e for e in log if e[0] == "encode"]
    assert [e[1] for e in encodes] == [0, 1, 2]                      # A, B, C once, then nothing again
    new_a = inp.a.clone()
    log.clear()
    call(new_a, inp.out)
    assert [e[:3] for e in log if e[0] == "encode"] == [("encode", 0, new_a.data_ptr())]
    args = [e for e in log if e[0] == "launch"][0][2]
    assert args[0] == f"desc0@{new_a.data_ptr()}" and args[1] == f"desc1@{inp.b.data_ptr()}"
    assert args[3] == inp.a_s.data_ptr() and args[5:8] == (64, 256, 512)


def test_a_repeated_call_reuses_its_plan_and_a_new_stride_makes_another(monkeypatch):
    inp = make_gemm_inputs(8, 256, 512, 16, "cpu")
    built = []
    real = plans.build
    monkeypatch.setattr(plans, "build", lambda *a, **k: built.append(1) or real(*a, **k))
    for _ in range(3):
        assert verify(fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, DEC), inp).ok
    assert len(built) == 1
    other = make_gemm_inputs(8, 256, 512, 17, "cpu")                  # new tensors, same layout: same plan
    assert verify(fp8_gemm(other.a, other.a_s, other.b, other.b_s, DEC), other).ok and len(built) == 1
    row_major = inp.a_s.contiguous()                                   # the scales' strides change: a new plan
    assert verify(fp8_gemm(inp.a, row_major, inp.b, inp.b_s, DEC), inp).ok and len(built) == 2
    assert verify(fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, list(DEC.values())), inp).ok and len(built) == 3
    fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, DEC, out=inp.out)        # out= is part of the key
    assert len(built) == 4


def test_a_bad_call_is_a_user_error_every_time():
    inp = make_gemm_inputs(4, 128, 256, 18, "cpu")
    for _ in range(2):                     # never cached: the second call checks again
        with pytest.raises(UserError, match="a_s"):
            fp8_gemm(inp.a, inp.a_s.t(), inp.b, inp.b_s, DEC)
    with pytest.raises(UserError, match="BLOCK_N=96"):
        fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, {**DEC, "BLOCK_N": 96})
    with pytest.raises(UserError, match="out must be a bfloat16"):
        fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, DEC, out=inp.out.float())
    with pytest.raises(UserError, match="needs 6 or 7 values"):
        fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, [16, 64])


# --- the torch op --------------------------------------------------------------------------------

def test_op_schema_fake_and_eager_call():
    import occtune.kernels.fp8_gemm.op as op
    from torch._subclasses.fake_tensor import FakeTensorMode

    assert str(torch.ops.occtune.fp8_gemm.default._schema) == "occtune::" + op.SCHEMA
    assert torch.ops.occtune.fp8_gemm_out.default._schema.arguments[4].alias_info.is_write
    with FakeTensorMode():
        a = torch.empty(3, 256, dtype=torch.float8_e4m3fn)
        b = torch.empty(100, 256, dtype=torch.float8_e4m3fn)
        out = torch.ops.occtune.fp8_gemm(a, torch.empty(3, 2), b, torch.empty(1, 2))
        assert out.shape == (3, 100) and out.dtype == torch.bfloat16
        with pytest.raises(RuntimeError, match="share K"):
            torch.ops.occtune.fp8_gemm(a, torch.empty(3, 2), torch.empty(100, 128, dtype=torch.float8_e4m3fn),
                                       torch.empty(1, 1))
    inp = make_gemm_inputs(8, 256, 512, 19, "cpu")
    got = torch.ops.occtune.fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, list(DEC.values()))
    assert verify(got, inp).ok and torch.equal(got, fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, DEC))
    torch.ops.occtune.fp8_gemm_out(inp.a, inp.a_s, inp.b, inp.b_s, inp.out)
    assert verify(inp.out, inp).ok


def test_the_public_call_goes_through_the_op_where_its_kernels_are_routed(monkeypatch):
    """fp8_gemm() hands calls without a config or with a sequence of ints to the op (op.py routes a
    GPU's calls to its C++ kernels: here the CPU op stands in); a dict config, or a sequence with
    a non-int, stays in Python; a bad call raises the same UserError either way."""
    import occtune.kernels.fp8_gemm as api
    import occtune.kernels.fp8_gemm.op  # noqa: F401  (defines the ops)

    routed = []

    def op(*args):
        routed.append("op")
        return torch.ops.occtune.fp8_gemm.default(*args)

    def op_out(*args):
        routed.append("out")
        torch.ops.occtune.fp8_gemm_out.default(*args)

    monkeypatch.setitem(api._ROUTE, "cpu", (op, op_out))
    inp = make_gemm_inputs(5, 200, 384, 21, "cpu")
    row = tuple(DEC.values())
    want = api._run(inp.a, inp.a_s, inp.b, inp.b_s, row)
    assert verify(want, inp).ok
    assert torch.equal(fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, row), want) and routed == ["op"]
    assert fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, list(row), out=inp.out) is inp.out
    assert torch.equal(inp.out, want) and routed == ["op", "out"]
    assert verify(fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s), inp).ok and routed[-1] == "op"
    assert torch.equal(fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, DEC), want) and len(routed) == 3
    with pytest.raises(UserError, match="a_s"):
        fp8_gemm(inp.a, inp.a_s.t(), inp.b, inp.b_s, row)
    with pytest.raises(UserError, match="BLOCK_N=96"):
        fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, (16, 96, 128, 1, 4, 3, 9))
    with pytest.raises(UserError, match="b_s must be a 2-D tensor"):
        fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s.tolist(), row)       # not the schema's: Python says why
    assert len(routed) == 5
    scales = inp.a_s.clone().requires_grad_()
    assert fp8_gemm(inp.a, scales, inp.b, inp.b_s, row).grad_fn is None and len(routed) == 6
    text = tuple(str(v) for v in row)        # the op's schema takes ints only: Python reads these
    assert torch.equal(fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, text), want) and len(routed) == 6


def test_op_traces_as_one_node_under_torch_compile_fullgraph():
    import occtune.kernels.fp8_gemm.op  # noqa: F401

    inp = make_gemm_inputs(8, 256, 512, 20, "cpu")
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    f = torch.compile(lambda a, s, b, t: torch.ops.occtune.fp8_gemm(a, s, b, t) * 2, fullgraph=True, backend=backend)
    out = f(inp.a, inp.a_s, inp.b, inp.b_s)
    assert verify(out / 2, inp).ok
    calls = [n for n in graphs[0].graph.nodes if n.op == "call_function" and "fp8_gemm" in str(n.target)]
    assert len(graphs) == 1 and len(calls) == 1


# --- merging a decode re-measurement into the allow-list -----------------------------------------

def _alist(points, rev):
    """An allow-list document of (n, k, M, triton us, library us) points (the safer library on ties)."""
    from occtune.kernels.fp8_gemm import allowlist
    from occtune.kernels.fp8_gemm.config import library_config
    from occtune.kernels.fp8_gemm.family import Fp8GemmFamily

    fam = Fp8GemmFamily([{"M": 1, "N": 512, "K": 7168}], target="sm_90")
    rows = []
    for n, k, m, tri, lib in points:
        for cfg, us in (({"backend": "triton", **DEC}, tri), (library_config("torch_scaled_mm", "sm_90"), lib)):
            rows.append({"config": cfg, "workload": {"M": m, "N": n, "K": k}, "status": "ok", "median_us": us,
                         "q1_us": us * 0.995, "q3_us": us * 1.005})
    prov = {"target": "sm_90", "device_name": "NVIDIA H200", "git_revision": rev, "timer": f"timer of {rev}"}
    return allowlist.build(rows, fam.safety_key, prov, target="sm_90")


def test_allowlist_json_reads_back_and_a_decode_run_merges_over_its_m_values():
    from occtune.kernels.fp8_gemm import allowlist

    base = _alist([(512, 7168, m, 20.0, 10.0) for m in (1, 64, 128, 4096)] + [(7168, 2048, 1, 9.0, 10.0)], "old")
    back = allowlist.load_json(allowlist.render_json(base), "base.json")
    strip = lambda d: [(k, p["m"], p["m_lo"], p["m_hi"], p["backend"], p["triton_config"], p["triton_us"],  # noqa: E731
                        p["library_us"], p["margin"]) for k, s in d["shapes"].items() for p in s["points"]]
    assert strip(back) == strip(base) and back["summary"] == base["summary"]
    new = _alist([(512, 7168, m, 5.0, 10.0) for m in (1, 8, 64)] + [(3072, 1536, 1, 4.0, 8.0)], "new")
    merged = allowlist.merge(back, allowlist.load_json(allowlist.render_json(new), "new.json"))
    pts = {p["m"]: p for p in merged["shapes"]["512,7168"]["points"]}
    assert [(m, p["backend"], p["m_lo"], p["m_hi"]) for m, p in pts.items()] == [
        (1, "triton", 1, 4), (8, "triton", 5, 36), (64, "triton", 37, 96), (128, "library", 97, 2112),
        (4096, "library", 2113, None)]
    assert pts[64]["triton_us"] == 5.0 and pts[128]["triton_us"] == 20.0      # the new M values replace, the rest stay
    assert set(merged["shapes"]) == {"512,7168", "7168,2048", "3072,1536"}
    assert [p["git_revision"] for p in merged["provenance"]["merged"]] == ["old", "new"]
    assert merged["summary"]["points"] == 7 and merged["summary"]["triton_points"] == 5
    src = allowlist.render_predicate(merged)
    assert "git old" in src and "git new" in src
    ns: dict = {}
    exec(compile(src, "use_triton.py", "exec"), ns)
    assert ns["use_triton"](512, 7168, 96) and not ns["use_triton"](512, 7168, 97)
    assert ns["triton_config"](512, 7168, 3)["PIPE"] == DEC["PIPE"]


def test_merge_script_writes_both_exports_and_refuses_bad_input(tmp_path, capsys):
    from clihelp import load_benchmark
    from occtune.kernels.fp8_gemm import allowlist

    merge = load_benchmark("fp8_gemm/merge_fp8_allowlist")
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(allowlist.render_json(_alist([(512, 7168, m, 20.0, 10.0) for m in (1, 128)], "old")))
    b.write_text(allowlist.render_json(_alist([(512, 7168, 1, 5.0, 10.0)], "new")))
    assert merge.main([str(a), str(b), "--out-dir", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "fp8_gemm_allowlist_sm_90.json").is_file()
    assert (tmp_path / "out" / "fp8_gemm_use_triton_sm_90.py").is_file()
    (tmp_path / "bad.json").write_text("{not json")
    for args in ([str(a), str(tmp_path / "missing.json")], [str(a), str(tmp_path / "bad.json")]):
        assert merge.main([*args, "--out-dir", str(tmp_path / "never")]) == 2
        assert capsys.readouterr().err.startswith("error: ")
    assert not (tmp_path / "never").exists()


# --- PIPE 10: the decode kernel in Gluon (splitk_wgmma.py, sm_90 only) ------------------------------

GL = {"BLOCK_M": 16, "BLOCK_N": 64, "BLOCK_K": 128, "GROUP_M": 1, "num_warps": 4, "num_stages": 4, "PIPE": 10}


def test_gluon_split_rule_picks_a_measured_split_without_an_empty_one():
    """About 4 programs per SM of at least 6 steps, rounded down to a split that was measured."""
    assert (splitk.WAVES_WGMMA, splitk.MIN_STEPS_WGMMA) == (4, 6)
    # (7168, 2048): 112 tiles -> 4 per tile wanted, 16 steps allow 2; (512, 7168): 8 tiles -> 66, 56
    # steps allow 9 -> 8 (7 steps each); (32768, 8192) at M = 64: 1024 tiles fill the SMs alone
    assert splitk.split_of(1, 7168, 2048, GL, 132) == 2
    assert splitk.split_of(1, 512, 7168, GL, 132) == 8 and splitk.steps_of(7168, GL, 8) == 7
    assert splitk.split_of(64, 32768, 8192, {**GL, "BLOCK_M": 32}, 132) == 1
    assert splitk.split_of(1, 7168, 256, GL, 132) == 1
    for M, N, K in ((1, 2112, 7168), (64, 512, 7168), (32, 7168, 2304), (1, 200, 400), (8, 1024, 8192)):
        s = splitk.split_of(M, N, K, GL, 132)
        steps, nk = splitk.steps_of(K, GL, s), -(-K // 128)
        assert s in splitk.SPLITS_WGMMA and (s - 1) * steps < nk <= s * steps, (M, N, K, s, steps)


def test_gluon_split_k_runs_on_sm90_only_with_its_tile_shapes():
    assert config_problem(GL, "sm_90") == "" and config_problem({**GL, "BLOCK_N": 128, "num_warps": 8}, "sm_90a") == ""
    assert not any(pipe_runs_on(GL, t) for t in ("sm_80", "sm_100", "gfx942", "gfx950"))
    assert "sm_90 only" in config_problem(GL, "sm_100")
    for bad, frag in (({"BLOCK_N": 128}, "BLOCK_N=64 on 4 warps or 128 on 8"), ({"BLOCK_N": 32, "num_warps": 2},
                      "64 weight rows"), ({"BLOCK_K": 64}, "BLOCK_K=128"), ({"num_stages": 1}, "num_stages >= 2")):
        assert frag in config_problem({**GL, **bad}, "sm_90"), bad
    inp = make_gemm_inputs(3, 200, 384, 1, "cpu")
    with pytest.raises(UserError, match="PIPE=10 is a Gluon kernel, which Triton's interpreter cannot run"):
        fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, GL)


def test_gluon_split_k_cross_compiles_with_its_ring_requested_and_the_scaling_overlapped():
    """sm_90 SASS of both builds: the weights and tokens arrive by TMA (UTMALDG), the fp8 wgmma
    (QGMMA) of one step is still in flight while the previous step is scaled (DEPBAR at 1), no
    spills; the split build takes one acquire-release ticket per program after a CTA barrier."""
    import re
    import subprocess
    import tempfile

    import triton
    from triton.experimental.gluon._runtime import GluonASTSource

    from occtune.build.tritonxc import compilable_module, cuobjdump, gpu_target
    from occtune.kernels.fp8_gemm import splitk_wgmma
    from occtune.kernels.fp8_gemm.resources import compiled_resources

    for cfg, w in ((GL, {"M": 1, "N": 2112, "K": 7168}), ({**GL, "BLOCK_M": 64, "BLOCK_N": 128, "num_warps": 8,
                                                          "num_stages": 3}, {"M": 64, "N": 32768, "K": 8192})):
        r = compiled_resources({"backend": "triton", **cfg}, "sm_90", w)
        assert r.threads == 32 * cfg["num_warps"] and 0 < r.regs <= 255 and not r.scratch_bytes
        assert r.dynamic_lds >= cfg["num_stages"] * (cfg["BLOCK_M"] + cfg["BLOCK_N"]) * 128
    if not cuobjdump():
        pytest.skip("no cuobjdump to read the SASS")
    name = "fp8_gemm_splitk_wgmma_kernel"
    fn = getattr(compilable_module(splitk_wgmma, name), name)
    for split in (1, 8):
        k = triton.compile(GluonASTSource(fn, *splitk_wgmma.signature(GL, split)), target=gpu_target("sm_90"),
                           options={"num_warps": 4})
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(k.asm["cubin"])
            f.flush()
            sass = subprocess.run([cuobjdump(), "-sass", f.name], capture_output=True, text=True, check=True).stdout
        waits = [ln.split("gsb0,")[1].split(";")[0].strip() for ln in sass.splitlines() if "WARPGROUP.DEPBAR" in ln]
        assert waits.count("0x1") >= 2 and "QGMMA" in sass and "UTMALDG" in sass, (split, waits)
        assert "STL" not in sass and "LDL" not in sass, split              # no local-memory spills
        tickets = re.findall(r"atom\.global\.gpu\.acq_rel\.add", k.asm["ptx"])
        assert len(tickets) == (1 if split > 1 else 0), split


def test_plan_of_the_gluon_split_k_fills_its_descriptors_partials_and_tickets(monkeypatch):
    _force_split(monkeypatch, 2)
    log = []
    inp = make_gemm_inputs(8, 256, 512, 18, "cpu")
    p = _stub_plan(monkeypatch, inp, GL, log)
    p(inp.a, inp.a_s, inp.b, inp.b_s, inp.out)
    assert [e[:3] for e in log if e[0] == "encode"] == [("encode", 0, inp.b.data_ptr()), ("encode", 1, inp.a.data_ptr())]
    (_, grid, args), = [e for e in log if e[0] == "launch"]              # one launch: the last program reduces
    assert grid == (1, 4, 2) and args[:2] == (f"desc0@{inp.b.data_ptr()}", f"desc1@{inp.a.data_ptr()}")
    assert args[2:5] == (inp.out.data_ptr(), inp.a_s.data_ptr(), inp.b_s.data_ptr())
    assert args[5] not in (0, inp.out.data_ptr()) and args[6] not in (0, args[5], inp.out.data_ptr())
    assert args[7:10] == (8, 256, 512) and args[16] == splitk.steps_of(512, GL, 2) == 2     # steps a program
    log.clear()
    moved = inp.a.clone()
    p(moved, inp.a_s, inp.b, inp.b_s, inp.out)                            # only the tokens' descriptor again
    assert [e[:3] for e in log if e[0] == "encode"] == [("encode", 1, moved.data_ptr())]
