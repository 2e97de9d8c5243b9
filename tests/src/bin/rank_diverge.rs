//! A program that breaks control replication on purpose: rank 1 adds where the others
//! multiply. With `WEFT_CHECK_REPLICATION=1` the job must stop naming the first task whose
//! plan differs across ranks (`tests/tests/all/ranks.rs`).

use std::process::ExitCode;

use weft::{Config, Numeric, Ranks, Runtime};
use weft_ir::DType;

fn main() -> ExitCode {
    let run = || -> weft::Result<f64> {
        let ranks = Ranks::world()?;
        let rank = ranks.rank();
        let config = Config {
            threads: 1,
            component_cache: None,
            ranks: Some(ranks),
            ..Config::from_env()
        };
        let np = Numeric::new(Runtime::new(config)?, weft_plugin_artifacts::NUMERIC)?;
        let x = np.arange(0.0, 100.0, 1.0, DType::F64);
        let y = if rank == 1 { &x + 1.0 } else { &x * 2.0 };
        y.sum().item()
    };
    match run() {
        Ok(v) => {
            println!("sum {v}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rank_diverge: error: {e}");
            ExitCode::FAILURE
        }
    }
}
