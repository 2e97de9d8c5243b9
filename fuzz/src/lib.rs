//! Coverage-guided fuzz targets for Weft (libFuzzer, through `libfuzzer-sys`), and the checks
//! they share. `scripts/fuzz` builds the targets with coverage instrumentation and runs each
//! over its committed corpus (`fuzz/corpus/<target>`).
//!
//! - `ir_text`: any text through the IR's parser, the validator, math lowering and the CPU
//!   compiler (with Cranelift's verifier on: the targets are built with debug assertions).
//! - `npy`, `matrix_market`: any bytes through the readers.
//! - `partition`: tilings with any tile, offset and projection, against brute force.
//! - `runtime_ops`: a state machine of runtime operations on two cores, fused and compiled
//!   (buffers between guard pages) against unfused and interpreted ([`runtime_ops`]).
//! - `kernel_exec`: kernels built from the input, valid by construction, compiled (buffers
//!   between guard pages) against interpreted ([`kernel_exec`]).
//! - `kernel_write`: kernels that store, reduce and load at computed indices over views of
//!   rank 1 to 4 of every element type, with every kind of partition, compiled on every SIMD
//!   path this CPU has (buffers between guard pages) against interpreted ([`kernel_write`]).
//! - `host_shapes`: the core operations behind every host import of a plugin, with shapes,
//!   steps, tiles and launches at the integer limits ([`host_shapes`]).
//!
//! None may panic, and every refusal must be an error.

#![deny(missing_docs)]

mod bytes;
mod host_shapes;
mod kernel_exec;
mod kernel_write;
mod runtime_ops;

pub use host_shapes::host_shapes;
pub use kernel_exec::kernel_exec;
pub use kernel_write::{WriteOutcome, kernel_write, kernel_write_text};
pub use runtime_ops::runtime_ops;

use weft_runtime::{Partition, RootPartition, Tiling, ViewMap};

/// A CPU back end of one worker whose buffers sit between guard pages and are never reused,
/// so that an access outside a buffer stops the process (`None` if it cannot start).
fn guarded_backend() -> Option<weft_cpu::CpuBackend> {
    weft_cpu::CpuBackend::with_options(&weft_cpu::CpuOptions {
        threads: 1,
        pool_bytes: 0,
        guard_pages: true,
        ..weft_cpu::CpuOptions::default()
    })
    .ok()
}

/// Runs the IR front door on `text`: parse, validate, lower math, compile. Errors are fine;
/// panics are not.
pub fn ir_text(text: &str) {
    let Ok(kernel) = weft_ir::text::parse(text) else {
        return;
    };
    if weft_ir::validate(&kernel).is_err() {
        return;
    }
    let lowered = weft_ir::passes::math::lower_math(&kernel);
    // The round trip through the flat form keeps a valid kernel valid.
    let flat = weft_ir::flat::to_flat(&lowered);
    let back = weft_ir::flat::from_flat(&flat).expect("a valid kernel's flat form decodes");
    weft_ir::validate(&back).expect("a valid kernel's flat form stays valid");
    if let Ok(mut compiler) = weft_cpu::Compiler::new() {
        // A compile error is an answer; a panic or a verifier failure is a bug.
        let _ = compiler.compile(&back);
    }
}

/// Reads `bytes` as a `.npy` file.
pub fn npy(bytes: &[u8]) {
    if let Ok(npy) = weft_io::npy::Npy::from_bytes(bytes)
        && let Ok(written) = npy.to_bytes()
    {
        // What parsed and was written back parses, and writes the same bytes again.
        let again = weft_io::npy::Npy::from_bytes(&written).expect("written files parse");
        assert_eq!(again.to_bytes().ok(), Some(written));
    }
}

/// Reads `bytes` as a Matrix Market file.
pub fn matrix_market(bytes: &[u8]) {
    if let Ok(text) = std::str::from_utf8(bytes) {
        let _ = weft_io::matrix_market::parse(text);
    }
}

/// Checks the tile that a point of a one-dimensional launch sees, for a tiling decoded from
/// `bytes`, against a brute-force walk of the store's elements in exact arithmetic.
pub fn partition(bytes: &[u8]) {
    let word = |i: usize| {
        let mut w = [0u8; 8];
        for (k, b) in w.iter_mut().enumerate() {
            *b = bytes.get(i * 8 + k).copied().unwrap_or(0);
        }
        u64::from_le_bytes(w)
    };
    let extent = word(0) % 64;
    let tile = word(1);
    let offset = word(2) as i64;
    let point = word(3);
    let projected = word(4) % 2 == 0;
    let tiling = Tiling {
        tile: weft_runtime::smallvec::smallvec![tile],
        offset: weft_runtime::smallvec::smallvec![offset],
        projection: weft_runtime::smallvec::smallvec![projected.then_some(0)],
        skew: None,
    };
    let view = ViewMap::whole(&[extent]);
    let p = RootPartition::fold(&Partition::Tiling(tiling), &view);
    let rect = p.sub_rect(&[point]);
    let step = if projected { i128::from(point) } else { 0 };
    // `tile * step` is below 2^128 and not negative: past i128, the tile starts past any
    // store.
    let inside: Vec<u64> = match i128::from(tile)
        .checked_mul(step)
        .and_then(|s| s.checked_add(i128::from(offset)))
    {
        None => Vec::new(),
        Some(start) => {
            let end = start.saturating_add(i128::from(tile));
            (0..extent)
                .filter(|&e| (start..end).contains(&i128::from(e)))
                .collect()
        }
    };
    let (lo, n) = (rect.origin[0], rect.extent[0]);
    assert_eq!(
        (lo..lo + n).collect::<Vec<u64>>(),
        inside,
        "tile {tile}, offset {offset}, point {point}, extent {extent}"
    );
}
