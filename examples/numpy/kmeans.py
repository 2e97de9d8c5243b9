"""k-means (Lloyd's algorithm) with NumPy: the program that `kmeans` runs on Weft.

Usage: python3 kmeans.py DIR K STEPS WARMUP
DIR holds x.npy (the (n, d) points, as `kmeans --out DIR` writes them). Starts from the
first K points, runs WARMUP + STEPS steps, writes the centroids to DIR/c_numpy.npy and prints
the median seconds of the timed steps and the last step's inertia.
"""
import sys
import time

import numpy as np

out, k, steps, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
x = np.load(f"{out}/x.npy")
c = x[:k].copy()


def step(x, c):
    xx = (x * x).sum(axis=1)
    cc = (c * c).sum(axis=1)
    dist = xx[:, None] - 2.0 * (x @ c.T) + cc[None, :]
    labels = dist.argmin(axis=1)
    onehot = (labels[:, None] == np.arange(k)[None, :]).astype(x.dtype)
    counts = onehot.sum(axis=0)
    sums = onehot.T @ x
    c = np.where(counts[:, None] > 0, sums / np.maximum(counts, 1.0)[:, None], c)
    inertia = float(dist.min(axis=1).sum())  # what a convergence test reads
    return c, inertia


times = []
inertia = float("nan")
for i in range(warmup + steps):
    t = time.perf_counter()
    c, inertia = step(x, c)
    if i >= warmup:
        times.append(time.perf_counter() - t)
np.save(f"{out}/c_numpy.npy", c)
print(sorted(times)[len(times) // 2] if times else 0.0, inertia)
