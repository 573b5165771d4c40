"""``tune report``: PNG plots and one self-contained HTML page per input (timed, analytic,
benchmark CSV), and the occupancy cliff's dense sweep."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys

import pytest
import yaml

from clihelp import REPO
from doubles import FakeTimer, FaultFamily
from occtune.engine.family import key_of
from occtune.outputs.report import dense_steps, make_report
from occtune.outputs.results import build_document, plain
from occtune.engine.select import select
from occtune.engine.sweep import run_sweep
from occtune.outputs.results import write_results
from occtune.model.targets import load_target

PNG = b"\x89PNG"


def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "occtune", "report", *args], capture_output=True, text=True,
                          timeout=120, cwd=cwd)


def _images(html: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", html)]


@pytest.fixture
def timed(tmp_path):
    fam = FaultFamily(n=3)
    res = run_sweep(fam, timer=FakeTimer({key_of({"v": 1}): 50}), progress=False, cache=False)
    return write_results(tmp_path / "res" / "fault.yaml", plain(build_document(res, select(res, fam), "cpu")))


def test_report_timed_results_tables_plots_and_page(timed, tmp_path):
    p = run_cli(str(timed), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "wins" in p.stdout and "speed-up" in p.stdout
    d = tmp_path / "occtune-reports" / "res.fault"       # named after the input, not beside it
    for name in ("res.fault.time.png", "res.fault.speedup.png"):
        assert (d / name).read_bytes()[:4] == PNG
    html = (d / "res.fault.report.html").read_text()
    assert [i[:4] for i in _images(html)] == [PNG, PNG]           # both plots embedded, nothing linked
    assert "<script" not in html and "http" not in html.replace("http-equiv", "")
    assert "Per workload" in html and "N=8" in html and "Winner" in html


def test_committed_results_and_a_benchmark_csv(tmp_path):
    """The committed H200 top-k results (timed), the gfx950 analytic sweep and a benchmark CSV."""
    inputs = [REPO / "results/sm_90/topk.yaml", REPO / "results/gfx950/topk.yaml",
              REPO / "results/sm_90/topk_serve_bench.csv"]
    out = {s["results"]: s for s in make_report([str(p) for p in inputs], str(tmp_path))}
    timed, analytic, bench = (out[str(p)] for p in inputs)
    assert [p.rsplit(".", 2)[-2] for p in timed["plots"]] == ["occupancy", "time", "speedup"]
    assert [p.rsplit(".", 2)[-2] for p in analytic["plots"]] == ["occupancy"]
    assert [p.rsplit(".", 2)[-2] for p in bench["plots"]] == ["time", "speedup"] and bench["kind"] == "benchmark"
    for s in out.values():
        assert all(open(p, "rb").read(4) == PNG for p in s["plots"])
        html = open(s["html"]).read()
        assert len(_images(html)) == len(s["plots"]) and html.count("<figcaption>") == len(s["plots"])
    page = open(timed["html"]).read()
    win = yaml.safe_load((REPO / "results/sm_90/topk.yaml").read_text())["winner"]["config"]
    line = page[page.index("Winner: <b>"):].split("</b>")[0]
    assert all(f"{k}={v}" in line for k, v in (("bits", win["bits"]), ("lds_budget", f"{win['lds_budget'] // 1024}K"),
                                                ("threads", win["threads"])))
    assert "NVIDIA H200" in page
    import html as _html

    doc = yaml.safe_load((REPO / "results/sm_90/topk.yaml").read_text())
    for e in doc.get("excluded") or []:                              # every excluded config, with its reason
        assert _html.escape(e["reason"][:40]) in page
    assert "torch (baseline)" in open(bench["html"]).read()           # the CSV's torch_us column


def test_the_cliff_is_exact_at_every_granularity_step():
    """gfx950, 512 threads, 7 KiB static LDS (the analytic top-k sweep): 4 -> 3 -> 2 -> 1 blocks/CU,
    the last cliff above 73 KiB (73 KiB + 7 KiB = 80 KiB = half the CU's 160 KiB)."""
    target = load_target("gfx950")
    fixed = {"threads": 512, "static_lds_bytes": 7168, "regs": 0, "vgprs": 0, "agprs": 0, "sgprs": 0}
    steps, edges = dense_steps(target, fixed)
    assert [(n, m) for _, n, m in edges] == [(4, 3), (3, 2), (2, 1)]
    assert edges[-1][0] == 73 * 1024
    xs = [x for x, _ in steps]
    assert set(range(0, 150 * 1024, 1280)) <= set(xs)                # every allocation step is sampled
    assert all(isinstance(b, int) for _, b in steps)


def test_report_json_and_out_dir_names(tmp_path):
    p = run_cli(str(REPO / "results/gfx950/topk.yaml"), "--out", str(tmp_path / "plots"), "--json")
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)["reports"][0]
    assert rep["kind"] == "analytic" and rep["plots"] == [str(tmp_path / "plots" / "gfx950.topk.occupancy.png")]
    assert rep["html"] == str(tmp_path / "plots" / "gfx950.topk.report.html")


def test_report_errors_are_one_line(tmp_path):
    bad = tmp_path / "x.yaml"
    bad.write_text("a: 1\n")
    csv = tmp_path / "mystery_bench.csv"
    csv.write_text("a,median_us\n1,2\n")
    for args in ([str(bad)], [str(tmp_path / "missing.yaml")], [str(csv)]):
        p = run_cli(*args)
        assert p.returncode == 2 and p.stderr.startswith("error: ") and "Traceback" not in p.stderr
