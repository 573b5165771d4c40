"""The allow-list: per (n, k) and M, our Triton kernel or the vendor library, from measurements.

:func:`build` turns timed rows (the engine's results rows, or the benchmark's) into a document:
per shape and measured M, the fastest verified Triton config and the fastest verified library,
the choice and its margin. Two times are tied when their interquartile boxes overlap or their
medians differ by under 1% (``occtune.engine.select.tied``, the engine's noise rule); among the
rows tied with the fastest one, the safest wins, which for this family is the library
(``Fp8GemmFamily.safety_key``). Between
measured M values the nearest measured M decides (the smaller on a tie), the lookup vLLM and
sglang use for their tuned-config files; shapes that were not measured go to ``doc["fallback"]``.

Two renderings, both carrying ``doc["provenance"]`` (target, device, versions, date, git revision):

- :func:`render_json`: ``{"n,k": {"M": {"backend", Triton config in vLLM's key names, times,
  margin}}}`` plus ``_provenance`` / ``_lookup`` / ``_pipe`` keys (``_pipe``: which kernel a
  config's PIPE needs): the shape of vLLM's and sglang's
  ``N=...,K=...,device_name=...,dtype=fp8_w8a8,block_shape=[128,128].json`` files, per (n, k).
- :func:`render_predicate`: a self-contained Python module with ``use_triton(n, k, m) -> bool`` and
  ``triton_config(n, k, m) -> dict | None`` (the chosen config of the Triton kernel there).
"""

from __future__ import annotations

import json
import math
import pprint

SCHEMA = "occtune.fp8_gemm.allowlist/1"
VLLM_NAMES = {"BLOCK_M": "BLOCK_SIZE_M", "BLOCK_N": "BLOCK_SIZE_N", "BLOCK_K": "BLOCK_SIZE_K",
              "GROUP_M": "GROUP_SIZE_M"}
LOOKUP = ("nearest measured M decides (the smaller one on a tie), as vLLM/sglang pick a tuned "
          "config: min(keys, key=lambda m0: abs(m0 - M)); shapes not listed use 'fallback'")
PIPES = ("a Triton config's PIPE names the kernel it was measured with: 0 = occtune's portable Triton kernel "
         "(kernels/fp8_gemm/kernel.py, the keys of vLLM's and sglang's w8a8 block-scaled Triton GEMM); 1-3 = "
         "the same with TMA loads (NVIDIA sm_90+); 4-7 = occtune's Gluon wgmma kernels (kernels/fp8_gemm/"
         "wgmma.py, sm_90 only); 8, 9 = occtune's split-K decode kernel (kernels/fp8_gemm/splitk.py, any "
         "target; GROUP_M unused; the split follows from the shape and the SM count). Only a PIPE 0 config "
         "carries over to another Triton kernel.")


def _timing(r: dict) -> dict:
    t = r.get("timing") or {}
    return {"median_us": r.get("median_us", t.get("median_us")), "q1_us": r.get("q1_us", t.get("q1_us")),
            "q3_us": r.get("q3_us", t.get("q3_us"))}


def _best(rows: list[dict], safety) -> dict | None:
    """Fastest row; among those tied with it, the safest (then the faster): the engine's rule,
    ``occtune.engine.select.pick``."""
    from occtune.engine.select import pick

    if not rows:
        return None
    timed = sorted(({"config": r["config"], "timing": _timing(r), "row": r} for r in rows),
                   key=lambda t: t["timing"]["median_us"])
    return pick(timed, safety)[0]["row"]


def decide(rows: list[dict], safety) -> dict:
    """One workload's verdict from its rows (any status): the fastest verified row over both sides;
    among the rows tied with it, the safest (the engine's rule, ``occtune.engine.select``). Ties
    are judged against the fastest row only, never chained (a Triton config tied with the fastest
    one does not bring in a library tied with that config but not with the fastest)."""
    ok = [r for r in rows if r.get("status") == "ok"]
    choice = _best(ok, safety)
    is_tri = lambda r: r["config"]["backend"] == "triton"  # noqa: E731
    tri = choice if choice is not None and is_tri(choice) else _best([r for r in ok if is_tri(r)], safety)
    lib = choice if choice is not None and not is_tri(choice) else _best([r for r in ok if not is_tri(r)], safety)
    out = {"triton_us": _us(tri), "library_us": _us(lib), "library_backend": lib["config"]["backend"] if lib else None,
           "triton_config": _triton_part(tri["config"]) if tri else None}
    if choice is None:
        return {**out, "backend": "none", "margin": None, "decided_by": "no backend verified and timed here"}
    side = "triton" if is_tri(choice) else "library"
    if tri is None or lib is None:
        return {**out, "backend": side, "margin": None, "decided_by": f"only the {side} was verified and timed"}
    fastest = min(ok, key=lambda r: _timing(r)["median_us"])
    how = "faster" if is_tri(fastest) == is_tri(choice) else f"tied inside the noise: the safer {side}"
    chosen, other = (out["triton_us"], out["library_us"]) if side == "triton" else (out["library_us"], out["triton_us"])
    return {**out, "backend": side, "margin": round(other / chosen - 1, 4), "decided_by": how}


