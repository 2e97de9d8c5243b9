//! `weft-gpu-check`: the staged checks a GPU machine runs, in one self-contained binary (the
//! plugins are embedded through `weft-plugin-artifacts`). `scripts/gpu-bundle` builds and
//! strips it; `scripts/gpu-run.sh` runs every stage on the GPU machine. Each subcommand
//! prints exactly one JSON line on stdout (`stage`, `ok`, its details, and on failure
//! `error`), progress on stderr, and exits with 0 when it passed, 1 when it failed and 2 on a
//! bad command line. Every stage takes `--device gpu|sim` (`sim`: the GPU back end on the
//! PTX simulator, so that each stage runs here too) and `--small` (sizes the simulator runs
//! in seconds).
//!
//! The stages, one module each:
//! - [`env`](mod@env): the driver, the device, memory and copies, one launch, a planted
//!   fault, the copy probe;
//! - [`bits`]: the programs of [`programs`] on the CPU and on the device, each in a child
//!   process of its own (`bits-one`), compared bit for bit;
//! - [`record`] and [`jit`]: every kernel the examples make, recorded on the CPU, then loaded
//!   into a fresh GPU back end, timed per module;
//! - [`bench`](mod@bench): Black-Scholes, the stencil, CG, BiCGSTAB and dense Jacobi against
//!   the device's copy probe.
//!
//! [`cli`] holds the command line and [`outcome`] the JSON line.

mod bench;
mod bits;
mod cli;
mod env;
mod jit;
mod outcome;
mod programs;
mod record;

use std::process::ExitCode;

fn main() -> ExitCode {
    let command = match cli::parse(std::env::args_os().skip(1)) {
        Ok(command) => command,
        Err(cli::Stop::Help(text)) => {
            let _ = outcome::print_text(&text);
            return ExitCode::SUCCESS;
        }
        Err(cli::Stop::Bad { stage, message }) => {
            outcome::usage_error(&stage, &message);
            return ExitCode::from(2);
        }
    };
    outcome::run(command.stage(), command.device_name(), |out| {
        command.run(out)
    })
}
