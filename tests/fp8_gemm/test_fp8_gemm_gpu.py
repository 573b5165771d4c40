"""GPU tests of the FP8 block-scaled GEMM family: every backend against the float64 reference on
the seed's awkward shapes, and one small sweep through the engine. Run on a GPU machine:

    python3 -m pytest -q -rs tests/fp8_gemm/test_fp8_gemm_gpu.py

A library that cannot run here is skipped *with the probe's reason* (``-rs`` prints it), e.g.
``deep_gemm missing: ModuleNotFoundError: No module named 'deep_gemm'``.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA/ROCm GPU")]

from occtune.kernels.fp8_gemm.backends import LIBRARIES, availability, backends_for  # noqa: E402
from occtune.kernels.fp8_gemm.family import Fp8GemmFamily, expected_rows, verify  # noqa: E402

# ragged N (2112 = 16.5 x 128), K/128 = 18 (not a multiple of 4: cuBLASLt's padded scales),
# the narrowest N, the shortest K; M: one row, a ragged tile, one full tile row, many tiles
SHAPES = [(2112, 7168), (7168, 2304), (512, 7168), (7168, 256)]
MS = [1, 37, 256, 1024]


def _family():
    return Fp8GemmFamily(target=None)


def _vendor():
    return "amd" if getattr(torch.version, "hip", None) else "nvidia"


@pytest.fixture(scope="module")
def fam():
    return _family()


def _triton_configs(fam):
    """The baseline, the first config of every M bucket and of every PIPE value (TMA, warp
    specialisation: on NVIDIA sm_90+ only; the Gluon wgmma kernel: sm_90 only, one per BLOCK_M)."""
    out = [fam.baseline_config()]
    for b in range(len(fam.profile.buckets)):
        c = fam.profile.triton_configs(fam.target, b)[0]
        if c not in out:
            out.append(c)
    pipes = {}
    for c in fam.profile.triton_configs(fam.target):
        pipes.setdefault((c["PIPE"], c["BLOCK_M"] if c["PIPE"] in (4, 5) else 0), c)
    return out + [c for c in pipes.values() if c not in out]


@pytest.mark.parametrize("n,k", SHAPES)
@pytest.mark.parametrize("M", MS)
def test_triton_matches_reference(fam, n, k, M):
    w = {"M": M, "N": n, "K": k}
    inp = fam.make_inputs(w, 1, "cuda")
    exp = expected_rows(inp)
    for cfg in _triton_configs(fam):
        inp.out.fill_(float("nan"))
        out = fam.run(fam.build(cfg, "cuda"), inp)
        torch.cuda.synchronize()
        res = verify(out, inp, exp)
        assert res.ok, (cfg, res.reason)
    for name, adv in fam.adversarial_inputs(w, "cuda"):
        for cfg in _triton_configs(fam):
            adv.out.fill_(float("nan"))
            out = fam.run(fam.build(cfg, "cuda"), adv)
            assert verify(out, adv).ok, (name, cfg)


@pytest.mark.parametrize("backend", [b for b in LIBRARIES if b in backends_for(_vendor())])
def test_library_matches_reference(fam, backend):
    av = availability(backend, "cuda", fam.fp8)
    if not av.ok:
        pytest.skip(f"{backend} {av.reason}")
    assert av.reason == ""
    built = fam.build({**fam.baseline_config(), "backend": backend}, "cuda")
    wrong, rejected = [], []
    for n, k in SHAPES:
        for M in MS:
            inp = fam.make_inputs({"M": M, "N": n, "K": k}, 2, "cuda")
            try:
                res = verify(fam.run(built, inp), inp)
            except Exception as e:  # noqa: BLE001 - a shape the library refuses is a finding, listed
                rejected.append((n, k, M, f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"))
                continue
            if not res.ok:
                wrong.append((n, k, M, res.reason))
    assert not wrong, f"{backend} returned wrong results: {wrong}"
    if rejected:
        pytest.xfail(f"{backend} refuses {len(rejected)} shape(s) (the sweep reports them as crashed): {rejected[:3]}")


def test_probe_explains_every_library(fam):
    for b in fam.backends:
        if b == "triton":
            continue
        av = availability(b, "cuda", fam.fp8)
        assert av.ok or av.reason.split(":")[0] in ("missing", "unusable", "wrong") or ";" in av.reason, (b, av)


def test_sweep_and_allowlist_on_the_gpu(fam):
    from occtune.engine.bench import BenchTimer
    from occtune.engine.select import select
    from occtune.engine.sweep import run_sweep
    from occtune.kernels.fp8_gemm import allowlist

    ws = [{"M": 1, "N": 7168, "K": 2048}, {"M": 1024, "N": 7168, "K": 2048}]
    f = Fp8GemmFamily(ws, target=fam.target)
    res = run_sweep(f, f.configs(), ws, device="cuda", timer=BenchTimer(warmup_ms=2, rep_ms=5), cache=False,
                    progress=False)
    by = {}
    for r in res.rows:
        by.setdefault(r["config"]["backend"], []).append(r)
    assert any(r["status"] == "ok" for r in by["triton"])
    assert not [r for r in by["triton"] if r["status"] not in ("ok", "skipped")]
    for b, rows in by.items():
        if b != "triton":
            assert all(r["status"] == "ok" or r["reason"] for r in rows), rows
    select(res, f)
    rows = [{"config": r["config"], "workload": r["workload"], "status": r["status"], **(r.get("timing") or {})}
            for r in res.rows]
    doc = allowlist.build(rows, f.safety_key, {"device_name": torch.cuda.get_device_name()}, target=f.target)
    ns: dict = {}
    exec(allowlist.render_predicate(doc), ns)
    for p in doc["shapes"]["7168,2048"]["points"]:
        assert ns["use_triton"](7168, 2048, p["m"]) == (p["backend"] == "triton")


# --- the serving path: launch plans, the torch op, CUDA graphs, torch.compile (issue 32) ------------

# one config per PIPE (BLOCK_M BLOCK_N BLOCK_K GROUP_M num_warps num_stages PIPE), sm_90 for 1-7 and 10
PIPE_CONFIGS = [(64, 128, 128, 32, 4, 2, 0), (64, 128, 128, 8, 4, 4, 1), (64, 128, 128, 8, 4, 4, 2),
                (64, 128, 128, 8, 4, 4, 3), (64, 128, 128, 8, 4, 3, 4), (64, 128, 128, 8, 4, 3, 5),
                (128, 128, 128, 8, 8, 4, 6), (128, 128, 128, 8, 8, 6, 7), (16, 64, 128, 1, 4, 4, 8),
                (64, 128, 128, 1, 4, 3, 8), (16, 128, 128, 1, 4, 3, 9), (64, 64, 128, 1, 4, 3, 9),
                (16, 64, 128, 1, 4, 4, 10), (64, 128, 128, 1, 8, 3, 10)]


def _pipe_configs(fam):
    from occtune.kernels.fp8_gemm.config import pipe_runs_on, triton_row

    return [c for c in PIPE_CONFIGS if pipe_runs_on(triton_row(c, "test"), fam.target)]


@pytest.mark.parametrize("M", [1, 37])
def test_public_call_eager_out_op_and_graph_every_pipe(fam, M):
    """fp8_gemm through its launch plan, with out=, as torch.ops.occtune.fp8_gemm and replayed from a
    captured CUDA graph after the inputs changed in place: right every time, on a ragged N."""
    import occtune.kernels.fp8_gemm.op  # noqa: F401
    from occtune.kernels.fp8_gemm import fp8_gemm

    w = {"M": M, "N": 2112, "K": 7168}
    inp, other = fam.make_inputs(w, 3, "cuda"), fam.make_inputs(w, 4, "cuda")
    exp, exp_other = expected_rows(inp), expected_rows(other)
    for cfg in _pipe_configs(fam):
        for out in (fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, cfg),
                    torch.ops.occtune.fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, list(cfg))):
            assert verify(out, inp, exp).ok, cfg
        inp.out.fill_(float("nan"))
        assert fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, cfg, out=inp.out) is inp.out and verify(inp.out, inp, exp).ok
        a, a_s, b, b_s, out = (t.clone() for t in (inp.a, inp.a_s, inp.b, inp.b_s, inp.out))
        fp8_gemm(a, a_s, b, b_s, cfg, out=out)                  # warm: the plan exists before the capture
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            torch.ops.occtune.fp8_gemm_out(a, a_s, b, b_s, out, list(cfg))
        for src, want in ((other, exp_other), (inp, exp)):
            for dst, s in zip((a, a_s, b, b_s), (src.a, src.a_s, src.b, src.b_s)):
                dst.copy_(s)
            out.fill_(float("nan"))
            g.replay()
            torch.cuda.synchronize()
            assert verify(out, src, want).ok, (cfg, "graph replay")


def test_public_call_under_torch_compile_fullgraph(fam):
    """torch.compile(fullgraph=True): with inductor on the default config, and traced (aot_eager)
    with every PIPE's config."""
    import occtune.kernels.fp8_gemm.op  # noqa: F401

    w = {"M": 8, "N": 2112, "K": 7168}
    inp = fam.make_inputs(w, 5, "cuda")
    default = torch.compile(lambda *t: torch.ops.occtune.fp8_gemm(*t).float() * 2.0, fullgraph=True)
    assert verify((default(inp.a, inp.a_s, inp.b, inp.b_s) / 2).to(torch.bfloat16), inp).ok
    for cfg in _pipe_configs(fam):
        torch._dynamo.reset()       # one compile per config (the same code object: not a recompile limit)
        f = torch.compile(lambda a, a_s, b, b_s, cfg=cfg: torch.ops.occtune.fp8_gemm(a, a_s, b, b_s, list(cfg)) * 2,
                          fullgraph=True, backend="aot_eager")
        assert verify(f(inp.a, inp.a_s, inp.b, inp.b_s) / 2, inp).ok, cfg


