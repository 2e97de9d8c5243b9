"""NPBench's kernels in NumPy, on NPBench's own initialization: the peer of `npbench`.

Usage:
  python3 npbench.py init DIR PRESET KERNEL...
      writes each kernel's inputs to DIR/KERNEL/ (one .npy per argument, 0-d for scalars) and
      its sizes to DIR/KERNEL/sizes.json;
  python3 npbench.py run DIR PRESET ITERS KERNEL...
      runs each kernel once (its first run) and ITERS more times, each on fresh copies of its
      inputs, compares its outputs with Weft's (DIR/KERNEL/weft_NAME.npy) and prints one JSON
      line per kernel: NumPy's median and first-run seconds and the largest difference
      relative to the largest NumPy output. Where JAX is installed, the kernels with a JAX
      version (`npbench_jax.py`, imported from DIR) are timed the same way under `jax.jit` and compared with
      NumPy's outputs (`jax_seconds`, `jax_first_seconds`, `jax_max_rel_diff`); elsewhere
      each line says why not (`jax_unavailable`).

The kernels and initializations follow NPBench (github.com/spcl/npbench) statement for
statement, with its presets S, M, L and paper; XS holds tiny sizes for the tests.
"""
import json
import os
import sys
import time

import numpy as np


def rng():
    return np.random.default_rng(42)


# Per kernel: sizes per preset, the initialization, the kernel, and the arguments it writes
# (in place) or the names of what it returns.
KERNELS = {}


def kernel(name, sizes, outputs):
    def register(pair):
        init, run = pair
        KERNELS[name] = {"sizes": sizes, "init": init, "run": run, "outputs": outputs}
        return pair

    return register


def jacobi_1d_init(TSTEPS, N, dt=np.float64):
    A = np.fromfunction(lambda i: (i + 2) / N, (N,), dtype=dt)
    B = np.fromfunction(lambda i: (i + 3) / N, (N,), dtype=dt)
    return {"TSTEPS": TSTEPS, "A": A, "B": B}


def jacobi_1d(TSTEPS, A, B):
    for t in range(1, TSTEPS):
        B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
        A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])


kernel("jacobi_1d", {"XS": dict(TSTEPS=6, N=40), "S": dict(TSTEPS=800, N=3200),
                     "M": dict(TSTEPS=3000, N=12000), "L": dict(TSTEPS=8500, N=34000),
                     "paper": dict(TSTEPS=4000, N=32000)}, ["A", "B"])((jacobi_1d_init, jacobi_1d))


def jacobi_2d_init(TSTEPS, N, dt=np.float64):
    A = np.fromfunction(lambda i, j: i * (j + 2) / N, (N, N), dtype=dt)
    B = np.fromfunction(lambda i, j: i * (j + 3) / N, (N, N), dtype=dt)
    return {"TSTEPS": TSTEPS, "A": A, "B": B}


def jacobi_2d(TSTEPS, A, B):
    for t in range(1, TSTEPS):
        B[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] +
                               A[2:, 1:-1] + A[:-2, 1:-1])
        A[1:-1, 1:-1] = 0.2 * (B[1:-1, 1:-1] + B[1:-1, :-2] + B[1:-1, 2:] +
                               B[2:, 1:-1] + B[:-2, 1:-1])


kernel("jacobi_2d", {"XS": dict(TSTEPS=5, N=12), "S": dict(TSTEPS=50, N=150),
                     "M": dict(TSTEPS=80, N=350), "L": dict(TSTEPS=200, N=700),
                     "paper": dict(TSTEPS=1000, N=2800)}, ["A", "B"])((jacobi_2d_init, jacobi_2d))


def heat_3d_init(TSTEPS, N, dt=np.float64):
    A = np.fromfunction(lambda i, j, k: (i + j + (N - k)) * 10 / N, (N, N, N), dtype=dt)
    B = np.copy(A)
    return {"TSTEPS": TSTEPS, "A": A, "B": B}


def heat_3d(TSTEPS, A, B):
    for t in range(1, TSTEPS):
        B[1:-1, 1:-1, 1:-1] = (
            0.125 * (A[2:, 1:-1, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[:-2, 1:-1, 1:-1]) +
            0.125 * (A[1:-1, 2:, 1:-1] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, :-2, 1:-1]) +
            0.125 * (A[1:-1, 1:-1, 2:] - 2.0 * A[1:-1, 1:-1, 1:-1] + A[1:-1, 1:-1, 0:-2]) +
            A[1:-1, 1:-1, 1:-1])
        A[1:-1, 1:-1, 1:-1] = (
            0.125 * (B[2:, 1:-1, 1:-1] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[:-2, 1:-1, 1:-1]) +
            0.125 * (B[1:-1, 2:, 1:-1] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[1:-1, :-2, 1:-1]) +
            0.125 * (B[1:-1, 1:-1, 2:] - 2.0 * B[1:-1, 1:-1, 1:-1] + B[1:-1, 1:-1, 0:-2]) +
            B[1:-1, 1:-1, 1:-1])


kernel("heat_3d", {"XS": dict(TSTEPS=4, N=7), "S": dict(TSTEPS=25, N=25),
                   "M": dict(TSTEPS=50, N=40), "L": dict(TSTEPS=100, N=70),
                   "paper": dict(TSTEPS=500, N=120)}, ["A", "B"])((heat_3d_init, heat_3d))


def fdtd_2d_init(TMAX, NX, NY, dt=np.float64):
    ex = np.fromfunction(lambda i, j: (i * (j + 1)) / NX, (NX, NY), dtype=dt)
    ey = np.fromfunction(lambda i, j: (i * (j + 2)) / NY, (NX, NY), dtype=dt)
    hz = np.fromfunction(lambda i, j: (i * (j + 3)) / NX, (NX, NY), dtype=dt)
    fict = np.fromfunction(lambda i: i, (TMAX,), dtype=dt)
    return {"TMAX": TMAX, "ex": ex, "ey": ey, "hz": hz, "_fict_": fict}


def fdtd_2d(TMAX, ex, ey, hz, _fict_):
    for t in range(TMAX):
        ey[0, :] = _fict_[t]
        ey[1:, :] -= 0.5 * (hz[1:, :] - hz[:-1, :])
        ex[:, 1:] -= 0.5 * (hz[:, 1:] - hz[:, :-1])
        hz[:-1, :-1] -= 0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1])


kernel("fdtd_2d", {"XS": dict(TMAX=4, NX=9, NY=11), "S": dict(TMAX=20, NX=200, NY=220),
                   "M": dict(TMAX=60, NX=400, NY=450), "L": dict(TMAX=150, NX=800, NY=900),
                   "paper": dict(TMAX=500, NX=1000, NY=1200)},
       ["ex", "ey", "hz"])((fdtd_2d_init, fdtd_2d))


def gesummv_init(N, dt=np.float64):
    A = np.fromfunction(lambda i, j: ((i * j + 1) % N) / N, (N, N), dtype=dt)
    B = np.fromfunction(lambda i, j: ((i * j + 2) % N) / N, (N, N), dtype=dt)
    x = np.fromfunction(lambda i: (i % N) / N, (N,), dtype=dt)
    return {"alpha": dt(1.5), "beta": dt(1.2), "A": A, "B": B, "x": x}


def gesummv(alpha, beta, A, B, x):
    return {"out": alpha * A @ x + beta * B @ x}


kernel("gesummv", {"XS": dict(N=30), "S": dict(N=2000), "M": dict(N=4000), "L": dict(N=14000),
                   "paper": dict(N=11200)}, ["out"])((gesummv_init, gesummv))


def atax_init(M, N, dt=np.float64):
    fn = dt(N)
    x = np.fromfunction(lambda i: 1 + (i / fn), (N,), dtype=dt)
    A = np.fromfunction(lambda i, j: ((i + j) % N) / (5 * M), (M, N), dtype=dt)
    return {"A": A, "x": x}


def atax(A, x):
    return {"out": (A @ x) @ A}


kernel("atax", {"XS": dict(M=20, N=25), "S": dict(M=4000, N=5000), "M": dict(M=10000, N=12500),
                "L": dict(M=20000, N=25000), "paper": dict(M=18000, N=22000)},
       ["out"])((atax_init, atax))


def bicg_init(M, N, dt=np.float64):
    A = np.fromfunction(lambda i, j: (i * (j + 1) % N) / N, (N, M), dtype=dt)
    p = np.fromfunction(lambda i: (i % M) / M, (M,), dtype=dt)
    r = np.fromfunction(lambda i: (i % N) / N, (N,), dtype=dt)
    return {"A": A, "p": p, "r": r}


def bicg(A, p, r):
    return {"s": r @ A, "q": A @ p}


kernel("bicg", {"XS": dict(M=20, N=25), "S": dict(M=4000, N=5000), "M": dict(M=10000, N=12500),
                "L": dict(M=20000, N=25000), "paper": dict(M=18000, N=22000)},
       ["s", "q"])((bicg_init, bicg))


def mvt_init(N, dt=np.float64):
    x1 = np.fromfunction(lambda i: (i % N) / N, (N,), dtype=dt)
    x2 = np.fromfunction(lambda i: ((i + 1) % N) / N, (N,), dtype=dt)
    y_1 = np.fromfunction(lambda i: ((i + 3) % N) / N, (N,), dtype=dt)
    y_2 = np.fromfunction(lambda i: ((i + 4) % N) / N, (N,), dtype=dt)
    A = np.fromfunction(lambda i, j: (i * j % N) / N, (N, N), dtype=dt)
    return {"x1": x1, "x2": x2, "y_1": y_1, "y_2": y_2, "A": A}


def mvt(x1, x2, y_1, y_2, A):
    x1 += A @ y_1
    x2 += y_2 @ A


kernel("mvt", {"XS": dict(N=30), "S": dict(N=5500), "M": dict(N=11000), "L": dict(N=22000),
               "paper": dict(N=16000)}, ["x1", "x2"])((mvt_init, mvt))


def gemver_init(N, dt=np.float64):
    fn = dt(N)
    return {
        "alpha": dt(1.5), "beta": dt(1.2),
        "A": np.fromfunction(lambda i, j: (i * j % N) / N, (N, N), dtype=dt),
        "u1": np.fromfunction(lambda i: i, (N,), dtype=dt),
        "v1": np.fromfunction(lambda i: ((i + 1) / fn) / 4.0, (N,), dtype=dt),
        "u2": np.fromfunction(lambda i: ((i + 1) / fn) / 2.0, (N,), dtype=dt),
        "v2": np.fromfunction(lambda i: ((i + 1) / fn) / 6.0, (N,), dtype=dt),
        "w": np.zeros((N,), dtype=dt),
        "x": np.zeros((N,), dtype=dt),
        "y": np.fromfunction(lambda i: ((i + 1) / fn) / 8.0, (N,), dtype=dt),
        "z": np.fromfunction(lambda i: ((i + 1) / fn) / 9.0, (N,), dtype=dt),
    }


def gemver(alpha, beta, A, u1, v1, u2, v2, w, x, y, z):
    A += np.outer(u1, v1) + np.outer(u2, v2)
    x += beta * y @ A + z
    w += alpha * A @ x


kernel("gemver", {"XS": dict(N=30), "S": dict(N=1000), "M": dict(N=3000), "L": dict(N=10000),
                  "paper": dict(N=8000)}, ["A", "w", "x"])((gemver_init, gemver))


