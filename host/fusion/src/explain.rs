//! Explanations of fusion decisions: what fused, which constraint and which store cut the
//! window, which temporaries vanished, and what the kernel passes did.
//!
//! An explanation is stored with its plan in canonical form (stores by canonical index), and
//! rendered against the stores of the window it is applied to.

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
        }
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
        let mut out = format!(
            "weft fusion: {} task(s) {}{}\n",
            self.parts.len(),
            if self.parts.len() > 1 {
                "fused"
            } else {
                "run alone"
            },
            if memo_hit { " (memo hit)" } else { "" }
        );
        for p in &self.parts {
            out.push_str(&format!("  - {p}\n"));
        }
        match (&self.cut, &self.next) {
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
            _ => out.push_str("  the whole window fused\n"),
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
