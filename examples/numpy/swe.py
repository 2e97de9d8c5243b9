"""Shallow water on a 2-D grid in TorchSWE's style, in NumPy: the program `swe` runs on Weft.

Usage: python3 swe.py DIR STEPS
DIR holds h0.npy, the initial depth with its ghost cells (as `swe --out DIR` writes it); the
momenta start at zero. Finite volumes on n x n cells of [0, 1]^2 with two ghost cells on
each side and reflecting walls; MUSCL reconstruction with the generalized minmod limiter;
Kurganov-Petrova central-upwind fluxes with desingularized velocities; SSP-RK2 steps with
dt from the CFL condition. After STEPS steps, DIR/h_numpy.npy, hu_numpy.npy, hv_numpy.npy and
t_numpy.npy (the simulated time) are written.
"""
import sys

import numpy as np

G = 9.81  # gravity
THETA = 1.3  # the limiter's parameter (1: minmod, 2: monotonized central)
EPS = 1e-12  # desingularization of u = hu / h
CFL = 0.4
NG = 2  # ghost cells on each side


def cells(q, axis, start, stop):
    """Cells start:stop along axis, interior cells across it."""
    if axis == 1:
        return q[NG:-NG, start:stop]
    return q[start:stop, NG:-NG]


def along(a, axis, start, stop):
    """a[..., start:stop] along axis, everything across it."""
    if axis == 1:
        return a[:, start:stop]
    return a[start:stop, :]


def minmod(a, b, c):
    """The smallest in magnitude of a, b, c where all three have one sign, else 0."""
    return (np.maximum(np.minimum(np.minimum(a, b), c), 0.0) +
            np.minimum(np.maximum(np.maximum(a, b), c), 0.0))


def reconstruct(q, axis):
    """Values left and right of each face across the interior along axis (MUSCL)."""
    slope = minmod(THETA * (cells(q, axis, 1, -1) - cells(q, axis, 0, -2)),
                   (cells(q, axis, 2, None) - cells(q, axis, 0, -2)) / 2.0,
                   THETA * (cells(q, axis, 2, None) - cells(q, axis, 1, -1)))
    left = cells(q, axis, 1, -2) + along(slope, axis, 0, -1) / 2.0
    right = cells(q, axis, 2, -1) - along(slope, axis, 1, None) / 2.0
    return left, right


def velocity(h, hq):
    """hq / h, desingularized where h is near zero (Kurganov and Petrova)."""
    h4 = (h * h) * (h * h)
    return h * hq * np.sqrt(2.0) / np.sqrt(h4 + np.maximum(h4, EPS))


def physical_flux(h, hn, ht, un):
    """The flux of (h, hn, ht) across a face whose normal velocity is un."""
    return hn, hn * un + 0.5 * G * h * h, ht * un


def face_fluxes(h, hu, hv, axis):
    """Central-upwind fluxes of (h, hu, hv) through the faces along axis, and the speeds."""
    hL, hR = reconstruct(h, axis)
    huL, huR = reconstruct(hu, axis)
    hvL, hvR = reconstruct(hv, axis)
    # The normal and transverse momenta.
    (hnL, hnR, htL, htR) = (huL, huR, hvL, hvR) if axis == 1 else (hvL, hvR, huL, huR)
    uL = velocity(hL, hnL)
    uR = velocity(hR, hnR)
    cL = np.sqrt(G * hL)
    cR = np.sqrt(G * hR)
    ap = np.maximum(np.maximum(uL + cL, uR + cR), 0.0)
    am = np.minimum(np.minimum(uL - cL, uR - cR), 0.0)
    fL = physical_flux(hL, hnL, htL, uL)
    fR = physical_flux(hR, hnR, htR, uR)
    qL = (hL, hnL, htL)
    qR = (hR, hnR, htR)
    denom = ap - am
    flux = [np.where(denom > 0.0, (ap * fl - am * fr + ap * am * (qr - ql)) / denom, 0.0)
            for fl, fr, ql, qr in zip(fL, fR, qL, qR)]
    if axis == 0:  # back from (normal, transverse) to (hu, hv)
        flux = [flux[0], flux[2], flux[1]]
    speed = np.maximum(np.max(ap), np.max(-am))
    return flux, speed


def walls(h, hu, hv):
    """Reflecting walls: ghost cells mirror the interior, the normal momentum flips sign."""
    for q, sx, sy in ((h, 1.0, 1.0), (hu, -1.0, 1.0), (hv, 1.0, -1.0)):
        q[:, 1::-1] = sx * q[:, 2:4]
        q[:, -1:-3:-1] = sx * q[:, -4:-2]
        q[1::-1, :] = sy * q[2:4, :]
        q[-1:-3:-1, :] = sy * q[-4:-2, :]


def rhs(h, hu, hv, dx, dy):
    """The time derivative of the interior cells, and the fastest wave speed."""
    fx, sx = face_fluxes(h, hu, hv, 1)
    fy, sy = face_fluxes(h, hu, hv, 0)
    dq = [-(f[:, 1:] - f[:, :-1]) / dx - (g[1:, :] - g[:-1, :]) / dy for f, g in zip(fx, fy)]
    return dq, np.maximum(sx, sy)


def step(h, hu, hv, dx, dy):
    """One SSP-RK2 step in place; returns dt."""
    inner = (slice(NG, -NG), slice(NG, -NG))
    walls(h, hu, hv)
    dq, speed = rhs(h, hu, hv, dx, dy)
    dt = CFL * min(dx, dy) / speed
    q1 = [q.copy() for q in (h, hu, hv)]
    for q, q1k, d in zip((h, hu, hv), q1, dq):
        q1k[inner] = q[inner] + dt * d
    walls(*q1)
    dq1, _ = rhs(*q1, dx, dy)
    for q, q1k, d in zip((h, hu, hv), q1, dq1):
        q[inner] = 0.5 * (q[inner] + q1k[inner] + dt * d)
    return dt


if __name__ == "__main__":
    out, steps = sys.argv[1], int(sys.argv[2])
    h = np.load(f"{out}/h0.npy")
    hu = np.zeros_like(h)
    hv = np.zeros_like(h)
    n = h.shape[0] - 2 * NG
    dx = dy = 1.0 / n
    t = 0.0
    for _ in range(steps):
        t = t + step(h, hu, hv, dx, dy)
    np.save(f"{out}/h_numpy.npy", h)
    np.save(f"{out}/hu_numpy.npy", hu)
    np.save(f"{out}/hv_numpy.npy", hv)
    np.save(f"{out}/t_numpy.npy", np.array(t))
