//! Stores, views and their storage, with split reference counts.
//!
//! A *store* is what plugins and applications hold: an n-d array of one element type. A store
//! is either a root, which owns its *storage*, or a view: an affine map onto a root's storage
//! (a [`ViewMap`]: a slice with steps, a transpose, a broadcast, a reshape).
//! Storage is allocated (as a back end's buffer) when a task or a write first touches it, and
//! freed when no store refers to it.
//!
//! Each store counts two kinds of references apart (the split reference count of the Diffuse
//! paper): *handles* (held by the application or a plugin) and *pending* tasks in the window.
//! A store whose handles are all gone is dead to the program; it is removed once no pending
//! task names it either.

use weft_ir::DType;

use weft_ir::semantics::MAX_RANK;

use crate::backend::{Backend, BufferId};
use crate::task::PluginId;
use crate::view::{ViewError, ViewMap};

pub use crate::view::row_major_strides;
use crate::{Error, Result};

/// The id of a store (a root or a view). Ids are never reused within a runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StoreId(pub u64);

/// The id of a root storage (the id of the root store that created it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StorageId(pub u64);

/// What the runtime knows of one store.
#[derive(Debug)]
pub struct StoreInfo {
    /// The storage it lives in.
    pub storage: StorageId,
    /// Its shape (the map's shape).
    pub shape: Vec<u64>,
    /// Its element type.
    pub dtype: DType,
    /// Its map onto the root storage (the identity for a root store).
    pub map: ViewMap,
    /// Live handles (application and plugins).
    pub handles: u32,
    /// Pending tasks that name it.
    pub pending: u32,
}

/// A run of a storage's elements, `lo..hi` in row-major order, held in one buffer: storage
/// element `e` is element `e - lo` of the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// The first element.
    pub lo: u64,
    /// One past the last element.
    pub hi: u64,
    /// Its buffer, once allocated.
    pub buffer: Option<BufferId>,
}

impl Piece {
    /// Whether it holds elements `lo..hi` (a piece holds an empty run inside or next to it).
    pub fn holds(&self, lo: u64, hi: u64) -> bool {
        self.lo <= lo && hi <= self.hi
    }
}

/// The piece of `pieces` (sorted by `lo`, disjoint) that holds elements `lo..hi`, if one
/// does: for an empty run, the first piece that reaches it.
pub fn piece_holding(pieces: &[Piece], lo: u64, hi: u64) -> Option<&Piece> {
    let at = pieces.partition_point(|p| p.hi < hi);
    pieces.get(at).filter(|p| p.holds(lo, hi))
}

/// One root's memory: row-major, in back-end buffers allocated on first use.
///
/// On one process one buffer holds the whole root. On one rank of several the storage is held
/// as *pieces*: the runs of elements that this rank's points use (their tiles and halos, in
/// row-major order), each in its own buffer ([`Stores::reserve`]). Pieces never overlap or
/// touch; a reservation that meets one grows it.
#[derive(Debug)]
pub struct Storage {
    /// Shape of the root.
    pub shape: Vec<u64>,
    /// Element type.
    pub dtype: DType,
    /// Sorted by `lo`. Empty until the first reservation or use; the first use of a storage
    /// that nothing reserved makes one piece of every element.
    pieces: Vec<Piece>,
    /// Number of stores (the root and its views) that refer to it.
    stores: u32,
    /// Handles to the root and its views, together.
    handles: u32,
    /// The name the application gave it (`Array::named`), for explanations.
    pub label: Option<std::sync::Arc<str>>,
    /// The plugin whose quota it counts against (none: the application's).
    owner: Option<PluginId>,
}

impl Storage {
    /// Number of elements (a root's shape is bounded when it is created, so this never
    /// saturates at `u64::MAX` in practice; it never wraps).
    pub fn len(&self) -> u64 {
        crate::view::checked_volume(&self.shape).unwrap_or(u64::MAX)
    }

    /// Whether the storage has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Its size in bytes.
    pub fn bytes(&self) -> u64 {
        self.len().saturating_mul(self.dtype.size() as u64)
    }

    /// Row-major strides, in elements.
    pub fn strides(&self) -> Vec<i64> {
        row_major_strides(&self.shape).to_vec()
    }

