//! Every numeric function the host forwards to the plugin with typed arguments (`weft-apps`'
//! `typed` module), with arrays and with scalars on either side, an array written to a file
//! and read back (`tofile`, `fromfile`: the host's `files` interface), and one call the
//! plugin refuses. One source built two ways: natively on the `weft` crate, and as an application
//! component on `weft-app` (which this file then calls `weft`).
//!
//! Writes one line per result to `lines.txt` (`name: values`, as Rust's `{:?}` prints a
//! `Vec<f64>`) and prints one JSON line with their count. `tests/both_ways.rs` requires the
//! same bytes both ways.

#[cfg(target_family = "wasm")]
extern crate weft_app as weft;

use weft::{Array, DType};
use weft_example_apps::{main_of, numeric};

/// `name: values`, or `name: refused` for an error whose message names both shapes that do
/// not broadcast (the message itself says where the call was made, which differs between
/// the builds), or the message.
fn line(out: &mut String, name: &str, a: &Array) {
    let text = match a.to_vec() {
        Ok(v) => format!("{v:?}"),
        Err(e) => {
            let e = e.to_string();
            if e.contains("(6,)") && e.contains("(3,)") {
                "refused".to_string()
            } else {
                format!("error: {e}")
            }
        }
    };
    out.push_str(&format!("{name}: {text}\n"));
}

fn run() -> Result<(), String> {
    let np = numeric()?;
    let mut out = String::new();
    let x = np.arange(1.0, 7.0, 1.0, DType::F64);
    let y = np.linspace(-1.0, 1.0, 6, DType::F64);
    line(&mut out, "add", &(&x + &y));
    line(&mut out, "sub_scalar", &(&x - 0.25));
    line(&mut out, "rsub_scalar", &(2.0 - &x));
    line(&mut out, "pow_int", &x.pow(2i64));
    line(&mut out, "maximum", &x.maximum(&y));
    line(&mut out, "sqrt", &x.sqrt());
    line(&mut out, "exp", &y.exp());
    line(&mut out, "erf", &y.erf());
    line(&mut out, "select", &y.gt(0.0).select(&x, -1.0));
    line(&mut out, "select_scalars", &y.lt(0.0).select(1.0, 2.0));
    let z = x.copy();
    z.assign(&y).map_err(|e| e.to_string())?;
    line(&mut out, "assign", &z);
    z.assign(4.5).map_err(|e| e.to_string())?;
    line(&mut out, "assign_scalar", &z);
    line(&mut out, "copy", &x.copy());
    line(&mut out, "sum", &x.sum());
    line(&mut out, "max", &y.max());
    line(&mut out, "astype", &(&y * 2.5).astype(DType::I32));
    line(&mut out, "dot", &x.dot(&y));
    line(&mut out, "norm", &y.norm());
    let m = np.arange(0.0, 6.0, 1.0, DType::F64).reshape(&[2, 3]);
    let v = np.arange(1.0, 4.0, 1.0, DType::F64);
    line(&mut out, "matvec", &m.matvec(&v));
    let k = np.arange(0.0, 6.0, 1.0, DType::F64).reshape(&[3, 2]);
    line(&mut out, "matmul", &m.matmul(&k));
    // Written by the host and read back (`tofile`, `fromfile`).
    (&x * 0.5).tofile("half.f64").map_err(|e| e.to_string())?;
    let back = np
        .fromfile("half.f64", DType::F64)
        .map_err(|e| e.to_string())?;
    line(&mut out, "fromfile", &back);
    // Refused by the plugin: shapes (6,) and (3,) do not broadcast.
    line(&mut out, "refused", &(&x + &v));
    std::fs::write("lines.txt", &out).map_err(|e| format!("lines.txt: {e}"))?;
    println!(
        "{{\"example\":\"typed_calls\",\"lines\":{}}}",
        out.lines().count()
    );
    Ok(())
}

fn main() {
    main_of("typed_calls", run);
}
