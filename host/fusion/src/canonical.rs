//! The canonical form of a fusible prefix: the memo key of its plan.
//!
//! Stores are renamed by first use (like De Bruijn indices), so two prefixes that differ only
//! in which stores they name share a plan (Figure 7 of the Diffuse paper). Everything the plan
//! depends on is in the key: each task's kernel, launch domain, and per argument the renamed
//! store, its partition (in root coordinates; an image names its source store; the offset of a
//! view that the prefix only reads is abstracted, see `Offsets`) and privilege;
//! per store its root shape, whether anything holds a handle to it, and whether a task after
//! the prefix reads it; the cut that ended the prefix, the writes it defers (with their
//! halos) and its temporaries.
//!
//! The numbers of launches, views, tilings and root shapes enter the key as *classes*: the
//! index of the value among the distinct values of the key so far, in order of first
//! appearance (see `Values`). Two prefixes whose numbers differ but are equal and unequal in
//! the same places share a plan: a loop over `L[i, :i]`, or over a view that moves each step,
//! plans once, not once per step. This is sound because what the plan makes from numbers
//! only compares them for equality (which arguments are the same partition, which loops are
//! in one iteration class); the decisions that need arithmetic on them (where the prefix is
//! cut and which writes are deferred, with their halos, run on every call; which stores are
//! temporary, which needs whether a write covers its store) are computed before the lookup
//! and are part of the key.

use std::sync::Arc;

use weft_runtime::partition::RootPartition;
use weft_runtime::stores::{StorageId, Stores};
use weft_runtime::task::IndexTask;

use crate::constraints::{Cut, Deferral};

/// A canonical key and the stores its indices stand for.
#[derive(Clone, Debug)]
pub struct Key {
    /// The key (shared: a plan's memo entries and the windows it serves hold one copy).
    pub words: Arc<[u64]>,
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

/// A view offset as the key takes it.
enum Offset {
    /// The offset itself (it enters the key as its class among the key's numbers).
    Exact(u64),
    /// The word of a read-only view's offset: its rank among its storage's offsets, tagged.
    Abstracted(u64),
}

impl Offsets {
    fn word(&mut self, storage: StorageId, p: &RootPartition) -> Offset {
        if p.image.is_some() || self.written.contains(&storage) {
            return Offset::Exact(p.view.offset);
        }
        let ranks = self.seen.entry(storage).or_default();
        let next = ranks.len();
        let class = *ranks.entry(p.view.offset).or_insert(next);
        // Tagged apart from every class of an exact offset.
        Offset::Abstracted((1 << 63) | class as u64)
    }
}

/// The classes of the key's numbers: each distinct value gets the next index at its first
/// appearance, so a key keeps which numbers are equal, and nothing else about them.
#[derive(Default)]
struct Values {
    classes: weft_runtime::FastMap<u64, u64>,
}

impl Values {
    /// The class of `v`.
    fn class(&mut self, v: u64) -> u64 {
        let next = self.classes.len() as u64;
        *self.classes.entry(v).or_insert(next)
    }

