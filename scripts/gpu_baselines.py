#!/usr/bin/env python3
"""The GPU baselines: the five workloads of `weft-gpu-check bench` in CuPy, JAX and PyTorch.

Same workloads, sizes and compulsory bytes as `weft-gpu-check bench` (see
examples/src/bin/gpu_check/bench.rs), in f64, each written the way that framework's users
write it: CuPy and PyTorch op by op (as NumPy; CuPy's sparse product is cuSPARSE's, PyTorch's
its CSR tensor's), JAX with each step under `jax.jit` (its sparse product is
`jax.experimental.sparse.BCSR`'s). Each workload reports the median seconds per iteration
(with the device synchronized before the clock stops; the solvers, like Weft's, time each
iteration up to its residual read), the compulsory bytes per iteration, the framework's own
device-to-device copy probe (GB/s of bytes read plus written) and
floor_ratio = seconds / (bytes / probe rate).

Prints one JSON line per framework and workload (`framework`, `workload`, `ok`, ...), plus an
`info` line per framework (version, device) and a `copy-probe` line. A framework that does not
import is reported (`available: false`), not fatal. With `--framework all` (the default) each
framework runs in a child process of its own, with a time limit (`--timeout`), so that one that
hangs or crashes leaves the others their time; the exit code is 0 unless a framework that
imported failed. `--framework numpy` runs the same code on the CPU with NumPy (for testing
this script where no GPU is; erf is `math.erf` element by element, so keep it `--small`).
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

FRAMEWORKS = ["cupy", "jax", "torch"]
WORKLOADS = ["black-scholes", "stencil", "cg", "bicgstab", "jacobi"]

# (full, small) sizes: the issue's, and ones the CPU runs in a moment.
SIZES = {
    "options": (1 << 26, 4096),
    "stencil_n": (8190, 30),
    "sweeps": (10, 2),
    "grid": (2000, 12),
    "jacobi_n": (8192, 48),
    "probe_bytes": (512 << 20, 4 << 20),
}
# (warmup, iters), full and small.
COUNTS = {
    "black-scholes": ((1, 5), (1, 2)),
    "stencil": ((1, 5), (1, 2)),
    "cg": ((3, 20), (1, 2)),
    "bicgstab": ((3, 20), (1, 2)),
    "jacobi": ((2, 10), (2, 2)),
}
RISK_FREE, VOLATILITY = 0.02, 0.30
SEED = 42


def clean(v):
    """`v` with every non-finite float (which JSON has no word for) as None."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [clean(x) for x in v]
    return v


def emit(obj):
    print(json.dumps(clean(obj), allow_nan=False, default=str), flush=True)


def poisson_csr(g):
    """The 5-point Laplacian on a g x g grid (4 on the diagonal, -1 for each neighbour) as
    CSR arrays of NumPy: indptr and indices int32, data float64, columns in order."""
    import numpy as np

    n = g * g
    i = np.arange(n, dtype=np.int32)
    r, c = np.divmod(i, np.int32(g))
    offsets = np.array([-g, -1, 0, 1, g], dtype=np.int32)
    mask = np.empty((n, 5), dtype=bool)
    mask[:, 0], mask[:, 1], mask[:, 2] = r > 0, c > 0, True
    mask[:, 3], mask[:, 4] = c < g - 1, r < g - 1
    indices = (i[:, None] + offsets[None, :])[mask]
    data = np.broadcast_to(np.where(offsets == 0, 4.0, -1.0), (n, 5))[mask]
    indptr = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(mask.sum(axis=1, dtype=np.int32), out=indptr[1:])
    return indptr, indices, data


# ------------------------------------------------------------------------------------------
# Frameworks: what the workloads need of each.
# ------------------------------------------------------------------------------------------


