//! A hostile application for the host's tests: a flood of tiny tasks that never ends (each
//! step adds to an array, and every so often reads one element back so the window runs).

use weft_app::{DType, Numeric};

fn main() {
    let np = Numeric::new();
    let mut x = np.zeros(&[4], DType::F64);
    let mut step: u64 = 0;
    loop {
        x = &x + 1.0;
        step += 1;
        if step.is_multiple_of(1024) && x.sum().item().is_err() {
            std::process::exit(3);
        }
    }
}