    /// Pushes the classes of `values` onto `words`.
    fn push_all(&mut self, words: &mut Vec<u64>, values: impl IntoIterator<Item = u64>) {
        for v in values {
            words.push(self.class(v));
        }
    }
}

/// The key's state while it is built.
struct Words {
    words: Vec<u64>,
    names: Names,
    offsets: Offsets,
    values: Values,
}

impl Words {
    fn partition(&mut self, storage: StorageId, p: &RootPartition) {
        self.words.push(p.view.rank() as u64);
        let offset = match self.offsets.word(storage, p) {
            Offset::Exact(o) => self.values.class(o),
            Offset::Abstracted(w) => w,
        };
        self.words.push(offset);
        self.values
            .push_all(&mut self.words, p.view.shape.iter().copied());
        self.values
            .push_all(&mut self.words, p.view.strides.iter().map(|&s| s as u64));
        match &p.tiling {
            None => self.words.push(0),
            Some(t) => {
                self.words.push(1);
                self.values
                    .push_all(&mut self.words, t.tile.iter().copied());
                self.values
                    .push_all(&mut self.words, t.offset.iter().map(|&o| o as u64));
                self.words
                    .extend(t.projection.iter().map(|p| p.map_or(u64::MAX, u64::from)));
                skew_words(&mut self.words, t);
            }
        }
        match &p.image {
            None => self.words.push(0),
            Some(image) => {
                self.words.push(1);
                let source = self.names.name(image.source) as u64;
                self.words.push(source);
                self.partition(image.source, &image.source_partition);
            }
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

/// The key of the prefix `tasks`, cut by `cut`, deferring `deferrals`, with temporaries
/// `temps`.
pub fn key(
    tasks: &[IndexTask],
    cut: Option<&Cut>,
    deferrals: &[Deferral],
    temps: &[StorageId],
    stores: &Stores,
    read_after: impl Fn(StorageId) -> bool,
) -> Key {
    let mut w = Words {
        words: Vec::with_capacity(tasks.len() * 24),
        names: Names::default(),
        offsets: Offsets {
            written: tasks
                .iter()
                .flat_map(|t| &t.args)
                .filter(|a| !matches!(a.privilege, weft_ir::Privilege::Read))
                .map(|a| a.storage)
                .collect(),
            seen: weft_runtime::FastMap::default(),
        },
        values: Values::default(),
    };
    w.words.push(tasks.len() as u64);
    for task in tasks {
        w.words.extend(task.kernel.id().words());
        w.words.push(task.launch.len() as u64);
        w.values.push_all(&mut w.words, task.launch.iter().copied());
        w.words.push(task.args.len() as u64);
        for arg in &task.args {
            let index = w.names.name(arg.storage);
            w.words.push(index as u64);
            w.words.push(privilege_word(arg.privilege));
            w.partition(arg.storage, &arg.root_partition);
        }
    }
    let Words {
        mut words,
        names,
        mut values,
        ..
    } = w;
    let Names { storages, index } = names;
    for &s in &storages {
        let live = stores.storage_live(s);
        words.push(u64::from(live) | (u64::from(read_after(s)) << 1));
        match stores.storage(s) {
            Some(st) => {
                words.push(st.shape.len() as u64);
                values.push_all(&mut words, st.shape.iter().copied());
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
    words.push(deferrals.len() as u64);
    for d in deferrals {
        words.extend([d.task as u64, d.arg as u64, u64::from(d.halo)]);
    }
    let mut temps: Vec<u64> = temps
        .iter()
        .map(|s| index.get(s).map_or(u64::MAX, |&i| i as u64))
        .collect();
    temps.sort_unstable();
    words.push(temps.len() as u64);
    words.extend(temps);
    Key {
        words: words.into(),
        storages,
    }
}

/// The exact form of a window's scanned tasks: the key of the window memo, which replays a
/// window seen before without analysing it.
///
/// It holds everything that decides the plan (so equal forms get equal plans): per task its
/// kernel and launch, per argument the renamed store, privilege and partition with every
/// number as it is; per store whether anything holds a handle to it, how many pending
/// arguments read it (which decides whether it is read after the prefix) and its root shape.
/// Stores are named in the order [`key`] names them, so the first names of a prefix are its
/// canonical key's.
#[derive(Clone, Debug)]
pub struct Exact {
    /// The form.
    pub words: Vec<u64>,
    /// Index to the storage it names in this window.
    pub storages: Vec<StorageId>,
}

/// The exact form of `tasks` (see [`Exact`]); `readers` counts each storage's pending readers.
pub fn exact(
    tasks: &[IndexTask],
    stores: &Stores,
    readers: &weft_runtime::FastMap<StorageId, u32>,
) -> Exact {
    let mut words = Vec::with_capacity(tasks.len() * 24);
    let mut names = FewNames::default();
    words.push(tasks.len() as u64);
    for task in tasks {
        words.extend(task.kernel.id().words());
        words.push(task.launch.len() as u64);
        words.extend(task.launch.iter().copied());
        words.push(task.args.len() as u64);
        for arg in &task.args {
            words.push(names.name(arg.storage) as u64);
            words.push(privilege_word(arg.privilege));
            exact_partition(&mut words, &mut names, &arg.root_partition);
        }
    }
    for &s in &names.storages {
        let live = u64::from(stores.storage_live(s));
        let readers = u64::from(readers.get(&s).copied().unwrap_or(0));
        words.push(live | (readers << 1));
        match stores.storage(s) {
            Some(st) => {
                words.push(st.shape.len() as u64);
                words.extend(st.shape.iter().copied());
            }
            None => words.push(u64::MAX),
        }
    }
    Exact {
        words,
        storages: names.storages,
    }
}

/// The stores of an exact form, named by first use as [`Names`] does: found by a scan while
/// they are few (a window that decides its plan usually names a few, and a scan of a few
/// beats hashing), through a map once they are many (a fused loop body of hundreds of
/// statements names hundreds of temporaries, and a scan per argument made the form quadratic
/// in the window).
#[derive(Default)]
struct FewNames {
    storages: Vec<StorageId>,
    /// Each storage's index, once there are more than [`FEW`].
    index: weft_runtime::FastMap<StorageId, usize>,
}

/// The most stores [`FewNames`] finds by a scan.
const FEW: usize = 16;

impl FewNames {
    /// The index of `s` (first use), naming it if it is new.
    fn name(&mut self, s: StorageId) -> usize {
        if self.storages.len() <= FEW {
            if let Some(i) = self.storages.iter().position(|&x| x == s) {
                return i;
            }
            self.storages.push(s);
            if self.storages.len() > FEW {
                self.index = self
                    .storages
                    .iter()
                    .enumerate()
                    .map(|(i, &x)| (x, i))
                    .collect();
            }
            return self.storages.len() - 1;
        }
        *self.index.entry(s).or_insert_with(|| {
            self.storages.push(s);
            self.storages.len() - 1
        })
    }
}

/// Pushes a tiling's skew, exactly (none: one word).
fn skew_words(words: &mut Vec<u64>, t: &weft_runtime::Tiling) {
    match t.skew {
        None => words.push(0),
        Some(s) => words.extend([1, u64::from(s.dim), u64::from(s.plus), s.shift, s.modulus]),
    }
}

/// Pushes the words of partition `p` as they are, naming an image's source.
fn exact_partition(words: &mut Vec<u64>, names: &mut FewNames, p: &RootPartition) {
    words.push(p.view.rank() as u64);
    words.push(p.view.offset);
    words.extend(p.view.shape.iter().copied());
    words.extend(p.view.strides.iter().map(|&s| s as u64));
    match &p.tiling {
        None => words.push(0),
        Some(t) => {
            words.push(1);
            words.extend(t.tile.iter().copied());
            words.extend(t.offset.iter().map(|&o| o as u64));
            words.extend(t.projection.iter().map(|p| p.map_or(u64::MAX, u64::from)));
            skew_words(words, t);
        }
    }
    match &p.image {
        None => words.push(0),
        Some(image) => {
            words.push(1);
            words.push(names.name(image.source) as u64);
            exact_partition(words, names, &image.source_partition);
        }
    }
}
