//! The canonical product's blocks of terms and the tree that combines them
//! (`weft_ir::product::blocked_sum`): `k` cut into aligned blocks of [`BLOCK`] terms, each
//! block one chain of `fma`s from zero, the blocks' sums combined by the aligned pairwise tree
//! over the block index.
//!
//! The routines compute a block's chains as they computed whole chains before, and hand each
//! element's block sum to [`finish_block`], a binary counter over a stack of partial sums
//! (level `l` holding the sum of a complete subtree of `2^l` blocks), which gives the tree's
//! bits for any block count.

use super::Element;

/// Terms per block (`weft_ir::product::BLOCK_TERMS`).
pub(crate) const BLOCK: usize = weft_ir::product::BLOCK_TERMS as usize;

/// The blocks of `k` terms.
pub(crate) fn blocks(k: usize) -> usize {
    k.div_ceil(BLOCK)
}

/// The levels of stack that [`finish_block`] writes for `blocks` blocks: the highest level a
/// block lands at before the last one, plus one (none for one block).
pub(crate) fn levels(blocks: usize) -> usize {
    match blocks {
        0 | 1 => 0,
        b => (usize::BITS - (b - 1).leading_zeros()) as usize,
    }
}

/// The end of the block that term `p` lies in, cut at `k`.
pub(crate) fn block_end(p: usize, k: usize) -> usize {
    (p / BLOCK + 1).saturating_mul(BLOCK).min(k)
}

/// One element's stack of partial sums, by level.
pub(crate) trait Stack<T> {
    /// The sum at `level`.
    fn read(&mut self, level: usize) -> T;
    /// Puts `value` at `level`.
    fn write(&mut self, level: usize, value: T);
}

/// An element's stack in a slice: level `l` at `at + l * stride`.
pub(crate) struct Strided<'a, T> {
    /// The levels' elements.
    pub data: &'a mut [T],
    /// Elements between levels.
    pub stride: usize,
    /// Level 0's element.
    pub at: usize,
}

impl<T: Copy> Stack<T> for Strided<'_, T> {
    fn read(&mut self, level: usize) -> T {
        self.data[self.at + level * self.stride]
    }
    fn write(&mut self, level: usize, value: T) {
        self.data[self.at + level * self.stride] = value;
    }
}

/// One element's sum of block `count - 1` (of `blocks`) is in: merges it with the stacked
/// subtrees below the lowest zero bit of `count - 1`, each on the left (`stacked + carry`),
/// and puts the result on the stack; after the last block, instead folds the stacked levels
/// present in `blocks` from the lowest up, each on the left, and returns the element's sum.
#[inline(always)]
pub(crate) fn finish_block<T: Element>(
    count: usize,
    blocks: usize,
    sum: T,
    stack: &mut impl Stack<T>,
) -> Option<T> {
    let lands = count.trailing_zeros() as usize;
    let mut carry = sum;
    for level in 0..lands {
        carry = stack.read(level) + carry;
    }
    if count < blocks {
        stack.write(lands, carry);
        return None;
    }
    let mut higher = blocks >> lands >> 1;
    let mut level = lands + 1;
    while higher != 0 {
        if higher & 1 == 1 {
            carry = stack.read(level) + carry;
        }
        higher >>= 1;
        level += 1;
    }
    Some(carry)
}

/// Where block `count - 1` of `blocks` lands: the stack's level that [`merge_run`] leaves
/// its merged sums at, or `None` for the last block (whose merged sums are the result).
pub(crate) fn lands(count: usize, blocks: usize) -> Option<usize> {
    (count < blocks).then_some(count.trailing_zeros() as usize)
}

/// [`finish_block`] for a run of elements side by side, in place: `sums` holds their sums of
/// block `count - 1` (of `blocks`), and `level(l)` points at the run's first element on
/// level `l` of the stack (the run's elements one apart there too). Afterwards `sums` holds
/// the merged sums: what goes to the stack's level [`lands`] names, or after the last block
/// the elements' results. It writes no level: a routine that computes a block's sums
/// straight into the level they land at needs no copy.
///
/// # Safety
///
/// For every level `l` the counter reads (below [`levels`]`(blocks)`), `level(l)` points at
/// `sums.len()` elements valid for reads, which nothing writes meanwhile.
#[inline(always)]
pub(crate) unsafe fn merge_run<T: Element>(
    count: usize,
    blocks: usize,
    sums: &mut [T],
    level: impl Fn(usize) -> *const T,
) {
    let len = sums.len();
    // SAFETY: the caller's contract.
    let at = |l: usize| unsafe { std::slice::from_raw_parts(level(l), len) };
    let lands = count.trailing_zeros() as usize;
    for l in 0..lands {
        add_left(sums, at(l));
    }
    if count < blocks {
        return;
    }
    let mut higher = blocks >> lands >> 1;
    let mut l = lands + 1;
    while higher != 0 {
        if higher & 1 == 1 {
            add_left(sums, at(l));
        }
        higher >>= 1;
        l += 1;
    }
}

/// `carry[x] = stacked[x] + carry[x]`: the earlier subtree on the left.
#[inline(always)]
fn add_left<T: Element>(carry: &mut [T], stacked: &[T]) {
    for (c, &s) in carry.iter_mut().zip(stacked) {
        *c = s + *c;
    }
}

/// The canonical sum of `x(p) * y(p)` for `p < k` (each block's chain by `fma` from zero,
/// the blocks by the tree), one element at a time: the routines' reference and the small
/// products' loop.
#[inline(always)]
pub(crate) fn element<T: Element>(k: usize, x: impl Fn(usize) -> T, y: impl Fn(usize) -> T) -> T {
    let blocks = blocks(k);
    if blocks == 0 {
        return T::ZERO;
    }
    let mut stack = [T::ZERO; usize::BITS as usize];
    let mut p = 0;
    for count in 1..=blocks {
        let end = block_end(p, k);
        let mut sum = T::ZERO;
        while p < end {
            sum = x(p).fma(y(p), sum);
            p += 1;
        }
        let mut levels = Strided {
            data: &mut stack,
            stride: 1,
            at: 0,
        };
        let done = finish_block(count, blocks, sum, &mut levels);
        if let Some(v) = done {
            return v;
        }
    }
    T::ZERO
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::product::tests::aligned_tree as tree;

    #[test]
    fn the_counter_gives_the_recursive_trees_bits_for_any_block_count() {
        for count in 1..=70usize {
            // Sums of many magnitudes, so that a wrong pairing shows in the bits.
            let sums: Vec<f64> = (0..count)
                .map(|b| (1.0 + b as f64 / 7.0) * 10f64.powi((b * 5 % 17) as i32 - 8))
                .collect();
            let mut stack = vec![0.0; levels(count).max(1)];
            let mut got = None;
            for (q, &s) in sums.iter().enumerate() {
                let mut levels = Strided {
                    data: &mut stack,
                    stride: 1,
                    at: 0,
                };
                got = finish_block(q + 1, count, s, &mut levels);
                assert_eq!(got.is_some(), q + 1 == count);
            }
            assert_eq!(
                got.map(f64::to_bits),
                Some(tree(&sums).to_bits()),
                "{count}"
            );
        }
        assert_eq!(levels(4), 2);
        assert_eq!(levels(5), 3);
        assert_eq!(levels(1), 0);
    }
}
