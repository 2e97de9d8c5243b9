//! Black-Scholes as one source built two ways: natively on the `weft` crate, and as an
//! application component on `weft-app` (which this file then calls `weft`). The model is
//! `weft-examples`' own `black_scholes.rs`, compiled here by path, with the `erf` form.
//!
//! `black_scholes_app [N [SEED [MODE]]]` prices `N` options (default 2^20) drawn from
//! `SEED`'s streams (default 42), writes the call and put prices to `call.f64` and `put.f64`
//! (little-endian) in the working directory (the job's directory, for the component), and
//! prints one JSON line with the time from pricing to both files written and both sums
//! known. `MODE` is how the prices leave the host: `files` (the default) writes them with
//! `tofile` and sums them with `sum` (for a component, the host writes the files, and the
//! vectors never enter its memory); `vectors` reads both back with `to_vec` (into the
//! component's memory) and writes and sums them there.

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
    let mode = arg(&args, 2, "files".to_string())?;
    let np = numeric()?;
    let inputs = black_scholes::inputs(&np, n, seed);
    let text = |e: weft::Error| e.to_string();
    let start = std::time::Instant::now();
    let (call, put) = inputs.price(black_scholes::Cnd::Erf);
    let (call_sum, put_sum) = match mode.as_str() {
        "files" => {
            call.tofile("call.f64").map_err(text)?;
            put.tofile("put.f64").map_err(text)?;
            (
                call.sum().item().map_err(text)?,
                put.sum().item().map_err(text)?,
            )
        }
        "vectors" => {
            let call = call.to_vec().map_err(text)?;
            let put = put.to_vec().map_err(text)?;
            write_f64s("call.f64", &call)?;
            write_f64s("put.f64", &put)?;
            (call.iter().sum::<f64>(), put.iter().sum::<f64>())
        }
        other => return Err(format!("MODE is `files` or `vectors`, not `{other}`")),
    };
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "{{\"example\":\"black_scholes_app\",\"n\":{n},\"mode\":\"{mode}\",\"seconds\":{seconds},\"call_sum\":{call_sum},\"put_sum\":{put_sum}}}"
    );
    Ok(())
}

fn main() {
    main_of("black_scholes_app", run);
}
