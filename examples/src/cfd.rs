//! Channel flow: the 2-D incompressible Navier-Stokes equations with a pressure Poisson
//! iteration, periodic in x, of CFD Python step 12 (Barba and Forsyth), which the Diffuse
//! paper ran on cuNumeric. The program is the NumPy original's, statement for statement:
//!
//! ```python
//! for step in range(nt):
//!     un = u.copy(); vn = v.copy()
//!     b = build_up_b(rho, dt, dx, dy, u, v)        # interior, then the columns x = 2, x = 0
//!     p = pressure_poisson_periodic(p, dx, dy)     # nit Jacobi sweeps on shifted slices
//!     u[1:-1, 1:-1] = un[1:-1, 1:-1] - un[1:-1, 1:-1] * dt / dx * (...) ...  # and v
//!     u[1:-1, -1] = ...; u[1:-1, 0] = ...          # periodic columns, and v
//!     u[0, :] = 0; u[-1, :] = 0; v[0, :] = 0; v[-1, :] = 0
//!     udiff = (numpy.sum(u) - numpy.sum(un)) / numpy.sum(u)
//! ```
//!
//! `examples/numpy/cfd.py` is that program in NumPy, as step 12 writes it; here each of its
//! three copies of an expression (interior, right column, left column) is one Rust function
//! applied to three sets of views, which is the same arithmetic in the same order.
//!
//! Differences from the notebook, each needed to run it at scale: the grid is `n x n`, `dt`
//! shrinks as `(40 / (n - 1))^2` above 41 points so the explicit scheme stays stable, the
//! number of steps is fixed (the notebook loops until `udiff < 0.001`; here `udiff` is
//! computed every step and reported), and `u` and `v` start from a seeded perturbation of
//! amplitude [`PERTURBATION`] instead of zeros (from zeros the pressure stays exactly zero, so
//! the pressure iteration would compute nothing a test could check).

use weft::{Array, Ix, Numeric, Range};
use weft_ir::DType;

/// The amplitude of the initial velocities (uniform in `[-PERTURBATION, PERTURBATION)`).
pub const PERTURBATION: f64 = 0.1;

/// `1:-1`.
const MID: Range = Range {
    start: Some(1),
    stop: Some(-1),
    step: None,
};
/// `2:`.
const HI: Range = Range {
    start: Some(2),
    stop: None,
    step: None,
};
/// `0:-2`.
const LO: Range = Range {
    start: Some(0),
    stop: Some(-2),
    step: None,
};

/// The physical and numerical parameters of step 12.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    /// Grid points in x and in y.
    pub n: u64,
    /// Pressure iterations per step.
    pub nit: usize,
    /// Grid spacing in x, `2 / (n - 1)`.
    pub dx: f64,
    /// Grid spacing in y, `2 / (n - 1)`.
    pub dy: f64,
    /// Time step.
    pub dt: f64,
    /// Density.
    pub rho: f64,
    /// Viscosity.
    pub nu: f64,
    /// The body force driving the flow in x.
    pub f: f64,
}

impl Params {
    /// Step 12's parameters on an `n x n` grid with `nit` pressure iterations per step.
    pub fn new(n: u64, nit: usize) -> Params {
        let h = 2.0 / (n.max(2) - 1) as f64;
        let scale = (40.0 / (n.max(2) - 1) as f64).min(1.0);
        Params {
            n,
            nit,
            dx: h,
            dy: h,
            dt: 0.005 * (scale * scale),
            rho: 1.0,
            nu: 0.1,
            f: 1.0,
        }
    }
}

/// The flow: velocities `u`, `v` and pressure `p`, each `n x n`, row `y`, column `x`.
#[derive(Clone, Debug)]
pub struct Flow {
    /// Velocity in x.
    pub u: Array,
    /// Velocity in y.
    pub v: Array,
    /// Pressure.
    pub p: Array,
}

/// The initial flow: `u` and `v` uniform in `[-PERTURBATION, PERTURBATION)` from the seed,
/// zero on the walls (rows 0 and `n - 1`); `p` zero.
pub fn initial_flow(np: &Numeric, prm: &Params, seed: u64) -> weft::Result<Flow> {
    let shape = [prm.n, prm.n];
    let a = PERTURBATION;
    let u = np.random_uniform(&shape, -a, a, crate::sub_seed(seed, 0), DType::F64);
    let v = np.random_uniform(&shape, -a, a, crate::sub_seed(seed, 1), DType::F64);
    for w in [&u, &v] {
        w.index(&[Ix::At(0)]).assign(0.0)?;
        w.index(&[Ix::At(-1)]).assign(0.0)?;
    }
    let p = np.zeros(&shape, DType::F64);
    Ok(Flow { u, v, p })
}

/// The views of one field that a stencil expression reads around the points it writes: the
/// point itself and its four neighbours (east and west wrap around at the periodic columns).
struct Around {
    c: Array,
    e: Array,
    w: Array,
    n: Array,
    s: Array,
}

/// Where an expression writes: the interior `[1:-1, 1:-1]`, or one of the periodic columns
/// `[1:-1, -1]` (x = 2, east wraps to column 0) and `[1:-1, 0]` (x = 0, west wraps to -1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    Interior,
    Right,
    Left,
}

impl Part {
    const ALL: [Part; 3] = [Part::Interior, Part::Right, Part::Left];

    /// `a[1:-1, cols]` for the column entry `cols`.
    fn rows(a: &Array, cols: Ix) -> Array {
        a.index(&[Ix::Slice(MID), cols])
    }

    /// The points this part writes, as a view of `a`.
    fn target(self, a: &Array) -> Array {
        Part::rows(a, self.column(0))
    }

