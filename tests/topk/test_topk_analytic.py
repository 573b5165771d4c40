"""`tune topk` on a CPU machine: the analytic sweep must reproduce the sglang hand analysis."""

import json

import pytest
import yaml

from clihelp import assert_user_error, check_user_error, run_main, tune, tune_json
from occtune.kernels.topk.capacity import measured_capacity, uniform_capacity

K = 1024


def _by_budget(doc):
    return {c["config"]["lds_budget"]: c for c in doc["configs"]}


NO_COMPILERS = {"OCCTUNE_NO_COMPILERS": "1"}     # the assumed path, whatever is installed here


def _clang_for(target):
    """The clang that would build for ``target`` here, or None (the test is then skipped)."""
    from occtune.build.compiled import NoCompilerError, compile_hip

    try:
        return compile_hip("__attribute__((global)) void k() {}", target, {})[0]
    except NoCompilerError:
        return None


def _no_winner_json(*args, **kw):
    """The JSON a sweep without a winner still prints (exit 2, one error line, nothing written)."""
    r = tune(*args, "--json", **kw)
    assert r.returncode == 2 and r.stderr.startswith("error: ") and "nothing written" in r.stderr, r.stderr
    return json.loads(r.stdout)


def test_gfx950_without_a_compiler_assumes_loudly_and_the_data_refutes_40k(tmp_path):
    doc = _no_winner_json("topk", "--target", "gfx950", "--bits", "8", "--out", tmp_path, env=NO_COMPILERS)
    assert list(tmp_path.iterdir()) == []
    rows, a = _by_budget(doc), doc["assumptions"]
    assert set(rows) == {32 * K, 40 * K, 48 * K, 128 * K}
    assert a["resources_assumed"] and a["resources_source"].startswith("assumed: ")
    assert a["static_lds_bytes"] == 7 * K                      # the profile's estimate
    assert rows[128 * K]["blocks_per_cu"] == 1 and rows[128 * K]["limiter"] == "lds"
    r40 = rows[40 * K]
    assert (r40["blocks_per_cu"], r40["tie_capacity_entries"]) == (3, 5120)
    # the uniform estimate alone says 40 KiB covers 1M tokens; synthetic rows say otherwise
    assert a["uniform_entries"] <= 5120 < a["required_entries"]
    assert a["capacity_bound"] == "worst" and "synthetic rows" in a["capacity_bound_label"]
    assert set(a["synthetic_candidates"]) == {"normal", "narrow"} and a["synthetic_quantile"]
    assert not any(r["covers_context"] for r in rows.values()) and doc["winner"] is None
    assert a["other_width"]["bits"] == 12 and a["other_width"]["required_entries"] < 4096
    r = tune("topk", "--target", "gfx950", "--bits", "8", "--no-write", env=NO_COMPILERS)
    assert r.returncode == 2 and "warning: resources assumed" in r.stdout and "try --bits 12" in r.stderr


def test_gfx950_compiled_static_lds_moves_48k_to_3_blocks(tmp_path):
    clang = _clang_for("gfx950")
    if clang is None:
        pytest.skip("no clang for gfx950 here (pip install 'occtune[amd]')")
    doc = _no_winner_json("topk", "--target", "gfx950", "--bits", "8", "--out", tmp_path)
    rows, a = _by_budget(doc), doc["assumptions"]
    assert a["resources_source"] == f"compiled: clang {clang.version} gfx950" and not a["resources_assumed"]
    assert 0 < a["static_lds_bytes"] < 7 * K                    # the compiler's figure, not the estimate
    assert rows[48 * K]["blocks_per_cu"] == 3                    # 2 with the 7 KiB estimate
    for r in rows.values():
        assert r["vgprs"] > 0 and r["sgprs"] > 0 and r["llvm_model_waves"] == r["compiler_occupancy"]
    assumed = _by_budget(_no_winner_json("topk", "--target", "gfx950", "--bits", "8", "--no-write", env=NO_COMPILERS))
    assert assumed[48 * K]["blocks_per_cu"] == 2
    # with the 12-bit key the same bound is met: a winner, the most blocks per CU
    doc12 = tune_json("topk", "--target", "gfx950", "--bits", "12", "--no-write")
    win = doc12["winner"]
    assert win is not None and win["blocks_per_cu"] == max(r["blocks_per_cu"] for r in doc12["configs"]
                                                            if r["covers_context"])
    r = tune("topk", "--target", "gfx950", "--no-write")
    assert f"resources: compiled: clang {clang.version} gfx950" in r.stdout.replace("\n", " ")


