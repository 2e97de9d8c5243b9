//! Black-Scholes (the `erf` form of `weft-examples`' `black_scholes`) as an application
//! component: `black_scholes_app N SEED` prices `N` options drawn from `SEED`'s streams and
//! writes the call and put prices to `call.f64` and `put.f64` (little-endian) in the job's
//! directory, then prints one JSON line.

use weft_app::{Array, DType, Numeric};

const S_RANGE: (f64, f64) = (5.0, 30.0);
const X_RANGE: (f64, f64) = (1.0, 100.0);
const T_RANGE: (f64, f64) = (0.25, 10.0);
const RISK_FREE: f64 = 0.02;
const VOLATILITY: f64 = 0.30;

/// `weft-examples`' `sub_seed`: stream `stream` of `seed` (SplitMix64's finalizer).
fn sub_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed
        .wrapping_add(stream.wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn cnd(d: &Array) -> Array {
    0.5 + 0.5 * (d * std::f64::consts::FRAC_1_SQRT_2).erf()
}

fn price(s: &Array, x: &Array, t: &Array, r: &Array, v: &Array) -> (Array, Array) {
    let sqrt_t = t.sqrt();
    let d1 = ((s / x).log() + (r + 0.5 * v * v) * t) / (v * &sqrt_t);
    let d2 = &d1 - v * &sqrt_t;
    let cnd_d1 = cnd(&d1);
    let cnd_d2 = cnd(&d2);
    let t3 = (-r * t).exp();
    let call = s * &cnd_d1 - x * &t3 * &cnd_d2;
    let put = x * &t3 * (1.0 - &cnd_d2) - s * (1.0 - &cnd_d1);
    (call, put)
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parse = |i: usize, default: u64| -> Result<u64, String> {
        args.get(i).map_or(Ok(default), |a| {
            a.parse().map_err(|e| format!("argument {a:?}: {e}"))
        })
    };
    let (n, seed) = (parse(0, 1 << 20)?, parse(1, 42)?);
    let np = Numeric::new();
    let uniform = |(low, high): (f64, f64), stream| {
        np.random_uniform(&[n], low, high, sub_seed(seed, stream), DType::F64)
    };
    let (s, x, t) = (
        uniform(S_RANGE, 0),
        uniform(X_RANGE, 1),
        uniform(T_RANGE, 2),
    );
    let r = np.full(&[], RISK_FREE, DType::F64);
    let v = np.full(&[], VOLATILITY, DType::F64);
    let start = std::time::Instant::now();
    let (call, put) = price(&s, &x, &t, &r, &v);
    let (call, put) = (
        call.to_vec().map_err(|e| e.to_string())?,
        put.to_vec().map_err(|e| e.to_string())?,
    );
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
