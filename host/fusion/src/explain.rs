//! Explanations of fusion decisions: what fused, which constraint and which store cut the
//! window, which temporaries vanished, and what the kernel passes did.
//!
//! An explanation is stored with its plan in canonical form (stores by canonical index), and
//! rendered against the stores of the window it is applied to, at two levels:
//! [`Explanation::render`] gives the full detail (`WEFT_EXPLAIN=2`), in the terms of the
//! fusion constraints and the kernel passes; [`Explanation::summary`] gives a few lines in
//! the application's terms (`WEFT_EXPLAIN=1`): how many tasks ran as one, how many loops that
//! task runs and which did not merge, and why the window was cut, naming the application's
//! call sites where they are known.

use std::sync::Arc;

use weft_ir::passes::Optimized;
use weft_ir::{Kernel, Op, Privilege};
use weft_runtime::planner::{PlanSummary, at_sites, short_name, site_line, site_range};
use weft_runtime::stores::StorageId;
use weft_runtime::task::IndexTask;

use crate::canonical::Key;
use crate::constraints::{Constraint, Cut, Deferral};

/// Why a prefix fused as it did.
#[derive(Clone, Debug, Default)]
pub struct Explanation {
    /// Provenance (`plugin.key`) of each fused task, in order.
    pub parts: Vec<String>,
    /// Provenance of the task that was not fused, if the window went on.
    pub next: Option<String>,
    /// The cut.
    pub cut: Option<Cut>,
    /// The canonical index of the store the cut happened on.
    pub cut_store: Option<usize>,
    /// Canonical indices of the temporaries.
    pub temporaries: Vec<usize>,
    /// What names each store the explanation mentions, by canonical index: the first task
    /// argument on it (`argument 1 of numeric.binary.add.f64.r1`), so that a reader finds it
    /// in the program.
    pub roles: Vec<(usize, String)>,
    /// How many temporaries kept a task-local buffer after the kernel passes.
    pub kept_local: usize,
    /// What the kernel passes did.
    pub passes: String,
    /// What each store parameter of the fused kernel is (the passes' report names them by
    /// number): the canonical index of its store and the first task argument it stands for,
    /// `argument 0 of numeric.linspace.f64`.
    pub params: Vec<(Option<usize>, String)>,
    /// The writes fused through a bounded anti-dependence: the canonical index of the store,
    /// the argument, and the halo in rows.
    pub deferred: Vec<(Option<usize>, String, u32)>,
    /// The loops the fused kernel runs: its top-level parallel loops after the passes (0
    /// without a fused kernel).
    pub loops: usize,
    /// The task (its index in the prefix) that each top-level parallel loop of the composed
    /// kernel comes from, by loop number less one (the passes' report numbers loops from 1).
    pub loop_tasks: Vec<usize>,
    /// The pairs of loops that the passes did not merge: the loops' numbers and the passes'
    /// reason.
    pub unmerged: Vec<(usize, usize, String)>,
    /// Whether the prefix stops short of its constraints' cut because a longer one's fused
    /// kernel would pass the limits every kernel is held to.
    pub capped: bool,
    /// Whether the fused kernel of the prefix passed those limits, so that its first task
    /// runs alone.
    pub too_big: bool,
}

/// Which loops of `composed` (by number, from 1) head a loop of `optimized`: loop fusion
/// merges each loop it fuses into the loop heading its group (which keeps its number and the
/// parameter it runs over), and the later passes only remove whole loops, so the optimized
/// kernel's loops are some of the heads, in order, each over its head's parameter (renumbered
/// by `param_map`). Where that does not match, every loop counts as surviving.
fn surviving_loops(composed: &Kernel, optimized: &Optimized) -> impl Fn(usize) -> bool {
    let over = |k: &Kernel| -> Vec<u32> {
        k.body
            .iter()
            .filter_map(|i| match &i.op {
                Op::Parallel(l) => Some(l.over),
                _ => None,
            })
            .collect()
    };
    let merged: Vec<usize> = optimized
        .report
        .fusion
        .iter()
        .filter(|d| d.fused)
        .map(|d| d.second)
        .collect();
    let heads: Vec<(usize, Option<u32>)> = over(composed)
        .into_iter()
        .enumerate()
        .map(|(i, p)| (i + 1, p))
        .filter(|(n, _)| !merged.contains(n))
        .map(|(n, p)| {
            let mapped = optimized.param_map.get(p as usize).copied().flatten();
            (n, mapped)
        })
        .collect();
    let mut survived: Vec<usize> = Vec::new();
    let mut next = heads.iter();
    let matched = over(&optimized.kernel).into_iter().all(|p| {
        next.by_ref()
            .find(|(_, mapped)| *mapped == Some(p))
            .map(|&(n, _)| survived.push(n))
            .is_some()
    });
    move |n| !matched || survived.contains(&n)
}

