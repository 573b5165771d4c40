"""`tune export`: golden files per format (from the committed results), the choice of targets,
family formats through the registry, and bad input.

Regenerate the golden files after an intended change with OCCTUNE_UPDATE_GOLDEN=1 (then review
the diff)."""

import json
import os
import shlex
import types

import pytest
import yaml

from clihelp import REPO, TESTS, assert_user_error
from occtune.cli import main

GOLDEN = TESTS / "data" / "golden" / "export"
TOPK = ["results/gfx942/topk.yaml", "results/gfx950/topk.yaml", "results/sm_90/topk.yaml"]
ROPE = "results/sm_90/rope.yaml"

CASES = {
    "topk_sm_90.h": [TOPK[2]],
    "topk_all_targets.h": [*TOPK, "--all-targets"],
    "rope_topk_sm_90.h": [ROPE, TOPK[2]],
    "rope_sm_90.flags": [ROPE, "--format", "flags"],
    "topk_gfx950.flags": [TOPK[1], "--format", "flags"],
    "rope_sm_90.json": [ROPE, "--format", "json"],
    "topk_sm_90.json": [TOPK[2], "--format", "json"],
    "topk_gfx950.json": [TOPK[1], "--format", "json"],
    "rope_sm_90.triton.json": [ROPE, "--format", "triton"],
}


@pytest.fixture
def tune(capsys, monkeypatch):
    """`tune ...` in this process (a subprocess costs ~0.5 s), from the checkout (paths in
    provenance stay relative); returns what a subprocess would."""
    monkeypatch.chdir(REPO)

    def run(*args, env=None):
        for k, v in (env or {}).items():
            monkeypatch.setenv(k, v)
        with pytest.raises(SystemExit) as e:
            main([str(a) for a in args])
        out = capsys.readouterr()
        return types.SimpleNamespace(returncode=e.value.code, stdout=out.out, stderr=out.err)

    return run


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(tune, name):
    r = tune("export", *CASES[name])
    assert r.returncode == 0, r.stderr
    path = GOLDEN / name
    if os.environ.get("OCCTUNE_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(r.stdout)
    assert r.stdout == path.read_text(), f"{name} changed; if intended, rerun with OCCTUNE_UPDATE_GOLDEN=1"


def test_flags_are_integers_and_provenance_goes_to_stderr(tune):
    r = tune("export", ROPE, "--format", "flags")
    words = shlex.split(r.stdout)
    assert words == r.stdout.split()                       # nothing to quote: $(...) splits it right
    assert all(w.startswith("-D") and w.split("=")[1].isdigit() for w in words)
    assert "-DOCCTUNE_ROPE_VARIANT=3" in words             # "flat" is VARIANT_NAMES[3]
    date = yaml.safe_load((REPO / ROPE).read_text())["provenance"]["date"]
    assert "NVIDIA H200" in r.stderr and date in r.stderr


def test_json_and_triton_hold_the_per_workload_winners(tune):
    rope = yaml.safe_load((REPO / ROPE).read_text())
    doc = json.loads(tune("export", ROPE, "--format", "json").stdout)
    assert doc["occtune"]["key"] == ["T"] and doc["occtune"]["provenance"]["device"] == "NVIDIA H200"
    for p in rope["per_workload"]:
        assert doc[str(p["workload"]["T"])] == p["winner"]
    tri = json.loads(tune("export", ROPE, "--format", "triton").stdout)
    won = sorted(w["T"] for c in tri["configs"] for w in c["workloads"])
    assert won == sorted(p["workload"]["T"] for p in rope["per_workload"])
    for c in tri["configs"]:
        assert "num_warps" in c and "num_warps" not in c["kwargs"] and "BLOCK_M" in c["kwargs"]
    topk = json.loads(tune("export", TOPK[2], "--format", "json").stdout)
    assert topk["occtune"]["key"] == ["B", "L"] and "64,131072" in topk


def test_json_to_a_folder_is_named_by_device(tune, tmp_path):
    r = tune("export", ROPE, TOPK[1], "--format", "json", "--out", f"{tmp_path}/")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rope,device_name=NVIDIA_H200.json",
                                                          "topk,target=gfx950.json"]
    assert_user_error(tune("export", ROPE, TOPK[1], "--format", "json"), "--out FOLDER/")