    /// The buffer that holds every element, once allocated (none while the storage is held as
    /// pieces of it: see [`Storage::pieces`]).
    pub fn buffer(&self) -> Option<BufferId> {
        match self.pieces.as_slice() {
            [p] if p.lo == 0 && p.hi == self.len() => p.buffer,
            _ => None,
        }
    }

    /// The pieces, sorted by their first element.
    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    /// Whether any piece has its buffer.
    pub fn is_allocated(&self) -> bool {
        self.pieces.iter().any(|p| p.buffer.is_some())
    }

    /// The piece that holds elements `lo..hi`, if one does.
    pub fn piece_of(&self, lo: u64, hi: u64) -> Option<&Piece> {
        piece_holding(&self.pieces, lo, hi)
    }

    /// Bytes of its allocated buffers.
    pub fn held_bytes(&self) -> u64 {
        let size = self.dtype.size() as u64;
        self.pieces
            .iter()
            .filter(|p| p.buffer.is_some())
            .map(|p| (p.hi - p.lo) * size)
            .sum()
    }

    /// Whether one buffer holds (or will hold, on first use) every element.
    pub fn is_whole(&self) -> bool {
        match self.pieces.as_slice() {
            [] => true,
            [p] => p.lo == 0 && p.hi == self.len(),
            _ => false,
        }
    }
}

/// The most index values [`Stores`] keeps per storage for image partitions (two per point of
/// each launch that reads through one).
pub const MAX_KNOWN_INDICES: usize = 4096;

/// The largest root store, in bytes (64 TiB): past any machine's memory, small enough that
/// byte offsets stay far from overflow.
pub const MAX_STORE_BYTES: u64 = 1 << 46;

fn missing(id: StorageId) -> Error {
    Error::Internal(format!("storage {} does not exist", id.0))
}

/// The table of stores and storages of one runtime: what exists, its shape and its reference
/// counts. Memory belongs to the back end; a storage only names its buffer.
#[derive(Debug, Default)]
pub struct Stores {
    stores: crate::FastMap<StoreId, StoreInfo>,
    storages: crate::FastMap<StorageId, Storage>,
    next: u64,
    /// Bytes of storage allocated now.
    allocated: u64,
    /// The most bytes of storage allocated at once so far.
    peak: u64,
    /// Bytes of every live storage, allocated or not (what quotas count).
    live: u64,
    /// Bytes of the live storages each plugin created.
    owned: crate::FastMap<PluginId, u64>,
    /// Index values read back from the device for image partitions
    /// ([`crate::partition::RootPartition::sub_rect_with`]), per storage and element: a
    /// storage's are forgotten whenever it may change (a task that writes it runs, the host
    /// writes it, its buffers go or move), so a matrix's row pointers are read once, not at
    /// every launch (each read waits for the device).
    indices: crate::FastMap<StorageId, crate::FastMap<u64, i64>>,
    /// Per storage, how many times something may have changed it: a task that writes it was
    /// submitted, the host wrote it, its buffers went or moved (see
    /// [`Stores::write_generation`]).
    generations: crate::FastMap<StorageId, u64>,
}

impl Stores {
    /// Creates a root store with one handle, counted against the application's quota.
    pub fn create(&mut self, shape: Vec<u64>, dtype: DType) -> Result<StoreId> {
        self.create_owned(shape, dtype, None)
    }

    /// The bytes of a root store of this shape and type, or an error where they exceed
    /// [`MAX_STORE_BYTES`] (or overflow: checked arithmetic, extents multiplied in order, so
    /// that absurd extents beside a 0 are refused too).
    pub fn store_bytes(shape: &[u64], dtype: DType) -> Result<u64> {
        shape
            .iter()
            .try_fold(1u64, |acc, &e| acc.checked_mul(e))
            .and_then(|n| n.checked_mul(dtype.size() as u64))
            .filter(|&b| b < MAX_STORE_BYTES)
            .ok_or_else(|| {
                Error::Usage(format!(
                    "store of shape {shape:?} is too large: a store of {dtype} holds less \
                     than {MAX_STORE_BYTES} bytes (2^46)"
                ))
            })
    }

    /// Bytes of every live storage, allocated or not.
    pub fn live_bytes(&self) -> u64 {
        self.live
    }

    /// Bytes of the live storages `plugin` created.
    pub fn owned_bytes(&self, plugin: PluginId) -> u64 {
        self.owned.get(&plugin).copied().unwrap_or(0)
    }

