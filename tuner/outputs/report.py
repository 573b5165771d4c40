"""``tune report``: results files (timed or analytic) and benchmark CSVs, read at a glance.

For each input it writes, into ``--out`` or else into ``occtune-reports/<the input's name>/`` of the
current folder (:func:`default_folder`; never beside committed results), files named
``<folder>.<stem>.*`` (``gfx950.topk.occupancy.png``):

- ``<stem>.occupancy.png`` (rows with an LDS budget and known resources): resident blocks per
  CU/SM against the dynamic LDS budget from a dense analytic sweep (every allocation-granularity
  step of the target, cliffs located exactly), drawn as integer steps; the sampled budgets marked,
  excluded ones crossed, the winner starred, every cliff labelled.
- ``<stem>.time.png`` (timed rows): median time in us against the swept parameter, one panel per
  workload in a grid, interquartile-range error bars, the winner starred, each workload's winner
  ringed, the baseline a dashed line with its time.
- ``<stem>.speedup.png``: speed-up over the baseline, configs x workloads plus the geometric mean,
  winner and baseline named.
- ``<stem>.report.html``: one self-contained page (plots as base64 PNG; summary, per-workload
  winners, excluded configs, every row, provenance) to open or attach to a pull request.

A benchmark CSV (``results/sm_90/*_bench*.csv``) is read as timed rows: its family from the file
name, workload columns from the family's workloads, config columns from the family's axes (a
suffix matches: ``budget`` is ``lds_budget``); rows a ``role`` column marks ``baseline`` are the
baseline, else a ``<name>_us`` column (``torch_us``) is an external one; ``iqr_us`` gives
error bars centred on the median.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from occtune.engine.family import key_of
from occtune.errors import UserError
from occtune.outputs.results import load_results

# CSV columns that are measurements or provenance, never config (besides median_us / iqr_us).
_NOT_CONFIG = {"median_us", "iqr_us", "gbps", "pct_floor", "floor_us", "x_floor", "pct_of_floor_speed",
               "host_us", "overflow_rows", "verified", "verify_note", "error", "copy_gbps", "copy_tbps",
               "gpu", "device", "arch", "driver", "runtime", "torch", "triton", "cuda", "hip", "python", "git", "date",
               "role"}


@dataclass
class Timings:
    """What the time plot and the speed-up heatmap need, from a timed document."""

    axes: dict[str, list]                  # axes that vary, values in sweep order
    rows: list[dict]                       # rows with a median, in file order
    workloads: list[dict]
    dims: list[str]                        # workload dimensions that vary
    baseline: dict | None                  # the baseline config (one of the swept configs)
    reference: dict                        # key_of(workload) -> the baseline's row there
    reference_name: str
    winner: dict | None
    per_workload: dict                     # key_of(workload) -> the winning config there
    winner_label: str                      # "winner" or "fastest" (benchmarks pick none)
    excluded: dict = field(default_factory=dict)   # key_of(config) -> reason


@dataclass
class Source:
    path: Path
    doc: dict
    kind: str                              # "timed", "analytic" or "benchmark"
    origin: Path | None = None             # the input it was found under (the file itself, or a folder)

    @property
    def title(self) -> str:
        device = (self.doc.get("provenance") or {}).get("device")
        how = {"timed": f"timed on {device}", "benchmark": f"benchmark on {device}",
               "analytic": "analytic (occupancy model, no GPU)"}[self.kind]
        return f"{self.doc.get('family')} on {self.doc.get('target') or 'unknown target'}: {how}"


# --- reading ------------------------------------------------------------------------------------
def load_sources(paths) -> list[Source]:
    """Explicit files must be results YAML or benchmark CSV; folders are searched for both
    (other files skipped)."""
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            for f in sorted([*p.rglob("*.yaml"), *p.rglob("*.yml"), *p.rglob("*.csv")]):
                try:
                    out.append(_read(f, p))
                except UserError:
                    continue
        elif p.exists():
            out.append(_read(p, p))
        else:
            raise UserError(f"{p} does not exist; pass results files, benchmark CSVs or folders (e.g. results/)")
    if not out:
        raise UserError("no results files found; run a sweep first or pass results/<target>/<family>.yaml")
    return out


def _read(path: Path, origin: Path) -> Source:
    if path.suffix == ".csv":
        return Source(path, read_benchmark_csv(path), "benchmark", origin)
    doc = load_results(path)
    return Source(path, doc, "timed" if doc.get("timed") else "analytic", origin)


def _cell(text: str):
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def read_benchmark_csv(path: Path) -> dict:
    """A benchmark CSV as a timed results document (see the module docstring)."""
    from occtune.engine.registry import families, get_family

    family = next((n for n in sorted(families(), key=len, reverse=True) if path.stem.startswith(n)), None)
    if family is None:
        raise UserError(f"{path}: cannot tell which kernel family this CSV measures (its name should start "
                        f"with one of {', '.join(sorted(families()))})")
    try:
        with open(path, newline="", encoding="utf-8") as f:
            table = [{k: _cell(v or "") for k, v in r.items()} for r in csv.DictReader(f)]
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise UserError(f"cannot read {path}: {e}") from None
    fam = get_family(family)
    cols = list(table[0]) if table else []
    if "median_us" not in cols:
        raise UserError(f"{path}: no median_us column; is this a benchmark CSV?")
    wdims = [c for c in fam.workloads()[0] if c in cols]
    rename = {c: a for a in fam.axes() for c in cols if c == a or a.endswith("_" + c)}
    rows = [_csv_row(r, wdims, rename) for r in table]
    _disambiguate(rows, table, [c for c in cols if c not in rename and c not in wdims
                                and c.lower() not in _NOT_CONFIG and not c.endswith("_us")
                                and not c.startswith(("speedup", "pct_"))])
    first = table[0] if table else {}
    return {"family": family, "target": path.parent.name if _is_target(path.parent.name) else None,
            "timed": True, "winner": None, "rows": rows,
            "grid": {"axes": {a: [] for a in fam.axes()}, "baseline": _csv_baseline(rows, table)},
            "reference": _csv_reference(table, cols, wdims),
            "provenance": {"device": first.get("device") or first.get("gpu"), "date": first.get("date"),
                           "git_revision": first.get("git"), "torch": first.get("torch"),
                           "triton": first.get("triton"), "source": str(path)}}


def _is_target(name: str) -> bool:
    from occtune.model.targets import all_targets

    return name in all_targets()


def _csv_row(r: dict, wdims: list[str], rename: dict) -> dict:
    med, iqr = r.get("median_us"), r.get("iqr_us")
    status = "failed" if r.get("error") else ("wrong" if r.get("verified") is False else "ok")
    out = {"config": {rename[c]: v for c, v in r.items() if c in rename and v is not None},
           "workload": {d: r[d] for d in wdims}, "status": status, "median_us": med}
    if isinstance(med, (int, float)) and isinstance(iqr, (int, float)):
        out.update(q1_us=med - iqr / 2, q3_us=med + iqr / 2, iqr_us=iqr)
    if r.get("error"):
        out["reason"] = str(r["error"])
    return out


def _disambiguate(rows: list[dict], table: list[dict], candidates: list[str]) -> None:
    """Rows measured twice at one (config, workload) (a forced split next to the automatic one)
    keep apart by the columns that differ between them."""
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault(key_of({"c": r["config"], "w": r["workload"]}), []).append(i)
    for idx in (g for g in groups.values() if len(g) > 1):
        differ = [c for c in candidates if len({key_of({"v": table[i].get(c)}) for i in idx}) > 1]
        for i in idx:
            rows[i]["config"].update({c: table[i].get(c) for c in differ})


def _csv_baseline(rows: list[dict], table: list[dict]) -> dict | None:
    marked = [r["config"] for r, t in zip(rows, table) if "baseline" in str(t.get("role") or "").split(",")]
    return marked[0] if marked else None


def _csv_reference(table: list[dict], cols: list[str], wdims: list[str]) -> dict | None:
    """An external baseline column (``torch_us`` with ``torch_iqr_us``): {name, rows}."""
    name = next((c[:-3] for c in cols if c.endswith("_us") and f"{c[:-3]}_iqr_us" in cols
                 and c not in ("median_us", "iqr_us")), None)
    if name is None:
        return None
    seen = {}
    for r in table:
        if isinstance(r.get(f"{name}_us"), (int, float)):
            med, iqr = r[f"{name}_us"], r.get(f"{name}_iqr_us") or 0
            seen.setdefault(key_of({d: r[d] for d in wdims}), {
                "workload": {d: r[d] for d in wdims}, "median_us": med, "q1_us": med - iqr / 2,
                "q3_us": med + iqr / 2})
    return {"name": name, "rows": list(seen.values())}


# --- what the time plots show -------------------------------------------------------------------
def _unique(items: list[dict]) -> list[dict]:
    """Distinct mappings in order of first appearance."""
    return list({key_of(i): i for i in items}.values())


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _axes(configs: list[dict], grid_axes: dict) -> dict[str, list]:
    names = list(dict.fromkeys([*grid_axes, *(k for c in configs for k in c)]))
    out = {}
    for n in names:
        vals = []
        for c in configs:
            if n in c and c[n] not in vals:
                vals.append(c[n])
        order = list(grid_axes.get(n) or [])
        vals.sort(key=lambda v: (order.index(v) if v in order else len(order),
                                 v if all(_is_num(x) for x in vals) else 0))
        if len(vals) > 1:
            out[n] = vals
    return out


def timings(src: Source) -> Timings | None:
    doc = src.doc
    rows = [r for r in doc.get("rows", []) if r.get("median_us") is not None and isinstance(r.get("workload"), dict)
            and isinstance(r.get("config"), dict)]
    if not rows:
        return None
    configs, workloads = _unique([r["config"] for r in rows]), _unique([r["workload"] for r in rows])
    dims = [d for d in workloads[0] if len({key_of({"v": w.get(d)}) for w in workloads}) > 1]
    grid = doc.get("grid") or {}
    ok = [r for r in rows if r.get("status", "ok") == "ok"]
    baseline, ref, ref_name = grid.get("baseline"), {}, ""
    if baseline is not None and any(r["config"] == baseline for r in ok):
        ref = {key_of(r["workload"]): r for r in ok if r["config"] == baseline}
        ref_name = "baseline " + config_label(baseline)
    else:
        baseline = None
        if doc.get("reference"):
            ref = {key_of(r["workload"]): r for r in doc["reference"]["rows"]}
            ref_name = doc["reference"]["name"] + " (baseline)"
    per = {key_of(p["workload"]): p["winner"] for p in doc.get("per_workload") or []}
    label = "this workload's winner"
    if not per:
        label = "fastest"
        for w in workloads:
            best = min((r for r in ok if r["workload"] == w), key=lambda r: r["median_us"], default=None)
            if best is not None:
                per[key_of(w)] = best["config"]
    return Timings(_axes(configs, grid.get("axes") or {}), ok, workloads, dims, baseline, ref, ref_name,
                   (doc.get("winner") or {}).get("config"), per, label,
                   {key_of(e["config"]): e["reason"] for e in doc.get("excluded") or []})


# --- labels -------------------------------------------------------------------------------------
def value_label(key: str, v) -> str:
    """48K for byte counts (budgets), 128K / 1M for long rows; plain otherwise."""
    if _is_num(v) and isinstance(v, int) and v >= 1024 and v % 1024 == 0:
        if any(s in key.lower() for s in ("budget", "lds", "smem", "bytes")) or v >= 65536:
            return f"{v // 1048576}M" if v % 1048576 == 0 else f"{v // 1024}K"
    return str(v)


def config_label(config: dict, keys: list[str] | None = None) -> str:
    keys = keys if keys is not None else list(config)
    return " ".join(f"{k}={value_label(k, config[k])}" for k in keys if k in config) or "(default)"


def workload_label(workload: dict, dims: list[str]) -> str:
    return " ".join(f"{d}={value_label(d, workload[d])}" for d in dims) or "every workload"


# --- what the occupancy cliff shows -------------------------------------------------------------
@dataclass
class CliffSeries:
    label: str                                   # the resources that stay fixed
    steps: list[tuple[int, int]]                 # (dynamic LDS bytes, blocks per CU/SM), dense
    edges: list[tuple[int, int, int]]            # (largest budget with n blocks, n, the next count)
    sampled: list[dict]                          # {budget, blocks, winner, excluded}


_RES = ("threads", "static_lds_bytes", "regs", "vgprs", "agprs", "sgprs")


def _resources(row: dict) -> dict | None:
    res = row.get("resources") or {}
    # the dynamic LDS of the config (lds_budget_bytes: the name in older top-k files)
    budget = row.get("dynamic_lds_bytes", row.get("lds_budget_bytes", res.get("dynamic_lds")))
    threads = row.get("threads") or res.get("threads") or (row.get("config") or {}).get("threads")
    if budget is None or not threads:
        return None
    fixed = {"threads": int(threads), "static_lds_bytes": int(row.get("static_lds_bytes", res.get("static_lds")) or 0)}
    fixed.update({k: int(row.get(k) or res.get(k) or 0) for k in _RES[2:]})
    return {"budget": int(budget), "fixed": fixed}


def _blocks(target, fixed: dict, dynamic: int) -> int:
    from occtune.model.occupancy import Resources, occupancy

    occ = occupancy(target, Resources(threads=fixed["threads"], static_lds=fixed["static_lds_bytes"],
                                            dynamic_lds=dynamic, regs=fixed["regs"], vgprs=fixed["vgprs"],
                                            agprs=fixed["agprs"], sgprs=fixed["sgprs"]))
    return occ.blocks_per_cu if occ.fits else 0


def dense_steps(target, fixed: dict) -> tuple[list[tuple[int, int]], list[tuple[int, int, int]]]:
    """Blocks per CU/SM at every allocation-granularity step of the dynamic LDS budget, and the
    exact cliffs: the largest budget that still gives n blocks (bisected between steps)."""
    gran = target.lds_alloc_granularity if target.is_amd else target.shared_alloc_unit
    top = (target.max_lds_per_workgroup if target.is_amd else target.max_shared_per_block_optin) \
        - fixed["static_lds_bytes"]
    xs = list(range(0, max(top, 0) + 1, gran))
    steps = [(x, _blocks(target, fixed, x)) for x in xs]
    edges = []
    for (x0, b0), (x1, b1) in zip(steps, steps[1:]):
        if b0 != b1:
            lo, hi = x0, x1                           # blocks(lo) == b0, blocks(hi) != b0
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if _blocks(target, fixed, mid) == b0 else (lo, mid)
            edges.append((lo, b0, b1))
    exact = {(lo, b0) for lo, b0, _ in edges} | {(lo + 1, b1) for lo, _, b1 in edges}
    return sorted(set(steps) | exact), edges


def cliff(src: Source):
    """(target, [CliffSeries]) of rows that sweep an LDS budget at fixed other resources."""
    from occtune.model.targets import all_targets

    target = all_targets().get(src.doc.get("target") or "")
    if target is None:
        return None
    win = (src.doc.get("winner") or {}).get("config")
    excluded = {key_of(e["config"]): e["reason"] for e in src.doc.get("excluded") or []}
    groups: dict[str, dict] = {}
    for row in src.doc.get("rows", []):
        res = _resources(row)
        if res is None:
            continue
        g = groups.setdefault(key_of(res["fixed"]), {"fixed": res["fixed"], "rows": {}})
        g["rows"].setdefault(res["budget"], row)
    out = []
    for g in groups.values():
        if len(g["rows"]) < 2:
            continue
        steps, edges = dense_steps(target, g["fixed"])
        sampled = [{"budget": b, "blocks": _blocks(target, g["fixed"], b), "winner": r.get("config") == win,
                    "excluded": _excluded_why(r, excluded)} for b, r in sorted(g["rows"].items())]
        out.append(CliffSeries(_fixed_label(g["fixed"], target), steps, edges, sampled))
    return (target, out) if out else None


def _excluded_why(row: dict, excluded: dict) -> str:
    if not row.get("fits", True):
        return row.get("reason") or "does not fit"
    if row.get("covers_context") is False:
        return "does not cover the required context"
    return excluded.get(key_of(row.get("config") or {}), "")


def _fixed_label(fixed: dict, target) -> str:
    regs = (f", {fixed['vgprs']} VGPRs" if fixed["vgprs"] else "") if target.is_amd else \
        (f", {fixed['regs']} regs/thread" if fixed["regs"] else "")
    return f"{fixed['threads']} threads, {fixed['static_lds_bytes']:,} B static LDS{regs}"


# --- one report per input -----------------------------------------------------------------------
REPORTS_DIR = "occtune-reports"        # .gitignore names it, as it does occtune-results/


def default_folder(origin: Path) -> Path:
    """Where the report of an input goes without ``--out``: ``occtune-reports/<name>/`` in the
    current folder, named after the input (``results/`` -> ``results``, ``results/gfx950/topk.yaml``
    -> ``gfx950.topk``), so a report never lands beside the results it reads."""
    name = origin.resolve().name if origin.is_dir() else f"{origin.resolve().parent.name}.{origin.stem}"
    return Path(REPORTS_DIR) / (name or "root")


def make_report(paths, out: str | None = None) -> list[dict]:
    """Plots and an HTML page for every input; returns one summary per input."""
    from occtune.outputs import plots, report_html
    from occtune.fsutil import atomic_write_text

    summaries = []
    for src in load_sources(paths):
        out_dir = Path(out) if out else default_folder(src.origin or src.path)
        stem = f"{src.path.parent.name}.{src.path.stem}"
        figs = []
        c = cliff(src)
        if c is not None:
            figs.append(plots.plot_cliff(c[0], c[1], src.title, out_dir / f"{stem}.occupancy.png"))
        t = timings(src)
        if t is not None:
            figs += [f for f in (plots.plot_times(t, src.title, out_dir / f"{stem}.time.png"),
                                 plots.plot_speedup(t, src.title, out_dir / f"{stem}.speedup.png")) if f]
        html = atomic_write_text(out_dir / f"{stem}.report.html", report_html.render(src, t, figs))
        counts: dict = {}
        for r in src.doc["rows"]:
            counts[r.get("status", "analytic")] = counts.get(r.get("status", "analytic"), 0) + 1
        win = src.doc.get("winner") or {}
        summaries.append({"results": str(src.path), "family": src.doc.get("family"), "target": src.doc.get("target"),
                          "kind": src.kind, "timed": src.kind != "analytic", "winner": win.get("config"),
                          "explanation": win.get("explanation"), "rows": len(src.doc["rows"]), "counts": counts,
                          "plots": [str(p) for p, _ in figs], "captions": [c for _, c in figs], "html": str(html),
                          "doc": src.doc})
    return summaries
