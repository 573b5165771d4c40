"""The FP8 block-scaled GEMM family on the CPU: the Triton kernel under TRITON_INTERPRET=1 against
the float64 reference, the tolerance, the space, the allow-list exports, and the kernel
cross-compiled for gfx942 / gfx950 / sm_90 (also through `tune fp8-gemm --target gfx950`)."""

import json
import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

if os.environ["TRITON_INTERPRET"] != "1":
    pytest.skip("CPU tests: run with TRITON_INTERPRET=1", allow_module_level=True)

from occtune.engine.registry import get_family  # noqa: E402
from occtune.errors import UserError  # noqa: E402
from clihelp import load_benchmark  # noqa: E402
from occtune.kernels.fp8_gemm import allowlist, fp8_gemm  # noqa: E402
from occtune.kernels.fp8_gemm.config import BASELINE_TRITON, library_config  # noqa: E402
from occtune.kernels.fp8_gemm.family import Fp8GemmFamily, make_gemm_inputs, verify  # noqa: E402
from occtune.kernels.fp8_gemm.resources import compiled_resources, signature  # noqa: E402

SMALL = [{"M": 37, "N": 200, "K": 320}, {"M": 1, "N": 256, "K": 256}]
TRI = dict(BLOCK_M=16, BLOCK_N=64, BLOCK_K=128, GROUP_M=1, num_warps=4, num_stages=2)


@pytest.mark.parametrize("cfg,fp8", [
    (TRI, "float8_e4m3fn"),
    (TRI, "float8_e4m3fnuz"),                                             # gfx942's type
    ({**TRI, "BLOCK_M": 32, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 2}, "float8_e4m3fn"),  # tile over 2 scale blocks
    ({**TRI, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 4}, "float8_e4m3fn"),
    ({**TRI, "PIPE": 1}, "float8_e4m3fn"),         # TMA descriptors: ragged M, N, K read as zeros
    ({**TRI, "BLOCK_N": 256, "GROUP_M": 2, "PIPE": 2}, "float8_e4m3fn"),
    ({**TRI, "BLOCK_M": 32, "PIPE": 3}, "float8_e4m3fn"),          # persistent: 4 programs walk 8 tiles
])
def test_kernel_matches_reference(cfg, fp8):
    # M=37 (ragged tile), N=200 (a partial 128-column scale block), K=320 (a partial scale group)
    inp = make_gemm_inputs(37, 200, 320, 1, "cpu", fp8)
    assert torch.isnan(inp.out).all()                           # poisoned before the run
    out = fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, cfg, out=inp.out)
    res = verify(out, inp)
    assert res.ok, res.reason
    assert 0 < res.diagnostics["rel_l2"] < 2 ** -7 and res.diagnostics["rows_checked"] == 37


@pytest.mark.parametrize("cfg", [TRI, {**TRI, "PIPE": 2}, {**TRI, "PIPE": 3}])
def test_tolerance_catches_a_wrong_scale_a_stray_tile_and_nan(cfg):
    inp = make_gemm_inputs(37, 200, 320, 2, "cpu")
    out = fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, cfg, out=inp.out).clone()
    assert verify(out, inp).ok
    good = inp.a_s.clone()
    inp.a_s[5, 1] *= 2                                           # one 1x128 activation group's scale doubled
    bad = fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, cfg)
    inp.a_s.copy_(good)
    res = verify(bad, inp)
    assert not res.ok and res.diagnostics["max_abs_err"] > 4 * 2 ** -7 * res.diagnostics["max_abs_ref"]
    swapped = fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s.flip(0), cfg)     # weight block scales misindexed
    assert not verify(swapped, inp).ok
    out[36, 199] = float("nan")                                  # one element never written
    assert "NaN" in verify(out, inp).reason


def test_bad_arguments_are_user_errors():
    inp = make_gemm_inputs(4, 128, 256, 3, "cpu")
    with pytest.raises(UserError):
        fp8_gemm(inp.a, inp.a_s.t(), inp.b, inp.b_s)              # scale shape
    with pytest.raises(UserError):
        fp8_gemm(inp.a.float(), inp.a_s, inp.b, inp.b_s)          # not fp8
    with pytest.raises(UserError):
        fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, {**TRI, "BLOCK_K": 96})
    odd = make_gemm_inputs(4, 128, 200, 3, "cpu")               # K = 200: rows not 16-byte aligned
    with pytest.raises(UserError, match="multiples of 16 bytes"):
        fp8_gemm(odd.a, odd.a_s, odd.b, odd.b_s, {**TRI, "PIPE": 1})


