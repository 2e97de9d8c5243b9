"""NPBench's time-stepped stencils under `jax.jit`: the JAX peer of `npbench`.

`npbench.py run` imports this module where JAX is installed and times each kernel here beside
NumPy's: one first call (tracing and compiling included), then the median of the timed calls,
each on fresh device copies of the inputs made before the clock starts and waited for with
`block_until_ready`. Each function takes the kernel's inputs as `npbench.py` holds them and
returns its outputs by name. The time loop is a `lax.fori_loop` inside one jitted function,
so a step costs JAX what XLA's fused loop body costs, not a Python call per step: the form
issue 43 measures Weft's replayed time steps against.
"""
import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402  (after enabling float64)
from jax import lax  # noqa: E402


def _alternate(steps, a, b, interior, update):
    """`steps - 1` time steps of `b[interior] = update(a)` then `a[interior] = update(b)`."""

    def step(_, ab):
        a, b = ab
        b = b.at[interior].set(update(a))
        a = a.at[interior].set(update(b))
        return a, b

    return lax.fori_loop(1, steps, step, (a, b))


def _three_point(f):
    return 0.33333 * (f[:-2] + f[1:-1] + f[2:])


def _five_point(f):
    return 0.2 * (f[1:-1, 1:-1] + f[1:-1, :-2] + f[1:-1, 2:] + f[2:, 1:-1] + f[:-2, 1:-1])


def _heat(f):
    c = f[1:-1, 1:-1, 1:-1]
    return (0.125 * (f[2:, 1:-1, 1:-1] - 2.0 * c + f[:-2, 1:-1, 1:-1]) +
            0.125 * (f[1:-1, 2:, 1:-1] - 2.0 * c + f[1:-1, :-2, 1:-1]) +
            0.125 * (f[1:-1, 1:-1, 2:] - 2.0 * c + f[1:-1, 1:-1, 0:-2]) + c)


_INNER = slice(1, -1)
_jacobi_1d = jax.jit(lambda steps, a, b: _alternate(steps, a, b, (_INNER,), _three_point))
_jacobi_2d = jax.jit(lambda steps, a, b: _alternate(steps, a, b, (_INNER,) * 2, _five_point))
_heat_3d = jax.jit(lambda steps, a, b: _alternate(steps, a, b, (_INNER,) * 3, _heat))


def jacobi_1d(TSTEPS, A, B):
    a, b = _jacobi_1d(TSTEPS, A, B)
    return {"A": a, "B": b}


def jacobi_2d(TSTEPS, A, B):
    a, b = _jacobi_2d(TSTEPS, A, B)
    return {"A": a, "B": b}


def heat_3d(TSTEPS, A, B):
    a, b = _heat_3d(TSTEPS, A, B)
    return {"A": a, "B": b}


@jax.jit
def _fdtd_2d(steps, ex, ey, hz, fict):
    def step(t, fields):
        ex, ey, hz = fields
        ey = ey.at[0, :].set(fict[t])
        ey = ey.at[1:, :].add(-0.5 * (hz[1:, :] - hz[:-1, :]))
        ex = ex.at[:, 1:].add(-0.5 * (hz[:, 1:] - hz[:, :-1]))
        hz = hz.at[:-1, :-1].add(
            -0.7 * (ex[:-1, 1:] - ex[:-1, :-1] + ey[1:, :-1] - ey[:-1, :-1]))
        return ex, ey, hz

    return lax.fori_loop(0, steps, step, (ex, ey, hz))


def fdtd_2d(TMAX, ex, ey, hz, _fict_):
    ex, ey, hz = _fdtd_2d(TMAX, ex, ey, hz, _fict_)
    return {"ex": ex, "ey": ey, "hz": hz}


# The kernels with a JAX version, by NPBench's name.
KERNELS = {
    "jacobi_1d": jacobi_1d,
    "jacobi_2d": jacobi_2d,
    "heat_3d": heat_3d,
    "fdtd_2d": fdtd_2d,
}


def device_copies(values):
    """Fresh device arrays of `values` (scalars stay Python numbers), ready before a clock."""
    out = {}
    for k, v in values.items():
        if hasattr(v, "ndim") and v.ndim > 0:
            out[k] = jax.device_put(jnp.asarray(v))
            out[k].block_until_ready()
        else:
            out[k] = v.item() if hasattr(v, "item") else v
    return out


def block(outputs):
    """Waits for every output of a call."""
    for v in outputs.values():
        v.block_until_ready()
    return outputs
