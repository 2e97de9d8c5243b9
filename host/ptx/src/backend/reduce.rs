//! Float reductions of the GPU back end, in the canonical order: a rank-1 loop's leaves (and
//! a rank-2 loop's whose rows span the view) reduced by the canonical tree on the device
//! ([`crate::tree`]), other loops' leaves and element trees read back and reduced on the
//! host.

use std::ops::{Add, Mul};
use std::sync::Arc;

use weft_ir::reduction::{DenseShape, ELEMENT_BLOCK_LEVEL, Partial, dense_nodes};
use weft_ir::{DType, ReduceOp, Scalar};
use weft_runtime::{Backend, Binding, BufferId, KernelEntry, KernelId, Owner};

use super::{PtxBackend, StoreArg, elements};
use crate::device::{Device, Grid};
use crate::emit::Leaf;
use crate::{Error, Result};

impl<D: Device> PtxBackend<D> {
    /// The bytes of a whole buffer of the back end.
    fn read_all(&mut self, buffer: BufferId) -> Result<Vec<u8>> {
        let (address, bytes) = self.buffer(buffer)?;
        let mut out = vec![0u8; usize::try_from(bytes).unwrap_or(0)];
        self.device.read(address, &mut out)?;
        Ok(out)
    }

    /// Copies a leaf buffer to the host and reduces it into the canonical tree's nodes over
    /// the loop's sub-store `over`.
    pub(super) fn leaf_partial(
        &mut self,
        leaf: &Leaf,
        buffer: BufferId,
        over: &StoreArg,
    ) -> Result<Partial> {
        let bytes = self.read_all(buffer)?;
        let mut part = Partial::new(leaf.op, leaf.dtype, &over.view);
        let shape = DenseShape {
            lo: 0,
            hi: over.extents.first().copied().unwrap_or(1),
            extents: &over.extents,
            origin: &over.origin,
            view: &over.view,
        };
        let product = leaf.op == ReduceOp::Prod;
        let done = match leaf.dtype {
            DType::F64 => {
                let mut v: Vec<f64> = bytes.chunks_exact(8).map(f64_of).collect();
                let f = if product { f64::mul } else { f64::add };
                dense_nodes(&mut v, &shape, &mut part, f, Scalar::F64)
            }
            _ => {
                let mut v: Vec<f32> = bytes.chunks_exact(4).map(f32_of).collect();
                let f = if product { f32::mul } else { f32::add };
                dense_nodes(&mut v, &shape, &mut part, f, Scalar::F32)
            }
        };
        done.map_err(|e| Error::Memory(format!("a reduction's leaves: {e}")))?;
        Ok(part)
    }

    /// The shared-memory tree module of `op` on `dtype` ([`crate::tree::block`]), loaded
    /// once: its pass and fold entries.
    fn block_tree(&mut self, op: ReduceOp, dtype: DType) -> Result<Vec<D::Function>> {
        if let Some(f) = self.block_trees.get(&(op.name(), dtype)) {
            return Ok(f.clone());
        }
        let text = crate::tree::block::module(op, dtype);
        let name = format!("weft.gpu.tree.{}.{}", op.name(), dtype.name());
        let entries = [
            "weft_tree_pass".to_string(),
            "weft_tree_fold".to_string(),
            "weft_tree_pass_fold".to_string(),
        ];
        let loaded = self.device.load(&name, &text, &entries)?;
        self.block_trees
            .insert((op.name(), dtype), loaded.functions.clone());
        Ok(loaded.functions)
    }

