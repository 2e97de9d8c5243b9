//! A program whose kernel faults on one rank only: `take` with one position out of range, in
//! the last piece of the indices, so only the rank that owns that piece runs the failing
//! gather. Under `mpirun` the whole job must end with the error and that rank's number, not
//! hang (`tests/tests/all/ranks.rs`).

use std::process::ExitCode;

use weft::{Config, Numeric, Ranks, Runtime};
use weft_ir::DType;

fn main() -> ExitCode {
    let run = || -> weft::Result<Vec<f64>> {
        let ranks = Ranks::world()?;
        let config = Config {
            threads: 1,
            component_cache: None,
            ranks: Some(ranks),
            ..Config::default()
        };
        let np = Numeric::new(Runtime::new(config)?, weft_plugin_artifacts::NUMERIC)?;
        let n = 60u64;
        let x = np.arange(0.0, n as f64, 1.0, DType::F64);
        let positions: Vec<f64> = (0..n)
            .map(|i| if i == n - 1 { 1e6 } else { i as f64 })
            .collect();
        let indices = np.from_vec(&[n], &positions).astype(DType::I64);
        x.take(&indices, None).to_vec()
    };
    match run() {
        Ok(v) => {
            println!("no fault: {} values", v.len());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rank_fault: error: {e}");
            ExitCode::FAILURE
        }
    }
}
