"""Sweep and timing options: two frozen dataclasses, one device parser, one set of click options.

Every command that sweeps (``tune sweep``, ``tune topk``, ``tune rope``, family verbs) takes the
same options through :func:`sweep_options` and turns them into :class:`RunOptions` and
:class:`TimingOptions` with :func:`from_cli`, so every engine option is reachable from the CLI and
spelled alike everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import click

from occtune.errors import UserError
from occtune.validate import NON_NEGATIVE, Value, finite

DEFAULT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class RunOptions:
    """How the sweep runs: cache, devices, isolation."""

    fresh: bool = False                  # ignore the point cache and re-measure everything
    cache_dir: str | None = None         # None: $OCCTUNE_CACHE_DIR or ~/.cache/occtune
    devices: tuple[str, ...] | None = None   # ("cuda:0", "cuda:1"): one worker process each
    isolate: bool = False                # one worker process (survives hangs and device faults)
    timeout_s: float = DEFAULT_TIMEOUT_S # per config in a worker before it is declared hung
    retry_failed: bool = False           # re-measure cached timeouts and crashes
    ray: str | None = None               # "auto" or a cluster address: one Ray task per config
    profile: bool = False                # print where the time went (always in the results)

    @property
    def in_workers(self) -> bool:
        return bool(self.devices) or self.isolate


@dataclass(frozen=True)
class TimingOptions:
    """How each point is timed (the engine's one timer, occtune.engine.bench)."""

    warmup_ms: float = 25.0
    rep_ms: float = 100.0                # the budget; with ``adaptive`` the most a point may take
    graph: int = 0                       # replay N launches in a CUDA graph (L2 warm)
    adaptive: bool = True                # stop once the median's 95% CI is within +-ci_rel
    ci_rel: float = 0.01
    min_reps: int = 10

    def timer(self):
        from occtune.engine.bench import BenchTimer

        return BenchTimer(warmup_ms=self.warmup_ms, rep_ms=self.rep_ms, use_graph=self.graph,
                          adaptive=self.adaptive, ci_rel=self.ci_rel, min_reps=self.min_reps)


def parse_devices(text: str | None) -> tuple[str, ...] | None:
    """``"0,1"`` -> ``("cuda:0", "cuda:1")``; ``"cuda:2"`` kept; None/empty -> None. Checked
    against the machine by :func:`check_devices` when a GPU sweep starts."""
    if text is None or not str(text).strip():
        return None
    out = []
    for t in str(text).split(","):
        t = t.strip()
        if t.isdigit():
            out.append(f"cuda:{int(t)}")
        elif t.startswith("cuda:") and t[5:].isdigit():
            out.append(t)
        else:
            raise UserError(f"--devices: {t!r} is not a device index; write e.g. --devices 0,1")
    if len(set(out)) != len(out):
        raise UserError(f"--devices lists a device twice ({text}); list each GPU once")
    return tuple(out)


def check_devices(devices: tuple[str, ...] | None) -> None:
    """Every listed GPU exists here (one line, exit 2, otherwise)."""
    if not devices:
        return
    import torch

    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    missing = [d for d in devices if d.startswith("cuda:") and int(d[5:]) >= n]
    if missing:
        have = f"GPUs 0-{n - 1}" if n > 1 else "only GPU 0" if n == 1 else "no GPU"
        raise UserError(f"--devices {','.join(missing)}: this machine has {have}; list indices it has")


def results_options(f):
    """The results-file and display options of every sweeping verb (tune sweep, topk, rope,
    fp8-gemm): --out, --no-write, --force, --json, --all."""
    opts = [
        click.option("--out", "out_dir", help="Results folder (default: results/ when timed, occtune-results/ "
                                              "when analytic)."),
        click.option("--no-write", is_flag=True, help="Print only; write no results file."),
        click.option("--force", is_flag=True, help="Let an analytic sweep replace timed results."),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON document."),
        click.option("--all", "show_all", is_flag=True, help="Show every row (default: the winner, the top 10 "
                                                             "and one line for the rest)."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def sweep_options(f):
    """The shared click options of every sweeping command (see :func:`from_cli`)."""
    opts = [
        click.option("--fresh", is_flag=True, help="Ignore the point cache and re-measure everything."),
        click.option("--cache", "cache_dir", type=click.Path(file_okay=False), default=None,
                     help="Point cache folder (default $OCCTUNE_CACHE_DIR or ~/.cache/occtune)."),
        click.option("--devices", default=None, help="GPU indices, e.g. 0,1: one worker process per GPU."),
        click.option("--isolate", is_flag=True, help="Run configs in a worker process (survives hangs and "
                                                     "device faults)."),
        click.option("--timeout", "timeout_s", type=finite(above=0), default=None,
                     help=f"Seconds a config may run before it is declared hung (default {DEFAULT_TIMEOUT_S:g}); "
                          "implies a worker process, since only a process can be stopped."),
        click.option("--retry-failed", is_flag=True, help="Re-measure cached timeouts and crashes."),
        click.option("--rep-ms", type=finite(above=0), default=100.0, show_default=True,
                     help="Timing budget per point."),
        click.option("--warmup-ms", type=finite(above=0), default=25.0, show_default=True,
                     help="Warm-up budget per point."),
        click.option("--graph", type=Value(NON_NEGATIVE), default=0,
                     help="Replay N launches in a CUDA graph (very short kernels; L2 warm)."),
        click.option("--adaptive/--no-adaptive", default=True, show_default=True,
                     help="Stop timing a point once its median's 95% confidence interval is within +-1% "
                          "(at least 10 runs, at most --rep-ms); --no-adaptive spends all of --rep-ms."),
        click.option("--profile-sweep", is_flag=True, help="Print where the sweep's time went (compile, "
                     "inputs, reference, verification, warm-up, timing, cache); always in the results."),
        click.option("--ray", default=None, metavar="auto|ADDRESS",
                     help="Run configs as Ray tasks on a cluster (one GPU each): 'auto' joins the cluster "
                          "this machine belongs to, or give the head's HOST:PORT. Needs occtune[ray]."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


SWEEP_OPTION_NAMES = ("fresh", "cache_dir", "devices", "isolate", "timeout_s", "retry_failed", "rep_ms",
                      "warmup_ms", "graph", "adaptive", "profile_sweep", "ray")


def timed_options_given(ctx, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The sweep options, and ``extra`` (a command's own options of the timed sweep, by click
    parameter name), that were given on the command line: flags such as ``--devices``."""
    from click.core import ParameterSource

    names = SWEEP_OPTION_NAMES + tuple(extra)
    return tuple(p.opts[0] for p in ctx.command.params
                 if p.name in names and ctx.get_parameter_source(p.name) == ParameterSource.COMMANDLINE)


def check_untimed(given: tuple[str, ...], why: str) -> None:
    """A UserError naming the options of the timed sweep (``given``) that a run which is not timed
    would silently ignore; ``why`` says why the run is not timed."""
    if given:
        one = len(given) == 1
        raise UserError(f"{', '.join(given)}: only the timed sweep takes {'this' if one else 'these'}, and "
                        f"{why}; drop {'it' if one else 'them'}")


def reject_timed_options(ctx, why: str, extra: tuple[str, ...] = ()) -> None:
    """:func:`check_untimed` of the options given to the current command."""
    check_untimed(timed_options_given(ctx, extra), why)


def from_cli(kwargs: dict) -> tuple[RunOptions, TimingOptions]:
    """Pop the :func:`sweep_options` values from a command's kwargs into the two dataclasses.

    ``--timeout`` without ``--isolate``/``--devices`` runs the sweep in one worker process: a
    config stuck in a kernel can only be stopped by ending its process."""
    v = {k: kwargs.pop(k) for k in SWEEP_OPTION_NAMES}
    ray = (v["ray"] or "").strip() or None
    if ray and (v["devices"] or v["isolate"]):
        raise UserError("--ray runs every config as a Ray task on the cluster's GPUs; drop "
                        f"{'--devices' if v['devices'] else '--isolate'}")
    run = RunOptions(fresh=v["fresh"], cache_dir=v["cache_dir"], devices=parse_devices(v["devices"]),
                     isolate=(v["isolate"] or v["timeout_s"] is not None) and not ray,
                     timeout_s=v["timeout_s"] if v["timeout_s"] is not None else DEFAULT_TIMEOUT_S,
                     retry_failed=v["retry_failed"], ray=ray, profile=v["profile_sweep"])
    return run, TimingOptions(warmup_ms=v["warmup_ms"], rep_ms=v["rep_ms"], graph=v["graph"],
                              adaptive=v["adaptive"])