class Eager:
    """CuPy, PyTorch or NumPy, op by op. Subclasses set the primitives."""

    jit = False

    def sqrt(self, a):
        return self.xp.sqrt(a)

    def log(self, a):
        return self.xp.log(a)

    def exp(self, a):
        return self.xp.exp(a)

    def dot(self, a, b):
        return self.xp.dot(a, b)

    def item(self, a):
        return float(a)

    def copy(self, a):
        return a.copy()

    def copy_into(self, dst, src):
        dst[...] = src

    def matvec(self, a, x):
        return a @ x

    def free(self):
        pass

    # The workloads, as NumPy users write them.
    def black_scholes_inputs(self, n):
        return (
            self.uniform((n,), 5.0, 30.0, SEED),
            self.uniform((n,), 1.0, 100.0, SEED + 1),
            self.uniform((n,), 0.25, 10.0, SEED + 2),
        )

    def black_scholes(self, s, x, t):
        r, v = RISK_FREE, VOLATILITY
        sqrt_t = self.sqrt(t)
        d1 = (self.log(s / x) + (r + 0.5 * v * v) * t) / (v * sqrt_t)
        d2 = d1 - v * sqrt_t
        cnd_d1 = 0.5 + 0.5 * self.erf(d1 * (1.0 / math.sqrt(2.0)))
        cnd_d2 = 0.5 + 0.5 * self.erf(d2 * (1.0 / math.sqrt(2.0)))
        t3 = self.exp(-r * t)
        call = s * cnd_d1 - x * t3 * cnd_d2
        put = x * t3 * (1.0 - cnd_d2) - s * (1.0 - cnd_d1)
        return call, put

    def stencil_grid(self, n):
        grid = self.uniform((n + 2, n + 2), 0.0, 1.0, SEED)
        grid[-1, :] = 0.0
        grid[:, 0] = 0.0
        grid[:, -1] = 0.0
        grid[0, :] = 1.0
        return grid

    def stencil(self, grid, sweeps):
        center = grid[1:-1, 1:-1]
        north, south = grid[0:-2, 1:-1], grid[2:, 1:-1]
        east, west = grid[1:-1, 2:], grid[1:-1, 0:-2]
        for _ in range(sweeps):
            avg = center + north + east + west + south
            work = 0.2 * avg
            self.copy_into(center, work)
        return grid

    def jacobi_system(self, n):
        a = self.uniform((n, n), 0.0, 1.0, SEED) + self.diag_embed(self.full(n, float(n)))
        b = self.uniform((n,), 0.0, 1.0, SEED + 1)
        d = self.diag_extract(a)
        r = a - self.diag_embed(d)
        return r, b, d

    def jacobi_step(self, r, b, d, x):
        return (b - self.matvec(r, x)) / d

    def cg(self, a, b, iters, on_iteration):
        x = self.zeros(b.shape[0])
        r = self.copy(b)
        p = self.copy(r)
        rr = self.dot(r, r)
        residuals = [math.sqrt(self.item(rr))]
        for _ in range(iters):
            start = time.perf_counter()
            q = self.matvec(a, p)
            alpha = rr / self.dot(p, q)
            x = x + alpha * p
            r = r - alpha * q
            rr_new = self.dot(r, r)
            residuals.append(math.sqrt(self.item(rr_new)))
            beta = rr_new / rr
            p = r + beta * p
            rr = rr_new
            on_iteration(time.perf_counter() - start)
        return residuals

    def bicgstab(self, a, b, iters, on_iteration):
        n = b.shape[0]
        x = self.zeros(n)
        r = self.copy(b)
        r_hat = self.copy(r)
        p, v = self.zeros(n), self.zeros(n)
        rho = alpha = omega = 1.0
        rho_new = self.dot(r_hat, r)
        residuals = [math.sqrt(self.item(self.dot(r, r)))]
        for _ in range(iters):
            start = time.perf_counter()
            beta = (rho_new / rho) * (alpha / omega)
            p = r + beta * (p - omega * v)
            v = self.matvec(a, p)
            alpha = rho_new / self.dot(r_hat, v)
            s = r - alpha * v
            t = self.matvec(a, s)
            omega = self.dot(t, s) / self.dot(t, t)
            x = x + alpha * p + omega * s
            r = s - omega * t
            rho = rho_new
            rho_new = self.dot(r_hat, r)
            residuals.append(math.sqrt(self.item(self.dot(r, r))))
            on_iteration(time.perf_counter() - start)
        return residuals

    def copy_probe(self, nbytes, samples, copies=10):
        n = nbytes // 8
        src, dst = self.uniform((n,), 0.0, 1.0, SEED), self.zeros(n)
        self.copy_into(dst, src)
        self.sync()
        rates = []
        for _ in range(samples):
            start = time.perf_counter()
            for _ in range(copies):
                self.copy_into(dst, src)
            self.sync()
            rates.append(2.0 * nbytes * copies / (time.perf_counter() - start) / 1e9)
        return rates, "device-to-device copy (dst[...] = src)"


