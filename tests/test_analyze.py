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
