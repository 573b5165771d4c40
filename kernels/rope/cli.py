"""`tune rope`: sweep the Triton RoPE kernel's variant x BLOCK_M x num_warps on DeepSeek-V4's shapes.

On the local GPU's target: the timed sweep through the engine (tuner/timed.py), results in
``<out>/<target>/rope.yaml``. On any other target (or with --analytic): each config is
cross-compiled for that target without a GPU and the table shows what the compiler allotted
(registers, LDS) and the occupancy model's verdict; nothing is timed and nothing is written.
"""

from __future__ import annotations

import itertools

import click

from occtune.errors import UserError
from occtune.units import parse_int_list

DEFAULT_TOKENS = (1, 64, 1024, 8192, 32768)
DEFAULT_VARIANTS = "flat,batched"     # the reported fastest shape and sglang's default; 'all' for every one
HEAD_DIM = 512                        # DeepSeek-V4: rope on the last 64 columns of a 512-wide head


def parse_shape(text: str) -> dict:
    parts = [p.strip() for p in str(text).split(",")]
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise UserError(f"--shape {text!r}: expected three positive integers T,H,D (tokens, heads, rope dim), "
                        f"e.g. --shape 8192,128,64")
    T, H, D = (int(p) for p in parts)
    if D % 2:
        raise UserError(f"--shape {text}: the rope dim D={D} must be even (rotations act on pairs)")
    from occtune.kernels.rope.family import deepseek_workload

    return deepseek_workload(T, H, D, head_dim=max(HEAD_DIM, D))


def parse_grid(block_m: str, num_warps: str, variants: str) -> list[dict]:
    from occtune.kernels.rope.config import BLOCK_M_VALUES, NUM_WARPS_VALUES, VARIANT_NAMES

    bms = parse_int_list(block_m, "--block-m")
    nws = parse_int_list(num_warps, "--num-warps")
    for what, vals, allowed in (("--block-m", bms, BLOCK_M_VALUES), ("--num-warps", nws, NUM_WARPS_VALUES)):
        bad = [v for v in vals if v not in allowed]
        if bad:
            raise UserError(f"{what} {bad[0]} is not supported; choose from {','.join(map(str, allowed))}")
    names = list(VARIANT_NAMES) if variants.strip() == "all" else [v.strip() for v in variants.split(",") if v.strip()]
    bad = [v for v in names if v not in VARIANT_NAMES]
    if bad or not names:
        raise UserError(f"--variants {variants!r}: choose from {','.join(VARIANT_NAMES)} (or 'all')")
    return [{"variant": v, "BLOCK_M": b, "num_warps": n} for v, b, n in itertools.product(
        dict.fromkeys(names), dict.fromkeys(bms), dict.fromkeys(nws))]


def _local_target() -> str | None:
    from occtune.targets import detect

    return detect()["target"]


@click.command("rope")
@click.option("--block-m", default="8,16,32,64,128", show_default=True, help="BLOCK_M values to sweep.")
@click.option("--num-warps", default="1,2,4,8", show_default=True, help="num_warps values to sweep.")
@click.option("--variants", default=DEFAULT_VARIANTS, show_default=True,
              help="Kernel variants (token,batched,tile,flat,heads) or 'all'.")
@click.option("--shape", "shapes", multiple=True, metavar="T,H,D",
              help="Workload (tokens, heads, rope dim); repeatable. Default: DeepSeek-V4, "
                   "T in 1,64,1024,8192,32768, H=128, D=64, inverse, on a 512-wide head.")
@click.option("--target", "target_name", help="Target (default: the local GPU). Another target: analytic table.")
@click.option("--analytic", is_flag=True, help="Cross-compiled resources and occupancy only, even on the GPU.")
@click.option("--out", "out_dir", default="results", show_default=True, help="Results folder.")
@click.option("--fresh", is_flag=True, help="Ignore the point cache and re-measure everything.")
@click.option("--devices", help="GPU indices to spread the sweep over, e.g. 0,1 (one worker process each).")
@click.option("--timeout", "timeout_s", type=float, default=120.0, show_default=True,
              help="Seconds per config in a worker before it is declared hung (with --devices/--isolate).")