def test_gfx942_nothing_fits_at_128k(tmp_path):
    doc = tune_json("topk", "--target", "gfx942", "--out", tmp_path, env=NO_COMPILERS)
    rows = _by_budget(doc)
    assert not rows[128 * K]["fits"]
    assert rows[48 * K]["fits"] and rows[48 * K]["blocks_per_cu"] == 1


def test_results_file_is_complete(tmp_path):
    r = tune("topk", "--target", "gfx950", "--bits", "12", "--out", tmp_path, env=NO_COMPILERS)
    assert r.returncode == 0, r.stderr
    assert "32 KiB *" in r.stdout and "synthetic rows" in r.stdout
    doc = yaml.safe_load((tmp_path / "gfx950" / "topk.yaml").read_text())
    assert doc["timed"] is False and doc["family"] == "topk" and doc["target"] == "gfx950"
    assert len(doc["rows"]) == 4 and doc["winner"]["config"] == {"lds_budget": 32768, "threads": 512, "bits": 12}
    prov = doc["provenance"]
    assert prov["occtune"] and prov["date"] and "analytic" in prov["device"]
    assert doc["assumptions"]["static_lds_bytes"] == 7 * K
    assert all(r["resources_source"].startswith("assumed: ") for r in doc["rows"])


def test_timed_overflows_refute_a_budget(tmp_path):
    """Overflowed rows of a timed sweep (any target) at lengths within the required context make
    that budget not cover, whatever the estimate says."""
    timed = {"schema": "occtune.results/2", "family": "topk", "timed": True, "target": "sm_90", "winner": None,
             "provenance": {}, "rows": [
        {"config": {"lds_budget": 48 * K, "threads": 512, "bits": 12}, "workload": {"B": 64, "L": 1 << 20, "K": 2048},
         "diagnostics": {"overflow_rows": 3}},
        {"config": {"lds_budget": 40 * K, "threads": 512, "bits": 12}, "workload": {"B": 64, "L": 1 << 21, "K": 2048},
         "diagnostics": {"overflow_rows": 9}}]}
    (tmp_path / "sm_90").mkdir()
    (tmp_path / "sm_90" / "topk.yaml").write_text(yaml.safe_dump(timed))
    doc = tune_json("topk", "--target", "gfx950", "--bits", "12", "--no-write", "--out", tmp_path, env=NO_COMPILERS)
    rows = _by_budget(doc)
    assert not rows[48 * K]["covers_context"] and rows[48 * K]["capacity_bound"] == "timed"
    assert "3/64 rows at L=1,048,576" in rows[48 * K]["timed_overflow"]
    assert rows[40 * K]["covers_context"]              # overflowed only beyond the required context


def test_options_override_the_profile(tmp_path):
    doc = tune_json("topk", "--target", "gfx950", "--budgets", "24K,64KiB", "--threads", "1024",
                    "--bits", "12", "--out", tmp_path, env=NO_COMPILERS)
    rows = _by_budget(doc)
    assert set(rows) == {24 * K, 64 * K}
    assert rows[24 * K]["tie_capacity_entries"] == 3072
    assert doc["assumptions"]["uniform_entries"] == (1 << 20) * 5 // 4 // 4096   # 12-bit key: 4096 bins
    assert doc["assumptions"]["threads"] == 1024 and all(r["threads"] == 1024 for r in doc["configs"])