    /// Creates a root store with one handle, counted against `owner`'s quota (none: the
    /// application's). The caller checks quotas first ([`crate::Core::create_store_as`]).
    pub fn create_owned(
        &mut self,
        shape: Vec<u64>,
        dtype: DType,
        owner: Option<PluginId>,
    ) -> Result<StoreId> {
        let bytes = Self::store_bytes(&shape, dtype)?;
        if shape.len() > MAX_RANK as usize {
            return Err(Error::Usage(format!(
                "store of shape {shape:?} has rank {}, more than the maximum {MAX_RANK}",
                shape.len()
            )));
        }
        // A root is a view like any other: held to `MAX_VIEW_ELEMENTS`.
        let map = ViewMap::checked_whole(&shape).map_err(|e| Error::Usage(e.0))?;
        self.next += 1;
        let id = StoreId(self.next);
        let storage = StorageId(self.next);
        self.storages.insert(
            storage,
            Storage {
                shape: shape.clone(),
                dtype,
                pieces: Vec::new(),
                stores: 1,
                handles: 1,
                label: None,
                owner,
            },
        );
        self.live = self.live.saturating_add(bytes);
        if let Some(owner) = owner {
            let owned = self.owned.entry(owner).or_default();
            *owned = owned.saturating_add(bytes);
        }
        self.insert_view(id, storage, dtype, map);
        Ok(id)
    }

    /// Records store `id`: a view of `storage` through `map`, with one handle.
    fn insert_view(&mut self, id: StoreId, storage: StorageId, dtype: DType, map: ViewMap) {
        self.stores.insert(
            id,
            StoreInfo {
                storage,
                shape: map.shape.to_vec(),
                dtype,
                map,
                handles: 1,
                pending: 0,
            },
        );
    }

    /// Creates a view of `parent` whose map `make` derives from the parent's, with one handle.
    pub fn view(
        &mut self,
        parent: StoreId,
        make: impl FnOnce(&ViewMap) -> std::result::Result<ViewMap, ViewError>,
    ) -> Result<StoreId> {
        let info = self.get(parent)?;
        let map = make(&info.map).map_err(|e| Error::Usage(e.0))?;
        let (storage, dtype) = (info.storage, info.dtype);
        self.next += 1;
        let id = StoreId(self.next);
        if let Some(s) = self.storages.get_mut(&storage) {
            s.stores += 1;
            s.handles += 1;
        }
        self.insert_view(id, storage, dtype, map);
        Ok(id)
    }

    /// Creates a view of `parent`'s rectangle `start..stop` (in the parent's coordinates), with
    /// one handle.
    pub fn slice(&mut self, parent: StoreId, start: &[u64], stop: &[u64]) -> Result<StoreId> {
        self.view(parent, |m| m.slice(start, stop))
    }

    /// Creates a view of `parent` as NumPy reshapes it without a copy, with one handle; `None`
    /// when the parent's strides allow no such view (the caller copies).
    pub fn reshape(&mut self, parent: StoreId, shape: &[u64]) -> Result<Option<StoreId>> {
        let info = self.get(parent)?;
        match info.map.reshape(shape).map_err(|e| Error::Usage(e.0))? {
            None => Ok(None),
            Some(map) => self.view(parent, |_| Ok(map)).map(Some),
        }
    }

    /// The store's information.
    pub fn get(&self, id: StoreId) -> Result<&StoreInfo> {
        self.stores
            .get(&id)
            .ok_or_else(|| Error::Usage(format!("store {} does not exist", id.0)))
    }

    /// A storage.
    pub fn storage(&self, id: StorageId) -> Option<&Storage> {
        self.storages.get(&id)
    }

    /// Names the storage of store `id` (for a view, the storage it views) in explanations.
    pub fn set_label(&mut self, id: StoreId, label: std::sync::Arc<str>) -> Result<()> {
        let storage = self.get(id)?.storage;
        if let Some(s) = self.storages.get_mut(&storage) {
            s.label = Some(label);
        }
        Ok(())
    }

