"""NPBench's kernels in NumPy, on NPBench's own initialization: the peer of `npbench`.

Usage:
  python3 npbench.py init DIR PRESET KERNEL...
      writes each kernel's inputs to DIR/KERNEL/ (one .npy per argument, 0-d for scalars) and
      its sizes to DIR/KERNEL/sizes.json;
  python3 npbench.py run DIR PRESET ITERS KERNEL...
      runs each kernel once (its first run) and ITERS more times, each on fresh copies of its
      inputs, compares its outputs with Weft's (DIR/KERNEL/weft_NAME.npy) and prints one JSON
      line per kernel: NumPy's median and first-run seconds and the largest difference
      relative to the largest NumPy output.

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
    for name in sys.argv[5:]:
        k = KERNELS[name]
        pristine = inputs_of(d, name)
        times = []
        for i in range(iters + 1):
            args = copies(pristine)
            t = time.perf_counter()
            returned = k["run"](**args)
            times.append(time.perf_counter() - t)
        outputs = returned if returned is not None else {o: args[o] for o in k["outputs"]}
        worst, count = 0.0, 0
        for o in k["outputs"]:
            ours = np.asarray(outputs[o], dtype=np.float64)
            np.save(os.path.join(d, name, f"numpy_{o}.npy"), outputs[o])
            weft = np.load(os.path.join(d, name, f"weft_{o}.npy")).astype(np.float64)
            if weft.shape != ours.shape:
                worst = float("inf")
                continue
            scale = max(float(np.max(np.abs(ours))) if ours.size else 0.0, 1e-300)
            diff = float(np.max(np.abs(weft - ours))) if ours.size else 0.0
            worst = max(worst, diff / scale)
            count += 1
        steady = sorted(times[1:])[len(times[1:]) // 2] if iters > 0 else times[0]
        print(json.dumps({"kernel": name, "numpy_seconds": steady,
                          "numpy_first_seconds": times[0], "max_rel_diff": worst,
                          "outputs_compared": count}))


main()
