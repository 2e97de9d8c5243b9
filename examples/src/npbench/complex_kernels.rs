//! NPBench's kernels on complex numbers (`mandelbrot1`, `mandelbrot2`, `stockham_fft`,
//! `contour_integral`, `scattering_self_energies`),
//! statement for statement with [`ComplexArray`]; each complex output is returned as its two
//! parts, `NAME.real` and `NAME.imag`.

use std::f64::consts::PI;

use weft::{Complex, ComplexArray, Ix, Range};
use weft_ir::DType;

use super::{Inputs, Outputs};
use crate::AppError;

/// A complex output as its two named parts.
fn parts(name: &str, z: &ComplexArray) -> [(String, weft::Array); 2] {
    [
        (format!("{name}.real"), z.re().clone()),
        (format!("{name}.imag"), z.im().clone()),
    ]
}

/// NPBench's `mandelbrot1`: every point iterates `z = z**2 + c` while `|z| < horizon`,
/// through a mask of compressed values (`Z[I] = Z[I]**2 + C[I]`).
pub fn mandelbrot1(x: &Inputs) -> Result<Outputs, AppError> {
    let np = &x.np;
    let (xn, yn, maxiter) = (x.size("XN")?, x.size("YN")?, x.size("maxiter")?);
    let horizon = x.scalar("horizon")?;
    let xs = np.linspace(x.scalar("xmin")?, x.scalar("xmax")?, xn as u64, DType::F64);
    let ys = np.linspace(x.scalar("ymin")?, x.scalar("ymax")?, yn as u64, DType::F64);
    let c = &xs + &(&ys.expand_dims(1) * Complex::I);
    let shape = [yn as u64, xn as u64];
    let n = np.zeros(&shape, DType::I64);
    let z = np.complex_zeros(&shape, DType::F64);
    for it in 0..maxiter {
        let inside = z.abs().lt(horizon);
        n.assign_where(&inside, it)?;
        let next = z.masked(&inside)?.powi(2) + &c.masked(&inside)?;
        z.assign_masked(&inside, &next)?;
    }
    n.assign_where(&n.eq(maxiter - 1), 0i64)?;
    let mut out: Outputs = parts("Z", &z).into();
    out.push(("N".into(), n));
    Ok(out)
}

/// NPBench's `mandelbrot2`, whose NumPy program compresses the points still iterating after
/// every step (`Z = Z[I]`) and writes those that diverge back through their coordinates
/// (`N_[Xi[I], Yi[I]] = i + 1`), as one kernel of the application's own
/// (`loop_kernels::mandelbrot2_kernel`): each point iterates until it diverges, in one
/// task. (Written statement for statement, compressing every step, it ran at 0.13-0.22x
/// NumPy.)
pub fn mandelbrot2(x: &Inputs) -> Result<Outputs, AppError> {
    let np = &x.np;
    let (xn, yn, itermax) = (x.size("XN")?, x.size("YN")?, x.size("maxiter")?);
    let horizon = x.scalar("horizon")?;
    let xs = np.linspace(x.scalar("xmin")?, x.scalar("xmax")?, xn as u64, DType::F64);
    let ys = np.linspace(x.scalar("ymin")?, x.scalar("ymax")?, yn as u64, DType::F64);
    let shape = [xn as u64, yn as u64];
    let n_ = np.zeros(&shape, DType::I64);
    let z_ = np.complex_zeros(&shape, DType::F64);
    np.run_kernel(
        &super::loop_kernels::mandelbrot2_kernel(),
        &[&xs, &ys, &n_, z_.re(), z_.im()],
        &[weft_ir::Scalar::I64(itermax), weft_ir::Scalar::F64(horizon)],
    )?;
    let mut out: Outputs = parts("Z", &z_.t()).into();
    out.push(("N".into(), n_.t()));
    Ok(out)
}

/// `-2j * pi * i * j / denominator`'s exponential, as NumPy evaluates it left to right
/// (`i`, `j` integer grids).
fn twiddles(i: &weft::Array, j: &weft::Array, denominator: f64) -> ComplexArray {
    let minus_two_pi_j = Complex::new(-0.0, -2.0) * Complex::new(PI, 0.0);
    ((i * minus_two_pi_j) * j / denominator).exp()
}

