//! Stores, views and their storage, with split reference counts.
//!
//! A *store* is what plugins and applications hold: an n-d array of one element type. A store
//! is either a root, which owns its *storage*, or a view: a sub-rectangle of a root's storage.
//! Storage is allocated when a task first touches it and freed when no store refers to it.
//!
//! Each store counts two kinds of references apart (the split reference count of the Diffuse
//! paper): *handles* (held by the application or a plugin) and *pending* tasks in the window.
//! A store whose handles are all gone is dead to the program; it is removed once no pending
//! task names it either.

use std::collections::HashMap;

use weft_ir::DType;

use super::partition::Rect;
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
    /// Its shape.
    pub shape: Vec<u64>,
    /// Its element type.
    pub dtype: DType,
    /// Its rectangle in the root storage (the whole root for a root store).
    pub rect: Rect,
    /// Live handles (application and plugins).
    pub handles: u32,
    /// Pending tasks that name it.
    pub pending: u32,
}

/// One root's memory: row-major, 8-byte aligned, allocated on first use.
#[derive(Debug)]
pub struct Storage {
    /// Shape of the root.
    pub shape: Vec<u64>,
    /// Element type.
    pub dtype: DType,
    data: Option<Box<[u64]>>,
    /// Number of stores (the root and its views) that refer to it.
    stores: u32,
    /// Handles to the root and its views, together.
    handles: u32,
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

    /// Row-major strides, in elements.
    pub fn strides(&self) -> Vec<i64> {
        row_major_strides(&self.shape)
    }

    /// Whether memory has been allocated.
    pub fn is_allocated(&self) -> bool {
        self.data.is_some()
    }

    /// The integer element (`i32` or `i64`) at `index` (root coordinates), if the storage
    /// holds integers, is allocated and has that element.
    pub fn read_index(&self, index: &[u64]) -> Option<i64> {
        if index.len() != self.shape.len() || index.iter().zip(&self.shape).any(|(i, n)| i >= n) {
            return None;
        }
        let linear: u64 = index
            .iter()
            .zip(self.strides())
            .map(|(&i, s)| i * s as u64)
            .sum();
        let data = self.data.as_deref()?;
        let linear = usize::try_from(linear).ok()?;
        match self.dtype {
            DType::I64 => data.get(linear).map(|&w| w as i64),
            DType::I32 => {
                // Element `2w + h` is the bytes `4h..4h + 4` of word `w`, in memory order.
                let bytes = data.get(linear / 2)?.to_ne_bytes();
                let at = (linear % 2) * 4;
                let half: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
                Some(i64::from(i32::from_ne_bytes(half)))
            }
            _ => None,
        }
    }

    /// The bytes, allocating (zeroed) on first use.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        let bytes = self.len() as usize * self.dtype.size();
        let data = self
            .data
            .get_or_insert_with(|| vec![0u64; bytes.div_ceil(8)].into_boxed_slice());
        // SAFETY: a `[u64]` of `ceil(bytes/8)` words is valid as `bytes` bytes (u8 has no
        // alignment or validity requirements), and the borrow of `data` covers the result.
        unsafe { std::slice::from_raw_parts_mut(data.as_mut_ptr().cast::<u8>(), bytes) }
    }
}

/// Row-major strides (in elements) of a shape.
pub fn row_major_strides(shape: &[u64]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1] as i64;
    }
    strides
}

/// The table of stores and storages of one runtime.
#[derive(Debug, Default)]
pub struct Stores {
    stores: HashMap<StoreId, StoreInfo>,
    storages: HashMap<StorageId, Storage>,
    next: u64,
    /// Bytes of storage allocated now, and the most ever.
    allocated: u64,
    /// Memory of freed storages, kept for reuse (see [`Stores::allocate`]).
    pool: Vec<Box<[u64]>>,
    /// Bytes in `pool`.
    pooled: u64,
    /// The most bytes `pool` may hold.
    pool_limit: u64,
}