class Cupy(Eager):
    name = "cupy"

    def __init__(self):
        import cupy
        import cupyx.scipy.sparse
        import cupyx.scipy.special

        self.xp = cupy
        self.erf = cupyx.scipy.special.erf
        self.sparse = cupyx.scipy.sparse
        self.version = cupy.__version__
        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"]
        self.device = name.decode() if isinstance(name, bytes) else str(name)

    def sync(self):
        self.xp.cuda.Device().synchronize()

    def uniform(self, shape, lo, hi, seed):
        return self.xp.random.RandomState(seed).uniform(lo, hi, size=shape, dtype=self.xp.float64)

    def zeros(self, n):
        return self.xp.zeros(n, dtype=self.xp.float64)

    def full(self, n, value):
        return self.xp.full(n, value, dtype=self.xp.float64)

    def diag_embed(self, v):
        return self.xp.diag(v)

    def diag_extract(self, a):
        return self.xp.diag(a).copy()

    def csr(self, indptr, indices, data, n):
        xp = self.xp
        return self.sparse.csr_matrix(
            (xp.asarray(data), xp.asarray(indices), xp.asarray(indptr)), shape=(n, n)
        )

    def free(self):
        self.xp.get_default_memory_pool().free_all_blocks()


class Torch(Eager):
    name = "torch"

    def __init__(self):
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch imports but sees no CUDA device")
        self.xp = torch
        self.dev = torch.device("cuda")
        self.f64 = torch.float64
        self.version = torch.__version__
        self.device = torch.cuda.get_device_name(0)

    def sync(self):
        self.xp.cuda.synchronize()

    def erf(self, a):
        return self.xp.erf(a)

    def copy(self, a):
        return a.clone()

    def copy_into(self, dst, src):
        dst.copy_(src)

    def uniform(self, shape, lo, hi, seed):
        g = self.xp.Generator(device=self.dev)
        g.manual_seed(seed)
        u = self.xp.rand(shape, generator=g, dtype=self.f64, device=self.dev)
        return u * (hi - lo) + lo

    def zeros(self, n):
        return self.xp.zeros(n, dtype=self.f64, device=self.dev)

    def full(self, n, value):
        return self.xp.full((n,), value, dtype=self.f64, device=self.dev)

    def diag_embed(self, v):
        return self.xp.diag(v)

    def diag_extract(self, a):
        return self.xp.diagonal(a).clone()

    def csr(self, indptr, indices, data, n):
        t = self.xp
        return t.sparse_csr_tensor(
            t.from_numpy(indptr).to(self.dev),
            t.from_numpy(indices).to(self.dev),
            t.from_numpy(data).to(self.dev),
            size=(n, n),
        )

    def free(self):
        self.xp.cuda.empty_cache()


class Numpy(Eager):
    """NumPy on the CPU: tests this script's code where no GPU is."""

    name = "numpy"

    def __init__(self):
        import numpy

        self.xp = numpy
        self.version = numpy.__version__
        self.device = "cpu"
        self._erf = numpy.vectorize(math.erf, otypes=[numpy.float64])

    def sync(self):
        pass

    def erf(self, a):
        return self._erf(a)

    def uniform(self, shape, lo, hi, seed):
        return self.xp.random.default_rng(seed).uniform(lo, hi, size=shape)

    def zeros(self, n):
        return self.xp.zeros(n)

    def full(self, n, value):
        return self.xp.full(n, value)

    def diag_embed(self, v):
        return self.xp.diag(v)

    def diag_extract(self, a):
        return self.xp.diag(a).copy()

    def csr(self, indptr, indices, data, n):
        return NumpyCsr(indptr, indices, data, n)


