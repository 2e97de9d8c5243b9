//! The canonical form of a fusible prefix: the memo key of its plan.
//!
//! Stores are renamed by first use (like De Bruijn indices), so two prefixes that differ only
//! in which stores they name share a plan (Figure 7 of the Diffuse paper). Everything the plan
//! depends on is in the key: each task's kernel, launch domain, and per argument the renamed
//! store, its partition (in root coordinates; an image names its source store; the offset of a
//! view that the prefix only reads is abstracted, see `Offsets`) and privilege;
//! per store its root shape, whether anything holds a handle to it, and whether a task after
//! the prefix reads it; and the cut that ended the prefix.

use weft_runtime::partition::RootPartition;
use weft_runtime::stores::{StorageId, Stores};
use weft_runtime::task::IndexTask;

use crate::constraints::Cut;

/// A canonical key and the stores its indices stand for.
#[derive(Clone, Debug)]
pub struct Key {
    /// The key.
    pub words: Vec<u64>,
    /// Canonical store index to the storage it names in this window.
    pub storages: Vec<StorageId>,
}

impl Key {
    /// The canonical index of a storage (first use in the prefix), if it is named.
    pub fn index_of(&self, s: StorageId) -> Option<usize> {
        self.storages.iter().position(|&x| x == s)
    }
}

/// The stores a key names, in order of first use, and each one's index.
#[derive(Default)]
struct Names {
    storages: Vec<StorageId>,
    index: weft_runtime::FastMap<StorageId, usize>,
}

impl Names {
    /// The index of `s` (first use), naming it if it is new.
    fn name(&mut self, s: StorageId) -> usize {
        *self.index.entry(s).or_insert_with(|| {
            self.storages.push(s);
            self.storages.len() - 1
        })
    }
}

/// How a partition's view offset enters the key: exactly, or (for a storage the prefix only
/// reads, through a partition without an image) as the index of that offset among the
/// storage's distinct offsets in the prefix, in order of first use.
///
/// Nothing in a plan depends on where a read-only view starts, only on which of the prefix's
/// reads of one storage name the same view (they share a fused argument): the constraints and
/// deferrals that offsets decide involve a write, temporaries are written, and iteration
/// classes compare shapes and tilings. So `trace += tanh(a[i, i])` for every `i`, or a loop
/// over shifted slices of an array it does not write, shares one plan.
struct Offsets {
    /// Storages the prefix writes or reduces into: their offsets stay exact.
    written: weft_runtime::FastSet<StorageId>,
    /// Per read-only storage, its distinct offsets and their ranks in order of first use.
    seen: weft_runtime::FastMap<StorageId, weft_runtime::FastMap<u64, usize>>,
}

impl Offsets {
    fn word(&mut self, storage: StorageId, p: &RootPartition) -> u64 {
        if p.image.is_some() || self.written.contains(&storage) {
            return p.view.offset;
        }
        let ranks = self.seen.entry(storage).or_default();
        let next = ranks.len();
        let class = *ranks.entry(p.view.offset).or_insert(next);
        // Tagged apart from every exact offset a store may have.
        (1 << 63) | class as u64
    }
}

fn partition_words(
    storage: StorageId,
    p: &RootPartition,
    words: &mut Vec<u64>,
    names: &mut Names,
    offsets: &mut Offsets,
) {
    words.push(p.view.rank() as u64);
    words.push(offsets.word(storage, p));
    words.extend(&p.view.shape);
    words.extend(p.view.strides.iter().map(|&s| s as u64));
    match &p.tiling {
        None => words.push(0),
        Some(t) => {
            words.push(1);
            words.extend(&t.tile);
            words.extend(t.offset.iter().map(|&o| o as u64));
            words.extend(t.projection.iter().map(|p| p.map_or(u64::MAX, u64::from)));
        }
    }
    match &p.image {
        None => words.push(0),
        Some(image) => {
            words.push(1);
            words.push(names.name(image.source) as u64);
            partition_words(image.source, &image.source_partition, words, names, offsets);
        }
    }
}

fn privilege_word(p: weft_ir::Privilege) -> u64 {
    match p {
        weft_ir::Privilege::Read => 1,
        weft_ir::Privilege::Write => 2,
        weft_ir::Privilege::ReadWrite => 3,
        weft_ir::Privilege::Reduce(op) => 4 + op as u64,
    }
}

/// The key of the prefix `tasks`, cut by `cut`.
pub fn key(
    tasks: &[IndexTask],
    cut: Option<&Cut>,
    stores: &Stores,
    read_after: impl Fn(StorageId) -> bool,
) -> Key {
    let mut words = Vec::with_capacity(tasks.len() * 24);
    let mut names = Names::default();
    let mut offsets = Offsets {
        written: tasks
            .iter()
            .flat_map(|t| &t.args)
            .filter(|a| !matches!(a.privilege, weft_ir::Privilege::Read))
            .map(|a| a.storage)
            .collect(),
        seen: weft_runtime::FastMap::default(),
    };
    words.push(tasks.len() as u64);
    for task in tasks {
        words.extend(task.kernel.id().words());
        words.push(task.launch.len() as u64);
        words.extend(&task.launch);
        words.push(task.args.len() as u64);
        for arg in &task.args {
            let index = names.name(arg.storage);
            words.push(index as u64);
            words.push(privilege_word(arg.privilege));
            partition_words(
                arg.storage,
                &arg.root_partition,
                &mut words,
                &mut names,
                &mut offsets,
            );
        }
    }
    let Names { storages, index } = names;
    for &s in &storages {
        let live = stores.storage_live(s);
        words.push(u64::from(live) | (u64::from(read_after(s)) << 1));
        match stores.storage(s) {
            Some(st) => {
                words.push(st.shape.len() as u64);
                words.extend(&st.shape);
            }
            None => words.push(u64::MAX),
        }
    }
    match cut {
        None => words.push(u64::MAX),
        Some(c) => {
            words.push(c.constraint as u64);
            words.push(
                c.storage
                    .and_then(|s| index.get(&s).copied())
                    .map_or(u64::MAX, |i| i as u64),
            );
        }
    }
    Key { words, storages }
}
