//! The canonical reduction order (`weft_ir::reduction`): however the points are split among
//! workers, and in whatever order the workers' parts are merged, the result has the bits of
//! the order's definition, for every operator, on spaces of rank 0 to 3 whose extents are not
//! powers of two (and empty ones).

use proptest::prelude::*;
use weft_ir::interp::reduce;
use weft_ir::reduction::{
    GROUP_LEVEL, Partial, aligned_nodes, canonical, exact_identity, group_split, grouped_nodes_with,
};
use weft_ir::{DType, ReduceOp, Scalar};

/// Values whose sums depend on the order: mixed magnitudes, signed zeros and infinities.
fn value(seed: u64, point: &[u64], dtype: DType) -> Scalar {
    let mut h = seed ^ 0x9e37_79b9_7f4a_7c15;
    for &c in point {
        h = (h ^ c).wrapping_mul(0x1000_0000_01b3).rotate_left(17);
    }
    let pick = h % 16;
    let mag = [1e-8, 1.0, 3.5, 1e8, 1e16][(h >> 8) as usize % 5];
    let f = match pick {
        0 => -0.0,
        1 => 0.0,
        2 if seed.is_multiple_of(7) => f64::INFINITY,
        _ => {
            let frac = ((h >> 20) % 1000) as f64 / 999.0;
            (if (h >> 40).is_multiple_of(2) {
                1.0
            } else {
                -1.0
            }) * mag
                * (0.5 + frac)
        }
    };
    match dtype {
        DType::F64 => Scalar::F64(f),
        DType::F32 => Scalar::F32(f as f32),
        DType::I64 => Scalar::I64((h >> 3) as i64),
        DType::I32 => Scalar::I32((h >> 7) as i32),
        DType::Bool => Scalar::Bool(pick.is_multiple_of(3)),
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
            unreachable!("storage types hold no values")
        }
    }
}

fn points(extents: &[u64]) -> Vec<Vec<u64>> {
    let mut out = vec![Vec::new()];
    for &e in extents {
        out = out
            .into_iter()
            .flat_map(|p| {
                (0..e).map(move |c| {
                    let mut q = p.clone();
                    q.push(c);
                    q
                })
            })
            .collect();
    }
    out
}

fn bits(s: Option<Scalar>) -> Option<(DType, u64)> {
    s.map(|s| (s.dtype(), s.to_bits()))
}

