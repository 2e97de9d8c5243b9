#!/usr/bin/env python3
"""Hand-fused GPU peers of the five `weft-gpu-check bench` workloads.

gpu_baselines.py (beside this file) times the workloads the way each framework's users write
them: CuPy and PyTorch op by op, JAX under `jax.jit` (that is the `jax` framework there; it is
not repeated here). This script times what a careful user gets by fusing by hand, with the
same workloads, sizes, inputs, compulsory bytes and copy probe (all taken from
gpu_baselines), so that Weft's numbers can be set beside the best of each framework:

  cupy-fused     CuPy with hand-written kernels. Black-Scholes: one ElementwiseKernel (call
                 and put, erf form, gpu_baselines' formula). Stencil: one RawKernel per sweep
                 (a thread per interior point, out of place into a second grid, swapped).
                 CG and BiCGSTAB: cuSPARSE CSR SpMV (cupyx.scipy.sparse) plus RawKernels that
                 fuse each vector update with the dot products that follow it (block sums,
                 one atomicAdd per block into a per-iteration slot of device scalars, so no
                 scalar leaves the device except the residual each iteration reads, as in
                 gpu_baselines and Weft) and ElementwiseKernels for the plain updates.
                 Jacobi: cuBLAS gemv (cupy.cublas.gemv) plus one ElementwiseKernel; the line
                 also has `gemv_seconds`, cuBLAS gemv alone (Weft's Jacobi target).
  torch-compile  PyTorch with each workload's per-iteration function under torch.compile
                 (mode="default", fullgraph=True; then mode=None allowing graph breaks), f64,
                 compiled in the first warm-up iteration (`compile_seconds`). The stencil's
                 compiled unit is one sweep (called `sweeps` times per iteration); the
                 solvers try the SpMV (a torch sparse CSR tensor) inside the compiled step
                 and otherwise run it eagerly between compiled vector updates (`note` says
                 which). A compile failure is that workload's `ok: false` with the error.

Timing: warm-up first (the first warm-up iteration compiles), then `iters` iterations, each
started on a synchronized device and timed with CUDA events (cupy.cuda.Event /
torch.cuda.Event) around it, the median reported; `host_seconds_per_iter` is the same
iterations on the host clock, which is how gpu_baselines times (compare those two). The
solvers, like gpu_baselines and Weft, time each iteration up to its residual read. Counts of
warm-up and timed iterations are gpu_baselines' (COUNTS), so that the states compared are
reached after the same number of steps.

Correctness: in the same child process, each workload is first run op by op with
gpu_baselines' code for the same framework (CuPy for cupy-fused, PyTorch for torch-compile)
on the same inputs and the same number of iterations, untimed by this script (its own
seconds are reported as `op_by_op_seconds_per_iter`, host-timed as gpu_baselines does).
`checksum_rel_diff_vs_op_by_op` is |peer - op_by_op| / |op_by_op| of the checksum
(Black-Scholes: sum of call and put; stencil: sum of the grid; Jacobi: sum of x) or, for CG
and BiCGSTAB, of the final residual ratio (`compared` says which); `ok` is false when it
exceeds `tolerance` (1e-9 for the checksums, 1e-3 for the residual ratios).

Run (on the GPU machine, from the repository root):

  python3 scripts/gpu-peers.py                      # both peers, 60 s limit each
  python3 scripts/gpu-peers.py --framework cupy-fused --workload jacobi
  python3 scripts/gpu-peers.py --small              # tiny sizes, runs anywhere

Options: --framework all|cupy-fused|torch-compile (default all: each in a child process with
a time limit of --timeout seconds, default 60; a child near its limit skips the workloads it
has no time for and says so), --workload (default all), --small (gpu_baselines' small sizes).
A framework that does not import, or sees no GPU, is reported `available: false` and is not
a failure. The exit code is 0 unless a framework that imported failed a workload. (A hidden
`--device cpu` runs the same code on the CPU for testing: torch-compile with the CPU
Inductor, cupy-fused with NumPy standing in for each kernel; keep it --small.)

Output: one JSON line per framework and workload, as gpu_baselines prints them:
  {"framework": "cupy-fused"|"torch-compile", "workload": "info", "ok", "available",
   "version", "device", ...}
  {"framework", "workload": "copy-probe", "ok", "gbs", "kind", "bytes", "samples", ...}
  {"framework", "workload": "black-scholes"|"stencil"|"cg"|"bicgstab"|"jacobi", "ok",
   "warmup", "iters", "seconds_per_iter" (median, CUDA events), "seconds_min", "seconds_max",
   "host_seconds_per_iter", "timer", "bytes_per_iter", "probe_gbs", "floor_seconds",
   "floor_ratio", "gbs_effective", "checksum" (solvers: "residual_ratio"),
   "op_by_op_checksum" (solvers: "op_by_op_residual_ratio"), "compared", "tolerance",
   "checksum_rel_diff_vs_op_by_op", "op_by_op_seconds_per_iter", "speedup_vs_op_by_op"
   (op-by-op host seconds over the peer's host seconds), "note", "wall_seconds",
   workload sizes as gpu_baselines names them (options; n, grid_side, sweeps_per_iter,
   iter_unit; grid, unknowns, nnz; n), Jacobi's "gemv_seconds", "gemv_host_seconds",
   "gemv_floor_ratio", "seconds_vs_gemv"; cupy-fused's "first_call_seconds" (includes NVRTC
   compiles) and "launches_per_iter"; torch-compile's "compile_seconds", "compile_config",
   "compile_errors" (failed attempts before the one used)}
  a failed workload: {"framework", "workload", "ok": false, "error", "wall_seconds"}
  a child that timed out or crashed: {"framework", "workload": "framework", "ok": false, ...}
  and last {"framework": "gpu-peers", "workload": "summary", "ok", "wall_seconds"}.
"""

import argparse
import math
import os
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import gpu_baselines as gb  # noqa: E402  (needs the path above)