    /// The buffer that holds every element of a storage, allocating it (zeroed) through
    /// `backend` on first use; an error for a storage held as pieces (see
    /// [`Stores::reserve`]).
    pub fn ensure_buffer(&mut self, id: StorageId, backend: &mut dyn Backend) -> Result<BufferId> {
        self.ensure_allocated(id, backend, false)?;
        let storage = self.storage(id).ok_or_else(|| missing(id))?;
        storage.buffer().ok_or_else(|| {
            Error::Internal(format!(
                "storage {} is held as pieces {:?}, not whole",
                id.0,
                storage
                    .pieces
                    .iter()
                    .map(|p| (p.lo, p.hi))
                    .collect::<Vec<_>>()
            ))
        })
    }

    /// Allocates every piece of a storage that has no buffer yet (one piece of every element
    /// when nothing reserved any): zeroed, or left uncleared when `uninit`
    /// ([`Backend::alloc_uninit`]), for a storage that the next task writes whole before it
    /// reads any of it.
    pub fn ensure_allocated(
        &mut self,
        id: StorageId,
        backend: &mut dyn Backend,
        uninit: bool,
    ) -> Result<()> {
        let storage = self.storages.get_mut(&id).ok_or_else(|| missing(id))?;
        if storage.pieces.is_empty() {
            storage.pieces.push(Piece {
                lo: 0,
                hi: storage.len(),
                buffer: None,
            });
        }
        let size = storage.dtype.size() as u64;
        for piece in storage.pieces.iter_mut().filter(|p| p.buffer.is_none()) {
            let bytes = (piece.hi - piece.lo) * size;
            piece.buffer = Some(if uninit {
                backend.alloc_uninit(bytes)?
            } else {
                backend.alloc(bytes)?
            });
            self.allocated += bytes;
        }
        self.peak = self.peak.max(self.allocated);
        Ok(())
    }

    /// Takes a storage's buffers back (the storage gets fresh, zeroed ones on its next use):
    /// for buffers left uncleared for a task that then failed before writing all of them.
    /// Returns the buffers, for the caller to free.
    #[must_use = "discarded buffers must be freed"]
    pub fn discard_buffers(&mut self, id: StorageId) -> Vec<BufferId> {
        self.forget_indices(id);
        let Some(storage) = self.storages.get_mut(&id) else {
            return Vec::new();
        };
        self.allocated = self.allocated.saturating_sub(storage.held_bytes());
        storage
            .pieces
            .iter_mut()
            .filter_map(|p| p.buffer.take())
            .collect()
    }

    /// Makes storage `id` hold elements `lo..hi` (clipped to the storage) in one piece: a new
    /// piece, or the pieces it meets or touches grown into one. Unallocated pieces only
    /// change their bounds; allocated ones that grow get a new, zeroed buffer with the old
    /// contents copied to their place. On several ranks each rank reserves what each of its
    /// points uses before they run, so no rank holds elements its points do not use.
    pub fn reserve(
        &mut self,
        id: StorageId,
        lo: u64,
        hi: u64,
        backend: &mut dyn Backend,
    ) -> Result<()> {
        let storage = self.storages.get_mut(&id).ok_or_else(|| missing(id))?;
        let len = storage.len();
        let (lo, hi) = (lo.min(len), hi.min(len).max(lo.min(len)));
        if lo == hi {
            // Nothing used: an empty piece, so that the first use allocates nothing more.
            if storage.pieces.is_empty() {
                storage.pieces.push(Piece {
                    lo,
                    hi,
                    buffer: None,
                });
            }
            return Ok(());
        }
        if storage
            .pieces
            .iter()
            .any(|p| p.lo < p.hi && p.holds(lo, hi))
        {
            return Ok(());
        }
        let size = storage.dtype.size() as u64;
        let (mut new_lo, mut new_hi) = (lo, hi);
        let mut merged = Vec::new();
        let mut kept = Vec::with_capacity(storage.pieces.len() + 1);
        let mut freed = Vec::new();
        for p in storage.pieces.drain(..) {
            if p.lo == p.hi {
                freed.extend(p.buffer);
            } else if p.lo <= hi && lo <= p.hi {
                new_lo = new_lo.min(p.lo);
                new_hi = new_hi.max(p.hi);
                merged.push(p);
            } else {
                kept.push(p);
            }
        }
        let mut piece = Piece {
            lo: new_lo,
            hi: new_hi,
            buffer: None,
        };
        if merged.iter().any(|p| p.buffer.is_some()) {
            let buffer = backend.alloc((new_hi - new_lo) * size)?;
            for p in &merged {
                let Some(old) = p.buffer else { continue };
                let mut contents = vec![0u8; ((p.hi - p.lo) * size) as usize];
                let copied = backend
                    .read(old, 0, &mut contents)
                    .and_then(|()| backend.write(buffer, (p.lo - new_lo) * size, &contents));
                if let Err(e) = copied {
                    backend.free(buffer);
                    storage.pieces = kept;
                    storage.pieces.extend(merged);
                    storage.pieces.sort_by_key(|p| p.lo);
                    return Err(e);
                }
            }
            for p in &merged {
                if let Some(old) = p.buffer {
                    self.allocated -= (p.hi - p.lo) * size;
                    freed.push(old);
                }
            }
            piece.buffer = Some(buffer);
            self.allocated += (new_hi - new_lo) * size;
            self.peak = self.peak.max(self.allocated);
        }
        kept.push(piece);
        kept.sort_by_key(|p| p.lo);
        storage.pieces = kept;
        for b in freed {
            backend.free(b);
        }
        Ok(())
    }

