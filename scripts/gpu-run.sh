#!/usr/bin/env bash
# Runs every stage of the GPU bundle (scripts/gpu-bundle) on a GPU machine, each under
# `timeout -s KILL`, and writes one JSON summary, $OUT/gpu-summary.json, and every stage's
# raw output, $OUT/gpu-logs.txt. A stage that fails, crashes or runs out of time is recorded
# as such (its exit code and the tail of its stderr) and the next stage runs. Needs bash,
# coreutils' timeout and python3 (which assembles the summary); no Rust toolchain.
#
#   bash scripts/gpu-run.sh [BUNDLE]        # BUNDLE: default target/gpu-bundle
#
# The stages and their time limits (seconds; 465 in all with nvidia-smi's 15, so the run ends
# within 8 minutes even if every stage runs out of time): env 20, bits 60 (each child at most
# 30), jit 40, the five benchmarks 20 each, the CuPy/JAX/PyTorch op-by-op baselines 90 (each
# framework at most 35), the hand-fused peers of scripts/gpu-peers.py 140 (CuPy kernels and
# torch.compile, each at most 65).
#
# Without a GPU: WEFT_GPU_CHECK_DEVICE=sim runs every stage on the PTX simulator at small
# sizes (WEFT_GPU_CHECK_SMALL=1, the default with sim), so the script can be tried anywhere.
# WEFT_GPU_CHECK_BASELINES=0 skips the Python baselines and peers; WEFT_GPU_CHECK_FRAMEWORKS picks their
# frameworks (default all: cupy, jax, torch; `numpy` runs them on the CPU, to try the script).
set -uo pipefail

bundle=${1:-target/gpu-bundle}
device=${WEFT_GPU_CHECK_DEVICE:-gpu}
if [[ $device == sim ]]; then default_small=1; else default_small=0; fi
small=${WEFT_GPU_CHECK_SMALL:-$default_small}
baselines=${WEFT_GPU_CHECK_BASELINES:-1}
frameworks=${WEFT_GPU_CHECK_FRAMEWORKS:-all}
out=${OUT:-target/gpu-out}
bin=$bundle/weft-gpu-check
mkdir -p "$out"
work=$(mktemp -d "${TMPDIR:-/tmp}/weft-gpu-run.XXXXXX")
# The plugins' compiled components, shared by every stage and child.
export WEFT_CACHE_DIR=$work/component-cache
export PYTHONUNBUFFERED=1
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
t0=$(date +%s.%N)

flags=(--device "$device")
[[ $small == 1 ]] && flags+=(--small)

# stage NAME LIMIT COMMAND...: runs COMMAND under `timeout -s KILL LIMIT` (its process group,
# children included), its stdout and stderr to $work/NAME.out and .err, and one row of
# $work/stages.tsv: name, limit, exit code, seconds.
stage() {
    local name=$1 limit=$2
    shift 2
    echo "== $name (limit ${limit}s)" >&2
    local start end rc
    start=$(date +%s.%N)
    timeout -s KILL "$limit" "$@" >"$work/$name.out" 2>"$work/$name.err" </dev/null
    rc=$?
    end=$(date +%s.%N)
    printf '%s\t%s\t%s\t%s\n' "$name" "$limit" "$rc" "$(awk "BEGIN { print $end - $start }")" \
        >>"$work/stages.tsv"
    echo "   exit $rc" >&2
}

: >"$work/stages.tsv"
# The GPU's name, driver, memory, compute capability and top clocks (a shorter query if this
# driver's nvidia-smi lacks a field).
query=name,driver_version,memory.total,compute_cap,clocks.max.sm,clocks.max.mem
timeout -s KILL 10 nvidia-smi --query-gpu=$query --format=csv,noheader \
    >"$work/nvidia-smi.csv" 2>"$work/nvidia-smi.err" ||
    timeout -s KILL 5 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader \
        >"$work/nvidia-smi.csv" 2>>"$work/nvidia-smi.err"
echo "$?" >"$work/nvidia-smi.rc"

if [[ -x $bin ]]; then
    stage env 20 "$bin" env "${flags[@]}"
    stage bits 60 "$bin" bits "${flags[@]}" --timeout 30 --budget 50
    kernels=()
    [[ -f $bundle/kernels.jsonl ]] && kernels=(--kernels "$bundle/kernels.jsonl")
    stage jit 40 "$bin" jit "${flags[@]}" ${kernels[@]+"${kernels[@]}"}
    for w in black-scholes stencil cg bicgstab jacobi; do
        stage "bench.$w" 20 "$bin" bench "${flags[@]}" --workload "$w"
    done
else
    echo "no executable $bin: build the bundle with scripts/gpu-bundle" >"$work/missing-binary.err"
fi
if [[ $baselines == 1 ]]; then
    py=(python3 "$bundle/gpu_baselines.py")
    [[ -f $bundle/gpu_baselines.py ]] || py=(python3 scripts/gpu_baselines.py)
    pyflags=(--timeout 35 --framework "$frameworks")
    [[ $small == 1 ]] && pyflags+=(--small)
    stage baselines 90 "${py[@]}" "${pyflags[@]}"
    peers=(python3 "$bundle/gpu-peers.py")
    [[ -f $bundle/gpu-peers.py ]] || peers=(python3 scripts/gpu-peers.py)
    peerflags=(--timeout 65)
    [[ $small == 1 ]] && peerflags+=(--small)
    stage peers 140 "${peers[@]}" "${peerflags[@]}"
fi