    /// Runs the passes of the shared-memory tree over a rank-1 loop's leaves (global
    /// coordinates `start .. start + points`) that hold the complete aligned nodes of levels
    /// up to `levels.start` at their first leaf ([`crate::emit::Entry::leaf_level`]), at the
    /// levels `levels.start`, `levels.start + LEVELS`, ... below `levels.end`: with no end
    /// below 63, afterwards every complete aligned node of the range lies at its first leaf.
    /// One launch per [`crate::tree::block::LEVELS`] levels.
    pub(super) fn block_tree_passes(
        &mut self,
        leaf: &Leaf,
        buffer: BufferId,
        (start, points): (u64, u64),
        levels: std::ops::Range<u32>,
    ) -> Result<()> {
        use crate::tree::block::{BLOCK, LEVELS, THREADS};
        let functions = self.block_tree(leaf.op, leaf.dtype)?;
        let (address, _) = self.buffer(buffer)?;
        let mut level = levels.start;
        while level < levels.end.min(63) && (2u64 << level) <= points {
            let first = start.div_ceil(1 << level);
            let end = (start + points) >> level;
            let blocks = (end - 1) / BLOCK - first / BLOCK + 1;
            let grid = Grid {
                blocks: [
                    u32::try_from(blocks).map_err(|_| {
                        Error::Memory(format!("a reduction of {points} points is too long"))
                    })?,
                    1,
                    1,
                ],
                threads: [THREADS as u32, 1, 1],
            };
            self.device.launch(
                &functions[0],
                grid,
                &[address, start, points, u64::from(level)],
            )?;
            level += LEVELS;
        }
        Ok(())
    }

    /// The maximal aligned nodes of a rank-1 loop's range after [`Self::block_tree_passes`],
    /// gathered on the device in order and read in one copy.
    pub(super) fn block_tree_nodes(
        &mut self,
        leaf: &Leaf,
        buffer: BufferId,
        start: u64,
        points: u64,
        over: &StoreArg,
    ) -> Result<Partial> {
        let (_, nodes) = crate::tree::plan(start, points);
        let size = leaf.dtype.size() as u64;
        let gathered = self.new_buffer(crate::tree::block::MAX_NODES * size, false)?;
        let result = self.fold_entry(leaf, buffer, (start, points), gathered, 0, false);
        let mut bytes = vec![0u8; nodes.len() * size as usize];
        let read = result.and_then(|()| self.drain_faults()).and_then(|()| {
            let (to, _) = self.buffer(gathered)?;
            self.device
                .read(to, &mut bytes)
                .map_err(|e| Error::Driver(format!("reading a reduction's nodes: {e}")))
        });
        self.free(gathered);
        read?;
        let mut part = Partial::new(leaf.op, leaf.dtype, &over.view);
        for (node, raw) in nodes.iter().zip(bytes.chunks_exact(size as usize)) {
            part.add_node(&[], node.level, node.index, scalar_of(leaf.dtype, raw))
                .map_err(|e| Error::Memory(format!("a reduction's node: {e}")))?;
        }
        Ok(part)
    }

    /// The passes of [`Self::block_tree_passes`] over a whole view's leaves (`points` of them,
    /// holding the nodes up to level `from`) and the fold into the 0-d target at `target`:
    /// where the last pass is one block, that block folds (`weft_tree_pass_fold`), one launch
    /// instead of two.
    pub(super) fn block_tree_passes_and_fold(
        &mut self,
        leaf: &Leaf,
        buffer: BufferId,
        points: u64,
        from: u32,
        target: u64,
    ) -> Result<()> {
        use crate::tree::block::{BLOCK, LEVELS};
        let mut last = None;
        let mut level = from;
        while level < 63 && (2u64 << level) <= points {
            last = Some(level);
            level += LEVELS;
        }
        let one_block = last.is_some_and(|l| ((points >> l) - 1) / BLOCK == 0);
        let Some(last) = last.filter(|_| one_block) else {
            self.block_tree_passes(leaf, buffer, (0, points), from..63)?;
            return self.block_tree_fold(leaf, buffer, points, target);
        };
        // Every pass but the last, then the last with the fold.
        if last > from {
            self.block_tree_passes(leaf, buffer, (0, points), from..last)?;
        }
        let functions = self.block_tree(leaf.op, leaf.dtype)?;
        let (address, _) = self.buffer(buffer)?;
        let size = leaf.dtype.size() as u64;
        let gathered = self.new_buffer(crate::tree::block::MAX_NODES * size, false)?;
        let nodes = self.buffer(gathered).map(|(a, _)| a);
        let result = nodes.and_then(|nodes| {
            let grid = Grid {
                blocks: [1, 1, 1],
                threads: [crate::tree::block::THREADS as u32, 1, 1],
            };
            self.device.launch(
                &functions[2],
                grid,
                &[address, 0, points, u64::from(last), nodes, target],
            )
        });
        self.free(gathered);
        result
    }

