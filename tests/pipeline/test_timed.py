"""tuner/pipeline/timed.py end to end with a fake timer, and `tune rope` on a machine without its GPU."""

from __future__ import annotations

import json

import pytest

from clihelp import assert_user_error, tune, tune_json
from occtune.engine.family import key_of
from doubles import FakeTimer, FaultFamily
from occtune.errors import UserError
from occtune.outputs.results import load_results
from occtune.engine.options import RunOptions, parse_devices
from occtune.pipeline.timed import Output, run_timed


class CountingTimer(FakeTimer):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.calls = 0

    def __call__(self, fn, **kw):
        self.calls += 1
        return super().__call__(fn, **kw)


def _run(tmp_path, timer=None, **kw):
    fam = kw.pop("family", None) or FaultFamily(n=4, wrong=[3])
    timer = timer or CountingTimer({key_of({"v": 0}): 100, key_of({"v": 1}): 40, key_of({"v": 2}): 70,
                                    key_of({"v": 3}): 10})
    options = RunOptions(fresh=kw.pop("fresh", False))
    output = Output(out_dir=tmp_path / "res", progress=False, as_json=kw.pop("as_json", False),
                    after_write=kw.pop("after_write", None), columns=tuple(kw.pop("columns", ())))
    return fam, timer, run_timed(fam, target="gfx950", device="cpu", timer=timer, options=options, output=output,
                                 cache=tmp_path / "cache", **kw)


def test_results_written_loadable_and_exportable(tmp_path):
    _, _, run = _run(tmp_path)
    assert run.path == tmp_path / "res" / "gfx950" / "fault.yaml"
    doc = load_results(run.path)
    assert doc["timed"] is True and doc["target"] == "gfx950"
    # v=3 is fastest but wrong: never chosen; v=1 is 2.5x the baseline v=0
    assert doc["winner"]["config"] == {"v": 1}
    assert doc["winner"]["geomean_speedup"] == pytest.approx(2.5, rel=1e-3)
    assert [e["config"] for e in doc["excluded"]] == [{"v": 3}] and "wrong" in doc["excluded"][0]["reason"]
    js = tune("export", run.path, "--format", "json")       # per workload, keyed by N
    assert js.returncode == 0, js.stderr
    assert {k: v for k, v in json.loads(js.stdout).items() if k != "occtune"} == {"8": {"v": 1}, "16": {"v": 1}}


def test_rerun_is_served_from_the_cache_and_fresh_remeasures(tmp_path):
    _, t1, first = _run(tmp_path)
    assert first.result.n_measured == 8 and t1.calls > 0
    _, t2, again = _run(tmp_path)
    assert again.result.n_cached == 8 and again.result.n_measured == 0 and t2.calls == 0
    assert load_results(again.path)["winner"]["config"] == {"v": 1}
    _, t3, fresh = _run(tmp_path, fresh=True)
    assert fresh.result.n_measured == 8 and fresh.result.n_cached == 0 and t3.calls > 0


def test_json_is_one_document_with_summary_and_extras(tmp_path, capsys):
    wrote = []

    def after(path, doc):
        wrote.append((path, doc["family"]))
        return {"header_file": str(path.with_suffix(".h"))}

    cols = [("points seen", lambda rows: len(rows))]
    _, _, run = _run(tmp_path, as_json=True, after_write=after, columns=cols)
    out = json.loads(capsys.readouterr().out)       # raises if stdout holds more than one document
    assert out["results_file"] == str(run.path) and wrote == [(run.path, "fault")]
    assert out["header_file"].endswith("fault.h")
    assert out["winner"]["config"] == {"v": 1} and len(out["rows"]) == 8
    summ = {key_of(s["config"]): s for s in out["summary"]}
    assert summ[key_of({"v": 1})]["winner"] is True and summ[key_of({"v": 1})]["points seen"] == 2
    assert summ[key_of({"v": 3})]["status"].startswith("wrong")
    assert summ[key_of({"v": 3})]["geomean_speedup"] is None


def test_table_output_names_the_winner(tmp_path, capsys):
    _run(tmp_path)
    text = capsys.readouterr().out
    assert "* v=1" in text and "winner" in text and "wrote" in text


def test_no_winner_is_an_error_naming_every_config_and_keeps_the_old_file(tmp_path):
    _, _, run = _run(tmp_path)
    old = run.path.read_bytes()
    with pytest.raises(UserError, match="no config passed the hard constraints") as e:
        run_timed(FaultFamily(n=2, wrong=[0, 1]), target="gfx950", device="cpu", timer=FakeTimer(), cache=False,
                  output=Output(out_dir=tmp_path / "res", progress=False))
    assert "v=0" in str(e.value) and "v=1" in str(e.value) and "\n" not in str(e.value)
    assert run.path.read_bytes() == old


def test_parse_devices():
    assert parse_devices("0,1") == ("cuda:0", "cuda:1")
    assert parse_devices(None) is None
    for bad in ("0,0", "gpu1", "-1"):
        with pytest.raises(UserError):
            parse_devices(bad)


# ------------------------------------------------------------------------------- tune rope

def test_rope_bad_input_is_one_line():
    assert_user_error(tune("rope", "--block-m", "0", "--target", "gfx942"), "--block-m")
    assert_user_error(tune("rope", "--shape", "1,2", "--target", "gfx942"), "--shape")
    assert_user_error(tune("rope", "--block-m", "24", "--target", "gfx942"), "--block-m", "'24'")
    assert_user_error(tune("rope", "--variants", "fast", "--target", "gfx942"), "--variants")
    assert_user_error(tune("rope", "--shape", "8,128,63", "--target", "gfx942"), "even")
    assert_user_error(tune("rope", "--target", "gfx9999"), "unknown target")


def test_rope_without_gpu_or_target_says_what_to_do():
    assert_user_error(tune("rope"), "--target")


def _hip_compiles() -> bool:
    try:
        from occtune.kernels.rope.resources import compiled_resources

        compiled_resources({"variant": "flat", "BLOCK_M": 8, "num_warps": 1}, "gfx942")
        return True
    except UserError:  # NoCompilerError or CompileError: no AMD backend in this Triton: skip
        return False


def test_rope_analytic_gfx942_json_from_cross_compiled_resources():
    if not _hip_compiles():
        pytest.skip("this Triton cannot cross-compile for gfx942")
    doc = tune_json("rope", "--target", "gfx942", "--variants", "flat", "--block-m", "8,128",
                    "--num-warps", "1,4")
    assert doc["timed"] is False and doc["analytic"] is True and "nothing timed" in doc["label"]
    rows = {(r["BLOCK_M"], r["num_warps"]): r for r in doc["rows"]}
    assert set(rows) == {(8, 1), (8, 4), (128, 1), (128, 4)}
    for (bm, nw), r in rows.items():
        assert r["resources_source"].startswith("compiled: triton ")
        assert r["threads"] == 64 * nw and r["vgprs"] > 0 and r["sgprs"] > 0
    # 128 rows of 64 columns in one wave need far more registers than 8 rows
    assert rows[(128, 1)]["vgprs"] > 2 * rows[(8, 1)]["vgprs"]
    # the register-heavy config is held back by VGPRs, and the model agrees with LLVM's own
    # occupancy estimate (waves per SIMD) wherever registers or waves limit
    assert rows[(128, 1)]["limiter"] == "vgprs"
    for r in rows.values():
        if r["compiler_occupancy"] is not None and r["fits"]:
            assert r["waves_per_simd"] == r["compiler_occupancy"], r
    assert doc["resources_workload"]["T"] == 32768
