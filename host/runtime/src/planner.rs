//! The planner seam: what the window asks of task fusion.
//!
//! A [`Planner`] looks at the pending tasks of a window and decides what runs next: how many
//! tasks at the front run together, which of their stores become task-local, and the fused
//! task that runs them. `weft-fusion` implements it with Diffuse's constraints;
//! [`NoFusion`] runs every task on its own. The window's policy (when to grow, when to run,
//! what a read needs) lives in [`crate::window`] and knows nothing of how a planner decides.

use std::sync::Arc;

use crate::Result;
use crate::stores::{StorageId, Stores};
use crate::task::IndexTask;

/// What a planner may look at besides the tasks.
pub struct PlanContext<'a> {
    /// The store table (shapes, liveness).
    pub stores: &'a Stores,
    /// Per storage, how many arguments of pending tasks (anywhere in the window, the tasks
    /// being planned included) read or reduce it.
    pub readers: &'a crate::FastMap<StorageId, u32>,
    /// Whether the caller wants an explanation of the decision (the full detail,
    /// `WEFT_EXPLAIN=2`).
    pub explain: bool,
    /// Whether the caller wants a [`PlanSummary`] of the decision (`WEFT_EXPLAIN=1`).
    pub summarize: bool,
    /// Where in the application each pending task was asked for, by sequence number (the
    /// tasks submitted under [`Core::set_call_site`](crate::Core::set_call_site)), for
    /// summaries to name.
    pub sites: &'a crate::FastMap<u64, Arc<str>>,
}

/// What to run next.
#[derive(Debug)]
pub struct Plan {
    /// How many tasks at the front of the window it covers (at least one).
    pub prefix: usize,
    /// The one task that runs them, when it is not simply the first task (`prefix` is 1 and
    /// the first task runs as it is when this is `None`).
    pub fused: Option<IndexTask>,
    /// Why, in words, when [`PlanContext::explain`] asked for it.
    pub explanation: Option<String>,
    /// What runs and why, in the application's terms, when [`PlanContext::summarize`] asked
    /// for it.
    pub summary: Option<PlanSummary>,
}

/// One plan in the application's terms, for the summary of a window (`WEFT_EXPLAIN=1`):
/// the core puts the plans of one run of the window together under one heading.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlanSummary {
    /// How many of the window's tasks the plan runs.
    pub tasks: usize,
    /// What runs, in one line: `5 tasks -> one task running 2 loops (3 temporaries
    /// vanished), at src/main.rs:12-16`, or `numeric.sum ran alone, at src/main.rs:17`.
    pub headline: String,
    /// Lines that say more about the headline (which loops of a fused task did not merge,
    /// and why).
    pub details: Vec<String>,
    /// Why the plan stops before the next pending task, in one line, if it does.
    pub cut: Option<String>,
}

impl PlanSummary {
    /// The summary of a task that runs on its own, `name` (its kernel) with the call site
    /// `site`, for `why` (`fusion is off`).
    pub fn alone(name: &str, site: Option<&str>, why: Option<&str>) -> PlanSummary {
        let why = why.map_or_else(String::new, |w| format!(" ({w})"));
        PlanSummary {
            tasks: 1,
            headline: format!("{} ran alone{why}{}", short_name(name), at_sites(site)),
            details: Vec::new(),
            cut: None,
        }
    }
}

/// A kernel's name without the tokens that tell its variants apart: everything from its
/// first element type on (ranks, layouts, operand kinds), so `numeric.binary.mul.f64.r1.aa`
/// is `numeric.binary.mul`. A name without an element type, and a fused kernel's name
/// (`fused(...)`), stay as they are.
pub fn short_name(name: &str) -> String {
    if name.starts_with("fused(") {
        return name.to_string();
    }
    let dtype = |part: &str| {
        matches!(
            part,
            "f16"
                | "f32"
                | "f64"
                | "i8"
                | "i16"
                | "i32"
                | "i64"
                | "u8"
                | "u16"
                | "u32"
                | "u64"
                | "bool"
        )
    };
    let parts: Vec<&str> = name.split('.').collect();
    // The plugin and the kernel's family stay, whatever they look like.
    let keep = parts
        .iter()
        .enumerate()
        .position(|(i, p)| i >= 2 && dtype(p))
        .unwrap_or(parts.len());
    parts[..keep].join(".")
}

/// `, at SITE` for a call site `file:line:column` (the column left out), or nothing.
pub fn at_sites(site: Option<&str>) -> String {
    match site {
        Some(s) => format!(", at {}", site_line(s)),
        None => String::new(),
    }
}

/// A call site `file:line:column` as `file:line`.
pub fn site_line(site: &str) -> &str {
    match site.rsplit_once(':') {
        Some((head, col)) if head.contains(':') && col.bytes().all(|b| b.is_ascii_digit()) => head,
        _ => site,
    }
}

