//! Deferred stores: a sweep that writes the interior of a grid while reading it through
//! shifted views (the fused form of a stencil's `work = ...; center[:] = work`) gives the
//! double-buffered result when the interior's stores are deferred, on any size, chunking and
//! thread count; without deferral the same kernel reads values it already overwrote.

use weft_cpu::StoreView;
use weft_ir::{DType, Privilege};

use crate::util::{Kb, compile, pool};

/// `out[i, j] = 0.2 * (g[i+1, j+1] + g[i, j+1] + g[i+2, j+1] + g[i+1, j] + g[i+1, j+2])`,
/// with `out` the interior of the padded grid `g`.
fn sweep_kernel() -> weft_cpu::CompiledKernel {
    let mut kb = Kb::new();
    let g = kb.store(DType::F64, 2, Privilege::Read);
    let out = kb.store(DType::F64, 2, Privilege::Write);
    let one = kb.i64(1);
    let two = kb.i64(2);
    let fifth = kb.f64(0.2);
    kb.parallel(out, 2, |kb, idx| {
        let (i, j) = (idx[0], idx[1]);
        let (i1, j1) = (kb.add(i, one), kb.add(j, one));
        let (i2, j2) = (kb.add(i, two), kb.add(j, two));
        let mut acc = kb.load(g, &[i1, j1]);
        for at in [[i, j1], [i2, j1], [i1, j], [i1, j2]] {
            let v = kb.load(g, &at);
            acc = kb.add(acc, v);
        }
        let v = kb.mul(fifth, acc);
        kb.store_to(out, &[i, j], v);
    });
    compile(&kb.finish("test.sweep"))
}

/// One sweep of the padded `(h+2) x (w+2)` grid, double-buffered.
fn reference(grid: &[f64], h: usize, w: usize) -> Vec<f64> {
    let at = |i: usize, j: usize| grid[i * (w + 2) + j];
    let mut out = grid.to_vec();
    for i in 0..h {
        for j in 0..w {
            let acc = at(i + 1, j + 1)
                + at(i, j + 1)
                + at(i + 2, j + 1)
                + at(i + 1, j)
                + at(i + 1, j + 2);
            out[(i + 1) * (w + 2) + j + 1] = 0.2 * acc;
        }
    }
    out
}

/// Runs the sweep in place on `grid`, with the interior's stores deferred by `halo` rows (or
/// not at all).
fn run_in_place(
    k: &weft_cpu::CompiledKernel,
    grid: &mut [f64],
    h: usize,
    w: usize,
    threads: usize,
    halo: Option<u32>,
) -> weft_cpu::Result<()> {
    let pitch = w + 2;
    let base: *mut u8 = grid.as_mut_ptr().cast();
    let whole = StoreView {
        ptr: base,
        extents: vec![h as i64 + 2, pitch as i64],
        strides: vec![pitch as i64, 1],
        origin: vec![0, 0],
    };
    let interior = StoreView {
        ptr: base.wrapping_add((pitch + 1) * 8),
        extents: vec![h as i64, w as i64],
        strides: vec![pitch as i64, 1],
        origin: vec![1, 1],
    };
    // SAFETY: both views lie inside `grid`, which outlives the call; the kernel only reads the
    // first and, with deferral, writes the second at its own indices.
    let out = unsafe { k.run_task(&[whole, interior], &[], &pool(threads), None, &[None, halo])? };
    // The rows other chunks read were handed back: write them, as the runtime does after the
    // launch's last point task.
    assert!(halo.is_some() || out.held_rows.is_empty());
    for row in &out.held_rows {
        assert_eq!((row.store, row.bytes.len()), (1, w * 8));
        let start = (row.row as usize + 1) * pitch + 1;
        for (j, b) in row.bytes.chunks_exact(8).enumerate() {
            grid[start + j] = f64::from_le_bytes(b.try_into().expect("8 bytes"));
        }
    }
    Ok(())
}

fn grid(h: usize, w: usize) -> Vec<f64> {
    (0..(h + 2) * (w + 2))
        .map(|i| ((i * 7919 + 13) % 1009) as f64 - 500.0)
        .collect()
}

#[test]
fn a_deferred_sweep_in_place_equals_the_double_buffered_one() {
    let k = sweep_kernel();
    for (h, w) in [
        (1, 1),
        (2, 3),
        (3, 300),
        (63, 5),
        (64, 5),
        (65, 300),
        (200, 1),
        (1000, 17),
        (129, 4094),
    ] {
        for threads in [1, 2] {
            for halo in [1, 3] {
                let mut g = grid(h, w);
                let want = reference(&g, h, w);
                run_in_place(&k, &mut g, h, w, threads, Some(halo)).unwrap();
                assert!(
                    g.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{h}x{w}, {threads} threads, halo {halo}"
                );
            }
        }
    }
}

#[test]
fn without_deferral_the_same_sweep_reads_what_it_overwrote() {
    let k = sweep_kernel();
    let (h, w) = (40, 30);
    let mut g = grid(h, w);
    let want = reference(&g, h, w);
    run_in_place(&k, &mut g, h, w, 1, None).unwrap();
    assert_ne!(g, want);
}

#[test]
fn a_deferred_argument_the_loop_reads_elsewhere_is_never_redirected() {
    // `out` is also read at element 0 (which stays 0): its stores cannot be deferred, so they
    // land in place, and the loads at the loop's index read the input, not a scratch buffer.
    let mut kb = Kb::new();
    let out = kb.store(DType::F64, 1, Privilege::ReadWrite);
    let zero = kb.i64(0);
    kb.parallel(out, 1, |kb, idx| {
        let v = kb.load(out, idx);
        let first = kb.load(out, &[zero]);
        let w = kb.add(v, v);
        let w = kb.add(w, first);
        kb.store_to(out, idx, w);
    });
    let k = compile(&kb.finish("test.double"));
    let mut x: Vec<f64> = (0..100).map(f64::from).collect();
    let view = StoreView::dense(x.as_mut_ptr().cast(), &[100]);
    // SAFETY: the view covers `x`.
    let out = unsafe { k.run_task(&[view], &[], &pool(2), None, &[Some(1)]) }.unwrap();
    assert!(out.held_rows.is_empty());
    assert_eq!(x, (0..100).map(|i| 2.0 * f64::from(i)).collect::<Vec<_>>());
}
