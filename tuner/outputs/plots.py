"""The report's figures (matplotlib, Agg): the occupancy cliff, time per workload, speed-up.

Each function draws one PNG and returns (path, caption): the caption says what the figure shows
and goes under it in the HTML page. See :mod:`occtune.outputs.report` for what is plotted.
"""

from __future__ import annotations

import contextlib
import math
import textwrap
from pathlib import Path

from occtune.engine.family import key_of
from occtune.errors import UserError
from occtune.outputs.report import CliffSeries, Timings, config_label, value_label, workload_label

WINNER = dict(marker="*", markersize=17, color="gold", markeredgecolor="black", linestyle="none", zorder=6)
RING = dict(marker="o", markersize=14, markerfacecolor="none", markeredgecolor="crimson", markeredgewidth=2,
            linestyle="none", zorder=5)
EXCLUDED = dict(marker="x", markersize=9, color="dimgray", linestyle="none", zorder=5)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    plt = _plt()
    tmp = path.with_name("." + path.name + ".tmp.png")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(tmp, dpi=100, bbox_inches="tight")
        tmp.replace(path)
    except OSError as e:              # an unwritable --out: one line, no half-written PNG
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise UserError(f"cannot write {path}: {e.strerror or e}; choose a writable folder (--out)") from None
    finally:
        plt.close(fig)
    return path


def _wrap(text: str, width_in: float) -> str:
    return "\n".join(textwrap.wrap(text, max(40, int(width_in * 11))))


# --- occupancy cliff ----------------------------------------------------------------------------
def plot_cliff(target, series: list[CliffSeries], title: str, path: Path) -> tuple[Path, str]:
    from matplotlib.ticker import MaxNLocator

    plt = _plt()
    unit = "CU" if target.is_amd else "SM"
    fig, ax = plt.subplots(figsize=(9, 4.6))
    top = 0
    for i, s in enumerate(series):
        xs = [x / 1024 for x, _ in s.steps]
        ys = [b for _, b in s.steps]
        top = max(top, max(ys))
        line, = ax.step(xs, ys, where="post", lw=2, label=s.label)
        for last, n, nxt in s.edges:
            ax.axvline(last / 1024, color=line.get_color(), ls=":", lw=1)
            ax.annotate(f"{n}→{nxt} above {last / 1024:.2f} KiB", (last / 1024, (n + nxt) / 2),
                        xytext=(5, 12 * i), textcoords="offset points", fontsize=8, color=line.get_color())
        _mark_samples(ax, s, line.get_color())
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, top + 1)
    ax.set_xlim(0, None)
    ax.set_xlabel("dynamic LDS budget per block (KiB)")
    ax.set_ylabel(f"resident blocks per {unit}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    gran = target.lds_alloc_granularity if target.is_amd else target.shared_alloc_unit
    ax.set_title(_wrap(f"{title}: blocks per {unit} vs LDS budget (occupancy model at every {gran} B "
                       f"allocation step)", 9), fontsize=10)
    caption = (f"Resident blocks per {unit} on {target.name} as the dynamic LDS budget grows, from the occupancy "
               f"model at every {gran} B allocation step (integer steps; dotted lines at the exact cliffs). Dots: "
               f"the budgets the sweep sampled; crosses: sampled but excluded; star: the winner.")
    return _save(fig, path), caption


def _mark_samples(ax, s: CliffSeries, color) -> None:
    for p in s.sampled:
        x = p["budget"] / 1024
        if p["excluded"]:
            ax.plot([x], [p["blocks"]], **EXCLUDED)
            ax.annotate("excluded", (x, p["blocks"]), xytext=(4, -12), textcoords="offset points", fontsize=7,
                        color="dimgray")
        else:
            ax.plot([x], [p["blocks"]], marker="o", color=color, markersize=7, linestyle="none", zorder=4)
        ax.annotate(value_label("budget", p["budget"]), (x, p["blocks"]), xytext=(-6, 8),
                    textcoords="offset points", fontsize=7)
        if p["winner"]:
            ax.plot([x], [p["blocks"]], **WINNER, label="winner")


# --- time per workload --------------------------------------------------------------------------
def _primary(t: Timings) -> str | None:
    """The x axis: of the axes every config has, the numeric one with the most values (else the
    longest); axes only some configs have (a forced split beside the automatic one) come last."""
    if not t.axes:
        return None

    def rank(a):
        cover = sum(a in r["config"] for r in t.rows)
        return cover, all(isinstance(v, (int, float)) for v in t.axes[a]), len(t.axes[a])

    return max(t.axes, key=rank)


def _time_text(v: float) -> str:
    return f"{v:,.0f} µs" if v >= 100 else f"{v:.3g} µs"


def _lines(t: Timings, x: str, rows: list[dict]) -> tuple[dict, list[str], list[str]]:
    """{line label: {x value: best row}}; the axes kept as lines and those collapsed to the best."""
    others = [a for a in t.axes if a != x]
    combos = {key_of({a: r["config"].get(a) for a in others}) for r in rows}
    keep = others
    if len(combos) > 8:                   # too many lines: one per categorical axis value, best of the rest
        cat = [a for a in others if not all(isinstance(v, (int, float)) for v in t.axes[a])]
        keep = cat[:1]
    lines: dict[str, dict] = {}
    for r in rows:
        if x not in r["config"]:
            continue
        label = config_label(r["config"], keep) if keep else "median time"
        cur = lines.setdefault(label, {}).get(r["config"][x])
        if cur is None or r["median_us"] < cur["median_us"]:
            lines[label][r["config"][x]] = r
    return lines, keep, [a for a in others if a not in keep]


def _grid(n: int) -> tuple[int, int]:
    cols = 1 if n == 1 else 2 if n in (2, 4) else 3 if n <= 9 else 4
    return math.ceil(n / cols), cols


def plot_times(t: Timings, title: str, path: Path) -> tuple[Path, str] | None:
    x = _primary(t)
    if x is None:
        return None
    plt = _plt()
    nrows, ncols = _grid(len(t.workloads))
    fig, axs = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 3.4 * nrows + 1.2), squeeze=False)
    handles = {}
    for ax, w in zip(axs.flat, t.workloads):
        collapsed = _panel(ax, t, x, w, handles)
    spare = list(axs.flat)[len(t.workloads):]
    for ax in spare:
        ax.axis("off")
    where = spare[0] if spare else None
    legend_title = f"lines: best over {', '.join(collapsed)}" if collapsed else None
    if where is not None:
        where.legend(handles.values(), handles.keys(), loc="center", fontsize=8, title=legend_title)
    else:
        fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=3, fontsize=8,
                   bbox_to_anchor=(0.5, -0.02), title=legend_title)
    const = workload_label(t.workloads[0], [d for d in t.workloads[0] if d not in t.dims])
    fig.suptitle(_wrap(f"{title}. Median time per workload ({const}); error bars: interquartile range", 4.6 * ncols),
                 fontsize=11)
    fig.tight_layout(rect=(0, 0.04 if where is None else 0, 1, 0.97))
    caption = (f"Median kernel time (µs) against {x}, one panel per workload; error bars span the interquartile "
               f"range of the samples. Star: the overall winner; red ring: {t.winner_label}; dashed line: "
               f"{t.reference_name or 'no baseline'}; grey crosses: configs excluded by hard constraints.")
    return _save(fig, path), caption