    /// Folds a whole view's leaves (after [`Self::block_tree_passes`]) into the 0-d target
    /// at `target` on the device: `target = target op root`.
    pub(super) fn block_tree_fold(
        &mut self,
        leaf: &Leaf,
        buffer: BufferId,
        points: u64,
        target: u64,
    ) -> Result<()> {
        let size = leaf.dtype.size() as u64;
        let gathered = self.new_buffer(crate::tree::block::MAX_NODES * size, false)?;
        let result = self.fold_entry(leaf, buffer, (0, points), gathered, target, true);
        self.free(gathered);
        result
    }

    /// Launches the fold entry over leaves `buffer` (global coordinates `range`: start and
    /// count) into node buffer `nodes`.
    fn fold_entry(
        &mut self,
        leaf: &Leaf,
        buffer: BufferId,
        (start, points): (u64, u64),
        nodes: BufferId,
        target: u64,
        fold: bool,
    ) -> Result<()> {
        let functions = self.block_tree(leaf.op, leaf.dtype)?;
        let (leaves, _) = self.buffer(buffer)?;
        let (nodes, _) = self.buffer(nodes)?;
        let one = Grid {
            blocks: [1, 1, 1],
            threads: [1, 1, 1],
        };
        self.device.launch(
            &functions[1],
            one,
            &[leaves, start, points, nodes, target, u64::from(fold)],
        )
    }

    /// A rank-1 loop's leaves, or a rank-2 loop's whose rows are whole lines of the view,
    /// reduced on the device by the canonical tree ([`crate::tree`]): the level launches,
    /// each over rank-2 views of the leaves (lines, pairs) as the level kernel takes them,
    /// then the complete nodes read back.
    pub(super) fn device_tree(
        &mut self,
        leaf: &Leaf,
        buffer: BufferId,
        over: &StoreArg,
        points: u64,
    ) -> Result<Partial> {
        let start = u64::try_from(over.origin.first().copied().unwrap_or(0)).unwrap_or(0);
        let (steps, nodes) = match over.extents.as_slice() {
            [_, width] => {
                let width = u64::try_from(*width).unwrap_or(0).max(1);
                crate::tree::plan_rows(start, points / width, width)
            }
            _ => crate::tree::plan(start, points),
        };
        let level = self.tree_kernel(leaf.op, leaf.dtype)?;
        let size = leaf.dtype.size();
        let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let view = |offset: u64, step: &crate::tree::LevelStep| Binding::Buffer {
            buffer,
            offset,
            extents: weft_runtime::smallvec::smallvec![int(step.lines), int(step.count)],
            strides: weft_runtime::smallvec::smallvec![int(step.line_stride), int(step.stride)],
            origin: weft_runtime::smallvec::smallvec![0, 0],
            view: weft_runtime::smallvec::smallvec![step.lines, step.count],
            element_size: size,
            deferred: None,
        };
        for step in &steps {
            let pair = [
                view(step.offset, step),
                view(step.offset + step.right, step),
            ];
            self.launch(level, &pair, &[])
                .map_err(|e| Error::Driver(format!("a reduction tree's level: {e}")))?;
        }
        // The complete nodes, gathered on the device into one small buffer and read in one
        // copy (one round trip, not one per node).
        let (address, _) = self.buffer(buffer)?;
        let size = size as u64;
        let gathered = self.new_buffer(nodes.len() as u64 * size, false)?;
        let (to, _) = self.buffer(gathered)?;
        let mut copied = Ok(());
        for (i, node) in nodes.iter().enumerate() {
            copied = copied.and_then(|()| {
                self.device
                    .copy(to + i as u64 * size, address + node.local * size, size)
            });
        }
        let mut bytes = vec![0u8; nodes.len() * size as usize];
        let read = copied.and_then(|()| self.drain_faults()).and_then(|()| {
            self.device
                .read(to, &mut bytes)
                .map_err(|e| Error::Driver(format!("reading a reduction's nodes: {e}")))
        });
        self.free(gathered);
        read?;
        let mut part = Partial::new(leaf.op, leaf.dtype, &over.view);
        for (node, raw) in nodes.iter().zip(bytes.chunks_exact(size as usize)) {
            let value = scalar_of(leaf.dtype, raw);
            part.add_node(&[], node.level, node.index, value)
                .map_err(|e| Error::Memory(format!("a reduction's node: {e}")))?;
        }
        Ok(part)
    }

