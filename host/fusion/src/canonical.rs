//! The canonical form of a fusible prefix: the memo key of its plan.
//!
//! Stores are renamed by first use (like De Bruijn indices), so two prefixes that differ only
//! in which stores they name share a plan (Figure 7 of the Diffuse paper). Everything the plan
//! depends on is in the key: each task's kernel, launch domain, and per argument the renamed
//! store, its partition (in root coordinates; an image names its source store) and privilege;
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

/// The index of `s` in `storages` (first use), naming it if it is new.
fn name(storages: &mut Vec<StorageId>, s: StorageId) -> usize {
    match storages.iter().position(|&x| x == s) {
        Some(i) => i,
        None => {
            storages.push(s);
            storages.len() - 1
        }
    }
}

fn partition_words(p: &RootPartition, words: &mut Vec<u64>, storages: &mut Vec<StorageId>) {
    words.push(p.view.rank() as u64);
    words.push(p.view.offset);
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
            words.push(name(storages, image.source) as u64);
            partition_words(&image.source_partition, words, storages);
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
    let mut storages: Vec<StorageId> = Vec::new();
    words.push(tasks.len() as u64);
    for task in tasks {
        words.extend(task.kernel.id().words());
        words.push(task.launch.len() as u64);
        words.extend(&task.launch);
        words.push(task.args.len() as u64);
        for arg in &task.args {
            let index = name(&mut storages, arg.storage);
            words.push(index as u64);
            words.push(privilege_word(arg.privilege));
            partition_words(&arg.root_partition, &mut words, &mut storages);
        }
    }
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
                    .and_then(|s| storages.iter().position(|&x| x == s))
                    .map_or(u64::MAX, |i| i as u64),
            );
        }
    }
    Key { words, storages }
}
