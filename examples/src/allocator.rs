//! The memory allocator of every example binary.
//!
//! Weft's host allocates many small, short-lived vectors per submitted task (views, partitions,
//! dependence records). With glibc's `malloc` that was about a third of a tiny task's end-to-end
//! cost; mimalloc's thread-local free lists cut a chain of tiny tasks from 3.5 to 2.4 us per
//! task on this machine (`docs/performance.md`). An application embedding Weft chooses its own
//! allocator; the examples choose this one, and the docs recommend it.

/// The process-wide allocator: mimalloc, without its secure mode or statistics.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
