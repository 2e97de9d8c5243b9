//! Shallow water in TorchSWE's style (Chuang et al.; the Diffuse paper ran TorchSWE on
//! cuNumeric): finite volumes on `n x n` cells of `[0, 1]^2` with two ghost cells on each side
//! and reflecting walls, MUSCL reconstruction with the generalized minmod limiter,
//! Kurganov-Petrova central-upwind fluxes with desingularized velocities, and SSP-RK2 steps
//! whose `dt` comes from the CFL condition, all as whole-array NumPy statements on shifted,
//! strided and reversed views of the same arrays:
//!
//! ```python
//! slope = minmod(THETA * (q[c] - q[c-1]), (q[c+1] - q[c-1]) / 2.0, THETA * (q[c+1] - q[c]))
//! left = q[c] + slope[c] / 2.0; right = q[c+1] - slope[c+1] / 2.0          # each face
//! flux = where(ap - am > 0, (ap * fL - am * fR + ap * am * (qR - qL)) / (ap - am), 0)
//! dq = -(fx[:, 1:] - fx[:, :-1]) / dx - (fy[1:, :] - fy[:-1, :]) / dy
//! q[:, 1::-1] = q[:, 2:4]                                   # walls: mirrored ghost cells
//! ```
//!
//! `examples/numpy/swe.py` is the program in NumPy; this module follows it function for
//! function, with the same arithmetic in the same order. The bottom is flat (TorchSWE's
//! topography terms vanish), the initial depth is a Gaussian hump off the centre, and the
//! momenta start at zero. `dt` stays a 0-d array: it is a reduction of the wave speeds that
//! the update multiplies in, and nothing is read on the host during a step.

use weft::{Array, Ix, Numeric, Range};
use weft_ir::DType;

/// Gravity.
pub const G: f64 = 9.81;
/// The limiter's parameter (1: minmod, 2: monotonized central).
pub const THETA: f64 = 1.3;
/// Desingularization of `u = hu / h` where `h` is near zero.
pub const EPS: f64 = 1e-12;
/// The CFL number.
pub const CFL: f64 = 0.4;
/// Ghost cells on each side.
pub const NG: i64 = 2;

/// A direction of the grid: `X` along axis 1 (columns), `Y` along axis 0 (rows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    /// Along axis 1.
    X,
    /// Along axis 0.
    Y,
}

fn range(start: i64, stop: Option<i64>) -> Range {
    Range {
        start: Some(start),
        stop,
        step: None,
    }
}

/// `a[along]` along `axis`, with `across` across it.
fn view(a: &Array, axis: Axis, along: Range, across: Range) -> Array {
    match axis {
        Axis::X => a.slice(&[across, along]),
        Axis::Y => a.slice(&[along, across]),
    }
}

/// Cells `start:stop` along `axis`, interior cells across it.
fn cells(q: &Array, axis: Axis, start: i64, stop: Option<i64>) -> Array {
    view(q, axis, range(start, stop), range(NG, Some(-NG)))
}

/// `a[start:stop]` along `axis`, everything across it.
fn along(a: &Array, axis: Axis, start: i64, stop: Option<i64>) -> Array {
    view(a, axis, range(start, stop), Range::all())
}

/// The smallest in magnitude of `a`, `b`, `c` where all three have one sign, else 0.
fn minmod(a: &Array, b: &Array, c: &Array) -> Array {
    a.minimum(b).minimum(c).maximum(0.0) + a.maximum(b).maximum(c).minimum(0.0)
}

/// Values left and right of each face across the interior along `axis` (MUSCL).
fn reconstruct(q: &Array, axis: Axis) -> (Array, Array) {
    let lo = cells(q, axis, 0, Some(-2));
    let mid = cells(q, axis, 1, Some(-1));
    let hi = cells(q, axis, 2, None);
    let slope = minmod(
        &(THETA * (&mid - &lo)),
        &((&hi - &lo) / 2.0),
        &(THETA * (&hi - &mid)),
    );
    let left = cells(q, axis, 1, Some(-2)) + along(&slope, axis, 0, Some(-1)) / 2.0;
    let right = cells(q, axis, 2, Some(-1)) - along(&slope, axis, 1, None) / 2.0;
    (left, right)
}

