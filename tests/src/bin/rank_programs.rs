//! Random programs (`weft_tests::programs::random_program`) on the ranks of `mpirun`, fused:
//! prints, from rank 0, one line per program with a hash of the bits of every array it still
//! holds and of every mid-program read. The same lines on 1, 2 and 3 ranks show that ranks
//! equal one process (`tests/tests/all/ranks.rs`).
//!
//! `rank_programs CASES SEED`

use std::hash::Hasher;
use std::process::ExitCode;

use weft::{Config, Ranks};
use weft_tests::programs::{random_program, run};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let cases: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(8);
    let seed: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let ranks = match Ranks::world() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rank_programs: {e}");
            return ExitCode::FAILURE;
        }
    };
    let root = ranks.rank() == 0;
    let config = Config {
        threads: 1,
        component_cache: None,
        ranks: Some(ranks),
        ..Config::from_env()
    };
    let plugins = weft_tests::plugins_with(config);
    for case in 0..cases {
        let program = random_program(seed.wrapping_mul(1000).wrapping_add(case));
        let (finals, reads) = run(&plugins, &program);
        // SipHash with fixed keys over every value's bits: the same in every process.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for v in finals.iter().chain(&reads).flatten() {
            h.write_u64(v.to_bits());
        }
        if root {
            println!(
                "case {case}: {} steps, {} arrays, {} reads, hash {:016x}",
                program.len(),
                finals.len(),
                reads.len(),
                h.finish()
            );
        }
    }
    ExitCode::SUCCESS
}
