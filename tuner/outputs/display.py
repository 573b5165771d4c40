"""Rich tables of results rows (sweeps and ``tune report``), fitting a 100-column terminal."""

from __future__ import annotations

from rich.table import Table

from occtune.engine.family import short as _short



def _fmt(v, spec):
    return "" if v is None else format(v, spec)


def rows_table(doc: dict, title: str | None = None, limit: int = 200) -> Table:
    """A table of a results document's rows (timed or analytic), winner marked with *."""
    win = (doc.get("winner") or {}).get("config")
    timed = any("median_us" in r for r in doc.get("rows", []))
    t = Table(title=title, show_lines=False)
    t.add_column("config")
    t.add_column("workload")
    t.add_column("status")
    cols = ([("median us", "median_us", ".2f"), ("IQR us", "iqr_us", ".2f"), ("GB/s", "gbps", ".1f"),
             ("% floor", "pct_of_floor", ".1f"), ("speed-up", "speedup", ".2f")] if timed else
            [(k, k, "") for k in ("dynamic_lds_bytes", "blocks_per_cu", "capacity") if
             any(k in r for r in doc.get("rows", []))])
    for head, _, _ in cols:
        t.add_column(head, justify="right")
    for r in doc.get("rows", [])[:limit]:
        mark = "*" if win is not None and r.get("config") == win else ""
        status = r.get("status", "")
        if r.get("reason") and status != "ok":
            status += f" ({r['reason'][:30]})"
        t.add_row(mark + _short(r.get("config", {})), _short(r.get("workload", {}) or {}), status,
                  *[_fmt(r.get(k), f) for _, k, f in cols])
    return t


def sweep_table(result, selection) -> Table:
    from occtune.outputs.results import build_document

    doc = build_document(result, selection)
    return rows_table(doc, title=f"{result.family}: {len(result.rows)} points "
                                 f"({result.n_measured} measured, {result.n_cached} from cache)")
