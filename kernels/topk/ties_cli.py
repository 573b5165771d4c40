"""`tune ties`: tie-candidate statistics of score rows (real dumps or synthetic families).

For every row the radix top-k kernel stores the population of its threshold bin in dynamic LDS;
this command reports that population per coarse-key width, the smallest budget that holds every
row (and 99.9% of rows), and how many rows would overflow each budget of a sweep.
"""

from __future__ import annotations

import time

import click
from rich.table import Table

from occtune.errors import UserError
from occtune.output import console, emit_json, err_console
from occtune.kernels.topk import BITS_RULE, K_RULE
from occtune.units import format_size
from occtune.validate import NON_NEGATIVE, POSITIVE_INT, SIZE_LIST, Value, ValueList

DEFAULT_BUDGETS = "32K,40K,48K,128K"
DEFAULT_LENGTHS = "8K,64K,128K,1M"
PROGRESS_MIN_BYTES = 256 << 20
MAX_SYNTHETIC_VALUES = 1 << 30        # 4 GiB of float32 per family and length


def _fmt_len(n: int) -> str:
    for unit, size in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def _budget_cell(nbytes: int) -> str:
    return "0" if nbytes == 0 else f"{nbytes / 1024:.1f} KiB"


@click.command("ties")
@click.option("--scores", "scores_path", type=click.Path(dir_okay=False, path_type=str),
              help="Score dump [B, L] (.pt, .npy, .npz, .safetensors; float32, bf16 or fp16). "
                   "Without it: synthetic families.")
@click.option("--key", help="Name of the scores tensor in a dict-like file (default: 'scores').")
@click.option("--lengths-file", type=click.Path(dir_okay=False, path_type=str),
              help="Valid length per row (.npy, .npz, .pt, .safetensors, .txt); "
                   "default: the file's own 'lengths', else the full row.")
@click.option("--bits", type=ValueList(BITS_RULE, "8,12"), default="8,12", show_default=True,
              help="Coarse-key widths the kernel has (8, 12).")
@click.option("--k", "k", default=2048, show_default=True, type=Value(K_RULE), help="Top-k size K (1..2048).")
@click.option("--budgets", type=SIZE_LIST, default=DEFAULT_BUDGETS, show_default=True,
              help="Dynamic LDS budgets to check for overflow.")
@click.option("--bytes-per-entry", default=8, show_default=True, type=POSITIVE_INT,
              help="LDS bytes per tie candidate (8: double-buffered 4-byte indices).")
@click.option("--families", default="all", show_default=True,
              help="Synthetic families (no --scores): normal, heavy-tailed, low-entropy, "
                   "bf16-rounded, relu, narrow, or 'all'.")
@click.option("--lengths", "lengths", type=SIZE_LIST, default=DEFAULT_LENGTHS, show_default=True,
              help="Synthetic row lengths (no --scores); K = 1024, M = 1024*1024.")
@click.option("--rows", default=16, show_default=True, type=POSITIVE_INT, help="Synthetic rows per family/length.")
@click.option("--seed", default=0, show_default=True, type=Value(NON_NEGATIVE), help="Synthetic seed.")
@click.option("--chunk-rows", type=POSITIVE_INT, help="Rows read per chunk (default: ~8 MiB of scores).")
@click.option("--per-row", is_flag=True, help="With --json: include every row's candidates.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def command(scores_path, key, lengths_file, bits, k, budgets, bytes_per_entry, families,
            lengths, rows, seed, chunk_rows, per_row, as_json):
    """Tie-candidate counts per row exactly as the radix top-k kernel bins them."""
    if scores_path is None:
        if lengths_file or key:
            raise UserError("--lengths-file and --key need --scores FILE")
        _synthetic(bits, k, budgets, bytes_per_entry, families, lengths, rows, seed, as_json)
        return
    _from_file(scores_path, key, lengths_file, bits, k, budgets, bytes_per_entry,
               chunk_rows, per_row, as_json)


# ----------------------------------------------------------------------------- real scores