def test_one_pass_split_k_gives_the_two_pass_bits_every_time(fam):
    """PIPE 9's tile tickets (the last program adds the partials) against PIPE 8's second kernel:
    the same order of additions, so the same bits, call after call (a race in the tickets or a
    stale partial would show as a difference); many splits per tile on the narrow shapes."""
    from occtune.kernels.fp8_gemm import fp8_gemm

    for n, k, M in ((512, 7168, 1), (2112, 7168, 37), (7168, 2048, 8), (1024, 8192, 64)):
        for seed in range(3):
            inp = fam.make_inputs({"M": M, "N": n, "K": k}, 30 + seed, "cuda")
            for bm, bn in ((16, 128), (64, 64)):
                two = fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, (bm, bn, 128, 1, 4, 3, 8))
                assert verify(two, inp).ok, (n, k, M, bm, bn)
                for _ in range(4):
                    one = fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, (bm, bn, 128, 1, 4, 3, 9))
                    assert torch.equal(one, two), (n, k, M, bm, bn)


def test_gluon_split_k_is_exact_and_gives_the_same_bits_every_call(fam):
    """PIPE 10 on odd shapes (N, K not multiples of 128, M = 1, 3, 37, 64), many splits per tile and
    none: right, and bit-identical call after call (its tickets and partials as PIPE 9's)."""
    from occtune.kernels.fp8_gemm import fp8_gemm

    if not any(c[-1] == 10 for c in _pipe_configs(fam)):
        pytest.skip(f"PIPE 10 is sm_90 only, not {fam.target}")
    for n, k, M in ((200, 400, 3), (2112, 1936, 37), (512, 7168, 1), (7168, 2048, 64), (1024, 8192, 8)):
        for seed in range(2):
            inp = fam.make_inputs({"M": M, "N": n, "K": k}, 60 + seed, "cuda")
            for cfg in ((16, 64, 128, 1, 4, 4, 10), (32, 64, 128, 1, 4, 3, 10), (64, 128, 128, 1, 8, 6, 10)):
                first = fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, cfg)
                assert verify(first, inp).ok, (n, k, M, cfg)
                for _ in range(3):
                    assert torch.equal(first, fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, cfg)), (n, k, M, cfg)


