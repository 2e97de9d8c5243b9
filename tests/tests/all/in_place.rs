//! Outputs that take over the memory of inputs that die with their task
//! (`weft_ir::coverage::shares_in_place`): `x = x + a * p` updates `x`'s buffer in place, with
//! the values a fresh buffer would get, and never the memory of an array still held.

use weft::{Config, Numeric};
use weft_ir::DType;

fn numeric(fusion: bool, pieces: u64) -> Numeric {
    weft_tests::numeric_with(Config {
        fusion,
        pieces,
        threads: 2,
        component_cache: None,
        ..Config::default()
    })
}

fn handed_over(np: &Numeric) -> u64 {
    np.runtime(|rt| rt.stats().exec.buffers_handed_over)
}

/// CG's update, `x = x + a * p` with `p = r + b * p`, over several iterations, each read (so
/// each flushes): the arrays equal plain Rust's, bit for bit, fused and unfused, on one and
/// three pieces, and the updates ran in the memory of the arrays they replaced.
#[test]
fn updates_take_over_dead_inputs_with_the_same_values() {
    let n = 1003;
    for (fusion, pieces) in [(true, 1), (true, 3), (false, 1), (false, 3)] {
        let np = numeric(fusion, pieces);
        let mut x = np.random_uniform(&[n], -1.0, 1.0, 1, DType::F64);
        let mut p = np.random_uniform(&[n], -1.0, 1.0, 2, DType::F64);
        let r = np.random_uniform(&[n], -1.0, 1.0, 3, DType::F64);
        let mut xs = x.to_vec().unwrap();
        let mut ps = p.to_vec().unwrap();
        let rs = r.to_vec().unwrap();
        let before = handed_over(&np);
        for it in 0..4 {
            let (a, b) = (0.25 + it as f64, 0.5 - it as f64);
            x = &x + &(&p * a);
            p = &r + &(&p * b);
            for i in 0..n as usize {
                xs[i] += ps[i] * a;
                ps[i] = rs[i] + ps[i] * b;
            }
            assert_eq!(
                x.to_vec().unwrap(),
                xs,
                "x, iteration {it}, fusion {fusion}"
            );
            assert_eq!(
                p.to_vec().unwrap(),
                ps,
                "p, iteration {it}, fusion {fusion}"
            );
        }
        assert!(
            handed_over(&np) - before >= 8,
            "every update took over a dead buffer (fusion {fusion}, {pieces} pieces): {}",
            handed_over(&np) - before
        );
    }
}

/// An input the program still holds keeps its memory and its values: the output gets a
/// buffer of its own.
#[test]
fn a_held_input_keeps_its_memory() {
    for fusion in [true, false] {
        let np = numeric(fusion, 1);
        let x = np.random_uniform(&[257], -1.0, 1.0, 4, DType::F64);
        let old = x.to_vec().unwrap();
        let before = handed_over(&np);
        let y = &x * 3.0;
        let ys = y.to_vec().unwrap();
        assert_eq!(handed_over(&np), before, "x is alive: nothing to take over");
        assert_eq!(x.to_vec().unwrap(), old);
        let want: Vec<f64> = old.iter().map(|v| v * 3.0).collect();
        assert_eq!(ys, want);
        // `y` and `z` are dropped before the window runs, so each dies with the task that
        // reads it, whose output takes its buffer.
        let z = &y + 1.0;
        drop(y);
        let w = &z * 2.0;
        drop(z);
        let ws = w.to_vec().unwrap();
        let want: Vec<f64> = want.iter().map(|v| (v + 1.0) * 2.0).collect();
        assert_eq!(ws, want);
        assert!(handed_over(&np) > before, "fusion {fusion}");
        assert_eq!(x.to_vec().unwrap(), old);
    }
}
