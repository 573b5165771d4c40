#!/usr/bin/env python3
"""Device call 9 of issue 32 (H200): PIPE 10's split epilogue with the tile's last program adding
its own partial from registers (OWN=1) against re-reading it from the workspace (OWN=0, as
d87ec5b), with ab_switch.py's method (the two outputs compared bit for bit), on a wheel with
``own.patch`` applied (it adds the OWN switch).

    python3 benchmarks/records/fp8_decode/explore_own.py --out $OUT/own.json
"""
from ab_switch import main

if __name__ == "__main__":
    main("OWN", (False, True), same_bits=True, default_out="own.json")