FRAMEWORKS = ["cupy-fused", "torch-compile"]
WORKLOADS = gb.WORKLOADS
ELEMENTWISE_TOL = 1e-9
SOLVER_TOL = 1e-3
# A child with less than this many seconds left skips its remaining workloads (a workload
# of torch-compile compiles first).
MIN_SECONDS_LEFT = {"cupy-fused": 6.0, "torch-compile": 12.0}
emit = gb.emit

# ------------------------------------------------------------------------------------------
# Timing.
# ------------------------------------------------------------------------------------------


class Clock:
    """CUDA events of CuPy or PyTorch around each iteration, or the host clock (CPU runs)."""

    def __init__(self, kind, sync):
        self.kind, self.sync = kind, sync
        if kind == "cupy":
            import cupy

            self._cp = cupy
            self.label = "cupy.cuda.Event"
        elif kind == "torch":
            import torch

            self._torch = torch
            self.label = "torch.cuda.Event"
        else:
            self.label = "host (time.perf_counter)"

    def events(self):
        if self.kind == "cupy":
            return self._cp.cuda.Event(), self._cp.cuda.Event()
        if self.kind == "torch":
            e = self._torch.cuda.Event
            return e(enable_timing=True), e(enable_timing=True)
        return None, None

    def elapsed(self, start, end):
        """Seconds between two recorded events, once `end` has completed."""
        end.synchronize()
        if self.kind == "cupy":
            return self._cp.cuda.get_elapsed_time(start, end) / 1e3
        return start.elapsed_time(end) / 1e3


def measure(step, clock, warmup, iters):
    """`warmup` untimed calls of step(), then `iters` timed ones, each started on a
    synchronized device: median, min and max seconds by the clock's events, and the median
    by the host clock."""
    warm = []
    for _ in range(max(warmup, 0)):
        t0 = time.perf_counter()
        step()
        clock.sync()
        warm.append(time.perf_counter() - t0)
    start, end = clock.events()
    dev, host = [], []
    for _ in range(iters):
        clock.sync()
        t0 = time.perf_counter()
        if start is not None:
            start.record()
        step()
        if start is not None:
            end.record()
            dev.append(clock.elapsed(start, end))
        else:
            clock.sync()
        host.append(time.perf_counter() - t0)
        if start is None:
            dev.append(host[-1])
    return {"seconds": statistics.median(dev), "seconds_min": min(dev),
            "seconds_max": max(dev), "host_seconds": statistics.median(host),
            "warmup_seconds": warm}


# ------------------------------------------------------------------------------------------
# cupy-fused: the kernels.
# ------------------------------------------------------------------------------------------

# The solvers' device scalars: row k of `sc` (NS doubles) holds iteration k's. Every row is
# zero before its iteration, so the fused dot products add into it with atomics.
NS = 8
RR, PQ, RHO, RV, TS, TT = range(6)
BLOCK = 256  # threads per block of the RawKernels (a multiple of 32)
STENCIL_BLOCK = (32, 8)

_R, _V = gb.RISK_FREE, gb.VOLATILITY
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
# gpu_baselines' Black-Scholes (Eager.black_scholes), element by element; the constants are
# the same doubles Python folds there.
BS_OPERATION = f"""
const double sqrt_t = sqrt(t);
const double d1 = (log(s / x) + {_R + 0.5 * _V * _V!r} * t) / ({_V!r} * sqrt_t);
const double d2 = d1 - {_V!r} * sqrt_t;
const double c1 = 0.5 + 0.5 * erf(d1 * {_INV_SQRT2!r});
const double c2 = 0.5 + 0.5 * erf(d2 * {_INV_SQRT2!r});
const double t3 = exp({-_R!r} * t);
call = s * c1 - x * t3 * c2;
put = x * t3 * (1.0 - c2) - s * (1.0 - c1);
"""


def _slot(row, j):
    return f"sc[({row}) * {NS} + {j}]"


# CG: p = r + (rr_new / rr) p.
CG_P_OPERATION = f"p = r + ({_slot('k + 1', RR)} / {_slot('k', RR)}) * p;"
# BiCGSTAB iteration k (1-based; row 0 holds rho = alpha = omega = 1):
# p = r + beta (p - omega v), beta = (rho_k / rho_{k-1}) (alpha_{k-1} / omega_{k-1}).
BI_P_OPERATION = f"""
const double alpha = {_slot('k - 1', RHO)} / {_slot('k - 1', RV)};
const double omega = {_slot('k - 1', TS)} / {_slot('k - 1', TT)};
const double beta = ({_slot('k', RHO)} / {_slot('k - 1', RHO)}) * (alpha / omega);
p = r + beta * (p - omega * v);
"""
# s = r - alpha v, alpha = rho_k / (r_hat . v).
BI_S_OPERATION = f"s = r - ({_slot('k', RHO)} / {_slot('k', RV)}) * v;"
JACOBI_OPERATION = "x = (b - y) / d;"

