"""Show the engine end to end: sweep, rerun from the cache, and the timer's own spread.

::

    python3 examples/engine_demo.py --family rope --device cuda --out /tmp/occtune-demo
    python3 examples/engine_demo.py --family axpy --device cpu          # TRITON_INTERPRET=1 on a CPU
    python3 examples/engine_demo.py --family rope --devices 0,1         # one worker per GPU

Prints one JSON document: the first sweep's wall time, the rerun's (served from the cache), the
winner and its explanation, and the spread of ``--stability N`` repeated timings of the baseline
(median of medians, relative IQR and min-max of the medians).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import click


def _family(name: str):
    from occtune.engine.registry import get_family, register
    import sys; sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1] / "tests"))
    from doubles import AxpyFamily

    register("axpy", AxpyFamily)
    return get_family(name)


def timer_stability(family, device, timer, n: int) -> dict:
    """Time the baseline config on its first workload ``n`` times with fresh timer calls."""
    from occtune.engine.workunit import sync

    cfg, wl = family.baseline_config(), family.workloads()[0]
    built = family.build(cfg, device)
    inputs = family.make_inputs(wl, 0, device)
    family.run(built, inputs)
    sync(device)
    meds, iqrs = [], []
    for _ in range(n):
        t = timer(lambda: family.run(built, inputs), context={"config": cfg, "workload": wl, "device": str(device)})
        meds.append(t.median_us)
        iqrs.append(t.iqr_us / t.median_us if t.median_us else 0.0)
    m = statistics.median(meds)
    return {"config": cfg, "workload": wl, "runs": n, "median_of_medians_us": m,
            "medians_min_max_us": [min(meds), max(meds)],
            "medians_spread_pct": 100 * (max(meds) - min(meds)) / m if m else None,
            "mean_rel_iqr_pct": 100 * sum(iqrs) / len(iqrs), "method": t.method}


@click.command()
@click.option("--family", "family_name", default="rope", show_default=True)
@click.option("--device", default="cuda", show_default=True)
@click.option("--devices", default=None, help="Comma-separated GPU indices: one worker process each.")
@click.option("--out", default=None, help="Folder for the cache, results YAML and plots (default: a temp dir).")
@click.option("--rep-ms", default=100.0, show_default=True)
@click.option("--stability", default=5, show_default=True, help="Repeated timings of the baseline.")
@click.option("--timeout", "timeout_s", default=120.0, show_default=True)
@click.option("--workloads", "n_workloads", type=int, default=None, help="Sweep only the first N workloads.")
def main(family_name, device, devices, out, rep_ms, stability, timeout_s, n_workloads):
    from occtune.engine.bench import BenchTimer
    from occtune.outputs.display import sweep_table
    from occtune.outputs.report import make_report
    from occtune.engine.options import RunOptions, parse_devices
    from occtune.outputs.results import build_document, plain
    from occtune.outputs.results import write_results
    from occtune.engine.select import select
    from occtune.engine.sweep import run_sweep
    from occtune.output import emit_json, err_console

    out_dir = Path(out or tempfile.mkdtemp(prefix="occtune-demo-"))
    fam, timer = _family(family_name), BenchTimer(rep_ms=rep_ms)
    devs = parse_devices(devices)
    wls = fam.workloads()[:n_workloads] if n_workloads else None
    opts = dict(timeout_s=timeout_s, devices=devs)
    kw = dict(workloads=wls, device=device, timer=timer, cache=out_dir / "cache")
    t0 = time.perf_counter()
    first = run_sweep(fam, options=RunOptions(fresh=True, **opts), **kw)
    t1 = time.perf_counter()
    again = run_sweep(fam, options=RunOptions(**opts), **kw)
    t2 = time.perf_counter()
    sel = select(again, fam)
    err_console.print(sweep_table(again, sel))
    path = write_results(out_dir / f"{family_name}.yaml",
                         plain(build_document(again, sel, first.fingerprint.get("arch"))))
    plots = make_report([path])[0]["plots"]
    emit_json({"family": family_name, "device": first.fingerprint.get("device_name"),
               "first_sweep": {"wall_s": round(t1 - t0, 2), "measured": first.n_measured, "counts": first.counts()},
               "rerun": {"wall_s": round(t2 - t1, 2), "measured": again.n_measured, "cached": again.n_cached},
               "winner": sel.winner, "explanation": sel.explanation, "results": str(path), "plots": plots,
               "timer_stability": timer_stability(fam, device, timer, stability) if stability else None})


if __name__ == "__main__":
    main()
