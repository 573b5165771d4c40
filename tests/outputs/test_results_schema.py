"""One results schema (occtune.results/2) for analytic and timed files; /1 files still read."""

from pathlib import Path

import pytest
import yaml

from clihelp import REPO
from occtune.errors import UserError
from occtune.outputs.results import SCHEMA, load_results, tidy, write_results

V1 = {
    "schema": "occtune.results/1", "family": "topk", "target": "sm_90", "timed": True,
    "winner": {"config": {"lds_budget": 49152}, "why": "fastest", "geomean_speedup": 1.116600012},
    "per_workload": [{"workload": {"B": 1}, "winner": {"lds_budget": 49152}, "median_us": 15.39199985563755}],
    "excluded": {'{"lds_budget":32768}': "not admissible: too small"},
    "rows": [{"config": {"lds_budget": 49152}, "workload": {"B": 1}, "median_us": 15.392, "iqr_us": 0.64}],
    "provenance": {"device_name": "NVIDIA H200", "date": "2026-11-29"},
}


def test_a_v1_file_is_read_in_the_v2_schema(tmp_path):
    f = tmp_path / "topk.yaml"
    f.write_text(yaml.safe_dump(V1))
    doc = load_results(f)
    assert doc["schema"] == SCHEMA
    assert doc["winner"]["explanation"] == "fastest" and "why" not in doc["winner"]
    assert doc["provenance"]["device"] == "NVIDIA H200" and "device_name" not in doc["provenance"]
    assert doc["excluded"] == [{"config": {"lds_budget": 32768}, "reason": "not admissible: too small"}]
    assert doc["per_workload"][0]["median_us"] == 15.392
    assert doc["winner"]["geomean_speedup"] == 1.1166
    write_results(f, doc)                                  # the converter: read, then the one writer
    assert yaml.safe_load(f.read_text()) == doc


def test_floats_are_rounded_to_what_was_measured():
    assert tidy({"median_us": 374.2400109767914, "q1_us": 1.0004999, "rel_l2": 0.0016741156400524192,
                 "n": 3, "peak": 4.8e12, "name": "x", "nan": float("inf")}) == \
        {"median_us": 374.24, "q1_us": 1.0, "rel_l2": 0.00167412, "n": 3, "peak": 4.8e12, "name": "x",
         "nan": float("inf")}


@pytest.mark.parametrize("path", sorted(str(p.relative_to(REPO)) for p in (REPO / "results").glob("*/*.yaml")))
def test_committed_results_share_one_schema(path):
    raw = yaml.safe_load((REPO / path).read_text())
    assert raw["schema"] == SCHEMA, f"{path}: run tools/upgrade_results.py {path}"
    doc = load_results(REPO / path)
    assert "explanation" in doc["winner"] and "why" not in doc["winner"]
    assert "device" in doc["provenance"] and "device_name" not in doc["provenance"]
    assert doc["provenance"]["target"] == doc["target"]
    assert isinstance(doc.get("excluded", []), list)
    assert tidy(raw) == raw                                 # written by the one writer: nothing to round


def test_an_unknown_schema_is_a_user_error(tmp_path):
    f = Path(tmp_path) / "x.yaml"
    f.write_text(yaml.safe_dump({**V1, "schema": "occtune.results/9"}))
    with pytest.raises(UserError, match="occtune.results/2 and occtune.results/1"):
        load_results(f)
