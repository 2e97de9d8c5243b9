//! An application that fills its directory: it writes 1 MiB blocks to `fill.bin`, 256 of
//! them (a bound, so that a host without the defense is not filled for real), then spins
//! until the host stops it; a write that fails ends it with status 3.

use std::io::Write;

fn main() {
    let mut file = match std::fs::File::create("fill.bin") {
        Ok(f) => f,
        Err(_) => std::process::exit(2),
    };
    let block = vec![7u8; 1 << 20];
    for _ in 0..256 {
        if file.write_all(&block).is_err() {
            std::process::exit(3);
        }
    }
    let mut spins = 0u64;
    loop {
        spins = std::hint::black_box(spins.wrapping_add(1));
    }
}