class NumpyCsr:
    """A CSR matrix of NumPy arrays (SciPy may be missing): rows must be nonempty."""

    def __init__(self, indptr, indices, data, n):
        self.indptr, self.indices, self.data, self.n = indptr, indices, data, n

    def __matmul__(self, x):
        import numpy

        return numpy.add.reduceat(self.data * x[self.indices], self.indptr[:-1])


class Jax:
    """JAX: each step one jitted function (as JAX users write it)."""

    name = "jax"
    jit = True

    def __init__(self):
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        import jax

        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        self.jax, self.jnp = jax, jnp
        gpus = [d for d in jax.devices() if d.platform == "gpu"]
        if not gpus:
            raise RuntimeError(f"jax imports but sees no GPU (devices: {jax.devices()})")
        self.version = jax.__version__
        self.device = getattr(gpus[0], "device_kind", str(gpus[0]))
        from jax.scipy.special import erf

        self.erf = erf

    def sync_all(self, *arrays):
        for a in arrays:
            self.jax.block_until_ready(a)

    def uniform(self, shape, lo, hi, seed):
        key = self.jax.random.PRNGKey(seed)
        return self.jax.random.uniform(key, shape, dtype=self.jnp.float64, minval=lo, maxval=hi)

    def free(self):
        pass


# ------------------------------------------------------------------------------------------
# The workloads: each returns its record (seconds per iteration and what it is measured on).
# ------------------------------------------------------------------------------------------


def timed(step, sync, warmup, iters):
    """Median, min and max seconds of `iters` calls of step() after `warmup` untimed ones,
    the device synchronized before each clock starts and stops."""
    for _ in range(warmup):
        step()
        sync()
    samples = []
    for _ in range(iters):
        sync()
        start = time.perf_counter()
        step()
        sync()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), min(samples), max(samples)


def run_black_scholes(fw, size, warmup, iters):
    n = size["options"]
    rec = {"options": n}
    if fw.jit:
        jnp = fw.jnp
        s, x, t = (fw.uniform((n,), 5.0, 30.0, SEED), fw.uniform((n,), 1.0, 100.0, SEED + 1),
                   fw.uniform((n,), 0.25, 10.0, SEED + 2))

        def price(s, x, t):
            r, v = RISK_FREE, VOLATILITY
            sqrt_t = jnp.sqrt(t)
            d1 = (jnp.log(s / x) + (r + 0.5 * v * v) * t) / (v * sqrt_t)
            d2 = d1 - v * sqrt_t
            c1 = 0.5 + 0.5 * fw.erf(d1 / math.sqrt(2.0))
            c2 = 0.5 + 0.5 * fw.erf(d2 / math.sqrt(2.0))
            t3 = jnp.exp(-r * t)
            return s * c1 - x * t3 * c2, x * t3 * (1.0 - c2) - s * (1.0 - c1)

        price = fw.jax.jit(price)
        out = {}

        def step():
            out["v"] = price(s, x, t)

        med, lo, hi = timed(step, lambda: fw.sync_all(*out.get("v", ())), warmup, iters)
        call, put = out["v"]
        rec["checksum"] = float(call.sum() + put.sum())
    else:
        s, x, t = fw.black_scholes_inputs(n)
        out = {}

        def step():
            out["v"] = fw.black_scholes(s, x, t)

        med, lo, hi = timed(step, fw.sync, warmup, iters)
        call, put = out["v"]
        rec["checksum"] = float(call.sum() + put.sum())
    rec.update(seconds=med, seconds_min=lo, seconds_max=hi, bytes=5.0 * 8.0 * n)
    return rec