def test_plans_follow_moved_tensors_and_split_k_is_deterministic(fam):
    """A plan's key holds shapes and strides, not addresses: new tensors of the same key (the TMA
    descriptors of PIPE 4-7 re-encoded, the direct launch's pointers refilled) give their own
    result; a view that is not 16-byte aligned goes through Triton's launcher; PIPE 8 gives the
    same bits on every call."""
    from occtune.kernels.fp8_gemm import fp8_gemm

    w = {"M": 37, "N": 2112, "K": 7168}
    for cfg in _pipe_configs(fam):
        for seed in (6, 7):
            inp = fam.make_inputs(w, seed, "cuda")
            assert verify(fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, cfg), inp).ok, (cfg, seed)
    inp = fam.make_inputs(w, 8, "cuda")
    big = torch.empty(inp.a.numel() + 1, dtype=inp.a.dtype, device="cuda")
    odd = big[1:].view(inp.a.shape)                          # one byte off 16-byte alignment
    odd.copy_(inp.a)
    cfg = (16, 64, 128, 1, 4, 4, 8)
    assert verify(fp8_gemm(odd, inp.a_s, inp.b, inp.b_s, cfg), inp).ok
    first = fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, cfg)
    assert all(torch.equal(first, fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, cfg)) for _ in range(5))