    /// Whether the contents of `store`'s storage die once the tasks that hold `uses` of the
    /// store's pending counts have run: nothing holds a handle to the storage, the store is
    /// its only store (no views), and no other pending task names it.
    pub fn dies_with(&self, store: StoreId, uses: u32) -> bool {
        let Some(info) = self.stores.get(&store) else {
            return false;
        };
        self.storages
            .get(&info.storage)
            .is_some_and(|s| s.handles == 0 && s.stores == 1)
            && info.handles == 0
            && info.pending == uses
    }

    /// Moves the buffers of storage `from`, all allocated, to storage `to`, which has none
    /// and the same size, and whose pieces (every element, if it has none yet) lie inside
    /// `from`'s: `to` takes over memory whose contents die (see [`Stores::dies_with`]), and
    /// `from`'s pieces with it. Returns the pieces moved, or `None` (nothing moved) when a
    /// condition fails.
    pub fn hand_over(&mut self, from: StorageId, to: StorageId) -> Option<Vec<Piece>> {
        let source = self.storages.get(&from)?;
        let target = self.storages.get(&to)?;
        let whole = [Piece {
            lo: 0,
            hi: target.len(),
            buffer: None,
        }];
        let wanted = if target.pieces.is_empty() {
            &whole[..]
        } else {
            &target.pieces[..]
        };
        let inside = wanted
            .iter()
            .all(|w| w.lo == w.hi || piece_holding(&source.pieces, w.lo, w.hi).is_some());
        if from == to
            || source.pieces.is_empty()
            || source.pieces.iter().any(|p| p.buffer.is_none())
            || target.is_allocated()
            || target.bytes() != source.bytes()
            || !inside
        {
            return None;
        }
        self.forget_indices(from);
        self.forget_indices(to);
        let pieces = std::mem::take(&mut self.storages.get_mut(&from)?.pieces);
        self.storages.get_mut(&to)?.pieces = pieces.clone();
        Some(pieces)
    }

    /// The value of element `element` of storage `storage` as an index, if it was read back
    /// since the storage last changed ([`Stores::remember_index`]).
    pub fn known_index(&self, storage: StorageId, element: u64) -> Option<i64> {
        self.indices.get(&storage)?.get(&element).copied()
    }

    /// Records the value of element `element` of storage `storage`, read back from the
    /// device; at most [`MAX_KNOWN_INDICES`] per storage are kept.
    pub fn remember_index(&mut self, storage: StorageId, element: u64, value: i64) {
        let known = self.indices.entry(storage).or_default();
        if known.len() >= MAX_KNOWN_INDICES {
            known.clear();
        }
        known.insert(element, value);
    }

    /// Whether any index values are known (so a task that writes need not look at its
    /// arguments' storages when none are).
    pub fn knows_indices(&self) -> bool {
        !self.indices.is_empty()
    }

    /// Forgets the index values read back from storage `storage`: it may have changed.
    pub fn forget_indices(&mut self, storage: StorageId) {
        self.indices.remove(&storage);
    }

    /// Notes that storage `storage` may change: a task that writes it was submitted, the host
    /// writes it, or a failed task's writes were undone. Only events in program order move a
    /// generation (never what one rank's execution happens to do, such as handing a buffer
    /// over), so every rank counts the same.
    pub fn written(&mut self, storage: StorageId) {
        *self.generations.entry(storage).or_default() += 1;
    }