@click.option("--isolate", is_flag=True, help="Run in a worker process (survives hangs and crashes).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def command(block_m, num_warps, variants, shapes, target_name, analytic, out_dir, fresh, devices,
            timeout_s, isolate, as_json):
    """Sweep BLOCK_M x num_warps (x variant) of the RoPE kernel; writes results/<target>/rope.yaml."""
    from occtune.kernels.rope.family import DEEPSEEK_TOKENS, deepseek_workload
    from occtune.targets import load_target
    from occtune.timed import parse_devices

    configs = parse_grid(block_m, num_warps, variants)
    workloads = [parse_shape(s) for s in shapes] or [deepseek_workload(t) for t in DEEPSEEK_TOKENS]
    devs = parse_devices(devices)
    local = _local_target()
    name = target_name or local
    if name is None:
        raise UserError("no GPU found here; pass --target (e.g. --target gfx950 or --target sm_90) for the "
                        "analytic table of cross-compiled resources and occupancy")
    target = load_target(name)
    if analytic or name != local:
        _analytic(target, configs, workloads, as_json)
        return
    _timed(target, configs, workloads, out_dir, fresh, devs, timeout_s, isolate, as_json)


def _representative(workloads: list[dict]) -> dict:
    """The workload whose specialisation the resources are read from: the largest T."""
    return max(workloads, key=lambda w: w["T"])


def _valid_configs(configs, workloads):
    from occtune.kernels.rope.family import RopeFamily

    fam = RopeFamily(workloads)
    out, skipped = [], []
    for c in configs:
        why = [fam.is_valid(c, w) for w in workloads]
        (out if any(ok for ok, _ in why) else skipped).append((c, next((r for ok, r in why if not ok), "")))
    return [c for c, _ in out], skipped


def resource_row(config: dict, target, workload: dict) -> dict:
    """Cross-compiled resources of one config on ``target`` and the occupancy model's verdict."""
    from occtune.kernels.rope.resources import compiled_info, compiled_resources
    from occtune.occupancy import KernelResources, occupancy

    row = dict(config)
    try:
        r = compiled_resources(config, target.name, workload)
        info = compiled_info(config, target.name, workload)
    except UserError:
        raise
    except Exception as e:  # noqa: BLE001 - a compiler failure is this config's row, not a crash
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return {**row, "compiled": False, "reason": f"compile failed: {msg[:120]}"}
    occ = occupancy(target, KernelResources(threads=r.threads, static_lds=r.static_lds, dynamic_lds=r.dynamic_lds,
                                            vgprs=r.vgprs or 0, agprs=r.agprs or 0, sgprs=r.sgprs or 0,
                                            regs=r.regs or 0))
    row.update({"compiled": True, "threads": r.threads, "regs": r.regs, "vgprs": r.vgprs, "sgprs": r.sgprs,
                "agprs": r.agprs, "lds_bytes": r.static_lds + r.dynamic_lds, "fits": occ.fits,
                "reason": occ.reason, "blocks_per_cu": occ.blocks_per_cu,
                "waves_per_simd": occ.waves_per_simd, "warps_per_sm": occ.warps_per_sm,
                "occupancy": round(occ.occupancy, 4), "limiter": occ.limiter,
                "compiler_occupancy": info.get("compiler_occupancy"), "resources_source": r.source})
    return row