def _panel(ax, t: Timings, x: str, w: dict, handles: dict) -> list[str]:
    rows = [r for r in t.rows if r["workload"] == w]
    lines, keep, collapsed = _lines(t, x, rows)
    xs = t.axes[x]
    pos = {v: i for i, v in enumerate(xs)}
    for label, pts in lines.items():
        order = sorted(pts, key=lambda v: pos.get(v, len(xs)))
        ys = [pts[v]["median_us"] for v in order]
        err = [[y - pts[v].get("q1_us", y) for v, y in zip(order, ys)],
               [pts[v].get("q3_us", y) - y for v, y in zip(order, ys)]]
        h = ax.errorbar([pos[v] for v in order], ys, yerr=err, ms=5, capsize=3, lw=1.3, label=label,
                        **_style(t, keep, pts[order[0]]["config"]))
        handles.setdefault(label, h)
        for v in order:
            if key_of(pts[v]["config"]) in t.excluded:
                handles.setdefault("excluded (hard constraint)", ax.plot([pos[v]], [pts[v]["median_us"]], **EXCLUDED)[0])
    for r in rows:
        if x not in r["config"]:                  # a reference config without this axis (naive torch)
            handles.setdefault(config_label(r["config"]), ax.axhline(r["median_us"], color="gray", ls=":", lw=1.2))
    ref = t.reference.get(key_of(w))
    if ref is not None:
        handles.setdefault(t.reference_name, ax.axhline(ref["median_us"], color="black", ls="--", lw=1.2))
        ax.annotate(_time_text(ref["median_us"]), (0, ref["median_us"]), xycoords=("axes fraction", "data"),
                    xytext=(3, 3), textcoords="offset points", fontsize=7)
    times = [r["median_us"] for r in rows] + ([ref["median_us"]] if ref else [])
    if times and min(times) > 0 and max(times) / min(times) > 4:
        from matplotlib.ticker import FuncFormatter

        ax.set_yscale("log")                      # a wide spread: small times stay readable
        for axis in (ax.yaxis.set_major_formatter, ax.yaxis.set_minor_formatter):
            axis(FuncFormatter(lambda v, _: f"{v:g}"))
    _mark(ax, rows, x, pos, t.winner, WINNER, f"winner: {config_label(t.winner or {}, list(t.axes))}", handles)
    _mark(ax, rows, x, pos, t.per_workload.get(key_of(w)), RING, t.winner_label, handles)
    ax.set_xticks(range(len(xs)), [value_label(x, v) for v in xs])
    ax.set_title(workload_label(w, t.dims), fontsize=10)
    ax.set_xlabel(x, fontsize=8)
    ax.set_ylabel("median time (µs)", fontsize=8)
    ax.grid(True, alpha=0.3)
    return collapsed


MARKERS = "osD^v<>p"