CUDA_SOURCE = (
    f"#define NS {NS}\n#define RR {RR}\n#define PQ {PQ}\n#define RHO {RHO}\n"
    f"#define RV {RV}\n#define TS {TS}\n#define TT {TT}\n#define BLOCK {BLOCK}\n"
    + r"""
#define GRID_STRIDE_LOOP(i, n) \
    for (long long i = (long long)blockIdx.x * BLOCK + threadIdx.x; i < (n); \
         i += (long long)gridDim.x * BLOCK)

__device__ __forceinline__ double peer_warp_sum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

// Adds the block's sum of v to *out: one atomicAdd per block. Every thread must call it.
__device__ __forceinline__ void peer_block_add(double v, double* out) {
    __shared__ double part[BLOCK / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = peer_warp_sum(v);
    if (lane == 0) part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < BLOCK / 32 ? part[lane] : 0.0;
        v = peer_warp_sum(v);
        if (lane == 0) atomicAdd(out, v);
    }
}

// The same for two sums at once.
__device__ __forceinline__ void peer_block_add2(double v, double w, double* out_v,
                                                double* out_w) {
    __shared__ double part[2][BLOCK / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = peer_warp_sum(v);
    w = peer_warp_sum(w);
    if (lane == 0) {
        part[0][warp] = v;
        part[1][warp] = w;
    }
    __syncthreads();
    if (warp == 0) {
        v = lane < BLOCK / 32 ? part[0][lane] : 0.0;
        w = lane < BLOCK / 32 ? part[1][lane] : 0.0;
        v = peer_warp_sum(v);
        w = peer_warp_sum(w);
        if (lane == 0) {
            atomicAdd(out_v, v);
            atomicAdd(out_w, w);
        }
    }
}

// One sweep of the 5-point stencil on the (n+2)^2 grid g into o (a thread per interior
// point; the boundary of o is left as it is): o = 0.2 (center + north + east + west + south),
// summed in gpu_baselines' order.
extern "C" __global__ void peer_stencil(const double* __restrict__ g, double* __restrict__ o,
                                        int n) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    const int i = blockIdx.y * blockDim.y + threadIdx.y;
    if (i >= n || j >= n) return;
    const long long m = (long long)n + 2;
    const long long c = (long long)(i + 1) * m + (j + 1);
    const double avg = g[c] + g[c - m] + g[c + 1] + g[c - 1] + g[c + m];
    o[c] = 0.2 * avg;
}

// sc[slot] += a . b
extern "C" __global__ void peer_dot(const double* __restrict__ a, const double* __restrict__ b,
                                    double* sc, long long slot, long long n) {
    double acc = 0.0;
    GRID_STRIDE_LOOP(i, n) acc += a[i] * b[i];
    peer_block_add(acc, sc + slot);
}

// sc[slot_ts] += t . s, sc[slot_tt] += t . t
extern "C" __global__ void peer_dot2(const double* __restrict__ t, const double* __restrict__ s,
                                     double* sc, long long slot_ts, long long slot_tt,
                                     long long n) {
    double ts = 0.0, tt = 0.0;
    GRID_STRIDE_LOOP(i, n) {
        const double ti = t[i];
        ts += ti * s[i];
        tt += ti * ti;
    }
    peer_block_add2(ts, tt, sc + slot_ts, sc + slot_tt);
}

// CG iteration k after q = A p and pq = p . q: alpha = rr / pq, x += alpha p,
// r -= alpha q, and rr_new = r . r into row k + 1.
extern "C" __global__ void peer_cg_update(double* __restrict__ x, double* __restrict__ r,
                                          const double* __restrict__ p,
                                          const double* __restrict__ q, double* sc, int k,
                                          long long n) {
    const double alpha = sc[(long long)k * NS + RR] / sc[(long long)k * NS + PQ];
    double acc = 0.0;
    GRID_STRIDE_LOOP(i, n) {
        x[i] = x[i] + alpha * p[i];
        const double ri = r[i] - alpha * q[i];
        r[i] = ri;
        acc += ri * ri;
    }
    peer_block_add(acc, sc + (long long)(k + 1) * NS + RR);
}

// BiCGSTAB iteration k after t = A s and the dots t . s, t . t: omega = ts / tt,
// x = x + alpha p + omega s, r = s - omega t, and into row k + 1 rho = r_hat . r, rr = r . r.
extern "C" __global__ void peer_bicgstab_update(double* __restrict__ x, double* __restrict__ r,
                                                const double* __restrict__ p,
                                                const double* __restrict__ s,
                                                const double* __restrict__ t,
                                                const double* __restrict__ r_hat, double* sc,
                                                int k, long long n) {
    const long long row = (long long)k * NS;
    const double alpha = sc[row + RHO] / sc[row + RV];
    const double omega = sc[row + TS] / sc[row + TT];
    double rho = 0.0, rr = 0.0;
    GRID_STRIDE_LOOP(i, n) {
        x[i] = (x[i] + alpha * p[i]) + omega * s[i];
        const double ri = s[i] - omega * t[i];
        r[i] = ri;
        rho += r_hat[i] * ri;
        rr += ri * ri;
    }
    peer_block_add2(rho, rr, sc + row + NS + RHO, sc + row + NS + RR);
}
"""
)


