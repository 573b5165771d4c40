"""Selection: hard constraints, per-workload winners, an overall winner, noise-aware ties, explained.

1. Hard constraints: a config is a candidate only if every one of its points is ``ok`` (it
   built, it verified, it was timed) and ``family.admissible(config, workload)`` holds for every
   workload (fits, capacity, safety). Anything else is excluded with its reason.
2. Per workload: fastest median; configs whose interquartile boxes overlap the fastest one's (or
   whose medians differ by less than ``min_rel_noise``) are tied with it; a tie goes to the larger
   ``family.safety_key``, then to the faster median.
3. Overall: geometric-mean speed-up over the baseline config across workloads (over the fastest
   per workload when the baseline itself is not a candidate). Two configs are tied when their
   log speed-ups differ by less than their mean relative IQR (at least ``min_rel_noise``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from occtune.engine.family import key_of


@dataclass
class Selection:
    winner: dict | None
    per_workload: list[dict] = field(default_factory=list)
    ranking: list[dict] = field(default_factory=list)     # candidates, best first
    excluded: dict = field(default_factory=dict)           # key_of(config) -> reason
    reference: str = "baseline"
    explanation: str = ""
    details: dict = field(default_factory=dict)


def _timing(row):
    t = row.get("timing") or {}
    return t.get("median_us"), t.get("q1_us"), t.get("q3_us")


def tied(a: dict, b: dict, min_rel_noise: float = 0.01) -> bool:
    """Two ok rows are tied when their IQR boxes overlap or their medians are within the floor."""
    ma, qa1, qa3 = _timing(a)
    mb, qb1, qb3 = _timing(b)
    if abs(ma - mb) <= min_rel_noise * min(ma, mb):
        return True
    return qa1 <= qb3 and qb1 <= qa3


def _candidates(rows, family, workloads):
    by_cfg: dict[str, list] = {}
    for r in rows:
        by_cfg.setdefault(key_of(r["config"]), []).append(r)
    good, excluded = {}, {}
    for k, rs in by_cfg.items():
        bad = [r for r in rs if r["status"] != "ok"]
        if bad:
            excluded[k] = f"{bad[0]['status']} on {key_of(bad[0]['workload'])}: {bad[0].get('reason', '')}".strip()
            continue
        if len(rs) < len(workloads):
            excluded[k] = "not measured on every workload"
            continue
        adm = [family.admissible(r["config"], r["workload"]) for r in rs] if hasattr(family, "admissible") else []
        no = [why for ok, why in adm if not ok]
        if no:
            excluded[k] = f"not admissible: {no[0]}"
            continue
        good[k] = {key_of(r["workload"]): r for r in rs}
    return good, excluded


def pick(rows_fast_first: list[dict], safety, min_rel_noise: float = 0.01) -> tuple[dict, list[dict]]:
    """(winner, tied group) of ok rows sorted fastest first: the rows tied with the fastest one
    (never with each other in a chain), then the larger ``safety(config)``, then the faster median."""
    best = rows_fast_first[0]
    group = [r for r in rows_fast_first if tied(best, r, min_rel_noise)]
    win = max(group, key=lambda r: (safety(r["config"]), -_timing(r)[0]))
    return win, group


def select(result, family, min_rel_noise: float = 0.01) -> Selection:
    wl_keys = [key_of(w) for w in result.workloads]
    good, excluded = _candidates(result.rows, family, result.workloads)
    sel = Selection(None, excluded=excluded)
    if not good:
        sel.explanation = "no config passed the hard constraints (built, verified, timed, admissible)"
        return sel
    for w, wk in zip(result.workloads, wl_keys):
        rs = sorted((good[k][wk] for k in good), key=lambda r: _timing(r)[0])
        win, group = pick(rs, family.safety_key, min_rel_noise)
        sel.per_workload.append({"workload": w, "winner": win["config"], "median_us": _timing(win)[0],
                                 "fastest": rs[0]["config"], "tied": [r["config"] for r in group]})
    base_k = key_of(result.baseline)
    sel.reference = "baseline" if base_k in good else "fastest per workload"
    ref = {wk: (_timing(good[base_k][wk])[0] if base_k in good else min(_timing(good[k][wk])[0] for k in good))
           for wk in wl_keys}
    sel.ranking = sorted((_score(k, good[k], ref, wl_keys) for k in good), key=lambda s: -s["geomean_speedup"])
    _overall(sel, family, min_rel_noise)
    _explain(sel, result, base_k, good, family)
    return sel


def _score(k, rows_by_wl, ref, wl_keys) -> dict:
    logs = [math.log(ref[wk] / _timing(rows_by_wl[wk])[0]) for wk in wl_keys]
    rel = [(_timing(rows_by_wl[wk])[2] - _timing(rows_by_wl[wk])[1]) / _timing(rows_by_wl[wk])[0] for wk in wl_keys]
    return {"config": rows_by_wl[wl_keys[0]]["config"], "key": k,
            "geomean_speedup": math.exp(sum(logs) / len(logs)), "rel_noise": sum(rel) / len(rel),
            "speedups": {wk: math.exp(x) for wk, x in zip(wl_keys, logs)}}


def _overall(sel: Selection, family, min_rel_noise) -> None:
    best = sel.ranking[0]

    def tie(s):
        noise = max(min_rel_noise, (best["rel_noise"] + s["rel_noise"]) / 2)
        return abs(math.log(best["geomean_speedup"] / s["geomean_speedup"])) <= noise

    group = [s for s in sel.ranking if tie(s)]
    win = max(group, key=lambda s: (family.safety_key(s["config"]), s["geomean_speedup"]))
    sel.winner = win["config"]
    sel.details["tied_with_fastest"] = [s["config"] for s in group]
    sel.details["winner_broke_tie"] = win is not best


def _explain(sel: Selection, result, base_k, good, family) -> None:
    win = next(s for s in sel.ranking if s["config"] == sel.winner)
    others = [s for s in sel.ranking if s is not win]
    runner = others[0] if others else None
    d = sel.details
    d.update({"winner": win["config"], "geomean_speedup": round(win["geomean_speedup"], 4),
              "reference": sel.reference, "n_workloads": len(result.workloads),
              "n_candidates": len(good), "n_excluded": len(sel.excluded)})
    text = (f"{key_of(win['config'])} wins: {win['geomean_speedup']:.2f}x geometric-mean speed-up over "
            f"the {sel.reference} {key_of(result.baseline) if sel.reference == 'baseline' else ''}".rstrip()
            + f" across {len(result.workloads)} workload(s)")
    if runner is not None:
        margin = win["geomean_speedup"] / runner["geomean_speedup"] - 1
        d.update({"runner_up": runner["config"], "runner_up_speedup": round(runner["geomean_speedup"], 4),
                  "margin_over_runner_up": round(margin, 4)})
        text += f"; runner-up {key_of(runner['config'])} at {runner['geomean_speedup']:.2f}x ({margin:+.1%})"
        if d["winner_broke_tie"] or runner["config"] in d["tied_with_fastest"]:
            sw, sr = family.safety_key(win["config"]), family.safety_key(runner["config"])
            text += (f", inside the measured noise: tie broken toward the safer config (safety {sw:g} vs {sr:g})"
                     if sw != sr else ", inside the measured noise; equally safe, so the faster median stands")
    if sel.excluded:
        text += f"; {len(sel.excluded)} config(s) excluded by hard constraints"
    sel.explanation = text + "."