/// NPBench's `stockham_fft`: a radix-`R` Stockham FFT of `R^K` points (a stride
/// permutation, the twiddle factors, and the butterflies as one product per stage).
pub fn stockham_fft(x: &Inputs) -> Result<Outputs, AppError> {
    let np = &x.np;
    let (r, k) = (x.size("R")?, x.size("K")?);
    let n = r.pow(k as u32);
    let (input, y) = (x.complex("x")?, x.complex("y")?);
    let grid = np.mgrid(&[(0, r, 1), (0, r, 1)]);
    let (i_coord, j_coord) = (grid.index(&[Ix::At(0)]), grid.index(&[Ix::At(1)]));
    let dft_mat = twiddles(&i_coord, &j_coord, r as f64);
    y.assign(input)?;
    let grid = np.mgrid(&[(0, r, 1), (0, n, 1)]);
    let (ii_coord, jj_coord) = (grid.index(&[Ix::At(0)]), grid.index(&[Ix::At(1)]));
    for i in 0..k {
        let (ri, rest) = (r.pow(i as u32), r.pow((k - i - 1) as u32));
        let yv = y.reshape(&[ri, r, rest]);
        let tmp_perm = yv.permute(&[1, 0, 2]);
        let d = ComplexArray::from_parts(
            np.empty(&[r as u64, ri as u64, rest as u64], DType::F64),
            np.empty(&[r as u64, ri as u64, rest as u64], DType::F64),
        )?;
        let head = [Range::all(), Range::to(ri)];
        let tmp = twiddles(
            &ii_coord.slice(&head),
            &jj_coord.slice(&head),
            r.pow(i as u32 + 1) as f64,
        );
        d.assign(&tmp.reshape(&[r, ri, 1]).repeat(rest as u64, Some(2)))?;
        let tmp_twid = tmp_perm.reshape(&[n]) * &d.reshape(&[n]);
        let butterflies = dft_mat.matmul(&tmp_twid.reshape(&[r, n / r]));
        y.assign(&butterflies.reshape(&[n]))?;
    }
    Ok(parts("y", y).into())
}

/// NPBench's `contour_integral`: for each integration point `z`, `Tz = sum_n z^(s/2 - n)
/// Ham[n]`, then `X = Tz^-1 Y` (or `Tz^-1`), accumulated into `P0` and `z`-weighted into `P1`.
pub fn contour_integral(x: &Inputs) -> Result<Outputs, AppError> {
    let np = &x.np;
    let (nr, nm, slab) = (x.size("NR")?, x.size("NM")?, x.size("slab_per_bc")?);
    let (ham, int_pts, y) = (x.complex("Ham")?, x.complex("int_pts")?, x.complex("Y")?);
    let p0 = np.complex_zeros(&[nr as u64, nm as u64], DType::F64);
    let p1 = np.complex_zeros(&[nr as u64, nm as u64], DType::F64);
    for z in int_pts.to_vec()? {
        let tz = np.complex_zeros(&[nr as u64, nr as u64], DType::F64);
        for n in 0..=slab {
            // NumPy's `np.power(z, slab / 2 - n)`: an integral float exponent.
            let exponent = slab as f64 / 2.0 - n as f64;
            let zz = if exponent.fract() == 0.0 {
                z.powi(exponent as i32)
            } else {
                return Err(
                    format!("contour_integral: exponent {exponent} is not integral").into(),
                );
            };
            tz.assign(&(&tz + &(ham.index(&[Ix::At(n)]) * zz)))?;
        }
        let mut xz = if nr == nm { tz.inv()? } else { tz.solve(y)? };
        if z.abs() < 1.0 {
            xz = -&xz;
        }
        p0.assign(&(&p0 + &xz))?;
        p1.assign(&(&p1 + &(&xz * z)))?;
    }
    let mut out: Outputs = parts("P0", &p0).into();
    out.extend(parts("P1", &p1));
    Ok(out)
}

/// NPBench's `scattering_self_energies`: eight nested loops, each innermost step two small
/// complex products accumulated into one block of `Sigma` (`Sigma[k, E, a] += (G[k, E - w,
/// n[a, b]] @ dH[a, b, i]) @ (dH[a, b, j] * D[q, w, a, b, i, j])`), written as one kernel of
/// the application's own over the arrays' parts (`loop_kernels::
/// scattering_self_energies_kernel`, run by `Numeric::run_kernel`): one task with the loops
/// inside. (Written statement for statement, 22 tasks a step, it ran at 0.07x NumPy.)
pub fn scattering_self_energies(x: &Inputs) -> Result<Outputs, AppError> {
    let (dh, g, d, sigma) = (
        x.complex("dH")?,
        x.complex("G")?,
        x.complex("D")?,
        x.complex("Sigma")?,
    );
    let neigh = x.array("neigh_idx")?;
    let norb = g
        .shape()?
        .last()
        .copied()
        .ok_or("scattering_self_energies: G has no axes")?;
    let kernel = super::loop_kernels::scattering_self_energies_kernel(u32::try_from(norb)?);
    neigh.numeric().run_kernel(
        &kernel,
        &[
            neigh,
            dh.re(),
            dh.im(),
            g.re(),
            g.im(),
            d.re(),
            d.im(),
            sigma.re(),
            sigma.im(),
        ],
        &[],
    )?;
    Ok(parts("Sigma", sigma).into())
}
