//! Numeric calls replayed from recordings (see `weft_plugin::replay`): a call whose
//! operation, scalars and options were seen before is made again by the host alone, without
//! entering the plugin, while every answer the plugin saw (shapes, dtypes, overlaps, the
//! tiling) is the same; otherwise it is made for real and recorded again.
//!
//! The `numeric` interface promises what makes this sound: a call is a function of its
//! arguments and of the answers of the host's imports (see its documentation in
//! `wit/weft.wit`).

use std::rc::Rc;

use wasmtime::component::Resource;
use weft_plugin::imports::{PluginState, StoreRes};
use weft_plugin::replay::{Miss, Recorder, Recording};
use weft_runtime::StoreId;

use super::{Array, Guest, Numeric, OperandRef, api, wit};
use crate::Result;

/// What an export call gives back through wasmtime: a trap, or the plugin's result.
type Answer<R> = wasmtime::Result<std::result::Result<R, wit::Error>>;

/// The most recordings a [`Numeric`] keeps, and the most import calls they hold together
/// ([`Recording::len`], which bounds their memory: a recording holds at most
/// [`weft_plugin::replay::MAX_EVENTS`]); when a new recording would pass either, they are all
/// dropped and recorded again as the calls come. A loop over shrinking slices (`L[i, :i] @
/// x[:i]` for every `i`, a dozen events a call) makes one recording per shape and operation:
/// 4,096 recordings (the bound before the events were) were fewer than NPBench's `trisolv` and
/// `covariance` make at their `M` size (5,000 and 5,600), so every run recorded them all again.
const RECORDINGS_KEPT: usize = 1 << 15;
/// See [`RECORDINGS_KEPT`].
const EVENTS_KEPT: usize = 1 << 18;

/// What the replay of calls did, for [`Numeric::replay_stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayStats {
    /// Calls made by the host alone, from a recording.
    pub replayed: u64,
    /// Calls made for real and recorded.
    pub recorded: u64,
    /// Replays that did not match their recording (the call was then made for real).
    pub missed: u64,
    /// Basic indexing (`index`, `slice`) made by the host alone, without a plugin call (see
    /// [`Array::index`]).
    pub host_views: u64,
}

/// What identifies a call for its recording: the export, and every argument that is not a
/// store (operation, scalars, ranges, options), as words. The stores are the recording's
/// slots; their shapes and dtypes are checked by the replay itself.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CallKey {
    name: &'static str,
    words: Vec<u64>,
}

impl CallKey {
    /// The key of a call of export `name`, before its arguments.
    pub fn new(name: &'static str) -> CallKey {
        CallKey {
            name,
            words: Vec::with_capacity(8),
        }
    }

    /// Adds a word.
    pub fn word(mut self, w: u64) -> CallKey {
        self.words.push(w);
        self
    }

    /// Adds words, after their count.
    pub fn words(self, words: impl ExactSizeIterator<Item = u64>) -> CallKey {
        let n = words.len() as u64;
        words.fold(self.word(n), CallKey::word)
    }

    /// Adds an operand: its kind, and its value for a scalar.
    pub fn operand(self, o: &OperandRef) -> CallKey {
        match o {
            OperandRef::Store(_) => self.word(0),
            OperandRef::Scalar(v) => self.word(1).word(v.to_bits()),
            OperandRef::Int(v) => self.word(2).word(*v as u64),
        }
    }

    /// Adds a lent store's layout: its element type and shape. With them in the key, a call
    /// made on stores of different shapes (a product of a vector with itself, then of a
    /// matrix with it) keeps a recording for each, instead of one that the other misses.
    pub fn add_layout(&mut self, shape: &[u64], dtype: weft_ir::DType) {
        self.words.push(dtype as u64);
        self.words.push(shape.len() as u64);
        self.words.extend_from_slice(shape);
    }

    /// Adds an optional integer.
    pub fn option(self, v: Option<i64>) -> CallKey {
        match v {
            Some(v) => self.word(1).word(v as u64),
            None => self.word(0),
        }
    }

    /// Adds slice ranges.
    pub fn ranges(self, ranges: &[api::Range]) -> CallKey {
        ranges.iter().fold(self.word(ranges.len() as u64), |k, r| {
            k.option(r.start).option(r.stop).option(r.step)
        })
    }
}

/// The recordings of one [`Numeric`], and what replaying them did.
pub(crate) struct CallMemo {
    recordings: weft_runtime::FastMap<CallKey, Rc<Recording>>,
    /// The import calls the recordings hold together.
    events: usize,
    enabled: bool,
    stats: ReplayStats,
}

impl Default for CallMemo {
    fn default() -> Self {
        CallMemo {
            recordings: weft_runtime::FastMap::default(),
            events: 0,
            enabled: true,
            stats: ReplayStats::default(),
        }
    }
}

/// The stores lent to a call, in the order the call lends them.
pub(crate) fn stores_of(operands: &[&OperandRef]) -> Vec<StoreId> {
    operands
        .iter()
        .filter_map(|o| match o {
            OperandRef::Store(id) => Some(*id),
            _ => None,
        })
        .collect()
}

