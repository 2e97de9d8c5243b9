//! The command line and the run of the solver examples `cg`, `bicgstab` and `gmg`: the
//! problem (the Poisson matrix of `--grid`, or a Matrix Market file), the right-hand side from
//! `--seed`, timed solves, the `.npy` outputs and the JSON line.

use std::path::Path;

use weft::{CsrMatrix, Numeric, Sparse};
use weft_ir::DType;

use crate::krylov::{self, Multigrid, Solve};
use crate::{AppError, Args, Cli, Kind, Report, bench, npy, out_dir, save};

/// Which solver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// Conjugate gradients.
    Cg,
    /// BiCGSTAB.
    Bicgstab,
    /// CG preconditioned by a geometric multigrid V-cycle.
    Gmg,
}

impl Method {
    /// The example's name.
    pub fn name(self) -> &'static str {
        match self {
            Method::Cg => "cg",
            Method::Bicgstab => "bicgstab",
            Method::Gmg => "gmg",
        }
    }

    fn about(self) -> &'static str {
        match self {
            Method::Cg => {
                "Solves A x = b by conjugate gradients, written op by op on the numeric and sparse \
                 plugins (A: the 5-point Poisson matrix of --grid, or --matrix)."
            }
            Method::Bicgstab => {
                "Solves A x = b by BiCGSTAB, written op by op on the numeric and sparse plugins \
                 (A: the 5-point Poisson matrix of --grid, or --matrix)."
            }
            Method::Gmg => {
                "Solves A x = b by CG preconditioned with a geometric multigrid V-cycle \
                 (injection, bilinear interpolation, weighted Jacobi), on the numeric and sparse \
                 plugins (A: the 5-point Poisson matrix of --grid, or a --matrix on a square grid)."
            }
        }
    }
}

/// The command line of a solver example.
pub fn cli(method: Method) -> Cli {
    Cli::new(method.name(), method.about(), 10_000, 1)
        .range("n", 1, 1_000_000_000)
        .help("n", "maximum iterations per solve (the same as --maxiter)")
        .help("iters", "timed solves")
        .extra(
            "maxiter",
            "M",
            "maximum iterations per solve, as SciPy names it (default: --n)",
            Kind::Count {
                min: 1,
                max: 1_000_000_000,
            },
            "",
        )
        .extra(
            "warmup",
            "W",
            "untimed solves before the timed ones",
            Kind::Count {
                min: 0,
                max: u64::MAX,
            },
            "0",
        )
        .extra(
            "grid",
            "G",
            "the Poisson problem on a G x G grid (G^2 unknowns)",
            Kind::Count {
                min: 1,
                max: 1 << 16,
            },
            "64",
        )
        .extra(
            "matrix",
            "FILE",
            "solve with the matrix of this Matrix Market file instead",
            Kind::Path,
            "",
        )
        .extra(
            "tol",
            "TOL",
            "stop when |b - A x| <= TOL |b|",
            Kind::Float { min: 0.0 },
            "1e-8",
        )
}

/// Loads the sparse plugin into `np`'s runtime.
pub fn load_sparse(np: &Numeric) -> weft::Result<Sparse> {
    Sparse::new(np, weft_plugin_artifacts::SPARSE)
}

/// The index type for a matrix of `nnz` entries: `i32` while it fits, as SciPy chooses.
pub fn index_type(nnz: u64) -> DType {
    if nnz <= i32::MAX as u64 {
        DType::I32
    } else {
        DType::I64
    }
}

/// The matrix and the grid side it lives on (for `--matrix`, the square root of its size when
/// that is a whole number).
fn problem(sp: &Sparse, args: &Args) -> Result<(CsrMatrix, Option<u64>), AppError> {
    match args.extra("matrix").filter(|m| !m.is_empty()) {
        None => {
            let g = args.extra_u64("grid").ok_or("--grid needs a number")?;
            let nnz = (5 * g * g).saturating_sub(4 * g);
            Ok((sp.poisson2d(g, DType::F64, index_type(nnz))?, Some(g)))
        }
        Some(path) => {
            let a = sp.from_matrix_market(Path::new(path), DType::F64, DType::I64)?;
            // Narrow the indices as SciPy would, once the size is known.
            let a = if index_type(a.nnz()?) == DType::I32 {
                a.with_index_type(DType::I32)?
            } else {
                a
            };
            let (rows, cols) = a.shape();
            if rows != cols {
                return Err(format!("{path}: the matrix is {rows} x {cols}, not square").into());
            }
            let g = (rows as f64).sqrt().round() as u64;
            Ok((a, (g * g == rows).then_some(g)))
        }
    }
}

/// Runs a solver example.
pub fn run(method: Method, args: &Args) -> Result<(), AppError> {
    let name = method.name();
    let np = crate::load_numeric(args)?;
    let sp = load_sparse(&np)?;
    let (a, g) = problem(&sp, args)?;
    let n = a.shape().0;
    let b = np.random_uniform(&[n], 0.0, 1.0, crate::sub_seed(args.seed, 0), DType::F64);
    b.check()?;
    let tol = args.extra_f64("tol").ok_or("--tol needs a number")?;
    let max_iter = args.extra_u64("maxiter").unwrap_or(args.n);
    let max_iter = usize::try_from(max_iter).unwrap_or(usize::MAX);
    let mg = match method {
        Method::Gmg => {
            let g = g.ok_or("gmg needs a matrix on a square grid: its size must be a square")?;
            Some(Multigrid::new(&sp, &a, g)?)
        }
        _ => None,
    };
    np.runtime(|rt| rt.synchronize())?;

    let (timing, per_iter, last) = bench(&np, args.warmup, args.iters, || {
        let solve = match (&mg, method) {
            (Some(mg), _) => krylov::gmg(&a, mg, &b, tol, max_iter),
            (None, Method::Bicgstab) => krylov::bicgstab(&a, &b, tol, max_iter),
            (None, _) => krylov::cg(&a, &b, tol, max_iter),
        }?;
        Ok(solve)
    })?;
    let solve: Solve = last.ok_or("no solve ran")?;
    let true_residual = ((&b - a.matvec(&solve.x)).norm() / b.norm()).item()?;
    if let Some(dir) = out_dir(args)? {
        save(&dir, "b.npy", &b)?;
        save(&dir, "x.npy", &solve.x)?;
        let r = &solve.residuals;
        npy::write(
            dir.join("residuals.npy"),
            &[r.len() as u64],
            npy::NpyData::F64(r.clone()),
        )?;
    }
    let per_iteration = crate::timing::median(&solve.seconds);
    let mut report = Report::new(name, args);
    report
        .timing(&timing, &per_iter)
        // A timed iteration of this example is a whole solve: name both times plainly.
        .set("seconds_per_solve", timing.median)
        .set("seconds_per_solver_iteration", per_iteration)
        .set("maxiter", max_iter as u64)
        .set("unknowns", n)
        .set("nnz", a.nnz()?)
        .set("iterations", solve.iterations() as u64)
        .set("converged", solve.converged)
        .set("relative_residual", true_residual)
        .set("tol", tol)
        .runtime_stats(&np);
    args.say(&format!(
        "{name}: {n} unknowns, {} iterations, {:.3} ms per iteration (median), relative residual \
         {true_residual:.3e}{}",
        solve.iterations(),
        per_iteration * 1e3,
        if solve.converged {
            ""
        } else {
            " (not converged)"
        }
    ))?;
    report.print()?;
    if !solve.converged {
        return Err(format!(
            "{name} did not reach --tol {tol:e} in {} iterations",
            solve.iterations()
        )
        .into());
    }
    Ok(())
}