def softmax_init(N, H, SM):
    return {"x": rng().random((N, H, SM, SM), dtype=np.float32)}


def softmax(x):
    tmp_max = np.max(x, axis=-1, keepdims=True)
    tmp_out = np.exp(x - tmp_max)
    tmp_sum = np.sum(tmp_out, axis=-1, keepdims=True)
    return {"out": tmp_out / tmp_sum}


kernel("softmax", {"XS": dict(N=2, H=3, SM=8), "S": dict(N=16, H=16, SM=128),
                   "M": dict(N=32, H=8, SM=256), "L": dict(N=64, H=16, SM=448),
                   "paper": dict(N=64, H=16, SM=512)}, ["out"])((softmax_init, softmax))


def go_fast_init(N):
    return {"a": rng().random((N, N), dtype=np.float64)}


def go_fast(a):
    trace = 0.0
    for i in range(a.shape[0]):
        trace += np.tanh(a[i, i])
    return {"out": a + trace}


kernel("go_fast", {"XS": dict(N=20), "S": dict(N=2000), "M": dict(N=6000), "L": dict(N=20000),
                   "paper": dict(N=12500)}, ["out"])((go_fast_init, go_fast))


def compute_init(M, N):
    r = rng()
    array_1 = r.uniform(0, 1000, size=(M, N)).astype(np.int64)
    array_2 = r.uniform(0, 1000, size=(M, N)).astype(np.int64)
    return {"array_1": array_1, "array_2": array_2, "a": np.int64(4), "b": np.int64(3),
            "c": np.int64(9)}


def compute(array_1, array_2, a, b, c):
    return {"out": np.clip(array_1, 2, 10) * a + array_2 * b + c}


kernel("compute", {"XS": dict(M=20, N=30), "S": dict(M=2000, N=2000),
                   "M": dict(M=5000, N=5000), "L": dict(M=16000, N=16000),
                   "paper": dict(M=12500, N=12500)}, ["out"])((compute_init, compute))


def gemm_init(NI, NJ, NK, dt=np.float64):
    C = np.fromfunction(lambda i, j: ((i * j + 1) % NI) / NI, (NI, NJ), dtype=dt)
    A = np.fromfunction(lambda i, k: (i * (k + 1) % NK) / NK, (NI, NK), dtype=dt)
    B = np.fromfunction(lambda k, j: (k * (j + 2) % NJ) / NJ, (NK, NJ), dtype=dt)
    return {"alpha": dt(1.5), "beta": dt(1.2), "C": C, "A": A, "B": B}


def gemm(alpha, beta, C, A, B):
    C[:] = alpha * A @ B + beta * C


kernel("gemm", {"XS": dict(NI=20, NJ=22, NK=24), "S": dict(NI=1000, NJ=1100, NK=1200),
                "M": dict(NI=2500, NJ=2750, NK=3000), "L": dict(NI=7000, NJ=7500, NK=8000),
                "paper": dict(NI=2000, NJ=2300, NK=2600)}, ["C"])((gemm_init, gemm))


def k2mm_init(NI, NJ, NK, NL, dt=np.float64):
    A = np.fromfunction(lambda i, j: ((i * j + 1) % NI) / NI, (NI, NK), dtype=dt)
    B = np.fromfunction(lambda i, j: (i * (j + 1) % NJ) / NJ, (NK, NJ), dtype=dt)
    C = np.fromfunction(lambda i, j: ((i * (j + 3) + 1) % NL) / NL, (NJ, NL), dtype=dt)
    D = np.fromfunction(lambda i, j: (i * (j + 2) % NK) / NK, (NI, NL), dtype=dt)
    return {"alpha": dt(1.5), "beta": dt(1.2), "A": A, "B": B, "C": C, "D": D}


def k2mm(alpha, beta, A, B, C, D):
    D[:] = alpha * A @ B @ C + beta * D


kernel("k2mm", {"XS": dict(NI=16, NJ=17, NK=18, NL=19),
                "S": dict(NI=800, NJ=850, NK=900, NL=950),
                "M": dict(NI=2000, NJ=2250, NK=2500, NL=2750),
                "L": dict(NI=6000, NJ=6500, NK=7000, NL=7500),
                "paper": dict(NI=3200, NJ=3600, NK=4400, NL=4800)}, ["D"])((k2mm_init, k2mm))


def k3mm_init(NI, NJ, NK, NL, NM, dt=np.float64):
    A = np.fromfunction(lambda i, j: ((i * j + 1) % NI) / (5 * NI), (NI, NK), dtype=dt)
    B = np.fromfunction(lambda i, j: ((i * (j + 1) + 2) % NJ) / (5 * NJ), (NK, NJ), dtype=dt)
    C = np.fromfunction(lambda i, j: (i * (j + 3) % NL) / (5 * NL), (NJ, NM), dtype=dt)
    D = np.fromfunction(lambda i, j: ((i * (j + 2) + 2) % NK) / (5 * NK), (NM, NL), dtype=dt)
    return {"A": A, "B": B, "C": C, "D": D}


def k3mm(A, B, C, D):
    return {"out": A @ B @ C @ D}


kernel("k3mm", {"XS": dict(NI=16, NJ=17, NK=18, NL=19, NM=20),
                "S": dict(NI=800, NJ=850, NK=900, NL=950, NM=1000),
                "M": dict(NI=2000, NJ=2200, NK=2400, NL=2600, NM=2800),
                "L": dict(NI=5500, NJ=6000, NK=6500, NL=7000, NM=7500),
                "paper": dict(NI=3200, NJ=3600, NK=4000, NL=4400, NM=4800)},
       ["out"])((k3mm_init, k3mm))


def doitgen_init(NR, NQ, NP, dt=np.float64):
    A = np.fromfunction(lambda i, j, k: ((i * j + k) % NP) / NP, (NR, NQ, NP), dtype=dt)
    C4 = np.fromfunction(lambda i, j: (i * j % NP) / NP, (NP, NP), dtype=dt)
    return {"NR": NR, "NQ": NQ, "NP": NP, "A": A, "C4": C4}


def doitgen(NR, NQ, NP, A, C4):
    A[:] = np.reshape(np.reshape(A, (NR, NQ, 1, NP)) @ C4, (NR, NQ, NP))


kernel("doitgen", {"XS": dict(NR=5, NQ=6, NP=8), "S": dict(NR=60, NQ=60, NP=128),
                   "M": dict(NR=110, NQ=125, NP=256), "L": dict(NR=220, NQ=250, NP=512),
                   "paper": dict(NR=220, NQ=250, NP=270)}, ["A"])((doitgen_init, doitgen))


def covariance_init(M, N, dt=np.float64):
    data = np.fromfunction(lambda i, j: (i * j) / M, (N, M), dtype=dt)
    return {"M": M, "float_n": dt(N), "data": data}


def covariance(M, float_n, data):
    mean = np.mean(data, axis=0)
    data -= mean
    cov = np.zeros((M, M), dtype=data.dtype)
    for i in range(M):
        cov[i:M, i] = cov[i, i:M] = data[:, i] @ data[:, i:M] / (float_n - 1.0)
    return {"out": cov}


kernel("covariance", {"XS": dict(M=12, N=15), "S": dict(M=500, N=600),
                      "M": dict(M=1400, N=1800), "L": dict(M=3200, N=4000),
                      "paper": dict(M=1200, N=1400)}, ["out"])((covariance_init, covariance))


def floyd_warshall_init(N, dt=np.int32):
    path = np.fromfunction(lambda i, j: i * j % 7 + 1, (N, N), dtype=dt)
    for i in range(N):
        for j in range(N):
            if (i + j) % 13 == 0 or (i + j) % 7 == 0 or (i + j) % 11 == 0:
                path[i, j] = 999
    return {"path": path}


def floyd_warshall(path):
    for k in range(path.shape[0]):
        path[:] = np.minimum(path[:], np.add.outer(path[:, k], path[k, :]))


kernel("floyd_warshall", {"XS": dict(N=15), "S": dict(N=200), "M": dict(N=400),
                          "L": dict(N=850), "paper": dict(N=2800)},
       ["path"])((floyd_warshall_init, floyd_warshall))


def trisolv_init(N, dt=np.float64):
    L = np.fromfunction(lambda i, j: (i + N - j + 1) * 2 / N, (N, N), dtype=dt)
    x = np.full((N,), -999, dtype=dt)
    b = np.fromfunction(lambda i: i, (N,), dtype=dt)
    return {"L": L, "x": x, "b": b}


def trisolv(L, x, b):
    for i in range(x.shape[0]):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]


kernel("trisolv", {"XS": dict(N=12), "S": dict(N=2000), "M": dict(N=5000), "L": dict(N=14000),
                   "paper": dict(N=16000)}, ["x"])((trisolv_init, trisolv))


def hdiff_init(I, J, K):
    r = rng()
    return {"in_field": r.random((I + 4, J + 4, K)), "out_field": r.random((I, J, K)),
            "coeff": r.random((I, J, K))}


def hdiff(in_field, out_field, coeff):
    I, J, K = out_field.shape[0], out_field.shape[1], out_field.shape[2]
    lap_field = 4.0 * in_field[1:I + 3, 1:J + 3, :] - (
        in_field[2:I + 4, 1:J + 3, :] + in_field[0:I + 2, 1:J + 3, :] +
        in_field[1:I + 3, 2:J + 4, :] + in_field[1:I + 3, 0:J + 2, :])
    res = lap_field[1:, 1:J + 1, :] - lap_field[:-1, 1:J + 1, :]
    flx_field = np.where(
        (res * (in_field[2:I + 3, 2:J + 2, :] - in_field[1:I + 2, 2:J + 2, :])) > 0, 0, res)
    res = lap_field[1:I + 1, 1:, :] - lap_field[1:I + 1, :-1, :]
    fly_field = np.where(
        (res * (in_field[2:I + 2, 2:J + 3, :] - in_field[2:I + 2, 1:J + 2, :])) > 0, 0, res)
    out_field[:, :, :] = in_field[2:I + 2, 2:J + 2, :] - coeff[:, :, :] * (
        flx_field[1:, :, :] - flx_field[:-1, :, :] + fly_field[:, 1:, :] -
        fly_field[:, :-1, :])


kernel("hdiff", {"XS": dict(I=6, J=7, K=5), "S": dict(I=64, J=64, K=60),
                 "M": dict(I=128, J=128, K=160), "L": dict(I=384, J=384, K=160),
                 "paper": dict(I=256, J=256, K=160)}, ["out_field"])((hdiff_init, hdiff))


def syrk_init(M, N, dt=np.float64):
    C = np.fromfunction(lambda i, j: ((i * j + 2) % N) / M, (N, N), dtype=dt)
    A = np.fromfunction(lambda i, j: ((i * j + 1) % N) / N, (N, M), dtype=dt)
    return {"alpha": dt(1.5), "beta": dt(1.2), "C": C, "A": A}


def syrk(alpha, beta, C, A):
    for i in range(A.shape[0]):
        C[i, :i + 1] *= beta
        for k in range(A.shape[1]):
            C[i, :i + 1] += alpha * A[i, k] * A[:i + 1, k]