def _us(r):
    return None if r is None else round(float(_timing(r)["median_us"]), 3)


def _triton_part(config: dict) -> dict:
    return {k: v for k, v in config.items() if k != "backend"}


def m_ranges(ms: list[int]) -> list[tuple[int, int | None]]:
    """Inclusive M ranges each measured M decides under the nearest-M rule (the last is open)."""
    ms = sorted(ms)
    out, lo = [], 1
    for a, b in zip(ms, ms[1:] + [None]):
        hi = None if b is None else (a + b) // 2
        out.append((lo, hi))
        lo = None if hi is None else hi + 1
    return out


def build(rows: list[dict], safety, provenance: dict, *, target: str, missing: dict | None = None) -> dict:
    """The allow-list document from timed rows (see the module docstring)."""
    by_shape: dict[tuple, dict[int, list]] = {}
    for r in rows:
        w = r["workload"]
        by_shape.setdefault((w["N"], w["K"]), {}).setdefault(w["M"], []).append(r)
    shapes, any_lib = {}, False
    for (n, k), per_m in sorted(by_shape.items()):
        ms = sorted(per_m)
        points = []
        for m, (lo, hi) in zip(ms, m_ranges(ms)):
            p = {"m": m, "m_lo": lo, "m_hi": hi, **decide(per_m[m], safety)}
            any_lib |= p["library_us"] is not None
            points.append(p)
        shapes[f"{n},{k}"] = {"n": n, "k": k, "points": points}
    doc = {"schema": SCHEMA, "family": "fp8_gemm", "target": target, "lookup": LOOKUP,
           "noise_rule": "IQR boxes overlap or medians within 1% (occtune.engine.select.tied); ties to the library",
           "fallback": "library" if any_lib else "triton", "missing_backends": dict(missing or {}),
           "shapes": shapes, "provenance": dict(provenance)}
    doc["summary"] = summary(doc)
    return doc


def _geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return round(math.exp(sum(map(math.log, xs)) / len(xs)), 4) if xs else None


def chosen_us(p: dict) -> float | None:
    return p["triton_us"] if p["backend"] == "triton" else p["library_us"]


def summary(doc: dict) -> dict:
    """Geometric-mean speed-up of the allow-list over 'always Triton' (its tuned config per point)
    and 'always the library', over the points where both were measured; Triton's share of points."""
    pts = [p for s in doc["shapes"].values() for p in s["points"]]
    both = [p for p in pts if p["triton_us"] and p["library_us"]]
    return {"points": len(pts), "points_with_both": len(both),
            "triton_points": sum(p["backend"] == "triton" for p in pts),
            "speedup_vs_always_triton": _geomean([p["triton_us"] / chosen_us(p) for p in both]),
            "speedup_vs_always_library": _geomean([p["library_us"] / chosen_us(p) for p in both])}


# --- renderings --------------------------------------------------------------------------------

def _vllm_config(cfg: dict | None) -> dict:
    return {VLLM_NAMES.get(k, k): v for k, v in (cfg or {}).items()}


def render_json(doc: dict) -> str:
    """vLLM/sglang-style JSON: per "n,k", per M (string keys), the backend and the Triton config."""
    out = {"_provenance": doc["provenance"], "_target": doc["target"], "_lookup": doc["lookup"], "_pipe": PIPES,
           "_fallback": doc["fallback"], "_missing_backends": doc.get("missing_backends", {})}
    for key, s in doc["shapes"].items():
        out[key] = {str(p["m"]): {"backend": p["backend"], **_vllm_config(p["triton_config"]),
                                  "triton_us": p["triton_us"], "library_us": p["library_us"],
                                  "library_backend": p["library_backend"], "margin": p["margin"],
                                  "m_range": [p["m_lo"], p["m_hi"]]}
                    for p in s["points"]}
    return json.dumps(out, indent=2, sort_keys=False) + "\n"


def load_json(text: str, source: str) -> dict:
    """The allow-list document back from :func:`render_json`'s text (``source`` names it in each
    point's ``decided_by``, which the JSON does not carry)."""
    raw = json.loads(text)
    back = {v: k for k, v in VLLM_NAMES.items()}
    keep = ("backend", "triton_us", "library_us", "library_backend", "margin", "m_range")
    shapes = {}
    for key, per_m in raw.items():
        if key.startswith("_"):
            continue
        n, k = (int(x) for x in key.split(","))
        points = []
        for m, e in sorted(per_m.items(), key=lambda kv: int(kv[0])):
            cfg = {back.get(name, name): v for name, v in e.items() if name not in keep}
            points.append({"m": int(m), "m_lo": e["m_range"][0], "m_hi": e["m_range"][1], "backend": e["backend"],
                           "triton_us": e["triton_us"], "library_us": e["library_us"],
                           "library_backend": e["library_backend"], "triton_config": cfg or None,
                           "margin": e["margin"], "decided_by": f"from {source}"})
        shapes[key] = {"n": n, "k": k, "points": points}
    doc = {"schema": SCHEMA, "family": "fp8_gemm", "target": raw["_target"], "lookup": raw["_lookup"],
           "noise_rule": "IQR boxes overlap or medians within 1% (occtune.engine.select.tied); ties to the library",
           "fallback": raw["_fallback"], "missing_backends": raw.get("_missing_backends", {}), "shapes": shapes,
           "provenance": raw["_provenance"]}
    doc["summary"] = summary(doc)
    return doc