def test_the_default_is_pipe_10_on_sm90_and_pipe_9_where_tma_cannot_read(fam):
    """Without a config, M <= 64 on sm_90 runs PIPE 10; a K that TMA cannot read (K % 16 != 0)
    falls back to PIPE 9 rather than refusing the call."""
    from occtune.kernels.fp8_gemm import fp8_gemm, plan

    if fam.target != "sm_90":
        pytest.skip(f"{fam.target}: the default is PIPE 9 (checked on the CPU)")
    for K, pipe in ((7168, 10), (200, 9)):
        plan.clear_plans()
        inp = fam.make_inputs({"M": 8, "N": 512, "K": K}, 60, "cuda")
        assert verify(fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s), inp).ok, K
        (p,) = plan.PLANS.values()
        assert p.config["PIPE"] == pipe, K


# --- the ops' C++ kernels (op_native.cpp) ------------------------------------------------------------

def _native_stats() -> dict:
    return dict(zip(("plans", "hits", "misses", "python", "errors"), torch.ops.occtune._fp8_gemm_native_stats()))


def test_the_op_kernels_are_the_cpp_ones():
    import os

    from occtune.kernels.fp8_gemm import op

    if os.environ.get("OCCTUNE_NATIVE_OP") == "0":
        pytest.skip("OCCTUNE_NATIVE_OP=0")
    assert op.native_error() is None


@pytest.mark.parametrize("M", [1, 37])
def test_op_repeated_calls_launch_from_cpp_exactly(fam, M):
    """Per PIPE: the first call of a key plans in Python, later ones (fresh tensors each time) launch
    from C++, PIPE 4-7 and 10 too (their host TMA descriptors encoded again for the moved tensors)."""
    from occtune.kernels.fp8_gemm import op, plan

    if op.native_error() is not None:
        pytest.skip(op.native_error())
    plan.clear_plans()
    assert _native_stats()["plans"] == 0
    w = {"M": M, "N": 2112, "K": 7168}
    for cfg in [None, *_pipe_configs(fam)]:
        for call in range(3):
            inp = fam.make_inputs(w, 40 + call, "cuda")
            before = _native_stats()
            c = torch.ops.occtune.fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, None if cfg is None else list(cfg))
            inp.out.fill_(float("nan"))
            torch.ops.occtune.fp8_gemm_out(inp.a, inp.a_s, inp.b, inp.b_s, inp.out, None if cfg is None else list(cfg))
            after = _native_stats()
            assert verify(c, inp).ok and verify(inp.out, inp).ok, (cfg, call)
            hits = after["hits"] - before["hits"]
            assert hits == (2 if call else 0), (cfg, call, before, after)
    assert _native_stats()["errors"] == 0