def test_registered_with_the_seed_shapes_and_a_uniform_space():
    fam = get_family("fp8_gemm", target="sm_90")
    ws = fam.workloads()
    assert len(ws) == 14 * 9 and {"M": 16384, "N": 8192, "K": 32768} in ws and {"M": 1, "N": 2112, "K": 7168} in ws
    assert fam.baseline_config() == {"backend": "triton", **BASELINE_TRITON}
    cfgs = fam.configs()
    assert cfgs[0] == fam.baseline_config() and cfgs[-1]["backend"] != "triton"
    assert {c["backend"] for c in cfgs} == set(fam.backends) and "aiter" not in fam.backends
    assert all(set(c) == set(cfgs[0]) for c in cfgs)                   # one key set for every config
    assert all(any(fam.is_valid(c, w)[0] for w in ws) for c in cfgs)
    assert fam.flops({"M": 2, "N": 3, "K": 128}) == 2 * 2 * 3 * 128
    assert fam.bytes_moved({"M": 2, "N": 3, "K": 128}) == 2 * 128 + 3 * 128 + 4 * (2 + 1) + 2 * 2 * 3
    assert all(isinstance(v, int) for v in fam.macros(cfgs[1]).values())


def test_is_valid_prunes_by_bucket_backend_and_target():
    fam = Fp8GemmFamily(SMALL, target="sm_90")
    decode = fam.profile.triton_configs("sm_90", 0)[0]
    assert fam.is_valid(decode, {"M": 1, "N": 512, "K": 7168})[0]
    ok, why = fam.is_valid(decode, {"M": 4096, "N": 512, "K": 7168})
    assert not ok and "profile.yaml" in why
    assert fam.is_valid(fam.baseline_config(), {"M": 4096, "N": 512, "K": 7168})[0]
    lib = library_config("torch_scaled_mm", "sm_90")
    assert fam.is_valid(lib, SMALL[0])[0]
    ok, why = fam.is_valid({**lib, "BLOCK_M": 16}, SMALL[0])
    assert not ok and "ignores the Triton axes" in why
    assert not fam.is_valid({**decode, "BLOCK_K": 48}, SMALL[0])[0]
    assert not fam.is_valid({**decode, "matrix_instr_nonkdim": 16}, SMALL[0])[0]     # an AMD axis on sm_90
    tma = Fp8GemmFamily(SMALL, target="sm_90", triton_configs=[{**TRI, "PIPE": 2}])
    assert tma.is_valid({"backend": "triton", **TRI, "PIPE": 2}, SMALL[0])[0]
    ok, why = tma.is_valid({"backend": "triton", **TRI, "PIPE": 2}, {"M": 8, "N": 256, "K": 200})
    assert not ok and "K % 16" in why
    amd = Fp8GemmFamily(SMALL, target="gfx942")
    assert {"matrix_instr_nonkdim", "waves_per_eu", "kpack"} <= set(amd.axes())
    assert "kpack" not in Fp8GemmFamily(SMALL, target="gfx950").axes() and "aiter" in amd.backends
    assert amd.fp8 == "float8_e4m3fnuz"
    assert amd.safety_key(library_config("aiter", "gfx942")) > amd.safety_key(amd.baseline_config())
    tma_amd = Fp8GemmFamily(SMALL, target="gfx950", triton_configs=[{**TRI, "PIPE": 1}, TRI])
    assert [c["PIPE"] for c in tma_amd.profile.triton_configs("gfx950")] == [0]       # TMA is NVIDIA-only
    ok, why = tma_amd.is_valid({"backend": "triton", **TRI, "PIPE": 1, "matrix_instr_nonkdim": 16,
                                "waves_per_eu": 0}, SMALL[0])
    assert not ok and "sm_90 or later" in why


def test_sweep_through_the_engine_reports_the_missing_library():
    from doubles import FakeTimer

    from occtune.engine.sweep import run_sweep

    fam = Fp8GemmFamily(SMALL, target="sm_90", backends=["triton", "torch_scaled_mm"], triton_configs=[TRI])
    res = run_sweep(fam, fam.configs(), SMALL, device="cpu", timer=FakeTimer(), cache=False, progress=False)
    status = {(r["config"]["backend"], r["config"]["BLOCK_M"], r["workload"]["M"]): r for r in res.rows}
    assert status[("triton", 16, 37)]["status"] == "ok" and status[("triton", 64, 1)]["status"] == "ok"
    lib = status[("torch_scaled_mm", 64, 37)]
    assert lib["status"] == "built_failed" and "missing: no GPU" in lib["reason"]