def merge(base: dict, new: dict) -> dict:
    """``base`` with ``new``'s points in place of its own at the M values ``new`` measured (per
    shape; shapes only ``new`` has are added); the M ranges follow the merged measured M values.
    The provenance lists both: ``{"merged": [base's, new's], "rule": ...}``."""
    shapes = {}
    for key in list(base["shapes"]) + [k for k in new["shapes"] if k not in base["shapes"]]:
        b, nw = base["shapes"].get(key), new["shapes"].get(key)
        pts = {p["m"]: p for p in (b["points"] if b else [])}
        pts.update({p["m"]: p for p in (nw["points"] if nw else [])})
        ms = sorted(pts)
        src = b or nw
        shapes[key] = {"n": src["n"], "k": src["k"], "points": [
            {**pts[m], "m_lo": lo, "m_hi": hi} for m, (lo, hi) in zip(ms, m_ranges(ms))]}
    prov = {"merged": [base["provenance"], new["provenance"]],
            "rule": "the second document's points replace the first's at the M values it measured"}
    doc = {**base, "shapes": shapes, "provenance": prov,
           "missing_backends": {**base.get("missing_backends", {}), **new.get("missing_backends", {})}}
    doc["summary"] = summary(doc)
    return doc


_PREDICATE_BODY = '''

def _entry(n: int, k: int, m: int):
    for lo, hi, triton, config in RANGES.get((int(n), int(k)), ()):
        if m >= lo and (hi is None or m <= hi):
            return triton, config
    return None


def use_triton(n: int, k: int, m: int) -> bool:
    """True: call the Triton kernel for this (n, k) and M; False: the library."""
    e = _entry(n, k, m)
    return FALLBACK_TRITON if e is None else e[0]


def triton_config(n: int, k: int, m: int):
    """The tuned Triton config at (n, k, m) (None where the library is chosen or nothing was measured)."""
    e = _entry(n, k, m)
    return dict(e[1]) if e is not None and e[0] and e[1] is not None else None
'''


def _ranges_text(doc: dict) -> str:
    """``RANGES = {(n, k): ((m_lo, m_hi, use_triton, config), ...), ...}``, one M range per line."""
    lines = ["RANGES = {"]
    for s in doc["shapes"].values():
        lines.append(f"    ({s['n']}, {s['k']}): (")
        for p in s["points"]:
            cfg = p["triton_config"] if p["backend"] == "triton" else None
            lines.append(f"        ({p['m_lo']}, {p['m_hi']}, {p['backend'] == 'triton'}, {cfg!r}),"
                         f"  # measured M={p['m']}: {p['backend']}"
                         + ("" if p["margin"] is None else f" by {p['margin']:+.1%}"))
        lines.append("    ),")
    return "\n".join(lines + ["}"]) + "\n"


def _measured_text(prov: dict) -> str:
    """Where a document's times come from (a merged one: each source, see :func:`merge`)."""
    if "merged" in prov:
        return "; ".join(_measured_text(p) for p in prov["merged"]) + f" ({prov['rule']})"
    return (f"device {prov.get('device_name') or prov.get('device')}, torch {prov.get('torch')}, "
            f"triton {prov.get('triton')}, date {prov.get('date')}, git {prov.get('git_revision')}")


def render_predicate(doc: dict) -> str:
    """A Python module: ``use_triton(n, k, m)`` and ``triton_config(n, k, m)`` with the provenance."""
    prov = doc["provenance"]
    head = (f'"""FP8 block-scaled GEMM backend choice, generated by occtune (tune fp8-gemm); do not edit.\n\n'
            f"target {doc['target']}, {_measured_text(prov)}.\n"
            f"Lookup: {doc['lookup']}.\n"
            f"Ties: {doc['noise_rule']}.\n"
            f"Configs: {PIPES}\n"
            f'"""\n\n')
    body = (f"PROVENANCE = {pprint.pformat(prov, width=100, sort_dicts=True)}\n\n"
            f"FALLBACK_TRITON = {doc['fallback'] == 'triton'}\n\n"
            f"# (n, k) -> ((m_lo, m_hi or None, use_triton, triton config or None), ...)\n"
            + _ranges_text(doc))
    return head + body + _PREDICATE_BODY