/// The number of top-level parallel loops of a kernel.
pub fn top_level_loops(kernel: &Kernel) -> usize {
    kernel
        .body
        .iter()
        .filter(|i| matches!(i.op, Op::Parallel(_)))
        .count()
}

/// The reason the kernel passes gave for not merging two loops, in the application's terms
/// (the passes' own words are in the full explanation).
pub fn plain_loop_reason(reason: &str) -> &'static str {
    if reason.starts_with("the loops have different ranks") {
        "they iterate over arrays of different ranks"
    } else if reason.contains("not in one iteration class") {
        "they iterate over arrays of different shapes or tilings"
    } else if reason.contains("between them reads what loop") {
        "a value computed between them reads what the first one writes"
    } else if reason.contains("reductions keep one canonical order") {
        "each float sum or product keeps its own order of operations, so that results do not \
         depend on fusion"
    } else if reason.contains("may overlap") {
        "they use overlapping views of one array"
    } else if reason.contains("only at the loop index") {
        "one uses elements of an array that the other writes, at other positions (shifted, \
         gathered or reduced)"
    } else {
        "the kernel passes kept them apart"
    }
}

impl Explanation {
    /// The explanation of fusing `tasks`, followed by `next`, cut by `cut`.
    pub fn new(
        tasks: &[IndexTask],
        next: Option<&IndexTask>,
        cut: Option<Cut>,
        temps: &[StorageId],
        key: &Key,
    ) -> Explanation {
        let name = |t: &IndexTask| t.name().to_string();
        let mentioned: Vec<StorageId> = cut
            .as_ref()
            .and_then(|c| c.storage)
            .into_iter()
            .chain(temps.iter().copied())
            .collect();
        let roles = mentioned
            .iter()
            .filter_map(|&s| {
                let role = tasks.iter().chain(next).find_map(|t| {
                    let k = t.args.iter().position(|a| a.storage == s)?;
                    Some(format!("argument {k} of {}", t.name()))
                })?;
                Some((key.index_of(s)?, role))
            })
            .collect();
        Explanation {
            roles,
            parts: tasks.iter().map(name).collect(),
            next: next.map(name),
            cut_store: cut
                .as_ref()
                .and_then(|c| c.storage)
                .and_then(|s| key.index_of(s)),
            cut,
            temporaries: temps.iter().filter_map(|&s| key.index_of(s)).collect(),
            kept_local: 0,
            passes: String::new(),
            params: Vec::new(),
            deferred: Vec::new(),
            loops: 0,
            loop_tasks: Vec::new(),
            unmerged: Vec::new(),
            capped: false,
            too_big: false,
        }
    }

    /// Records what the passes did to the loops of the fused kernel: `composed` is the kernel
    /// before them, whose top-level loops come from the prefix's tasks in the order `order`
    /// (`parts[k]` is task `order[k]`'s kernel), and `optimized` what they made of it. A pair
    /// of loops that loop fusion kept apart is recorded only when both survived the later
    /// passes (a loop whose results nothing needs is removed whole).
    pub fn set_loops(
        &mut self,
        parts: &[&Kernel],
        order: &[usize],
        composed: &Kernel,
        optimized: &Optimized,
    ) {
        self.loop_tasks = parts
            .iter()
            .zip(order)
            .flat_map(|(k, &t)| std::iter::repeat_n(t, top_level_loops(k)))
            .collect();
        self.loops = top_level_loops(&optimized.kernel);
        let survived = surviving_loops(composed, optimized);
        self.unmerged = optimized
            .report
            .fusion
            .iter()
            .filter(|d| !d.fused && survived(d.first) && survived(d.second))
            .map(|d| (d.first, d.second, d.reason.clone()))
            .collect();
    }