def _row(backend, M, us, cfg=None, n=512, k=7168, status="ok", spread=0.005):
    c = library_config(backend, "sm_90") if backend != "triton" else {"backend": "triton", **(cfg or TRI)}
    return {"config": c, "workload": {"M": M, "N": n, "K": k}, "status": status,
            "median_us": us, "q1_us": us * (1 - spread), "q3_us": us * (1 + spread)}


def _doc():
    fam = Fp8GemmFamily(SMALL, target="sm_90")
    big = {**TRI, "BLOCK_M": 128}
    rows = [_row("triton", 1, 5.0), _row("triton", 1, 9.0, big), _row("torch_scaled_mm", 1, 8.0),   # triton +60%
            _row("triton", 128, 10.0), _row("torch_scaled_mm", 128, 10.05),                     # a tie: library
            _row("triton", 4096, 50.0, big), _row("torch_scaled_mm", 4096, 40.0),               # library +25%
            _row("triton", 4096, 1.0, status="wrong"),                                          # never chosen
            _row("triton", 1, 3.0, n=7168, k=2048), _row("torch_scaled_mm", 1, 2.0, n=7168, k=2048,
                                                             status="crashed")]
    prov = {"target": "sm_90", "device_name": "NVIDIA H200", "torch": "2.11", "triton": "3.6",
            "date": "2026-12-01T00:00:00+00:00", "git_revision": "abc123"}
    return allowlist.build(rows, fam.safety_key, prov, target="sm_90", missing={"deep_gemm": "missing: nope"})


def test_allowlist_decides_per_point_with_noise_and_margin():
    doc = _doc()
    pts = {p["m"]: p for p in doc["shapes"]["512,7168"]["points"]}
    assert pts[1]["backend"] == "triton" and pts[1]["margin"] == pytest.approx(0.6)
    assert pts[1]["triton_config"]["BLOCK_M"] == 16
    assert pts[128]["backend"] == "library" and "tied" in pts[128]["decided_by"]
    assert pts[4096]["backend"] == "library" and pts[4096]["margin"] == pytest.approx(0.25)
    assert pts[4096]["triton_us"] == 50.0                               # the wrong row is not a candidate
    only = doc["shapes"]["7168,2048"]["points"][0]
    assert only["backend"] == "triton" and only["margin"] is None     # the library crashed there
    assert [(p["m_lo"], p["m_hi"]) for p in pts.values()] == [(1, 64), (65, 2112), (2113, None)]
    s = doc["summary"]
    assert s["points"] == 4 and s["triton_points"] == 2
    assert s["speedup_vs_always_library"] == pytest.approx(1.6 ** (1 / 3), rel=1e-3)   # 1.6x, 1x, 1x
    assert s["speedup_vs_always_triton"] == pytest.approx((1.0 * 0.995 * 1.25) ** (1 / 3), rel=1e-3)


def test_allowlist_ties_are_judged_against_the_fastest_row_only():
    """Measured on the H200 at (7168, 256), M = 32: Triton 6.40 us (IQR 6.18-6.82), a safer Triton
    config 6.85 us (6.64-7.31), the library 7.36 us (7.17-7.87). The library is not tied with the
    fastest row, so it must not win through the safer Triton config it overlaps."""
    fam = Fp8GemmFamily(SMALL, target="sm_90")
    safer, fast = {**TRI, "BLOCK_M": 32, "BLOCK_N": 64}, {**TRI, "BLOCK_M": 64, "BLOCK_N": 64, "num_stages": 4}
    rows = [{**_row("triton", 32, 6.40, fast), "q1_us": 6.18, "q3_us": 6.82},
            {**_row("triton", 32, 6.85, safer), "q1_us": 6.64, "q3_us": 7.31},
            {**_row("torch_scaled_mm", 32, 7.36), "q1_us": 7.17, "q3_us": 7.87}]
    assert fam.safety_key({"backend": "triton", **safer}) > fam.safety_key({"backend": "triton", **fast})
    p = allowlist.decide(rows, fam.safety_key)
    assert p["backend"] == "triton" and p["triton_config"]["BLOCK_N"] == 64 and p["triton_config"]["BLOCK_M"] == 32
    assert p["margin"] == pytest.approx(7.36 / 6.85 - 1, abs=1e-4) and p["decided_by"] == "faster"
    rows[2] = {**rows[2], "median_us": 6.70, "q1_us": 6.5, "q3_us": 7.0}     # now tied with the fastest: library
    p = allowlist.decide(rows, fam.safety_key)
    assert p["backend"] == "library" and "tied" in p["decided_by"]
    assert p["margin"] == pytest.approx(p["triton_us"] / p["library_us"] - 1, abs=1e-4)    # vs Triton's own choice


