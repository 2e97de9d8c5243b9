//! The message plans against brute force: for every rank, the boxes it receives from each
//! peer hold exactly the elements its points read that the peer wrote last, found by
//! testing every element against every tile; and what each rank sends is what its peers
//! receive from it.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use weft_dist::boxes::{contains, coords, row_tiles};
use weft_dist::{Holding, Layer, Read, exchange};
use weft_runtime::mapping::BlockMapping;
use weft_runtime::partition::points;
use weft_runtime::{Partition, Rect, RootPartition, Tiling, ViewMap};

type Needs = BTreeMap<(usize, usize), BTreeSet<Vec<u64>>>;

fn elements(b: &Rect) -> Vec<Vec<u64>> {
    points(&b.extent)
        .map(|p| p.iter().zip(&b.origin).map(|(i, o)| i + o).collect())
        .collect()
}

/// `(holder, reader) -> elements`, by brute force.
fn brute(read: Read<'_>, mapping: &BlockMapping) -> Needs {
    let mut needs = Needs::new();
    for p in points(read.launch) {
        let to = weft_runtime::mapping::Mapping::owner(mapping, &p, read.launch);
        let sub = read.partition.sub_rect(&p);
        for v in points(&sub.extent) {
            let index: Vec<u64> = v.iter().zip(&sub.origin).map(|(i, o)| i + o).collect();
            let coords = coords(read.partition.view.element(&index), read.root);
            if let Some(from) = read.holding.holder_of(&coords, mapping)
                && from != to
            {
                needs.entry((from, to)).or_default().insert(coords);
            }
        }
    }
    needs
}

/// Checks every rank's plan against the brute force.
fn check(read: Read<'_>, ranks: usize) -> Result<(), TestCaseError> {
    let mapping = BlockMapping { ranks };
    let want = brute(read, &mapping);
    let mut got_recv = Needs::new();
    let mut got_send = Needs::new();
    for rank in 0..ranks {
        let plan =
            exchange(read, rank, &mapping).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for (&from, t) in &plan.recvs {
            let set = got_recv.entry((from, rank)).or_default();
            for b in &t.boxes {
                for e in elements(b) {
                    prop_assert!(set.insert(e), "an element received twice");
                }
            }
        }
        for (&to, t) in &plan.sends {
            let set = got_send.entry((rank, to)).or_default();
            for b in &t.boxes {
                for e in elements(b) {
                    prop_assert!(set.insert(e), "an element sent twice");
                }
            }
        }
    }
    got_recv.retain(|_, s| !s.is_empty());
    got_send.retain(|_, s| !s.is_empty());
    prop_assert_eq!(&got_recv, &want, "receives");
    prop_assert_eq!(&got_send, &want, "sends");
    Ok(())
}

/// Figure 1's stencil: the center written by row tiles, then read through the four shifted
/// views with the same tiles, on grids and piece counts that do not divide evenly.
#[test]
fn stencil_halos_match_brute_force() {
    for (n, m, pieces, ranks) in [
        (9, 5, 3, 2),
        (10, 4, 4, 3),
        (7, 7, 5, 4),
        (6, 3, 1, 2),
        (8, 6, 4, 1),
    ] {
        let root = [n + 2, m + 2];
        let grid = ViewMap::whole(&root);
        let tile = n.div_ceil(pieces);
        let view = |r: u64, c: u64| grid.slice(&[r, c], &[r + n, c + m]).unwrap();
        let center = RootPartition::fold(&row_tiles(tile, 0, 2), &view(1, 1));
        let mut holding = Holding::replicated();
        holding.write(Layer::new(&center, &[pieces], &root).unwrap(), &root);
        for (r, c) in [(0, 1), (2, 1), (1, 0), (1, 2), (1, 1)] {
            let part = RootPartition::fold(&row_tiles(tile, 0, 2), &view(r, c));
            let read = Read {
                partition: &part,
                launch: &[pieces],
                root: &root,
                holding: &holding,
            };
            check(read, ranks).unwrap();
        }
    }
}