impl Stores {
    /// An empty table that keeps up to `pool_limit` bytes of freed memory for reuse.
    pub fn with_pool(pool_limit: u64) -> Stores {
        Stores {
            pool_limit,
            ..Stores::default()
        }
    }

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
        self.next += 1;
        let id = StoreId(self.next);
        let storage = StorageId(self.next);
        self.storages.insert(
            storage,
            Storage {
                shape: shape.clone(),
                dtype,
                data: None,
                stores: 1,
                handles: 1,
            },
        );
        let rect = Rect::whole(&shape);
        self.insert_view(id, storage, shape, dtype, rect);
        Ok(id)
    }

    /// Records store `id`: a view of `storage` as `shape` at `rect`, with one handle.
    fn insert_view(
        &mut self,
        id: StoreId,
        storage: StorageId,
        shape: Vec<u64>,
        dtype: DType,
        rect: Rect,
    ) {
        self.stores.insert(
            id,
            StoreInfo {
                storage,
                shape,
                dtype,
                rect,
                handles: 1,
                pending: 0,
            },
        );
    }

    /// Creates a view of `parent`'s rectangle `start..stop` (in the parent's coordinates), with
    /// one handle.
    pub fn slice(&mut self, parent: StoreId, start: &[u64], stop: &[u64]) -> Result<StoreId> {
        let info = self.get(parent)?;
        let rank = info.shape.len();
        if start.len() != rank || stop.len() != rank {
            return Err(Error::Usage(format!(
                "slice of a rank-{rank} store needs {rank} bounds, got {} and {}",
                start.len(),
                stop.len()
            )));
        }
        for d in 0..rank {
            if start[d] > stop[d] || stop[d] > info.shape[d] {
                return Err(Error::Usage(format!(
                    "slice {}..{} is out of range for dimension {d} of extent {}",
                    start[d], stop[d], info.shape[d]
                )));
            }
        }
        let shape: Vec<u64> = (0..rank).map(|d| stop[d] - start[d]).collect();
        let rect = Rect {
            origin: (0..rank).map(|d| info.rect.origin[d] + start[d]).collect(),
            extent: shape.clone(),
        };
        let (storage, dtype) = (info.storage, info.dtype);
        self.next += 1;
        let id = StoreId(self.next);
        if let Some(s) = self.storages.get_mut(&storage) {
            s.stores += 1;
            s.handles += 1;
        }
        self.insert_view(id, storage, shape, dtype, rect);
        Ok(id)
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

    /// The integer element at `index` of a storage (see [`Storage::read_index`]).
    pub fn read_index(&self, id: StorageId, index: &[u64]) -> Option<i64> {
        self.storages.get(&id)?.read_index(index)
    }

    /// A storage, mutably; allocation is accounted by [`Stores::allocate`].
    pub fn storage_mut(&mut self, id: StorageId) -> Option<&mut Storage> {
        self.storages.get_mut(&id)
    }

    /// Makes sure a storage's memory exists, and returns a pointer to its first byte.
    ///
    /// New memory is zeroed. It comes from the memory of freed storages of the same size when
    /// there is some (zeroed again, so that nothing of another store shows through), which
    /// spares the page faults of fresh memory in loops that free and allocate arrays of one
    /// size every iteration.
    pub fn allocate(&mut self, id: StorageId) -> Result<*mut u8> {
        let storage = self
            .storages
            .get_mut(&id)
            .ok_or_else(|| Error::Usage(format!("storage {} does not exist", id.0)))?;
        if !storage.is_allocated() {
            let bytes = storage.len() * storage.dtype.size() as u64;
            self.allocated += bytes;
            let words = (bytes as usize).div_ceil(8);
            if let Some(k) = self.pool.iter().position(|b| b.len() == words) {
                let mut data = self.pool.swap_remove(k);
                self.pooled -= words as u64 * 8;
                data.fill(0);
                storage.data = Some(data);
            }
        }
        Ok(storage.bytes_mut().as_mut_ptr())
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

    /// Drops a handle to a store, removing it (and perhaps its storage) if nothing else needs it.
    pub fn release(&mut self, id: StoreId) {
        if let Some(info) = self.stores.get_mut(&id)
            && info.handles > 0
        {
            info.handles -= 1;
            let storage = info.storage;
            if let Some(s) = self.storages.get_mut(&storage) {
                s.handles = s.handles.saturating_sub(1);
            }
        }
        self.collect(id);
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

    /// Uncounts a pending task, removing the store if nothing else needs it.
    pub fn remove_pending(&mut self, id: StoreId) {
        if let Some(info) = self.stores.get_mut(&id) {
            info.pending = info.pending.saturating_sub(1);
        }
        self.collect(id);
    }

    /// Whether the program can still name the store (it has a handle).
    pub fn is_live(&self, id: StoreId) -> bool {
        self.stores.get(&id).is_some_and(|s| s.handles > 0)
    }

    fn collect(&mut self, id: StoreId) {
        let Some(info) = self.stores.get(&id) else {
            return;
        };
        if info.handles > 0 || info.pending > 0 {
            return;
        }
        let storage = info.storage;
        self.stores.remove(&id);
        let free = match self.storages.get_mut(&storage) {
            Some(s) => {
                s.stores -= 1;
                s.stores == 0
            }
            None => false,
        };
        if free
            && let Some(s) = self.storages.remove(&storage)
            && s.is_allocated()
        {
            self.allocated -= s.len() * s.dtype.size() as u64;
            let Some(data) = s.data else {
                return;
            };
            let bytes = data.len() as u64 * 8;
            if bytes > 0 && self.pooled + bytes <= self.pool_limit {
                self.pooled += bytes;
                self.pool.push(data);
            }
        }
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

    #[test]
    fn views_keep_storage_alive_until_released() {
        let mut stores = Stores::default();
        let root = stores.create(vec![4, 4], DType::F64).unwrap();
        let view = stores.slice(root, &[1, 1], &[3, 3]).unwrap();
        let storage = stores.get(view).unwrap().storage;
        stores.allocate(storage).unwrap();
        assert_eq!(stores.allocated_bytes(), 128);
        stores.release(root);
        assert!(stores.storage(storage).is_some());
        stores.add_pending(view);
        stores.release(view);
        assert!(stores.storage(storage).is_some());
        stores.remove_pending(view);
        assert!(stores.storage(storage).is_none());
        assert_eq!(stores.allocated_bytes(), 0);
        assert!(stores.is_empty());
    }

    #[test]
    fn freed_memory_is_reused_zeroed_up_to_the_limit() {
        let mut stores = Stores::with_pool(64);
        let a = stores.create(vec![4], DType::F64).unwrap();
        let sa = stores.get(a).unwrap().storage;
        let pa = stores.allocate(sa).unwrap();
        stores.storage_mut(sa).unwrap().bytes_mut().fill(0xAB);
        stores.release(a);
        assert_eq!(stores.pooled, 32);
        // A store of the same size gets the same memory, zeroed.
        let b = stores.create(vec![2, 2], DType::I64).unwrap();
        let sb = stores.get(b).unwrap().storage;
        assert_eq!(stores.allocate(sb).unwrap(), pa);
        assert!(
            stores
                .storage_mut(sb)
                .unwrap()
                .bytes_mut()
                .iter()
                .all(|&x| x == 0)
        );
        assert_eq!(stores.pooled, 0);
        // Another size does not; the pool keeps at most its limit.
        let c = stores.create(vec![3], DType::F64).unwrap();
        let sc = stores.get(c).unwrap().storage;
        stores.allocate(sc).unwrap();
        let d = stores.create(vec![16], DType::F64).unwrap();
        let sd = stores.get(d).unwrap().storage;
        stores.allocate(sd).unwrap();
        stores.release(b);
        stores.release(d);
        assert_eq!(stores.pooled, 32, "128 bytes would pass the 64-byte limit");
        assert_eq!(stores.allocated_bytes(), 24);
    }

    #[test]
    fn slices_compose_into_root_rectangles() {
        let mut stores = Stores::default();
        let root = stores.create(vec![10, 10], DType::F32).unwrap();
        let a = stores.slice(root, &[2, 3], &[8, 9]).unwrap();
        let b = stores.slice(a, &[1, 1], &[2, 5]).unwrap();
        let rect = &stores.get(b).unwrap().rect;
        assert_eq!(rect.origin, vec![3, 4]);
        assert_eq!(rect.extent, vec![1, 4]);
        assert!(stores.slice(a, &[0, 0], &[7, 1]).is_err());
    }

    #[test]
    fn strides_are_row_major() {
        assert_eq!(row_major_strides(&[2, 3, 4]), vec![12, 4, 1]);
        assert!(row_major_strides(&[]).is_empty());
    }
}
