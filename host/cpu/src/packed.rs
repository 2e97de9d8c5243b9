//! Small strided views packed before a launch: a read-only view whose innermost elements are
//! not adjacent (a column `a[:, j]`, a transposed row `x.T`) keeps every loop that reads it out
//! of vector code, which needs unit innermost strides (see `lower::vector`). Where such a view
//! is small, the launch copies its elements into a dense buffer first and binds that instead:
//! the same elements at the same indices, so the same results, and the loop runs in vectors.
//! NPBench's `nbody` computes `x.T - x` for a column `x` of a `(50, 3)` array and then 150 math
//! operations per element of the `(50, 50)` result: packing the 50 elements of `x.T` lets the
//! whole fused loop run in AVX-512 code.
//!
//! Only views that no other argument of the launch writes through the same buffer are packed
//! (a snapshot must not miss the kernel's own writes), of at most [`PACK_ELEMENTS`] distinct
//! elements, each read at least [`REUSE`] times through a broadcast dimension (the copy costs
//! about as much as reading them once: a column read once, by a dot product, gains nothing;
//! `durbin`'s reversed `y[:k]` took twice as long packed).

use weft_runtime::backend::Binding;

/// The most distinct elements of a view that a launch packs.
pub(crate) const PACK_ELEMENTS: usize = 4096;

/// How many times, at least, the loop reads each element of a view it packs (the view's
/// elements counted with its broadcast dimensions, over its distinct ones).
pub(crate) const REUSE: usize = 4;

/// One packed view: its elements, dense over the dimensions whose stride is not zero, and its
/// new strides (in elements; zero where the view's were).
#[derive(Debug)]
pub(crate) struct Packed {
    /// The elements, in 8-byte words (at least one).
    pub words: Vec<u64>,
    /// The strides of the packed view.
    pub strides: Vec<i64>,
}

/// Whether the binding at `index` is a view the launch should pack: a plain buffer view, read
/// only by the kernel (`read_only`), whose innermost stride is neither 0 nor 1 over an
/// innermost extent of at least 2, of at most [`PACK_ELEMENTS`] distinct elements each read
/// [`REUSE`] times or more, whose buffer no written argument of the launch shares.
pub(crate) fn wanted(
    bindings: &[Binding],
    index: usize,
    read_only: &dyn Fn(usize) -> bool,
) -> bool {
    let Some(Binding::Buffer {
        buffer,
        extents,
        strides,
        deferred: None,
        ..
    }) = bindings.get(index)
    else {
        return false;
    };
    if !read_only(index) {
        return false;
    }
    let (Some(&extent), Some(&stride)) = (extents.last(), strides.last()) else {
        return false;
    };
    if extent < 2 || stride == 0 || stride == 1 {
        return false;
    }
    let count = |all: bool| {
        extents
            .iter()
            .zip(strides.iter())
            .filter(|&(_, &s)| all || s != 0)
            .try_fold(1usize, |a, (&e, _)| a.checked_mul(usize::try_from(e).ok()?))
    };
    // Few elements, each read at least `REUSE` times (broadcast along a dimension of stride
    // 0): a view read once (a column in a dot product) would pay its copy for nothing.
    let (Some(distinct), Some(reads)) = (count(false), count(true)) else {
        return false;
    };
    if distinct > PACK_ELEMENTS || reads < distinct.saturating_mul(REUSE) {
        return false;
    }
    // No written argument on the same buffer.
    !bindings.iter().enumerate().any(|(j, b)| {
        j != index
            && !read_only(j)
            && matches!(b, Binding::Buffer { buffer: other, .. } if other == buffer)
    })
}

/// Copies the view at `base` (the address of its element at index 0 in every dimension) of
/// `extents` and `strides` (elements of `element_size` bytes) into a dense buffer.
///
/// # Safety
/// Every element the view reaches lies in memory valid for reads (`check_view` showed it).
pub(crate) unsafe fn pack(
    base: *const u8,
    extents: &[i64],
    strides: &[i64],
    element_size: usize,
) -> Packed {
    let rank = extents.len();
    // Dense strides over the dimensions whose stride is not zero, row-major.
    let mut packed = vec![0i64; rank];
    let mut run = 1i64;
    for d in (0..rank).rev() {
        if strides[d] != 0 {
            packed[d] = run;
            run = run.saturating_mul(extents[d].max(0));
        }
    }
    let count = usize::try_from(run).unwrap_or(0);
    let mut words = vec![0u64; (count * element_size).div_ceil(8).max(1)];
    let out = words.as_mut_ptr().cast::<u8>();
    if count > 0 && extents.iter().all(|&e| e > 0) {
        // Walk every index of the view (broadcast dimensions at index 0 only).
        let mut index = vec![0i64; rank];
        loop {
            let (mut from, mut to) = (0i64, 0i64);
            for d in 0..rank {
                from += index[d] * strides[d];
                to += index[d] * packed[d];
            }
            // SAFETY: `from` names an element of the view (the caller's contract); `to` is
            // below `count`, inside `words`.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    base.offset(from as isize * element_size as isize),
                    out.add(to as usize * element_size),
                    element_size,
                );
            }
            // The next index, last dimension fastest; broadcast dimensions stay at 0.
            let mut d = rank;
            loop {
                if d == 0 {
                    return Packed {
                        words,
                        strides: packed,
                    };
                }
                d -= 1;
                if strides[d] == 0 {
                    continue;
                }
                index[d] += 1;
                if index[d] < extents[d] {
                    break;
                }
                index[d] = 0;
            }
        }
    }
    Packed {
        words,
        strides: packed,
    }
}

