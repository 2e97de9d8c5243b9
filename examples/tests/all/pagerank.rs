//! The `pagerank` example against a plain-Rust power iteration over the same triplets (bit
//! for bit: each row summed in order, as SciPy sums it) and against SciPy's program
//! (`examples/numpy/pagerank.py`, which the example runs on its own `--out` files).

use serde_json::Value;
use weft_examples::pagerank;
use weft_examples::sparse_reference::Csr;

use crate::program::{load, run_example, temp_dir};

const BIN: &str = env!("CARGO_BIN_EXE_pagerank");

#[test]
fn pagerank_has_the_reference_bits_and_scipys() {
    let dir = temp_dir("pagerank", "small");
    let (n, degree, seed) = (3001u64, 4u64, 5u64);
    let report: Value = run_example(
        BIN,
        &dir,
        &[
            "--n", "3001", "--degree", "4", "--seed", "5", "--iters", "4", "--warmup", "2",
        ],
    );
    assert_eq!(report["steps"], 6, "{report}");
    let (row, col, val) = pagerank::graph(n, degree, seed);
    let usize_of = |v: &[i64]| v.iter().map(|&x| x as usize).collect::<Vec<usize>>();
    let m = Csr::from_coo(
        n as usize,
        n as usize,
        &usize_of(&row),
        &usize_of(&col),
        &val,
    )
    .expect("valid triplets");
    let want = pagerank::reference(&m.indptr, &m.indices, &m.data, 6);
    let got = load(&dir, "rank.npy");
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<u64>>();
    assert_eq!(
        bits(&got),
        bits(&want),
        "the ranks against the plain-Rust steps"
    );
    let total: f64 = got.iter().sum();
    assert!((total - 1.0).abs() < 1e-12, "the ranks sum to {total}");
    assert!(
        report["scipy_unavailable"].is_null(),
        "this test needs python3 with SciPy (scripts/test installs it): {report}"
    );
    assert_eq!(report["ranks_equal_scipy"], true, "{report}");
    assert!(report["speedup_vs_scipy"].as_f64().is_some_and(|s| s > 0.0));
}