    /// The tree level kernel of `op` on `dtype`, prepared.
    fn tree_kernel(&mut self, op: ReduceOp, dtype: DType) -> Result<KernelId> {
        let entry = match self.levels.get(&(op.name(), dtype)) {
            Some(entry) => entry.clone(),
            None => {
                let kernel = crate::tree::level_kernel(op, dtype).map_err(Error::Memory)?;
                let name = kernel.name.clone();
                let entry = KernelEntry::new(&name, &kernel)
                    .map_err(|e| Error::Memory(format!("{name}: {e}")))?;
                let entry = Arc::new(entry);
                self.levels.insert((op.name(), dtype), entry.clone());
                entry
            }
        };
        // Prepared again if the module cache evicted it.
        self.prepare(&entry, Owner::RUNTIME)
            .map_err(|e| Error::Memory(format!("{}: {e}", entry.name())))?;
        Ok(entry.id())
    }

    /// Copies an element tree's buffer to the host and hands each row to each element's
    /// blocked partial, as a block or a loose point: `(element coordinates in the target's
    /// view, partial)` per element of the target's sub-store.
    pub(super) fn tree_partials(
        &mut self,
        tree: &Leaf,
        buffer: BufferId,
        units: &Units,
        target: &StoreArg,
        over: &StoreArg,
    ) -> Result<Vec<(Vec<u64>, Partial)>> {
        let bytes = self.read_all(buffer)?;
        let width = usize::try_from(elements(&target.extents)).unwrap_or(0);
        let size = tree.dtype.size();
        let view = over.view.first().copied().unwrap_or(0);
        let mut out = Vec::with_capacity(width);
        for e in 0..width {
            let mut part = Partial::blocked(tree.op, tree.dtype, view, ELEMENT_BLOCK_LEVEL);
            for u in 0..units.count() {
                let at = (usize::try_from(u).unwrap_or(usize::MAX))
                    .saturating_mul(width)
                    .saturating_add(e)
                    .saturating_mul(size);
                let raw = bytes.get(at..at.saturating_add(size)).unwrap_or(&[]);
                let value = scalar_of(tree.dtype, raw);
                let added = match units.unit(u) {
                    Ok(block) => part.add_block(block, value),
                    Err(point) => part.add(&[point], value),
                };
                added.map_err(|err| Error::Memory(format!("an element tree: {err}")))?;
            }
            // The element's coordinates in the target's view.
            let mut rest = e as u64;
            let mut element = vec![0u64; target.extents.len()];
            for d in (0..element.len()).rev() {
                let ext = u64::try_from(target.extents[d]).unwrap_or(1).max(1);
                let origin = target
                    .origin
                    .get(d)
                    .and_then(|&o| u64::try_from(o).ok())
                    .unwrap_or(0);
                element[d] = origin + rest % ext;
                rest /= ext;
            }
            out.push((element, part));
        }
        Ok(out)
    }
}

/// How an entry with element trees cuts its loop's points into units (see
/// [`crate::emit::Entry::trees`]): loose points, whole aligned blocks of the canonical
/// order, loose points.
pub(super) struct Units {
    /// Loose points before the first whole block.
    pub(super) head: u64,
    /// The local index where the whole blocks end.
    pub(super) whole_end: u64,
    /// The loop's points.
    points: u64,
    /// The global coordinate of local index 0.
    origin: u64,
    /// The first whole block's index.
    first_block: u64,
}