kernel("syrk", {"XS": dict(M=6, N=8), "S": dict(M=50, N=70), "M": dict(M=150, N=200),
                "L": dict(M=500, N=600), "paper": dict(M=1000, N=1200)},
       ["C"])((syrk_init, syrk))


def mlp_init(C_in, N, S0, S1, S2):
    r = rng()
    return {
        "input": np.random.rand(N, C_in).astype(np.float32),
        "w1": r.random((C_in, S0), dtype=np.float32), "b1": r.random((S0,), dtype=np.float32),
        "w2": r.random((S0, S1), dtype=np.float32), "b2": r.random((S1,), dtype=np.float32),
        "w3": r.random((S1, S2), dtype=np.float32), "b3": r.random((S2,), dtype=np.float32),
    }


def mlp(input, w1, b1, w2, b2, w3, b3):
    x = np.maximum(input @ w1 + b1, 0)
    x = np.maximum(x @ w2 + b2, 0)
    x = x @ w3 + b3
    tmp_max = np.max(x, axis=-1, keepdims=True)
    tmp_out = np.exp(x - tmp_max)
    tmp_sum = np.sum(tmp_out, axis=-1, keepdims=True)
    return {"out": tmp_out / tmp_sum}


kernel("mlp", {"XS": dict(C_in=3, N=4, S0=40, S1=20, S2=20),
               "S": dict(C_in=3, N=8, S0=30000, S1=2000, S2=2000),
               "M": dict(C_in=3, N=8, S0=30000, S1=10000, S2=10000),
               "L": dict(C_in=3, N=8, S0=30000, S1=30000, S2=30000),
               "paper": dict(C_in=3, N=8, S0=30000, S1=10000, S2=1000)},
       ["out"])((mlp_init, mlp))


def correlation_init(M, N, dt=np.float64):
    return {"M": M, "float_n": dt(N),
            "data": np.fromfunction(lambda i, j: (i * j) / M + i, (N, M), dtype=dt)}


def correlation(M, float_n, data):
    mean = np.mean(data, axis=0)
    stddev = np.std(data, axis=0)
    stddev[stddev <= 0.1] = 1.0
    data -= mean
    data /= np.sqrt(float_n) * stddev
    corr = np.eye(M, dtype=data.dtype)
    for i in range(M - 1):
        corr[i + 1:M, i] = corr[i, i + 1:M] = data[:, i] @ data[:, i + 1:M]
    return {"corr": corr}


kernel("correlation", {"XS": dict(M=10, N=12), "S": dict(M=500, N=600),
                       "M": dict(M=1400, N=1800), "L": dict(M=3200, N=4000),
                       "paper": dict(M=1200, N=1400)}, ["corr"])((correlation_init, correlation))


def trmm_init(M, N, dt=np.float64):
    A = np.fromfunction(lambda i, j: ((i * j) % M) / M, (M, M), dtype=dt)
    for i in range(M):
        A[i, i] = 1.0
    B = np.fromfunction(lambda i, j: ((N + i - j) % N) / N, (M, N), dtype=dt)
    return {"alpha": dt(1.5), "A": A, "B": B}


def trmm(alpha, A, B):
    for i in range(B.shape[0]):
        for j in range(B.shape[1]):
            B[i, j] += np.dot(A[i + 1:, i], B[i + 1:, j])
    B *= alpha


kernel("trmm", {"XS": dict(M=7, N=9), "S": dict(M=65, N=80), "M": dict(M=200, N=250),
                "L": dict(M=600, N=700), "paper": dict(M=1000, N=1200)},
       ["B"])((trmm_init, trmm))


def symm_init(M, N, dt=np.float64):
    C = np.fromfunction(lambda i, j: ((i + j) % 100) / M, (M, N), dtype=dt)
    B = np.fromfunction(lambda i, j: ((N + i - j) % 100) / M, (M, N), dtype=dt)
    A = np.empty((M, M), dtype=dt)
    for i in range(M):
        A[i, :i + 1] = np.fromfunction(lambda j: ((i + j) % 100) / M, (i + 1,), dtype=dt)
        A[i, i + 1:] = -999
    return {"alpha": dt(1.5), "beta": dt(1.2), "C": C, "A": A, "B": B}


def symm(alpha, beta, C, A, B):
    temp2 = np.empty((C.shape[1],), dtype=C.dtype)
    C *= beta
    for i in range(C.shape[0]):
        for j in range(C.shape[1]):
            C[:i, j] += alpha * B[i, j] * A[i, :i]
            temp2[j] = B[:i, j] @ A[i, :i]
        C[i, :] += alpha * B[i, :] * A[i, i] + alpha * temp2


kernel("symm", {"XS": dict(M=6, N=8), "S": dict(M=40, N=50), "M": dict(M=120, N=150),
                "L": dict(M=350, N=550), "paper": dict(M=1000, N=1200)},
       ["C"])((symm_init, symm))

def _spd_init(N, dt=np.float64):
    A = np.empty((N, N), dtype=dt)
    for i in range(N):
        A[i, :i + 1] = np.fromfunction(lambda j: (-j % N) / N + 1, (i + 1,), dtype=dt)
        A[i, i + 1:] = 0.0
        A[i, i] = 1.0
    A[:] = A @ np.transpose(A)
    return {"A": A}


def lu(A):
    for i in range(A.shape[0]):
        for j in range(i):
            A[i, j] -= A[i, :j] @ A[:j, j]
            A[i, j] /= A[j, j]
        for j in range(i, A.shape[0]):
            A[i, j] -= A[i, :i] @ A[:i, j]


kernel("lu", {"XS": dict(N=8), "S": dict(N=60), "M": dict(N=220), "L": dict(N=700),
              "paper": dict(N=2000)}, ["A"])((_spd_init, lu))


def ludcmp_init(N, dt=np.float64):
    out = _spd_init(N, dt)
    fn = dt(N)
    out["b"] = np.fromfunction(lambda i: (i + 1) / fn / 2.0 + 4.0, (N,), dtype=dt)
    return out


def ludcmp(A, b):
    x = np.zeros_like(b)
    y = np.zeros_like(b)
    lu(A)  # NPBench's ludcmp factorizes with exactly `lu`'s loops.
    for i in range(A.shape[0]):
        y[i] = b[i] - A[i, :i] @ y[:i]
    for i in range(A.shape[0] - 1, -1, -1):
        x[i] = (y[i] - A[i, i + 1:] @ x[i + 1:]) / A[i, i]
    return {"A": A, "x": x, "y": y}


kernel("ludcmp", {"XS": dict(N=8), "S": dict(N=60), "M": dict(N=220), "L": dict(N=650),
                  "paper": dict(N=2000)}, ["A", "x", "y"])((ludcmp_init, ludcmp))


def deriche_init(W, H, dt=np.float64):
    imgIn = np.fromfunction(lambda i, j: ((313 * i + 991 * j) % 65536) / 65535.0, (W, H),
                            dtype=dt)
    return {"alpha": dt(0.25), "imgIn": imgIn}


def deriche(alpha, imgIn):
    k = (1.0 - np.exp(-alpha)) * (1.0 - np.exp(-alpha)) / (
        1.0 + alpha * np.exp(-alpha) - np.exp(2.0 * alpha))
    a1 = a5 = k
    a2 = a6 = k * np.exp(-alpha) * (alpha - 1.0)
    a3 = a7 = k * np.exp(-alpha) * (alpha + 1.0)
    a4 = a8 = -k * np.exp(-2.0 * alpha)
    b1 = 2.0**(-alpha)
    b2 = -np.exp(-2.0 * alpha)
    c1 = c2 = 1
    y1 = np.empty_like(imgIn)
    y1[:, 0] = a1 * imgIn[:, 0]
    y1[:, 1] = a1 * imgIn[:, 1] + a2 * imgIn[:, 0] + b1 * y1[:, 0]
    for j in range(2, imgIn.shape[1]):
        y1[:, j] = (a1 * imgIn[:, j] + a2 * imgIn[:, j - 1] + b1 * y1[:, j - 1] +
                    b2 * y1[:, j - 2])
    y2 = np.empty_like(imgIn)
    y2[:, -1] = 0.0
    y2[:, -2] = a3 * imgIn[:, -1]
    for j in range(imgIn.shape[1] - 3, -1, -1):
        y2[:, j] = (a3 * imgIn[:, j + 1] + a4 * imgIn[:, j + 2] + b1 * y2[:, j + 1] +
                    b2 * y2[:, j + 2])
    imgOut = c1 * (y1 + y2)
    y1[0, :] = a5 * imgOut[0, :]
    y1[1, :] = a5 * imgOut[1, :] + a6 * imgOut[0, :] + b1 * y1[0, :]
    for i in range(2, imgIn.shape[0]):
        y1[i, :] = (a5 * imgOut[i, :] + a6 * imgOut[i - 1, :] + b1 * y1[i - 1, :] +
                    b2 * y1[i - 2, :])
    y2[-1, :] = 0.0
    y2[-2, :] = a7 * imgOut[-1, :]
    for i in range(imgIn.shape[0] - 3, -1, -1):
        y2[i, :] = (a7 * imgOut[i + 1, :] + a8 * imgOut[i + 2, :] + b1 * y2[i + 1, :] +
                    b2 * y2[i + 2, :])
    imgOut[:] = c2 * (y1 + y2)
    return {"imgOut": imgOut}


kernel("deriche", {"XS": dict(W=9, H=7), "S": dict(W=400, H=200), "M": dict(W=1500, H=1000),
                   "L": dict(W=6000, H=3000), "paper": dict(W=7680, H=4320)},
       ["imgOut"])((deriche_init, deriche))


def vadv_init(I, J, K, dt=np.float64):
    r = rng()
    return {"dtr_stage": 3. / 20., "utens_stage": r.random((I, J, K), dtype=dt),
            "u_stage": r.random((I, J, K), dtype=dt), "wcon": r.random((I + 1, J, K), dtype=dt),
            "u_pos": r.random((I, J, K), dtype=dt), "utens": r.random((I, J, K), dtype=dt)}


BET_M = 0.5
BET_P = 0.5