def test_allowlist_json_and_predicate_exports():
    doc = _doc()
    js = json.loads(allowlist.render_json(doc))
    assert js["_provenance"]["git_revision"] == "abc123" and js["_missing_backends"] == {"deep_gemm": "missing: nope"}
    e = js["512,7168"]["1"]
    assert e["backend"] == "triton" and e["BLOCK_SIZE_M"] == 16 and e["num_stages"] == 2
    assert js["512,7168"]["4096"]["backend"] == "library"
    assert "wgmma.py" in js["_pipe"] and "Only a PIPE 0 config" in js["_pipe"]    # which kernel a config needs
    src = allowlist.render_predicate(doc)
    assert "abc123" in src and "NVIDIA H200" in src and "Only a PIPE 0 config" in src
    ns: dict = {}
    exec(compile(src, "use_triton.py", "exec"), ns)
    use, cfg = ns["use_triton"], ns["triton_config"]
    assert use(512, 7168, 1) and use(512, 7168, 64) and not use(512, 7168, 65)
    assert not use(512, 7168, 128) and not use(512, 7168, 100000)
    assert use(7168, 2048, 9999)
    assert not use(1, 2, 3)                                            # unmeasured shape: the fallback (library)
    assert cfg(512, 7168, 2)["BLOCK_M"] == 16 and cfg(512, 7168, 4096) is None


def test_cross_compiles_for_gfx942_gfx950_sm90():
    w = {"M": 4096, "N": 7168, "K": 2048}
    sig, _, _ = signature("gfx942", 4096, 7168, 2048, TRI)
    assert sig["a_ptr"] == "*fp8e4b8" and signature("gfx950", 4096, 7168, 2048, TRI)[0]["a_ptr"] == "*fp8e4nv"
    amd = {"matrix_instr_nonkdim": 16, "waves_per_eu": 0}
    r942 = compiled_resources({**TRI, **amd, "kpack": 2}, "gfx942", w)
    r950 = compiled_resources({**TRI, **amd}, "gfx950", w)
    for r in (r942, r950):
        assert r.threads == 4 * 64 and r.vgprs > 0 and r.sgprs > 0 and r.dynamic_lds > 0
        assert r.source.startswith("compiled: triton") and 1 <= r.compiler_occupancy <= 10
    small = compiled_resources(TRI, "sm_90", w)
    deep = compiled_resources({**TRI, "num_stages": 4}, "sm_90", w)
    assert small.threads == 128 and small.regs > 0 and deep.dynamic_lds > small.dynamic_lds


def test_profile_says_which_configs_a_target_cannot_run():
    prof = Fp8GemmFamily(SMALL, target="sm_90").profile
    assert prof.left_out("sm_90") == []
    amd = prof.left_out("gfx950")
    assert [g["pipes"] for g in amd] == [[1, 2, 3], [4, 5, 6, 7, 10]] and "sm_90 or later" in amd[0]["reason"]
    n_all = len({tuple(sorted(c.items())) for _, cs in prof.buckets for c in cs})
    assert sum(g["configs"] for g in amd) + len(prof.triton_configs("gfx950")) == n_all    # AMD options not crossed
    blackwell = prof.left_out("sm_100")
    assert [g["pipes"] for g in blackwell] == [[4, 5, 6, 7, 10]] and "sm_90 only" in blackwell[0]["reason"]
    m16 = prof.left_out("gfx950", [0])                                 # the M <= 16 bucket: the Gluon decode kernel
    assert [(g["pipes"], g["configs"]) for g in m16] == [([10], 3)]