    /// How many times storage `storage` may have changed so far: equal numbers at two times
    /// mean nothing submitted or done between them wrote it (what the facade's cache of a
    /// mask's positions checks). Steps replayed from a trace write without submitting: they
    /// count in [`crate::core::Stats::replays_begun`] instead.
    pub fn write_generation(&self, storage: StorageId) -> u64 {
        self.generations.get(&storage).copied().unwrap_or(0)
    }

    /// Adds a handle to a store.
    pub fn retain(&mut self, id: StoreId) -> Result<()> {
        let info = self
            .stores
            .get_mut(&id)
            .ok_or_else(|| Error::Usage(format!("store {} does not exist", id.0)))?;
        info.handles += 1;
        let storage = info.storage;
        if let Some(s) = self.storages.get_mut(&storage) {
            s.handles += 1;
        }
        Ok(())
    }

    /// Drops a handle to a store, removing it (and perhaps its storage) if nothing else needs
    /// it. Returns the buffers of a removed storage, for the caller to free.
    #[must_use = "a removed storage's buffers must be freed"]
    pub fn release(&mut self, id: StoreId) -> Vec<BufferId> {
        if let Some(info) = self.stores.get_mut(&id)
            && info.handles > 0
        {
            info.handles -= 1;
            let storage = info.storage;
            if let Some(s) = self.storages.get_mut(&storage) {
                s.handles = s.handles.saturating_sub(1);
            }
        }
        self.collect(id)
    }

    /// Whether anything holds a handle to the storage's root or to any view of it.
    pub fn storage_live(&self, id: StorageId) -> bool {
        self.storages.get(&id).is_some_and(|s| s.handles > 0)
    }

    /// Counts a pending task that names the store.
    pub fn add_pending(&mut self, id: StoreId) {
        if let Some(info) = self.stores.get_mut(&id) {
            info.pending += 1;
        }
    }

    /// Uncounts a pending task, removing the store if nothing else needs it. Returns the
    /// buffers of a removed storage, for the caller to free.
    #[must_use = "a removed storage's buffers must be freed"]
    pub fn remove_pending(&mut self, id: StoreId) -> Vec<BufferId> {
        if let Some(info) = self.stores.get_mut(&id) {
            info.pending = info.pending.saturating_sub(1);
        }
        self.collect(id)
    }

    /// Whether the program can still name the store (it has a handle).
    pub fn is_live(&self, id: StoreId) -> bool {
        self.stores.get(&id).is_some_and(|s| s.handles > 0)
    }

    fn collect(&mut self, id: StoreId) -> Vec<BufferId> {
        let Some(info) = self.stores.get(&id) else {
            return Vec::new();
        };
        if info.handles > 0 || info.pending > 0 {
            return Vec::new();
        }
        let storage = info.storage;
        self.stores.remove(&id);
        let Some(s) = self.storages.get_mut(&storage) else {
            return Vec::new();
        };
        s.stores -= 1;
        if s.stores > 0 {
            return Vec::new();
        }
        self.forget_indices(storage);
        // Storage ids are never reused: a dead storage's generation is not needed again.
        self.generations.remove(&storage);
        let Some(s) = self.storages.remove(&storage) else {
            return Vec::new();
        };
        self.allocated -= s.held_bytes();
        self.live = self.live.saturating_sub(s.bytes());
        if let Some(owner) = s.owner
            && let Some(owned) = self.owned.get_mut(&owner)
        {
            *owned = owned.saturating_sub(s.bytes());
        }
        s.pieces.iter().filter_map(|p| p.buffer).collect()
    }

    /// Number of stores alive (roots and views).
    pub fn len(&self) -> usize {
        self.stores.len()
    }

    /// Whether no store is alive.
    pub fn is_empty(&self) -> bool {
        self.stores.is_empty()
    }

    /// Bytes of storage allocated now.
    pub fn allocated_bytes(&self) -> u64 {
        self.allocated
    }

