//! An application that asks the host to write and read files outside its job's directory
//! (`tofile` and `fromfile` with names that are not plain file names) and prints each
//! answer, one line each; `host/apps/tests/apps.rs` requires every one refused and nothing
//! written outside.

use weft_app::{DType, Numeric};

fn main() {
    let np = Numeric::new();
    let a = np.ones(&[4], DType::F64);
    for name in ["../escaped.f64", "/tmp/weft-escaped.f64", "sub/x.f64", ".."] {
        match a.tofile(name) {
            Ok(()) => println!("tofile {name}: written"),
            Err(e) => println!("tofile {name}: {e}"),
        }
    }
    for name in ["../../etc/hostname", "/etc/hostname"] {
        match np.fromfile(name, DType::U8) {
            Ok(_) => println!("fromfile {name}: read"),
            Err(e) => println!("fromfile {name}: {e}"),
        }
    }
}
