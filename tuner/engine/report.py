"""``tune report``: read results files (timed or analytic), draw PNG plots beside them.

Plots (matplotlib, Agg backend): time vs each swept parameter per workload; speed-up heatmap
(configs x workloads, against the baseline); occupancy (``blocks_per_cu``) vs budget when rows
carry it (the lead's analytic results: ``lds_budget_bytes``, ``blocks_per_cu``, no timings).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from occtune.engine.family import key_of
from occtune.errors import UserError


def _is_results(doc) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("rows"), list) and "family" in doc


def load_results(paths) -> list[tuple[Path, dict]]:
    """Explicit files must be results; folders are searched for *.yaml results (others skipped)."""
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            for f in sorted(list(p.rglob("*.yaml")) + list(p.rglob("*.yml"))):
                doc = _read(f, strict=False)
                if _is_results(doc):
                    out.append((f, doc))
        elif p.exists():
            doc = _read(p, strict=True)
            if not _is_results(doc):
                raise UserError(f"{p} is not an occtune results file (no 'family' and 'rows'); pass a results YAML")
            out.append((p, doc))
        else:
            raise UserError(f"{p} does not exist; pass results files or folders (e.g. results/)")
    if not out:
        raise UserError("no results files found; run a sweep first or pass results/<target>/<family>.yaml")
    return out


def _read(path: Path, strict: bool):
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        if strict:
            raise UserError(f"cannot read {path}: {str(e).splitlines()[0]}") from None
        return None


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _axes(doc) -> dict:
    axes = (doc.get("grid") or {}).get("axes") or {}
    if axes:
        return axes
    vals: dict = {}
    for r in doc["rows"]:
        for k, v in (r.get("config") or {}).items():
            vals.setdefault(k, []).append(v) if v not in vals.get(k, []) else None
    return vals


def _timed_rows(doc):
    return [r for r in doc["rows"] if r.get("status") == "ok" and r.get("median_us") is not None]


def plot_time_vs_param(doc, out_dir: Path, stem: str) -> list[Path]:
    rows, files = _timed_rows(doc), []
    workloads = list({key_of(r["workload"]): r["workload"] for r in rows}.values())
    for axis, values in _axes(doc).items():
        if len(values) < 2 or not rows:
            continue
        plt = _plt()
        fig, subs = plt.subplots(1, len(workloads), figsize=(4 * len(workloads), 3.4), squeeze=False)
        for ax, w in zip(subs[0], workloads):
            lines: dict = {}
            for r in rows:
                if r["workload"] == w and axis in r["config"]:
                    rest = {k: v for k, v in r["config"].items() if k != axis}
                    lines.setdefault(key_of(rest), []).append((values.index(r["config"][axis])
                                                              if r["config"][axis] in values else 0, r["median_us"]))
            for label, pts in lines.items():
                pts.sort()
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label[:40])
            ax.set_xticks(range(len(values)), [str(v) for v in values])
            ax.set_title(" ".join(f"{k}={v}" for k, v in w.items())[:50], fontsize=9)
            ax.set_xlabel(axis)
            ax.set_ylabel("median us")
        subs[0][0].legend(fontsize=6)
        fig.tight_layout()
        files.append(_save(fig, out_dir / f"{stem}.time_vs_{axis}.png"))
    return files


def plot_speedup_heatmap(doc, out_dir: Path, stem: str) -> list[Path]:
    rows = [r for r in _timed_rows(doc) if r.get("speedup") is not None]
    if not rows:
        return []
    cfgs = list({key_of(r["config"]): r["config"] for r in rows})
    wls = list({key_of(r["workload"]): r["workload"] for r in rows})
    grid = [[float("nan")] * len(wls) for _ in cfgs]
    for r in rows:
        grid[cfgs.index(key_of(r["config"]))][wls.index(key_of(r["workload"]))] = r["speedup"]
    plt = _plt()
    fig, ax = plt.subplots(figsize=(2 + 1.2 * len(wls), 1 + 0.35 * len(cfgs)))
    im = ax.imshow(grid, cmap="RdYlGn", aspect="auto")
    ax.set_xticks(range(len(wls)), [w[:30] for w in wls], rotation=30, ha="right", fontsize=7)
    ax.set_yticks(range(len(cfgs)), [c[:40] for c in cfgs], fontsize=7)
    for i, row in enumerate(grid):
        for j, v in enumerate(row):
            if v == v:
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6)
    fig.colorbar(im, ax=ax, label="speed-up vs baseline")
    fig.tight_layout()
    return [_save(fig, out_dir / f"{stem}.speedup.png")]


def plot_occupancy(doc, out_dir: Path, stem: str) -> list[Path]:
    rows = [r for r in doc["rows"] if r.get("blocks_per_cu") is not None]
    budget_key = next((k for k in ("lds_budget_bytes", "lds_budget", "budget") if any(k in r for r in rows)), None)
    if not rows or budget_key is None:
        return []
    pts = sorted({(int(r[budget_key]), r["blocks_per_cu"]) for r in rows if r.get(budget_key) is not None})
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 3.4))
    ax.step([p[0] / 1024 for p in pts], [p[1] for p in pts], where="post", marker="o")
    ax.set_xlabel(f"{budget_key} (KiB)")
    ax.set_ylabel("blocks per CU/SM")
    ax.set_title(f"{doc.get('family')} on {doc.get('target')}: occupancy vs budget", fontsize=9)
    fig.tight_layout()
    return [_save(fig, out_dir / f"{stem}.occupancy.png")]


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name("." + path.name + ".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)
    return path


def make_report(paths, out: str | None = None) -> list[dict]:
    """Plots for every results file; returns one summary dict per file."""
    summaries = []
    for path, doc in load_results(paths):
        out_dir = Path(out) if out else path.parent
        stem = path.stem
        files = plot_time_vs_param(doc, out_dir, stem) + plot_speedup_heatmap(doc, out_dir, stem) \
            + plot_occupancy(doc, out_dir, stem)
        counts: dict = {}
        for r in doc["rows"]:
            counts[r.get("status", "analytic")] = counts.get(r.get("status", "analytic"), 0) + 1
        summaries.append({"results": str(path), "family": doc.get("family"), "target": doc.get("target"),
                          "timed": bool(doc.get("timed")), "winner": (doc.get("winner") or {}).get("config"),
                          "explanation": (doc.get("winner") or {}).get("explanation"),
                          "rows": len(doc["rows"]), "counts": counts, "plots": [str(f) for f in files],
                          "doc": doc})
    return summaries
