//! The PTX simulator ([`weft_ptx::sim`]), one job per file: instruction semantics against
//! Rust ([`semantics`]), global memory and the sticky error ([`memory`]), loading and
//! launching modules, the emitter's own run against the IR's reference interpreter
//! ([`modules`]), and shared memory and barriers ([`shared`]).

#![allow(clippy::unwrap_used)]

mod memory;
mod modules;
mod semantics;
mod shared;

use weft_ptx::device::{Device, Grid};
use weft_ptx::sim::{SimDevice, SimFunction};

const HEADER: &str = ".version 7.8\n.target sm_80\n.address_size 64\n";

fn grid(blocks: u32, threads: u32) -> Grid {
    Grid {
        blocks: [blocks, 1, 1],
        threads: [threads, 1, 1],
    }
}

fn load(dev: &mut SimDevice, ptx: &str, entry: &str) -> SimFunction {
    let m = dev.load("test", ptx, &[entry.to_string()]);
    m.unwrap_or_else(|e| panic!("{e}\n{ptx}"))
        .functions
        .remove(0)
}

/// A small deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

#[rustfmt::skip]
const INT_EDGES: &[u64] = &[
    0, 1, 2, 3, 7, 31, 32, 33, 63, 64, 65, 0x7fff, 0x8000, 0xffff, 0x7fff_ffff, 0x8000_0000,
    0xffff_fffe, 0xffff_ffff, 0x1_0000_0000, 0x7fff_ffff_ffff_ffff, 0x8000_0000_0000_0000,
    0xffff_ffff_ffff_fffe, u64::MAX, 0xdead_beef_1234_5678,
];

#[rustfmt::skip]
const F64_EDGES: &[f64] = &[
    0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, -2.5, 0.49999999999999994, 3.7, -3.7, 1e10, -1e10,
    2147483647.5, 2147483648.0, -2147483648.5, 4294967295.7, 4294967296.0, 9.3e18, 1.8e19,
    -9.3e18, 1e300, -1e300, f64::MAX, f64::MIN_POSITIVE, 5e-324, -5e-324, 1e-310, f64::INFINITY,
    f64::NEG_INFINITY, f64::NAN, 3.4028235677973366e38, 1.401298464324817e-45, 0.1, 1.0 / 3.0,
];

fn floats() -> Vec<f64> {
    let mut out = F64_EDGES.to_vec();
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..300 {
        let mag = (r.next() % 80) as i32 - 40;
        let x = (r.next() >> 11) as f64 / (1u64 << 53) as f64 * 2f64.powi(mag);
        out.push(if r.next().is_multiple_of(2) { x } else { -x });
    }
    out
}