    /// The most bytes of storage allocated at once so far.
    pub fn peak_bytes(&self) -> u64 {
        self.peak
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeBackend;

    #[test]
    fn views_keep_storage_alive_until_released() {
        let mut backend = FakeBackend::default();
        let mut stores = Stores::default();
        let root = stores.create(vec![4, 4], DType::F64).unwrap();
        let view = stores.slice(root, &[1, 1], &[3, 3]).unwrap();
        let storage = stores.get(view).unwrap().storage;
        let buffer = stores.ensure_buffer(storage, &mut backend).unwrap();
        assert_eq!(stores.allocated_bytes(), 128);
        assert!(stores.release(root).is_empty());
        assert!(stores.storage(storage).is_some());
        stores.add_pending(view);
        assert!(stores.release(view).is_empty());
        assert!(stores.storage(storage).is_some());
        assert_eq!(stores.remove_pending(view), vec![buffer]);
        assert!(stores.storage(storage).is_none());
        assert_eq!(stores.allocated_bytes(), 0);
        assert!(stores.is_empty());
    }

    #[test]
    fn a_storage_is_allocated_once() {
        let mut backend = FakeBackend::default();
        let mut stores = Stores::default();
        let a = stores.create(vec![3], DType::I32).unwrap();
        let s = stores.get(a).unwrap().storage;
        let b1 = stores.ensure_buffer(s, &mut backend).unwrap();
        let b2 = stores.ensure_buffer(s, &mut backend).unwrap();
        assert_eq!(b1, b2);
        assert_eq!(backend.memory().allocated, 12);
        assert_eq!(stores.allocated_bytes(), 12);
    }

    fn ints(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn spans(stores: &Stores, s: StorageId) -> Vec<(u64, u64)> {
        let storage = stores.storage(s).unwrap();
        storage.pieces().iter().map(|p| (p.lo, p.hi)).collect()
    }

    #[test]
    fn reserved_pieces_are_all_a_storage_holds_and_grow_keeping_their_contents() {
        let mut backend = FakeBackend::default();
        let mut stores = Stores::default();
        let a = stores.create(vec![20], DType::I32).unwrap();
        let s = stores.get(a).unwrap().storage;
        // Nothing used yet: an empty piece, which the first real one replaces.
        stores.reserve(s, 0, 0, &mut backend).unwrap();
        stores.reserve(s, 4, 6, &mut backend).unwrap();
        stores.reserve(s, 5, 7, &mut backend).unwrap();
        // Apart from it (a point's tile at the far end): a piece of its own.
        stores.reserve(s, 15, 16, &mut backend).unwrap();
        assert_eq!(spans(&stores, s), vec![(4, 7), (15, 16)]);
        stores.ensure_allocated(s, &mut backend, false).unwrap();
        assert_eq!(stores.allocated_bytes(), 16);
        assert_eq!(backend.memory().allocated, 16);
        let storage = stores.storage(s).unwrap();
        assert_eq!(storage.buffer(), None, "not whole");
        assert!(!storage.is_whole());
        let first = storage.piece_of(5, 7).unwrap().buffer.unwrap();
        assert_eq!(storage.piece_of(6, 8), None);
        assert_eq!(storage.piece_of(15, 16).unwrap().lo, 15);
        backend.write(first, 0, &ints(&[40, 50, 60])).unwrap();
        // Inside a piece: nothing moves.
        stores.reserve(s, 5, 6, &mut backend).unwrap();
        assert_eq!(
            stores.storage(s).unwrap().piece_of(4, 7).unwrap().buffer,
            Some(first)
        );
        // Touching it: a new buffer, the old contents at their place, zeros around them.
        stores.reserve(s, 2, 4, &mut backend).unwrap();
        assert_eq!(spans(&stores, s), vec![(2, 7), (15, 16)]);
        let grown = stores
            .storage(s)
            .unwrap()
            .piece_of(2, 7)
            .unwrap()
            .buffer
            .unwrap();
        assert_ne!(grown, first);
        let mut got = vec![0u8; 20];
        backend.read(grown, 0, &mut got).unwrap();
        assert_eq!(got, ints(&[0, 0, 40, 50, 60]));
        assert_eq!(stores.allocated_bytes(), 24);
        assert_eq!(backend.memory().allocated, 24);
        // Meeting both pieces: one piece.
        stores.reserve(s, 6, 15, &mut backend).unwrap();
        assert_eq!(spans(&stores, s), vec![(2, 16)]);
        let merged = stores
            .storage(s)
            .unwrap()
            .piece_of(2, 16)
            .unwrap()
            .buffer
            .unwrap();
        let mut got = vec![0u8; 8];
        backend.read(merged, 8, &mut got).unwrap();
        assert_eq!(got, ints(&[40, 50]));
        // Clipped to the storage; the whole of it is one piece like any other.
        stores.reserve(s, 0, 99, &mut backend).unwrap();
        assert!(stores.storage(s).unwrap().is_whole());
        assert!(stores.storage(s).unwrap().buffer().is_some());
        assert_eq!(stores.allocated_bytes(), 80);
        assert_eq!(backend.memory().allocated, 80);
        assert_eq!(stores.peak_bytes(), 80);
        assert_eq!(stores.release(a).len(), 1);
        assert_eq!(stores.allocated_bytes(), 0);
    }

    #[test]
    fn buffers_are_handed_over_to_a_storage_whose_pieces_they_hold() {
        let mut backend = FakeBackend::default();
        let mut stores = Stores::default();
        let ids: Vec<StorageId> = (0..3)
            .map(|_| {
                let a = stores.create(vec![8], DType::F64).unwrap();
                stores.get(a).unwrap().storage
            })
            .collect();
        stores.reserve(ids[0], 2, 6, &mut backend).unwrap();
        stores
            .ensure_allocated(ids[0], &mut backend, false)
            .unwrap();
        // A storage that needs every element cannot take a piece of one.
        assert_eq!(stores.hand_over(ids[0], ids[1]), None);
        // One whose pieces lie inside the piece takes it.
        stores.reserve(ids[2], 3, 5, &mut backend).unwrap();
        let moved = stores.hand_over(ids[0], ids[2]).unwrap();
        assert_eq!(moved.len(), 1);
        assert_eq!((moved[0].lo, moved[0].hi), (2, 6));
        assert_eq!(spans(&stores, ids[2]), vec![(2, 6)]);
        assert!(!stores.storage(ids[0]).unwrap().is_allocated());
        // A whole buffer goes to a storage with no pieces yet.
        let b = stores.ensure_buffer(ids[1], &mut backend).unwrap();
        let c = stores.create(vec![8], DType::F64).unwrap();
        let c = stores.get(c).unwrap().storage;
        assert_eq!(stores.hand_over(ids[1], c).unwrap()[0].buffer, Some(b));
        assert_eq!(stores.storage(c).unwrap().buffer(), Some(b));
        // Not to one already allocated, nor of another size.
        let d = stores.create(vec![9], DType::F64).unwrap();
        let d = stores.get(d).unwrap().storage;
        assert_eq!(stores.hand_over(c, d), None);
        assert_eq!(stores.hand_over(c, ids[2]), None);
    }

    #[test]
    fn stores_above_the_rank_limit_are_refused() {
        let mut stores = Stores::default();
        let shape = vec![1; MAX_RANK as usize + 1];
        let e = stores.create(shape, DType::F64).unwrap_err().to_string();
        assert!(e.contains("rank 17"), "{e}");
        assert!(stores.create(vec![1 << 40, 1 << 10], DType::F64).is_err());
    }

    #[test]
    fn roots_past_the_view_bound_are_refused_even_when_empty() {
        let mut stores = Stores::default();
        // No bytes, but extents no view may have (a product past `MAX_VIEW_ELEMENTS`).
        let e = stores
            .create(vec![0, 1 << 50], DType::F64)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("(0, 1125899906842624)") && e.contains("MAX_VIEW_ELEMENTS"),
            "{e}"
        );
        assert!(stores.create(vec![0, 1 << 40], DType::F64).is_ok());
    }

    #[test]
    fn slices_compose_into_root_maps() {
        let mut stores = Stores::default();
        let root = stores.create(vec![10, 10], DType::F32).unwrap();
        let a = stores.slice(root, &[2, 3], &[8, 9]).unwrap();
        let b = stores.slice(a, &[1, 1], &[2, 5]).unwrap();
        let map = &stores.get(b).unwrap().map;
        assert_eq!(map.offset, 34);
        assert_eq!(map.shape.as_slice(), &[1, 4]);
        assert!(stores.slice(a, &[0, 0], &[7, 1]).is_err());
    }

    #[test]
    fn strides_are_row_major() {
        assert_eq!(row_major_strides(&[2, 3, 4]).as_slice(), &[12, 4, 1]);
        assert!(row_major_strides(&[]).is_empty());
    }
}