def test_targets_must_be_chosen_for_a_header(tune):
    assert_user_error(tune("export", *TOPK), "--target", "--all-targets")
    r = tune("export", *TOPK, "--target", "gfx950")
    budget = yaml.safe_load((REPO / TOPK[1]).read_text())["winner"]["config"]["lds_budget"]
    assert r.returncode == 0 and f"SGL_TOPK_DYNAMIC_SMEM_BYTES {budget}" in r.stdout
    assert "Target: gfx950 only" in r.stdout and "SGL_TOPK_DYNAMIC_SMEM_BYTES_SM_90" not in r.stdout
    assert_user_error(tune("export", *TOPK, "--format", "flags"), "--target")
    assert_user_error(tune("export", *TOPK, "--target", "sm_100"), "sm_100", "not in the results")


FAMILY = '''
from occtune.engine.family import Family


class Demo(Family):
    name = "demo"


FAMILY = Demo
EXPORTS = {"demo-text": "render:render"}
'''


def test_family_formats_come_from_the_registry(tune, tmp_path):
    pkg = tmp_path / "fams" / "demo"
    pkg.mkdir(parents=True)
    (pkg / "family.py").write_text(FAMILY)
    (pkg / "render.py").write_text("def render(doc):\n    return f\"demo {doc['winner']['config']['x']}\\n\"\n")
    res = tmp_path / "demo.yaml"
    res.write_text(yaml.safe_dump({"schema": "occtune.results/1", "family": "demo", "target": "sm_90", "timed": False,
                                   "winner": {"config": {"x": 7}}, "rows": [], "provenance": {}}))
    env = {"OCCTUNE_FAMILY_PATH": str(tmp_path / "fams")}
    r = tune("export", res, "--format", "demo-text", env=env)
    assert r.returncode == 0 and r.stdout == "demo 7\n", r.stderr
    assert_user_error(tune("export", res, "--format", "nope", env=env), "demo-text", "json")
    assert_user_error(tune("export", res, "--format", "flags", env=env), "declares no compile-time macros")
    assert_user_error(tune("export", ROPE, "--format", "demo-text", env=env), "unknown")


def test_bad_results_files(tune, tmp_path):
    assert_user_error(tune("export", tmp_path / "missing.yaml"), "missing.yaml")
    bad = tmp_path / "bad.yaml"
    doc = yaml.safe_load((REPO / TOPK[1]).read_text())
    del doc["rows"]
    bad.write_text(yaml.safe_dump(doc))
    assert_user_error(tune("export", bad), str(bad), "rows")
    bad.write_text("rows: [unclosed")
    assert_user_error(tune("export", bad), "not valid YAML")
    doc = yaml.safe_load((REPO / TOPK[1]).read_text())
    doc["winner"] = {"config": 5}
    bad.write_text(yaml.safe_dump(doc))
    assert_user_error(tune("export", bad), "winner.config")
    doc["winner"] = {"config": {"lds_budget": 100, "threads": 512, "bits": 8}}
    bad.write_text(yaml.safe_dump(doc))
    assert_user_error(tune("export", bad, "--format", "flags"), "not a valid topk config", "multiple of 8")
    doc["family"] = "nosuch"
    bad.write_text(yaml.safe_dump(doc))
    assert_user_error(tune("export", bad), "unknown kernel family 'nosuch'")


def test_unwritable_out_leaves_nothing(tune, tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    assert_user_error(tune("export", TOPK[1], "--out", blocker / "x.h"), "cannot write")
    # an existing file is replaced whole or not at all: no temporary files left beside it
    out = tmp_path / "keep.h"
    out.write_text("old")
    assert tune("export", TOPK[1], "--out", out).returncode == 0
    assert out.read_text().startswith("/* Generated by occtune")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".keep.h")] == []


def test_nearest_key_lookup_matches_the_documented_rule():
    from occtune.outputs.tuned import nearest, workload_table

    doc = yaml.safe_load((REPO / ROPE).read_text())
    dims, entries = workload_table(doc)
    win = {p["workload"]["T"]: p["winner"] for p in doc["per_workload"]}
    assert nearest(dims, entries, {"T": 1}) == win[1]
    assert nearest(dims, entries, {"T": 2000}) == win[1024]      # |log2(T/key)|: 0.97 from 1024, 2.03 from 8192
    assert nearest(dims, entries, {"T": 3000}) == win[8192]      # 1.55 from 1024, 1.45 from 8192
    assert nearest(dims, entries, {"T": 8}) == win[64]               # 3 from 1 and from 64: tie, larger key
    assert nearest(dims, entries, {"T": 10 ** 6}) == win[32768]
    assert nearest(["dtype"], [({"dtype": "bf16"}, {"a": 1})], {"dtype": "fp16"}) is None
    assert nearest(["T"], [({"T": 2}, {"a": 2}), ({"T": 8}, {"a": 8})], {"T": 4}) == {"a": 8}   # tie: larger