fn tiling2(tile: [u64; 2], offset: [i64; 2]) -> Partition {
    Partition::Tiling(Tiling {
        tile: weft_runtime::Dims::from_slice(&tile),
        offset: weft_runtime::Dims::from_slice(&offset),
        projection: weft_runtime::smallvec::smallvec![Some(0), Some(1)],
        skew: None,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// 2-D tilings, shifted views and shifted tiles, over one or two earlier writes.
    #[test]
    fn two_d_tilings_match_brute_force(
        shape in (3u64..9, 3u64..9),
        wtile in (1u64..5, 1u64..5),
        rtile in (1u64..5, 1u64..5),
        shift in (0u64..3, 0u64..3),
        roff in (-2i64..2, -2i64..2),
        second in proptest::bool::ANY,
        flip in proptest::bool::ANY,
        ranks in 1usize..5,
    ) {
        let root = [shape.0 + 2, shape.1 + 2];
        let grid = ViewMap::whole(&root);
        let inner = grid.slice(&[1, 1], &[1 + shape.0, 1 + shape.1]).unwrap();
        let launch_w = [shape.0.div_ceil(wtile.0), shape.1.div_ceil(wtile.1)];
        let written = RootPartition::fold(&tiling2([wtile.0, wtile.1], [0, 0]), &inner);
        let mut holding = Holding::replicated();
        holding.write(Layer::new(&written, &launch_w, &root).unwrap(), &root);
        if second {
            // Then the whole grid by row tiles of 2 over 3 points (the last ones run short).
            let whole = RootPartition::fold(&row_tiles(2, 1, 2), &grid);
            holding.write(Layer::new(&whole, &[3], &root).unwrap(), &root);
            // Written again through the inner block with its rows reversed.
            let flipped = grid.strided(&[shape.0, 1], &[-1, 1], &[shape.0, shape.1]).unwrap();
            let again = RootPartition::fold(&tiling2([wtile.1, wtile.0], [1, 0]), &flipped);
            let launch = [shape.0.div_ceil(wtile.1), shape.1.div_ceil(wtile.0)];
            holding.write(Layer::new(&again, &launch, &root).unwrap(), &root);
        }
        // The read view, its columns reversed or not.
        let view = if flip {
            grid.strided(&[shift.0, shift.1 + shape.1 - 1], &[1, -1], &[shape.0, shape.1])
                .unwrap()
        } else {
            grid.slice(&[shift.0, shift.1], &[shift.0 + shape.0, shift.1 + shape.1])
                .unwrap()
        };
        let part = RootPartition::fold(&tiling2([rtile.0, rtile.1], [roff.0, roff.1]), &view);
        let launch = [(shape.0 + 2).div_ceil(rtile.0), (shape.1 + 2).div_ceil(rtile.1)];
        let read = Read { partition: &part, launch: &launch, root: &root, holding: &holding };
        check(read, ranks)?;
    }

    /// A vector written by row tiles and read whole by every point (a broadcast), or through
    /// tiles shifted by a halo `g` either way (the Poisson product's `x`).
    #[test]
    fn vectors_read_whole_or_with_halos_match_brute_force(
        n in 1u64..40,
        pieces in 1u64..7,
        g in 0i64..6,
        ranks in 1usize..5,
    ) {
        let root = [n];
        let x = ViewMap::whole(&root);
        let tile = n.div_ceil(pieces).max(1);
        let written = RootPartition::fold(&row_tiles(tile, 0, 1), &x);
        let mut holding = Holding::replicated();
        holding.write(Layer::new(&written, &[pieces], &root).unwrap(), &root);
        for part in [Partition::None, row_tiles(tile, -g, 1), row_tiles(tile, g, 1)] {
            let part = RootPartition::fold(&part, &x);
            let read = Read { partition: &part, launch: &[pieces], root: &root, holding: &holding };
            check(read, ranks)?;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// A layer covers its root exactly when testing every element finds a tile.
    #[test]
    fn cover_in_closed_form_matches_brute_force(
        n in 1u64..9,
        m in 1u64..9,
        tile in (1u64..5, 1u64..5),
        offset in (-2i64..2, -2i64..2),
        launch in (0u64..5, 0u64..5),
        sliced in proptest::bool::ANY,
    ) {
        let root = [n, m];
        let grid = ViewMap::whole(&root);
        let view = if sliced && n > 1 { grid.slice(&[1, 0], &[n, m]).unwrap() } else { grid };
        let part = RootPartition::fold(&tiling2([tile.0, tile.1], [offset.0, offset.1]), &view);
        let launch = [launch.0, launch.1];
        let layer = Layer::new(&part, &launch, &root).unwrap();
        let tiles: Vec<Rect> = points(&launch).map(|p| layer.tile(&p)).collect();
        let brute = points(&root).all(|e| {
            tiles.iter().any(|t| contains(t, &e))
        });
        prop_assert_eq!(layer.covers(&root), brute);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// A vector written through a view with steps (given boxes: each point's elements as
    /// runs), then read through shifted tiles: the plans still match brute force, and the
    /// runs hold exactly the point's elements.
    #[test]
    fn writes_through_stepped_views_match_brute_force(
        n in 4u64..40,
        start in 0u64..4,
        step in 1i64..4,
        pieces in 1u64..5,
        g in -3i64..4,
        ranks in 1usize..5,
    ) {
        let root = [n];
        let x = ViewMap::whole(&root);
        let count = (n - start.min(n - 1) - 1) / step as u64 + 1;
        let stepped = x.strided(&[start.min(n - 1)], &[step], &[count]).unwrap();
        let tile = count.div_ceil(pieces).max(1);
        let part = RootPartition::fold(&row_tiles(tile, 0, 1), &stepped);
        let launch = [count.div_ceil(tile)];
        let boxes: Vec<Vec<Rect>> = points(&launch)
            .map(|p| weft_dist::boxes::element_boxes(&stepped, &part.sub_rect(&p), &root))
            .collect();
        for (p, b) in points(&launch).zip(&boxes) {
            let sub = part.sub_rect(&p);
            let mut want: Vec<Vec<u64>> = points(&sub.extent)
                .map(|i| vec![stepped.element(&[i[0] + sub.origin[0]])])
                .collect();
            let mut got: Vec<Vec<u64>> = b.iter().flat_map(elements).collect();
            want.sort();
            got.sort();
            prop_assert_eq!(got, want);
        }
        let layer = Layer::given(&part, &launch, &root, boxes).unwrap();
        let mut holding = Holding::replicated();
        holding.write(layer, &root);
        let read = RootPartition::fold(&row_tiles(n.div_ceil(pieces), g, 1), &x);
        let rl = [pieces];
        check(Read { partition: &read, launch: &rl, root: &root, holding: &holding }, ranks)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A dense product's reads over a grid (`weft_runtime::products::grid_partitions`): `A`'s
    /// row panels, and `BT`'s row panels through the transpose of `B`, each over its layer's
    /// terms of `k` on a grid of layers, with each operand held by rows or by an earlier
    /// grid's tiles; and on a grid of layers, the sum's reads of the layers' partial sums
    /// (`sum_partitions`) that the product's points wrote.
    #[test]
    fn product_panels_over_a_grid_match_brute_force(
        (m, n) in (1u64..12, 1u64..12),
        k in prop_oneof![1u64..9, 1025u64..4200],
        grid in (1u64..4, 1u64..4, 0u32..3),
        held_grid in (1u64..4, 1u64..4),
        by_rows in proptest::bool::ANY,
        ranks in 1usize..5,
    ) {
        use weft_runtime::products::{Grid, grid_partitions, sum_partitions};
        let mut grid = Grid { rows: grid.0.min(m), cols: grid.1.min(n), layers: 1 << grid.2 };
        while grid.tiles(m, n, k).is_none() {
            grid.layers /= 2;
        }
        let held = (!by_rows).then_some(Grid::flat(held_grid.0, held_grid.1));
        let (launch, [pa, pb, pp]) = grid_partitions(m, n, k, grid).unwrap();
        check_operands((m, n, k), [&pa, &pb], &launch, held, ranks)?;
        if let Some((sum_launch, [read, _])) = sum_partitions(m, n, k, grid) {
            let root = vec![grid.layers, m, n];
            let whole = ViewMap::whole(&root);
            check_after((&pp, &launch), (&read, &whole, &sum_launch), &root, ranks)?;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A product of a matrix by a vector by parts over a grid of layers
    /// (`weft_runtime::matvec_grid`): each point's reads of `A` (held by rows or by a 2-D
    /// grid's tiles) and of `x`'s parts (held by rows), and the sum's reads of the partial
    /// sums that the layers wrote.
    #[test]
    fn matvec_layers_match_brute_force(
        m in 1u64..12,
        k in prop_oneof![1u64..80, 400u64..3000],
        rows in 1u64..4,
        layers in 0u32..4,
        held_grid in (1u64..4, 1u64..4),
        by_rows in proptest::bool::ANY,
        ranks in 1usize..5,
    ) {
        use weft_runtime::matvec_grid::{layers_for, partitions, sum_partitions};
        use weft_runtime::products::Grid;
        let l = layers_for(k, 1 << layers);
        let rows = rows.min(m);
        let (launch, [pa, px, pp]) = partitions(m, k, rows, l);
        let held = (!by_rows).then_some(Grid::flat(held_grid.0, held_grid.1));
        let (written, over) = match held {
            None => (row_tiles(m.div_ceil(3), 0, 2), vec![3]),
            Some(grid) => {
                let (over, [_, _, tiles]) = weft_runtime::products::grid_partitions(m, k, 1, grid)
                    .expect("a 2-D grid's tiles of A");
                (tiles, over)
            }
        };
        let a = [m, k];
        check_after((&written, &over), (&pa, &ViewMap::whole(&a), &launch), &a, ranks)?;
        let x = [k];
        let x_rows = row_tiles(k.div_ceil(3), 0, 1);
        check_after((&x_rows, &[3]), (&px, &ViewMap::whole(&x), &launch), &x, ranks)?;
        let (sum_launch, [read, _]) = sum_partitions(m, rows, l);
        let partial = [l, m];
        let whole = ViewMap::whole(&partial);
        check_after((&pp, &launch), (&read, &whole, &sum_launch), &partial, ranks)?;
    }
}

/// [`check_after`]s a product's reads of `A` (`(m, k)`) and of `BT` (through the transpose of
/// `B`, `(k, n)`) by `reads` over `launch`, each operand written before by rows over 3 points
/// (`held` none) or by the tiles of the grid `held`.
fn check_operands(
    (m, n, k): (u64, u64, u64),
    reads: [&Partition; 2],
    launch: &[u64],
    held: Option<weft_runtime::products::Grid>,
    ranks: usize,
) -> Result<(), TestCaseError> {
    let operands = [
        (vec![m, k], ViewMap::whole(&[m, k])),
        (
            vec![k, n],
            ViewMap::whole(&[k, n])
                .permute(&[1, 0])
                .expect("a transpose of a matrix"),
        ),
    ];
    for ((root, view), read) in operands.into_iter().zip(reads) {
        let (written, over) = match held {
            None => (row_tiles(root[0].div_ceil(3), 0, 2), vec![3]),
            Some(grid) => {
                let (over, [_, _, tiles]) =
                    weft_runtime::products::grid_partitions(root[0], root[1], 1, grid)
                        .expect("a 2-D grid's tiles of the operand");
                (tiles, over)
            }
        };
        check_after((&written, &over), (read, &view, launch), &root, ranks)?;
    }
    Ok(())
}

/// [`check`]s the reads through `view` of a store of `root`'s shape, by `read` over `launch`,
/// after a task over `over` wrote all of it by `written`.
fn check_after(
    (written, over): (&Partition, &[u64]),
    (read, view, launch): (&Partition, &ViewMap, &[u64]),
    root: &[u64],
    ranks: usize,
) -> Result<(), TestCaseError> {
    let written = RootPartition::fold(written, &ViewMap::whole(root));
    let mut holding = Holding::replicated();
    let layer = Layer::new(&written, over, root).map_err(|e| TestCaseError::fail(e.to_string()))?;
    holding.write(layer, root);
    let part = RootPartition::fold(read, view);
    check(
        Read {
            partition: &part,
            launch,
            root,
            holding: &holding,
        },
        ranks,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Cannon's steps (`weft_runtime::products::cannon_partitions`): each step's skewed reads
    /// of `A`'s and `BT`'s blocks, with each operand held by rows or by an earlier grid's
    /// tiles; and the sum's reads (`cannon_sum_partitions`) of the partial sums that the `q`
    /// steps wrote through their skewed tiles.
    #[test]
    fn cannons_steps_match_brute_force(
        (m, n) in (2u64..12, 2u64..12),
        k in prop_oneof![1u64..9, 1025u64..4200],
        side in 0u32..3,
        held_grid in (1u64..4, 1u64..4),
        by_rows in proptest::bool::ANY,
        ranks in 1usize..5,
    ) {
        use weft_runtime::products::{
            Grid, ProductGrid, cannon_partitions, cannon_side, cannon_sum_partitions,
        };
        let asked = ProductGrid::Cannon { side: Some(1 << side) };
        let Some(q) = cannon_side((m, n, k), 1, asked) else {
            // One block of `k` (or a side of one) leaves no grid.
            prop_assert!(k <= 1024 || side == 0);
            return Ok(());
        };
        let held = (!by_rows).then_some(Grid::flat(held_grid.0, held_grid.1));
        let partial = vec![q, m, n];
        let mut sums = Holding::replicated();
        for step in 0..q {
            let (launch, [pa, pb, pp]) = cannon_partitions(m, n, k, q, step).unwrap();
            check_operands((m, n, k), [&pa, &pb], &launch, held, ranks)?;
            let written = RootPartition::fold(&pp, &ViewMap::whole(&partial));
            let layer = Layer::new(&written, &launch, &partial)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            sums.write(layer, &partial);
        }
        let (sum_launch, [read, _]) = cannon_sum_partitions(m, n, k, q).unwrap();
        let read = RootPartition::fold(&read, &ViewMap::whole(&partial));
        let mapping = BlockMapping { ranks };
        // Every element of the partial sums was written, each by the sum's own rank.
        for e in points(&partial) {
            prop_assert!(sums.holder_of(&e, &mapping).is_some(), "{e:?} unwritten");
        }
        let sum = Read { partition: &read, launch: &sum_launch, root: &partial, holding: &sums };
        check(sum, ranks)?;
        for rank in 0..ranks {
            let plan = exchange(sum, rank, &mapping)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(plan.elements(), (0, 0), "the sum reads its own rank's layers");
        }
    }

    /// A skewed tiling's points see the tiles of the closed form, and its layer is never
    /// said to cover its root where testing every element finds one without a tile.
    #[test]
    fn skewed_cover_matches_brute_force(
        (n, m) in (1u64..9, 1u64..9),
        tile in (1u64..5, 1u64..5),
        launch in (0u64..5, 0u64..5),
        modulus in 1u64..6,
        shift in 0u64..7,
        own in proptest::option::of(0u32..2),
    ) {
        let root = [n, m];
        let part = Partition::Tiling(Tiling {
            tile: weft_runtime::Dims::from_slice(&[tile.0, tile.1]),
            offset: weft_runtime::Dims::from_slice(&[0, 0]),
            projection: weft_runtime::smallvec::smallvec![Some(0), own],
            skew: Some(weft_runtime::Skew { dim: 1, plus: 1, shift, modulus }),
        });
        let part = RootPartition::fold(&part, &ViewMap::whole(&root));
        let launch = [launch.0, launch.1];
        let layer = Layer::new(&part, &launch, &root).unwrap();
        let tiles: Vec<Rect> = points(&launch).map(|p| layer.tile(&p)).collect();
        for (p, t) in points(&launch).zip(&tiles) {
            let index = (own.map_or(0, |d| p[d as usize]) + p[1] + shift) % modulus;
            let span = |i: u64, tile: u64, extent: u64| {
                let lo = (i * tile).min(extent);
                (lo, (lo + tile).min(extent) - lo)
            };
            let (rows, cols) = (span(p[0], tile.0, n), span(index, tile.1, m));
            if rows.1 * cols.1 == 0 {
                prop_assert_eq!(t.volume(), 0);
            } else {
                prop_assert_eq!(t.origin.as_slice(), &[rows.0, cols.0]);
                prop_assert_eq!(t.extent.as_slice(), &[rows.1, cols.1]);
            }
        }
        // Never claimed where a tile is missing.
        let brute = points(&root).all(|e| tiles.iter().any(|t| contains(t, &e)));
        prop_assert!(brute || !layer.covers(&root));
    }
}