def test_threads_list_is_for_the_timed_sweep(tmp_path):
    from occtune.kernels.topk.family import TopkFamily
    from occtune.engine.sweep import default_configs

    r = tune("topk", "--target", "gfx950", "--threads", "512,1024", "--out", tmp_path, env=NO_COMPILERS)
    assert_user_error(r, "one value")
    assert not (tmp_path / "gfx950").exists()
    assert_user_error(tune("topk", "--target", "gfx950", "--threads", "512,x", "--out", tmp_path, env=NO_COMPILERS), "'x'")
    doc = tune_json("topk", "--target", "gfx950", "--threads", "256,256", "--out", tmp_path, env=NO_COMPILERS)
    assert doc["assumptions"]["threads"] == 256                 # a repeated value is one value
    # the timed sweep's configs (the family built from the list): every budget at every block size
    fam = TopkFamily(budgets=(32768, 49152), threads=(512, 1024), bits=(12,))
    assert default_configs(fam) == [
        {"lds_budget": 32768, "threads": 512, "bits": 12}, {"lds_budget": 32768, "threads": 1024, "bits": 12},
        {"lds_budget": 49152, "threads": 512, "bits": 12}, {"lds_budget": 49152, "threads": 1024, "bits": 12}]


def test_budget_over_the_workgroup_maximum_is_a_row_not_a_crash(tmp_path):
    doc = tune_json("topk", "--target", "gfx950", "--budgets", "40K,200K", "--out", tmp_path, env=NO_COMPILERS)
    big = _by_budget(doc)[200 * K]
    assert big["fits"] is False and "LDS" in big["reason"]


def test_no_winner_when_nothing_covers(tmp_path):
    r = tune("topk", "--target", "gfx942", "--budgets", "8K", "--out", tmp_path, "--json", env=NO_COMPILERS)
    assert_user_error(r, "8 KiB excluded: does not cover the required context", "nothing written")
    assert json.loads(r.stdout)["winner"] is None and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("failing", [None, 40 * K], ids=["every-budget", "one-budget"])
@pytest.mark.parametrize("as_json", [(), ("--json",)], ids=["table", "json"])
def test_failed_compile_is_one_error_line_and_nothing_written(tmp_path, capsys, monkeypatch, failing, as_json):
    """A compile that failed (clang crashed or timed out: fuzzing found a traceback when every
    budget did) leaves no whole verdict: exit 2, one error line naming the budgets, no file."""
    from occtune.build import compiled
    from occtune.engine.family import Resources

    def probe(source, kernel, macros, target, *, threads, name, shipped=None):
        if failing in (None, macros["SGL_TOPK_DYNAMIC_SMEM_BYTES"]):
            raise compiled.CompileError(f"clang-19 took over 600 s: -x hip --cuda-device-only --offload-arch={target}")
        return Resources(threads=threads, static_lds=6144, vgprs=64, agprs=0, sgprs=32, source="compiled: stub")

    monkeypatch.setattr(compiled, "hip_resources", probe)
    out = tmp_path / "out"
    code, stdout, err = run_main(capsys, "topk", "--target", "gfx942", "--bits", "12", "--out", out, *as_json)
    # 128 KiB alone exceeds gfx942's 64 KiB of LDS: not compiled, so not among the failed
    budgets = "no resources for 32 KiB, 40 KiB, 48 KiB (" if failing is None else "no resources for 40 KiB ("
    check_user_error((code, stdout, err), budgets, "clang-19 took over 600 s", "nothing written")
    assert stdout == "" and not out.exists()


def test_bad_input(tmp_path):
    assert_user_error(tune("topk", "--target", "gfx9500", "--out", tmp_path, env=NO_COMPILERS), "gfx950")
    assert_user_error(tune("topk", "--target", "gfx950", "--budgets", "40Q", "--out", tmp_path, env=NO_COMPILERS), "40Q")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = tune("topk", "--target", "gfx950", "--out", blocker / "sub", env=NO_COMPILERS)
    assert_user_error(r, "cannot write")
    assert not (blocker / "sub").exists()


def test_malformed_profile_names_file_and_key(tmp_path):
    prof = tmp_path / "topk.yaml"
    prof.write_text("family: topk\nk: 2048\n")
    assert_user_error(tune("topk", "--target", "gfx950", "--profile", prof, env=NO_COMPILERS), str(prof), "description")


