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

/// The numeric plugin: the host's, in a component; a fresh runtime's, natively.
fn numeric() -> Result<weft::Numeric, String> {
    #[cfg(target_family = "wasm")]
    {
        Ok(weft::Numeric::new())
    }
    #[cfg(not(target_family = "wasm"))]
    {
        let rt = weft::Runtime::new(weft::Config::from_env()).map_err(|e| e.to_string())?;
        weft::Numeric::new(rt, weft_plugin_artifacts::NUMERIC).map_err(|e| e.to_string())
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parse = |i: usize, default: u64| -> Result<u64, String> {
        args.get(i).map_or(Ok(default), |a| {
            a.parse().map_err(|e| format!("argument {a:?}: {e}"))
        })
    };
    let (n, seed) = (parse(0, 1 << 20)?, parse(1, 42)?);
    let np = numeric()?;
    let inputs = black_scholes::inputs(&np, n, seed);
    let start = std::time::Instant::now();
    let (call, put) = inputs.price(black_scholes::Cnd::Erf);
    let call = call.to_vec().map_err(|e| e.to_string())?;
    let put = put.to_vec().map_err(|e| e.to_string())?;
    let seconds = start.elapsed().as_secs_f64();
    for (name, values) in [("call.f64", &call), ("put.f64", &put)] {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(name, bytes).map_err(|e| format!("cannot write {name}: {e}"))?;
    }
    println!(
        "{{\"example\":\"black_scholes_app\",\"n\":{n},\"seconds\":{seconds},\"call_sum\":{},\"put_sum\":{}}}",
        call.iter().sum::<f64>(),
        put.iter().sum::<f64>()
    );
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("black_scholes_app: {e}");
        std::process::exit(1);
    }
}
