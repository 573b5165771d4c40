"""`tune occupancy`: blocks per CU/SM, waves/warps, the limiter and the whole limits table."""

from __future__ import annotations

import click
from rich.table import Table

from occtune.errors import UserError
from occtune.model.occupancy import Resources, occupancy, partial_wave_note
from occtune.output import console, emit_json
from occtune.model.targets import load_target
from occtune.units import format_size
from occtune.validate import NON_NEGATIVE, POSITIVE_INT, SIZE_VALUE, Value

_LIMIT_HELP = {
    "waves": "wave slots per CU (max waves/SIMD x SIMDs) and workgroup barriers",
    "lds": "LDS per CU / LDS per workgroup (rounded to the allocation granularity)",
    "vgprs": "VGPR file per SIMD / VGPRs per wave",
    "sgprs": "SGPRs per wave",
    "warps": "warp slots per SM / warps per block",
    "blocks": "resident blocks per SM",
    "registers": "register file per SM sub-partition / registers per warp",
    "shared": "shared memory per SM / (shared per block + 1 KiB reserved, rounded)",
}


COUNT = Value(NON_NEGATIVE)


@click.command("occupancy")
@click.option("--target", "target_name", required=True, help="Target name, e.g. gfx950, sm_90 (see `tune targets`).")
@click.option("--threads", type=POSITIVE_INT, required=True, help="Threads per block / workgroup.")
@click.option("--static-lds", type=SIZE_VALUE, default="0",
              help="Static LDS / shared memory per block: 7168, 7K, 7KB, 7KiB.")
@click.option("--dynamic-lds", type=SIZE_VALUE, default="0", help="Dynamic LDS / shared memory per block.")
@click.option("--vgprs", type=COUNT, help="AMD: arch VGPRs per lane.")
@click.option("--agprs", type=COUNT, help="AMD: accumulation VGPRs per lane.")
@click.option("--sgprs", type=COUNT, help="AMD: SGPRs per wave.")
@click.option("--regs", type=COUNT, help="NVIDIA: registers per thread.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def command(target_name, threads, static_lds, dynamic_lds, vgprs, agprs, sgprs, regs, as_json):
    """Occupancy of one kernel configuration on a target, with the limiting resource."""
    target = load_target(target_name)
    most = target.max_threads_per_workgroup if target.is_amd else target.max_threads_per_block
    if threads > most:      # no kernel launches like this: not an occupancy question
        raise UserError(f"--threads {threads}: {target.name} allows at most {most} threads per "
                        f"{'workgroup' if target.is_amd else 'block'}")
    if target.is_amd and regs is not None:
        raise UserError(f"--regs is for NVIDIA targets; for {target.name} give --vgprs/--agprs/--sgprs")
    if not target.is_amd and any(v is not None for v in (vgprs, agprs, sgprs)):
        raise UserError(f"--vgprs/--agprs/--sgprs are for AMD targets; for {target.name} give --regs")
    note = partial_wave_note(target, threads)
    if note:                 # an answer all the same: the launch is legal, only wasteful
        click.echo(f"warning: {note}", err=True)
    res = Resources(threads=threads, static_lds=static_lds, dynamic_lds=dynamic_lds, vgprs=vgprs, agprs=agprs,
                    sgprs=sgprs, regs=regs, source="given")
    occ = occupancy(target, res)
    if as_json:
        doc = occ.to_dict()
        doc["inputs"] = {"threads": threads, "static_lds": static_lds, "dynamic_lds": dynamic_lds,
                         **{k: v or 0 for k, v in (("vgprs", vgprs), ("agprs", agprs), ("sgprs", sgprs), ("regs", regs))}}
        emit_json(doc)
        return
    unit = "CU" if target.is_amd else "SM"
    if not occ.fits:
        console.print(f"[bold red]does not fit[/] on {target.name}: {occ.reason}")
    else:
        slots = (f"{occ.waves_per_simd}/{target.max_waves_per_simd} waves per SIMD" if target.is_amd
                 else f"{occ.warps_per_sm}/{target.max_warps_per_sm} warps per SM")
        console.print(f"{target.name}: [bold]{occ.blocks_per_cu} blocks per {unit}[/], {slots} "
                      f"({occ.occupancy:.0%}), limited by [bold]{occ.limiter}[/]")
    table = Table(title=f"limits per {unit} ({format_size(occ.lds_per_block)} LDS per block after rounding)",
                  title_justify="left")
    table.add_column("resource")
    table.add_column(f"max blocks/{unit}", justify="right")
    table.add_column("what bounds it")
    for name, value in occ.limits.items():
        mark = " <" if occ.fits and name == occ.limiter else ""
        table.add_row(name, ("-" if value is None else str(value)) + mark,
                      _LIMIT_HELP.get(name, "") + (" (not given)" if value is None else ""))
    console.print(table)
    if occ.unconfirmed:
        console.print(f"[yellow]unconfirmed target parameters used:[/] {', '.join(occ.unconfirmed)}")