fn ops_and_types() -> impl Strategy<Value = (ReduceOp, DType)> {
    prop_oneof![
        Just((ReduceOp::Sum, DType::F64)),
        Just((ReduceOp::Sum, DType::F32)),
        Just((ReduceOp::Prod, DType::F64)),
        Just((ReduceOp::Min, DType::F64)),
        Just((ReduceOp::Max, DType::F32)),
        Just((ReduceOp::Sum, DType::I64)),
        Just((ReduceOp::Prod, DType::I32)),
        Just((ReduceOp::Max, DType::Bool)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Points dealt to workers at random, each worker's points added in a random order, the
    /// parts merged in a random order: the definition's bits.
    #[test]
    fn any_split_and_merge_order_gives_the_definitions_bits(
        extents in prop::collection::vec(0u64..13, 0..4),
        (op, dtype) in ops_and_types(),
        seed in any::<u64>(),
        workers in 1usize..6,
        shuffle in any::<u64>(),
    ) {
        let want = canonical(op, dtype, &extents, &|p| value(seed, p, dtype));
        let mut parts: Vec<Partial> = (0..workers).map(|_| Partial::new(op, dtype, &extents)).collect();
        let mut pts = points(&extents);
        // A deterministic shuffle from `shuffle`.
        let mut h = shuffle | 1;
        for i in (1..pts.len()).rev() {
            h = h.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            pts.swap(i, (h >> 33) as usize % (i + 1));
        }
        for (k, p) in pts.iter().enumerate() {
            let w = (k as u64).wrapping_mul(h | 1).rotate_left(7) as usize % workers;
            parts[w].add(p, value(seed, p, dtype)).unwrap();
        }
        parts.rotate_left(shuffle as usize % workers);
        let mut all = parts.pop().unwrap();
        for part in parts {
            all.merge(part).unwrap();
        }
        prop_assert_eq!(bits(all.result()), bits(want));
    }

    /// Contiguous ranges of the first dimension (how threads and pieces split a loop), and
    /// SIMD-style blocks added as whole subtrees: the same bits.
    #[test]
    fn row_ranges_and_whole_blocks_give_the_same_bits(
        rows in 1u64..40,
        cuts in prop::collection::vec(0u64..40, 0..4),
        seed in any::<u64>(),
    ) {
        let (op, dtype) = (ReduceOp::Sum, DType::F64);
        let extents = [rows];
        let want = canonical(op, dtype, &extents, &|p| value(seed, p, dtype));
        let mut bounds: Vec<u64> = cuts.into_iter().map(|c| c % rows).collect();
        bounds.extend([0, rows]);
        bounds.sort_unstable();
        bounds.dedup();
        let mut all = Partial::new(op, dtype, &extents);
        for w in bounds.windows(2) {
            let mut part = Partial::new(op, dtype, &extents);
            let mut c = w[0];
            while c < w[1] {
                // The largest aligned block of at most 8 that fits, summed as its subtree.
                let mut level = 0;
                while level < 3 && c.is_multiple_of(2 << level) && c + (2 << level) <= w[1] {
                    level += 1;
                }
                let size = 1u64 << level;
                let block = canonical(op, dtype, &[size], &|p| value(seed, &[c + p[0]], dtype));
                part.add_node(&[], level, c >> level, block.unwrap()).unwrap();
                c += size;
            }
            all.merge(part).unwrap();
        }
        prop_assert_eq!(bits(all.result()), bits(want));
    }

    /// Element trees (`Partial::blocked`): the points of a rank-1 loop dealt to parts in
    /// contiguous ranges at random cuts, each part adding the whole blocks it holds as blocks
    /// (folded in order here) and the rest as points, the parts merged in a random order: the
    /// bits of the definition computed directly (each block folded in order from the exact
    /// identity, the blocks by the canonical tree).
    #[test]
    fn element_trees_split_anywhere_give_the_definitions_bits(
        extent in 0u64..40,
        block in 1u32..4,
        cuts in prop::collection::vec(0u64..40, 0..5),
        (op, dtype) in ops_and_types().prop_filter("float sums and products", |(o, d)| {
            matches!(o, ReduceOp::Sum | ReduceOp::Prod) && matches!(d, DType::F32 | DType::F64)
        }),
        seed in any::<u64>(),
        shuffle in any::<u64>(),
    ) {
        let size = 1u64 << block;
        let fold = |a: u64, b: u64| {
            (a..b).fold(exact_identity(op, dtype), |acc, c| {
                reduce(op, acc, value(seed, &[c], dtype)).unwrap()
            })
        };
        let blocks: Vec<Scalar> = (0..extent.div_ceil(size))
            .map(|b| fold(b * size, ((b + 1) * size).min(extent)))
            .collect();
        let want = canonical(op, dtype, &[blocks.len() as u64], &|p| blocks[p[0] as usize]);
        let mut bounds: Vec<u64> = cuts.into_iter().map(|c| c % extent.max(1)).collect();
        bounds.extend([0, extent]);
        bounds.sort_unstable();
        bounds.dedup();
        let mut parts = Vec::new();
        for w in bounds.windows(2) {
            let mut part = Partial::blocked(op, dtype, extent, block);
            let mut c = w[0];
            while c < w[1] {
                let end = ((c / size + 1) * size).min(extent);
                if c.is_multiple_of(size) && end <= w[1] {
                    part.add_block(c / size, fold(c, end)).unwrap();
                    c = end;
                } else {
                    part.add(&[c], value(seed, &[c], dtype)).unwrap();
                    c += 1;
                }
            }
            parts.push(part);
        }
        let mut all = Partial::blocked(op, dtype, extent, block);
        if !parts.is_empty() {
            let k = shuffle as usize % parts.len();
            parts.rotate_left(k);
        }
        for part in parts {
            all.merge(part).unwrap();
        }
        prop_assert_eq!(bits(all.finish().unwrap()), bits(want));
    }

    /// A rank-1 loop cut into contiguous ranges at random, each range's points left *grouped*
    /// (every aligned group of eight wholly inside the range as its pairwise tree, in its first
    /// slot, with garbage in the others; the rest as points), turned into nodes by
    /// `grouped_nodes_with`: the definition's bits.
    #[test]
    fn grouped_ranges_give_the_definitions_bits(
        rows in 0u64..200,
        cuts in prop::collection::vec(0u64..200, 0..5),
        (op, dtype) in ops_and_types(),
        seed in any::<u64>(),
    ) {
        let extents = [rows];
        let want = canonical(op, dtype, &extents, &|p| value(seed, p, dtype));
        let combine = |x, y| reduce(op, x, y).unwrap();
        let mut bounds: Vec<u64> = cuts.into_iter().map(|c| c % (rows + 1)).collect();
        bounds.extend([0, rows]);
        bounds.sort_unstable();
        bounds.dedup();
        let mut all = Partial::new(op, dtype, &extents);
        let group = 1usize << GROUP_LEVEL;
        for w in bounds.windows(2) {
            let (start, len) = (w[0], (w[1] - w[0]) as usize);
            let mut vals: Vec<Scalar> = (w[0]..w[1]).map(|c| value(seed, &[c], dtype)).collect();
            let (head, groups) = group_split(start, len);
            for g in 0..groups {
                let at = head + g * group;
                let c = &vals[at..at + group];
                let node = combine(
                    combine(combine(c[0], c[1]), combine(c[2], c[3])),
                    combine(combine(c[4], c[5]), combine(c[6], c[7])),
                );
                vals[at] = node;
                for slot in &mut vals[at + 1..at + group] {
                    *slot = value(seed ^ 0x5eed, &[start], dtype);
                }
            }
            let mut part = Partial::new(op, dtype, &extents);
            let mut nodes = Vec::new();
            grouped_nodes_with(start, &mut vals, &mut Vec::new(), combine, |l, i, v| {
                nodes.push((l, i, v))
            });
            for (l, i, v) in nodes {
                part.add_node(&[], l, i, v).unwrap();
            }
            all.merge(part).unwrap();
        }
        prop_assert_eq!(bits(all.result()), bits(want));
    }

    /// Workers that do not know the extents (`Partial::unbounded`) and add whole lines of the
    /// innermost dimension as `aligned_nodes` makes them, over any cuts of the lines: once
    /// `finish`ed, the definition's bits.
    #[test]
    fn unbounded_parts_of_dense_lines_finish_to_the_definitions_bits(
        extents in prop::collection::vec(1u64..11, 1..4),
        (op, dtype) in ops_and_types(),
        seed in any::<u64>(),
        cut in any::<u64>(),
    ) {
        let want = canonical(op, dtype, &extents, &|p| value(seed, p, dtype));
        let rank = extents.len();
        let inner = extents[rank - 1];
        let mut all = Partial::unbounded(op, dtype, rank);
        for line in points(&extents[..rank - 1]) {
            // Each line cut once, its two parts from different workers.
            let at = cut.wrapping_add(line.iter().sum::<u64>()) % (inner + 1);
            for (a, b) in [(0, at), (at, inner)] {
                let mut part = Partial::unbounded(op, dtype, rank);
                let mut vals: Vec<Scalar> = (a..b)
                    .map(|c| {
                        let mut p = line.clone();
                        p.push(c);
                        value(seed, &p, dtype)
                    })
                    .collect();
                let mut nodes = Vec::new();
                aligned_nodes(a, &mut vals, |x, y| reduce(op, x, y).unwrap(), |l, i, v| {
                    nodes.push((l, i, v))
                });
                for (l, i, v) in nodes {
                    part.add_node(&line, l, i, v).unwrap();
                }
                all.merge(part).unwrap();
            }
        }
        prop_assert_eq!(bits(all.finish().unwrap()), bits(want));
        // A bounded part with every point finishes to the same bits too.
        let mut bounded = Partial::new(op, dtype, &extents);
        for p in points(&extents) {
            bounded.add(&p, value(seed, &p, dtype)).unwrap();
        }
        prop_assert_eq!(bits(bounded.finish().unwrap()), bits(want));
    }
}
