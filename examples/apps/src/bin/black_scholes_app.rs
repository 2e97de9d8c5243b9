//! Black-Scholes as one source built two ways: natively on the `weft` crate, and as an
//! application component on `weft-app` (which this file then calls `weft`). The model is
//! `weft-examples`' own `black_scholes.rs`, compiled here by path, with the `erf` form.
//!
//! `black_scholes_app [N [SEED]]` prices `N` options (default 2^20) drawn from `SEED`'s
//! streams (default 42), writes the call and put prices to `call.f64` and `put.f64`
//! (little-endian) in the working directory (the job's directory, for the component), and
//! prints one JSON line.

#[cfg(target_family = "wasm")]
extern crate weft_app as weft;

// The model's polynomial form and its names serve the native examples, not this program.
#[allow(dead_code)]
#[path = "../../../src/black_scholes.rs"]
mod black_scholes;
#[path = "../../../src/seeds.rs"]
mod seeds;

use seeds::sub_seed;
use weft_example_apps::{arg, args, main_of, numeric, write_f64s};

fn run() -> Result<(), String> {
    let args = args();
    let (n, seed) = (arg(&args, 0, 1u64 << 20)?, arg(&args, 1, 42u64)?);
    let np = numeric()?;
    let inputs = black_scholes::inputs(&np, n, seed);
    let start = std::time::Instant::now();
    let (call, put) = inputs.price(black_scholes::Cnd::Erf);
    let call = call.to_vec().map_err(|e| e.to_string())?;
    let put = put.to_vec().map_err(|e| e.to_string())?;
    let seconds = start.elapsed().as_secs_f64();
    write_f64s("call.f64", &call)?;
    write_f64s("put.f64", &put)?;
    println!(
        "{{\"example\":\"black_scholes_app\",\"n\":{n},\"seconds\":{seconds},\"call_sum\":{},\"put_sum\":{}}}",
        call.iter().sum::<f64>(),
        put.iter().sum::<f64>()
    );
    Ok(())
}

fn main() {
    main_of("black_scholes_app", run);
}
