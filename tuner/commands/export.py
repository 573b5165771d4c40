"""`tune export`: tuned configs as a C header, -D flags, per-workload JSON, Triton configs, or a
format the results' family adds."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from occtune.outputs import export as ex
from occtune.errors import UserError
from occtune.fsutil import atomic_write_text
from occtune.outputs.results import load_results

FORMAT_HELP = ("header (C header for hipcc/nvcc builds), flags (-D flags for $(...)), json (per-workload "
               "configs keyed by the workload dimension, vLLM/sglang style), triton (triton.Config-style "
               "dicts with the workloads each wins), or a format the results' family adds")


@click.command("export")
@click.argument("files", nargs=-1, required=True, type=click.Path())
@click.option("--format", "fmt", default="header", show_default=True, metavar="FORMAT", help=FORMAT_HELP + ".")
@click.option("--out", "out_path", type=click.Path(),
              help="Write here (atomically) instead of stdout; json/triton/family formats: a folder "
                   "(existing, or ending in /) gets one file per results file, named by device as vLLM does.")
@click.option("--target", help="header/flags: which target's values (needed when the files cover several).")
@click.option("--all-targets", is_flag=True,
              help="header: one header for every target of the files; the build picks with -DOCCTUNE_TARGET_<T>.")
def command(files, fmt, out_path, target, all_targets):
    """Export the winners of results FILES (results/<target>/<family>.yaml) for builds and serving code."""
    if target and all_targets:
        raise UserError(f"--target {target} exports that target's values, --all-targets every target's: give one")
    srcs = ex.sources([(f, load_results(f)) for f in files])
    if fmt in ("header", "flags"):
        if fmt == "header":
            text = ex.render_header(srcs, target, all_targets)
        else:
            text = ex.render_flags(srcs, target)
            click.echo(ex.flags_note(srcs, target), err=True)
        _write(out_path, text)
        return
    formats = {} if fmt in ex.BUILTIN_FORMATS else ex.family_formats(srcs)   # json/triton need no family
    if fmt not in ex.BUILTIN_FORMATS + tuple(formats):
        raise UserError(f"--format {fmt!r} is unknown; choose {', '.join(ex.BUILTIN_FORMATS + tuple(formats))}")
    if target or all_targets:
        raise UserError(f"--target and --all-targets apply to header and flags; --format {fmt} exports each file")
    if len(srcs) > 1 and not ex.out_is_folder(out_path):
        raise UserError(f"--format {fmt} writes one file per results file: pass --out FOLDER/ "
                        f"(or one results file)")
    texts = [(str(Path(out_path) / ex.file_name(src, fmt)) if ex.out_is_folder(out_path) else out_path,
              ex.render_one(src, fmt, formats)) for src in srcs]      # all rendered before any is written
    for path, text in texts:
        _write(path, text)


def _write(out_path: str | None, text: str) -> None:
    if out_path:
        atomic_write_text(out_path, text)
        click.echo(f"wrote {out_path}", err=True)
    else:
        sys.stdout.write(text)
