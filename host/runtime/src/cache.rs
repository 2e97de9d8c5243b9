//! A bounded cache with owners: the one shape of every cache the host keeps of what plugins
//! cause (fusion plans, kernels, compiled code).
//!
//! Each entry is charged to an *owner* (a plugin of the runtime, or the runtime itself) with
//! a size in bytes. The cache holds at most [`CacheLimits::entries`] entries and
//! [`CacheLimits::bytes`] bytes; inserting past either evicts, one entry at a time, the least
//! recently used entry of the owner that holds the most bytes. So an owner that floods the
//! cache evicts its own entries first, and one that stays small keeps its entries however much
//! another one inserts.
//!
//! A runtime is one tenant, and every cache lives in one runtime (its core, its planner, its
//! back end): no cache is shared between tenants.

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::Hash;

/// The bounds of a cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CacheLimits {
    /// The most entries.
    pub entries: usize,
    /// The most bytes, summed over the entries' charges.
    pub bytes: u64,
}

/// Who filled an entry: a plugin's id, or [`Owner::RUNTIME`] for what the runtime itself made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Owner(pub u32);

impl Owner {
    /// The runtime itself (kernels of no plugin: a back end's own, a test's).
    pub const RUNTIME: Owner = Owner(u32::MAX);
}

/// Counters of a cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Entries held now.
    pub entries: usize,
    /// Bytes charged now.
    pub bytes: u64,
    /// Entries evicted so far.
    pub evictions: u64,
}

struct Slot<V> {
    value: V,
    bytes: u64,
    owner: Owner,
    /// When it was last used (a tick of the cache's clock).
    used: Cell<u64>,
}

/// A map from `K` to `V` under [`CacheLimits`] (see the module documentation).
pub struct BoundedCache<K, V> {
    limits: CacheLimits,
    map: HashMap<K, Slot<V>>,
    /// Per owner: entries and bytes held.
    owners: HashMap<Owner, (usize, u64)>,
    bytes: u64,
    clock: Cell<u64>,
    evictions: u64,
}

impl<K: Eq + Hash + Clone, V> BoundedCache<K, V> {
    /// An empty cache with `limits` (a limit of 0 entries is taken as 1).
    pub fn new(limits: CacheLimits) -> Self {
        BoundedCache {
            limits: CacheLimits {
                entries: limits.entries.max(1),
                bytes: limits.bytes,
            },
            map: HashMap::new(),
            owners: HashMap::new(),
            bytes: 0,
            clock: Cell::new(0),
            evictions: 0,
        }
    }

    /// The limits.
    pub fn limits(&self) -> CacheLimits {
        self.limits
    }

    fn tick(&self) -> u64 {
        let t = self.clock.get() + 1;
        self.clock.set(t);
        t
    }

    /// The entry for `key`, marked as used now.
    pub fn get(&self, key: &K) -> Option<&V> {
        let slot = self.map.get(key)?;
        slot.used.set(self.tick());
        Some(&slot.value)
    }

    /// Whether an entry for `key` is held (without marking it used).
    pub fn contains(&self, key: &K) -> bool {
        self.map.contains_key(key)
    }

    /// Inserts `value` for `key`, charged `bytes` to `owner`, replacing any entry of `key`,
    /// and evicts what the limits require (never the new entry). Returns the evicted values
    /// (a caller may have to release what they hold).
    pub fn insert(&mut self, key: K, value: V, owner: Owner, bytes: u64) -> Vec<V> {
        let mut evicted = Vec::new();
        if let Some(old) = self.remove(&key) {
            evicted.push(old);
        }
        while !self.map.is_empty()
            && (self.map.len() + 1 > self.limits.entries
                || self.bytes.saturating_add(bytes) > self.limits.bytes)
        {
            match self.evict_one() {
                Some(v) => evicted.push(v),
                None => break,
            }
        }
        let used = Cell::new(self.tick());
        let held = self.owners.entry(owner).or_insert((0, 0));
        held.0 += 1;
        held.1 = held.1.saturating_add(bytes);
        self.bytes = self.bytes.saturating_add(bytes);
        self.map.insert(
            key,
            Slot {
                value,
                bytes,
                owner,
                used,
            },
        );
        evicted
    }

    /// Removes the entry for `key`.
    pub fn remove(&mut self, key: &K) -> Option<V> {
        let slot = self.map.remove(key)?;
        self.uncharge(slot.owner, slot.bytes);
        Some(slot.value)
    }

