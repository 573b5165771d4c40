"""GPU tests of the FP8 block-scaled GEMM family: every backend against the float64 reference on
the seed's awkward shapes, and one small sweep through the engine. Run on a GPU machine:

    python3 -m pytest -q -rs tests/gpu/test_fp8_gemm_gpu.py

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