impl Numeric {
    /// Whether calls are replayed from recordings, and basic indexing made by the host alone
    /// (both on by default). Off, every call enters the plugin; the results are the same.
    pub fn set_call_replay(&self, enabled: bool) {
        let mut memo = self.inner.memo.borrow_mut();
        memo.enabled = enabled;
        if !enabled {
            memo.recordings.clear();
            memo.events = 0;
        }
    }

    /// What the replay of calls did so far.
    pub fn replay_stats(&self) -> ReplayStats {
        self.inner.memo.borrow().stats
    }

    /// Whether calls are replayed (see [`Numeric::set_call_replay`]).
    pub(crate) fn call_replay(&self) -> bool {
        self.inner.memo.borrow().enabled
    }

    /// Counts one view of basic indexing that the host made alone.
    pub(crate) fn count_host_view(&self) {
        self.inner.memo.borrow_mut().stats.host_views += 1;
    }

    /// Makes a call of export `name` lent `args` (in the order `f` lends them): from the
    /// recording under `key` if it still matches, otherwise for real through `f`, recorded
    /// for the next time. `f` lends the stores, calls the export and takes its result's
    /// store (`None` for an export that returns no store).
    #[track_caller]
    pub(crate) fn replayed(
        &self,
        name: &str,
        key: CallKey,
        args: &[StoreId],
        f: impl FnOnce(&Guest, &mut wasmtime::Store<PluginState>) -> Answer<Option<StoreId>>,
    ) -> Result<Option<StoreId>> {
        let enabled = self.inner.memo.borrow().enabled;
        if !enabled {
            return self.call(name, f);
        }
        let mut key = key;
        self.inner
            .rt
            .borrow_mut()
            .each_layout(args, |shape, dtype| key.add_layout(shape, dtype));
        let recording = self.inner.memo.borrow().recordings.get(&key).cloned();
        if let Some(recording) = recording {
            let _site = self.site_guard(std::panic::Location::caller());
            let plugin = self.inner.exports.plugin;
            let outcome = self.inner.rt.borrow_mut().replay(plugin, &recording, args);
            let mut memo = self.inner.memo.borrow_mut();
            match outcome {
                Ok(out) => {
                    memo.stats.replayed += 1;
                    return Ok(out);
                }
                Err(Miss) => memo.stats.missed += 1,
            }
        }
        let mut recording = None;
        let result = self.call(name, |g, s| {
            s.data_mut().recorder = Some(Box::<Recorder>::default());
            let out = f(g, s);
            let recorder = s.data_mut().recorder.take();
            if let (Ok(Ok(_)), Some(recorder)) = (&out, recorder) {
                recording = recorder.finish(args);
            }
            out
        });
        if result.is_ok()
            && let Some(recording) = recording
        {
            let mut memo = self.inner.memo.borrow_mut();
            if memo.recordings.len() >= RECORDINGS_KEPT
                || memo.events + recording.len() > EVENTS_KEPT
            {
                memo.recordings.clear();
                memo.events = 0;
            }
            memo.events += recording.len();
            if let Some(old) = memo.recordings.insert(key, Rc::new(recording)) {
                memo.events -= old.len();
            }
            memo.stats.recorded += 1;
        }
        result
    }

    /// [`Numeric::replayed`] for an export that returns a new store, wrapped as an array.
    #[track_caller]
    pub(crate) fn make_replayed(
        &self,
        name: &str,
        key: CallKey,
        args: &[StoreId],
        f: impl FnOnce(&Guest, &mut wasmtime::Store<PluginState>) -> Answer<Resource<StoreRes>>,
    ) -> Array {
        let result = self.replayed(name, key, args, |g, s| {
            Ok(match f(g, s)? {
                Ok(r) => Ok(Some(s.data_mut().take(&r)?)),
                Err(e) => Err(e),
            })
        });
        let value = result.and_then(|id| {
            let id = id.ok_or_else(|| {
                crate::Error::Usage(format!("numeric `{name}` returned no array"))
            })?;
            self.inner.rt.borrow().adopt(id)
        });
        Array {
            np: self.clone(),
            slot: super::Slot::Ready(value.map_err(Rc::new)),
        }
    }
}

impl Array {
    /// [`Array::derive`] through [`Numeric::make_replayed`]: `f` gets this array's store,
    /// lends it first and `rest` after it, in order.
    #[track_caller]
    pub(crate) fn derive_replayed(
        &self,
        name: &str,
        key: CallKey,
        rest: &[&OperandRef],
        f: impl FnOnce(&Guest, &mut wasmtime::Store<PluginState>, StoreId) -> Answer<Resource<StoreRes>>,
    ) -> Array {
        match self.value() {
            Ok(h) => {
                let id = h.id();
                let mut args = vec![id];
                args.extend(stores_of(rest));
                self.np.make_replayed(name, key, &args, |g, s| f(g, s, id))
            }
            Err(e) => Array {
                np: self.np.clone(),
                slot: super::Slot::Ready(Err(e.clone())),
            },
        }
    }
}
