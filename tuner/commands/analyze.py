"""`tune analyze FAMILY --set axis=value ... --target T1,T2`: one config on several targets, side by side.

For each target: the config's resources as the family reports them (``family.resources``: the
kernel compiled for that target where a compiler is at hand, else the family's stated assumption),
the occupancy model's whole limits table and verdict, LLVM's own occupancy remark beside our
reproduction of it (AMD), and the family's analytic columns (top-k's tie capacity, say). No GPU.
The family is found through :mod:`occtune.engine.registry` only.
"""

from __future__ import annotations

import click
from rich.table import Table

from occtune.engine.analytic import compile_progress, occupancy_row
from occtune.engine.registry import get_family
from occtune.errors import CompileError, NoCompilerError, UserError
from occtune.output import console, emit_json
from occtune.model.targets import load_target
from occtune.validate import assignments


def parse_sets(family, sets: tuple[str, ...], others: tuple = ()) -> dict:
    """The family's baseline config with ``axis=value`` overrides, each value checked by the
    axis's rule (integers accept sizes: ``lds_budget=48K``). An axis that only ``others`` (the
    family on the other targets asked for) have is left out here."""
    rules = {a: r for f in (family, *others) for a, r in f.axis_rules().items()}
    rules.update(family.axis_rules())
    given = assignments(sets, rules, "--set", family.name)
    many = next((a for a, vs in given.items() if len(vs) > 1), None)
    if many:
        raise UserError(f"--set {many}: one value per axis here (tune analyze compares one config); "
                        "tune sweep takes several")
    axes = family.axes()
    return {**family.baseline_config(), **{a: vs[0] for a, vs in given.items() if a in axes}}


def analyze_one(family, config: dict, target) -> dict:
    """One target's column: resources, occupancy (limits, verdict) and the family's columns."""
    try:
        res = family.resources(config, target)
    except (NoCompilerError, CompileError) as e:
        return {"target": target.name, "config": dict(config), "resources_source": None, "error": str(e)}
    if res is None:
        return {"target": target.name, "config": dict(config), "resources_source": None,
                "error": f"{family.name} reports no resources for {target.name}"}
    row = occupancy_row(target, config, res)
    row.update(family.analytic_columns(config, target))
    return {"target": target.name, **row}


@click.command("analyze")
@click.argument("family_name", metavar="FAMILY")
@click.option("--set", "sets", multiple=True, metavar="AXIS=VALUE",
              help="Set one axis of the config (repeatable); the rest is the family's baseline.")
@click.option("--target", "targets", required=True, help="Targets, comma-separated, e.g. gfx942,gfx950,gfx1250,sm_90.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def command(family_name, sets, targets, as_json):
    """One config's resources, limits and occupancy on several targets, side by side (no GPU)."""
    family = get_family(family_name)
    names = list(dict.fromkeys(t.strip() for t in targets.split(",") if t.strip()))
    if not names:
        raise UserError("--target: give at least one target, e.g. --target gfx950,sm_90")
    tgts = [load_target(n) for n in names]
    fams = [family.for_target(t) for t in tgts]       # a family's axes may differ per target
    configs = [parse_sets(f, sets, tuple(fams)) for f in fams]
    with compile_progress(family.name, len(tgts), unit="targets") as bar:
        columns = []
        for f, c, t in zip(fams, configs, tgts):
            columns.append(analyze_one(f, c, t))
            bar.advance()
    config = shared_config(configs)
    if as_json:
        emit_json({"family": family.name, "config": config, "analytic": True, "timed": False,
                   "targets": {c["target"]: c for c in columns}})
        return
    _print(family, config, tgts, columns)


def shared_config(configs: list[dict]) -> dict:
    """The keys and values every target's config has alike (all of it where the axes do not
    differ per target); each column holds its whole config."""
    return {k: v for k, v in configs[0].items() if all(k in c and c[k] == v for c in configs[1:])}


_COMMON = [("threads", "threads"), ("static LDS B", "static_lds_bytes"), ("dynamic LDS B", "dynamic_lds_bytes"),
           ("LDS/block B, rounded", "lds_per_block_bytes"), ("scratch B/lane", "scratch_bytes")]
_VERDICT = [("blocks per CU/SM", "blocks_per_cu"), ("waves/SIMD | warps/SM", None), ("occupancy", "occupancy"),
            ("limiter", "limiter"), ("LLVM remark, waves/SIMD", "compiler_occupancy"),
            ("our LLVM model", "llvm_model_waves")]
_SKIP = {"target", "config", "threads", "static_lds_bytes", "dynamic_lds_bytes", "regs", "vgprs", "agprs", "sgprs",
         "scratch_bytes", "resources_source", "compiler_occupancy", "lds_per_block_bytes", "fits", "reason",
         "blocks_per_cu", "waves_per_simd", "warps_per_sm", "occupancy", "limiter", "limits", "llvm_model_waves",
         "occupancy_note", "error"}


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.0%}" if v <= 1 else f"{v:g}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def _registers(c: dict, target) -> str:
    if target.is_amd:
        return f"{_cell(c.get('vgprs'))} / {_cell(c.get('agprs'))} / {_cell(c.get('sgprs'))}"
    return _cell(c.get("regs"))


def _print(family, config, tgts, columns) -> None:
    console.print(f"[bold]tune analyze {family.name}[/]: {', '.join(f'{k}={v}' for k, v in config.items())}; "
                  "analytic (no GPU timing)")
    t = Table()
    t.add_column("")
    for tg in tgts:
        t.add_column(tg.name, justify="right")
    ok = [c for c in columns if not c.get("error")]
    for k in dict.fromkeys(k for c in columns for k in c["config"] if k not in config):
        t.add_row(k, *[_cell(c["config"].get(k)) for c in columns])
    t.add_row("compiled by", *[_short_source(c) for c in columns])
    t.add_row("VGPR/AGPR/SGPR | regs", *[_registers(c, tg) if not c.get("error") else "-"
                                                for c, tg in zip(columns, tgts)])
    for label, key in _COMMON:
        t.add_row(label, *[_cell(c.get(key)) for c in columns])
    limit_keys = list(dict.fromkeys(k for c in ok for k in c["limits"]))
    for k in limit_keys:
        t.add_row(f"limit: {k}", *[_cell((c.get("limits") or {}).get(k)) for c in columns])
    for label, key in _VERDICT:
        cells = []
        for c in columns:
            if key is None:
                cells.append(_cell(c.get("waves_per_simd") if c.get("waves_per_simd") is not None else c.get("warps_per_sm")))
            elif key == "blocks_per_cu" and c.get("fits") is False:
                cells.append("no fit")
            else:
                cells.append(_cell(c.get(key)))
        t.add_row(label, *cells)
    extra = list(dict.fromkeys(k for c in ok for k in c if k not in _SKIP))
    for k in extra:
        t.add_row(k, *[_cell(c.get(k)) for c in columns])
    console.print(t)
    for c in columns:
        if c.get("error"):
            console.print(f"[bold red]{c['target']}[/]: {c['error']}")
            continue
        src = c["resources_source"]
        loud = "[bold yellow]warning: assumed[/] " if src.startswith("assumed") else ""
        console.print(f"{c['target']}: {loud}{src}")
        for note in (c.get("reason"), c.get("occupancy_note")):
            if note:
                console.print(f"  {note}")


def _short_source(c: dict) -> str:
    src = c.get("resources_source")
    if not src:
        return "none"
    if src.startswith("compiled: "):
        return src.split(";")[0][len("compiled: "):].rsplit(" ", 1)[0]
    return src.split(":")[0]