/// `hq / h`, desingularized where `h` is near zero (Kurganov and Petrova).
fn velocity(h: &Array, hq: &Array) -> Array {
    let h4 = (h * h) * (h * h);
    h * hq * 2f64.sqrt() / (&h4 + h4.maximum(EPS)).sqrt()
}

/// The flux of `(h, hn, ht)` across a face whose normal velocity is `un`.
fn physical_flux(h: &Array, hn: &Array, ht: &Array, un: &Array) -> [Array; 3] {
    [hn.clone(), hn * un + 0.5 * G * h * h, ht * un]
}

/// The conserved fields: depth and the two momenta, each `(n + 4) x (n + 4)` with ghosts.
#[derive(Clone, Debug)]
pub struct Water {
    /// Depth.
    pub h: Array,
    /// Momentum in x.
    pub hu: Array,
    /// Momentum in y.
    pub hv: Array,
}

impl Water {
    fn fields(&self) -> [&Array; 3] {
        [&self.h, &self.hu, &self.hv]
    }

    /// A copy of every field.
    pub fn copy(&self) -> Water {
        Water {
            h: self.h.copy(),
            hu: self.hu.copy(),
            hv: self.hv.copy(),
        }
    }
}

/// Central-upwind fluxes of `(h, hu, hv)` through the faces along `axis`, and the fastest
/// wave speed through them (a 0-d array).
fn face_fluxes(w: &Water, axis: Axis) -> ([Array; 3], Array) {
    let (h_l, h_r) = reconstruct(&w.h, axis);
    let (hu_l, hu_r) = reconstruct(&w.hu, axis);
    let (hv_l, hv_r) = reconstruct(&w.hv, axis);
    // The normal and transverse momenta.
    let (hn_l, hn_r, ht_l, ht_r) = match axis {
        Axis::X => (hu_l, hu_r, hv_l, hv_r),
        Axis::Y => (hv_l, hv_r, hu_l, hu_r),
    };
    let u_l = velocity(&h_l, &hn_l);
    let u_r = velocity(&h_r, &hn_r);
    let c_l = (G * &h_l).sqrt();
    let c_r = (G * &h_r).sqrt();
    let ap = (&u_l + &c_l).maximum(&(&u_r + &c_r)).maximum(0.0);
    let am = (&u_l - &c_l).minimum(&(&u_r - &c_r)).minimum(0.0);
    let f_l = physical_flux(&h_l, &hn_l, &ht_l, &u_l);
    let f_r = physical_flux(&h_r, &hn_r, &ht_r, &u_r);
    let q_l = [&h_l, &hn_l, &ht_l];
    let q_r = [&h_r, &hn_r, &ht_r];
    let denom = &ap - &am;
    let positive = denom.gt(0.0);
    let flux: Vec<Array> = (0..3)
        .map(|k| {
            let upwind = &ap * &f_l[k] - &am * &f_r[k] + &ap * &am * (q_r[k] - q_l[k]);
            positive.select(&(upwind / &denom), 0.0)
        })
        .collect();
    let [f0, f1, f2]: [Array; 3] = flux
        .try_into()
        .unwrap_or_else(|_| unreachable!("three fluxes"));
    let flux = match axis {
        Axis::X => [f0, f1, f2],
        // Back from (normal, transverse) to (hu, hv).
        Axis::Y => [f0, f2, f1],
    };
    let speed = ap.max().maximum(&(-&am).max());
    (flux, speed)
}