def vadv(dtr_stage, utens_stage, u_stage, wcon, u_pos, utens):
    I, J, K = utens_stage.shape
    ccol = np.ndarray((I, J, K), dtype=utens_stage.dtype)
    dcol = np.ndarray((I, J, K), dtype=utens_stage.dtype)
    data_col = np.ndarray((I, J), dtype=utens_stage.dtype)
    for k in range(1):
        gcv = 0.25 * (wcon[1:, :, k + 1] + wcon[:-1, :, k + 1])
        cs = gcv * BET_M
        ccol[:, :, k] = gcv * BET_P
        bcol = dtr_stage - ccol[:, :, k]
        correction_term = -cs * (u_stage[:, :, k + 1] - u_stage[:, :, k])
        dcol[:, :, k] = (dtr_stage * u_pos[:, :, k] + utens[:, :, k] + utens_stage[:, :, k] +
                         correction_term)
        divided = 1.0 / bcol
        ccol[:, :, k] = ccol[:, :, k] * divided
        dcol[:, :, k] = dcol[:, :, k] * divided
    for k in range(1, K - 1):
        gav = -0.25 * (wcon[1:, :, k] + wcon[:-1, :, k])
        gcv = 0.25 * (wcon[1:, :, k + 1] + wcon[:-1, :, k + 1])
        as_ = gav * BET_M
        cs = gcv * BET_M
        acol = gav * BET_P
        ccol[:, :, k] = gcv * BET_P
        bcol = dtr_stage - acol - ccol[:, :, k]
        correction_term = (-as_ * (u_stage[:, :, k - 1] - u_stage[:, :, k]) -
                           cs * (u_stage[:, :, k + 1] - u_stage[:, :, k]))
        dcol[:, :, k] = (dtr_stage * u_pos[:, :, k] + utens[:, :, k] + utens_stage[:, :, k] +
                         correction_term)
        divided = 1.0 / (bcol - ccol[:, :, k - 1] * acol)
        ccol[:, :, k] = ccol[:, :, k] * divided
        dcol[:, :, k] = (dcol[:, :, k] - dcol[:, :, k - 1] * acol) * divided
    for k in range(K - 1, K):
        gav = -0.25 * (wcon[1:, :, k] + wcon[:-1, :, k])
        as_ = gav * BET_M
        acol = gav * BET_P
        bcol = dtr_stage - acol
        correction_term = -as_ * (u_stage[:, :, k - 1] - u_stage[:, :, k])
        dcol[:, :, k] = (dtr_stage * u_pos[:, :, k] + utens[:, :, k] + utens_stage[:, :, k] +
                         correction_term)
        divided = 1.0 / (bcol - ccol[:, :, k - 1] * acol)
        dcol[:, :, k] = (dcol[:, :, k] - dcol[:, :, k - 1] * acol) * divided
    for k in range(K - 1, K - 2, -1):
        datacol = dcol[:, :, k]
        data_col[:] = datacol
        utens_stage[:, :, k] = dtr_stage * (datacol - u_pos[:, :, k])
    for k in range(K - 2, -1, -1):
        datacol = dcol[:, :, k] - ccol[:, :, k] * data_col[:, :]
        data_col[:] = datacol
        utens_stage[:, :, k] = dtr_stage * (datacol - u_pos[:, :, k])


kernel("vadv", {"XS": dict(I=5, J=4, K=6), "S": dict(I=60, J=60, K=40),
                "M": dict(I=112, J=112, K=80), "L": dict(I=180, J=180, K=160),
                "paper": dict(I=256, J=256, K=160)}, ["utens_stage"])((vadv_init, vadv))


def cholesky(A):
    A[0, 0] = np.sqrt(A[0, 0])
    for i in range(1, A.shape[0]):
        for j in range(i):
            A[i, j] -= np.dot(A[i, :j], A[j, :j])
            A[i, j] /= A[j, j]
        A[i, i] -= np.dot(A[i, :i], A[i, :i])
        A[i, i] = np.sqrt(A[i, i])


kernel("cholesky", {"XS": dict(N=8), "S": dict(N=100), "M": dict(N=300), "L": dict(N=900),
                    "paper": dict(N=2000)}, ["A"])((_spd_init, cholesky))


def gramschmidt_init(M, N, dt=np.float64):
    r = rng()
    A = r.random((M, N), dtype=dt)
    while np.linalg.matrix_rank(A) < N:
        A = r.random((M, N), dtype=dt)
    return {"A": A}


def gramschmidt(A):
    Q = np.zeros_like(A)
    R = np.zeros((A.shape[1], A.shape[1]), dtype=A.dtype)
    for k in range(A.shape[1]):
        nrm = np.dot(A[:, k], A[:, k])
        R[k, k] = np.sqrt(nrm)
        Q[:, k] = A[:, k] / R[k, k]
        for j in range(k + 1, A.shape[1]):
            R[k, j] = np.dot(Q[:, k], A[:, j])
            A[:, j] -= Q[:, k] * R[k, j]
    return {"Q": Q, "R": R}


kernel("gramschmidt", {"XS": dict(M=9, N=7), "S": dict(M=70, N=60), "M": dict(M=220, N=180),
                       "L": dict(M=600, N=500), "paper": dict(M=240, N=200)},
       ["Q", "R"])((gramschmidt_init, gramschmidt))


def durbin_init(N, dt=np.float64):
    return {"r": np.fromfunction(lambda i: N + 1 - i, (N,), dtype=dt)}


def durbin(r):
    y = np.empty_like(r)
    alpha = -r[0]
    beta = 1.0
    y[0] = -r[0]
    for k in range(1, r.shape[0]):
        beta *= 1.0 - alpha * alpha
        alpha = -(r[k] + np.dot(np.flip(r[:k]), y[:k])) / beta
        y[:k] += alpha * np.flip(y[:k])
        y[k] = alpha
    return {"y": y}


kernel("durbin", {"XS": dict(N=12), "S": dict(N=1000), "M": dict(N=6000), "L": dict(N=20000),
                  "paper": dict(N=16000)}, ["y"])((durbin_init, durbin))

def seidel_2d_init(TSTEPS, N, dt=np.float64):
    A = np.fromfunction(lambda i, j: (i * (j + 2) + 2) / N, (N, N), dtype=dt)
    return {"TSTEPS": TSTEPS, "N": N, "A": A}


def seidel_2d(TSTEPS, N, A):
    for t in range(0, TSTEPS - 1):
        for i in range(1, N - 1):
            A[i, 1:-1] += (A[i - 1, :-2] + A[i - 1, 1:-1] + A[i - 1, 2:] +
                           A[i, 2:] + A[i + 1, :-2] + A[i + 1, 1:-1] +
                           A[i + 1, 2:])
            for j in range(1, N - 1):
                A[i, j] += A[i, j - 1]
                A[i, j] /= 9.0


kernel("seidel_2d", {"XS": dict(TSTEPS=3, N=10), "S": dict(TSTEPS=8, N=50),
                     "M": dict(TSTEPS=15, N=100), "L": dict(TSTEPS=40, N=200),
                     "paper": dict(TSTEPS=100, N=400)}, ["A"])((seidel_2d_init, seidel_2d))


def nussinov_init(N, dt=np.int32):
    seq = np.fromfunction(lambda i: (i + 1) % 4, (N,), dtype=dt)
    return {"N": N, "seq": seq}


def nussinov_match(b1, b2):
    if b1 + b2 == 3:
        return 1
    else:
        return 0


def nussinov(N, seq):
    table = np.zeros((N, N), np.int32)
    for i in range(N - 1, -1, -1):
        for j in range(i + 1, N):
            if j - 1 >= 0:
                table[i, j] = max(table[i, j], table[i, j - 1])
            if i + 1 < N:
                table[i, j] = max(table[i, j], table[i + 1, j])
            if j - 1 >= 0 and i + 1 < N:
                if i < j - 1:
                    table[i, j] = max(table[i, j],
                                      table[i + 1, j - 1] + nussinov_match(seq[i], seq[j]))
                else:
                    table[i, j] = max(table[i, j], table[i + 1, j - 1])
            for k in range(i + 1, j):
                table[i, j] = max(table[i, j], table[i, k] + table[k + 1, j])
    return {"table": table}


kernel("nussinov", {"XS": dict(N=12), "S": dict(N=40), "M": dict(N=90), "L": dict(N=200),
                    "paper": dict(N=500)}, ["table"])((nussinov_init, nussinov))

def covariance2(M, float_n, data):
    return {"out": np.cov(np.transpose(data))}


kernel("covariance2", {"XS": dict(M=12, N=15), "S": dict(M=500, N=600),
                       "M": dict(M=1400, N=1800), "L": dict(M=3200, N=4000),
                       "paper": dict(M=1200, N=1400)}, ["out"])((covariance_init, covariance2))


def crc16_init(N):
    from numpy.random import default_rng
    rng = default_rng(42)
    data = rng.integers(0, 256, size=(N,), dtype=np.uint8)
    return {"data": data}


def crc16(data, poly=0x8408):
    crc = 0xFFFF
    for b in data:
        cur_byte = 0xFF & b
        for _ in range(0, 8):
            if (crc & 0x0001) ^ (cur_byte & 0x0001):
                crc = (crc >> 1) ^ poly
            else:
                crc >>= 1
            cur_byte >>= 1
    crc = (~crc & 0xFFFF)
    crc = (crc << 8) | ((crc >> 8) & 0xFF)
    return {"crc": np.int32(crc & 0xFFFF)}


kernel("crc16", {"XS": dict(N=40), "S": dict(N=1600), "M": dict(N=16000), "L": dict(N=160000),
                 "paper": dict(N=1000000)}, ["crc"])((crc16_init, crc16))

def arc_distance_init(N):
    r = rng()
    return {"theta_1": r.random((N,)), "phi_1": r.random((N,)), "theta_2": r.random((N,)),
            "phi_2": r.random((N,))}


def arc_distance(theta_1, phi_1, theta_2, phi_2):
    temp = np.sin((theta_2 - theta_1) / 2)**2 + np.cos(theta_1) * np.cos(theta_2) * np.sin(
        (phi_2 - phi_1) / 2)**2
    return {"distance": 2 * (np.arctan2(np.sqrt(temp), np.sqrt(1 - temp)))}


kernel("arc_distance", {"XS": dict(N=40), "S": dict(N=100000), "M": dict(N=1000000),
                        "L": dict(N=10000000), "paper": dict(N=10000000)},
       ["distance"])((arc_distance_init, arc_distance))


def syr2k_init(M, N, dt=np.float64):
    C = np.fromfunction(lambda i, j: ((i * j + 3) % N) / M, (N, N), dtype=dt)
    A = np.fromfunction(lambda i, j: ((i * j + 1) % N) / N, (N, M), dtype=dt)
    B = np.fromfunction(lambda i, j: ((i * j + 2) % M) / M, (N, M), dtype=dt)
    return {"alpha": dt(1.5), "beta": dt(1.2), "C": C, "A": A, "B": B}


def syr2k(alpha, beta, C, A, B):
    for i in range(A.shape[0]):
        C[i, :i + 1] *= beta
        for k in range(A.shape[1]):
            C[i, :i + 1] += (A[:i + 1, k] * alpha * B[i, k] + B[:i + 1, k] * alpha * A[i, k])


kernel("syr2k", {"XS": dict(M=6, N=8), "S": dict(M=35, N=50), "M": dict(M=110, N=140),
                 "L": dict(M=350, N=400), "paper": dict(M=1000, N=1200)},
       ["C"])((syr2k_init, syr2k))

def adi_init(TSTEPS, N, dt=np.float64):
    u = np.fromfunction(lambda i, j: (i + N - j) / N, (N, N), dtype=dt)
    return {"TSTEPS": TSTEPS, "N": N, "u": u}


