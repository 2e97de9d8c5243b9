//! The bit-exactness programs: those of `tests/tests/all/gpu_bits.rs` (a dot product, a sum,
//! Black-Scholes, the stencil, CG, a logistic-regression step), each a function of the
//! device that returns the bits of its results. `bits-one` runs one of them and prints the
//! bits; `bits` compares the CPU's with the device's.

use serde_json::{Map, Value, json};
use weft::{Array, Config, Device, Numeric, Runtime, Sparse};
use weft_examples::{AppError, black_scholes, krylov, logreg, stencil};
use weft_ir::DType;

use crate::cli::BitsOneArgs;

/// The programs, by name, in the order `bits` runs them.
pub const NAMES: &[&str] = &["dot", "sum", "black-scholes", "stencil", "cg", "logreg"];

/// One named result's bits.
pub type Output = (String, Vec<u64>);

/// The numeric and sparse plugins on a runtime on `device`.
fn plugins(device: Device, threads: usize) -> weft::Result<(Numeric, Sparse)> {
    let config = Config {
        device,
        threads,
        ..Config::from_env()
    };
    let np = Numeric::new(Runtime::new(config)?, weft_plugin_artifacts::NUMERIC)?;
    let sp = Sparse::new(&np, weft_plugin_artifacts::SPARSE)?;
    Ok((np, sp))
}

fn bits(a: &Array) -> weft::Result<Vec<u64>> {
    Ok(a.to_vec()?.iter().map(|v| v.to_bits()).collect())
}

/// Runs program `name` (the sizes of `gpu_bits.rs`, or smaller with `small`).
pub fn run(name: &str, np: &Numeric, sp: &Sparse, small: bool) -> weft::Result<Vec<Output>> {
    let pick = |full: u64, little: u64| if small { little } else { full };
    let vectors = || {
        let n = pick(10_001, 2_001);
        (
            np.random_uniform(&[n], -1.0, 1.0, 7, DType::F64),
            np.random_uniform(&[n], -1.0, 1.0, 8, DType::F64),
        )
    };
    Ok(match name {
        "dot" => {
            let (x, y) = vectors();
            vec![("dot".into(), bits(&x.dot(&y))?)]
        }
        "sum" => {
            let (x, y) = vectors();
            vec![("sum".into(), bits(&(&x * &y).sum())?)]
        }
        "black-scholes" => {
            let inputs = black_scholes::inputs(np, pick(5000, 700), 1);
            let (call, put) = inputs.price(black_scholes::Cnd::Erf);
            vec![
                ("black-scholes call".into(), bits(&call)?),
                ("black-scholes put".into(), bits(&put)?),
            ]
        }
        "stencil" => {
            let grid = stencil::initial_grid(np, pick(66, 18), 2)?;
            stencil::run(&grid, 4)?;
            vec![("stencil".into(), bits(&grid)?)]
        }
        "cg" => {
            let g = pick(20, 8);
            let m = sp.poisson2d(g, DType::F64, DType::I32)?;
            let rhs = np.ones(&[g * g], DType::F64);
            let cg = krylov::cg(&m, &rhs, 1e-12, 8)?;
            vec![
                ("cg x".into(), bits(&cg.x)?),
                (
                    "cg residuals".into(),
                    cg.residuals.iter().map(|r| r.to_bits()).collect(),
                ),
            ]
        }
        "logreg" => {
            let n = pick(5000, 600);
            let p = logreg::problem(np, n, 4, 5);
            let w = logreg::step(&p, &np.zeros(&[4], DType::F64), 0.1, n);
            vec![("logreg step".into(), bits(&w)?)]
        }
        other => {
            return Err(weft::Error::Usage(format!("no program `{other}`")));
        }
    })
}

/// `bits-one`: one program on one device; `outputs` holds each result's bits.
pub fn run_one(a: &BitsOneArgs, out: &mut Map<String, Value>) -> Result<(), AppError> {
    out.insert("program".into(), a.program.as_str().into());
    let (np, sp) = plugins(a.common.device, a.common.threads)?;
    let outputs = run(&a.program, &np, &sp, a.common.small)?;
    let outputs: Vec<Value> = outputs
        .into_iter()
        .map(|(name, bits)| json!({"name": name, "bits": bits}))
        .collect();
    out.insert("outputs".into(), Value::Array(outputs));
    Ok(())
}