impl Units {
    /// The units of `points` points from global coordinate `origin`, in a view of extent
    /// `view`: a block (aligned, the last clipped to the view) is whole when the points
    /// cover all of it.
    pub(super) fn new(origin: u64, points: u64, view: u64) -> Units {
        let block = 1u64 << ELEMENT_BLOCK_LEVEL;
        let end = origin.saturating_add(points);
        let first = origin.div_ceil(block);
        let past_last = if end >= view {
            view.div_ceil(block)
        } else {
            end / block
        };
        let (head, whole_end) = if first < past_last {
            (
                first * block - origin,
                (past_last * block).min(view) - origin,
            )
        } else {
            (points, points)
        };
        Units {
            head,
            whole_end,
            points,
            origin,
            first_block: first,
        }
    }

    fn blocks(&self) -> u64 {
        (self.whole_end - self.head).div_ceil(1 << ELEMENT_BLOCK_LEVEL)
    }

    /// How many units (rows of a tree buffer).
    pub(super) fn count(&self) -> u64 {
        self.head + self.blocks() + (self.points - self.whole_end)
    }

    /// What unit `u` is: `Ok(block index)` or `Err(global coordinate of a loose point)`.
    pub(super) fn unit(&self, u: u64) -> std::result::Result<u64, u64> {
        if u < self.head {
            Err(self.origin + u)
        } else if u < self.head + self.blocks() {
            Ok(self.first_block + (u - self.head))
        } else {
            Err(self.origin + self.whole_end + (u - self.head - self.blocks()))
        }
    }
}

/// An `f64` from its little-endian bytes (0 if they are not 8).
fn f64_of(raw: &[u8]) -> f64 {
    f64::from_le_bytes(raw.try_into().unwrap_or([0; 8]))
}

/// An `f32` from its little-endian bytes (0 if they are not 4).
fn f32_of(raw: &[u8]) -> f32 {
    f32::from_le_bytes(raw.try_into().unwrap_or([0; 4]))
}

/// A float of `dtype` (`f32`, else `f64`) from its little-endian bytes.
fn scalar_of(dtype: DType, raw: &[u8]) -> Scalar {
    match dtype {
        DType::F32 => Scalar::F32(f32_of(raw)),
        _ => Scalar::F64(f64_of(raw)),
    }
}

#[cfg(test)]
mod tests {
    use super::Units;

    const B: u64 = 1 << weft_ir::reduction::ELEMENT_BLOCK_LEVEL;

    fn kinds(u: &Units) -> Vec<std::result::Result<u64, u64>> {
        (0..u.count()).map(|i| u.unit(i)).collect()
    }

    #[test]
    fn units_are_whole_blocks_and_loose_points() {
        // One clipped block that the points cover whole.
        let u = Units::new(0, 300, 300);
        assert_eq!(kinds(&u), vec![Ok(0)]);
        // Three blocks, the last clipped by the view.
        let u = Units::new(0, 2 * B + 7, 2 * B + 7);
        assert_eq!(kinds(&u), vec![Ok(0), Ok(1), Ok(2)]);
        // A piece inside one block: every point loose.
        let u = Units::new(100, 50, 10 * B);
        assert_eq!(kinds(&u), (100..150).map(Err).collect::<Vec<_>>());
        // Loose points, a whole block, loose points.
        let u = Units::new(B - 2, B + 5, 10 * B);
        let mut want = vec![Err(B - 2), Err(B - 1), Ok(1)];
        want.extend((2 * B..2 * B + 3).map(Err));
        assert_eq!(kinds(&u), want);
        // Every point of the view is in exactly one unit.
        for (origin, points, view) in [(0, 5 * B + 3, 5 * B + 3), (3, 3 * B, 4 * B), (7, 9, 16)] {
            let u = Units::new(origin, points, view);
            let covered: u64 = kinds(&u)
                .iter()
                .map(|k| match k {
                    Ok(b) => ((b + 1) * B).min(view) - b * B,
                    Err(_) => 1,
                })
                .sum();
            assert_eq!(covered, points, "{origin} {points} {view}");
        }
    }
}