def test_capacity_functions():
    u = uniform_capacity(40 * K, bytes_per_entry=8, bits=8, required_context=1 << 20, headroom=1.25)
    assert (u.entries, u.max_context_tokens, u.covers_context) == (5120, 1310720, True)
    assert not uniform_capacity(32 * K, bytes_per_entry=8, bits=8, required_context=1 << 20,
                                headroom=1.25).covers_context
    m = measured_capacity(40 * K, bytes_per_entry=8, max_candidates=4200, headroom=1.25)
    assert m.required_entries == 5250 and not m.covers_context


def test_measured_bound_from_scores(tmp_path):
    import numpy as np

    # Every value equal: the threshold bin holds the whole row (8192 candidates), so the measured
    # bound needs ceil(8192 * 1.25) = 10240 entries = 80 KiB: only 128 KiB covers it.
    scores = np.ones((3, 8192), dtype=np.float32)
    path = tmp_path / "scores.npy"
    np.save(path, scores)
    doc = tune_json("topk", "--target", "gfx950", "--scores", path, "--out", tmp_path, env=NO_COMPILERS)
    rows = _by_budget(doc)
    assert doc["assumptions"]["capacity_bound"] == "measured"
    assert doc["assumptions"]["measured_max_candidates"] == 8192
    assert all(r["required_entries"] == 10240 for r in rows.values())
    assert [b for b, r in rows.items() if r["covers_context"]] == [128 * K]
    assert rows[40 * K]["rows_overflowing"] == 3 and rows[128 * K]["rows_overflowing"] == 0
    assert doc["winner"]["config"]["lds_budget"] == 128 * K
    assert_user_error(tune("topk", "--target", "gfx950", "--scores", tmp_path / "nope.npy", env=NO_COMPILERS), "nope.npy")


def test_family_random_inputs_are_seeded_torch_draws_that_the_check_accepts():
    import torch

    from occtune.kernels.topk.family import TopkFamily

    fam, w = TopkFamily(), {"B": 3, "L": 5000, "K": 64}
    a, b = fam.make_inputs(w, 7, "cpu"), fam.make_inputs(w, 7, "cpu")
    assert torch.equal(a["scores"], b["scores"])                       # deterministic in the seed
    assert not torch.equal(a["scores"], fam.make_inputs(w, 8, "cpu")["scores"])
    s = a["scores"]
    assert s.shape == (3, 5000) and s.dtype == torch.float32 and a["k"] == 64
    assert a["lengths"].dtype == torch.int32 and a["lengths"].tolist() == [5000] * 3
    assert abs(float(s.mean())) < 0.05 and abs(float(s.std()) - 1.0) < 0.05   # standard normal
    diag = {"bin_counts": torch.zeros(3, dtype=torch.int32), "capacity": 4096}
    good = torch.topk(s, 64, dim=-1, sorted=False).indices.int()
    assert fam.check({"out": good, "diag": diag}, a, w).ok
    bad = good.clone()
    bad[1, 0] = int(torch.argmin(s[1]))                                # the row's smallest value
    assert not fam.check({"out": bad, "diag": diag}, a, w).ok


def test_timed_table_counts_every_overflow_path():
    """The timed table's "overflow rows" column: bin overflows first, then the kernel's other
    overflow reports (a spilled stage, a replayed long row, extra passes), so none is hidden."""
    from occtune.kernels.topk.cli import overflow_text

    clean = [{"diagnostics": {"overflow_rows": 0}}, {"diagnostics": {}}, {}]
    assert overflow_text(clean) == "0"
    rows = [{"diagnostics": {"overflow_rows": 2, "bin_overflow_rows": 2, "spilled_rows": 5}},
            {"diagnostics": {"overflow_rows": 1, "bin_overflow_rows": 1, "row_pass_rows": 1, "spilled_rows": 7}}]
    assert overflow_text(rows) == "3; spilled 12; row_pass 1"
    assert overflow_text([{"diagnostics": {"replayed_rows": 4}}]) == "0; replayed 4"