/// The call sites `sites` (`file:line:column`, in program order) in a few words:
/// `src/main.rs:12-16` (a file's lowest and highest line), files joined by `; `.
pub fn site_range<'a>(sites: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut files: Vec<(&str, u32, u32)> = Vec::new();
    for site in sites {
        let line = site_line(site);
        let Some((file, n)) = line
            .rsplit_once(':')
            .and_then(|(f, n)| Some((f, n.parse::<u32>().ok()?)))
        else {
            continue;
        };
        match files.iter_mut().find(|(f, _, _)| *f == file) {
            Some((_, lo, hi)) => {
                *lo = (*lo).min(n);
                *hi = (*hi).max(n);
            }
            None => files.push((file, n, n)),
        }
    }
    if files.is_empty() {
        return None;
    }
    const SHOWN: usize = 3;
    let mut parts: Vec<String> = files
        .iter()
        .take(SHOWN)
        .map(|&(f, lo, hi)| {
            if lo == hi {
                format!("{f}:{lo}")
            } else {
                format!("{f}:{lo}-{hi}")
            }
        })
        .collect();
    if files.len() > SHOWN {
        parts.push(format!("{} more file(s)", files.len() - SHOWN));
    }
    Some(parts.join("; "))
}

/// Counters of a planner.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PlannerStats {
    /// Windows analysed (memo misses).
    pub analyses: u64,
    /// Windows whose plan came from the memo.
    pub memo_hits: u64,
    /// Of the memo hits, the windows seen before exactly (the same tasks, views and stores,
    /// up to the stores' names): their plan is taken by the window's exact form, with no
    /// constraint scan or canonical key.
    pub window_hits: u64,
    /// Fused kernels built.
    pub kernels_fused: u64,
    /// Seconds spent analysing and building fused kernels (misses only).
    pub analysis_seconds: f64,
    /// Plans held in the memo now.
    pub memo_entries: u64,
    /// Plans evicted from the memo so far (it is bounded).
    pub memo_evictions: u64,
    /// Windows held in the window memo now (bounded like the memo).
    pub window_entries: u64,
}

/// Turns the front of a window into a plan (see the module documentation).
pub trait Planner {
    /// How many tasks at the front of `window` would run together. The window grows while
    /// all of it would (so that fusion is not cut at an arbitrary place).
    fn fusible_prefix(&self, window: &[IndexTask]) -> usize;

    /// The plan for the front of `window`, which is not empty.
    fn plan(&mut self, window: &[IndexTask], context: &PlanContext<'_>) -> Result<Plan>;

    /// The planner's counters.
    fn stats(&self) -> PlannerStats;
}

/// The planner that fuses nothing: every task runs on its own.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoFusion;

impl Planner for NoFusion {
    fn fusible_prefix(&self, window: &[IndexTask]) -> usize {
        window.len().min(1)
    }

    fn plan(&mut self, window: &[IndexTask], context: &PlanContext<'_>) -> Result<Plan> {
        let summary = context.summarize.then(|| {
            let first = window.first();
            PlanSummary::alone(
                first.map_or("", IndexTask::name),
                first.and_then(|t| context.sites.get(&t.seq)).map(|s| &**s),
                Some("fusion is off"),
            )
        });
        Ok(Plan {
            prefix: 1,
            fused: None,
            explanation: None,
            summary,
        })
    }

    fn stats(&self) -> PlannerStats {
        PlannerStats::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_drop_the_tokens_of_variants() {
        assert_eq!(
            short_name("numeric.binary.mul.f64.r1.as"),
            "numeric.binary.mul"
        );
        assert_eq!(
            short_name("numeric.reducerows.min.i64.r1.q1"),
            "numeric.reducerows.min"
        );
        assert_eq!(short_name("numeric.dot.f64"), "numeric.dot");
        assert_eq!(short_name("sparse.spmv"), "sparse.spmv");
        assert_eq!(short_name("t.f64"), "t.f64", "the plugin and family stay");
        assert_eq!(short_name("fused(a.x.f64+b)"), "fused(a.x.f64+b)");
    }

    #[test]
    fn call_sites_are_shown_by_line_and_ranges_by_file() {
        assert_eq!(site_line("src/main.rs:12:5"), "src/main.rs:12");
        assert_eq!(site_line("src/main.rs:12"), "src/main.rs:12");
        assert_eq!(at_sites(Some("a.rs:3:1")), ", at a.rs:3");
        assert_eq!(at_sites(None), "");
        assert_eq!(
            site_range(["b.rs:9:1", "a.rs:4:2", "b.rs:7:3", "b.rs:8:3"]).as_deref(),
            Some("b.rs:7-9; a.rs:4")
        );
        assert_eq!(site_range(["a.rs:4:2"]).as_deref(), Some("a.rs:4"));
        assert_eq!(
            site_range(["a:1:1", "b:1:1", "c:1:1", "d:1:1", "e:1:1"]).as_deref(),
            Some("a:1; b:1; c:1; 2 more file(s)")
        );
        assert_eq!(site_range(["no line"]), None);
    }
}
