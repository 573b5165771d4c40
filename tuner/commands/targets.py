"""`tune targets`: the known targets and the detected local device."""

from __future__ import annotations

import click
from rich.table import Table

from occtune.output import console, emit_json
from occtune.model.targets import all_targets, detect


@click.command("targets")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def command(as_json: bool) -> None:
    """List known GPU targets (with their unconfirmed parameters) and the local device."""
    targets = all_targets()
    local = detect()
    if as_json:
        emit_json({
            "targets": {n: {"vendor": t.vendor, "description": t.description, "file": t.path,
                            "params": {k: {"value": p.value, "source": p.source, "confidence": p.confidence}
                                       for k, p in t.params.items()}}
                        for n, t in targets.items()},
            "local_device": local,
        })
        return
    table = Table(title="Known targets", title_justify="left")
    for col in ("target", "vendor", "description", "CUs/SMs", "LDS/CU", "max LDS/WG", "unconfirmed"):
        table.add_column(col)
    for name, t in targets.items():
        units = t.compute_units if t.is_amd else t.sms
        lds = t.lds_per_cu if t.is_amd else t.shared_per_sm
        mx = t.max_lds_per_workgroup if t.is_amd else t.max_shared_per_block_optin
        table.add_row(name, t.vendor, t.description, str(units), f"{lds // 1024} KiB", f"{mx // 1024} KiB",
                      ", ".join(t.unconfirmed()) or "-")
    console.print(table)
    console.print(f"local device: {local['device']}" + (f" -> target {local['target']}" if local["target"] else ""))
