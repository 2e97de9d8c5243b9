//! Dense products on the ranks of `mpirun`, laid over whatever grid `WEFT_MATMUL_GRID` asks
//! for: prints, from rank 0, one line per product with a hash of the bits of its result, then
//! one line `traffic: BYTES MESSAGES` with what rank 0 sent. The same product lines on 1 to 4
//! ranks and every grid show that ranks and grids equal one process
//! (`tests/tests/all/ranks.rs`).
//!
//! Its operands are made by tasks, so that on several ranks each rank holds only its part of
//! them, as an application's arrays usually are; shapes divide by no grid.

use std::hash::Hasher;
use std::process::ExitCode;

use weft::{Array, Config, DType, Numeric, Ranks};

/// A `rows x cols` matrix of values in `[-1, 1)` from `seed`, made by a task.
fn matrix(np: &Numeric, rows: u64, cols: u64, seed: u64, dtype: DType) -> Array {
    let v = weft_tests::uniform_data((rows * cols) as usize, seed, -1.0, 1.0);
    np.from_f64s(&[rows, cols], &v, dtype) * 1.0
}

fn hash(values: &[f64]) -> u64 {
    // SipHash with fixed keys: the same in every process.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for v in values {
        h.write_u64(v.to_bits());
    }
    h.finish()
}

fn main() -> ExitCode {
    let ranks = match Ranks::world() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rank_products: {e}");
            return ExitCode::FAILURE;
        }
    };
    let root = ranks.rank() == 0;
    let np = weft_tests::numeric_with(Config {
        threads: 1,
        component_cache: None,
        ranks: Some(ranks),
        ..Config::from_env()
    });
    let mut results: Vec<(String, weft::Result<Vec<f64>>)> = Vec::new();
    for (dtype, tag) in [(DType::F64, "f64"), (DType::F32, "f32")] {
        let a = matrix(&np, 97, 61, 1, dtype);
        let b = matrix(&np, 61, 83, 2, dtype);
        let c = a.matmul(&b);
        // A product of a product: its operand is held by the grid's tiles.
        let d = c.matmul(&matrix(&np, 83, 45, 3, dtype));
        // A transposed operand, and shapes large enough for the blocked routine.
        let x = matrix(&np, 301, 203, 4, dtype);
        let e = x.t().matmul(&matrix(&np, 301, 151, 5, dtype));
        for (name, r) in [("a@b", &c), ("(a@b)@e", &d), ("x.T@y", &e)] {
            results.push((format!("{tag} {name}"), r.to_vec()));
        }
    }
    let traffic = np.runtime(|rt| rt.traffic());
    for (name, r) in results {
        match r {
            Ok(v) if root => println!("{name}: {} values, hash {:016x}", v.len(), hash(&v)),
            Ok(_) => {}
            Err(e) => {
                eprintln!("rank_products: {name}: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    if root {
        println!("traffic: {} {}", traffic.bytes, traffic.messages);
    }
    ExitCode::SUCCESS
}