def run_stencil(fw, size, warmup, iters):
    n, sweeps = size["stencil_n"], size["sweeps"]
    rec = {"n": n, "grid_side": n + 2, "sweeps_per_iter": sweeps, "iter_unit": "sweep"}
    if fw.jit:
        jnp = fw.jnp
        grid = fw.uniform((n + 2, n + 2), 0.0, 1.0, SEED)
        grid = grid.at[-1, :].set(0.0).at[:, 0].set(0.0).at[:, -1].set(0.0).at[0, :].set(1.0)

        def run(g):
            for _ in range(sweeps):
                avg = g[1:-1, 1:-1] + g[0:-2, 1:-1] + g[1:-1, 2:] + g[1:-1, 0:-2] + g[2:, 1:-1]
                g = g.at[1:-1, 1:-1].set(0.2 * avg)
            return g

        run = fw.jax.jit(run, donate_argnums=0)
        state = {"g": grid}

        def step():
            state["g"] = run(state["g"])

        med, lo, hi = timed(step, lambda: fw.sync_all(state["g"]), warmup, iters)
        rec["checksum"] = float(jnp.sum(state["g"]))
    else:
        grid = fw.stencil_grid(n)
        med, lo, hi = timed(lambda: fw.stencil(grid, sweeps), fw.sync, warmup, iters)
        rec["checksum"] = float(grid.sum())
    rec.update(seconds=med / sweeps, seconds_min=lo / sweeps, seconds_max=hi / sweeps,
               bytes=8.0 * ((n + 2) * (n + 2) + n * n))
    return rec


def solver_bytes(method, n, nnz):
    # The same compulsory bytes as weft-gpu-check's (the matrix as Weft stores it).
    matrix = 8.0 * n + 4.0 * nnz + 8.0 * nnz
    return matrix + 6.0 * 8.0 * n if method == "cg" else 2.0 * matrix + 10.0 * 8.0 * n


def run_solver(method, fw, size, warmup, iters, csr_cache):
    g = size["grid"]
    n = g * g
    if "csr" not in csr_cache:
        csr_cache["csr"] = poisson_csr(g)
    indptr, indices, data = csr_cache["csr"]
    nnz = len(data)
    rec = {"grid": g, "unknowns": n, "nnz": nnz}
    seconds = []
    if fw.jit:
        jnp = fw.jnp
        from jax.experimental import sparse as jsparse

        a = jsparse.BCSR((jnp.asarray(data), jnp.asarray(indices), jnp.asarray(indptr)),
                         shape=(n, n))
        b = fw.uniform((n,), 0.0, 1.0, SEED)
        residuals = jax_solver(method, fw, a, b, warmup + iters, seconds.append)
    else:
        a = fw.csr(indptr, indices, data, n)
        b = fw.uniform((n,), 0.0, 1.0, SEED)
        fw.sync()
        solve = fw.cg if method == "cg" else fw.bicgstab
        residuals = solve(a, b, warmup + iters, seconds.append)
    timed_s = seconds[warmup:]
    rec.update(seconds=statistics.median(timed_s), seconds_min=min(timed_s),
               seconds_max=max(timed_s), bytes=solver_bytes(method, n, nnz),
               residual_ratio=residuals[-1] / residuals[0])
    return rec


def jax_solver(method, fw, a, b, total, on_iteration):
    jax, jnp = fw.jax, fw.jnp
    if method == "cg":

        # The matrix is an argument: a closed-over array would become a constant of the
        # compiled step.
        @jax.jit
        def step(a, x, r, p, rr):
            return cg_update(jnp.dot, x, r, p, a @ p, rr)

        x, r = jnp.zeros_like(b), b
        p, rr = r, jnp.dot(r, r)
        residuals = [math.sqrt(float(rr))]
        for _ in range(total):
            start = time.perf_counter()
            x, r, p, rr = step(a, x, r, p, rr)
            residuals.append(math.sqrt(float(rr)))
            on_iteration(time.perf_counter() - start)
        return residuals

    @jax.jit
    def step(a, x, r, r_hat, p, v, rho, rho_new, alpha, omega):
        beta = (rho_new / rho) * (alpha / omega)
        p = r + beta * (p - omega * v)
        v = a @ p
        alpha = rho_new / jnp.dot(r_hat, v)
        s = r - alpha * v
        t = a @ s
        omega = jnp.dot(t, s) / jnp.dot(t, t)
        x = x + alpha * p + omega * s
        r = s - omega * t
        return x, r, p, v, rho_new, jnp.dot(r_hat, r), alpha, omega, jnp.dot(r, r)

    one = jnp.ones((), dtype=jnp.float64)
    x, r = jnp.zeros_like(b), b
    r_hat, p, v = r, jnp.zeros_like(b), jnp.zeros_like(b)
    rho, alpha, omega, rho_new = one, one, one, jnp.dot(r_hat, r)
    residuals = [math.sqrt(float(jnp.dot(r, r)))]
    for _ in range(total):
        start = time.perf_counter()
        x, r, p, v, rho, rho_new, alpha, omega, rr = step(a, x, r, r_hat, p, v, rho,
                                                          rho_new, alpha, omega)
        residuals.append(math.sqrt(float(rr)))
        on_iteration(time.perf_counter() - start)
    return residuals