    /// The column entry shifted by `dx` columns (`dx` in -1..=1) around this part.
    fn column(self, dx: i64) -> Ix {
        match (self, dx) {
            (Part::Interior, -1) => Ix::Slice(LO),
            (Part::Interior, 1) => Ix::Slice(HI),
            (Part::Interior, _) => Ix::Slice(MID),
            (Part::Right, -1) => Ix::At(-2),
            (Part::Right, 1) => Ix::At(0),
            (Part::Right, _) => Ix::At(-1),
            (Part::Left, -1) => Ix::At(-1),
            (Part::Left, 1) => Ix::At(1),
            (Part::Left, _) => Ix::At(0),
        }
    }

    /// The five views of `a` around this part's points.
    fn around(self, a: &Array) -> Around {
        let col = self.column(0);
        Around {
            c: Part::rows(a, col),
            e: Part::rows(a, self.column(1)),
            w: Part::rows(a, self.column(-1)),
            n: a.index(&[Ix::Slice(HI), col]),
            s: a.index(&[Ix::Slice(LO), col]),
        }
    }
}

/// The source term of the pressure equation on one part (`build_up_b`'s expression).
fn source(prm: &Params, u: &Around, v: &Around) -> Array {
    let (dx, dy, dt, rho) = (prm.dx, prm.dy, prm.dt, prm.rho);
    let sq = |a: Array| &a * &a;
    rho * (1.0 / dt * ((&u.e - &u.w) / (2.0 * dx) + (&v.n - &v.s) / (2.0 * dy))
        - sq((&u.e - &u.w) / (2.0 * dx))
        - 2.0 * ((&u.n - &u.s) / (2.0 * dy) * (&v.e - &v.w) / (2.0 * dx))
        - sq((&v.n - &v.s) / (2.0 * dy)))
}

/// `build_up_b`: the source term of the pressure equation from the velocities.
pub fn build_up_b(prm: &Params, u: &Array, v: &Array) -> weft::Result<Array> {
    let b = u.zeros_like();
    for part in Part::ALL {
        part.target(&b)
            .assign(&source(prm, &part.around(u), &part.around(v)))?;
    }
    Ok(b)
}

/// One Jacobi update of the pressure on one part, from the previous pressure `pn` and `b`.
fn pressure(prm: &Params, pn: &Around, b: &Array) -> Array {
    let (dx2, dy2) = (prm.dx * prm.dx, prm.dy * prm.dy);
    ((&pn.e + &pn.w) * dy2 + (&pn.n + &pn.s) * dx2) / (2.0 * (dx2 + dy2))
        - dx2 * dy2 / (2.0 * (dx2 + dy2)) * b
}

/// `pressure_poisson_periodic`: `nit` sweeps on `p` in place, each from a copy `pn` of the
/// previous one, with the walls' zero-gradient condition after each.
pub fn pressure_poisson_periodic(prm: &Params, p: &Array, b: &Array) -> weft::Result<()> {
    for _ in 0..prm.nit {
        let pn = p.copy();
        for part in Part::ALL {
            part.target(p)
                .assign(&pressure(prm, &part.around(&pn), &part.target(b)))?;
        }
        p.index(&[Ix::At(-1)]).assign(&p.index(&[Ix::At(-2)]))?;
        p.index(&[Ix::At(0)]).assign(&p.index(&[Ix::At(1)]))?;
    }
    Ok(())
}

/// The momentum update of one velocity component on one part: `q` is the component being
/// updated (`un` or `vn`), `dp` the pressure difference that drives it, `dh` its grid spacing
/// and `force` the body force, if any (step 12 drives `u` only).
fn momentum(
    prm: &Params,
    q: &Around,
    (un, vn): (&Array, &Array),
    dp: Array,
    dh: f64,
    force: Option<f64>,
) -> Array {
    let (dx, dy, dt, nu) = (prm.dx, prm.dy, prm.dt, prm.nu);
    let q1 = &q.c
        - un * dt / dx * (&q.c - &q.w)
        - vn * dt / dy * (&q.c - &q.s)
        - dt / (2.0 * prm.rho * dh) * dp
        + nu * (dt / (dx * dx) * (&q.e - 2.0 * &q.c + &q.w)
            + dt / (dy * dy) * (&q.n - 2.0 * &q.c + &q.s));
    match force {
        Some(f) => q1 + f * dt,
        None => q1,
    }
}

/// One time step of the flow, in place; returns `udiff`, the relative change of `sum(u)`.
pub fn step(prm: &Params, flow: &Flow) -> weft::Result<Array> {
    let (u, v, p) = (&flow.u, &flow.v, &flow.p);
    let un = u.copy();
    let vn = v.copy();
    let b = build_up_b(prm, u, v)?;
    pressure_poisson_periodic(prm, p, &b)?;
    for part in Part::ALL {
        let (pu, pv, pp) = (part.around(&un), part.around(&vn), part.around(p));
        let dpx = &pp.e - &pp.w;
        let dpy = &pp.n - &pp.s;
        part.target(u).assign(&momentum(
            prm,
            &pu,
            (&pu.c, &pv.c),
            dpx,
            prm.dx,
            Some(prm.f),
        ))?;
        part.target(v)
            .assign(&momentum(prm, &pv, (&pu.c, &pv.c), dpy, prm.dy, None))?;
    }
    for w in [u, v] {
        w.index(&[Ix::At(0)]).assign(0.0)?;
        w.index(&[Ix::At(-1)]).assign(0.0)?;
    }
    let su = u.sum();
    Ok((&su - &un.sum()) / &su)
}
