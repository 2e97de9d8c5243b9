"""Logistic regression by gradient descent in NumPy: the program that `logreg` runs on Weft.

Usage: python3 logreg.py DIR STEPS LR
DIR holds X.npy and y.npy (as `logreg --out DIR` writes them); the weights after STEPS steps
from zeros are written to DIR/w_numpy.npy.
"""
import sys

import numpy as np

out, steps, lr = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
X = np.load(f"{out}/X.npy")
y = np.load(f"{out}/y.npy")
n, d = X.shape
w = np.zeros(d)
for _ in range(steps):
    p = 1.0 / (1.0 + np.exp(-(X @ w)))
    w = w - lr * (X.T @ (p - y)) / n
np.save(f"{out}/w_numpy.npy", w)
