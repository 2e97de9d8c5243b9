//! The same calls again and again, as time steps make them: `x = x * 0.5 + 1` on eight
//! elements, 100 times; prints the sum. The host replays the repeated calls from recordings.

use weft_app::{DType, Numeric};

fn main() {
    let np = Numeric::new();
    let mut x = np.arange(0.0, 8.0, 1.0, DType::F64);
    for _ in 0..100 {
        x = &x * 0.5 + 1.0;
    }
    match x.sum().item() {
        Ok(total) => println!("{total:?}"),
        Err(e) => {
            eprintln!("replay_loop: {e}");
            std::process::exit(1);
        }
    }
}
