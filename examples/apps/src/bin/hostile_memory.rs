//! A hostile application for the host's tests: it allocates until something stops it.

fn main() {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        hoard.push(vec![1u8; 16 << 20]);
        std::hint::black_box(&hoard);
    }
}
