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
//! Every operation costs at most a logarithm of the entries (amortized): a hit only stamps its
//! entry with the clock, and each owner keeps its keys ordered by the stamp they had when last
//! indexed. Eviction takes the owner's first key; if that entry was used since it was indexed,
//! it is indexed again under its newer stamp and the next one is tried. Stamps only grow, so
//! the first key whose stamp is current is the least recently used. (A scan of every entry per
//! eviction made a loop of memo misses, one per `a[i, i]`, spend a tenth of its time here.)
//!
//! Keys are hashed with foldhash, seeded per cache: a plan's key is a few words per task, and
//! SipHash over a 64-task window's key cost a sixth of a memo hit; the seed keeps a plugin
//! from choosing keys that collide.
//!
//! A runtime is one tenant, and every cache lives in one runtime (its core, its planner, its
//! back end): no cache is shared between tenants.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
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
    /// The stamp it is filed under in its owner's [`Held::order`] (at most `used`).
    indexed: u64,
}

/// What one owner holds.
struct Held<K> {
    entries: usize,
    bytes: u64,
    /// Its keys by the stamp they were filed under.
    order: BTreeMap<u64, K>,
}

impl<K> Default for Held<K> {
    fn default() -> Self {
        Held {
            entries: 0,
            bytes: 0,
            order: BTreeMap::new(),
        }
    }
}

/// A map from `K` to `V` under [`CacheLimits`] (see the module documentation).
pub struct BoundedCache<K, V> {
    limits: CacheLimits,
    map: HashMap<K, Slot<V>, foldhash::fast::RandomState>,
    /// Per owner: entries and bytes held, and its keys in the order of use.
    owners: HashMap<Owner, Held<K>>,
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
            map: HashMap::default(),
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

    /// The entry for `key` (or anything the key type borrows as, such as a slice for shared
    /// slice keys), marked as used now.
    pub fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let slot = self.map.get(key)?;
        slot.used.set(self.tick());
        Some(&slot.value)
    }

    /// The entry for `key`, mutable, marked as used now.
    pub fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let t = self.tick();
        let slot = self.map.get_mut(key)?;
        slot.used.set(t);
        Some(&mut slot.value)
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
        let stamp = self.tick();
        let held = self.owners.entry(owner).or_default();
        held.entries += 1;
        held.bytes = held.bytes.saturating_add(bytes);
        held.order.insert(stamp, key.clone());
        self.bytes = self.bytes.saturating_add(bytes);
        self.map.insert(
            key,
            Slot {
                value,
                bytes,
                owner,
                used: Cell::new(stamp),
                indexed: stamp,
            },
        );
        evicted
    }

    /// Removes the entry for `key`.
    pub fn remove(&mut self, key: &K) -> Option<V> {
        let slot = self.map.remove(key)?;
        self.uncharge(slot.owner, slot.bytes, Some(slot.indexed));
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

    /// Takes an entry's charge off its owner, and its key out of the owner's order where it
    /// is still filed there (under `indexed`).
    fn uncharge(&mut self, owner: Owner, bytes: u64, indexed: Option<u64>) {
        self.bytes = self.bytes.saturating_sub(bytes);
        if let Some(held) = self.owners.get_mut(&owner) {
            held.entries = held.entries.saturating_sub(1);
            held.bytes = held.bytes.saturating_sub(bytes);
            if let Some(stamp) = indexed {
                held.order.remove(&stamp);
            }
            if held.entries == 0 {
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
            .max_by_key(|(o, h)| (h.bytes, h.entries, std::cmp::Reverse(**o)))?;
        let held = self.owners.get_mut(&owner)?;
        loop {
            let (stamp, key) = held.order.pop_first()?;
            let Some(slot) = self.map.get_mut(&key) else {
                continue; // not reachable: removal unfiles a key
            };
            let used = slot.used.get();
            if used == stamp {
                let slot = self.map.remove(&key)?;
                self.evictions += 1;
                self.uncharge(slot.owner, slot.bytes, None);
                return Some(slot.value);
            }
            // Used since it was filed: file it under its newer stamp.
            slot.indexed = used;
            held.order.insert(used, key);
        }
    }

    /// What `owner` holds: entries and bytes.
    pub fn held_by(&self, owner: Owner) -> (usize, u64) {
        self.owners
            .get(&owner)
            .map_or((0, 0), |h| (h.entries, h.bytes))
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

    /// The policy as the module states it, by a scan of every entry: what the cache must do.
    struct Model {
        limits: CacheLimits,
        /// key -> (owner, bytes, last use)
        entries: std::collections::BTreeMap<u32, (u32, u64, u64)>,
        clock: u64,
    }

    impl Model {
        fn get(&mut self, k: u32) -> bool {
            self.clock += 1;
            match self.entries.get_mut(&k) {
                Some(e) => {
                    e.2 = self.clock;
                    true
                }
                None => false,
            }
        }

        fn insert(&mut self, k: u32, owner: u32, bytes: u64) {
            self.entries.remove(&k);
            loop {
                let held: u64 = self.entries.values().map(|e| e.1).sum();
                if self.entries.is_empty()
                    || (self.entries.len() < self.limits.entries
                        && held.saturating_add(bytes) <= self.limits.bytes)
                {
                    break;
                }
                let mut per_owner: std::collections::BTreeMap<u32, (u64, usize)> =
                    Default::default();
                for e in self.entries.values() {
                    let p = per_owner.entry(e.0).or_default();
                    p.0 += e.1;
                    p.1 += 1;
                }
                let (&victim_owner, _) = per_owner
                    .iter()
                    .max_by_key(|(o, (b, n))| (*b, *n, std::cmp::Reverse(**o)))
                    .expect("not empty");
                let (&victim, _) = self
                    .entries
                    .iter()
                    .filter(|(_, e)| e.0 == victim_owner)
                    .min_by_key(|(_, e)| e.2)
                    .expect("the owner holds an entry");
                self.entries.remove(&victim);
            }
            self.clock += 1;
            self.entries.insert(k, (owner, bytes, self.clock));
        }
    }

    proptest::proptest! {
        /// Any sequence of inserts and hits leaves the cache holding exactly the keys that the
        /// policy, computed by a scan of every entry, holds.
        #[test]
        fn evictions_follow_the_policy_exactly(
            ops in proptest::collection::vec((0u32..24, 0u32..3, 1u64..40, proptest::bool::ANY), 1..300),
            entries in 1usize..12,
            bytes in 20u64..400,
        ) {
            let limits = CacheLimits { entries, bytes };
            let mut c = BoundedCache::new(limits);
            let mut m = Model { limits, entries: Default::default(), clock: 0 };
            for (k, owner, size, hit) in ops {
                if hit {
                    proptest::prop_assert_eq!(c.get(&k).is_some(), m.get(k));
                } else {
                    c.insert(k, k, Owner(owner), size);
                    m.insert(k, owner, size);
                }
                let held: Vec<u32> = m.entries.keys().copied().collect();
                let mut got: Vec<u32> = c.values().copied().collect();
                got.sort_unstable();
                proptest::prop_assert_eq!(got, held);
                for o in 0..3 {
                    let (n, b) = m.entries.values().filter(|e| e.0 == o).fold((0, 0), |(n, b), e| (n + 1, b + e.1));
                    proptest::prop_assert_eq!(c.held_by(Owner(o)), (n, b));
                }
            }
        }
    }
}