def adi(TSTEPS, N, u):
    v = np.empty(u.shape, dtype=u.dtype)
    p = np.empty(u.shape, dtype=u.dtype)
    q = np.empty(u.shape, dtype=u.dtype)
    DX = 1.0 / N
    DY = 1.0 / N
    DT = 1.0 / TSTEPS
    B1 = 2.0
    B2 = 1.0
    mul1 = B1 * DT / (DX * DX)
    mul2 = B2 * DT / (DY * DY)
    a = -mul1 / 2.0
    b = 1.0 + mul2
    c = a
    d = -mul2 / 2.0
    e = 1.0 + mul2
    f = d
    for t in range(1, TSTEPS + 1):
        v[0, 1:N - 1] = 1.0
        p[1:N - 1, 0] = 0.0
        q[1:N - 1, 0] = v[0, 1:N - 1]
        for j in range(1, N - 1):
            p[1:N - 1, j] = -c / (a * p[1:N - 1, j - 1] + b)
            q[1:N - 1, j] = (-d * u[j, 0:N - 2] + (1.0 + 2.0 * d) * u[j, 1:N - 1] -
                             f * u[j, 2:N] - a * q[1:N - 1, j - 1]) / (a * p[1:N - 1, j - 1] + b)
        v[N - 1, 1:N - 1] = 1.0
        for j in range(N - 2, 0, -1):
            v[j, 1:N - 1] = p[1:N - 1, j] * v[j + 1, 1:N - 1] + q[1:N - 1, j]
        u[1:N - 1, 0] = 1.0
        p[1:N - 1, 0] = 0.0
        q[1:N - 1, 0] = u[1:N - 1, 0]
        for j in range(1, N - 1):
            p[1:N - 1, j] = -f / (d * p[1:N - 1, j - 1] + e)
            q[1:N - 1, j] = (-a * v[0:N - 2, j] + (1.0 + 2.0 * a) * v[1:N - 1, j] -
                             c * v[2:N, j] - d * q[1:N - 1, j - 1]) / (d * p[1:N - 1, j - 1] + e)
        u[1:N - 1, N - 1] = 1.0
        for j in range(N - 2, 0, -1):
            u[1:N - 1, j] = p[1:N - 1, j] * u[1:N - 1, j + 1] + q[1:N - 1, j]


kernel("adi", {"XS": dict(TSTEPS=3, N=9), "S": dict(TSTEPS=5, N=100),
               "M": dict(TSTEPS=20, N=200), "L": dict(TSTEPS=50, N=500),
               "paper": dict(TSTEPS=100, N=200)}, ["u"])((adi_init, adi))


def cavity_flow_init(ny, nx, nt, nit):
    u = np.zeros((ny, nx), dtype=np.float64)
    v = np.zeros((ny, nx), dtype=np.float64)
    p = np.zeros((ny, nx), dtype=np.float64)
    dx = 2 / (nx - 1)
    dy = 2 / (ny - 1)
    dt = .1 / ((nx - 1) * (ny - 1))
    # rho and nu are the same in every NPBench preset.
    return {"nx": nx, "ny": ny, "nt": nt, "nit": nit, "u": u, "v": v, "dt": dt, "dx": dx,
            "dy": dy, "p": p, "rho": 1.0, "nu": 0.1}


def cavity_build_up_b(b, rho, dt, u, v, dx, dy):
    b[1:-1, 1:-1] = (rho * (1 / dt * ((u[1:-1, 2:] - u[1:-1, 0:-2]) / (2 * dx) +
                                      (v[2:, 1:-1] - v[0:-2, 1:-1]) / (2 * dy)) -
                            ((u[1:-1, 2:] - u[1:-1, 0:-2]) / (2 * dx))**2 - 2 *
                            ((u[2:, 1:-1] - u[0:-2, 1:-1]) / (2 * dy) *
                             (v[1:-1, 2:] - v[1:-1, 0:-2]) / (2 * dx)) -
                            ((v[2:, 1:-1] - v[0:-2, 1:-1]) / (2 * dy))**2))


def cavity_pressure_poisson(nit, p, dx, dy, b):
    pn = np.empty_like(p)
    pn = p.copy()
    for q in range(nit):
        pn = p.copy()
        p[1:-1, 1:-1] = (((pn[1:-1, 2:] + pn[1:-1, 0:-2]) * dy**2 +
                          (pn[2:, 1:-1] + pn[0:-2, 1:-1]) * dx**2) /
                         (2 * (dx**2 + dy**2)) - dx**2 * dy**2 /
                         (2 * (dx**2 + dy**2)) * b[1:-1, 1:-1])
        p[:, -1] = p[:, -2]  # dp/dx = 0 at x = 2
        p[0, :] = p[1, :]  # dp/dy = 0 at y = 0
        p[:, 0] = p[:, 1]  # dp/dx = 0 at x = 0
        p[-1, :] = 0  # p = 0 at y = 2


def cavity_flow(nx, ny, nt, nit, u, v, dt, dx, dy, p, rho, nu):
    un = np.empty_like(u)
    vn = np.empty_like(v)
    b = np.zeros((ny, nx))
    for n in range(nt):
        un = u.copy()
        vn = v.copy()
        cavity_build_up_b(b, rho, dt, u, v, dx, dy)
        cavity_pressure_poisson(nit, p, dx, dy, b)
        u[1:-1, 1:-1] = (un[1:-1, 1:-1] - un[1:-1, 1:-1] * dt / dx *
                         (un[1:-1, 1:-1] - un[1:-1, 0:-2]) -
                         vn[1:-1, 1:-1] * dt / dy *
                         (un[1:-1, 1:-1] - un[0:-2, 1:-1]) - dt / (2 * rho * dx) *
                         (p[1:-1, 2:] - p[1:-1, 0:-2]) + nu *
                         (dt / dx**2 *
                          (un[1:-1, 2:] - 2 * un[1:-1, 1:-1] + un[1:-1, 0:-2]) +
                          dt / dy**2 *
                          (un[2:, 1:-1] - 2 * un[1:-1, 1:-1] + un[0:-2, 1:-1])))
        v[1:-1, 1:-1] = (vn[1:-1, 1:-1] - un[1:-1, 1:-1] * dt / dx *
                         (vn[1:-1, 1:-1] - vn[1:-1, 0:-2]) -
                         vn[1:-1, 1:-1] * dt / dy *
                         (vn[1:-1, 1:-1] - vn[0:-2, 1:-1]) - dt / (2 * rho * dy) *
                         (p[2:, 1:-1] - p[0:-2, 1:-1]) + nu *
                         (dt / dx**2 *
                          (vn[1:-1, 2:] - 2 * vn[1:-1, 1:-1] + vn[1:-1, 0:-2]) +
                          dt / dy**2 *
                          (vn[2:, 1:-1] - 2 * vn[1:-1, 1:-1] + vn[0:-2, 1:-1])))
        u[0, :] = 0
        u[:, 0] = 0
        u[:, -1] = 0
        u[-1, :] = 1  # set velocity on cavity lid equal to 1
        v[0, :] = 0
        v[-1, :] = 0
        v[:, 0] = 0
        v[:, -1] = 0


kernel("cavity_flow", {"XS": dict(ny=8, nx=9, nt=3, nit=2), "S": dict(ny=61, nx=61, nt=25, nit=5),
                       "M": dict(ny=121, nx=121, nt=50, nit=10),
                       "L": dict(ny=201, nx=201, nt=100, nit=20),
                       "paper": dict(ny=101, nx=101, nt=700, nit=50)},
       ["u", "v", "p"])((cavity_flow_init, cavity_flow))


def spmv_init(M, N, nnz):
    from numpy.random import default_rng
    rng = default_rng(42)
    x = rng.random((N, ))
    from scipy.sparse import random
    matrix = random(M, N, density=nnz / (M * N), format='csr', dtype=np.float64,
                    random_state=rng)
    # NPBench stores the indices as uint32; Weft has no unsigned integer dtypes yet, so they
    # are written (and NumPy runs on them) as int32: the same values.
    rows = np.int32(np.uint32(matrix.indptr))
    cols = np.int32(np.uint32(matrix.indices))
    vals = matrix.data
    return {"A_row": rows, "A_col": cols, "A_val": vals, "x": x}


def spmv(A_row, A_col, A_val, x):
    y = np.empty(A_row.size - 1, A_val.dtype)
    for i in range(A_row.size - 1):
        cols = A_col[A_row[i]:A_row[i + 1]]
        vals = A_val[A_row[i]:A_row[i + 1]]
        y[i] = vals @ x[cols]
    return {"y": y}


kernel("spmv", {"XS": dict(M=12, N=10, nnz=30), "S": dict(M=4096, N=4096, nnz=8192),
                "M": dict(M=32768, N=32768, nnz=65536),
                "L": dict(M=262144, N=262144, nnz=262144),
                "paper": dict(M=131072, N=131072, nnz=262144)}, ["y"])((spmv_init, spmv))


def conv2d_bias_init(C_in, C_out, H, K, N, W):
    from numpy.random import default_rng
    rng = default_rng(42)
    # NHWC data layout
    input = rng.random((N, H, W, C_in), dtype=np.float32)
    # Weights
    weights = rng.random((K, K, C_in, C_out), dtype=np.float32)
    bias = rng.random((C_out, ), dtype=np.float32)
    return {"input": input, "weights": weights, "bias": bias}


def conv2d(input, weights):
    K = weights.shape[0]  # Assuming square kernel
    N = input.shape[0]
    H_out = input.shape[1] - K + 1
    W_out = input.shape[2] - K + 1
    C_out = weights.shape[3]
    output = np.empty((N, H_out, W_out, C_out), dtype=np.float32)
    for i in range(H_out):
        for j in range(W_out):
            output[:, i, j, :] = np.sum(
                input[:, i:i + K, j:j + K, :, np.newaxis] *
                weights[np.newaxis, :, :, :],
                axis=(1, 2, 3),
            )
    return output


def conv2d_bias(input, weights, bias):
    return {"output": conv2d(input, weights) + bias}


kernel("conv2d_bias", {"XS": dict(N=2, C_in=3, C_out=4, K=3, H=7, W=8),
                       "S": dict(N=8, C_in=3, C_out=16, K=2, H=32, W=32),
                       "M": dict(N=8, C_in=3, C_out=8, K=5, H=64, W=64),
                       "L": dict(N=8, C_in=3, C_out=8, K=10, H=128, W=128),
                       "paper": dict(N=8, C_in=3, C_out=16, K=20, H=256, W=256)},
       ["output"])((conv2d_bias_init, conv2d_bias))


def nbody_init(N, tEnd_over_dt):
    # NPBench's tEnd and dt: 2.0 and 0.05 at S, 5.0 and 0.02 at M, 9.0 and 0.01 at L; here
    # dt is M's at every preset, and tEnd = dt * tEnd_over_dt (XS takes few steps: the system is chaotic, and a difference in
    # the last bit, from another summation order, grows to the size of the result over M's
    # 250 steps).
    dt, softening, G = 0.02, 0.1, 1.0
    tEnd = dt * tEnd_over_dt
    from numpy.random import default_rng
    rng = default_rng(42)
    mass = 20.0 * np.ones((N, 1)) / N  # total mass of particles is 20
    pos = rng.random((N, 3))  # randomly selected positions and velocities
    vel = rng.random((N, 3))
    Nt = int(np.ceil(tEnd / dt))
    return {"mass": mass, "pos": pos, "vel": vel, "N": N, "Nt": Nt, "dt": dt, "G": G,
            "softening": softening}


def nbody_getAcc(pos, mass, G, softening):
    x = pos[:, 0:1]
    y = pos[:, 1:2]
    z = pos[:, 2:3]
    dx = x.T - x
    dy = y.T - y
    dz = z.T - z
    inv_r3 = (dx**2 + dy**2 + dz**2 + softening**2)
    inv_r3[inv_r3 > 0] = inv_r3[inv_r3 > 0]**(-1.5)
    ax = G * (dx * inv_r3) @ mass
    ay = G * (dy * inv_r3) @ mass
    az = G * (dz * inv_r3) @ mass
    a = np.hstack((ax, ay, az))
    return a


