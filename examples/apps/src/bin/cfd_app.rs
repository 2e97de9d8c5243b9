//! The channel flow of CFD Python step 12 as one source built two ways: natively on the
//! `weft` crate, and as an application component on `weft-app` (which this file then calls
//! `weft`). The model is `weft-examples`' own `cfd.rs`, compiled here by path: views of the
//! fields by NumPy's basic indexing, written through with `assign`.
//!
//! `cfd_app [N [NIT [STEPS [SEED]]]]` runs `STEPS` time steps (default 10) on an `N` x `N`
//! grid (default 64) with `NIT` pressure iterations per step (default 20) from `SEED`'s
//! initial flow (default 42), reading each step's `udiff`. It writes `u.f64`, `v.f64` and
//! `p.f64` (little-endian, row-major) and each step's `udiff` to `udiff.f64` in the working
//! directory (the job's directory, for the component), and prints one JSON line.

#[cfg(target_family = "wasm")]
extern crate weft_app as weft;

#[allow(dead_code)]
#[path = "../../../src/cfd.rs"]
mod cfd;
#[path = "../../../src/seeds.rs"]
mod seeds;

use seeds::sub_seed;
use weft_example_apps::{arg, args, main_of, numeric, write_f64s};

fn run() -> Result<(), String> {
    let args = args();
    let n = arg(&args, 0, 64u64)?;
    let nit = arg(&args, 1, 20usize)?;
    let steps = arg(&args, 2, 10usize)?;
    let seed = arg(&args, 3, 42u64)?;
    let e = |e: weft::Error| e.to_string();
    let np = numeric()?;
    let prm = cfd::Params::new(n, nit);
    let flow = cfd::initial_flow(&np, &prm, seed).map_err(e)?;
    let start = std::time::Instant::now();
    let mut udiff = Vec::with_capacity(steps);
    for _ in 0..steps {
        udiff.push(cfd::step(&prm, &flow).and_then(|d| d.item()).map_err(e)?);
    }
    let fields = [("u.f64", &flow.u), ("v.f64", &flow.v), ("p.f64", &flow.p)];
    let mut values = Vec::new();
    for (name, field) in fields {
        values.push((name, field.to_vec().map_err(e)?));
    }
    let seconds = start.elapsed().as_secs_f64();
    for (name, v) in &values {
        write_f64s(name, v)?;
    }
    write_f64s("udiff.f64", &udiff)?;
    println!(
        "{{\"example\":\"cfd_app\",\"n\":{n},\"nit\":{nit},\"steps\":{steps},\"udiff\":{},\"seconds\":{seconds}}}",
        udiff.last().copied().unwrap_or(f64::NAN)
    );
    Ok(())
}

fn main() {
    main_of("cfd_app", run);
}
