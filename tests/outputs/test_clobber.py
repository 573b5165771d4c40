"""Results that cannot be clobbered (issue 15): analytic results never replace timed ones, and the
README's main job writes outside the tracked results/ tree."""

import shutil
import subprocess

import pytest

from clihelp import REPO, check_user_error, run_main
from occtune.errors import UserError
from occtune.outputs.results import load_results, write_results

TIMED = REPO / "results" / "sm_90" / "topk.yaml"          # the committed, GPU-timed results


@pytest.fixture
def timed_copy(tmp_path):
    dst = tmp_path / "res" / "sm_90" / "topk.yaml"
    dst.parent.mkdir(parents=True)
    shutil.copy(TIMED, dst)
    assert load_results(dst)["timed"] is True
    return dst


@pytest.mark.parametrize("verb", [["topk", "--target", "sm_90"],
                                  ["sweep", "topk", "--target", "sm_90", "--analytic", "--set", "bits=12"]])
def test_an_analytic_run_does_not_replace_timed_results(capsys, timed_copy, verb):
    before = timed_copy.read_bytes()
    check_user_error(run_main(capsys, *verb, "--out", timed_copy.parent.parent), "holds timed results",
                     "--force")
    assert timed_copy.read_bytes() == before
    code, _, err = run_main(capsys, *verb, "--out", timed_copy.parent.parent, "--force")
    assert code == 0, err
    assert load_results(timed_copy)["timed"] is False              # replaced, as asked


def test_the_writer_keeps_timed_results_and_lets_timed_replace_anything(timed_copy):
    doc = load_results(timed_copy)
    with pytest.raises(UserError, match="holds timed results"):
        write_results(timed_copy, {**doc, "timed": False})
    write_results(timed_copy, doc)                                  # new measurements replace old ones


def test_analytic_results_go_to_an_untracked_folder_by_default(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(capsys, "topk", "--target", "gfx950")
    assert code == 0, err
    assert "wrote occtune-results/gfx950/topk.yaml" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["occtune-results"]
    ignored = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", "occtune-results/gfx950/topk.yaml"])
    if (REPO / ".git").exists():
        assert ignored.returncode == 0          # the README's main job leaves a clean checkout
