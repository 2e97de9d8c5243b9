//! The memory of freed buffers, kept for reuse by size class (see [`crate::Memory`]).
//!
//! A buffer's memory is a whole number of words of its *class*: its size rounded up to one of
//! eight classes per doubling below [`EXACT_FROM_WORDS`] (at most an eighth more), exact
//! above. A loop whose temporaries grow by an element a step (NPBench's `durbin`: a copy of
//! `y[:k]`, one element longer every step) then reuses the memory of the step before instead
//! of asking for fresh memory every step, while the large arrays of a program, which recur at
//! their exact sizes, take no more memory than they need. Lookups go by class, and the
//! buffers freed longest ago leave first when the list is full: the list held the buffers in
//! one vector scanned from the end, and `durbin`'s thousands of sizes made every allocation a
//! scan of thousands.

use std::collections::{HashMap, VecDeque};

use crate::host_words::HostWords;

/// Buffers of at least this many words (1 MiB) get exactly their size: such arrays recur at
/// their sizes, and an eighth more of a large array is memory for nothing.
pub(crate) const EXACT_FROM_WORDS: usize = 1 << 17;

/// The words a buffer of `words` words takes: its class.
pub(crate) fn class_words(words: usize) -> usize {
    if words >= EXACT_FROM_WORDS {
        return words;
    }
    // Eight classes per doubling: multiples of 2^(floor(log2(words)) - 3).
    let shift = (usize::BITS - 1 - words.max(1).leading_zeros()).saturating_sub(3);
    words.div_ceil(1 << shift) << shift
}

/// The freed buffers of one class, each with its freeing number, most recently freed last.
type Class = VecDeque<(u64, HostWords)>;

/// Freed buffers by class, most recently freed last, and the order they were freed in.
#[derive(Debug, Default)]
pub(crate) struct FreeList {
    by_class: HashMap<usize, Class>,
    /// (freeing number, class), oldest first; an entry whose buffer was reused is skipped.
    order: VecDeque<(u64, usize)>,
    freed: u64,
    /// Bytes held.
    bytes: u64,
}

impl FreeList {
    /// Bytes held.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The most recently freed buffer of `class` words, if any.
    pub(crate) fn take(&mut self, class: usize) -> Option<HostWords> {
        let list = self.by_class.get_mut(&class)?;
        let (_, words) = list.pop_back()?;
        self.bytes -= words.len() as u64 * 8;
        Some(words)
    }

    /// Keeps `words` for reuse, first letting the buffers freed longest ago go until the list
    /// holds at most `limit` bytes with it; a buffer larger than `limit` is let go itself.
    pub(crate) fn give(&mut self, words: HostWords, limit: u64) {
        let bytes = words.len() as u64 * 8;
        if bytes == 0 || bytes > limit {
            return;
        }
        while self.bytes + bytes > limit {
            let Some((freed, class)) = self.order.pop_front() else {
                break;
            };
            let Some(list) = self.by_class.get_mut(&class) else {
                continue;
            };
            // Each class's buffers are in freeing order and are taken from the back, so the
            // oldest one still held, if it is this entry's, is at the front.
            if list.front().is_some_and(|(f, _)| *f == freed)
                && let Some((_, gone)) = list.pop_front()
            {
                self.bytes -= gone.len() as u64 * 8;
            }
            if list.is_empty() {
                self.by_class.remove(&class);
            }
        }
        self.freed += 1;
        self.order.push_back((self.freed, words.len()));
        self.by_class
            .entry(words.len())
            .or_default()
            .push_back((self.freed, words));
        self.bytes += bytes;
        // Entries of reused buffers pile up in `order` while nothing is let go: drop them
        // once they are most of it.
        if self.order.len() > 64 && self.order.len() > 4 * self.held() {
            let by_class = &self.by_class;
            self.order.retain(|(freed, class)| {
                by_class
                    .get(class)
                    .is_some_and(|l| l.iter().any(|(f, _)| f == freed))
            });
        }
    }

    /// Buffers held.
    fn held(&self) -> usize {
        self.by_class.values().map(VecDeque::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(n: usize, fill: u64) -> HostWords {
        let mut w = HostWords::zeroed(n).expect("memory");
        w.fill(fill);
        w
    }

    #[test]
    fn classes_round_up_by_at_most_an_eighth_and_are_exact_for_large_buffers() {
        for w in 1..5000usize {
            let c = class_words(w);
            assert!(c >= w && c - w <= w / 8, "{w} -> {c}");
            assert_eq!(class_words(c), c, "a class is its own class ({w} -> {c})");
        }
        assert_eq!(class_words(EXACT_FROM_WORDS + 3), EXACT_FROM_WORDS + 3);
        // A growing temporary stays in its class for a while.
        assert_eq!(class_words(1000), class_words(1020));
    }

    #[test]
    fn the_most_recently_freed_buffer_of_a_class_comes_back_first() {
        let mut f = FreeList::default();
        f.give(words(16, 1), 1 << 20);
        f.give(words(16, 2), 1 << 20);
        f.give(words(24, 3), 1 << 20);
        assert_eq!(f.bytes(), (16 + 16 + 24) * 8);
        assert_eq!(f.take(16).map(|w| w[0]), Some(2));
        assert_eq!(f.take(16).map(|w| w[0]), Some(1));
        assert!(f.take(16).is_none());
        assert_eq!(f.take(24).map(|w| w[0]), Some(3));
        assert_eq!(f.bytes(), 0);
    }

    #[test]
    fn the_buffers_freed_longest_ago_go_first_when_the_list_is_full() {
        let mut f = FreeList::default();
        let limit = 64 * 8;
        f.give(words(16, 1), limit);
        f.give(words(16, 2), limit);
        f.give(words(24, 3), limit);
        // One reused, so its entry is stale when its turn to go comes.
        assert_eq!(f.take(16).map(|w| w[0]), Some(2));
        f.give(words(48, 4), limit);
        // 16 + 24 + 48 words is past 64: the first buffer goes, the stale entry of the reused
        // one is skipped, then the 24 goes.
        assert!(f.take(16).is_none());
        assert!(f.take(24).is_none());
        assert_eq!(f.take(48).map(|w| w[0]), Some(4));
        // Larger than the limit: not kept.
        f.give(words(128, 5), limit);
        assert!(f.take(128).is_none());
        assert_eq!(f.bytes(), 0);
    }

    #[test]
    fn entries_of_reused_buffers_do_not_pile_up() {
        let mut f = FreeList::default();
        for i in 0..10_000u64 {
            f.give(words(8, i), 1 << 20);
            assert_eq!(f.take(8).map(|w| w[0]), Some(i));
        }
        assert!(f.order.len() <= 65, "{} entries", f.order.len());
    }
}