    /// Records the writes of `tasks` that fuse through a bounded anti-dependence.
    pub fn set_deferred(&mut self, tasks: &[IndexTask], deferrals: &[Deferral], key: &Key) {
        self.deferred = deferrals
            .iter()
            .filter_map(|d| {
                let task = tasks.get(d.task)?;
                let arg = task.args.get(d.arg)?;
                Some((
                    key.index_of(arg.storage),
                    format!("argument {} of {}", d.arg, task.name()),
                    d.halo,
                ))
            })
            .collect();
    }

    /// Records the kernel passes' report, and what each store parameter of the fused kernel
    /// stands for.
    pub fn set_passes(&mut self, report: String, params: Vec<(Option<usize>, String)>) {
        self.passes = report;
        self.params = params;
    }

    /// Records how many temporaries still need a task-local buffer.
    pub fn set_vanished(&mut self, kept_local: usize) {
        self.kept_local = kept_local;
    }

    /// The explanation as text, with stores named as in the window `key` was made from, and
    /// by the names the application gave them (`label`).
    pub fn render(
        &self,
        key: &Key,
        memo_hit: bool,
        label: &dyn Fn(StorageId) -> Option<String>,
    ) -> String {
        let id = |i: usize| {
            key.storages.get(i).map_or_else(
                || format!("#{i}"),
                |&s| match label(s) {
                    Some(name) => format!("store {} \"{name}\"", s.0),
                    None => format!("store {}", s.0),
                },
            )
        };
        let store = |i: usize| match self.roles.iter().find(|(j, _)| *j == i) {
            Some((_, role)) => format!("{} ({role})", id(i)),
            None => id(i),
        };
        let fused = self.parts.len() > 1 && !self.too_big;
        let mut out = format!(
            "weft fusion: {} task(s) {}{}\n",
            if self.too_big { 1 } else { self.parts.len() },
            if fused { "fused" } else { "run alone" },
            if memo_hit { " (memo hit)" } else { "" }
        );
        for p in &self.parts {
            out.push_str(&format!("  - {p}\n"));
        }
        if self.too_big {
            out.push_str(&format!(
                "  not fused: the fused kernel of these {} tasks would pass the limits on \
                 kernel size, so the first runs alone\n",
                self.parts.len()
            ));
        }
        match (&self.cut, &self.next) {
            (None, Some(next)) if self.capped => {
                out.push_str(&format!(
                    "  cut before {next}: the fused kernel would pass the limits on kernel size\n"
                ));
            }
            (Some(cut), Some(next)) => {
                let on = match (cut.constraint, self.cut_store) {
                    (Constraint::LaunchDomain, _) => String::new(),
                    (_, Some(i)) => format!(" on {}", store(i)),
                    _ => String::new(),
                };
                out.push_str(&format!(
                    "  cut before {next}: {}{on}\n",
                    cut.constraint.name()
                ));
            }
            _ if fused => {
                let loops = self.loops;
                out.push_str(&format!(
                    "  the whole window fused into one task running {loops} loop{}{}\n",
                    if loops == 1 { "" } else { "s" },
                    match self.unmerged.len() {
                        0 => String::new(),
                        n => format!(" ({n} pair(s) of loops not fused, below)"),
                    }
                ));
            }
            _ => out.push_str("  nothing else pending\n"),
        }
        for (s, role, halo) in &self.deferred {
            let on = s.map_or_else(|| "a store".to_string(), id);
            out.push_str(&format!(
                "  fused through a bounded anti-dependence on {on}: {role} overwrites what \
                 earlier tasks read through views shifted by at most {halo} row(s); its \
                 writes are deferred to the end of the loop (the rows that other chunks read \
                 are held back)\n"
            ));
        }
        if !self.temporaries.is_empty() {
            let names: Vec<String> = self.temporaries.iter().map(|&i| store(i)).collect();
            out.push_str(&format!(
                "  temporaries: {} ({} vanished, {} kept a task-local buffer)\n",
                names.join(", "),
                self.temporaries.len().saturating_sub(self.kept_local),
                self.kept_local
            ));
        }
        if !self.passes.is_empty() {
            for line in self.passes.lines() {
                out.push_str(&format!("  {line}\n"));
            }
            if self.passes.contains("param") {
                out.push_str("  where the fused kernel's params are:\n");
                for (i, (storage, role)) in self.params.iter().enumerate() {
                    match storage {
                        Some(s) => out.push_str(&format!("    {i}: {}, {role}\n", id(*s))),
                        None => out.push_str(&format!("    {i}: {role}\n")),
                    }
                }
            }
        }
        out
    }
}