    /// Removes every entry for which `drop` is true, and returns their values.
    pub fn remove_where(&mut self, mut drop: impl FnMut(&K, &V) -> bool) -> Vec<V> {
        let keys: Vec<K> = self
            .map
            .iter()
            .filter(|(k, s)| drop(k, &s.value))
            .map(|(k, _)| k.clone())
            .collect();
        keys.iter().filter_map(|k| self.remove(k)).collect()
    }

    fn uncharge(&mut self, owner: Owner, bytes: u64) {
        self.bytes = self.bytes.saturating_sub(bytes);
        if let Some(held) = self.owners.get_mut(&owner) {
            held.0 = held.0.saturating_sub(1);
            held.1 = held.1.saturating_sub(bytes);
            if held.0 == 0 {
                self.owners.remove(&owner);
            }
        }
    }

    /// Evicts the least recently used entry of the owner holding the most bytes (then the
    /// most entries).
    fn evict_one(&mut self) -> Option<V> {
        let (&owner, _) = self
            .owners
            .iter()
            .max_by_key(|(o, (entries, bytes))| (*bytes, *entries, std::cmp::Reverse(**o)))?;
        let key = self
            .map
            .iter()
            .filter(|(_, s)| s.owner == owner)
            .min_by_key(|(_, s)| s.used.get())
            .map(|(k, _)| k.clone())?;
        self.evictions += 1;
        self.remove(&key)
    }

    /// What `owner` holds: entries and bytes.
    pub fn held_by(&self, owner: Owner) -> (usize, u64) {
        self.owners.get(&owner).copied().unwrap_or((0, 0))
    }

    /// The cache's counters.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            entries: self.map.len(),
            bytes: self.bytes,
            evictions: self.evictions,
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The values, in no order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.map.values().map(|s| &s.value)
    }
}

impl<K, V> std::fmt::Debug for BoundedCache<K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundedCache")
            .field("entries", &self.map.len())
            .field("bytes", &self.bytes)
            .field("limits", &self.limits)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: usize, bytes: u64) -> BoundedCache<u32, u32> {
        BoundedCache::new(CacheLimits { entries, bytes })
    }

    #[test]
    fn entries_and_bytes_stay_within_the_limits() {
        let mut c = cache(4, 100);
        for k in 0..10 {
            c.insert(k, k, Owner(0), 10);
            assert!(c.len() <= 4 && c.stats().bytes <= 100);
        }
        assert_eq!(c.stats().evictions, 6);
        let mut c = cache(100, 100);
        for k in 0..10 {
            c.insert(k, k, Owner(0), 30);
            assert!(c.stats().bytes <= 100, "{:?}", c.stats());
        }
        assert_eq!(c.len(), 3);
        // An entry larger than the whole budget still goes in, alone.
        c.insert(99, 99, Owner(0), 1000);
        assert_eq!(c.len(), 1);
        assert!(c.contains(&99));
    }

    #[test]
    fn the_least_recently_used_entry_goes_first() {
        let mut c = cache(3, u64::MAX);
        for k in 0..3 {
            c.insert(k, k, Owner(0), 1);
        }
        assert_eq!(c.get(&0), Some(&0));
        c.insert(3, 3, Owner(0), 1);
        assert!(
            c.contains(&0) && !c.contains(&1),
            "1 was the least recently used"
        );
    }

    #[test]
    fn a_flooding_owner_evicts_its_own_entries_first() {
        let mut c = cache(16, u64::MAX);
        // A quiet owner's four entries, then a flood from another owner.
        for k in 0..4 {
            c.insert(k, k, Owner(1), 1);
        }
        for k in 100..1100 {
            c.insert(k, k, Owner(2), 1);
        }
        for k in 0..4 {
            assert!(c.contains(&k), "the quiet owner keeps entry {k}");
        }
        assert_eq!(c.held_by(Owner(1)), (4, 4));
        assert_eq!(c.held_by(Owner(2)), (12, 12));
        // When the quiet owner inserts into the full cache, the flooder pays.
        c.insert(4, 4, Owner(1), 1);
        assert_eq!(c.held_by(Owner(1)), (5, 5));
        assert_eq!(c.held_by(Owner(2)), (11, 11));
    }

    #[test]
    fn replacing_and_removing_keep_the_charges_exact() {
        let mut c = cache(8, u64::MAX);
        c.insert(1, 1, Owner(0), 10);
        let old = c.insert(1, 2, Owner(3), 7);
        assert_eq!(old, vec![1]);
        assert_eq!(c.held_by(Owner(0)), (0, 0));
        assert_eq!(c.held_by(Owner(3)), (1, 7));
        assert_eq!(c.remove_where(|_, v| *v == 2), vec![2]);
        assert_eq!(c.stats().bytes, 0);
        assert!(c.is_empty());
    }
}
