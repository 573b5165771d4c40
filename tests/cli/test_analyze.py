"""`tune analyze FAMILY --set ... --target T1,T2`, and the default top-k tie bound it reports."""

import pytest

from clihelp import assert_user_error, tune, tune_json

NO_COMPILERS = {"OCCTUNE_NO_COMPILERS": "1"}


def test_rope_config_side_by_side_json():
    doc = tune_json("analyze", "rope", "--set", "variant=flat", "--set", "BLOCK_M=16", "--set", "num_warps=4",
                    "--target", "gfx942,sm_90")
    assert doc["family"] == "rope" and doc["config"] == {"variant": "flat", "BLOCK_M": 16, "num_warps": 4}
    assert list(doc["targets"]) == ["gfx942", "sm_90"]
    amd, nv = doc["targets"]["gfx942"], doc["targets"]["sm_90"]
    if amd.get("error") or nv.get("error"):
        pytest.skip(f"Triton cannot cross-compile here: {amd.get('error') or nv.get('error')}")
    assert amd["resources_source"].startswith("compiled: triton ") and amd["threads"] == 256
    assert nv["resources_source"].startswith("compiled: triton ") and nv["threads"] == 128
    assert amd["vgprs"] > 0 and nv["regs"] > 0 and amd["blocks_per_cu"] >= 1 and nv["blocks_per_cu"] >= 1
    assert set(amd["limits"]) == {"waves", "lds", "vgprs", "sgprs"}
    assert set(nv["limits"]) == {"warps", "blocks", "registers", "shared"}
    assert amd["llvm_model_waves"] == amd["compiler_occupancy"]


def test_topk_assumed_without_compilers_and_family_columns():
    doc = tune_json("analyze", "topk", "--set", "lds_budget=48K", "--target", "gfx950,sm_90", env=NO_COMPILERS)
    assert doc["config"] == {"lds_budget": 49152, "threads": 512, "bits": 8}
    for col in doc["targets"].values():
        assert col["resources_source"].startswith("assumed: ")
        assert col["static_lds_bytes"] == 7168 and col["dynamic_lds_bytes"] == 49152
        assert col["tie_capacity_entries"] == 6144 and col["covers_context"] is False
    assert doc["targets"]["gfx950"]["blocks_per_cu"] == 2          # (48 + 7) KiB rounded: 2 per 160 KiB
    r = tune("analyze", "topk", "--set", "lds_budget=48K", "--target", "gfx950", env=NO_COMPILERS)
    assert r.returncode == 0 and "warning: assumed" in r.stdout and "gfx950" in r.stdout


def test_topk_compiled_on_sm90_is_register_bound():
    doc = tune_json("analyze", "topk", "--set", "lds_budget=40K", "--target", "sm_90")
    col = doc["targets"]["sm_90"]
    if not col["resources_source"].startswith("compiled: "):
        pytest.skip(f"no CUDA compiler here ({col['resources_source']})")
    assert (col["blocks_per_cu"], col["limiter"], col["static_lds_bytes"]) == (2, "registers", 3104)


def test_bad_input_is_one_line():
    assert_user_error(tune("analyze", "nosuch", "--target", "gfx950"), "unknown kernel family")
    assert_user_error(tune("analyze", "topk", "--set", "budget=4", "--target", "gfx950"), "no axis 'budget'",
                      "lds_budget")
    assert_user_error(tune("analyze", "topk", "--set", "lds_budget", "--target", "gfx950"), "AXIS=VALUE")
    assert_user_error(tune("analyze", "topk", "--set", "lds_budget=4Q", "--target", "gfx950"), "4Q")
    assert_user_error(tune("analyze", "topk", "--target", "gfx9999"), "gfx9999")
    assert_user_error(tune("analyze", "topk", "--set", "bits=10", "--target", "gfx950", env=NO_COMPILERS), "8 or 12")


def test_40k_does_not_cover_1m_with_synthetic_normal_rows():
    """The uniform estimate says 5,120 entries hold a 1M-token row (5,120 x 256 bins >= 1M x 1.25);
    synthetic normal rows of 1M tokens already need more than 5,120 candidates."""
    from occtune.kernels.topk.capacity import uniform_capacity, worst_capacity
    from occtune.kernels.topk.synthetic import bound_candidates

    normal = bound_candidates(1 << 20, 2048, bits=(8,), families=("normal",))["normal"][8]
    assert normal > 5120
    kw = dict(bytes_per_entry=8, bits=8, required_context=1 << 20, headroom=1.25)
    assert uniform_capacity(40960, **kw).covers_context
    cap = worst_capacity(40960, synthetic={"normal": normal}, quantile="max of 8 rows", **kw)
    assert not cap.covers_context and cap.bound == "synthetic:normal" and cap.required_entries > 5120
    assert worst_capacity(131072, synthetic={"normal": normal}, quantile="max of 8 rows", **kw).covers_context