def nbody_getEnergy(pos, vel, mass, G):
    KE = 0.5 * np.sum(mass * vel**2)
    x = pos[:, 0:1]
    y = pos[:, 1:2]
    z = pos[:, 2:3]
    dx = x.T - x
    dy = y.T - y
    dz = z.T - z
    inv_r = np.sqrt(dx**2 + dy**2 + dz**2)
    inv_r[inv_r > 0] = 1.0 / inv_r[inv_r > 0]
    PE = G * np.sum(np.triu(-(mass * mass.T) * inv_r, 1))
    return KE, PE


def nbody(mass, pos, vel, N, Nt, dt, G, softening):
    vel -= np.mean(mass * vel, axis=0) / np.mean(mass)
    acc = nbody_getAcc(pos, mass, G, softening)
    KE = np.ndarray(Nt + 1, dtype=np.float64)
    PE = np.ndarray(Nt + 1, dtype=np.float64)
    KE[0], PE[0] = nbody_getEnergy(pos, vel, mass, G)
    t = 0.0
    for i in range(Nt):
        vel += acc * dt / 2.0
        pos += vel * dt
        acc = nbody_getAcc(pos, mass, G, softening)
        vel += acc * dt / 2.0
        t += dt
        KE[i + 1], PE[i + 1] = nbody_getEnergy(pos, vel, mass, G)
    return {"KE": KE, "PE": PE}


kernel("nbody", {"XS": dict(N=6, tEnd_over_dt=12), "S": dict(N=25, tEnd_over_dt=40),
                 "M": dict(N=50, tEnd_over_dt=250), "L": dict(N=100, tEnd_over_dt=900),
                 "paper": dict(N=100, tEnd_over_dt=1000)},
       ["KE", "PE"])((nbody_init, nbody))


def lenet_init(N, H, W):
    from numpy.random import default_rng
    rng = default_rng(42)
    H_conv1 = H - 4
    W_conv1 = W - 4
    H_pool1 = H_conv1 // 2
    W_pool1 = W_conv1 // 2
    H_conv2 = H_pool1 - 4
    W_conv2 = W_pool1 - 4
    H_pool2 = H_conv2 // 2
    W_pool2 = W_conv2 // 2
    C_before_fc1 = 16 * H_pool2 * W_pool2
    # NHWC data layout
    input = rng.random((N, H, W, 1), dtype=np.float32)
    # Weights
    conv1 = rng.random((5, 5, 1, 6), dtype=np.float32)
    conv1bias = rng.random((6, ), dtype=np.float32)
    conv2 = rng.random((5, 5, 6, 16), dtype=np.float32)
    conv2bias = rng.random((16, ), dtype=np.float32)
    fc1w = rng.random((C_before_fc1, 120), dtype=np.float32)
    fc1b = rng.random((120, ), dtype=np.float32)
    fc2w = rng.random((120, 84), dtype=np.float32)
    fc2b = rng.random((84, ), dtype=np.float32)
    fc3w = rng.random((84, 10), dtype=np.float32)
    fc3b = rng.random((10, ), dtype=np.float32)
    return {"input": input, "conv1": conv1, "conv1bias": conv1bias, "conv2": conv2,
            "conv2bias": conv2bias, "fc1w": fc1w, "fc1b": fc1b, "fc2w": fc2w, "fc2b": fc2b,
            "fc3w": fc3w, "fc3b": fc3b, "N": N, "C_before_fc1": C_before_fc1}


def relu(x):
    return np.maximum(x, 0)