def run_jacobi(fw, size, warmup, iters):
    n = size["jacobi_n"]
    rec = {"n": n}
    if fw.jit:
        jax, jnp = fw.jax, fw.jnp
        a = fw.uniform((n, n), 0.0, 1.0, SEED) + jnp.diag(jnp.full((n,), float(n)))
        b = fw.uniform((n,), 0.0, 1.0, SEED + 1)
        d = jnp.diag(a)
        r = a - jnp.diag(d)
        step_fn = jax.jit(lambda r, b, d, x: (b - r @ x) / d)
        state = {"x": jnp.zeros((n,), dtype=jnp.float64)}

        def step():
            state["x"] = step_fn(r, b, d, state["x"])

        med, lo, hi = timed(step, lambda: fw.sync_all(state["x"]), warmup, iters)
    else:
        r, b, d = fw.jacobi_system(n)
        state = {"x": fw.zeros(n)}

        def step():
            state["x"] = fw.jacobi_step(r, b, d, state["x"])

        med, lo, hi = timed(step, fw.sync, warmup, iters)
    rec.update(seconds=med, seconds_min=lo, seconds_max=hi, bytes=8.0 * n * n)
    return rec


def jax_copy_probe(fw, nbytes, samples, copies=10):
    n = nbytes // 8
    x = fw.uniform((n,), 0.0, 1.0, SEED)
    # Not a copy (a jitted copy may be elided), but its bytes: read n, write n.
    f = fw.jax.jit(lambda v: v + 1.0)
    fw.sync_all(f(x))
    rates = []
    for _ in range(samples):
        start = time.perf_counter()
        y = None
        for _ in range(copies):
            y = f(x)
        # One stream: the last result ready means every one is.
        fw.sync_all(y)
        rates.append(2.0 * nbytes * copies / (time.perf_counter() - start) / 1e9)
    return rates, "y = x + 1 under jax.jit (a copy's bytes)"


# ------------------------------------------------------------------------------------------
# Driving.
# ------------------------------------------------------------------------------------------


def load(name):
    return {"cupy": Cupy, "jax": Jax, "torch": Torch, "numpy": Numpy}[name]()


def run_framework(name, workloads, small):
    base = {"framework": name}
    try:
        fw = load(name)
    except Exception as e:  # noqa: BLE001: any failure to import is "not available"
        emit({**base, "workload": "info", "ok": False, "available": False,
              "error": f"{type(e).__name__}: {e}"})
        return 0
    emit({**base, "workload": "info", "ok": True, "available": True, "version": fw.version,
          "device": fw.device, "jit": fw.jit})
    pick = 1 if small else 0
    size = {k: v[pick] for k, v in SIZES.items()}
    probe = (lambda n, k: jax_copy_probe(fw, n, k)) if fw.jit else fw.copy_probe
    gbs, probe_failed = copy_probe_line(base, probe, size["probe_bytes"], 3 if small else 10)
    failed = int(probe_failed)
    csr_cache = {}
    for w in workloads:
        warmup, iters = COUNTS[w][pick]
        start = time.perf_counter()
        try:
            if w == "black-scholes":
                rec = run_black_scholes(fw, size, warmup, iters)
            elif w == "stencil":
                rec = run_stencil(fw, size, warmup, iters)
            elif w in ("cg", "bicgstab"):
                rec = run_solver(w, fw, size, warmup, iters, csr_cache)
            else:
                rec = run_jacobi(fw, size, warmup, iters)
            seconds, nbytes = rec.pop("seconds"), rec.pop("bytes")
            floor = nbytes / (gbs * 1e9) if gbs == gbs and gbs > 0 else float("nan")
            out = {**base, "workload": w, "ok": True, "warmup": warmup, "iters": iters,
                   "seconds_per_iter": seconds, "bytes_per_iter": nbytes, "probe_gbs": gbs,
                   "floor_seconds": floor, "floor_ratio": seconds / floor if floor else None,
                   "gbs_effective": nbytes / seconds / 1e9}
            out.update(rec)
        except Exception as e:  # noqa: BLE001: one workload's failure leaves the others
            failed += 1
            out = {**base, "workload": w, "ok": False, "error": f"{type(e).__name__}: {e}"[:2000]}
        out["wall_seconds"] = time.perf_counter() - start
        emit(out)
        fw.free()
    return 1 if failed else 0


