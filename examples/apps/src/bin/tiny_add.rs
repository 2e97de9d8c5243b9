//! The smallest job: adds two 8-element arrays and prints the sum of the result.

use weft_app::{DType, Numeric};

fn main() {
    let np = Numeric::new();
    let a = np.arange(0.0, 8.0, 1.0, DType::F64);
    let b = np.full(&[8], 0.5, DType::F64);
    match (&a + &b).sum().item() {
        Ok(total) => println!("{total}"),
        Err(e) => {
            eprintln!("tiny_add: {e}");
            std::process::exit(1);
        }
    }
}
