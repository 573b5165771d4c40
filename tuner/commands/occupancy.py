"""`tune occupancy`: blocks per CU/SM, waves/warps, the limiter and the whole limits table."""

from __future__ import annotations

import click
from rich.table import Table

from occtune.errors import UserError
from occtune.occupancy import KernelResources, occupancy
from occtune.output import console, emit_json
from occtune.targets import load_target
from occtune.units import format_size, parse_size

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


def _count(value: int | None, flag: str) -> int:
    if value is None:
        return 0
    if value < 0:
        raise UserError(f"{flag} cannot be negative ({value})")
    return value


@click.command("occupancy")
@click.option("--target", "target_name", required=True, help="Target name, e.g. gfx950, sm_90 (see `tune targets`).")
@click.option("--threads", type=int, required=True, help="Threads per block / workgroup.")
@click.option("--static-lds", default="0", help="Static LDS / shared memory per block: 7168, 7K, 7KB, 7KiB.")
@click.option("--dynamic-lds", default="0", help="Dynamic LDS / shared memory per block.")
@click.option("--vgprs", type=int, help="AMD: arch VGPRs per lane.")
@click.option("--agprs", type=int, help="AMD: accumulation VGPRs per lane.")
@click.option("--sgprs", type=int, help="AMD: SGPRs per wave.")
@click.option("--regs", type=int, help="NVIDIA: registers per thread.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def command(target_name, threads, static_lds, dynamic_lds, vgprs, agprs, sgprs, regs, as_json):
    """Occupancy of one kernel configuration on a target, with the limiting resource."""
    target = load_target(target_name)
    if threads <= 0:
        raise UserError(f"--threads must be a positive number of threads per block, got {threads}")
    if target.is_amd and regs is not None:
        raise UserError(f"--regs is for NVIDIA targets; for {target.name} give --vgprs/--agprs/--sgprs")
    if not target.is_amd and any(v is not None for v in (vgprs, agprs, sgprs)):
        raise UserError(f"--vgprs/--agprs/--sgprs are for AMD targets; for {target.name} give --regs")
    res = KernelResources(
        threads=threads,
        static_lds=parse_size(static_lds, "--static-lds"),
        dynamic_lds=parse_size(dynamic_lds, "--dynamic-lds"),
        vgprs=_count(vgprs, "--vgprs"), agprs=_count(agprs, "--agprs"),
        sgprs=_count(sgprs, "--sgprs"), regs=_count(regs, "--regs"),
    )
    occ = occupancy(target, res)
    if as_json:
        doc = occ.to_dict()
        doc["inputs"] = res.__dict__
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