def test_cli_analytic_gfx950_json():
    from click.testing import CliRunner

    from occtune.kernels.fp8_gemm.cli import command

    r = CliRunner().invoke(command, ["--target", "gfx950", "--json", "--m", "1", "--shapes", "7168,2048",
                                     "--triton", "16,64,128,1,4,3"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output[r.output.index("{"):])
    assert doc["analytic"] and not doc["timed"] and doc["target"] == "gfx950" and doc["fp8_dtype"] == "float8_e4m3fn"
    assert len(doc["rows"]) == 2                                         # the baseline and the one config
    assert doc["winner"] is None and "occupancy does not rank" in doc["why"]       # no analytic pick
    for row in doc["rows"]:
        assert row["vgprs"] > 0 and row["fits"] and row["blocks_per_cu"] >= 1
        assert row["resources_source"].startswith("compiled") and "kpack" not in row["config"]
    assert set(doc["library_backends"]) == {"torch_scaled_mm", "aiter", "aiter_bpreshuffle"}
    assert doc["left_out"] == []                                         # explicit configs: all PIPE 0


@pytest.mark.parametrize("args,frag", [
    (["--shapes", "7168"], "n,k"),
    (["--backends", "aiter"], "do(es) not run"),
    (["--triton", "16,64,128"], "needs 6 or 7 values"),
    (["--target", "gfx950", "--export", "x"], "--export needs timed results"),
])
def test_cli_bad_input_is_one_line(args, frag):
    from click.testing import CliRunner

    from occtune.kernels.fp8_gemm.cli import command

    r = CliRunner().invoke(command, ["--target", "sm_90", "--analytic", *args])
    assert isinstance(r.exception, UserError) and frag in str(r.exception)


def test_benchmark_smoke_drops_a_config_that_does_not_finish(capsys):
    bench = load_benchmark("fp8_gemm/bench_fp8_gemm")
    fam = Fp8GemmFamily(SMALL, target="sm_90", backends=["triton", "torch_scaled_mm"], triton_configs=[TRI])
    tri, lib = {"backend": "triton", **TRI, "PIPE": 0}, library_config("torch_scaled_mm", "sm_90")
    assert bench.smoke_filter([tri, lib], SMALL, fam, 120, "cpu") == [tri, lib]
    assert bench.smoke_filter([tri, lib], SMALL, fam, 0.01, "cpu") == [lib]       # "hung"
    assert "no result within" in capsys.readouterr().out


def test_benchmark_runs_on_the_cpu(tmp_path, capsys):
    """benchmarks/fp8_gemm/bench_fp8_gemm.py end to end under the interpreter on a tiny grid: progress lines,
    the four files, a missing library reported."""
    bench = load_benchmark("fp8_gemm/bench_fp8_gemm")
    rc = bench.main(["--device", "cpu", "--shapes", "128,256", "--m", "5,1", "--backends", "triton,torch_scaled_mm",
                     "--triton", "16,128,128,1,4,2", "--rep-ms", "0.01", "--warmup-ms", "0.01",
                     "--out-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0 and "[1/2] n=128 k=256 M=5: triton" in out and "backend torch_scaled_mm: missing: no GPU" in out
    md = (tmp_path / "fp8_gemm_bench.md").read_text()
    assert "| 128,256 | 5 |" in md and "torch_scaled_mm: missing: no GPU here" in md and "not measurable" in md
    rows = (tmp_path / "fp8_gemm_bench.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * 3 and sum(",ok," in r for r in rows) == 4       # 2 Triton configs x 2 M ok
    js = json.loads((tmp_path / "fp8_gemm_allowlist_sm_90.json").read_text())
    assert js["128,256"]["5"]["backend"] == "triton" and js["_provenance"]["timer"].startswith("BenchTimer")
    ns: dict = {}
    exec((tmp_path / "fp8_gemm_use_triton_sm_90.py").read_text(), ns)
    assert ns["use_triton"](128, 256, 3)


def test_backend_probe_picks_a_right_variant_and_says_why_not(monkeypatch):
    """The detection logic with a fake torch path. The padded variants come first (serving code pads
    M for cuBLASLt): v2 padded is right but refuses a ragged N, v1 padded and both unpadded ones are
    wrong on a ragged M (as cuBLASLt could be). v2 padded must be chosen, its ragged-N refusal and
    every failure reported; then, with v1 padded right too, v1 padded (it takes the ragged N); a
    library that is not installed is 'missing' with the import error."""
    from occtune.kernels.fp8_gemm import backends as B
    from occtune.kernels.fp8_gemm.reference import reference

    def fake(variant, v1_padded_right=False):
        def run(inp):
            M, N = inp.a.shape[0], inp.b.shape[0]
            if variant["api"] == "v2" and N % 128:
                raise RuntimeError("scale b must have shape [L4, N // 128]")
            out = reference(inp.a, inp.a_s, inp.b, inp.b_s).to(torch.bfloat16)
            right = variant["pad_m"] and (variant["api"] == "v2" or v1_padded_right)
            return out * 2 if (M % 4 and not right) else out
        return run

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(B, "_probe_inputs", lambda device, fp8: (
        [make_gemm_inputs(8, 256, 512, 11, "cpu"), make_gemm_inputs(5, 256, 384, 12, "cpu")],
        [make_gemm_inputs(8, 320, 256, 13, "cpu")]))
    monkeypatch.setitem(B._CALLS, "torch_scaled_mm", fake)
    B.availability.cache_clear()
    try:
        av = B.availability("torch_scaled_mm", "cuda")
        assert av.ok and av.detail["api"] == "v2" and av.detail["pad_m"] and not av.detail["ragged_n"]
        assert "N // 128" in av.detail["ragged_n_why"]
        assert [(t["api"], t["pad_m"], t["why"].split(":")[0]) for t in av.detail["tried"]] == [
            ("v1", True, "wrong"), ("v2", False, "wrong"), ("v1", False, "wrong")]
        monkeypatch.setitem(B._CALLS, "torch_scaled_mm", lambda v: fake(v, v1_padded_right=True))
        B.availability.cache_clear()
        av = B.availability("torch_scaled_mm", "cuda")
        assert av.ok and av.detail["api"] == "v1" and av.detail["pad_m"] and av.detail["ragged_n"]
        monkeypatch.setitem(B._CALLS, "torch_scaled_mm", lambda v: (_ for _ in ()).throw(NotImplementedError(
            "DeepSeek style (1x128, 128x128) scaling only supported in CUDA for SM90")))
        B.availability.cache_clear()
        av = B.availability("torch_scaled_mm", "cuda")
        assert not av.ok and av.reason.count("unusable: NotImplementedError: DeepSeek style") == 4
        dg = B.availability("deep_gemm", "cuda")
        assert not dg.ok and dg.reason.startswith("missing: ModuleNotFoundError") and "deep_gemm" in dg.reason
        with pytest.raises(B.BackendUnavailable, match="deep_gemm missing"):
            B.runner("deep_gemm", "cuda", "float8_e4m3fn")
    finally:
        B.availability.cache_clear()


def test_timed_path_writes_results_allowlist_and_exports(tmp_path, capsys):
    """tune fp8-gemm's timed path end to end on the CPU (interpreted kernel, real timer, tiny grid)."""
    from occtune.engine.options import RunOptions, TimingOptions
    from occtune.kernels.fp8_gemm.cli import _timed, print_allowlist
    from occtune.output import console
    from occtune.model.targets import load_target

    ws = [{"M": 5, "N": 128, "K": 256}, {"M": 1, "N": 128, "K": 256}]
    fam = Fp8GemmFamily(ws, target="sm_90", backends=["triton", "torch_scaled_mm"],
                        triton_configs=[{**TRI, "BLOCK_N": 128}])
    run = RunOptions(fresh=True, cache_dir=str(tmp_path / "cache"))
    target = load_target("sm_90")
    _timed(fam, target, str(tmp_path / "res"), str(tmp_path / "exp"), True, run,
           TimingOptions(warmup_ms=0.01, rep_ms=0.01), device="cpu")
    doc = json.loads(capsys.readouterr().out)
    assert (tmp_path / "res" / "sm_90" / "fp8_gemm.yaml").is_file()
    assert doc["backends"]["torch_scaled_mm"]["available"] is False
    assert doc["allowlist"]["summary"]["points"] == 2 and doc["predicate_file"].endswith(".py")
    js = json.loads((tmp_path / "exp" / "fp8_gemm_allowlist_sm_90.json").read_text())
    assert js["128,256"]["5"]["backend"] == "triton" and "torch_scaled_mm" in js["_missing_backends"]
    ns: dict = {}
    exec((tmp_path / "exp" / "fp8_gemm_use_triton_sm_90.py").read_text(), ns)
    assert ns["use_triton"](128, 256, 37) and ns["triton_config"](128, 256, 1) is not None
    with console.capture() as cap:
        print_allowlist(doc["allowlist"], target, console)
    assert "missing backend torch_scaled_mm: missing: no GPU" in cap.get() and "choice" in cap.get()


def test_tune_sweep_pipeline_uses_the_family_space(tmp_path, capsys):
    """`tune sweep fp8_gemm --target gfx950` (occtune.pipeline): the family's own config list, not
    the product of its axes; occupancy does not rank GEMM tiles, so the analytic results have no
    winner (the untuned baseline stands until the tiles are timed)."""
    from occtune.pipeline import SweepRequest, default_configs, run_request

    assert default_configs(Fp8GemmFamily(target="gfx950")) == Fp8GemmFamily(target="gfx950").configs()
    # the CLI test's config on its workload (compiled once per process)
    fam = Fp8GemmFamily(target="gfx950", triton_configs=[{**TRI, "num_stages": 3}])
    req = SweepRequest(family="fp8_gemm", target="gfx950", workloads=({"M": 1, "N": 7168, "K": 2048},),
                       out_dir=str(tmp_path), as_json=True)
    res = run_request(req, fam)
    doc = json.loads(capsys.readouterr().out)
    assert res.winner is None and doc["winner"] is None and doc["assumptions"]["ranks"] is False
    assert "untuned baseline" in doc["assumptions"]["verdict"]
    assert len(res.rows) == 2
    assert {s["config"]["backend"] for s in res.skipped} >= {"aiter", "torch_scaled_mm"}
    assert (tmp_path / "gfx950" / "fp8_gemm.yaml").is_file()


def test_an_explicit_triton_config_the_target_lacks_is_an_error_not_dropped():
    from occtune.errors import UserError
    from occtune.kernels.fp8_gemm.cli import parse_triton

    assert parse_triton("64,128,128,8,4,4,2", "sm_90")[0]["PIPE"] == 2
    with pytest.raises(UserError, match="PIPE=2 cannot run on gfx950: TMA"):
        parse_triton("64,128,128,8,4,4,2", "gfx950")


WG = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, num_warps=8, num_stages=4, PIPE=5)


def test_wgmma_pipes_run_on_sm90_only_with_their_tile_shapes():
    big = {"M": 4096, "N": 7168, "K": 7168}
    fam = Fp8GemmFamily([big], target="sm_90", triton_configs=[WG, {**WG, "PIPE": 4}])
    cfg = {"backend": "triton", **WG}
    assert fam.is_valid(cfg, big)[0] and fam.is_valid({**cfg, "PIPE": 4}, big)[0]
    for w, frag in (({"M": 64, "N": 100, "K": 256}, "N % 8"), ({"M": 64, "N": 256, "K": 200}, "K % 16")):
        ok, why = fam.is_valid(cfg, w)
        assert not ok and frag in why
    for bad, frag in (({"num_warps": 4}, "16 rows per warp"), ({"BLOCK_N": 256}, "BLOCK_N 64 or 128"),
                      ({"BLOCK_K": 64}, "BLOCK_K=128"), ({"num_stages": 1}, "num_stages >= 2")):
        loose = Fp8GemmFamily([big], target="sm_90", triton_configs=[{**WG, **bad}])
        ok, why = loose.is_valid({**cfg, **bad}, big)
        assert not ok and frag in why, (bad, why)
    for target in ("sm_100", "sm_80"):        # wgmma is Hopper's: Blackwell has tcgen05 instead
        other = Fp8GemmFamily([big], target=target, triton_configs=[WG, {**WG, "PIPE": 6}, TRI])
        assert [c["PIPE"] for c in other.profile.triton_configs(target)] == [0]
        ok, why = other.is_valid(cfg, big)
        assert not ok and "sm_90 only" in why and target in why
    assert fam.safety_key({**cfg, "PIPE": 6}) < fam.safety_key(cfg) < fam.safety_key({"backend": "triton", **WG, "PIPE": 1})
    ws = Fp8GemmFamily([big], target="sm_90", triton_configs=[{**WG, "PIPE": 6}, {**WG, "PIPE": 7}])
    assert ws.is_valid({**cfg, "PIPE": 6}, big)[0] and ws.is_valid({**cfg, "PIPE": 7}, big)[0]
    half = {**WG, "PIPE": 7, "BLOCK_M": 64, "num_warps": 4}     # PIPE 7 splits 128 rows into two warp groups
    ok, why = Fp8GemmFamily([big], target="sm_90", triton_configs=[half]).is_valid({"backend": "triton", **half}, big)
    assert not ok and "BLOCK_M=128" in why


def test_wgmma_kernel_cross_compiles_with_the_scaling_overlapping_the_next_mma():
    """The point of PIPE 4-7: in the compiled sm_90 code a wgmma is still in flight while the
    previous step is scaled (``WARPGROUP.DEPBAR.LE gsb0, 0x1``); a ptxas serialisation (every wait
    at 0) or a spill would undo it. PIPE 6 and 7 also hand the producer warp's registers to the
    consumers (setmaxnreg)."""
    import re
    import subprocess
    import tempfile

    import triton
    from triton.experimental.gluon._runtime import GluonASTSource

    from occtune.kernels.fp8_gemm import wgmma
    from occtune.kernels.fp8_gemm.kernel import kernel_name
    from occtune.build.tritonxc import compilable_module, cuobjdump, gpu_target

    w = {"M": 4096, "N": 7168, "K": 7168}
    for cfg in (WG, {**WG, "BLOCK_M": 64, "num_warps": 4, "num_stages": 3, "PIPE": 4}):
        res = compiled_resources({"backend": "triton", **cfg}, "sm_90", w)
        assert res.threads == 32 * cfg["num_warps"] and 0 < res.regs <= 255 and not res.scratch_bytes
        assert res.dynamic_lds >= cfg["num_stages"] * (cfg["BLOCK_M"] + cfg["BLOCK_N"]) * 128
    if not cuobjdump():
        pytest.skip("no cuobjdump to read the SASS")
    for cfg in (WG, {**WG, "PIPE": 6}, {**WG, "PIPE": 7}):
        name = kernel_name(cfg)
        fn = getattr(compilable_module(wgmma, name), name)
        k = triton.compile(GluonASTSource(fn, *wgmma.signature(cfg, 4096, 7168, 7168)), target=gpu_target("sm_90"),
                           options={"num_warps": wgmma.launch_warps(cfg)})
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(k.asm["cubin"])
            f.flush()
            sass = subprocess.run([cuobjdump(), "-sass", f.name], capture_output=True, text=True, check=True).stdout
        waits = [ln.split("gsb0,")[1].split(";")[0].strip() for ln in sass.splitlines() if "WARPGROUP.DEPBAR" in ln]
        assert waits.count("0x1") >= 2 and "QGMMA" in sass, (name, waits)
        if cfg["PIPE"] >= 6:    # the producer warp gives its registers to the consumers
            regs = {int(r) for r in re.findall(r"setmaxnreg\.(?:inc|dec)\.sync\.aligned\.u32\s+(\d+)", k.asm["ptx"])}
            assert wgmma.PRODUCER_REGS.value in regs and max(regs) > 200, regs
            assert k.metadata.num_warps > cfg["num_warps"]
        if cfg["PIPE"] == 7:    # each consumer warp group syncs only its own 128 threads, never both
            assert re.search(r"bar\.sync\s+\d+, 128;", k.asm["ptx"])
            assert not re.search(r"bar\.sync\s+\d+, 256;", k.asm["ptx"])


def test_wgmma_persistent_grid_comes_from_the_compiled_kernels_occupancy():
    from types import SimpleNamespace

    from occtune.kernels.fp8_gemm.wgmma import blocks_per_sm

    def kernel(warps, shared, regs):
        return SimpleNamespace(metadata=SimpleNamespace(num_warps=warps, shared=shared), n_regs=regs)

    assert blocks_per_sm("sm_90", kernel(8, 163872, 228)) == 1      # 128 x 128, 4 stages: shared memory
    assert blocks_per_sm("sm_90", kernel(4, 90136, 231)) == 2       # 64 x 128, 3 stages: registers
    assert blocks_per_sm("sm_90", kernel(4, 40000, 64)) > 2


@pytest.mark.parametrize("verb", [("fp8-gemm",), ("sweep", "fp8_gemm"), ("analyze", "fp8_gemm")])
def test_a_target_without_fp8_is_one_line_before_any_compile(capsys, monkeypatch, verb):
    """sm_80 has no e4m3 tensor cores: every verb says so in one line, not Triton's 'at 1:0:' per config."""
    from clihelp import check_user_error, run_main
    from occtune.build import compiled

    def compile_called(*args, **kwargs):
        raise AssertionError("compiled, but the target should have been refused first")

    monkeypatch.setattr(compiled, "triton_resources", compile_called)
    check_user_error(run_main(capsys, *verb, "--target", "sm_80"), "sm_80 has no fp8", "sm_89")