class CupyKernels:
    """The fused kernels, compiled by CuPy (NVRTC) at first use."""

    emulated = False

    def __init__(self, fw):
        import cupy
        import cupy.cublas
        import numpy

        self.cp, self.np, self.fw = cupy, numpy, fw
        ek = cupy.ElementwiseKernel
        self._bs = ek("float64 s, float64 x, float64 t", "float64 call, float64 put",
                      BS_OPERATION, "peer_black_scholes")
        self._cg_p = ek("float64 r, raw float64 sc, int32 k", "float64 p", CG_P_OPERATION,
                        "peer_cg_p")
        self._bi_p = ek("float64 r, float64 v, raw float64 sc, int32 k", "float64 p",
                        BI_P_OPERATION, "peer_bicgstab_p")
        self._bi_s = ek("float64 r, float64 v, raw float64 sc, int32 k", "float64 s",
                        BI_S_OPERATION, "peer_bicgstab_s")
        self._jacobi = ek("float64 b, float64 y, float64 d", "float64 x", JACOBI_OPERATION,
                          "peer_jacobi_update")
        self._module = None
        sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
        self._max_blocks = 8 * int(sms)
        self.gemv_kind = "cupy.cublas.gemv (cuBLAS dgemv)"

    def _fn(self, name):
        if self._module is None:
            self._module = self.cp.RawModule(code=CUDA_SOURCE)
        return self._module.get_function(name)

    def _blocks(self, n):
        return (max(1, min((n + BLOCK - 1) // BLOCK, self._max_blocks)),)

    def black_scholes(self, s, x, t, call, put):
        self._bs(s, x, t, call, put)

    def stencil_sweep(self, g, o, n):
        bx, by = STENCIL_BLOCK
        grid = ((n + bx - 1) // bx, (n + by - 1) // by)
        self._fn("peer_stencil")(grid, STENCIL_BLOCK, (g, o, self.np.int32(n)))

    def spmv(self, a, x):
        return a @ x

    def dot_into(self, a, b, sc, slot):
        n = a.size
        self._fn("peer_dot")(self._blocks(n), (BLOCK,),
                             (a, b, sc, self.np.int64(slot), self.np.int64(n)))

    def dot2_into(self, t, s, sc, slot_ts, slot_tt):
        n = t.size
        i64 = self.np.int64
        self._fn("peer_dot2")(self._blocks(n), (BLOCK,),
                              (t, s, sc, i64(slot_ts), i64(slot_tt), i64(n)))

    def cg_update(self, x, r, p, q, sc, k):
        n = x.size
        self._fn("peer_cg_update")(self._blocks(n), (BLOCK,),
                                   (x, r, p, q, sc, self.np.int32(k), self.np.int64(n)))

    def cg_p(self, r, p, sc, k):
        self._cg_p(r, sc, k, p)

    def bicgstab_p(self, r, v, sc, k, p):
        self._bi_p(r, v, sc, k, p)

    def bicgstab_s(self, r, v, sc, k, s):
        self._bi_s(r, v, sc, k, s)

    def bicgstab_update(self, x, r, p, s, t, r_hat, sc, k):
        n = x.size
        self._fn("peer_bicgstab_update")(
            self._blocks(n), (BLOCK,),
            (x, r, p, s, t, r_hat, sc, self.np.int32(k), self.np.int64(n)))

    def gemv(self, a, x, y):
        try:
            self.cp.cublas.gemv("N", 1.0, a, x, 0.0, y)
        except Exception:  # noqa: BLE001: an older or newer CuPy without it
            self.gemv_kind = "cupy.matmul(a, x, out=y)"
            self.gemv = lambda a, x, y: self.cp.matmul(a, x, out=y)
            self.gemv(a, x, y)

    def jacobi_update(self, b, y, d, x):
        self._jacobi(b, y, d, x)


class NumpyKernels:
    """What each fused kernel computes, in NumPy: tests this script where no GPU is."""

    emulated = True
    gemv_kind = "numpy matmul (emulation)"

    def __init__(self, fw):
        self.fw = fw

    def black_scholes(self, s, x, t, call, put):
        c, p = self.fw.black_scholes(s, x, t)
        call[...], put[...] = c, p

    def stencil_sweep(self, g, o, n):
        o[1:-1, 1:-1] = 0.2 * (g[1:-1, 1:-1] + g[0:-2, 1:-1] + g[1:-1, 2:] + g[1:-1, 0:-2]
                               + g[2:, 1:-1])

    def spmv(self, a, x):
        return a @ x

    def dot_into(self, a, b, sc, slot):
        sc[slot] += a @ b

    def dot2_into(self, t, s, sc, slot_ts, slot_tt):
        sc[slot_ts] += t @ s
        sc[slot_tt] += t @ t

    def cg_update(self, x, r, p, q, sc, k):
        alpha = sc[k * NS + RR] / sc[k * NS + PQ]
        x += alpha * p
        r -= alpha * q
        sc[(k + 1) * NS + RR] += r @ r

    def cg_p(self, r, p, sc, k):
        p[...] = r + (sc[(k + 1) * NS + RR] / sc[k * NS + RR]) * p

    def bicgstab_p(self, r, v, sc, k, p):
        alpha = sc[(k - 1) * NS + RHO] / sc[(k - 1) * NS + RV]
        omega = sc[(k - 1) * NS + TS] / sc[(k - 1) * NS + TT]
        beta = (sc[k * NS + RHO] / sc[(k - 1) * NS + RHO]) * (alpha / omega)
        p[...] = r + beta * (p - omega * v)

    def bicgstab_s(self, r, v, sc, k, s):
        s[...] = r - (sc[k * NS + RHO] / sc[k * NS + RV]) * v

    def bicgstab_update(self, x, r, p, s, t, r_hat, sc, k):
        row = k * NS
        alpha, omega = sc[row + RHO] / sc[row + RV], sc[row + TS] / sc[row + TT]
        x[...] = (x + alpha * p) + omega * s
        r[...] = s - omega * t
        sc[row + NS + RHO] += r_hat @ r
        sc[row + NS + RR] += r @ r

    def gemv(self, a, x, y):
        y[...] = a @ x

    def jacobi_update(self, b, y, d, x):
        x[...] = (b - y) / d


class FusedPeer:
    """cupy-fused: each workload's iteration as the hand-fused kernels above."""

    def __init__(self, fw, kernels):
        self.fw, self.k = fw, kernels

    def note(self, text):
        return text + (" (NumPy emulation of the kernels)" if self.k.emulated else "")

    def black_scholes(self, s, x, t):
        fw, k = self.fw, self.k
        n = s.shape[0]
        call, put = fw.zeros(n), fw.zeros(n)

        def step():
            k.black_scholes(s, x, t, call, put)

        info = {"launches_per_iter": 1,
                "note": self.note("one ElementwiseKernel: call and put, erf form")}
        return step, lambda: float(call.sum() + put.sum()), info

    def stencil(self, grid, sweeps):
        fw, k = self.fw, self.k
        n = grid.shape[0] - 2
        bufs = [grid, fw.copy(grid)]  # both carry the boundary
        state = {"cur": 0}

        def step():
            for _ in range(sweeps):
                c = state["cur"]
                k.stencil_sweep(bufs[c], bufs[1 - c], n)
                state["cur"] = 1 - c

        info = {"launches_per_iter": sweeps,
                "note": self.note("one RawKernel per sweep, out of place, buffers swapped")}
        return step, lambda: float(bufs[state["cur"]].sum()), info

    def cg(self, a, b, total):
        fw, k = self.fw, self.k
        n = b.shape[0]
        sc = fw.zeros((total + 2) * NS)
        x, r = fw.zeros(n), fw.copy(b)
        p = fw.copy(r)
        sc[RR] = fw.dot(r, r)
        residuals = [math.sqrt(float(sc[RR]))]
        state = {"k": 0}

        def step():
            it = state["k"]
            q = k.spmv(a, p)
            k.dot_into(p, q, sc, it * NS + PQ)
            k.cg_update(x, r, p, q, sc, it)
            k.cg_p(r, p, sc, it)
            residuals.append(math.sqrt(float(sc[(it + 1) * NS + RR])))
            state["k"] = it + 1

        info = {"launches_per_iter": 4,
                "note": self.note("cuSPARSE SpMV; p.q; fused x, r updates with r.r; "
                                  "p update (ElementwiseKernel); scalars stay on the device")}
        return step, residuals, info

    def bicgstab(self, a, b, total):
        fw, k = self.fw, self.k
        n = b.shape[0]
        sc = fw.zeros((total + 2) * NS)
        for j in (RHO, RV, TS, TT):
            sc[j] = 1.0  # row 0: rho = alpha = omega = 1, as gpu_baselines starts
        x, r = fw.zeros(n), fw.copy(b)
        r_hat = fw.copy(r)
        p, s = fw.zeros(n), fw.zeros(n)
        sc[NS + RHO] = fw.dot(r_hat, r)
        residuals = [math.sqrt(float(fw.dot(r, r)))]
        state = {"k": 1, "v": fw.zeros(n)}

        def step():
            it = state["k"]
            k.bicgstab_p(r, state["v"], sc, it, p)
            v = k.spmv(a, p)
            state["v"] = v
            k.dot_into(r_hat, v, sc, it * NS + RV)
            k.bicgstab_s(r, v, sc, it, s)
            t = k.spmv(a, s)
            k.dot2_into(t, s, sc, it * NS + TS, it * NS + TT)
            k.bicgstab_update(x, r, p, s, t, r_hat, sc, it)
            residuals.append(math.sqrt(float(sc[(it + 1) * NS + RR])))
            state["k"] = it + 1

        info = {"launches_per_iter": 7,
                "note": self.note("2 cuSPARSE SpMV; p update; r_hat.v; s update; t.s and t.t "
                                  "in one pass; fused x, r updates with r_hat.r and r.r")}
        return step, residuals, info

    def jacobi(self, r, b, d):
        fw, k = self.fw, self.k
        n = b.shape[0]
        y = fw.zeros(n)
        bufs = [fw.zeros(n), fw.zeros(n)]
        state = {"cur": 0}

        def step():
            c = state["cur"]
            k.gemv(r, bufs[c], y)
            k.jacobi_update(b, y, d, bufs[1 - c])
            state["cur"] = 1 - c

        gemv_x = fw.copy(b)

        def gemv_step():
            k.gemv(r, gemv_x, y)

        info = {"launches_per_iter": 2,
                "note": self.note("cuBLAS gemv + one ElementwiseKernel (x = (b - y) / d)")}
        return step, lambda: float(bufs[state["cur"]].sum()), gemv_step, info, \
            lambda: k.gemv_kind


# ------------------------------------------------------------------------------------------
# torch-compile.
# ------------------------------------------------------------------------------------------


def _stencil_sweep(g):
    """One sweep, functional (what torch.compile is given): gpu_baselines' sum order."""
    avg = g[1:-1, 1:-1] + g[0:-2, 1:-1] + g[1:-1, 2:] + g[1:-1, 0:-2] + g[2:, 1:-1]
    out = g.clone()
    out[1:-1, 1:-1] = 0.2 * avg
    return out


# PyTorch, once the torch-compile peer has imported it (the functions below are compiled, so
# they find it as a global rather than importing it themselves).
_torch = None


def _cg_tail(x, r, p, q, rr):
    return gb.cg_update(_torch.dot, x, r, p, q, rr)


def _cg_step(a, x, r, p, rr):
    return _cg_tail(x, r, p, a @ p, rr)


def _bicgstab_s(r, r_hat, v, rho_new):
    torch = _torch
    alpha = rho_new / torch.dot(r_hat, v)
    return alpha, r - alpha * v


def _bicgstab_tail(x, p, s, t, v, r_hat, alpha, rho_new):
    """The end of an iteration and the start of the next: x, r, and the next p (its beta
    needs this iteration's r_hat . r), with gpu_baselines' arithmetic."""
    torch = _torch
    omega = torch.dot(t, s) / torch.dot(t, t)
    x = x + alpha * p + omega * s
    r = s - omega * t
    rho_next = torch.dot(r_hat, r)
    rr = torch.dot(r, r)
    beta = (rho_next / rho_new) * (alpha / omega)
    p = r + beta * (p - omega * v)
    return x, r, p, rho_next, rr


def _bicgstab_step(a, x, r, r_hat, p, rho_new):
    v = a @ p
    alpha, s = _bicgstab_s(r, r_hat, v, rho_new)
    t = a @ s
    return _bicgstab_tail(x, p, s, t, v, r_hat, alpha, rho_new)


class TorchCompilePeer:
    """torch-compile: each workload's iteration under torch.compile."""

    CONFIGS = [("mode='default', fullgraph=True", {"mode": "default", "fullgraph": True}),
               ("mode=None, graph breaks allowed", {"mode": None})]

    def __init__(self, fw):
        global _torch
        import torch

        _torch = torch
        self.torch, self.fw = torch, fw

    def choose(self, variants):
        """The first variant and configuration whose first step (the compile and the first
        warm-up iteration) runs: variants are (note, builder, configs), builder(compile)
        returning the step. A step changes its state only once its compiled calls return,
        so a failed attempt leaves the state as it was."""
        torch = self.torch
        errors = []
        for note, builder, configs in variants:
            for label, kw in configs:
                try:
                    step = builder(lambda f, kw=kw: torch.compile(f, **kw))
                    t0 = time.perf_counter()
                    step()
                    self.fw.sync()
                    info = {"compile_seconds": time.perf_counter() - t0,
                            "compile_config": label, "note": note, "warmed": 1}
                    if errors:
                        info["compile_errors"] = errors
                    return step, info
                except Exception as e:  # noqa: BLE001: the next attempt, or the error
                    errors.append(f"{note}; {label}: {type(e).__name__}: {e}"[:700])
                    try:
                        torch._dynamo.reset()
                    except Exception:  # noqa: BLE001
                        pass
        raise RuntimeError("torch.compile failed: " + " || ".join(errors))

    def black_scholes(self, s, x, t):
        out = {}

        def builder(compile_):
            price = compile_(self.fw.black_scholes)  # gpu_baselines' own formula

            def step():
                out["v"] = price(s, x, t)

            return step

        step, info = self.choose([("gpu_baselines' black_scholes compiled", builder,
                                   self.CONFIGS)])

        def checksum():
            call, put = out["v"]
            return float(call.sum() + put.sum())

        return step, checksum, info

    def stencil(self, grid, sweeps):
        state = {"g": grid}

        def builder(compile_):
            sweep = compile_(_stencil_sweep)

            def step():
                g = state["g"]
                for _ in range(sweeps):
                    g = sweep(g)
                state["g"] = g

            return step

        step, info = self.choose([("one sweep compiled (out of place), called sweeps times "
                                   "per iteration", builder, self.CONFIGS)])
        return step, lambda: float(state["g"].sum()), info

    def cg(self, a, b, total):
        torch, fw = self.torch, self.fw
        r = fw.copy(b)
        state = {"x": fw.zeros(b.shape[0]), "r": r, "p": fw.copy(r), "rr": torch.dot(r, r)}
        residuals = [math.sqrt(float(state["rr"]))]

        def commit(x, r, p, rr):
            state.update(x=x, r=r, p=p, rr=rr)
            residuals.append(math.sqrt(float(rr)))

        def inside(compile_):
            f = compile_(_cg_step)
            return lambda: commit(*f(a, state["x"], state["r"], state["p"], state["rr"]))

        def outside(compile_):
            f = compile_(_cg_tail)

            def step():
                q = a @ state["p"]
                commit(*f(state["x"], state["r"], state["p"], q, state["rr"]))

            return step

        step, info = self.choose([
            ("SpMV (torch sparse CSR) inside the compiled step", inside, self.CONFIGS[:1]),
            ("SpMV (torch sparse CSR) eager, outside the compiled vector update", outside,
             self.CONFIGS)])
        return step, residuals, info

    def bicgstab(self, a, b, total):
        torch, fw = self.torch, self.fw
        r = fw.copy(b)
        r_hat = fw.copy(r)
        # gpu_baselines' first p = r + beta (0 - omega 0) is r.
        state = {"x": fw.zeros(b.shape[0]), "r": r, "p": fw.copy(r),
                 "rho": torch.dot(r_hat, r)}
        residuals = [math.sqrt(float(torch.dot(r, r)))]

        def commit(x, r, p, rho, rr):
            state.update(x=x, r=r, p=p, rho=rho)
            residuals.append(math.sqrt(float(rr)))

        def inside(compile_):
            f = compile_(_bicgstab_step)
            return lambda: commit(*f(a, state["x"], state["r"], r_hat, state["p"],
                                     state["rho"]))

        def outside(compile_):
            head, tail = compile_(_bicgstab_s), compile_(_bicgstab_tail)

            def step():
                p = state["p"]
                v = a @ p
                alpha, s = head(state["r"], r_hat, v, state["rho"])
                t = a @ s
                commit(*tail(state["x"], p, s, t, v, r_hat, alpha, state["rho"]))

            return step

        step, info = self.choose([
            ("SpMV (torch sparse CSR) inside the compiled step", inside, self.CONFIGS[:1]),
            ("SpMV (torch sparse CSR) eager, between two compiled vector updates", outside,
             self.CONFIGS)])
        return step, residuals, info

    def jacobi(self, r, b, d):
        torch, fw = self.torch, self.fw
        state = {"x": fw.zeros(b.shape[0])}

        def builder(compile_):
            f = compile_(fw.jacobi_step)  # gpu_baselines' (b - r @ x) / d

            def step():
                state["x"] = f(r, b, d, state["x"])

            return step

        step, info = self.choose([("gpu_baselines' jacobi_step compiled (mm + pointwise)",
                                   builder, self.CONFIGS)])
        y, gx = fw.zeros(b.shape[0]), fw.copy(b)

        def gemv_step():
            torch.mv(r, gx, out=y)

        return step, lambda: float(state["x"].sum()), gemv_step, info, \
            lambda: "torch.mv (cuBLAS gemv)"


# ------------------------------------------------------------------------------------------
# The workloads: the op-by-op reference (gpu_baselines), then the peer on the same inputs.
# ------------------------------------------------------------------------------------------


def _timings(m, per=1.0):
    return {"seconds": m["seconds"] / per, "seconds_min": m["seconds_min"] / per,
            "seconds_max": m["seconds_max"] / per, "host_seconds": m["host_seconds"] / per,
            "first_call_seconds": m["warmup_seconds"][0] if m["warmup_seconds"] else None}


def run_black_scholes(fw, peer, clock, size, warmup, iters):
    n = size["options"]
    ref = gb.run_black_scholes(fw, size, warmup, iters)
    fw.free()
    s, x, t = fw.black_scholes_inputs(n)
    step, checksum, info = peer.black_scholes(s, x, t)
    m = measure(step, clock, warmup - info.pop("warmed", 0), iters)
    return {"options": n, **_timings(m), "bytes": 5.0 * 8.0 * n, **info,
            "value": checksum(), "reference": ref["checksum"], "compared": "checksum",
            "tolerance": ELEMENTWISE_TOL, "op_by_op_seconds_per_iter": ref["seconds"]}


def run_stencil(fw, peer, clock, size, warmup, iters):
    n, sweeps = size["stencil_n"], size["sweeps"]
    ref = gb.run_stencil(fw, size, warmup, iters)  # (warmup + iters) * sweeps sweeps
    fw.free()
    step, checksum, info = peer.stencil(fw.stencil_grid(n), sweeps)
    m = measure(step, clock, warmup - info.pop("warmed", 0), iters)
    return {"n": n, "grid_side": n + 2, "sweeps_per_iter": sweeps, "iter_unit": "sweep",
            **_timings(m, sweeps), "bytes": 8.0 * ((n + 2) * (n + 2) + n * n), **info,
            "value": checksum(), "reference": ref["checksum"], "compared": "checksum",
            "tolerance": ELEMENTWISE_TOL, "op_by_op_seconds_per_iter": ref["seconds"]}


def run_solver(method, fw, peer, clock, size, warmup, iters, csr_cache):
    ref = gb.run_solver(method, fw, size, warmup, iters, csr_cache)
    fw.free()
    g = size["grid"]
    n = g * g
    indptr, indices, data = csr_cache["csr"]
    a = fw.csr(indptr, indices, data, n)
    b = fw.uniform((n,), 0.0, 1.0, gb.SEED)
    fw.sync()
    total = warmup + iters
    solve = peer.cg if method == "cg" else peer.bicgstab
    step, residuals, info = solve(a, b, total)
    m = measure(step, clock, warmup - info.pop("warmed", 0), iters)
    if len(residuals) != total + 1:
        raise RuntimeError(f"ran {len(residuals) - 1} iterations, not {total}")
    ratio = residuals[-1] / residuals[0]
    return {"grid": g, "unknowns": n, "nnz": len(data), **_timings(m),
            "bytes": gb.solver_bytes(method, n, len(data)), **info,
            "residual_ratio": ratio, "op_by_op_residual_ratio": ref["residual_ratio"],
            "value": ratio, "reference": ref["residual_ratio"], "compared": "residual_ratio",
            "tolerance": SOLVER_TOL, "op_by_op_seconds_per_iter": ref["seconds"]}


def run_jacobi(fw, peer, clock, size, warmup, iters):
    n = size["jacobi_n"]
    r, b, d = fw.jacobi_system(n)
    ref_state = {"x": fw.zeros(n)}

    def ref_step():
        ref_state["x"] = fw.jacobi_step(r, b, d, ref_state["x"])

    ref_m = measure(ref_step, clock, warmup, iters)
    reference = float(ref_state["x"].sum())
    del ref_state["x"]
    fw.free()
    step, checksum, gemv_step, info, gemv_kind = peer.jacobi(r, b, d)
    m = measure(step, clock, warmup - info.pop("warmed", 0), iters)
    value = checksum()
    gm = measure(gemv_step, clock, 1, iters)
    return {"n": n, **_timings(m), "bytes": 8.0 * n * n, **info, "gemv_seconds": gm["seconds"],
            "gemv_host_seconds": gm["host_seconds"], "gemv_kind": gemv_kind(),
            "seconds_vs_gemv": m["seconds"] / gm["seconds"] if gm["seconds"] else None,
            "value": value, "reference": reference, "compared": "checksum",
            "tolerance": ELEMENTWISE_TOL, "op_by_op_seconds_per_iter": ref_m["host_seconds"]}


# ------------------------------------------------------------------------------------------
# Driving.
# ------------------------------------------------------------------------------------------


class TorchCpu(gb.Torch):
    """gpu_baselines' PyTorch op by op, on the CPU (for --device cpu tests)."""

    def __init__(self):
        import torch

        self.xp = torch
        self.dev = torch.device("cpu")
        self.f64 = torch.float64
        self.version = torch.__version__
        self.device = "cpu"

    def sync(self):
        pass

    def free(self):
        pass


def load(name, device):
    """(op-by-op framework of gpu_baselines, peer, clock, info fields)."""
    if name == "cupy-fused":
        if device == "cpu":
            fw = gb.Numpy()
            return fw, FusedPeer(fw, NumpyKernels(fw)), Clock("host", fw.sync), {
                "version": f"numpy {fw.version}", "device": "cpu",
                "emulated": "NumPy stands in for the CUDA kernels"}
        fw = gb.Cupy()
        kernels = CupyKernels(fw)
        import cupy

        extra = {"cuda_runtime": cupy.cuda.runtime.runtimeGetVersion(),
                 "max_blocks": kernels._max_blocks}
        return fw, FusedPeer(fw, kernels), Clock("cupy", fw.sync), {
            "version": f"cupy {fw.version}", "device": fw.device, **extra}
    if name == "torch-compile":
        fw = TorchCpu() if device == "cpu" else gb.Torch()
        import torch

        extra = {}
        try:
            import triton

            extra["triton"] = triton.__version__
        except Exception as e:  # noqa: BLE001: Inductor says so when it needs it
            extra["triton"] = f"not importable: {type(e).__name__}: {e}"[:300]
        if device != "cpu":
            extra["cuda"] = torch.version.cuda
        return fw, TorchCompilePeer(fw), Clock("host" if device == "cpu" else "torch",
                                                fw.sync), {
            "version": f"torch {torch.__version__}", "device": fw.device, **extra}
    raise ValueError(f"unknown framework {name!r} (one of {', '.join(FRAMEWORKS)})")


def run_framework(name, workloads, small, device, deadline):
    base = {"framework": name}
    try:
        fw, peer, clock, meta = load(name, device)
    except Exception as e:  # noqa: BLE001: any failure to import is "not available"
        emit({**base, "workload": "info", "ok": False, "available": False,
              "error": f"{type(e).__name__}: {e}"[:2000]})
        return 0
    emit({**base, "workload": "info", "ok": True, "available": True, **meta,
          "timer": clock.label})
    pick = 1 if small else 0
    size = {k: v[pick] for k, v in gb.SIZES.items()}
    gbs, probe_failed = gb.copy_probe_line(base, fw.copy_probe, size["probe_bytes"],
                                           3 if small else 10)
    failed = int(probe_failed)
    fw.free()
    csr_cache = {}
    for w in workloads:
        warmup, iters = gb.COUNTS[w][pick]
        left = deadline - time.time() if deadline else float("inf")
        if left < MIN_SECONDS_LEFT[name]:
            failed += 1
            emit({**base, "workload": w, "ok": False, "skipped": True,
                  "error": f"skipped: {left:.1f} s left of the time limit"})
            continue
        # On stderr, so that a child killed at its limit says what it was doing.
        print(f"gpu-peers: {name}: {w}", file=sys.stderr, flush=True)
        start = time.perf_counter()
        try:
            if w == "black-scholes":
                rec = run_black_scholes(fw, peer, clock, size, warmup, iters)
            elif w == "stencil":
                rec = run_stencil(fw, peer, clock, size, warmup, iters)
            elif w in ("cg", "bicgstab"):
                rec = run_solver(w, fw, peer, clock, size, warmup, iters, csr_cache)
            else:
                rec = run_jacobi(fw, peer, clock, size, warmup, iters)
            out = finish(base, w, rec, warmup, iters, gbs, clock)
            if not out["ok"]:
                failed += 1
        except Exception as e:  # noqa: BLE001: one workload's failure leaves the others
            failed += 1
            out = {**base, "workload": w, "ok": False,
                   "error": f"{type(e).__name__}: {e}"[:3000]}
        out["wall_seconds"] = time.perf_counter() - start
        emit(out)
        fw.free()
    return 1 if failed else 0


def finish(base, w, rec, warmup, iters, gbs, clock):
    """The workload's line from its record: floors, the comparison with op by op."""
    seconds, nbytes = rec.pop("seconds"), rec.pop("bytes")
    host = rec.pop("host_seconds")
    value, reference = rec.pop("value"), rec.pop("reference")
    compared, tol = rec["compared"], rec["tolerance"]
    floor = nbytes / (gbs * 1e9) if gbs == gbs and gbs > 0 else float("nan")
    diff = abs(value - reference) / abs(reference) if reference else abs(value - reference)
    ok = math.isfinite(value) and diff <= tol
    out = {**base, "workload": w, "ok": ok, "warmup": warmup, "iters": iters,
           "seconds_per_iter": seconds, "host_seconds_per_iter": host, "timer": clock.label,
           "bytes_per_iter": nbytes, "probe_gbs": gbs, "floor_seconds": floor,
           "floor_ratio": seconds / floor if floor == floor and floor else None,
           "gbs_effective": nbytes / seconds / 1e9 if seconds else None}
    if compared == "checksum":
        out.update(checksum=value, op_by_op_checksum=reference)
    out["checksum_rel_diff_vs_op_by_op"] = diff
    op = rec.get("op_by_op_seconds_per_iter")
    out["speedup_vs_op_by_op"] = op / host if op and host else None
    gemv = rec.get("gemv_seconds")
    if gemv and floor == floor and floor:
        out["gemv_floor_ratio"] = gemv / floor
    out.update(rec)
    if not ok:
        out["error"] = (f"{compared} differs from op by op: {value!r} vs {reference!r} "
                        f"(relative {diff:.3g} > {tol:g})")
    return out


def run_children(args):
    """Each framework in a child process with a time limit; their lines passed on."""
    status = 0
    for name in args.frameworks:
        cmd = [sys.executable, os.path.abspath(__file__), "--framework", name,
               "--workload", *args.workloads, "--timeout", str(args.timeout),
               "--device", args.device]
        if args.small:
            cmd.append("--small")
        start = time.perf_counter()
        # Its own process group, so that a timeout also ends the helpers it started (Inductor's
        # compile workers), which would otherwise hold its pipes open.
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        try:
            out, err = p.communicate(timeout=args.timeout)
            code = p.returncode
        except subprocess.TimeoutExpired:
            exited = p.poll() is not None  # done, but a helper of its still holds the pipes
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                p.kill()
            out, err = p.communicate()
            code = p.returncode if exited else None
        status |= gb.relay_child(name, out, err, code, args.timeout, start)
    return status


def main():
    started = time.perf_counter()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--framework", default="all",
                   help="cupy-fused, torch-compile, or all (each in a child process)")
    p.add_argument("--workload", nargs="+", default=["all"], choices=WORKLOADS + ["all"])
    p.add_argument("--small", action="store_true", help="small sizes (for tests)")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds each framework may run (its child process is killed then)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help=argparse.SUPPRESS)
    args = p.parse_args()
    args.workloads = WORKLOADS if "all" in args.workload else \
        [w for w in WORKLOADS if w in args.workload]
    names = FRAMEWORKS if args.framework == "all" else \
        [f.strip() for f in args.framework.split(",") if f.strip()]
    unknown = [f for f in names if f not in FRAMEWORKS]
    if unknown:
        p.error(f"unknown framework {', '.join(unknown)} (one of {', '.join(FRAMEWORKS)}, "
                "all; jax-jit is gpu_baselines.py's jax)")
    args.frameworks = names
    if len(names) > 1 or args.framework == "all":
        status = run_children(args)
        emit({"framework": "gpu-peers", "workload": "summary", "ok": status == 0,
              "frameworks": names, "wall_seconds": time.perf_counter() - started})
        return status
    # A child (or a single framework run here): keep a margin inside the parent's limit.
    deadline = time.time() + args.timeout - 2.0
    return run_framework(names[0], args.workloads, args.small, args.device, deadline)


if __name__ == "__main__":
    sys.exit(main())