# ----------------------------------------------------------------------------- issue 31, item 4
# Every family through the generic verbs (tune analyze, sweep, export) on every target its own verb
# supports, analytic, on the CPU. fp8_gemm's own verb refuses sm_80 (Triton has no fp8 there).
# One config each (the baseline; its axes on that target), so a run compiles one kernel; top-k
# without compilers (its resources are then the profile's, marked assumed: quick, and what is
# tested here is the verb, not the compile).

from occtune.model.targets import all_targets  # noqa: E402

VERB_TARGETS = {"topk": sorted(all_targets()), "rope": sorted(all_targets()),
                "fp8_gemm": sorted(t for t in all_targets() if t != "sm_80")}
ONE_CONFIG = {"rope": {"variant": "flat", "BLOCK_M": 16, "num_warps": 4}, "topk": {"lds_budget": 32768, "bits": 12}}


def _sets(family: str, target: str) -> list[str]:
    from occtune.kernels.fp8_gemm.config import baseline_config

    config = baseline_config(target) if family == "fp8_gemm" else ONE_CONFIG[family]
    return [a for k, v in config.items() for a in ("--set", f"{k}={v}")]


@pytest.mark.parametrize("family, target", [(f, t) for f, ts in VERB_TARGETS.items() for t in ts])
def test_every_family_runs_through_analyze_and_sweep_on_its_targets(capsys, monkeypatch, tmp_path, family, target):
    import json

    from clihelp import run_main
    from occtune.engine.registry import get_family

    env = NO_COMPILERS if family == "topk" else {}
    code, out, err = run_main(capsys, "analyze", family, "--target", target, *_sets(family, target), "--json",
                              env=env, monkeypatch=monkeypatch)
    assert code == 0, err
    col = json.loads(out)["targets"][target]
    assert not col.get("error") and col["blocks_per_cu"] >= 1, col
    code, out, err = run_main(capsys, "sweep", family, "--target", target, *_sets(family, target), "--out", tmp_path,
                              "--json", env=env, monkeypatch=monkeypatch)
    assert code == 0, err
    doc = json.loads(out)
    code_x, out_x, err_x = run_main(capsys, "export", tmp_path / target / f"{family}.yaml", env=env,
                                    monkeypatch=monkeypatch)
    if get_family(family).analytic_ranks:      # a ranked analytic verdict: its winner exports
        assert doc["target"] == target and doc["winner"]["config"] == col["config"]
        assert code_x == 0 and f"Target: {target} only" in out_x, err_x
    else:                                      # occupancy does not rank these configs: nothing to export
        assert doc["target"] == target and doc["winner"] is None
        assert code_x == 2 and "no winner to export" in err_x, err_x


@pytest.mark.parametrize("verb", ["analyze", "sweep"])
def test_fp8_gemm_amd_axes_are_axes_on_gfx_targets_only(capsys, verb):
    """`--set matrix_instr_nonkdim=16` was refused as "no axis" on gfx950 (the matrix above sets it
    on every gfx target); on sm_90 it is no axis."""
    from clihelp import check_user_error, run_main

    extra = ["--no-write"] if verb == "sweep" else []
    check_user_error(run_main(capsys, verb, "fp8_gemm", "--target", "sm_90", "--set", "matrix_instr_nonkdim=16",
                              *extra), "matrix_instr_nonkdim", "BLOCK_M")


def test_analyze_takes_any_value_of_an_amd_axis(capsys):
    import json

    from clihelp import run_main

    code, out, err = run_main(capsys, "analyze", "fp8_gemm", "--target", "gfx950", "--set", "matrix_instr_nonkdim=32",
                              "--set", "waves_per_eu=2", "--json")
    assert code == 0, err
    col = json.loads(out)["targets"]["gfx950"]
    assert (col["config"]["matrix_instr_nonkdim"], col["config"]["waves_per_eu"]) == (32, 2) and not col.get("error")


def test_analyze_on_targets_whose_axes_differ_sets_each_where_it_exists(capsys):
    import json

    from clihelp import run_main

    code, out, err = run_main(capsys, "analyze", "fp8_gemm", "--target", "gfx942,gfx950,sm_90", "--set", "kpack=1",
                              "--json")
    assert code == 0, err
    doc = json.loads(out)
    cols = doc["targets"]
    assert cols["gfx942"]["config"]["kpack"] == 1 and "kpack" not in cols["gfx950"]["config"]
    assert "matrix_instr_nonkdim" not in cols["sm_90"]["config"] and "kpack" not in doc["config"]
    assert doc["config"]["BLOCK_M"] == 64 and not any(c.get("error") for c in cols.values())
