"""What a terminal shows of a sweep or a results file: the winner, the top rows and a one-line
summary of the rest (every row with ``--all``; ``--json`` prints everything, always).

Tables fold a long config onto more lines rather than cut it; axes every config shares are said
once, above the table (:func:`common_axes`).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Callable

from rich.table import Table

from occtune.engine.family import key_of, short as _short

LIMIT = 10          # rows a terminal shows unless --all


def top(items: list, *, is_winner: Callable = lambda item: False, key: Callable | None = None,
        show_all: bool = False, limit: int = LIMIT) -> tuple[list, list]:
    """(shown, rest) of ``items``: all of them with ``show_all`` or when they fit; else the winner
    and the ``limit`` best others by ``key`` (largest first; None: the first ones). Both lists
    keep the items' own order."""
    if show_all or len(items) <= limit + 1:
        return list(items), []
    idx = [i for i, it in enumerate(items) if not is_winner(it)]
    if key is not None:
        idx = sorted(idx, key=lambda i: key(items[i]), reverse=True)
    keep = set(idx[:limit]) | {i for i, it in enumerate(items) if is_winner(it)}
    return [it for i, it in enumerate(items) if i in keep], [it for i, it in enumerate(items) if i not in keep]


def more(n: int, what: str, detail: str = "") -> str:
    """The one line that stands for the rows not shown."""
    return f"... {n} more {what} not shown{': ' + detail if detail else ''}; --all shows every one"


def counted(counts: Counter) -> str:
    return ", ".join(f"{k} {n}" for k, n in counts.most_common())


def analytic_rest(rows: list[dict]) -> str:
    """The analytic rows not shown, in one line: how many fit (by limiter) and how many do not."""
    fit = Counter(r.get("limiter") or "?" for r in rows if r.get("fits"))
    nofit = sum(1 for r in rows if not r.get("fits"))
    parts = [f"{sum(fit.values())} fit (limiter: {counted(fit)})" if fit else "",
             f"{nofit} {'does' if nofit == 1 else 'do'} not fit" if nofit else ""]
    return more(len(rows), "configs", ", ".join(p for p in parts if p))


def skipped_lines(skipped: list[dict], label: Callable = _short, show_all: bool = False) -> list[str]:
    """One line per skipped config with ``show_all``; else one per distinct reason, with a count."""
    if show_all:
        return [f"skipped {label(s['config'])}: {s['reason']}" for s in skipped]
    by = Counter(s["reason"] for s in skipped)
    return [f"skipped {label(next(s['config'] for s in skipped if s['reason'] == why))}: {why}" if n == 1 else
            f"skipped {n} configs: {why}" for why, n in by.items()]


def common_axes(configs: list[dict]) -> dict:
    """The config values every one of ``configs`` shares (said once, not on every row)."""
    if len(configs) < 2:
        return {}
    first = configs[0]
    return {k: v for k, v in first.items() if all(k in c and c[k] == v for c in configs[1:])}


def config_text(config: dict, fixed: dict) -> str:
    """A config for a table row: the axes not in ``fixed``."""
    return _short({k: v for k, v in config.items() if k not in fixed}) or _short(config)


def _geomean(xs: list) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _round(x):
    return None if x is None else round(x, 4)


def by_config(doc: dict) -> list[tuple[dict, list]]:
    """A results document's rows grouped by config, in first-seen order."""
    groups: dict[str, tuple[dict, list]] = {}
    for r in doc.get("rows") or []:
        groups.setdefault(key_of(r.get("config") or {}), (r.get("config") or {}, []))[1].append(r)
    return list(groups.values())


def summarize(doc: dict, columns=()) -> list[dict]:
    """One entry per config of a timed document: status counts, geometric-mean speed-up, GB/s,
    plus ``columns`` ((header, function of the config's rows -> text))."""
    win = (doc.get("winner") or {}).get("config")
    out = []
    for cfg, rows in by_config(doc):
        ok = [r for r in rows if r.get("status") == "ok"]
        bad = [r for r in rows if r.get("status") != "ok"]
        entry = {"config": cfg, "winner": cfg == win, "ok": len(ok), "points": len(rows),
                 "geomean_speedup": _round(_geomean([r.get("speedup") for r in ok])) if len(ok) == len(rows) else None,
                 "best_gbps": max((r["gbps"] for r in ok if r.get("gbps")), default=None),
                 "status": "ok" if not bad else f"{bad[0].get('status')}: {bad[0].get('reason', '')}".strip(": ")}
        for head, fn in columns:
            entry[head] = fn(rows)
        out.append(entry)
    return out


