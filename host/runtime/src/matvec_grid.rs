//! Products of a matrix by a vector over a grid that splits `k`.
//!
//! `numeric` submits `A @ x` for a matrix stored by rows with rows longer than
//! `weft_ir::matvec::PARTS_FROM` terms as the product by parts
//! (`weft_ir::matvec::matvec_parts`), launched over `y`'s rows: each point reads its rows of
//! `A` (all of `k`) and the whole of `x`. That launch is the grid of one column and one layer,
//! which the automatic choice keeps: a rank whose rows of `A` are its own receives only `x`,
//! and every grid with layers adds their partial sums (`crate::products::choose` weighs the
//! same). Asked for a grid of `r x c x l` points (`WEFT_MATMUL_GRID`), the core launches it
//! over `[r, l]` instead ([`schedule`]; `y` has one column, so `c` is cut to 1, and `l` to at
//! most `weft_ir::matvec::PARTS`, halved until every layer holds terms): point `(i, z)` reads
//! tile `(i, z)` of `A` (its rows over the parts layer `z` owns) and the same parts of `x`,
//! and writes their subtree of each row's tree into layer `z` of a store of partial sums
//! `(l, m)` with `weft_ir::matvec::matvec_layer`; a second task, launched over `[r l]` so
//! that its point `i l + z` lies on the rank of point `(i, z)`, sums each slice of a tile's
//! rows over the `l` layers by the tree's top levels (`weft_ir::matvec::matvec_layers_sum`),
//! a reduce-scatter along the layers. Each element is the one-process sum, so the bits do not
//! depend on the grid or the rank count. With one layer the plugin's launch is kept: it is
//! the grid of rows.

use weft_ir::matvec::{PARTS, part_width};
use weft_ir::{DType, Scalar};

use crate::Dims;
use crate::partition::{Partition, Tiling};
use crate::products::ProductGrid;
use crate::task::IndexTask;

/// A product by parts launched over a grid of layers: what the core needs to finish it.
#[derive(Clone, Debug, PartialEq)]
pub struct MatvecGrid {
    /// Points along `y`'s rows.
    pub rows: u64,
    /// Points along `k`: a power of two from 2 to [`PARTS`].
    pub layers: u64,
    /// The element type.
    pub dtype: DType,
    /// The line the explanations give.
    pub note: String,
    /// The shape of the partial sums, `(layers, m)`.
    pub partial_shape: [u64; 2],
    /// The launch of the task that sums the layers.
    pub sum_launch: Vec<u64>,
    /// The partitions of the partial sums and of `y` in that task.
    pub sum_partitions: [Partition; 2],
}

/// The layers a product by parts of `k` terms takes when `asked` for: at most [`PARTS`],
/// halved until every layer holds terms (layer `l - 1` starts before `k`).
pub fn layers_for(k: u64, asked: u64) -> u64 {
    let mut l = asked.clamp(1, PARTS);
    while !l.is_power_of_two() {
        l -= 1;
    }
    let w = part_width(k);
    while l > 1 && (l - 1).saturating_mul(PARTS / l).saturating_mul(w) >= k {
        l /= 2;
    }
    l
}

/// The launch and the partitions of `A`, `x` and the partial sums for an `(m, k)` product by
/// parts over `rows x layers` points (`layers` from [`layers_for`]): point `(i, z)` reads
/// rows tile `i` (a multiple of `layers` rows, so that the sum's slices nest in it) over the
/// terms of layer `z`'s parts.
pub fn partitions(m: u64, k: u64, rows: u64, layers: u64) -> (Vec<u64>, [Partition; 3]) {
    let rows_tile = m
        .div_ceil(rows.max(1))
        .div_ceil(layers)
        .saturating_mul(layers);
    let span = (PARTS / layers).saturating_mul(part_width(k));
    (
        vec![rows, layers],
        [
            tiling(&[rows_tile, span], &[Some(0), Some(1)]),
            tiling(&[span], &[Some(1)]),
            tiling(&[1, rows_tile], &[Some(1), Some(0)]),
        ],
    )
}

/// The launch and the partitions of the partial sums and of `y` in the task that sums the
/// layers: over `[rows layers]`, point `i layers + z` (the rank of the product's point
/// `(i, z)`) reads every layer's sums of slice `z` of tile `i` and writes that slice of `y`.
pub fn sum_partitions(m: u64, rows: u64, layers: u64) -> (Vec<u64>, [Partition; 2]) {
    let rows_tile = m
        .div_ceil(rows.max(1))
        .div_ceil(layers)
        .saturating_mul(layers);
    let slice = rows_tile / layers;
    (
        vec![rows.saturating_mul(layers)],
        [
            tiling(&[layers, slice], &[None, Some(0)]),
            tiling(&[slice], &[Some(0)]),
        ],
    )
}

fn tiling(tile: &[u64], projection: &[Option<u32>]) -> Partition {
    Partition::Tiling(Tiling {
        tile: Dims::from_slice(tile),
        offset: Dims::from_slice(&vec![0; tile.len()]),
        projection: Dims::from_slice(projection),
        skew: None,
    })
}

