"""Summarise ncu_finish_<bits>.csv.gz (Nsight Compute source page, SASS): warp instructions
executed in total and per block of 100 SASS instructions, memory operations, barriers, shared
atomics and votes. Run here: python3 ncu_summary.py r2_ncu_a573dd4"""
import csv
import gzip
import sys
from pathlib import Path

d = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
for bits in (12, 8):
    rows = list(csv.reader(gzip.open(d / f"ncu_finish_{bits}.csv.gz", "rt")))
    h = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    hdr, data = rows[h], rows[h + 1:]
    E, A, O = hdr.index("Instructions Executed"), hdr.index("Address Space"), hdr.index("Access Operation")
    ex = [int(r[E]) if r[E].isdigit() else 0 for r in data]
    print(f"== {bits}-bit: {sum(ex)} warp instructions executed, {len(data)} SASS instructions")
    blocks = {}
    for i, e in enumerate(ex):
        blocks[i // 100] = blocks.get(i // 100, 0) + e
    for k, v in sorted(blocks.items(), key=lambda x: -x[1])[:8]:
        print(f"  SASS {k * 100}-{k * 100 + 99}: {v}")
    mem = {}
    for r, e in zip(data, ex):
        if r[A] not in ("-", ""):
            mem[f"{r[A]} {r[O]}"] = mem.get(f"{r[A]} {r[O]}", 0) + e
    print("  memory:", mem)
    for op in ("BAR", "ATOMS", "VOTE"):
        print(f"  {op}: {sum(e for r, e in zip(data, ex) if op in r[1])}")