/// Reflecting walls: ghost cells mirror the interior, and the normal momentum flips sign.
/// Field by field, as `swe.py`: `q[:, 1::-1] = q[:, 2:4]`, `q[:, -1:-3:-1] = q[:, -4:-2]`,
/// then the same along rows (over every column, so the corners come from the columns').
pub fn walls(w: &Water) -> weft::Result<()> {
    let reversed = |start: i64, stop: Option<i64>| Range {
        step: Some(-1),
        ..range(start, stop)
    };
    // (ghost cells, the interior cells they mirror): west or north, then east or south.
    let sides = [
        (reversed(1, None), range(2, Some(4))),
        (reversed(-1, Some(-3)), range(-4, Some(-2))),
    ];
    let normals = [None, Some(Axis::X), Some(Axis::Y)];
    for (q, normal) in w.fields().into_iter().zip(normals) {
        for axis in [Axis::X, Axis::Y] {
            for (ghost, inside) in sides {
                let ghost = view(q, axis, ghost, Range::all());
                let inside = view(q, axis, inside, Range::all());
                if normal == Some(axis) {
                    ghost.assign(&-inside)?;
                } else {
                    ghost.assign(&inside)?;
                }
            }
        }
    }
    Ok(())
}

/// The time derivative of the interior cells, and the fastest wave speed (0-d).
fn rhs(w: &Water, dx: f64, dy: f64) -> ([Array; 3], Array) {
    let (fx, sx) = face_fluxes(w, Axis::X);
    let (fy, sy) = face_fluxes(w, Axis::Y);
    let dq = |k: usize| {
        -(along(&fx[k], Axis::X, 1, None) - along(&fx[k], Axis::X, 0, Some(-1))) / dx
            - (along(&fy[k], Axis::Y, 1, None) - along(&fy[k], Axis::Y, 0, Some(-1))) / dy
    };
    ([dq(0), dq(1), dq(2)], sx.maximum(&sy))
}

/// The interior cells of `q`.
fn inner(q: &Array) -> Array {
    let r = range(NG, Some(-NG));
    q.slice(&[r, r])
}

/// One SSP-RK2 step of `w` in place, on cells of size `dx` by `dy`; returns `dt` (0-d).
pub fn step(w: &Water, dx: f64, dy: f64) -> weft::Result<Array> {
    walls(w)?;
    let (dq, speed) = rhs(w, dx, dy);
    let dt = CFL * dx.min(dy) / &speed;
    let w1 = w.copy();
    for ((q, q1), d) in w.fields().into_iter().zip(w1.fields()).zip(&dq) {
        inner(q1).assign(&(inner(q) + &dt * d))?;
    }
    walls(&w1)?;
    let (dq1, _) = rhs(&w1, dx, dy);
    for ((q, q1), d) in w.fields().into_iter().zip(w1.fields()).zip(&dq1) {
        inner(q).assign(&(0.5 * (inner(q) + inner(q1) + &dt * d)))?;
    }
    Ok(dt)
}

/// The initial water on `n x n` cells: depth `1 + 0.5 exp(-((x - 0.35)^2 + (y - 0.6)^2) /
/// 0.01)` at the cell centres (ghost cells included), momenta zero.
pub fn initial_water(np: &Numeric, n: u64) -> Water {
    let m = n + 2 * NG as u64;
    let dx = 1.0 / n as f64;
    let centres = (np.arange(0.0, m as f64, 1.0, DType::F64) - NG as f64 + 0.5) * dx;
    let x = centres.index(&[Ix::NewAxis, Ix::Slice(Range::all())]);
    let y = centres.index(&[Ix::Slice(Range::all()), Ix::NewAxis]);
    let sq = |a: Array| &a * &a;
    let h = 1.0 + 0.5 * (-(sq(&x - 0.35) + sq(&y - 0.6)) / 0.01).exp();
    Water {
        hu: h.zeros_like(),
        hv: h.zeros_like(),
        h,
    }
}

/// The water's mass: the sum of the interior depths (0-d; times the cell area).
pub fn mass(h: &Array) -> Array {
    inner(h).sum()
}