/// Whether `task` is a product by parts as the plugin launches it: over `y`'s rows, `A` by
/// rows of all of `k` in step with `y`'s, `x` whole, the tiles covering `y`. Returns
/// `(m, k)`.
fn plugin_launch(task: &IndexTask, shape: impl Fn(usize) -> Option<Vec<u64>>) -> Option<[u64; 2]> {
    let [a, x, y] = task.args.as_slice() else {
        return None;
    };
    let (sa, sx, sy) = (shape(0)?, shape(1)?, shape(2)?);
    let ([m, k], [k2], [m2]) = (sa.as_slice(), sx.as_slice(), sy.as_slice()) else {
        return None;
    };
    if (m, k) != (m2, k2) || !task.scalars.is_empty() {
        return None;
    }
    let [points] = task.launch.as_slice() else {
        return None;
    };
    let rows_of = |p: &Partition, width: u64| match p {
        Partition::Tiling(t)
            if t.offset.iter().all(|&o| o == 0)
                && t.skew.is_none()
                && t.projection.first() == Some(&Some(0))
                && t.tile.get(1).is_none_or(|&w| w >= width)
                && t.projection.get(1).is_none_or(|p| p.is_none()) =>
        {
            t.tile.first().copied()
        }
        _ => None,
    };
    let (ta, ty) = (rows_of(&a.partition, *k)?, rows_of(&y.partition, 1)?);
    let covers = ta == ty && ty.checked_mul(*points)? >= *m;
    (covers && x.partition == Partition::None).then_some([*m, *k])
}

/// Launches `task`, if it is a product by parts as the plugin launches it, over the grid that
/// `setting` asks for (only a grid with layers changes it: see the module documentation):
/// its kernel becomes `layer(dtype, layers)` (a layer of that many, what
/// `weft_ir::matvec::matvec_layer` builds), its third argument is to become the partial
/// sums (the caller makes the store and submits the sum after it). `shape(i)` is argument
/// `i`'s shape. Returns what it did, or `None` with the task as it was.
pub fn schedule(
    task: &mut IndexTask,
    setting: ProductGrid,
    shape: impl Fn(usize) -> Option<Vec<u64>>,
    layer: impl FnOnce(DType, u64) -> crate::Result<std::sync::Arc<crate::kernel::KernelEntry>>,
) -> crate::Result<Option<MatvecGrid>> {
    let Some(dtype) = task.kernel.matvec_parts() else {
        return Ok(None);
    };
    let ProductGrid::Fixed { rows, cols, layers } = setting else {
        return Ok(None);
    };
    let Some([m, k]) = plugin_launch(task, shape) else {
        return Ok(None);
    };
    let l = layers_for(k, layers);
    if l == 1 || m == 0 {
        return Ok(None);
    }
    let r = rows.clamp(1, m);
    let (launch, [pa, px, pp]) = partitions(m, k, r, l);
    let (sum_launch, sum_partitions) = sum_partitions(m, r, l);
    let entry = layer(dtype, l)?;
    let asked = format!("WEFT_MATMUL_GRID={rows}x{cols}x{layers}");
    let cut = if (r, l, cols) == (rows, layers, 1) {
        String::new()
    } else {
        format!(
            ", cut to y's one column, its {m} rows and {PARTS} parts of each row with terms in \
             every layer"
        )
    };
    let note = format!(
        "{} ({m}x{k} @ {k}) launched over a {r}x1x{l} grid: {l} layers of {} of each row's \
         {PARTS} parts of {} terms, summed into y by the tree's top levels ({asked}{cut})",
        task.kernel.name(),
        PARTS / l,
        part_width(k),
    );
    task.args[0].partition = pa;
    task.args[1].partition = px;
    task.args[2].partition = pp;
    task.launch = Dims::from_slice(&launch);
    task.scalars = vec![Scalar::I64(
        i64::try_from(part_width(k)).unwrap_or(i64::MAX),
    )];
    task.kernel = entry;
    Ok(Some(MatvecGrid {
        rows: r,
        layers: l,
        dtype,
        note,
        partial_shape: [l, m],
        sum_launch,
        sum_partitions,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_are_cut_to_the_parts_that_hold_terms() {
        assert_eq!(layers_for(100_000, 4), 4);
        assert_eq!(layers_for(100_000, 64), 8);
        assert_eq!(layers_for(100_000, 6), 4);
        assert_eq!(layers_for(100_000, 1), 1);
        // 40 terms: parts of 8, so parts 0 to 4 hold terms: the second of two layers (parts
        // 4 to 7) starts at 32, the last of four (parts 6 and 7) at 48.
        assert_eq!(layers_for(40, 8), 2);
        // 16 terms: parts 0 and 1 only, both in the first of two layers.
        assert_eq!(layers_for(16, 8), 1);
    }

    #[test]
    fn the_sums_slices_nest_in_the_products_tiles() {
        for (m, rows, layers) in [(10u64, 3u64, 2u64), (7, 1, 8), (1000, 4, 4), (5, 5, 2)] {
            let (launch, [_, _, pp]) = partitions(m, 20_000, rows, layers);
            let (sum_launch, [ps, py]) = sum_partitions(m, rows, layers);
            assert_eq!(launch, vec![rows, layers]);
            assert_eq!(sum_launch, vec![rows * layers]);
            let (Partition::Tiling(tp), Partition::Tiling(ts), Partition::Tiling(ty)) =
                (pp, ps, py)
            else {
                panic!("tilings");
            };
            let tile = tp.tile[1];
            assert!(tile * rows >= m);
            assert_eq!(ts.tile[1] * layers, tile);
            assert_eq!(ty.tile[0], ts.tile[1]);
        }
    }
}
