//! Sole and quick launches: a launch that is the whole of its task folds its float sums and
//! products into their targets itself (small ones run as quick launches, on the calling
//! thread), with the bits of the same launch whose partials the executor folds, and holds
//! nothing back; the canonical order's reference agrees with both.

use std::sync::Arc;

use weft_ir::reduction::canonical;
use weft_ir::{DType, KernelBuilder, Privilege, ReduceOp, Scalar};
use weft_runtime::{Backend, Binding, BufferId, KernelEntry, Owner};

use weft_cpu::{CpuBackend, CpuOptions};

/// Over `x` and `y` of `rank`: `z = x + y`, `d += x * y`, `p *= 1 + x / 4096` (`f64`).
fn kernel(rank: u32) -> Arc<KernelEntry> {
    let mut k = KernelBuilder::new("t.sums");
    let x = k.store(DType::F64, rank, Privilege::Read);
    let y = k.store(DType::F64, rank, Privilege::Read);
    let z = k.store(DType::F64, rank, Privilege::Write);
    let d = k.store(DType::F64, 0, Privilege::Reduce(ReduceOp::Sum));
    let p = k.store(DType::F64, 0, Privilege::Reduce(ReduceOp::Prod));
    k.body().parallel(x, |b, idx| {
        let xv = b.load(x, idx);
        let yv = b.load(y, idx);
        let s = b.add(xv, yv);
        b.store(z, idx, s);
        let m = b.mul(xv, yv);
        b.reduce(d, &[], m);
        let q = b.const_f64(4096.0);
        let one = b.const_f64(1.0);
        let f = b.div(xv, q);
        let f = b.add(one, f);
        b.reduce_with(p, ReduceOp::Prod, &[], f);
    });
    Arc::new(KernelEntry::new("t.sums", &k.finish()).expect("valid"))
}

/// Mixed magnitudes, so that another order of the sums shows in their bits.
fn value(i: usize, salt: usize) -> f64 {
    let big = if (i * 7 + salt).is_multiple_of(5) {
        1e9
    } else {
        1.0
    };
    big * (((i * 31 + salt * 17) % 97) as f64 - 48.0) / 7.0
}

fn buffer(b: &mut CpuBackend, values: &[f64]) -> BufferId {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let id = b.alloc(bytes.len().max(8) as u64).expect("a buffer");
    b.write(id, 0, &bytes).expect("writes");
    id
}

fn read(b: &mut CpuBackend, id: BufferId, n: usize) -> Vec<u64> {
    let mut bytes = vec![0u8; n * 8];
    b.read(id, 0, &mut bytes).expect("reads");
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

fn binding(buffer: BufferId, extents: &[i64]) -> Binding {
    let mut strides = vec![1i64; extents.len()];
    for d in (0..extents.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * extents[d + 1];
    }
    Binding::Buffer {
        buffer,
        offset: 0,
        extents: extents.to_vec().into(),
        strides: strides.into(),
        origin: vec![0; extents.len()].into(),
        view: extents.iter().map(|&e| e as u64).collect(),
        element_size: 8,
        deferred: None,
    }
}

/// Runs the kernel once over `extents`, a sole launch or not (then folding what it held back
/// as the executor does); returns `z`'s, `d`'s and `p`'s bits, and how many partials the
/// launch held back.
fn run(b: &mut CpuBackend, extents: &[i64], sole: bool) -> (Vec<u64>, u64, u64, usize) {
    let k = kernel(extents.len() as u32);
    b.prepare(&k, Owner(0)).expect("compiles");
    let n: usize = extents.iter().map(|&e| e as usize).product();
    let xs: Vec<f64> = (0..n).map(|i| value(i, 1)).collect();
    let ys: Vec<f64> = (0..n).map(|i| value(i, 2)).collect();
    let (x, y, z) = (buffer(b, &xs), buffer(b, &ys), buffer(b, &vec![0.0; n]));
    let (d, p) = (buffer(b, &[0.5]), buffer(b, &[-1.5]));
    let bindings = [
        binding(x, extents),
        binding(y, extents),
        binding(z, extents),
        binding(d, &[]),
        binding(p, &[]),
    ];
    b.set_sole_launch(sole);
    b.launch(k.id(), &bindings, &[]).expect("runs");
    let held = b.take_reductions().expect("takes");
    let count = held.len();
    weft_runtime::executor::fold_reductions(b, k.name(), &bindings, held).expect("folds");
    let out = (read(b, z, n), read(b, d, 1)[0], read(b, p, 1)[0], count);
    for id in [x, y, z, d, p] {
        b.free(id);
    }
    out
}

/// The canonical sum and product of the kernel over `extents`, folded into 0.5 and -1.5.
fn reference(extents: &[i64]) -> (u64, u64) {
    let ext: Vec<u64> = extents.iter().map(|&e| e as u64).collect();
    let at = |p: &[u64]| {
        p.iter()
            .zip(&ext)
            .fold(0usize, |a, (&c, &e)| a * e as usize + c as usize)
    };
    let f = |op: ReduceOp, g: &dyn Fn(usize) -> f64| match canonical(op, DType::F64, &ext, &|p| {
        Scalar::F64(g(at(p)))
    }) {
        Some(Scalar::F64(v)) => v,
        other => panic!("no canonical result: {other:?}"),
    };
    let d = 0.5 + f(ReduceOp::Sum, &|i| value(i, 1) * value(i, 2));
    let p = -1.5 * f(ReduceOp::Prod, &|i| 1.0 + value(i, 1) / 4096.0);
    (d.to_bits(), p.to_bits())
}

#[test]
fn a_sole_launch_folds_its_reductions_with_the_executors_bits() {
    let mut b = CpuBackend::with_options(&CpuOptions {
        threads: 2,
        ..CpuOptions::default()
    })
    .expect("a CPU back end");
    // Quick launches (small), one around a group of eight, rank 2 and 3; and launches past a
    // quick launch's points, which run the general way and still fold themselves.
    let shapes: [&[i64]; 11] = [
        &[1],
        &[7],
        &[8],
        &[9],
        &[1000],
        &[3, 37],
        &[17, 9, 5],
        &[16 * 1024],
        &[16 * 1024 + 3],
        &[100_003],
        &[300, 301],
    ];
    for extents in shapes {
        let (z_sole, d_sole, p_sole, held_sole) = run(&mut b, extents, true);
        let (z, d, p, held) = run(&mut b, extents, false);
        assert_eq!(
            held_sole, 0,
            "a sole launch over {extents:?} held partials back"
        );
        assert_eq!(
            held, 2,
            "a launch over {extents:?} that is not sole holds its partials"
        );
        assert_eq!(z_sole, z, "z over {extents:?}");
        assert_eq!((d_sole, p_sole), (d, p), "d and p over {extents:?}");
        assert_eq!(
            (d, p),
            reference(extents),
            "the canonical order over {extents:?}"
        );
    }
}