impl Explanation {
    /// The summary of a plan that runs `prefix` tasks at the front of `window` (the
    /// window the plan was made for, so its task after the prefix is the one the cut is
    /// before), in the application's terms (see the module documentation). `key` names the
    /// stores as in the window, `label` gives the names the application gave them, and
    /// `sites` the call site of each task that has one, by sequence number.
    pub fn summary(
        &self,
        window: &[IndexTask],
        prefix: usize,
        key: &Key,
        label: &dyn Fn(StorageId) -> Option<String>,
        sites: &weft_runtime::FastMap<u64, Arc<str>>,
    ) -> PlanSummary {
        let prefix = prefix.clamp(1, window.len().max(1));
        let tasks = &window[..prefix.min(window.len())];
        let site = |t: &IndexTask| sites.get(&t.seq).map(|s| &**s);
        // A task named within a line: `numeric.sum (at src/main.rs:12)`.
        let named = |t: &IndexTask| match site(t) {
            Some(s) => format!("{} (at {})", short_name(t.name()), site_line(s)),
            None => short_name(t.name()),
        };
        let Some(first) = tasks.first() else {
            return PlanSummary::default();
        };
        let headline = if tasks.len() > 1 {
            let mut line = format!(
                "{} tasks -> one task running {} loop{}",
                tasks.len(),
                self.loops,
                if self.loops == 1 { "" } else { "s" }
            );
            let temps = self.temporaries.len();
            if temps > 0 {
                let vanished = temps.saturating_sub(self.kept_local);
                line.push_str(&format!(
                    " ({vanished} temporar{} vanished{})",
                    if vanished == 1 { "y" } else { "ies" },
                    match self.kept_local {
                        0 => String::new(),
                        k => format!(", {k} kept a scratch buffer"),
                    }
                ));
            }
            match site_range(tasks.iter().filter_map(site)) {
                Some(at) => line.push_str(&format!(", at {at}")),
                None => line.push_str(&format!(
                    ", {} ... {}",
                    short_name(first.name()),
                    tasks
                        .last()
                        .map_or_else(String::new, |t| short_name(t.name()))
                )),
            }
            line
        } else {
            format!(
                "{} ran alone{}",
                short_name(first.name()),
                at_sites(site(first))
            )
        };
        let mut details = Vec::new();
        if tasks.len() > 1 {
            let task_of = |loop_number: usize| {
                self.loop_tasks
                    .get(loop_number.wrapping_sub(1))
                    .and_then(|&t| tasks.get(t))
            };
            for (a, b, reason) in &self.unmerged {
                let which = match (task_of(*a), task_of(*b)) {
                    (Some(x), Some(y)) if x.seq == y.seq => format!("two loops of {}", named(x)),
                    (Some(x), Some(y)) => format!("the loops of {} and {}", named(x), named(y)),
                    _ => format!("loops {a} and {b}"),
                };
                details.push(format!(
                    "{which} did not merge: {}",
                    plain_loop_reason(reason)
                ));
            }
        }
        let next = window.get(prefix);
        let cut = next.and_then(|next| {
            let why = if self.too_big || self.capped {
                "with it, the fused kernel would pass the limits on kernel size".to_string()
            } else {
                let cut = self.cut.as_ref()?;
                self.plain_cut(cut, tasks, next, key, label, &named)
            };
            Some(format!("cut before {}: {why}", named(next)))
        });
        PlanSummary {
            tasks: tasks.len(),
            headline,
            details,
            cut,
        }
    }

