"""The contract between the engine and a kernel family.

The engine knows nothing of top-k or RoPE: a family is one package (``kernels/<name>/``, an
installed distribution, or a folder on ``$OCCTUNE_FAMILY_PATH``) whose ``family.py`` sets
``FAMILY`` to a subclass of :class:`Family`; :mod:`occtune.engine.registry` finds it. A family
imports only this runtime (``occtune.engine.family``, ``occtune.errors``, ``occtune.build.rtc``,
``occtune.model.occupancy``), never the CLI.

Configs and workloads are plain ``dict``s of JSON-able scalars so that they hash, cache and
serialise without ceremony; :func:`key_of` gives their canonical string form.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from occtune.engine.phases import phase  # noqa: F401 - for families: with phase("reference"): ...
from occtune.errors import UserError
from occtune.model.occupancy import Resources  # noqa: F401 - part of the Family contract
from occtune.validate import POSITIVE, Rule, rule_like

# No GPU holds this much (the largest of the targets here, AMD MI355X, has 288 GB of HBM3E, per
# AMD's datasheet): a workload whose tensors need more is a typo, refused before any compile.
DEVICE_BYTES_LIMIT = 2**40

Config = dict      # e.g. {"lds_budget": 40960, "threads": 512, "bits": 8}
Workload = dict    # e.g. {"B": 64, "L": 131072, "K": 2048}


def short(d: dict) -> str:
    """A config or workload for people: ``BLOCK_M=16 num_warps=2``."""
    return " ".join(f"{k}={v}" for k, v in d.items())


def key_of(d: dict) -> str:
    """Canonical, order-independent string of a config or workload (cache and dedup key)."""
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


def check_workload(family: "Family", workload: Workload, what: str) -> Workload:
    """``workload`` if every value obeys the family's rule for its key and its tensors fit a GPU
    (:data:`DEVICE_BYTES_LIMIT`, by ``bytes_moved``); else one UserError line that starts with
    ``what`` (the option that gave it)."""
    rules = family.workload_rules()
    for key, value in workload.items():
        if key in rules:
            rules[key].check(value, f"{what}: {key}")
    try:
        need = int(family.bytes_moved(workload))
    except NotImplementedError:
        return workload
    if need > DEVICE_BYTES_LIMIT:
        raise UserError(f"{what}: {short(workload)} moves {need:.3g} B, more than any GPU holds "
                        f"({DEVICE_BYTES_LIMIT >> 40} TiB); check the sizes")
    return workload


@dataclass
class CheckResult:
    """Outcome of comparing a config's output with the family's reference."""

    ok: bool
    reason: str = ""
    diagnostics: dict = field(default_factory=dict)   # e.g. {"overflow_rows": 3}


@dataclass(frozen=True)
class View:
    """How a run is shown: one JSON document (``as_json``), or tables of the winner and the top
    ``limit`` rows with a one-line summary of the rest (every row with ``show_all``)."""

    as_json: bool = False
    show_all: bool = False
    limit: int = 10


@dataclass(frozen=True)
class TimedPlan:
    """What a family adds to its timed sweep on a target (:meth:`Family.timed_plan`); all optional.

    ``fits(config) -> (ok, reason)`` replaces the occupancy prune from :meth:`Family.resources`;
    ``annotate(config) -> dict`` adds columns to every row; ``columns``: (header, function of one
    config's rows -> text) in the summary table; ``assumptions``: a dict, or a callable giving it
    after the sweep; ``after_write(path, doc) -> {"<what>_file": path}`` writes files beside the
    results (a header, an allow-list); ``after_show(run, view)`` prints more after the table."""

    fits: Callable | None = None
    annotate: Callable | None = None
    columns: tuple = ()
    assumptions: Any = None
    after_write: Callable | None = None
    after_show: Callable | None = None


class Family:
    """Base class of a kernel family. Subclasses override what applies to them."""

    name: str = ""

    # --- the space -------------------------------------------------------------------------
    def axes(self) -> dict[str, list]:
        """Parameter axes and the values swept by default, e.g. {"BLOCK_M": [8, 16, 32]}."""
        raise NotImplementedError

    def for_target(self, target: Any) -> "Family":
        """This family with its space for ``target`` (an :class:`occtune.model.targets.Target`):
        a family whose axes, baseline or configs differ per target (fp8_gemm's AMD-only axes)
        returns an instance made for it; the default is the family itself. The generic verbs
        (tune sweep, analyze, export) call it before they read the space or the macros."""
        return self

    def with_workloads(self, workloads: list[Workload]) -> "Family":
        """This family on ``workloads`` instead of its default ones: where a config's resources
        (hence its analytic row) depend on the workload (a Triton specialisation of the shape), the
        family returns an instance that reads them from these; the default is the family itself.
        ``tune sweep --workload`` calls it, as a family's own verb builds it with its shapes."""
        return self

    def baseline_config(self) -> Config:
        """The config users would otherwise run (the untuned default): speed-ups are against it."""
        raise NotImplementedError

    def workloads(self) -> list[Workload]:
        raise NotImplementedError

    def axis_rules(self) -> dict[str, Rule]:
        """What each axis's value may be (:class:`occtune.validate.Rule`): ``--set`` values are
        checked by it before anything is built. Default: like the axis's default values."""
        return {axis: rule_like(values) for axis, values in self.axes().items()}

    def workload_rules(self) -> dict[str, Rule]:
        """What each workload key's value may be; ``--workload`` values (and a family verb's
        shapes) are checked by it before anything is built. Default: like the first default
        workload's values, integers positive (a problem size)."""
        first = next(iter(self.workloads()), {})
        return {key: rule_like([v], POSITIVE) for key, v in first.items()}

    def is_valid(self, config: Config, workload: Workload) -> tuple[bool, str]:
        """Prune impossible (config, workload) pairs before building. (ok, reason)."""
        return True, ""

    def admissible(self, config: Config, workload: Workload) -> tuple[bool, str]:
        """Hard constraint at selection (capacity, headroom): measured and shown, never chosen if False."""
        return True, ""

    def safety_key(self, config: Config) -> float:
        """Larger is safer (e.g. more candidate headroom); breaks ties inside the noise."""
        return 0.0

    # --- build and resources -----------------------------------------------------------------
    def source_hash(self) -> str:
        """Hash of the kernel source: part of every cache key."""
        raise NotImplementedError

    def build(self, config: Config, device: Any) -> Any:
        """Compile one config for ``device``; returns an opaque handle passed to :meth:`run`."""
        raise NotImplementedError

    def macros(self, config: Config) -> dict[str, int]:
        """The compile-time macros of ``config``: the one map used by the build and by ``tune
        export`` (integers only, so ``-D`` flags need no quoting)."""
        return {}

    def macro_constants(self) -> dict[str, int]:
        """Named integer constants that values of :meth:`macros` are compared with (RoPE's
        ``OCCTUNE_ROPE_VARIANT_FLAT = 3``): ``tune export`` defines them in headers."""
        return {}

    # True when the compiler holds the GIL (Triton) and keeps an on-disk cache: the engine then
    # builds and warms ahead in helper processes (occtune.engine.prebuild.prebuild_in_processes).
    compile_processes: bool = False

    def warm(self, built: Any, workload: Workload, device: Any) -> None:
        """Compile ahead, without running, what :meth:`run` would compile on first use for this
        workload (JIT shape specialisations, derived kernels). Called on the engine's build
        threads before any timing; the default compiles nothing more."""

    def built_resources(self, built: Any, config: Config) -> Resources | None:
        """What the kernel built for the local device uses, as its driver reports it."""
        return None

    def resources(self, config: Config, target: Any) -> Resources | None:
        """What ``config`` compiled for ``target`` (an :class:`occtune.model.targets.Target`) uses per
        block; None when no compiler for that target is at hand."""
        return None

    # --- run and check -----------------------------------------------------------------------
    # True: the engine makes each workload's inputs once per process (``make_inputs`` with one
    # seed per workload, and the adversarial sets) and reuses them for every config, calling
    # :meth:`reset_outputs` before each verification run. A family may then keep a check's
    # reference in the inputs object, computed once (wrap it in ``phase("reference")``).
    inputs_reusable: bool = False

    def make_inputs(self, workload: Workload, seed: int, device: Any) -> Any:
        raise NotImplementedError

    def reset_outputs(self, inputs: Any) -> None:
        """Before a verification run on reused inputs: undo what an earlier config's run left
        there that :meth:`check` reads (re-poison output buffers), so that a kernel that writes
        nothing cannot pass on its predecessor's answer."""

    def adversarial_inputs(self, workload: Workload, device: Any) -> Iterable[tuple[str, Any]]:
        """(name, inputs) pairs that stress correctness (ties, masks, edge lengths)."""
        return ()

    def run(self, built: Any, inputs: Any) -> Any:
        """Launch once (asynchronously); returns the outputs to check."""
        raise NotImplementedError

    def check(self, outputs: Any, inputs: Any, workload: Workload) -> CheckResult:
        raise NotImplementedError

    # --- roofline ----------------------------------------------------------------------------
    def bytes_moved(self, workload: Workload) -> int:
        """The fewest bytes a workload must move through device memory (reads + writes)."""
        raise NotImplementedError

    def flops(self, workload: Workload) -> int:
        return 0

    # --- analytic hooks (optional) -----------------------------------------------------------
    # True when the analytic verdict ranks configs (top-k's LDS budgets at one block size: the
    # most blocks per CU that still hold the candidates). False (the default): occupancy does not
    # say which config is fastest (RoPE, GEMM tiles), so an analytic run shows resources,
    # occupancy and limiters with no winner, and ``tune export`` refuses its results.
    analytic_ranks: bool = False

    def resources_workers(self, target: Any) -> int:
        """Configs whose :meth:`resources` the analytic sweep computes side by side (a compiler
        run as a process per config, e.g. clang); 1: one after the other (Triton holds the GIL)."""
        return 1

    def analytic_columns(self, config: Config, target: Any) -> dict:
        """Family-specific analytic columns of one config (e.g. top-k's tie capacity)."""
        return {}

    def analytic_space(self, configs: list[Config], target: Any) -> list[Config]:
        """The configs the analytic verdict covers (default: all); a UserError, before anything is
        compiled, for a space it cannot cover (top-k: budgets at several block sizes the user asked
        for, whose blocks per CU do not compare)."""
        return configs

    def check_analytic_result(self, result: Any, target: Any) -> None:
        """Raise a UserError, before anything is written, when the analytic rows
        (:class:`occtune.engine.analytic.AnalyticResult`) leave no whole answer (top-k: a budget
        whose compile failed)."""

    def select_analytic(self, rows: list[dict], target: Any) -> tuple[dict | None, str]:
        """The analytic verdict: (winner row or None, why). Where the verdict ranks
        (:attr:`analytic_ranks`) the default is the most blocks per CU/SM among configs that fit,
        ties toward :meth:`safety_key`; no winner then is an error (nothing written). Where it does
        not rank, there is no winner, and ``why`` says what the rows do show."""
        unit = "CU" if getattr(target, "is_amd", True) else "SM"
        if not self.analytic_ranks:
            return None, (f"no winner: occupancy does not rank {self.name} configs (blocks per {unit} do not "
                          f"say which is fastest); the rows show each config's resources, occupancy and "
                          f"limiter; time them on a {getattr(target, 'name', 'GPU')} to choose one")
        ok = [r for r in rows if r.get("fits") and r.get("admissible", True)]
        if not ok:
            return None, "no config fits the target"
        best = max(ok, key=lambda r: (r["blocks_per_cu"], self.safety_key(r["config"])))
        return best, (f"{best['blocks_per_cu']} block(s) per {unit}, "
                      f"the most among {len(ok)} configs that fit; ties toward the safer config")

    def analytic_document(self, doc: dict, result: Any, target: Any) -> dict:
        """The results document of an analytic run, completed by the family (the assumptions it
        made, the files it read)."""
        return doc

    def analytic_json(self, result: Any, target: Any) -> dict:
        """Keys the analytic run's ``--json`` document adds to the results document."""
        return {}

    def show_analytic(self, result: Any, target: Any, view: View, path: Any) -> bool:
        """Print the analytic run for people in the family's own table (``path``: the results
        file written, or None); False: the pipeline's generic table."""
        return False

    # --- timed hooks (optional) --------------------------------------------------------------
    def timed_plan(self, target: Any, view: View, device: str = "cuda") -> TimedPlan:
        """What the family adds to its timed sweep on ``target``, timed on ``device`` (called once,
        just before it; it may print what it checked, e.g. which libraries run here, unless
        ``view.as_json``)."""
        return TimedPlan()
