#!/usr/bin/env bash
# H200, one short call: the host probe again on a fresh loan (final.sh's loan measured torch.topk's
# own host time at 15.3 us, against 9.1 on the loans before), three rounds.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"
for r in 1 2 3; do timeout 60 python3 benchmarks/host_probe.py > "$OUT/host_probe_$r.log" 2>&1; echo "round $r rc=$?"; grep -E "^B=|^  ours  |torch.topk" "$OUT/host_probe_$r.log"; done
