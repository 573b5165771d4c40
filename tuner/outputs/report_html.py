"""The report's one self-contained HTML page: plots embedded as base64 PNG, tables, provenance.

No scripts, no external files: the page opens offline and can be attached to a pull request.
"""

from __future__ import annotations

import base64
from html import escape

from occtune import __version__
from occtune.engine.family import key_of
from occtune.outputs.report import Source, Timings, config_label, workload_label

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px auto;max-width:1180px;color:#222}
h1{font-size:22px;margin-bottom:4px} h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
.meta{color:#555} table{border-collapse:collapse;margin:8px 0;font-size:13px}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right} th{background:#f4f4f4}
td.l,th.l{text-align:left} tr.win td{background:#fff6cc;font-weight:600}
figure{margin:16px 0} figure img{max-width:100%;border:1px solid #eee}
figcaption{color:#444;font-size:13px;margin-top:4px} .winner{font-size:15px;background:#fff6cc;padding:8px}
"""


def _table(head: list[str], rows: list[list], left: int = 1, marked: set[int] = frozenset()) -> str:
    th = "".join(f"<th class='l'>{escape(h)}</th>" if i < left else f"<th>{escape(h)}</th>"
                 for i, h in enumerate(head))
    body = []
    for n, r in enumerate(rows):
        tds = "".join(f"<td class='l'>{escape(str(v))}</td>" if i < left else f"<td>{escape(str(v))}</td>"
                      for i, v in enumerate(r))
        body.append(f"<tr{' class=win' if n in marked else ''}>{tds}</tr>")
    return f"<table><tr>{th}</tr>{''.join(body)}</table>"


def _num(v, spec=".2f") -> str:
    return "" if v is None else format(v, spec)


def _figures(figs: list[tuple]) -> str:
    out = []
    for path, caption in figs:
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        out.append(f"<figure><img alt='{escape(path.name)}' src='data:image/png;base64,{data}'>"
                   f"<figcaption>{escape(caption)}</figcaption></figure>")
    return "".join(out)


def _per_workload(t: Timings) -> str:
    rows, marked = [], set()
    for w in t.workloads:
        cfg = t.per_workload.get(key_of(w))
        hit = next((r for r in t.rows if r["config"] == cfg and r["workload"] == w), None)
        ref = t.reference.get(key_of(w))
        sp = ref["median_us"] / hit["median_us"] if hit and ref and hit["median_us"] else None
        if cfg == t.winner:
            marked.add(len(rows))
        rows.append([workload_label(w, t.dims), config_label(cfg or {}), _num(hit and hit["median_us"], ".3f"),
                     _num(hit and hit.get("iqr_us"), ".3f"), _num(ref and ref["median_us"], ".3f"), _num(sp)])
    head = ["workload", t.winner_label, "median µs", "IQR µs", f"{t.reference_name or 'baseline'} µs", "speed-up"]
    return _table(head, rows, left=2, marked=marked)


def _rows(src: Source) -> str:
    rows = src.doc.get("rows", [])
    cols = [c for c in ("median_us", "iqr_us", "speedup", "blocks_per_cu", "dynamic_lds_bytes", "limiter", "gbps")
            if any(c in r for r in rows)]
    win = (src.doc.get("winner") or {}).get("config")
    body = [[config_label(r.get("config") or {}), workload_label(r.get("workload") or {}, list(r.get("workload") or {})),
             r.get("status", ""), *[r.get(c, "") for c in cols]] for r in rows]
    marked = {i for i, r in enumerate(rows) if win is not None and r.get("config") == win}
    return (f"<details><summary>All {len(rows)} rows</summary>"
            f"{_table(['config', 'workload', 'status', *cols], body, left=3, marked=marked)}</details>")


def render(src: Source, t: Timings | None, figs: list[tuple]) -> str:
    doc, prov = src.doc, src.doc.get("provenance") or {}
    win = doc.get("winner") or {}
    parts = [f"<h1>{escape(src.title)}</h1>",
             f"<p class=meta>{escape(str(src.path))} · {escape(str(prov.get('date') or 'date unknown'))} · git "
             f"{escape(str(prov.get('git_revision') or 'unknown'))} · report by occtune {__version__}</p>"]
    if win.get("config"):
        parts.append(f"<p class=winner>★ Winner: <b>{escape(config_label(win['config']))}</b><br>"
                     f"{escape(str(win.get('explanation') or ''))}</p>")
    if t is not None and t.workloads:
        parts += [f"<h2>Per workload ({escape(t.winner_label)})</h2>", _per_workload(t)]
    parts += ["<h2>Plots</h2>", _figures(figs) or "<p>No plot applies to this file.</p>"]
    if doc.get("excluded"):
        parts += ["<h2>Excluded by hard constraints</h2>",
                  _table(["config", "reason"], [[config_label(e["config"]), e["reason"]] for e in doc["excluded"]],
                         left=2)]
    parts += ["<h2>Rows</h2>", _rows(src), "<h2>Provenance</h2>",
              _table(["field", "value"], [[k, v] for k, v in prov.items()], left=2)]
    if doc.get("assumptions"):
        a = doc["assumptions"]
        items = a.items() if isinstance(a, dict) else enumerate(a)
        parts += ["<h2>Assumptions</h2>", _table(["", "value"], [[k, v] for k, v in items], left=2)]
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>occtune report: {escape(src.title)}"
            f"</title><style>{STYLE}</style></head><body>{''.join(parts)}</body></html>\n")