t1=$(date +%s.%N)
WORK=$work BUNDLE=$bundle DEVICE=$device SMALL=$small STARTED=$started T0=$t0 T1=$t1 OUTDIR=$out \
    python3 - <<'PY'
import json, os, socket

work, out = os.environ["WORK"], os.environ["OUTDIR"]

def read(name, default=""):
    try:
        with open(os.path.join(work, name), errors="replace") as f:
            return f.read()
    except OSError:
        return default

def json_lines(text):
    lines = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                lines.append(json.loads(line))
            except ValueError:
                pass
    return lines

summary = {
    "started": os.environ["STARTED"],
    "host": socket.gethostname(),
    "device": os.environ["DEVICE"],
    "small": os.environ["SMALL"] == "1",
    "bundle": os.environ["BUNDLE"],
}
try:
    with open(os.path.join(os.environ["BUNDLE"], "manifest.json")) as f:
        summary["manifest"] = json.load(f)
except (OSError, ValueError) as e:
    summary["manifest"] = {"error": str(e)}

smi = read("nvidia-smi.csv").strip()
if read("nvidia-smi.rc").strip() == "0" and smi:
    keys = ["name", "driver_version", "memory_total", "compute_cap", "clocks_max_sm", "clocks_max_mem"]
    summary["nvidia_smi"] = [dict(zip(keys, (v.strip() for v in row.split(",")))) for row in smi.splitlines()]
else:
    summary["nvidia_smi"] = {"error": (read("nvidia-smi.err").strip() or "nvidia-smi failed")[-500:]}
if read("missing-binary.err"):
    summary["error"] = read("missing-binary.err").strip()

stages, baselines = {}, []
for row in read("stages.tsv").splitlines():
    name, limit, rc, seconds = row.split("\t")
    rc, limit = int(rc), float(limit)
    try:
        seconds = float(seconds)
    except ValueError:
        seconds = None
    lines = json_lines(read(name + ".out"))
    err = read(name + ".err")
    if name in ("baselines", "peers"):
        baselines = baselines + lines
        stages[name] = {"ok": rc == 0, "exit_code": rc, "wall_seconds": seconds,
                        "lines": len(lines),
                        "available": sorted({b["framework"] for b in lines
                                             if b.get("workload") == "info" and b.get("available")})}
        if rc != 0:
            stages[name]["error"] = ("killed at its time limit" if rc == 137 else
                                     f"a framework failed or ran out of time (see {name})")
            stages[name]["stderr_tail"] = err[-1500:]
        continue
    rec = dict(lines[-1]) if lines else {}
    rec["exit_code"] = rc
    rec["wall_seconds"] = seconds
    if rc == 137 and seconds is not None and seconds >= limit - 1:
        rec.update(ok=False, timed_out=True, error=f"killed at its time limit ({limit:.0f} s)")
    elif not lines:
        rec.update(ok=False, crashed=True, error=f"no JSON line (exit code {rc})")
    elif rc != 0:
        rec["ok"] = False
    if not rec.get("ok"):
        rec["stderr_tail"] = err[-1500:]
    stages[name] = rec
summary["stages"] = stages
summary["baselines"] = baselines

# The five workloads side by side: Weft's time and floor ratio, and each framework's.
side = {}
for name, rec in stages.items():
    if name.startswith("bench."):
        for w, r in (rec.get("workloads") or {}).items():
            side.setdefault(w, {})["weft"] = {k: r.get(k) for k in (
                "ok", "seconds_per_iter", "floor_ratio", "probe_gbs", "bytes_per_iter",
                "unfused_seconds", "fused_vs_unfused", "error")
                if r.get(k) is not None}
for b in baselines:
    w, fw = b.get("workload"), b.get("framework")
    if w in ("black-scholes", "stencil", "cg", "bicgstab", "jacobi"):
        side.setdefault(w, {})[fw] = {k: b.get(k) for k in (
            "ok", "seconds_per_iter", "floor_ratio", "probe_gbs", "gemv_seconds", "error")
            if b.get(k) is not None}
for w, row in side.items():
    weft = row.get("weft", {}).get("seconds_per_iter")
    for fw, r in row.items():
        if fw != "weft" and weft and r.get("seconds_per_iter"):
            r["seconds_vs_weft"] = r["seconds_per_iter"] / weft
summary["side_by_side"] = side

summary["ok"] = bool(stages) and all(
    r.get("ok") for n, r in stages.items() if n not in ("baselines", "peers")) and "error" not in summary
summary["wall_seconds"] = float(os.environ["T1"]) - float(os.environ["T0"])
with open(os.path.join(out, "gpu-summary.json"), "w") as f:
    json.dump(summary, f, indent=1, allow_nan=False, default=str)
    f.write("\n")

# Every stage's raw output in one file (the device tool brings back few files).
with open(os.path.join(out, "gpu-logs.txt"), "w") as f:
    for name in ["nvidia-smi.csv", "nvidia-smi.err"] + [
            s + ext for s in stages for ext in (".out", ".err")]:
        f.write(f"===== {name}\n{read(name)}\n")

short = {n: ("ok" if r.get("ok") else ("timed out" if r.get("timed_out") else "FAILED"))
         for n, r in stages.items()}
print(json.dumps({"ok": summary["ok"], "stages": short,
                  "wall_seconds": round(summary["wall_seconds"], 1),
                  "summary": os.path.join(out, "gpu-summary.json")}))
raise SystemExit(0 if summary["ok"] else 3)
PY
rc=$?
rm -rf "$work"
# 0: every stage passed; 3: the summary was written and some stage failed; else: no summary.
exit $rc