def maxpool2d(x):
    output = np.empty([x.shape[0], x.shape[1] // 2, x.shape[2] // 2, x.shape[3]], dtype=x.dtype)
    for i in range(x.shape[1] // 2):
        for j in range(x.shape[2] // 2):
            output[:, i, j, :] = np.max(x[:, 2 * i:2 * i + 2, 2 * j:2 * j + 2, :], axis=(1, 2))
    return output


def lenet(input, conv1, conv1bias, conv2, conv2bias, fc1w, fc1b, fc2w, fc2b, fc3w, fc3b, N,
          C_before_fc1):
    x = relu(conv2d(input, conv1) + conv1bias)
    x = maxpool2d(x)
    x = relu(conv2d(x, conv2) + conv2bias)
    x = maxpool2d(x)
    x = np.reshape(x, (N, C_before_fc1))
    x = relu(x @ fc1w + fc1b)
    x = relu(x @ fc2w + fc2b)
    return {"output": x @ fc3w + fc3b}


kernel("lenet", {"XS": dict(N=2, H=20, W=22), "S": dict(N=4, H=28, W=28),
                 "M": dict(N=8, H=56, W=56), "L": dict(N=8, H=176, W=176),
                 "paper": dict(N=16, H=256, W=256)}, ["output"])((lenet_init, lenet))


def resnet_init(N, W, H, C1, C2):
    from numpy.random import default_rng
    rng = default_rng(42)
    # Input
    input = rng.random((N, H, W, C1), dtype=np.float32)
    # Weights
    conv1 = rng.random((1, 1, C1, C2), dtype=np.float32)
    conv2 = rng.random((3, 3, C2, C2), dtype=np.float32)
    conv3 = rng.random((1, 1, C2, C1), dtype=np.float32)
    return {"input": input, "conv1": conv1, "conv2": conv2, "conv3": conv3}


def batchnorm2d(x, eps=1e-5):
    mean = np.mean(x, axis=0, keepdims=True)
    std = np.std(x, axis=0, keepdims=True)
    return (x - mean) / np.sqrt(std + eps)


def resnet(input, conv1, conv2, conv3):
    # Pad output of first convolution for second convolution
    padded = np.zeros((input.shape[0], input.shape[1] + 2, input.shape[2] + 2, conv1.shape[3]))
    padded[:, 1:-1, 1:-1, :] = conv2d(input, conv1)
    x = batchnorm2d(padded)
    x = relu(x)
    x = conv2d(x, conv2)
    x = batchnorm2d(x)
    x = relu(x)
    x = conv2d(x, conv3)
    x = batchnorm2d(x)
    return {"output": relu(x + input)}


kernel("resnet", {"XS": dict(N=3, W=6, H=5, C1=8, C2=4), "S": dict(N=8, W=14, H=14, C1=32, C2=8),
                  "M": dict(N=8, W=28, H=28, C1=64, C2=16),
                  "L": dict(N=8, W=56, H=56, C1=128, C2=32),
                  "paper": dict(N=8, W=56, H=56, C1=256, C2=64)}, ["output"])((resnet_init, resnet))


def channel_flow_init(ny, nx, nit):
    u = np.zeros((ny, nx), dtype=np.float64)
    v = np.zeros((ny, nx), dtype=np.float64)
    p = np.ones((ny, nx), dtype=np.float64)
    dx = 2 / (nx - 1)
    dy = 2 / (ny - 1)
    dt = .1 / ((nx - 1) * (ny - 1))
    # rho, nu and F are the same in every NPBench preset.
    return {"nit": nit, "u": u, "v": v, "dt": dt, "dx": dx, "dy": dy, "p": p, "rho": 1.0,
            "nu": 0.1, "F": 1.0}


def channel_build_up_b(rho, dt, dx, dy, u, v):
    b = np.zeros_like(u)
    b[1:-1,
      1:-1] = (rho * (1 / dt * ((u[1:-1, 2:] - u[1:-1, 0:-2]) / (2 * dx) +
                                (v[2:, 1:-1] - v[0:-2, 1:-1]) / (2 * dy)) -
                      ((u[1:-1, 2:] - u[1:-1, 0:-2]) / (2 * dx))**2 - 2 *
                      ((u[2:, 1:-1] - u[0:-2, 1:-1]) / (2 * dy) *
                       (v[1:-1, 2:] - v[1:-1, 0:-2]) / (2 * dx)) -
                      ((v[2:, 1:-1] - v[0:-2, 1:-1]) / (2 * dy))**2))

    # Periodic BC Pressure @ x = 2
    b[1:-1, -1] = (rho * (1 / dt * ((u[1:-1, 0] - u[1:-1, -2]) / (2 * dx) +
                                    (v[2:, -1] - v[0:-2, -1]) / (2 * dy)) -
                          ((u[1:-1, 0] - u[1:-1, -2]) / (2 * dx))**2 - 2 *
                          ((u[2:, -1] - u[0:-2, -1]) / (2 * dy) *
                           (v[1:-1, 0] - v[1:-1, -2]) / (2 * dx)) -
                          ((v[2:, -1] - v[0:-2, -1]) / (2 * dy))**2))

    # Periodic BC Pressure @ x = 0
    b[1:-1, 0] = (rho * (1 / dt * ((u[1:-1, 1] - u[1:-1, -1]) / (2 * dx) +
                                   (v[2:, 0] - v[0:-2, 0]) / (2 * dy)) -
                         ((u[1:-1, 1] - u[1:-1, -1]) / (2 * dx))**2 - 2 *
                         ((u[2:, 0] - u[0:-2, 0]) / (2 * dy) *
                          (v[1:-1, 1] - v[1:-1, -1]) /
                          (2 * dx)) - ((v[2:, 0] - v[0:-2, 0]) / (2 * dy))**2))

    return b


def channel_pressure_poisson_periodic(nit, p, dx, dy, b):
    pn = np.empty_like(p)

    for q in range(nit):
        pn = p.copy()
        p[1:-1, 1:-1] = (((pn[1:-1, 2:] + pn[1:-1, 0:-2]) * dy**2 +
                          (pn[2:, 1:-1] + pn[0:-2, 1:-1]) * dx**2) /
                         (2 * (dx**2 + dy**2)) - dx**2 * dy**2 /
                         (2 * (dx**2 + dy**2)) * b[1:-1, 1:-1])

        # Periodic BC Pressure @ x = 2
        p[1:-1, -1] = (((pn[1:-1, 0] + pn[1:-1, -2]) * dy**2 +
                        (pn[2:, -1] + pn[0:-2, -1]) * dx**2) /
                       (2 * (dx**2 + dy**2)) - dx**2 * dy**2 /
                       (2 * (dx**2 + dy**2)) * b[1:-1, -1])

        # Periodic BC Pressure @ x = 0
        p[1:-1,
          0] = (((pn[1:-1, 1] + pn[1:-1, -1]) * dy**2 +
                 (pn[2:, 0] + pn[0:-2, 0]) * dx**2) / (2 * (dx**2 + dy**2)) -
                dx**2 * dy**2 / (2 * (dx**2 + dy**2)) * b[1:-1, 0])

        # Wall boundary conditions, pressure
        p[-1, :] = p[-2, :]  # dp/dy = 0 at y = 2
        p[0, :] = p[1, :]  # dp/dy = 0 at y = 0


def channel_flow_kernel(nit, u, v, dt, dx, dy, p, rho, nu, F):
    udiff = 1
    stepcount = 0

    while udiff > .001:
        un = u.copy()
        vn = v.copy()

        b = channel_build_up_b(rho, dt, dx, dy, u, v)
        channel_pressure_poisson_periodic(nit, p, dx, dy, b)

        u[1:-1,
          1:-1] = (un[1:-1, 1:-1] - un[1:-1, 1:-1] * dt / dx *
                   (un[1:-1, 1:-1] - un[1:-1, 0:-2]) -
                   vn[1:-1, 1:-1] * dt / dy *
                   (un[1:-1, 1:-1] - un[0:-2, 1:-1]) - dt / (2 * rho * dx) *
                   (p[1:-1, 2:] - p[1:-1, 0:-2]) + nu *
                   (dt / dx**2 *
                    (un[1:-1, 2:] - 2 * un[1:-1, 1:-1] + un[1:-1, 0:-2]) +
                    dt / dy**2 *
                    (un[2:, 1:-1] - 2 * un[1:-1, 1:-1] + un[0:-2, 1:-1])) +
                   F * dt)

        v[1:-1,
          1:-1] = (vn[1:-1, 1:-1] - un[1:-1, 1:-1] * dt / dx *
                   (vn[1:-1, 1:-1] - vn[1:-1, 0:-2]) -
                   vn[1:-1, 1:-1] * dt / dy *
                   (vn[1:-1, 1:-1] - vn[0:-2, 1:-1]) - dt / (2 * rho * dy) *
                   (p[2:, 1:-1] - p[0:-2, 1:-1]) + nu *
                   (dt / dx**2 *
                    (vn[1:-1, 2:] - 2 * vn[1:-1, 1:-1] + vn[1:-1, 0:-2]) +
                    dt / dy**2 *
                    (vn[2:, 1:-1] - 2 * vn[1:-1, 1:-1] + vn[0:-2, 1:-1])))

        # Periodic BC u @ x = 2
        u[1:-1, -1] = (
            un[1:-1, -1] - un[1:-1, -1] * dt / dx *
            (un[1:-1, -1] - un[1:-1, -2]) - vn[1:-1, -1] * dt / dy *
            (un[1:-1, -1] - un[0:-2, -1]) - dt / (2 * rho * dx) *
            (p[1:-1, 0] - p[1:-1, -2]) + nu *
            (dt / dx**2 *
             (un[1:-1, 0] - 2 * un[1:-1, -1] + un[1:-1, -2]) + dt / dy**2 *
             (un[2:, -1] - 2 * un[1:-1, -1] + un[0:-2, -1])) + F * dt)

        # Periodic BC u @ x = 0
        u[1:-1,
          0] = (un[1:-1, 0] - un[1:-1, 0] * dt / dx *
                (un[1:-1, 0] - un[1:-1, -1]) - vn[1:-1, 0] * dt / dy *
                (un[1:-1, 0] - un[0:-2, 0]) - dt / (2 * rho * dx) *
                (p[1:-1, 1] - p[1:-1, -1]) + nu *
                (dt / dx**2 *
                 (un[1:-1, 1] - 2 * un[1:-1, 0] + un[1:-1, -1]) + dt / dy**2 *
                 (un[2:, 0] - 2 * un[1:-1, 0] + un[0:-2, 0])) + F * dt)

        # Periodic BC v @ x = 2
        v[1:-1, -1] = (
            vn[1:-1, -1] - un[1:-1, -1] * dt / dx *
            (vn[1:-1, -1] - vn[1:-1, -2]) - vn[1:-1, -1] * dt / dy *
            (vn[1:-1, -1] - vn[0:-2, -1]) - dt / (2 * rho * dy) *
            (p[2:, -1] - p[0:-2, -1]) + nu *
            (dt / dx**2 *
             (vn[1:-1, 0] - 2 * vn[1:-1, -1] + vn[1:-1, -2]) + dt / dy**2 *
             (vn[2:, -1] - 2 * vn[1:-1, -1] + vn[0:-2, -1])))

        # Periodic BC v @ x = 0
        v[1:-1,
          0] = (vn[1:-1, 0] - un[1:-1, 0] * dt / dx *
                (vn[1:-1, 0] - vn[1:-1, -1]) - vn[1:-1, 0] * dt / dy *
                (vn[1:-1, 0] - vn[0:-2, 0]) - dt / (2 * rho * dy) *
                (p[2:, 0] - p[0:-2, 0]) + nu *
                (dt / dx**2 *
                 (vn[1:-1, 1] - 2 * vn[1:-1, 0] + vn[1:-1, -1]) + dt / dy**2 *
                 (vn[2:, 0] - 2 * vn[1:-1, 0] + vn[0:-2, 0])))

        # Wall BC: u,v = 0 @ y = 0,2
        u[0, :] = 0
        u[-1, :] = 0
        v[0, :] = 0
        v[-1, :] = 0

        udiff = (np.sum(u) - np.sum(un)) / np.sum(u)
        stepcount += 1

    return stepcount


def channel_flow(nit, u, v, dt, dx, dy, p, rho, nu, F):
    stepcount = channel_flow_kernel(nit, u, v, dt, dx, dy, p, rho, nu, F)
    return {"u": u, "v": v, "p": p, "stepcount": np.array(stepcount)}


kernel("channel_flow", {"XS": dict(ny=8, nx=9, nit=2), "S": dict(ny=61, nx=61, nit=5),
                        "M": dict(ny=121, nx=121, nit=10), "L": dict(ny=201, nx=201, nit=20),
                        "paper": dict(ny=101, nx=101, nit=50)},
       ["u", "v", "p", "stepcount"])((channel_flow_init, channel_flow))


# NPBench's cholesky2 initializes as its cholesky does (`_spd_init`).
def cholesky2(A):
    A[:] = np.linalg.cholesky(A) + np.triu(A, k=1)


kernel("cholesky2", {"XS": dict(N=9), "S": dict(N=1000), "M": dict(N=2200), "L": dict(N=8000),
                     "paper": dict(N=2000)}, ["A"])((_spd_init, cholesky2))


def _rng_complex(shape, rng):
    return (rng.random(shape) + rng.random(shape) * 1j)


def mandelbrot1_init(xmin, xmax, XN, ymin, ymax, YN, maxiter, horizon):
    return {"xmin": np.float64(xmin), "xmax": np.float64(xmax), "ymin": np.float64(ymin),
            "ymax": np.float64(ymax), "XN": XN, "YN": YN, "maxiter": maxiter,
            "horizon": np.float64(horizon)}


def _mandelbrot(xmin, xmax, ymin, ymax, xn, yn, maxiter, horizon=2.0):
    X = np.linspace(xmin, xmax, xn, dtype=np.float64)
    Y = np.linspace(ymin, ymax, yn, dtype=np.float64)
    C = X + Y[:, None] * 1j
    N = np.zeros(C.shape, dtype=np.int64)
    Z = np.zeros(C.shape, dtype=np.complex128)
    for n in range(maxiter):
        I = np.less(abs(Z), horizon)
        N[I] = n
        Z[I] = Z[I]**2 + C[I]
    N[N == maxiter - 1] = 0
    return Z, N


def mandelbrot1(xmin, xmax, ymin, ymax, XN, YN, maxiter, horizon):
    Z, N = _mandelbrot(xmin, xmax, ymin, ymax, XN, YN, maxiter, horizon)
    return {"Z": Z, "N": N}


kernel("mandelbrot1", {
    "XS": dict(xmin=-1.75, xmax=0.25, XN=16, ymin=-1.0, ymax=1.0, YN=12, maxiter=20, horizon=2.0),
    "S": dict(xmin=-1.75, xmax=0.25, XN=125, ymin=-1.0, ymax=1.0, YN=125, maxiter=60,
              horizon=2.0),
    "M": dict(xmin=-1.75, xmax=0.25, XN=250, ymin=-1.0, ymax=1.0, YN=250, maxiter=150,
              horizon=2.0),
    "L": dict(xmin=-2.0, xmax=0.5, XN=833, ymin=-1.25, ymax=1.25, YN=833, maxiter=200,
              horizon=2.0),
    "paper": dict(xmin=-2.25, xmax=0.75, XN=1000, ymin=-1.25, ymax=1.25, YN=1000, maxiter=200,
                  horizon=2.0)},
       ["Z.real", "Z.imag", "N"])((mandelbrot1_init, mandelbrot1))


def mandelbrot2_init(xmin, xmax, XN, ymin, ymax, YN, maxiter, horizon):
    return mandelbrot1_init(xmin, xmax, XN, ymin, ymax, YN, maxiter, horizon)


def _mandelbrot2(xmin, xmax, ymin, ymax, xn, yn, itermax, horizon=2.0):
    Xi, Yi = np.mgrid[0:xn, 0:yn]
    X = np.linspace(xmin, xmax, xn, dtype=np.float64)[Xi]
    Y = np.linspace(ymin, ymax, yn, dtype=np.float64)[Yi]
    C = X + Y * 1j
    N_ = np.zeros(C.shape, dtype=np.int64)
    Z_ = np.zeros(C.shape, dtype=np.complex128)
    Xi.shape = Yi.shape = C.shape = xn * yn

    Z = np.zeros(C.shape, np.complex128)
    for i in range(itermax):
        if not len(Z):
            break

        # Compute for relevant points only
        np.multiply(Z, Z, Z)
        np.add(Z, C, Z)

        # Failed convergence
        I = abs(Z) > horizon
        N_[Xi[I], Yi[I]] = i + 1
        Z_[Xi[I], Yi[I]] = Z[I]

        # Keep going with those who have not diverged yet
        np.logical_not(I, I)
        Z = Z[I]
        Xi, Yi = Xi[I], Yi[I]
        C = C[I]
    return Z_.T, N_.T


def mandelbrot2(xmin, xmax, ymin, ymax, XN, YN, maxiter, horizon):
    Z, N = _mandelbrot2(xmin, xmax, ymin, ymax, XN, YN, maxiter, horizon)
    return {"Z": Z, "N": N}


kernel("mandelbrot2", {
    "XS": dict(xmin=-2.0, xmax=0.5, XN=14, ymin=-1.25, ymax=1.25, YN=12, maxiter=20, horizon=2.0),
    "S": dict(xmin=-2.0, xmax=0.5, XN=200, ymin=-1.25, ymax=1.25, YN=200, maxiter=40,
              horizon=2.0),
    "M": dict(xmin=-2.0, xmax=0.5, XN=500, ymin=-1.25, ymax=1.25, YN=500, maxiter=80,
              horizon=2.0),
    "L": dict(xmin=-2.25, xmax=0.75, XN=1000, ymin=-1.5, ymax=1.5, YN=1000, maxiter=100,
              horizon=2.0),
    "paper": dict(xmin=-2.25, xmax=0.75, XN=1000, ymin=-1.25, ymax=1.25, YN=1000,
                  maxiter=200, horizon=2.0)},
       ["Z.real", "Z.imag", "N"])((mandelbrot2_init, mandelbrot2))


def stockham_fft_init(R, K):
    from numpy.random import default_rng
    rng = default_rng(42)
    N = R**K
    X = _rng_complex((N, ), rng)
    Y = np.zeros_like(X, dtype=np.complex128)
    return {"N": N, "R": R, "K": K, "x": X, "y": Y}


def stockham_fft(N, R, K, x, y):
    i_coord, j_coord = np.mgrid[0:R, 0:R]
    dft_mat = np.empty((R, R), dtype=np.complex128)
    dft_mat = np.exp(-2.0j * np.pi * i_coord * j_coord / R)
    y[:] = x[:]
    ii_coord, jj_coord = np.mgrid[0:R, 0:R**K]
    for i in range(K):
        yv = np.reshape(y, (R**i, R, R**(K - i - 1)))
        tmp_perm = np.transpose(yv, axes=(1, 0, 2))
        D = np.empty((R, R**i, R**(K - i - 1)), dtype=np.complex128)
        tmp = np.exp(-2.0j * np.pi * ii_coord[:, :R**i] * jj_coord[:, :R**i] /
                     R**(i + 1))
        D[:] = np.repeat(np.reshape(tmp, (R, R**i, 1)), R**(K - i - 1), axis=2)
        tmp_twid = np.reshape(tmp_perm, (N, )) * np.reshape(D, (N, ))
        y[:] = np.reshape(dft_mat @ np.reshape(tmp_twid, (R, R**(K - 1))),
                          (N, ))


kernel("stockham_fft", {"XS": dict(R=2, K=5), "S": dict(R=2, K=15), "M": dict(R=2, K=18),
                        "L": dict(R=2, K=21), "paper": dict(R=4, K=10)},
       ["y.real", "y.imag"])((stockham_fft_init, stockham_fft))


def contour_integral_init(NR, NM, slab_per_bc, num_int_pts):
    from numpy.random import default_rng
    rng = default_rng(42)
    Ham = _rng_complex((slab_per_bc + 1, NR, NR), rng)
    int_pts = _rng_complex((num_int_pts, ), rng)
    Y = _rng_complex((NR, NM), rng)
    return {"NR": NR, "NM": NM, "slab_per_bc": slab_per_bc, "Ham": Ham, "int_pts": int_pts,
            "Y": Y}


def contour_integral(NR, NM, slab_per_bc, Ham, int_pts, Y):
    P0 = np.zeros((NR, NM), dtype=np.complex128)
    P1 = np.zeros((NR, NM), dtype=np.complex128)
    for z in int_pts:
        Tz = np.zeros((NR, NR), dtype=np.complex128)
        for n in range(slab_per_bc + 1):
            zz = np.power(z, slab_per_bc / 2 - n)
            Tz += zz * Ham[n]
        if NR == NM:
            X = np.linalg.inv(Tz)
        else:
            X = np.linalg.solve(Tz, Y)
        if abs(z) < 1.0:
            X = -X
        P0 += X
        P1 += z * X
    return {"P0": P0, "P1": P1}


kernel("contour_integral", {
    "XS": dict(NR=6, NM=10, slab_per_bc=2, num_int_pts=4),
    "S": dict(NR=50, NM=150, slab_per_bc=2, num_int_pts=32),
    "M": dict(NR=200, NM=400, slab_per_bc=2, num_int_pts=32),
    "L": dict(NR=600, NM=1000, slab_per_bc=2, num_int_pts=32),
    "paper": dict(NR=500, NM=1000, slab_per_bc=2, num_int_pts=32)},
       ["P0.real", "P0.imag", "P1.real", "P1.imag"])((contour_integral_init, contour_integral))


def scattering_self_energies_init(Nkz, NE, Nqz, Nw, N3D, NA, NB, Norb):
    from numpy.random import default_rng
    rng = default_rng(42)
    neigh_idx = np.ndarray([NA, NB], dtype=np.int32)
    for i in range(NA):
        neigh_idx[i] = np.positive(np.arange(i - NB / 2, i + NB / 2) % NA)
    dH = _rng_complex([NA, NB, N3D, Norb, Norb], rng)
    G = _rng_complex([Nkz, NE, NA, Norb, Norb], rng)
    D = _rng_complex([Nqz, Nw, NA, NB, N3D, N3D], rng)
    Sigma = np.zeros([Nkz, NE, NA, Norb, Norb], dtype=np.complex128)
    return {"neigh_idx": neigh_idx, "dH": dH, "G": G, "D": D, "Sigma": Sigma}


def scattering_self_energies(neigh_idx, dH, G, D, Sigma):
    for k in range(G.shape[0]):
        for E in range(G.shape[1]):
            for q in range(D.shape[0]):
                for w in range(D.shape[1]):
                    for i in range(D.shape[-2]):
                        for j in range(D.shape[-1]):
                            for a in range(neigh_idx.shape[0]):
                                for b in range(neigh_idx.shape[1]):
                                    if E - w >= 0:
                                        dHG = G[k, E - w, neigh_idx[a, b]] @ dH[a, b, i]
                                        dHD = dH[a, b, j] * D[q, w, a, b, i, j]
                                        Sigma[k, E, a] += dHG @ dHD
    return {"Sigma": Sigma}


kernel("scattering_self_energies", {
    "XS": dict(Nkz=1, NE=3, Nqz=1, Nw=2, N3D=2, NA=4, NB=2, Norb=2),
    "S": dict(Nkz=2, NE=4, Nqz=2, Nw=2, N3D=2, NA=6, NB=2, Norb=3),
    "M": dict(Nkz=3, NE=5, Nqz=3, Nw=2, N3D=2, NA=10, NB=3, Norb=4),
    "L": dict(Nkz=3, NE=10, Nqz=3, Nw=3, N3D=3, NA=12, NB=4, Norb=4),
    "paper": dict(Nkz=4, NE=10, Nqz=4, Nw=3, N3D=3, NA=20, NB=4, Norb=4)},
       ["Sigma.real", "Sigma.imag"])((scattering_self_energies_init, scattering_self_energies))


def azimint_hist_init(N, npt):
    from numpy.random import default_rng
    rng = default_rng(42)
    data, radius = rng.random((N, )), rng.random((N, ))
    return {"data": data, "radius": radius, "npt": npt}


def azimint_hist(data, radius, npt):
    histu = np.histogram(radius, npt)[0]
    histw = np.histogram(radius, npt, weights=data)[0]
    return {"out": histw / histu}


kernel("azimint_hist", {"XS": dict(N=5000, npt=20), "S": dict(N=400000, npt=1000),
                        "M": dict(N=4000000, npt=1000), "L": dict(N=40000000, npt=1000),
                        "paper": dict(N=1000000, npt=1000)},
       ["out"])((azimint_hist_init, azimint_hist))


def azimint_naive(data, radius, npt):
    rmax = radius.max()
    res = np.zeros(npt, dtype=np.float64)
    for i in range(npt):
        r1 = rmax * i / npt
        r2 = rmax * (i + 1) / npt
        mask_r12 = np.logical_and((r1 <= radius), (radius < r2))
        values_r12 = data[mask_r12]
        res[i] = values_r12.mean()
    return {"res": res}


kernel("azimint_naive", {"XS": dict(N=5000, npt=20), "S": dict(N=400000, npt=1000),
                         "M": dict(N=4000000, npt=1000), "L": dict(N=40000000, npt=1000),
                         "paper": dict(N=1000000, npt=1000)},
       ["res"])((azimint_hist_init, azimint_naive))


def output_of(outputs, o):
    """Output `o` of a run: `NAME.real` and `NAME.imag` are a complex output's parts."""
    base, _, part = o.rpartition(".")
    if base and part in ("real", "imag"):
        return getattr(np.asarray(outputs[base]), part)
    return outputs[o]


def inputs_of(d, name):
    """The inputs init wrote for kernel `name`, in argument order, as arrays and scalars."""
    spec = json.load(open(os.path.join(d, name, "sizes.json")))
    out = {}
    for arg in spec["args"]:
        v = np.load(os.path.join(d, name, f"{arg}.npy"))
        out[arg] = v[()] if v.ndim == 0 else v
    return out


def copies(values):
    return {k: (np.copy(v) if isinstance(v, np.ndarray) else v) for k, v in values.items()}


def jax_peer(d):
    """The JAX versions (`npbench_jax.py`, which `npbench` copies into DIR `d`), or why there
    are none."""
    sys.path.insert(0, d)
    try:
        import npbench_jax
    except ImportError as e:
        return None, f"JAX is not installed ({e})"
    return npbench_jax, None


def rel_diff(ours, theirs):
    """The largest difference between two outputs, relative to the largest of `ours`."""
    ours = np.asarray(ours, dtype=np.float64)
    theirs = np.asarray(theirs, dtype=np.float64)
    if ours.shape != theirs.shape:
        return float("inf")
    scale = max(float(np.max(np.abs(ours))) if ours.size else 0.0, 1e-300)
    return float(np.max(np.abs(theirs - ours))) / scale if ours.size else 0.0


def time_jax(jx, name, pristine, iters, outputs):
    """JAX's median and first-run seconds for kernel `name`, and its largest difference
    from NumPy's `outputs`."""
    run = jx.KERNELS[name]
    times = []
    for i in range(iters + 1):
        args = jx.device_copies(pristine)
        t = time.perf_counter()
        got = jx.block(run(**args))
        times.append(time.perf_counter() - t)
    worst = max(rel_diff(output_of(outputs, o), np.asarray(got[o])) for o in got)
    steady = sorted(times[1:])[len(times[1:]) // 2] if iters > 0 else times[0]
    return {"jax_seconds": steady, "jax_first_seconds": times[0], "jax_max_rel_diff": worst}


def main():
    mode, d, preset = sys.argv[1], sys.argv[2], sys.argv[3]
    if mode == "init":
        for name in sys.argv[4:]:
            k = KERNELS[name]
            values = k["init"](**k["sizes"][preset])
            os.makedirs(os.path.join(d, name), exist_ok=True)
            for arg, v in values.items():
                np.save(os.path.join(d, name, f"{arg}.npy"), np.asarray(v))
            with open(os.path.join(d, name, "sizes.json"), "w") as f:
                json.dump({"sizes": k["sizes"][preset], "args": list(values),
                           "outputs": k["outputs"]}, f)
        return
    iters = int(sys.argv[4])
    jx, no_jax = jax_peer(d)
    for name in sys.argv[5:]:
        k = KERNELS[name]
        pristine = inputs_of(d, name)
        times = []
        for i in range(iters + 1):
            args = copies(pristine)
            t = time.perf_counter()
            returned = k["run"](**args)
            times.append(time.perf_counter() - t)
        # A kernel that writes its arguments in place: its outputs are among them.
        outputs = returned if returned is not None else args
        worst, count = 0.0, 0
        for o in k["outputs"]:
            ours = np.asarray(output_of(outputs, o), dtype=np.float64)
            np.save(os.path.join(d, name, f"numpy_{o}.npy"), output_of(outputs, o))
            weft = np.load(os.path.join(d, name, f"weft_{o}.npy")).astype(np.float64)
            if weft.shape != ours.shape:
                worst = float("inf")
                continue
            scale = max(float(np.max(np.abs(ours))) if ours.size else 0.0, 1e-300)
            diff = float(np.max(np.abs(weft - ours))) if ours.size else 0.0
            worst = max(worst, diff / scale)
            count += 1
        steady = sorted(times[1:])[len(times[1:]) // 2] if iters > 0 else times[0]
        line = {"kernel": name, "numpy_seconds": steady, "numpy_first_seconds": times[0],
                "max_rel_diff": worst, "outputs_compared": count}
        if jx is None:
            line["jax_unavailable"] = no_jax
        elif name in jx.KERNELS:
            line.update(time_jax(jx, name, pristine, iters, outputs))
        else:
            line["jax_unavailable"] = "NPBench's JAX version of this kernel is not ported"
        print(json.dumps(line))


main()
