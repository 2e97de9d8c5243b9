"""PageRank by power iteration with SciPy: the program that `pagerank` runs on Weft.

Usage: python3 pagerank.py DIR N STEPS WARMUP
DIR holds row.npy, col.npy and val.npy (the transition matrix's COO triplets, as
`pagerank --out DIR` writes them) of a graph of N nodes. Runs WARMUP + STEPS power steps from 1/n (the matrix built
once), writes the ranks to DIR/rank_scipy.npy and prints the median seconds of the timed
steps and the seconds to build the matrix.
"""
import sys
import time

import numpy as np
import scipy.sparse as sp

out, n, steps, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
row, col, val = (np.load(f"{out}/{name}.npy") for name in ("row", "col", "val"))
d = 0.85
t = time.perf_counter()
M = sp.coo_matrix((val, (row, col)), shape=(n, n)).tocsr()
M.sum_duplicates()
build = time.perf_counter() - t
r = np.full(n, 1.0 / n)
times = []
for i in range(warmup + steps):
    t = time.perf_counter()
    r_new = d * (M @ r) + (1.0 - d) / n
    change = float(np.abs(r_new - r).sum())  # what a convergence test reads
    r = r_new
    if i >= warmup:
        times.append(time.perf_counter() - t)
np.save(f"{out}/rank_scipy.npy", r)
print(sorted(times)[len(times) // 2] if times else 0.0, build)