def test_op_split_k_from_cpp_gives_the_python_bits(fam):
    """PIPE 8, 9 and 10 launched from C++ (their partials and tickets the C++ side's own per stream,
    also on a second stream; PIPE 10's descriptors encoded in C++) give the bits of the Python
    launch."""
    from occtune.kernels.fp8_gemm import fp8_gemm, op
    from occtune.kernels.fp8_gemm.config import pipe_runs_on, triton_row

    if op.native_error() is not None:
        pytest.skip(op.native_error())
    inp = fam.make_inputs({"M": 8, "N": 512, "K": 7168}, 50, "cuda")
    for cfg in ((16, 32, 128, 1, 4, 5, 9), (16, 64, 128, 1, 4, 4, 8), (16, 64, 128, 1, 4, 4, 10)):
        if not pipe_runs_on(triton_row(cfg, "test"), fam.target):
            continue
        want = fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, cfg)
        before = _native_stats()
        got = [torch.ops.occtune.fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, list(cfg)) for _ in range(4)]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            got += [torch.ops.occtune.fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, list(cfg)) for _ in range(3)]
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        assert all(torch.equal(g, want) for g in got), cfg
        assert _native_stats()["hits"] - before["hits"] >= 6, cfg         # all but a first call from C++


def test_the_public_call_launches_from_cpp(fam):
    """fp8_gemm() without a config, and with out=, goes through the op's C++ kernels: after each
    key's first call, every call launches from C++ (the same bits); a bad call is a UserError."""
    from occtune.errors import UserError
    from occtune.kernels.fp8_gemm import fp8_gemm, op

    if op.native_error() is not None:
        pytest.skip(op.native_error())
    inp = fam.make_inputs({"M": 8, "N": 2112, "K": 7168}, 52, "cuda")
    first = fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s)
    assert verify(first, inp).ok
    before = _native_stats()
    for _ in range(3):
        assert torch.equal(fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s), first)
        assert fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, out=inp.out) is inp.out and torch.equal(inp.out, first)
    after = _native_stats()
    assert after["hits"] - before["hits"] >= 5, (before, after)      # all but the out= key's first call
    for _ in range(2):
        with pytest.raises(UserError, match="scales must be float32"):
            fp8_gemm(inp.a, inp.a_s.double(), inp.b, inp.b_s)


def test_op_unaligned_and_bad_calls_go_through_python(fam):
    from occtune.kernels.fp8_gemm import op

    if op.native_error() is not None:
        pytest.skip(op.native_error())
    inp = fam.make_inputs({"M": 37, "N": 2112, "K": 7168}, 51, "cuda")
    cfg = [16, 64, 128, 1, 4, 4, 8]
    big = torch.empty(inp.a.numel() + 1, dtype=inp.a.dtype, device="cuda")
    odd = big[1:].view(inp.a.shape)
    odd.copy_(inp.a)
    for _ in range(2):
        before = _native_stats()
        assert verify(torch.ops.occtune.fp8_gemm(odd, inp.a_s, inp.b, inp.b_s, cfg), inp).ok
    after = _native_stats()
    assert after["python"] - before["python"] == 1 and after["hits"] == before["hits"]
    with pytest.raises(Exception, match="a, a_s, b and b_s must be on one device"):
        torch.ops.occtune.fp8_gemm(inp.a.cpu(), inp.a_s, inp.b, inp.b_s, cfg)
    with pytest.raises(Exception, match="scales must be float32"):
        torch.ops.occtune.fp8_gemm(inp.a, inp.a_s.double(), inp.b, inp.b_s, cfg)
