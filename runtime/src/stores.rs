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

use std::collections::HashMap;

use weft_ir::DType;

use weft_ir::semantics::MAX_RANK;

use crate::backend::{Backend, BufferId};
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

/// One root's memory: row-major, in a back end's buffer allocated on first use.
#[derive(Debug)]
pub struct Storage {
    /// Shape of the root.
    pub shape: Vec<u64>,
    /// Element type.
    pub dtype: DType,
    buffer: Option<BufferId>,
    /// Number of stores (the root and its views) that refer to it.
    stores: u32,
    /// Handles to the root and its views, together.
    handles: u32,
    /// The name the application gave it (`Array::named`), for explanations.
    pub label: Option<std::sync::Arc<str>>,
}

impl Storage {
    /// Number of elements.
    pub fn len(&self) -> u64 {
        self.shape.iter().product()
    }

    /// Whether the storage has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Its size in bytes.
    pub fn bytes(&self) -> u64 {
        self.len() * self.dtype.size() as u64
    }

    /// Row-major strides, in elements.
    pub fn strides(&self) -> Vec<i64> {
        row_major_strides(&self.shape)
    }

    /// The buffer that holds it, once allocated.
    pub fn buffer(&self) -> Option<BufferId> {
        self.buffer
    }
}

/// The table of stores and storages of one runtime: what exists, its shape and its reference
/// counts. Memory belongs to the back end; a storage only names its buffer.
#[derive(Debug, Default)]
pub struct Stores {
    stores: HashMap<StoreId, StoreInfo>,
    storages: HashMap<StorageId, Storage>,
    next: u64,
    /// Bytes of storage allocated now.
    allocated: u64,
}

impl Stores {
    /// Creates a root store with one handle.
    pub fn create(&mut self, shape: Vec<u64>, dtype: DType) -> Result<StoreId> {
        let elements = shape
            .iter()
            .try_fold(1u64, |acc, &e| acc.checked_mul(e))
            .filter(|&n| {
                n.checked_mul(dtype.size() as u64)
                    .is_some_and(|b| b < (1 << 46))
            })
            .ok_or_else(|| Error::Usage(format!("store of shape {shape:?} is too large")))?;
        let _ = elements;
        if shape.len() > MAX_RANK as usize {
            return Err(Error::Usage(format!(
                "store of shape {shape:?} has rank {}, more than the maximum {MAX_RANK}",
                shape.len()
            )));
        }
        self.next += 1;
        let id = StoreId(self.next);
        let storage = StorageId(self.next);
        self.storages.insert(
            storage,
            Storage {
                shape: shape.clone(),
                dtype,
                buffer: None,
                stores: 1,
                handles: 1,
                label: None,
            },
        );
        self.insert_view(id, storage, dtype, ViewMap::whole(&shape));
        Ok(id)
    }