def run_children(args):
    """Each framework in a child process with a time limit; their lines passed on."""
    status = 0
    for name in args.frameworks:
        cmd = [sys.executable, os.path.abspath(__file__), "--framework", name,
               "--workload", *args.workloads]
        if args.small:
            cmd.append("--small")
        env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false")
        start = time.perf_counter()
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=args.timeout, env=env)
            out, err, code = p.stdout, p.stderr, p.returncode
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
            code = None
        status |= relay_child(name, out, err, code, args.timeout, start)
    return status


def cg_update(dot, x, r, p, q, rr):
    """One CG iteration after its product `q = A p`, written once for the frameworks that
    compile a whole step (JAX's `jit` here, `torch.compile` in gpu-peers.py): the new `x`,
    `r`, `p` and `r.r`, with `dot` the framework's dot product."""
    alpha = rr / dot(p, q)
    x = x + alpha * p
    r = r - alpha * q
    rr_new = dot(r, r)
    p = r + (rr_new / rr) * p
    return x, r, p, rr_new


def copy_probe_line(base, probe, nbytes, samples):
    """Runs `probe(nbytes, samples)` (rates in GB/s, and what was copied) and emits its
    `copy-probe` line. Returns the median rate (NaN if the probe failed) and whether it
    failed."""
    start = time.perf_counter()
    try:
        rates, kind = probe(nbytes, samples)
    except Exception as e:  # noqa: BLE001
        emit({**base, "workload": "copy-probe", "ok": False,
              "error": f"{type(e).__name__}: {e}"[:2000]})
        return float("nan"), True
    gbs = statistics.median(rates)
    emit({**base, "workload": "copy-probe", "ok": True, "gbs": gbs, "kind": kind,
          "bytes": nbytes, "samples": rates, "wall_seconds": time.perf_counter() - start})
    return gbs, False


def relay_child(name, out, err, code, timeout, start):
    """Passes a framework child's JSON lines and standard error on, and reports its failure (a
    time-out, `code` None, or a non-zero exit code) as a `framework` line. Returns 1 if it
    failed, else 0."""
    sys.stderr.write(err)
    for line in out.splitlines():
        if line.startswith("{"):
            print(line, flush=True)
    failure = {"framework": name, "workload": "framework", "ok": False,
               "stderr_tail": err[-1500:], "wall_seconds": time.perf_counter() - start}
    if code is None:
        emit({**failure, "timed_out": True, "error": f"timed out after {timeout} s"})
        return 1
    if code != 0:
        emit({**failure, "exit_code": code, "error": f"exit code {code}"})
        return 1
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--framework", default="all",
                   help="cupy, jax, torch, numpy (CPU, for tests), or all (cupy, jax, torch, "
                        "each in a child process)")
    p.add_argument("--workload", nargs="+", default=["all"], choices=WORKLOADS + ["all"])
    p.add_argument("--small", action="store_true", help="small sizes (for tests)")
    p.add_argument("--timeout", type=float, default=50.0,
                   help="seconds each framework's child may run (with --framework all)")
    args = p.parse_args()
    args.workloads = WORKLOADS if "all" in args.workload else \
        [w for w in WORKLOADS if w in args.workload]
    if args.framework == "all":
        args.frameworks = FRAMEWORKS
        return run_children(args)
    args.frameworks = [f.strip() for f in args.framework.split(",") if f.strip()]
    if len(args.frameworks) > 1:
        return run_children(args)
    return run_framework(args.frameworks[0], args.workloads, args.small)


if __name__ == "__main__":
    sys.exit(main())