def _analytic(target, configs, workloads, as_json) -> None:
    from occtune import provenance
    from occtune.output import console, emit_json, err_console

    valid, skipped = _valid_configs(configs, workloads)
    wl = _representative(workloads)
    rows = []
    with err_console.status(f"cross-compiling {len(valid)} configs for {target.name}") if not as_json \
            else _nullcontext():
        for c in valid:
            rows.append(resource_row(c, target, wl))
    if rows and not any(r["compiled"] for r in rows):
        raise UserError(f"Triton could not compile the RoPE kernel for {target.name} here "
                        f"({rows[0]['reason']}); is Triton's {'AMD' if target.is_amd else 'NVIDIA'} backend installed?")
    label = ("analytic: resources of each config cross-compiled by Triton for "
             f"{target.name} (no GPU), occupancy from the model; nothing timed")
    if as_json:
        emit_json({"family": "rope", "target": target.name, "timed": False, "analytic": True, "label": label,
                   "resources_workload": wl, "rows": rows,
                   "skipped": [{"config": c, "reason": why} for c, why in skipped],
                   "unconfirmed_target_parameters": target.unconfirmed(),
                   "provenance": provenance.collect(target_file=target.path)})
        return
    _print_analytic(target, rows, skipped, wl, label, console)


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _print_analytic(target, rows, skipped, wl, label, console) -> None:
    from rich.table import Table

    unit = "CU" if target.is_amd else "SM"
    console.print(f"[bold]tune rope --target {target.name}[/]: {label}")
    console.print(f"resources read for T={wl['T']} H={wl['H']} D={wl['D']} (head {wl['head_dim']}, {wl['dtype']})")
    t = Table()
    regs = ("VGPRs", "SGPRs") if target.is_amd else ("regs",)
    for c in ("variant", "BLOCK_M", "warps", "threads", *regs, "LDS B", f"blk/{unit}",
              "w/SIMD" if target.is_amd else "w/SM", "occ.", "limiter"):
        t.add_column(c, justify="left" if c in ("variant", "limiter") else "right")
    for r in rows:
        head = [r["variant"], str(r["BLOCK_M"]), str(r["num_warps"])]
        if not r["compiled"]:
            t.add_row(*head, *[""] * (len(regs) + 5), "", r["reason"][:40])
            continue
        nums = [str(r["vgprs"]), str(r["sgprs"])] if target.is_amd else [str(r["regs"])]
        slots = r["waves_per_simd"] if target.is_amd else r["warps_per_sm"]
        t.add_row(*head, str(r["threads"]), *nums, str(r["lds_bytes"]),
                  str(r["blocks_per_cu"]) if r["fits"] else "no fit", str(slots if r["fits"] else "-"),
                  f"{r['occupancy']:.0%}", r["limiter"] if r["fits"] else "no fit")
    console.print(t)
    for r in rows:
        if r["compiled"] and not r["fits"]:
            console.print(f"no fit: {r['variant']} BLOCK_M={r['BLOCK_M']} num_warps={r['num_warps']}: {r['reason']}")
    for c, why in skipped:
        console.print(f"skipped {c['variant']} BLOCK_M={c['BLOCK_M']} num_warps={c['num_warps']}: {why}")
    if target.unconfirmed():
        console.print(f"[yellow]unconfirmed target parameters:[/] {', '.join(target.unconfirmed())}")


def _timed(target, configs, workloads, out_dir, fresh, devices, timeout_s, isolate, as_json) -> None:
    from occtune.kernels.rope.family import RopeFamily
    from occtune.timed import run_timed

    fam = RopeFamily(workloads)
    wl = _representative(workloads)
    analytic: dict[str, dict] = {}

    def annotate(config):
        from occtune.engine.family import key_of

        k = key_of(config)
        if k not in analytic:
            r = resource_row(config, target, wl)
            analytic[k] = {c: r.get(c) for c in ("regs", "vgprs", "sgprs", "lds_bytes", "blocks_per_cu", "occupancy")
                           if r.get(c) is not None}
        return analytic[k]

    unit = "CU" if target.is_amd else "SM"
    cols = [(f"blocks/{unit}", lambda rows: _first(rows, "blocks_per_cu")),
            ("VGPRs" if target.is_amd else "regs", lambda rows: _first(rows, "vgprs" if target.is_amd else "regs"))]
    run_timed(fam, target=target.name, configs=configs, workloads=workloads, device="cuda", out_dir=out_dir,
              fresh=fresh, devices=devices, timeout_s=timeout_s, isolate=isolate, as_json=as_json,
              annotate=annotate, peak_gbps=float(target.peak_hbm_bytes_per_s) / 1e9, columns=cols,
              assumptions={"resources": f"cross-compiled by Triton for {target.name} at T={wl['T']} "
                                        f"(the launcher's specialisation); occupancy from tuner/occupancy.py",
                           "peak_hbm_bytes_per_s": target.peak_hbm_bytes_per_s,
                           "workloads": "DeepSeek-V4 inverse rope, bf16, 64 rope columns of a 512-wide head"
                           if all(w["D"] == 64 and w["H"] == 128 for w in workloads) else "from --shape"})


def _first(rows, key):
    for r in rows:
        if r.get(key) is not None:
            return str(r[key])
    return ""