    /// Why `cut` stopped `tasks` before `next`, in the application's terms.
    fn plain_cut(
        &self,
        cut: &Cut,
        tasks: &[IndexTask],
        next: &IndexTask,
        key: &Key,
        label: &dyn Fn(StorageId) -> Option<String>,
        named: &dyn Fn(&IndexTask) -> String,
    ) -> String {
        let storage = self.cut_store.and_then(|i| key.storages.get(i).copied());
        // The array by the name the application gave it (`"grid", which`), or `what`; and
        // what goes before the rest of a sentence about it.
        let given = storage.and_then(label);
        let (which, comma) = match &given {
            Some(n) => (format!("\"{n}\", which"), ""),
            None => ("what".to_string(), ","),
        };
        // The last task before the cut that touches the array as `how` says.
        let before = |how: &dyn Fn(Privilege) -> bool| {
            let s = storage?;
            tasks
                .iter()
                .rev()
                .find(|t| t.args.iter().any(|a| a.storage == s && how(a.privilege)))
        };
        let reads = |p: Privilege| !matches!(p, Privilege::Write);
        let reduces = |p: Privilege| matches!(p, Privilege::Reduce(_));
        let by = |t: Option<&IndexTask>| t.map_or_else(|| "a task before it".to_string(), named);
        let array = match &given {
            Some(n) => format!("the array \"{n}\""),
            None => "an array".to_string(),
        };
        match cut.constraint {
            Constraint::LaunchDomain if storage.is_some() => format!(
                "{} and it both use {array}, and one of them is a 0-d (scalar) step, which a \
                 fused task runs before the others",
                by(before(&|_| true))
            ),
            Constraint::LaunchDomain => {
                let before = crate::constraints::fused_launch(tasks);
                if before == next.launch.as_slice() {
                    "a 0-d (scalar) step could not run again on every piece of the launch"
                        .to_string()
                } else {
                    format!(
                        "it runs over launch shape {}, the tasks before it over {}: only \
                         tasks of one launch shape fuse",
                        weft_runtime::shape_text(&next.launch),
                        weft_runtime::shape_text(before)
                    )
                }
            }
            Constraint::TrueDependence => {
                // A write after a write through another partition cuts too.
                let next_reads = storage.is_none_or(|s| {
                    next.args
                        .iter()
                        .any(|a| a.storage == s && reads(a.privilege))
                });
                format!(
                    "it {} {which} {} wrote{comma} through another view or tiling",
                    if next_reads { "reads" } else { "writes over" },
                    by(before(&|p: Privilege| p.mutates()))
                )
            }
            Constraint::AntiDependence => format!(
                "it overwrites {which} {} read{comma} through another view or tiling",
                by(before(&reads))
            ),
            Constraint::Reduction => {
                let next_reduces = storage.is_some_and(|s| {
                    next.args
                        .iter()
                        .any(|a| a.storage == s && reduces(a.privilege))
                });
                if next_reduces {
                    format!(
                        "it reduces into {which} {} uses: a reduction's result is complete \
                         only after its task",
                        by(before(&|_| true))
                    )
                } else {
                    let name = given
                        .as_ref()
                        .map_or_else(String::new, |n| format!("\"{n}\", "));
                    format!(
                        "it uses {name}the result of {}, a reduction, which is complete only \
                         after that task",
                        by(before(&reduces))
                    )
                }
            }
            Constraint::Product => {
                "a dense product runs as a task of its own, through the back end's product \
                 routine"
                    .to_string()
            }
            Constraint::Consumer => {
                "it makes only what a later task reads at the same positions, and that task \
                 could not join: it runs with that task in the next window, where its result \
                 need not be written out"
                    .to_string()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use weft_ir::passes::FusionFacts;
    use weft_ir::passes::fuse::fuse_loops;

    use super::*;

    /// The refusals of loop fusion on a kernel of `host/ir`'s filetests, with iteration
    /// classes `class` and all parameters distinct (`distinct`) or of unknown aliasing.
    fn refusals(text: &str, class: &[Option<u32>], distinct: bool) -> Vec<String> {
        let kernel = weft_ir::text::parse(text).expect("parses");
        let mut facts = if distinct {
            FusionFacts::distinct(&kernel)
        } else {
            FusionFacts::unknown(kernel.params.len())
        };
        facts.class = class.to_vec();
        let (_, decisions) = fuse_loops(&kernel, &facts);
        decisions
            .into_iter()
            .filter(|d| !d.fused)
            .map(|d| d.reason)
            .collect()
    }

    /// A pair of loops kept apart is not reported when the later passes removed one of them:
    /// the fused task runs the loops that are left, and says no more.
    #[test]
    fn loops_removed_after_loop_fusion_are_not_reported_as_kept_apart() {
        let text = "kernel @k(%t: store<f64, 1, write>, %x: store<f64, 1, read>, \
                    %y: store<f64, 1, write>, %z: store<f64, 1, write>) {
              %one = const f64 1.0
              parallel %t (%i) { store %t[%i], %one }
              parallel %y (%i) { %v = load %x[%i]  store %y[%i], %v }
              parallel %z (%i) { store %z[%i], %one }
            }";
        let kernel = weft_ir::text::parse(text).expect("parses");
        let mut facts = FusionFacts::distinct(&kernel);
        // t is a local temporary nothing reads; y and z are in classes of their own.
        facts.class = vec![Some(0), Some(1), Some(1), Some(2)];
        facts.local = vec![true, false, false, false];
        let optimized = weft_ir::passes::optimize(&kernel, &facts);
        assert_eq!(
            optimized.report.fusion.iter().filter(|d| !d.fused).count(),
            2,
            "{:?}",
            optimized.report
        );
        let mut e = Explanation::default();
        e.set_loops(&[&kernel], &[0], &kernel, &optimized);
        assert_eq!(e.loops, 2);
        assert_eq!(e.loop_tasks, [0, 0, 0]);
        assert_eq!(e.unmerged.len(), 1, "{:?}", e.unmerged);
        assert_eq!((e.unmerged[0].0, e.unmerged[0].1), (2, 3));
    }

    /// Every reason the kernel passes give for keeping loops apart has words of its own in
    /// the summary: a change to the passes' wording that loses one fails here.
    #[test]
    fn every_refusal_of_loop_fusion_has_plain_words() {
        let cases: [(&str, Vec<Option<u32>>, bool, usize); 5] = [
            (
                include_str!("../../ir/tests/filetests/fuse_refuse_class.ir"),
                vec![Some(0), Some(1), None, None],
                true,
                3,
            ),
            (
                include_str!("../../ir/tests/filetests/fuse_refuse_hoist_load.ir"),
                vec![Some(0), Some(0), None],
                true,
                1,
            ),
            (
                include_str!("../../ir/tests/filetests/fuse_refuse_shifted_read.ir"),
                vec![Some(0), Some(0), Some(0)],
                true,
                1,
            ),
            (
                include_str!("../../ir/tests/filetests/fuse_several_reductions.ir"),
                vec![Some(0), Some(0), Some(0), None, None, None, Some(0)],
                true,
                1,
            ),
            (
                include_str!("../../ir/tests/filetests/fuse_unknown_alias.ir"),
                vec![Some(0), Some(0), Some(0)],
                false,
                1,
            ),
        ];
        let fallback = plain_loop_reason("");
        let mut plain = Vec::new();
        for (text, class, distinct, count) in cases {
            let reasons = refusals(text, &class, distinct);
            assert_eq!(reasons.len(), count, "{reasons:?}");
            for reason in reasons {
                let words = plain_loop_reason(&reason);
                assert_ne!(words, fallback, "no plain words for `{reason}`");
                plain.push(words);
            }
        }
        plain.sort_unstable();
        plain.dedup();
        assert_eq!(
            plain.len(),
            6,
            "each kind of refusal in words of its own: {plain:?}"
        );
    }
}
