# Sourced by device scripts under benchmarks/records/<topic>/ (run from the repository root on the
# lent GPU machine): installs the wheel carried in .whl/ to /tmp/site, sets the environment the
# records ran under, prints the revision and the GPU, and defines
#   el                       seconds since sourcing, as "  [N s]"
#   stage NAME LIMIT ARGS... pytest ARGS under a time limit, its log in $OUT/NAME.log
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
export OCCTUNE_RESULTS=$PWD/results
echo "revision $(cat .whl/REVISION)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$(date +%s)
el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
stage() { local name=$1 limit=$2; shift 2; timeout "$limit" python3 -m pytest -q -p no:cacheprovider "$@" \
          > "$OUT/$name.log" 2>&1; echo "== $name rc=$?"; tail -n 3 "$OUT/$name.log"; el; }