def _from_file(path, key, lengths_file, bits, k, budgets, bpe, chunk_rows, per_row, as_json):
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from occtune.kernels.topk.scorefiles import open_scores
    from occtune.kernels.topk.ties import tie_stats_from_file

    src = open_scores(path, key)     # fail fast on a bad file, before any progress bar
    show = src.nbytes >= PROGRESS_MIN_BYTES
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/"
                  "{task.total} rows"), TimeRemainingColumn(), console=err_console,
                  disable=not show, transient=True) as bar:
        task = bar.add_task(f"binning {src.path.name}", total=src.rows)
        st = tie_stats_from_file(path, bits=bits, k=k, lengths=lengths_file, chunk_rows=chunk_rows,
                                 key=key, progress=lambda done, total: bar.update(task, completed=done))
    st.require_finite_data(str(path))
    doc = st.to_dict(budgets, bpe, per_row=per_row)
    doc["lengths_from"] = ("file " + str(lengths_file) if lengths_file else
                           "the score file" if src.lengths is not None else "full rows")
    if as_json:
        emit_json(doc)
        return
    console.print(f"[bold]{path}[/]: {st.rows} rows x {st.length} {st.dtype}")
    console.print(f"lengths: {doc['lengths_from']}; K={k}; rows longer than K (the only ones "
                  f"with candidates): {st.radix_rows}")
    _candidates_table(st, bpe)
    _overflow_table(st, budgets, bpe)
    if st.nonfinite_rows:
        console.print(f"[yellow]NaN/inf:[/] {st.nonfinite_note()}")
    if st.seconds > 0:
        err_console.print(f"binned in {st.seconds:.2f} s ({doc.get('gb_per_s', 0):.2f} GB/s of "
                          "valid scores, counted as float32)")


def _candidates_table(st, bpe):
    t = Table(title="tie candidates per row (threshold-bin population)", title_justify="left")
    for name in ("bits", "bins", "mean", "p99", "p99.9", "max", "budget: all rows", "budget: 99.9%"):
        t.add_column(name, justify="right")
    for b in st.bits:
        c = st.candidates[b]
        t.add_row(str(b), str(1 << b), f"{c.mean():.0f}" if c.size else "0",
                  str(st.quantile(b, 0.99)), str(st.quantile(b, 0.999)), str(st.max_candidates[b]),
                  _budget_cell(st.required_budget_bytes(b, 1.0, bpe)),
                  _budget_cell(st.required_budget_bytes(b, 0.999, bpe)))
    console.print(t)


def _overflow_table(st, budgets, bpe):
    if not budgets:
        return
    t = Table(title=f"rows that would overflow each budget ({bpe} B per candidate)",
              title_justify="left")
    t.add_column("budget", justify="right")
    t.add_column("entries", justify="right")
    for b in st.bits:
        t.add_column(f"{b}-bit rows over", justify="right")
    for budget in budgets:
        cells = []
        for b in st.bits:
            n = st.overflow_rows(b, budget, bpe)
            style = "bold red" if n else "green"
            cells.append(f"[{style}]{n}[/] ({n / max(1, st.rows):.1%})")
        t.add_row(format_size(budget), str(budget // bpe), *cells)
    console.print(t)


# ----------------------------------------------------------------------------- synthetic


def _synthetic(bits, k, budgets, bpe, families, lengths, rows, seed, as_json):
    from occtune.kernels.topk.synthetic import FAMILIES, parse_families, synthetic_scores
    from occtune.kernels.topk.ties import tie_stats

    names = parse_families(families)
    if rows * max(lengths) > MAX_SYNTHETIC_VALUES:
        raise UserError(f"--rows {rows} x --lengths {_fmt_len(max(lengths))} is more than the "
                        f"{MAX_SYNTHETIC_VALUES >> 28} GiB of float32 one synthetic draw may take; "
                        "use fewer rows or shorter lengths")
    results = []
    t0 = time.perf_counter()
    with err_console.status("generating and binning synthetic rows") as status:
        for fam in names:
            for L in lengths:
                status.update(f"{fam}, L={_fmt_len(L)}")
                st = tie_stats(synthetic_scores(fam, rows, L, seed), bits=bits, k=k)
                st.source = f"synthetic:{fam}"
                results.append((fam, L, st))
    if as_json:
        emit_json({"k": k, "rows": rows, "seed": seed, "bytes_per_entry": bpe,
                   "families": {f: FAMILIES[f][1] for f in names},
                   "results": [{"family": f, "length": L, **st.to_dict(budgets, bpe)}
                               for f, L, st in results]})
        return
    t = Table(title=f"synthetic rows: tie candidates per row ({rows} rows each, K={k})",
              title_justify="left")
    t.add_column("family")
    t.add_column("L", justify="right")
    for b in bits:
        t.add_column(f"{b}b p99.9", justify="right")
        t.add_column(f"{b}b max", justify="right")
        t.add_column(f"{b}b budget", justify="right")
    for fam, L, st in results:
        cells = []
        for b in bits:
            cells += [str(st.quantile(b, 0.999)), str(st.max_candidates[b]),
                      _budget_cell(st.required_budget_bytes(b, 1.0, bpe))]
        t.add_row(fam, _fmt_len(L), *cells)
    console.print(t)
    for f in names:
        console.print(f"  {f}: {FAMILIES[f][1]}")
    err_console.print(f"done in {time.perf_counter() - t0:.1f} s")
