"""occtune.outputs.tuned: the per-workload tuned config that the families' entry points use."""

import pytest
import torch
import yaml

from occtune.outputs import tuned
from occtune.errors import UserError
from occtune.kernels import topk as tk
from occtune.kernels.topk import runtime as rt
from occtune.kernels.rope import default_config, tuned_config as rope_tuned

from clihelp import REPO


def _results(tmp_path, family, doc, target="sm_90"):
    (tmp_path / target).mkdir(parents=True, exist_ok=True)
    (tmp_path / target / f"{family}.yaml").write_text(yaml.safe_dump(doc))


def test_rope_picks_the_nearest_tuned_T(tmp_path, monkeypatch):
    monkeypatch.setenv("OCCTUNE_RESULTS", str(tmp_path))
    per = [{"workload": {"T": t, "H": 128}, "winner": {"variant": "flat", "BLOCK_M": bm, "num_warps": nw}}
           for t, bm, nw in ((1, 8, 4), (8192, 16, 2))]
    _results(tmp_path, "rope", {"winner": {"config": {"variant": "tile", "BLOCK_M": 32, "num_warps": 8}},
                                "per_workload": per})
    assert rope_tuned("sm_90", {"T": 3, "H": 32, "D": 64}) == {"variant": "flat", "BLOCK_M": 8, "num_warps": 4}
    assert rope_tuned("sm_90", {"T": 4096, "H": 128, "D": 64}) == {"variant": "flat", "BLOCK_M": 16, "num_warps": 2}
    assert rope_tuned("sm_90") == {"variant": "tile", "BLOCK_M": 32, "num_warps": 8}       # overall winner
    assert rope_tuned("gfx950", {"T": 4}) == default_config()                               # no results there
    monkeypatch.setenv("OCCTUNE_RESULTS", str(tmp_path / "empty"))                         # the override
    assert rope_tuned("sm_90", {"T": 3}) == default_config()


def test_committed_results_give_the_measured_per_T_winners(monkeypatch):
    monkeypatch.delenv("OCCTUNE_RESULTS", raising=False)
    doc = yaml.safe_load((REPO / "results/sm_90/rope.yaml").read_text())
    for p in doc["per_workload"]:
        assert rope_tuned("sm_90", {"T": p["workload"]["T"], "H": 128, "D": 64}) == p["winner"]


def test_topk_takes_the_tuned_config_of_its_workload(tmp_path, monkeypatch):
    """topk() with budget/threads/bits unset builds the tuned config of (B, L) on the scores'
    device; set arguments win; without results it builds the 128 KiB default."""
    monkeypatch.setenv("OCCTUNE_RESULTS", str(tmp_path))
    rt._tuned.cache_clear()
    per = [{"workload": {"B": b, "L": 131072, "K": 2048}, "winner": {"lds_budget": lds, "threads": 512, "bits": 8}}
           for b, lds in ((1, 40960), (256, 49152))]
    _results(tmp_path, "topk", {"winner": {"config": per[0]["winner"]}, "per_workload": per})
    monkeypatch.setattr(tuned, "_target_of", lambda device: "sm_90")
    monkeypatch.setattr(rt, "_check_args", lambda *a: None)
    built = []

    class Stop(Exception):
        pass

    def build(budget, threads, bits, dev):
        built.append((budget, threads, bits))
        raise Stop

    monkeypatch.setattr(rt, "build", build)
    for B, kw in ((2, {}), (200, {}), (200, {"lds_budget": 65536}), (200, {"bits": 12})):
        with pytest.raises(Stop):
            tk.topk(torch.zeros(B, 131072), 2048, **kw)
    assert built == [(40960, 512, 8), (49152, 512, 8), (65536, 512, 8), (49152, 512, 12)]
    monkeypatch.setattr(tuned, "_target_of", lambda device: None)          # a CPU tensor, no GPU
    rt._tuned.cache_clear()            # looked up once per workload in a process (no I/O per call)
    with pytest.raises(Stop):
        tk.topk(torch.zeros(2, 131072), 2048)
    assert built[-1] == (tk.DEFAULT_BUDGET, 512, 8)


@pytest.mark.parametrize("text", ["", "winner: 3\n", ": : [\n",
                                  "per_workload: [{workload: {B: 1}, winner: {lds_budget: 7}}]\n"])
def test_bad_results_are_reported_not_replaced_by_the_default(tmp_path, monkeypatch, text):
    monkeypatch.setenv("OCCTUNE_RESULTS", str(tmp_path))
    (tmp_path / "sm_90").mkdir()
    (tmp_path / "sm_90" / "topk.yaml").write_text(text)
    monkeypatch.setattr(tuned, "_target_of", lambda device: "sm_90")
    rt._tuned.cache_clear()
    with pytest.raises(UserError, match="topk.yaml"):
        rt._tuned(1, 8192, 2048, "cuda")