def speed_key(entry: dict) -> tuple:
    """Rank of a config's summary: every point ran first, then the geometric-mean speed-up."""
    return (entry["ok"] == entry["points"], entry["geomean_speedup"] or 0.0, entry["ok"])


def timed_rest(entries: list[dict]) -> str:
    """The timed configs not shown, in one line: how many ran everywhere (their speed-up range)."""
    full = [e["geomean_speedup"] for e in entries if e["geomean_speedup"] is not None]
    bad = len(entries) - len(full)
    parts = [f"{len(full)} ran on every workload (speed-up {min(full):.2f}x-{max(full):.2f}x)" if full else "",
             f"{bad} failed somewhere or were excluded" if bad else ""]
    return more(len(entries), "configs", ", ".join(p for p in parts if p))


def summary_table(entries: list[dict], columns=(), fixed: dict | None = None) -> Table:
    """The per-config table of a timed sweep (entries of :func:`summarize`), winner starred."""
    fixed = fixed or {}
    t = Table()
    t.add_column("config", overflow="fold")
    for head in ("ok", "speed-up", "best GB/s", *(h for h, _ in columns)):
        t.add_column(head, justify="right")
    t.add_column("status", overflow="fold")
    for e in entries:
        t.add_row(("* " if e["winner"] else "") + config_text(e["config"], fixed), f"{e['ok']}/{e['points']}",
                  "" if e["geomean_speedup"] is None else f"{e['geomean_speedup']:.2f}x",
                  "" if e["best_gbps"] is None else f"{e['best_gbps']:.4g}",
                  *[str(e[h]) for h, _ in columns], e["status"][:60],
                  style="bold green" if e["winner"] else None)
    return t


def _fmt(v, spec):
    return "" if v is None else format(v, spec)


def rows_table(doc: dict, title: str | None = None, limit: int | None = None) -> Table:
    """A table of a results document's rows (timed: one per config and workload; analytic: one
    per config), winner starred; every row unless ``limit``."""
    rows = doc.get("rows") or []
    win = (doc.get("winner") or {}).get("config")
    timed = any("median_us" in r for r in rows)
    fixed = common_axes([r.get("config") or {} for r in rows])
    t = Table(title=title, show_lines=False, title_justify="left")
    t.add_column("config", overflow="fold")
    if any(r.get("workload") for r in rows):
        t.add_column("workload", overflow="fold")
    t.add_column("status" if timed else "verdict", overflow="fold")
    cols = ([("median us", "median_us", ".2f"), ("IQR us", "iqr_us", ".2f"), ("GB/s", "gbps", ".1f"),
             ("% floor", "pct_of_floor", ".1f"), ("speed-up", "speedup", ".2f")] if timed else
            [(k, k, "") for k in ("dynamic_lds_bytes", "blocks_per_cu", "capacity") if any(k in r for r in rows)])
    for head, _, _ in cols:
        t.add_column(head, justify="right")
    for r in rows[:limit]:
        mark = "* " if win is not None and r.get("config") == win else ""
        why = (str(r.get("reason") or "").splitlines() or [""])[0]
        status = r.get("status", "") if timed else (r.get("limiter") or "" if r.get("fits", True) else "no fit")
        if why and status not in ("ok", ""):
            status += f" ({why})"
        t.add_row(mark + config_text(r.get("config") or {}, fixed),
                  *([_short(r.get("workload") or {})] if len(t.columns) > 2 + len(cols) else []), status,
                  *[_fmt(r.get(k), f) for _, k, f in cols])
    return t


def sweep_table(result, selection) -> Table:
    from occtune.outputs.results import build_document

    doc = build_document(result, selection)
    return rows_table(doc, title=f"{result.family}: {len(result.rows)} points "
                                 f"({result.n_measured} measured, {result.n_cached} from cache)")
