//! The PTX simulator's speed, as one JSON line: an emitted axpy over 2^22 points, and a
//! dot product over 2^20 points through the GPU back end on the simulated GPU (its entry,
//! the shared-memory tree's passes with their barriers, and the fold). A benchmark of the
//! test device, not of any GPU: `cargo run --release -p weft-ptx --example sim_speed`.

use std::sync::Arc;
use std::time::Instant;

use weft_ptx::PtxBackend;
use weft_runtime::{Backend, Binding, BufferId, KernelEntry, Owner};

const AXPY: &str = "kernel @bench.axpy(%x: store<f64, 1, read>, %y: store<f64, 1, readwrite>, \
                    %a: f64) {\n  %av = param %a\n  parallel %y (%i) {\n    \
                    %xi = load %x[%i]\n    %yi = load %y[%i]\n    %p = mul %av, %xi\n    \
                    %s = add %p, %yi\n    store %y[%i], %s\n  }\n}\n";

const DOT: &str = "kernel @bench.dot(%x: store<f64, 1, read>, %y: store<f64, 1, read>, \
                   %s: store<f64, 0, reduce(sum)>) {\n  parallel %x (%i) {\n    \
                   %a = load %x[%i]\n    %b = load %y[%i]\n    %m = mul %a, %b\n    \
                   reduce sum %s[], %m\n  }\n}\n";

fn entry(text: &str) -> Result<Arc<KernelEntry>, Box<dyn std::error::Error>> {
    let kernel = weft_ir::text::parse(text)?;
    Ok(Arc::new(KernelEntry::new(&kernel.name.clone(), &kernel)?))
}

fn vector(buffer: BufferId, n: u64) -> Binding {
    Binding::Buffer {
        buffer,
        offset: 0,
        extents: vec![n as i64].into(),
        strides: vec![1].into(),
        origin: vec![0].into(),
        view: vec![n].into(),
        element_size: 8,
        deferred: None,
    }
}

/// Seconds to run `f`, median of three.
fn median_of_three(
    mut f: impl FnMut() -> Result<(), Box<dyn std::error::Error>>,
) -> Result<f64, Box<dyn std::error::Error>> {
    let mut t = Vec::new();
    for _ in 0..3 {
        let start = Instant::now();
        f()?;
        t.push(start.elapsed().as_secs_f64());
    }
    t.sort_by(f64::total_cmp);
    Ok(t[1])
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut backend = PtxBackend::simulated();
    backend.set_sole_launch(true);
    let (axpy, dot) = (entry(AXPY)?, entry(DOT)?);
    backend.prepare(&axpy, Owner::RUNTIME)?;
    backend.prepare(&dot, Owner::RUNTIME)?;
    let n_axpy = 1u64 << 22;
    let x = backend.alloc(8 * n_axpy)?;
    let y = backend.alloc(8 * n_axpy)?;
    let axpy_s = median_of_three(|| {
        backend.launch(
            axpy.id(),
            &[vector(x, n_axpy), vector(y, n_axpy)],
            &[weft_ir::Scalar::F64(0.5)],
        )?;
        Ok(backend.synchronize()?)
    })?;
    let n_dot = 1u64 << 20;
    let s = backend.alloc(8)?;
    let scalar = Binding::Buffer {
        buffer: s,
        offset: 0,
        extents: vec![].into(),
        strides: vec![].into(),
        origin: vec![].into(),
        view: vec![].into(),
        element_size: 8,
        deferred: None,
    };
    let dot_s = median_of_three(|| {
        backend.launch(
            dot.id(),
            &[vector(x, n_dot), vector(y, n_dot), scalar.clone()],
            &[],
        )?;
        Ok(backend.synchronize()?)
    })?;
    println!(
        "{{\"example\":\"sim_speed\",\"axpy_points\":{n_axpy},\"axpy_seconds\":{axpy_s},\
         \"axpy_points_per_second\":{},\"dot_points\":{n_dot},\"dot_seconds\":{dot_s},\
         \"dot_points_per_second\":{}}}",
        n_axpy as f64 / axpy_s,
        n_dot as f64 / dot_s
    );
    Ok(())
}
