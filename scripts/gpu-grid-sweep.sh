#!/usr/bin/env bash
# Sweeps the GPU back end's grid caps on a GPU machine, with the bundle of scripts/gpu-bundle:
# the 2-D cap (WEFT_GPU_ROWS_BLOCKS, default 2^14) for the stencil, the 1-D cap
# (WEFT_GPU_BLOCKS, default 2^16) for Black-Scholes and CG; one process per value, the
# default first and last (to see the drift). Prints one line per run: the workload, the cap,
# the median milliseconds per iteration and the floor ratio. Results do not depend on the
# caps; only the time may.
#
#   bash scripts/gpu-grid-sweep.sh [BUNDLE]        # BUNDLE: default target/gpu-bundle
#
# WEFT_GPU_CHECK_DEVICE=sim runs it on the PTX simulator at small sizes, to try the script.
set -uo pipefail

bin=${1:-target/gpu-bundle}/weft-gpu-check
device=${WEFT_GPU_CHECK_DEVICE:-gpu}
flags=(--device "$device")
[[ $device == sim ]] && flags+=(--small)
export WEFT_CACHE_DIR=${TMPDIR:-/tmp}/weft-grid-sweep-cache

one() {
    local label=$1
    shift
    local out
    out=$(timeout -s KILL 30 env "$@" "$bin" bench "${flags[@]}" --workload "$workload" 2>/dev/null |
        tail -n 1)
    python3 -c '
import json, sys
label = sys.argv[1]
try:
    w = next(iter(json.loads(sys.argv[2])["workloads"].values()))
    print(label, round(w["seconds_per_iter"] * 1e3, 4), round(w.get("floor_ratio", 0.0), 3), flush=True)
except Exception as e:
    print(label, "failed:", e, flush=True)
' "$label" "$out"
}

workload=stencil
for b in 16384 2048 4096 8192 32768 65536 16384; do
    one "stencil rows_blocks=$b" WEFT_GPU_ROWS_BLOCKS=$b
done
for workload in black-scholes cg; do
    for b in 65536 8192 16384 32768 131072 262144 65536; do
        one "$workload blocks=$b" WEFT_GPU_BLOCKS=$b
    done
done
