"""The one pipeline (occtune.pipeline) and what it shows (issue 31, items 5 and 8).

Item 5: a family declares whether its analytic verdict ranks configs; where it does not (RoPE,
GEMM tiles), the analytic run shows resources, occupancy and limiters with no winner, writes its
rows, and ``tune export`` refuses the file in one line. Item 8: a terminal gets the winner, the
top 10 and one line for the rest (``--all`` for everything); piped output is neither wrapped nor
cut; ``tune report FILE`` writes into a folder named after the input, never beside the results.
"""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

from clihelp import REPO, check_user_error, run_main, tune
from doubles import FakeTimer, FaultFamily
from occtune.engine.family import Family, Resources, key_of
from occtune.outputs.results import load_results
from occtune.pipeline import SweepRequest, run_request

NO_COMPILERS = {"OCCTUNE_NO_COMPILERS": "1"}


class Grid(Family):
    """``n`` configs {"v": i, "variant": ...}; config v uses v KiB of static LDS, so fewer blocks fit
    as v grows (blocks per CU/SM rank them, where the family says they do)."""

    name = "grid"

    def __init__(self, n: int = 30, ranks: bool = False):
        self.n, self.analytic_ranks = n, ranks

    def axes(self):
        return {"v": list(range(self.n)), "variant": ["a_rather_long_variant_name"]}

    def baseline_config(self):
        return {"v": 0, "variant": "a_rather_long_variant_name"}

    def workloads(self):
        return [{"N": 8}]

    def resources(self, config, target):
        return Resources(threads=256, static_lds=4096 * (config["v"] + 1), vgprs=32, sgprs=16, source="stub")


def _analytic(tmp_path, family, **kw):
    req = SweepRequest(family=family.name, target="gfx950", out_dir=str(tmp_path / "res"), **kw)
    return run_request(req, family)


def _table_rows(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("│")]


# ----------------------------------------------------------------------------- item 5: no winner


def test_an_unranked_analytic_run_writes_no_winner_and_export_refuses_it(tmp_path, capsys):
    res = _analytic(tmp_path, Grid(n=3))
    out = capsys.readouterr().out
    assert res.winner is None and not res.ranked and len(res.rows) == 3
    assert "winner (analytic)" not in out and "* " not in out and "occupancy does not rank grid" in out
    path = tmp_path / "res" / "gfx950" / "grid.yaml"
    doc = load_results(path)                     # the rows are written: resources, occupancy, limiters
    assert doc["winner"] is None and doc["assumptions"]["ranks"] is False and len(doc["rows"]) == 3
    assert all(r["limiter"] and r["blocks_per_cu"] > 0 for r in doc["rows"])
    err = check_user_error(run_main(capsys, "export", path, "--format", "json"), "no winner to export",
                           "does not rank grid configs", "time it on a gfx950")
    assert str(path) in err


def test_a_ranked_analytic_run_picks_the_most_blocks(tmp_path, capsys):
    res = _analytic(tmp_path, Grid(n=3, ranks=True))
    assert res.ranked and res.winner["config"]["v"] == 0
    assert load_results(tmp_path / "res" / "gfx950" / "grid.yaml")["winner"]["config"]["v"] == 0
    assert "winner (analytic)" in capsys.readouterr().out


def test_rope_and_fp8_gemm_do_not_rank_and_topk_does():
    from occtune.engine.registry import get_family

    assert [get_family(n).analytic_ranks for n in ("rope", "fp8_gemm", "topk")] == [False, False, True]