#[cfg(test)]
mod tests {
    use super::{PACK_ELEMENTS, pack, wanted};
    use weft_runtime::backend::{Binding, BufferId};

    fn view(buffer: u64, extents: &[i64], strides: &[i64]) -> Binding {
        Binding::Buffer {
            buffer: BufferId(buffer),
            offset: 0,
            extents: extents.iter().copied().collect(),
            strides: strides.iter().copied().collect(),
            origin: extents.iter().map(|_| 0).collect(),
            view: extents.iter().map(|&e| e as u64).collect(),
            element_size: 8,
            deferred: None,
        }
    }

    #[test]
    fn only_small_broadcast_strided_views_that_nothing_writes_are_packed() {
        // `x.T` of a column of a (50, 3) array, broadcast over 50 rows: packed.
        let t = view(1, &[50, 50], &[0, 3]);
        let out = view(2, &[50, 50], &[50, 1]);
        let read_only = |j: usize| j == 0;
        assert!(wanted(&[t.clone(), out.clone()], 0, &read_only));
        // Never the written argument, nor a view whose buffer the kernel writes.
        assert!(!wanted(&[t.clone(), out.clone()], 1, &read_only));
        let over_itself = view(1, &[50, 50], &[50, 1]);
        assert!(!wanted(&[t.clone(), over_itself], 0, &read_only));
        // A column read once (a dot product's operand): not packed.
        let column = view(1, &[50], &[3]);
        assert!(!wanted(&[column, out.clone()], 0, &read_only));
        // Unit and zero innermost strides need nothing; too many elements are not copied.
        assert!(!wanted(
            &[view(1, &[50, 50], &[0, 1]), out.clone()],
            0,
            &read_only
        ));
        assert!(!wanted(
            &[view(1, &[50, 50], &[3, 0]), out.clone()],
            0,
            &read_only
        ));
        let wide = PACK_ELEMENTS as i64 + 1;
        assert!(!wanted(&[view(1, &[8, wide], &[0, 3]), out], 0, &read_only));
    }

    #[test]
    fn a_packed_view_holds_the_same_elements_at_the_same_indices() {
        // A (4, 6) row-major f64 array; its transpose (6, 4) has strides (1, 6); a column
        // broadcast along a first dimension of 3 has strides (0, 6).
        let a: Vec<f64> = (0..24).map(|x| x as f64 * 1.5 - 7.0).collect();
        let base = a.as_ptr().cast::<u8>();
        for (extents, strides) in [
            (vec![6i64, 4], vec![1i64, 6]),
            (vec![3, 4], vec![0, 6]),
            (vec![2, 3], vec![6, 2]),
        ] {
            // SAFETY: every index of these views stays inside `a`.
            let p = unsafe { pack(base, &extents, &strides, 8) };
            let got: &[f64] = bytemuck_f64(&p.words);
            for i in 0..extents[0] {
                for j in 0..extents[1] {
                    let want = a[(i * strides[0] + j * strides[1]) as usize];
                    let at = (i * p.strides[0] + j * p.strides[1]) as usize;
                    assert_eq!(got[at], want, "{extents:?} {strides:?} at ({i}, {j})");
                }
            }
            assert_eq!(p.strides[1], 1, "the innermost stride is one element");
            if strides[0] == 0 {
                assert_eq!(p.strides[0], 0, "a broadcast dimension stays broadcast");
            }
        }
    }

    fn bytemuck_f64(words: &[u64]) -> &[f64] {
        // SAFETY: `u64` and `f64` have the same size and alignment, and every bit pattern is
        // a valid `f64`.
        unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<f64>(), words.len()) }
    }
}
