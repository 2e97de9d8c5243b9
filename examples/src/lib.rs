//! Applications on Weft, and what they share.
//!
//! Each example is a NumPy program from the papers Weft follows, written naturally, op by op,
//! against the typed facade of the numeric plugin ([`weft::numeric`]):
//!
//! - [`black_scholes`]: option pricing (Listing 1 of the Legate task-fusion paper);
//! - [`stencil`]: the 5-point Jacobi heat iteration over aliasing views (Figure 1 of the
//!   Diffuse paper);
//! - [`jacobi`]: dense Jacobi iteration for `A x = b` (Diffuse's and Legate's benchmark).
//! - [`krylov`]: CG, BiCGSTAB and multigrid-preconditioned CG on the numeric and sparse
//!   plugins (the Diffuse paper's sparse solvers), driven by [`solve_app`];
//! - [`sparse_reference`]: plain-Rust CSR and op-by-op CG/BiCGSTAB, no Weft: the sparse reference;
//! - [`pagerank`]: PageRank by power iteration on a random graph (SciPy's program);
//! - [`npbench`]: NPBench's kernels, ported statement for statement.
//!
//! The computations live here so that the binaries (`src/bin/`) and the tests run the same
//! code. The shared pieces: a flag parser ([`cli`]), a `.npy` writer and reader ([`npy`]),
//! a timing helper ([`timing`]), the JSON result line ([`report`]) and NumPy timed in the same
//! run ([`numpy_peer`]).

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod allocator;
pub mod bandwidth;
pub mod black_scholes;
pub mod cfd;
pub mod cli;
pub mod csr_rows;
pub mod hand_written;
pub mod jacobi;
pub mod kernel_recording;
pub mod kmeans;
pub mod krylov;
pub mod logreg;
pub use weft::npy;
pub mod npbench;
pub mod numpy_peer;
pub mod pagerank;
pub mod report;
mod seeds;
pub mod side_by_side;
pub mod solve_app;
pub mod sparse_reference;
pub mod stencil;
pub mod swe;
pub mod timing;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use weft::{Array, Numeric, Runtime};

pub use cli::{Args, Cli, Kind};
pub use report::Report;
pub use seeds::sub_seed;
pub use timing::{Timing, bench, bench_then, time_iterations, time_iterations_then};

/// The error type of the example binaries.
pub type AppError = Box<dyn std::error::Error>;

/// Loads the numeric plugin into a fresh runtime configured from `args` (threads) and the
/// environment.
pub fn load_numeric(args: &Args) -> weft::Result<Numeric> {
    Numeric::new(Runtime::new(args.config())?, weft_plugin_artifacts::NUMERIC)
}

/// Creates the `--out` directory, if one was asked for, and returns it.
pub fn out_dir(args: &Args) -> Result<Option<PathBuf>, AppError> {
    match &args.out {
        None => Ok(None),
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            Ok(Some(dir.clone()))
        }
    }
}

/// `--out DIR` (created), or a fresh temporary directory for `example`'s files, and whether it
/// is temporary (the caller removes it when done).
pub fn out_dir_or_temp(args: &Args, example: &str) -> Result<(PathBuf, bool), AppError> {
    match out_dir(args)? {
        Some(dir) => Ok((dir, false)),
        None => {
            let dir = std::env::temp_dir().join(format!("weft-{example}-{}", std::process::id()));
            std::fs::create_dir_all(&dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            Ok((dir, true))
        }
    }
}

/// Writes an array to `dir/name` as `.npy`, in its own element type (`<f8`, `<f4`, `<i8`,
/// `<i4` or `|b1`) and shape (a 0-d array has shape `()`). This reads the array, so it runs
/// the pending tasks.
pub fn save(dir: &Path, name: &str, a: &Array) -> Result<(), AppError> {
    // Every rank reads (the read is collective); rank 0 writes the file.
    a.save(dir.join(name))?;
    Ok(())
}

/// Prints one line on stdout; unlike `println!`, a closed stdout is an error, not a panic.
pub fn say(line: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()
}

/// Runs an example's body: on an error prints it to stderr and exits with code 1 (quietly
/// when the error is a closed stdout, as with `example | head -1`), or with code 2 when the
/// device asked for cannot start (`--device gpu` where no NVIDIA driver is).
pub fn run_main(program: &str, body: impl FnOnce() -> Result<(), AppError>) -> ExitCode {
    match body() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let broken_pipe = e
                .downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe);
            if !broken_pipe {
                let _ = writeln!(std::io::stderr(), "{program}: error: {e}");
            }
            if e.downcast_ref::<weft::Error>().is_some_and(is_device_error) {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

/// Whether `e` says that the device could not start.
fn is_device_error(e: &weft::Error) -> bool {
    match e {
        weft::Error::Device(_) => true,
        weft::Error::At { source, .. } => is_device_error(source),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_seeds_differ() {
        let seeds: std::collections::BTreeSet<u64> = (0..4)
            .flat_map(|s| (0..4).map(move |k| sub_seed(s, k)))
            .collect();
        assert_eq!(seeds.len(), 16);
        assert_eq!(sub_seed(7, 1), sub_seed(7, 1));
    }
}