def test_tune_sweep_rope_crowns_no_config(tmp_path, capsys, monkeypatch):
    """It crowned 'token BLOCK_M=8 num_warps=1' for fitting the most blocks per CU. Resources are
    stubbed (the real cross-compile takes seconds per config): the verdict is what is tested."""
    from occtune.kernels.rope.family import RopeFamily

    monkeypatch.setattr(RopeFamily, "resources", lambda self, c, t: Resources(
        threads=64 * c["num_warps"], vgprs=8 * c["BLOCK_M"] // c["num_warps"] + 8, sgprs=30, source="stub"))
    code, out, err = run_main(capsys, "sweep", "rope", "--target", "gfx950", "--out", tmp_path, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["winner"] is None and doc["assumptions"]["ranks"] is False and len(doc["rows"]) > 50
    assert load_results(doc["results_file"])["winner"] is None


@pytest.mark.parametrize("family_name,target,given,key", [
    ("rope", "gfx950", ("--workload", "D=128"), ("D", 128)),
    ("fp8_gemm", "gfx950", ("--workload", "N=1536", "--workload", "K=2048"), ("K", 2048)),
])
def test_sweep_reads_resources_for_the_asked_workloads(tmp_path, capsys, monkeypatch, family_name, target, given, key):
    """`tune sweep rope --workload D=128` read every config's resources for the default workloads
    (D=64): the rows and the file's resources_workload now name the shape asked for. Resources are
    stubbed; each stub records the workload its family reads them from."""
    from occtune.engine.registry import get_family

    cls = type(get_family(family_name))
    read = []

    def stub(self, c, t):
        rep = self.representative() if family_name == "rope" else self._representative()
        read.append(rep[key[0]])
        return Resources(threads=64 * c.get("num_warps", 4), vgprs=32, sgprs=30, source="stub")

    monkeypatch.setattr(cls, "resources", stub)
    code, out, err = run_main(capsys, "sweep", family_name, "--target", target, *given, "--out", tmp_path, "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert read and set(read) == {key[1]}
    assert doc["assumptions"]["resources_workload"][key[0]] == key[1]


# ----------------------------------------------------------------------------- item 8: walls of text


def test_the_analytic_table_shows_the_winner_the_top_10_and_one_line(tmp_path, capsys):
    _analytic(tmp_path, Grid(n=30, ranks=True), write=False)
    out = capsys.readouterr().out
    rows = _table_rows(out)
    assert len(rows) == 11 and rows[0].startswith("│ * v=0 ")           # the winner and 10 more
    assert "19 more configs not shown" in out and "--all shows every one" in out
    assert "every config: variant=a_rather_long_variant_name" in out      # said once, whole
    _analytic(tmp_path, Grid(n=30, ranks=True), write=False, show_all=True)
    out = capsys.readouterr().out
    assert len(_table_rows(out)) == 30 and "not shown" not in out


def test_the_timed_table_shows_the_winner_the_top_10_and_one_line(tmp_path, capsys):
    from occtune.pipeline.timed import Output, run_timed

    fam = FaultFamily(n=15)
    timer = FakeTimer({key_of({"v": i}): 100 - 5 * i for i in range(15)})
    for show_all, shown in ((False, 11), (True, 15)):
        run_timed(fam, target="cpu", device="cpu", timer=timer, cache=False,
                  output=Output(out_dir=None, progress=False, show_all=show_all))
        out = capsys.readouterr().out
        table = out.split("per-workload")[0]
        assert len(_table_rows(table)) == shown, out
        assert ("4 more configs not shown" in out) is (not show_all)
    assert "* v=14" in out                     # the fastest


def test_piped_output_is_neither_wrapped_nor_cut():
    r = tune("topk", "--target", "gfx950", "--no-write", env=NO_COMPILERS)
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[0]
    assert first.startswith("tune topk --target gfx950: ") and first.rstrip().endswith("analytic (no GPU timing)")
    assert any(len(ln) > 100 for ln in r.stdout.splitlines())
    assert "…" not in r.stdout


def test_report_writes_into_a_folder_named_after_the_input(tmp_path, capsys, monkeypatch):
    src = tmp_path / "results" / "gfx950" / "topk.yaml"
    src.parent.mkdir(parents=True)
    shutil.copy(REPO / "results" / "gfx950" / "topk.yaml", src)
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(capsys, "report", "results/gfx950/topk.yaml")
    assert code == 0, err
    assert sorted(p.name for p in src.parent.iterdir()) == ["topk.yaml"]       # nothing beside the results
    folder = tmp_path / "occtune-reports" / "gfx950.topk"
    assert sorted(p.name for p in folder.iterdir()) == ["gfx950.topk.occupancy.png", "gfx950.topk.report.html"]
    assert "in occtune-reports/gfx950.topk" in out


def test_report_shows_the_top_10_configs_and_all_with_all(tmp_path, capsys):
    from occtune.engine.select import select
    from occtune.engine.sweep import run_sweep
    from occtune.outputs.results import build_document, plain, write_results

    fam = FaultFamily(n=15)
    res = run_sweep(fam, timer=FakeTimer({key_of({"v": i}): 100 - 5 * i for i in range(15)}), progress=False,
                    cache=False)
    path = write_results(tmp_path / "res" / "cpu" / "fault.yaml", plain(build_document(res, select(res, fam), "cpu")))
    code, out, err = run_main(capsys, "report", path, "--out", tmp_path / "rep")
    assert code == 0, err
    assert len(_table_rows(out)) == 11 and "4 more configs not shown" in out
    code, out, err = run_main(capsys, "report", path, "--out", tmp_path / "rep", "--all")
    assert len(_table_rows(out)) == len(yaml.safe_load(path.read_text())["rows"]) == 30


# ----------------------------------------------------------------------------- family verbs


class _Captured(Exception):
    pass


@pytest.mark.parametrize("verb, args", [
    ("topk", ["--target", "sm_90", "--batch", "1", "--lengths", "8K", "--budgets", "32K,48K"]),
    ("rope", ["--target", "sm_90", "--variants", "flat", "--block-m", "8", "--num-warps", "1,2"]),
    ("fp8-gemm", ["--target", "sm_90", "--m", "1", "--shapes", "7168,2048", "--backends", "triton"]),
])
def test_family_verbs_time_through_the_pipeline(capsys, monkeypatch, verb, args):
    """On the target's own GPU each verb runs the pipeline's timed sweep with its family's plan
    (the GPU is faked: the sweep is captured, not run)."""
    import occtune.pipeline as pipeline
    from occtune.model.targets import load_target
    from occtune.pipeline import timed

    seen = {}

    def capture(family, **kw):
        seen.update(kw, family=family)
        raise _Captured

    monkeypatch.setattr(pipeline, "resolve_target", lambda name, what="": (load_target(name), True))
    monkeypatch.setattr(timed, "run_timed", capture)
    with pytest.raises(_Captured):
        from occtune.cli import cli

        cli.main(args=[verb, *args, "--json"], prog_name="tune", standalone_mode=False)
    assert seen["target"] == "sm_90" and seen["device"] == "cuda" and seen["output"].out_dir == "results"
    hooks, out = seen["hooks"], seen["output"]
    assert hooks.fits is not None and hooks.peak_gbps > 0
    if verb == "topk":
        assert seen["workloads"] == [{"B": 1, "L": 8192, "K": 2048}] and len(seen["configs"]) == 2
        assert hooks.annotate is not None and out.after_write is not None and len(out.columns) == 5
        assert hooks.fits({"lds_budget": 48 * 1024, "threads": 512, "bits": 12}) == (True, "")
        fam = seen["family"]            # admits by tie capacity (the uniform bound at 1M tokens)
        assert fam.admissible({"lds_budget": 32768, "threads": 512, "bits": 12}, {})[0]
        assert not fam.admissible({"lds_budget": 1024, "threads": 512, "bits": 8}, {})[0]
    elif verb == "rope":
        assert len(seen["configs"]) == 2 and hooks.annotate is not None and len(out.columns) == 2
    else:
        assert out.after_write is not None and out.assumptions["fp8"] == "float8_e4m3fn"


def test_topk_timed_plan_writes_the_header_beside_the_results(tmp_path):
    from occtune.engine.family import View
    from occtune.kernels.topk.family import TopkFamily
    from occtune.model.targets import load_target

    plan = TopkFamily().timed_plan(load_target("sm_90"), View())
    doc = load_results(REPO / "results" / "sm_90" / "topk.yaml")
    wrote = plan.after_write(tmp_path / "sm_90" / "topk.yaml", doc)
    header = (tmp_path / "sm_90" / "topk.h").read_text()
    assert wrote == {"header_file": str(tmp_path / "sm_90" / "topk.h")}
    assert f"SGL_TOPK_DYNAMIC_SMEM_BYTES {doc['winner']['config']['lds_budget']}" in header


@pytest.mark.parametrize("verb", [["sweep"], ["rope"], ["topk"], ["fp8-gemm"], ["report"]])
def test_every_verb_that_prints_tables_takes_all(verb):
    from occtune.cli import cli

    command = cli.get_command(None, verb[0])
    assert "show_all" in [p.name for p in command.params] and any("--all" in p.opts for p in command.params)
