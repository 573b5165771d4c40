"""Shared click options for timed sweeps, so ``tune rope`` / ``tune topk`` spell them alike.

::

    @click.command("rope")
    @sweep_options
    def command(..., **sweep):
        res = run_sweep(fam, **sweep_kwargs(sweep))
"""

from __future__ import annotations

import click

from occtune.errors import UserError


def parse_devices(text: str | None) -> list[str] | None:
    """``0,1`` -> ["cuda:0", "cuda:1"]; ``cpu,cpu`` is allowed (tests)."""
    if not text:
        return None
    out = []
    for t in (x.strip() for x in text.split(",")):
        if t.isdigit():
            out.append(f"cuda:{t}")
        elif t == "cpu" or t.startswith("cuda:"):
            out.append(t)
        elif t:
            raise UserError(f"--devices: {t!r} is not a GPU index; write e.g. --devices 0,1")
    return out or None


def sweep_options(f):
    opts = [
        click.option("--fresh", is_flag=True, help="Ignore the cache and re-measure everything."),
        click.option("--cache", "cache_dir", type=click.Path(file_okay=False), default=None,
                     help="Cache folder (default $OCCTUNE_CACHE_DIR or ~/.cache/occtune)."),
        click.option("--devices", default=None, help="GPU indices, e.g. 0,1: one worker process per GPU."),
        click.option("--isolate/--no-isolate", default=True, show_default=True,
                     help="Run configs in a worker process (survives hangs and device faults)."),
        click.option("--timeout", "timeout_s", type=float, default=120.0, show_default=True,
                     help="Seconds a config may run without producing a point."),
        click.option("--rep-ms", type=float, default=100.0, show_default=True, help="Timing budget per point."),
        click.option("--warmup-ms", type=float, default=25.0, show_default=True),
        click.option("--graph", "use_graph", type=int, default=0,
                     help="Replay N launches in a CUDA graph (very short kernels; L2 warm)."),
        click.option("--retry-failed", is_flag=True, help="Re-measure cached timeouts and crashes."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def sweep_kwargs(opts: dict) -> dict:
    """run_sweep keyword arguments from the options above (pops nothing)."""
    from occtune.engine.bench import BenchTimer

    return {"fresh": opts["fresh"], "cache": opts["cache_dir"], "devices": parse_devices(opts["devices"]),
            "isolate": opts["isolate"], "timeout_s": opts["timeout_s"], "retry_failed": opts["retry_failed"],
            "timer": BenchTimer(warmup_ms=opts["warmup_ms"], rep_ms=opts["rep_ms"], use_graph=opts["use_graph"])}