    /// Records store `id`: a view of `storage` through `map`, with one handle.
    fn insert_view(&mut self, id: StoreId, storage: StorageId, dtype: DType, map: ViewMap) {
        self.stores.insert(
            id,
            StoreInfo {
                storage,
                shape: map.shape.clone(),
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

    /// The buffer of a storage, allocating it (zeroed) through `backend` on first use.
    pub fn ensure_buffer(&mut self, id: StorageId, backend: &mut dyn Backend) -> Result<BufferId> {
        self.ensure_buffer_with(id, backend, false)
    }

    /// As [`Stores::ensure_buffer`], but a buffer allocated now is left uncleared when
    /// `uninit` ([`Backend::alloc_uninit`]): for a storage that the next task writes whole
    /// before it reads any of it.
    pub fn ensure_buffer_with(
        &mut self,
        id: StorageId,
        backend: &mut dyn Backend,
        uninit: bool,
    ) -> Result<BufferId> {
        let storage = self
            .storages
            .get_mut(&id)
            .ok_or_else(|| Error::Internal(format!("storage {} does not exist", id.0)))?;
        if let Some(b) = storage.buffer {
            return Ok(b);
        }
        let bytes = storage.bytes();
        let buffer = if uninit {
            backend.alloc_uninit(bytes)?
        } else {
            backend.alloc(bytes)?
        };
        storage.buffer = Some(buffer);
        self.allocated += bytes;
        Ok(buffer)
    }

    /// Takes a storage's buffer back (the storage gets a fresh, zeroed one on its next use):
    /// for a buffer left uncleared for a task that then failed before writing all of it.
    /// Returns the buffer, for the caller to free.
    #[must_use = "a discarded buffer must be freed"]
    pub fn discard_buffer(&mut self, id: StorageId) -> Option<BufferId> {
        let storage = self.storages.get_mut(&id)?;
        let buffer = storage.buffer.take()?;
        self.allocated = self.allocated.saturating_sub(storage.bytes());
        Some(buffer)
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

    /// Moves the buffer of storage `from` to storage `to`, which has none and the same size:
    /// `to` takes over memory whose contents die (see [`Stores::dies_with`]). Returns the
    /// buffer, or `None` (nothing moved) when either condition fails.
    pub fn hand_over(&mut self, from: StorageId, to: StorageId) -> Option<BufferId> {
        let bytes = self.storages.get(&from)?.bytes();
        let target = self.storages.get(&to)?;
        if from == to || target.buffer.is_some() || target.bytes() != bytes {
            return None;
        }
        let buffer = self.storages.get_mut(&from)?.buffer.take()?;
        self.storages.get_mut(&to)?.buffer = Some(buffer);
        Some(buffer)
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
    /// it. Returns the buffer of a removed storage, for the caller to free.
    #[must_use = "a removed storage's buffer must be freed"]
    pub fn release(&mut self, id: StoreId) -> Option<BufferId> {
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
    /// buffer of a removed storage, for the caller to free.
    #[must_use = "a removed storage's buffer must be freed"]
    pub fn remove_pending(&mut self, id: StoreId) -> Option<BufferId> {
        if let Some(info) = self.stores.get_mut(&id) {
            info.pending = info.pending.saturating_sub(1);
        }
        self.collect(id)
    }

    /// Whether the program can still name the store (it has a handle).
    pub fn is_live(&self, id: StoreId) -> bool {
        self.stores.get(&id).is_some_and(|s| s.handles > 0)
    }

    fn collect(&mut self, id: StoreId) -> Option<BufferId> {
        let info = self.stores.get(&id)?;
        if info.handles > 0 || info.pending > 0 {
            return None;
        }
        let storage = info.storage;
        self.stores.remove(&id);
        let s = self.storages.get_mut(&storage)?;
        s.stores -= 1;
        if s.stores > 0 {
            return None;
        }
        let s = self.storages.remove(&storage)?;
        let buffer = s.buffer?;
        self.allocated -= s.bytes();
        Some(buffer)
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
        assert_eq!(stores.release(root), None);
        assert!(stores.storage(storage).is_some());
        stores.add_pending(view);
        assert_eq!(stores.release(view), None);
        assert!(stores.storage(storage).is_some());
        assert_eq!(stores.remove_pending(view), Some(buffer));
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

    #[test]
    fn stores_above_the_rank_limit_are_refused() {
        let mut stores = Stores::default();
        let shape = vec![1; MAX_RANK as usize + 1];
        let e = stores.create(shape, DType::F64).unwrap_err().to_string();
        assert!(e.contains("rank 17"), "{e}");
        assert!(stores.create(vec![1 << 40, 1 << 10], DType::F64).is_err());
    }

    #[test]
    fn slices_compose_into_root_maps() {
        let mut stores = Stores::default();
        let root = stores.create(vec![10, 10], DType::F32).unwrap();
        let a = stores.slice(root, &[2, 3], &[8, 9]).unwrap();
        let b = stores.slice(a, &[1, 1], &[2, 5]).unwrap();
        let map = &stores.get(b).unwrap().map;
        assert_eq!(map.offset, 34);
        assert_eq!(map.shape, vec![1, 4]);
        assert!(stores.slice(a, &[0, 0], &[7, 1]).is_err());
    }

    #[test]
    fn strides_are_row_major() {
        assert_eq!(row_major_strides(&[2, 3, 4]), vec![12, 4, 1]);
        assert!(row_major_strides(&[]).is_empty());
    }
}
