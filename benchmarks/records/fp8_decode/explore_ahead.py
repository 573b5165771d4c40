#!/usr/bin/env python3
"""Device call 7 of issue 32 (H200): PIPE 10 with its scales loaded one step ahead (as committed
then) against two steps ahead (AHEAD=2, as PIPE 7), with ab_switch.py's method.

    python3 benchmarks/records/fp8_decode/explore_ahead.py --out $OUT/ahead.json
"""
from ab_switch import main

if __name__ == "__main__":
    main("AHEAD", (1, 2), same_bits=False, default_out="ahead.json")
