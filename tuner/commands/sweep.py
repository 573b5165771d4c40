"""`tune sweep FAMILY`: the one generic pipeline, for any family the registry finds.

::

    tune sweep --list
    tune sweep rope --target gfx950                       # analytic: compiled resources, occupancy
    tune sweep topk --set lds_budget=40K,48K --set threads=512 --workload B=64 --workload L=128K,1M
"""

from __future__ import annotations

import click

from occtune.engine.options import from_cli, results_options, sweep_options, timed_options_given
from occtune.errors import UserError
from occtune.validate import assignments


def space(family, sets: tuple[str, ...]) -> list[dict] | None:
    if not sets:
        return None
    from occtune.engine.sweep import product

    axes = dict(family.axes())
    axes.update(assignments(sets, family.axis_rules(), "--set", family.name))
    return product(axes)


def workloads(family, items: tuple[str, ...]) -> list[dict] | None:
    if not items:
        return None
    from occtune.engine.family import check_workload
    from occtune.engine.sweep import product

    template = family.workloads()[0]
    given = assignments(items, family.workload_rules(), "--workload", family.name, "workload key")
    return [check_workload(family, {**template, **w}, "--workload") for w in product(given)]


def _list_families(as_json: bool) -> None:
    from occtune.engine.registry import families
    from occtune.output import console, emit_json

    found = families()
    if as_json:
        emit_json({"families": [{"name": s.name, "module": s.module, "origin": s.origin} for s in found.values()]})
        return
    for spec in sorted(found.values(), key=lambda s: s.name):
        console.print(f"{spec.name:12s} {spec.module}  ({spec.origin})")


@click.command("sweep")
@click.argument("family_name", metavar="FAMILY", required=False)
@click.option("--list", "list_only", is_flag=True, help="Name the families found and exit.")
@click.option("--target", "target_name", help="Target, e.g. gfx950 or sm_90 (default: the local GPU).")
@click.option("--analytic", is_flag=True, help="Resources and occupancy only, even on the local GPU.")
@click.option("--device", type=click.Choice(["cpu"]), help="cpu: time on this CPU (Triton's interpreter, "
              "TRITON_INTERPRET=1), for trying a family without a GPU; results go to <out>/cpu/.")
@click.option("--set", "sets", multiple=True, metavar="AXIS=V1,V2",
              help="Values of one parameter axis (repeatable); other axes keep the family's defaults.")
@click.option("--workload", "workload_items", multiple=True, metavar="KEY=V1,V2",
              help="Workload values (repeatable; their product is swept); other keys keep the defaults.")
@results_options
@sweep_options
def command(family_name, list_only, target_name, analytic, device, sets, workload_items, out_dir, no_write, force,
            as_json, show_all, **opts):
    """Sweep any kernel family: analytic on another target, timed on the local GPU."""
    if list_only:
        _list_families(as_json)
        return
    if not family_name:
        raise UserError("name a family, e.g. 'tune sweep rope --target gfx950'; 'tune sweep --list' names them")
    from occtune.engine.registry import get_family
    from occtune.model.targets import resolve_target
    from occtune.pipeline import SweepRequest, run_request

    run, timing = from_cli(opts)
    if device and (target_name or analytic):
        raise UserError("--device cpu times on this CPU; it takes no --target or --analytic")
    family = get_family(family_name)
    if not device:           # the family's space on this target (its --set axes may differ per target)
        target = resolve_target(target_name)[0]
        family, target_name = family.for_target(target), target.name
    cfgs, wls = space(family, sets), workloads(family, workload_items)
    req = SweepRequest(family=family.name, target=target_name, analytic=analytic, device=device,
                       configs=None if cfgs is None else tuple(cfgs), workloads=None if wls is None else tuple(wls),
                       out_dir=out_dir, write=not no_write, force=force, as_json=as_json, show_all=show_all, run=run,
                       timing=timing,
                       timed_flags=timed_options_given(click.get_current_context()))
    run_request(req, family)
