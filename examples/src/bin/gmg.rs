//! `gmg`: see [`weft_examples::solve_app`] and [`weft_examples::krylov`].
//!
//! Flags: the common ones (`--n` is the maximum number of iterations, `--iters` the number
//! of timed solves), `--grid G`, `--matrix FILE.mtx`, `--tol TOL`; `--out DIR` writes
//! `b.npy`, `x.npy` and `residuals.npy` (the residual norm before the first iteration and
//! after each).

use std::process::ExitCode;

use weft_examples::run_main;
use weft_examples::solve_app::{self, Method};

fn main() -> ExitCode {
    let method = Method::Gmg;
    let args = solve_app::cli(method).parse_env_or_exit();
    run_main(method.name(), || solve_app::run(method, &args))
}