def _style(t: Timings, keep: list[str], config: dict) -> dict:
    """Colour by the first axis drawn as lines, marker by the second: related lines look alike."""
    import matplotlib

    colors = matplotlib.colormaps["tab10"].colors
    out = {"marker": "o"}
    if keep:
        vals = t.axes[keep[0]]
        out["color"] = colors[vals.index(config.get(keep[0])) % 10] if config.get(keep[0]) in vals else "gray"
    if len(keep) > 1:
        vals = t.axes[keep[1]]
        out["marker"] = MARKERS[vals.index(config.get(keep[1])) % len(MARKERS)] if config.get(keep[1]) in vals else "o"
        out["ls"] = "-"
    return out


def _mark(ax, rows, x, pos, config, style, label, handles) -> None:
    hit = [r for r in rows if config is not None and r["config"] == config and x in r["config"]]
    if hit:
        handles.setdefault(label, ax.plot([pos[hit[0]["config"][x]]], [hit[0]["median_us"]], **style)[0])


# --- speed-up heatmap ---------------------------------------------------------------------------
MAX_CONFIGS = 32


def plot_speedup(t: Timings, title: str, path: Path) -> tuple[Path, str] | None:
    if not t.reference:
        return None
    cfgs, note = _heat_configs(t)
    wls = t.workloads
    grid = [[_speedup(t, c, w) for w in wls] for c in cfgs]
    for row in grid:
        vals = [v for v in row if v == v]
        row.append(math.exp(sum(map(math.log, vals)) / len(vals)) if len(vals) == len(wls) else float("nan"))
    plt = _plt()
    from matplotlib.colors import TwoSlopeNorm

    fig, ax = plt.subplots(figsize=(3.2 + 1.0 * (len(wls) + 1), 1.6 + 0.32 * len(cfgs)))
    logs = [[math.log2(v) if v == v and v > 0 else float("nan") for v in row] for row in grid]
    span = max([abs(v) for row in logs for v in row if v == v] + [0.1])
    im = ax.imshow(logs, cmap="RdYlGn", norm=TwoSlopeNorm(0.0, -span, span), aspect="auto")
    keys = list(t.axes)
    ax.set_xticks(range(len(wls) + 1), [workload_label(w, t.dims) for w in wls] + ["geomean"],
                  rotation=30 if len(wls) > 4 else 0, ha="right" if len(wls) > 4 else "center", fontsize=8)
    ax.set_yticks(range(len(cfgs)), [_row_label(t, c, keys) for c in cfgs], fontsize=8)
    for lab, c in zip(ax.get_yticklabels(), cfgs):
        if c == t.winner:
            lab.set_fontweight("bold")
    for i, row in enumerate(grid):
        for j, v in enumerate(row):
            ax.text(j, i, f"{v:.2f}" if v == v else "–", ha="center", va="center", fontsize=7)
    ax.axvline(len(wls) - 0.5, color="white", lw=3)
    ticks = [math.log2(v) for v in (1 / 16, 1 / 8, 1 / 4, 1 / 2, 2 / 3, 0.8, 1, 1.25, 1.5, 2, 4, 8, 16)
             if abs(math.log2(v)) <= span]
    bar = fig.colorbar(im, ax=ax, ticks=ticks, label="speed-up (log colour scale)")
    bar.ax.set_yticklabels([f"{2.0 ** e:.3g}x" for e in ticks])
    ax.set_title(_wrap(f"{title}: speed-up over {t.reference_name}{note}", 3.2 + len(wls)), fontsize=10)
    fig.tight_layout()
    caption = (f"Speed-up of each config over {t.reference_name} (its median time divided by the config's), per "
               f"workload and as the geometric mean; green is faster. The winner's row is bold and starred.{note}")
    return _save(fig, path), caption


def _speedup(t: Timings, c: dict, w: dict) -> float:
    ref = t.reference.get(key_of(w))
    hit = [r for r in t.rows if r["config"] == c and r["workload"] == w]
    return ref["median_us"] / hit[0]["median_us"] if ref and hit and hit[0]["median_us"] > 0 else float("nan")


def _heat_configs(t: Timings) -> tuple[list[dict], str]:
    cfgs = list({key_of(r["config"]): r["config"] for r in t.rows}.values())
    if len(cfgs) <= MAX_CONFIGS:
        return cfgs, ""

    def geo(c):
        vals = [v for v in (_speedup(t, c, w) for w in t.workloads) if v == v]
        return sum(map(math.log, vals)) / len(vals) if vals else -math.inf

    keep = sorted(cfgs, key=geo, reverse=True)[:MAX_CONFIGS - 2]
    keep += [c for c in cfgs if c in (t.baseline, t.winner) and c not in keep]
    return keep, f" (the {len(keep)} best of {len(cfgs)} configs by geometric mean)"


def _row_label(t: Timings, c: dict, keys: list[str]) -> str:
    label = config_label(c, keys or list(c))
    if c == t.winner:
        label = "★ " + label + " (winner)"
    if c == t.baseline:
        label += " (baseline)"
    if key_of(c) in t.excluded:
        label += " (excluded)"
    return label
