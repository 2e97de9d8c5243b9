//! The fusion pipeline: what the host knows about a fused kernel's parameters
//! ([`FusionFacts`]), the passes in order ([`optimize`]), what they did ([`PassReport`]) and a
//! registry of passes by name ([`by_name`]) for tools and the filetests.
//!
//! [`optimize`] runs, in order:
//! 1. [loop fusion](super::fuse::fuse_loops) of adjacent parallel loops, to a fixed point;
//! 2. [common-subexpression elimination](super::cse::cse), so that indices computed alike by
//!    different parts become one value;
//! 3. [store-to-load forwarding and redundant-load elimination](super::forward::forward_loads);
//! 4. common-subexpression elimination again (loads replaced by one value make more
//!    operations identical);
//! 5. [producer inlining](super::inline::inline_producers): a local temporary that a small
//!    element-wise loop makes and a loop of another shape streams is recomputed at its loads;
//! 6. [dead-code elimination](super::dce::dce), so that loads whose results nothing uses do
//!    not keep a temporary alive;
//! 7. [scalar replacement](super::scalar::scalar_replace) of local temporaries that are no
//!    longer loaded;
//! 8. dead-code elimination again (what only fed a temporary's stores goes);
//! 9. [removal of unused parameters](super::dce::remove_unused_params);
//!
//! and renumbers the values in definition order, so that the same input gives byte-identical
//! output.

use std::fmt;

use crate::passes::cse::{CseStats, cse};
use crate::passes::dce::{DceStats, dce, remove_unused_params};
use crate::passes::forward::{ForwardStats, forward_loads};
use crate::passes::fuse::{FusionDecision, fuse_loops};
use crate::passes::inline::{Inlined, inline_producers};
use crate::passes::scalar::{ScalarReplacement, scalar_replace};
use crate::{Kernel, Param, renumber, validate};

/// What the host knows about the parameters of a fused kernel, one entry per parameter.
///
/// A missing entry (a vector shorter than the parameter list) reads as `None` or `false`: the
/// safe answer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FusionFacts {
    /// The iteration class of each store parameter: parameters with the same `Some(class)`
    /// have identical sub-store extents at every point (arrays tiled alike). `None` for
    /// scalars and for stores in no class. A parameter is always in its own iteration space,
    /// whatever its class.
    pub class: Vec<Option<u32>>,
    /// Whether each store parameter is a *local* temporary: produced wholly inside the fused
    /// task and never read after it, so its contents at the end do not matter. `false` for
    /// scalars.
    pub local: Vec<bool>,
    /// The alias set of each store parameter: two parameters with different `Some` sets never
    /// share an element (their root storages differ). Parameters with the same `Some(set)` may
    /// overlap (two views or partitions of one root storage, as a stencil's shifted views do);
    /// `None` means unknown: the parameter may overlap any other store parameter. The host
    /// gives the id of the root storage (a scratch buffer, such as a local's, is its own root).
    pub alias: Vec<Option<u32>>,
    /// Whether each store parameter's stores are *deferred*: they take effect when the
    /// parallel loop that makes them ends, after every point of it has run (the back end holds
    /// them back, see `Binding`'s `deferred` in `weft-runtime`). The kernel never loads such a
    /// parameter or reduces into it. So a loop that loads a parameter that may overlap it can
    /// fuse with a later loop that stores it: the fused loop's loads still see the old values.
    /// `false` for scalars.
    pub deferred: Vec<bool>,
    /// Whether the kernel runs on one point only (a fused task of tasks that all launch on one
    /// point: an empty launch domain). Each rank-0 parallel loop then runs its body exactly once, in
    /// program order, so two such loops fuse even where distinct parameters that may overlap
    /// conflict (a write of `A[i, j]` then a read of `A[j, j]`): the fused body makes the same
    /// accesses in the same order. Float sums and products still keep one tree per loop.
    pub one_point: bool,
}

impl FusionFacts {
    /// Facts that say nothing: no classes, no locals, unknown aliasing, for `n` parameters.
    /// The passes are then as careful as they can be: loops fuse only over the same parameter
    /// and only when no two distinct parameters conflict.
    pub fn unknown(n: usize) -> FusionFacts {
        FusionFacts {
            class: vec![None; n],
            local: vec![false; n],
            alias: vec![None; n],
            deferred: vec![false; n],
            one_point: false,
        }
    }

    /// Facts for a kernel whose store parameters are all distinct storages (no two overlap),
    /// with no classes and no locals.
    pub fn distinct(kernel: &Kernel) -> FusionFacts {
        let mut f = FusionFacts::unknown(kernel.params.len());
        for (i, p) in kernel.params.iter().enumerate() {
            if matches!(p, Param::Store { .. }) {
                f.alias[i] = Some(i as u32);
            }
        }
        f
    }

    /// The iteration class of parameter `p`.
    pub fn class_of(&self, p: u32) -> Option<u32> {
        self.class.get(p as usize).copied().flatten()
    }

    /// Whether parameter `p` is a local temporary.
    pub fn is_local(&self, p: u32) -> bool {
        self.local.get(p as usize).copied().unwrap_or(false)
    }

    /// Whether parameter `p`'s stores are deferred.
    pub fn is_deferred(&self, p: u32) -> bool {
        self.deferred.get(p as usize).copied().unwrap_or(false)
    }

    /// The alias set of parameter `p`.
    pub fn alias_of(&self, p: u32) -> Option<u32> {
        self.alias.get(p as usize).copied().flatten()
    }

    /// Whether parameters `a` and `b` have the same sub-store extents at every point: the same
    /// parameter, or two parameters of one iteration class.
    pub fn same_space(&self, a: u32, b: u32) -> bool {
        a == b || matches!((self.class_of(a), self.class_of(b)), (Some(x), Some(y)) if x == y)
    }

    /// Whether parameters `a` and `b` may share an element: the same parameter, two of one
    /// alias set, or one whose alias set is unknown.
    pub fn may_alias(&self, a: u32, b: u32) -> bool {
        match (self.alias_of(a), self.alias_of(b)) {
            _ if a == b => true,
            (Some(x), Some(y)) => x == y,
            _ => true,
        }
    }

    /// The facts for the kernel that [`remove_unused_params`] made: `map[old] == Some(new)`
    /// moves entry `old` to `new`; entries mapped to `None` are dropped.
    pub fn remap(&self, map: &[Option<u32>]) -> FusionFacts {
        let n = map
            .iter()
            .flatten()
            .map(|&i| i as usize + 1)
            .max()
            .unwrap_or(0);
        let mut out = FusionFacts::unknown(n);
        out.one_point = self.one_point;
        for (old, new) in map.iter().enumerate() {
            if let Some(new) = new {
                let (old, new) = (old as u32, *new as usize);
                out.class[new] = self.class_of(old);
                out.local[new] = self.is_local(old);
                out.alias[new] = self.alias_of(old);
                out.deferred[new] = self.is_deferred(old);
            }
        }
        out
    }
}

/// What the passes did to a kernel, for the host's explain output. Parameters are numbered as
/// in the input kernel; loops are the input's top-level parallel loops, numbered from 1 in
/// program order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PassReport {
    /// Each pair of adjacent loops that loop fusion considered, fused or not and why.
    pub fusion: Vec<FusionDecision>,
    /// Loads replaced by the value stored earlier at the same element.
    pub loads_forwarded: usize,
    /// Loads replaced by an earlier load of the same element.
    pub loads_deduplicated: usize,
    /// Instructions removed because an identical one came before.
    pub values_reused: usize,
    /// Local parameters whose producer loop was recomputed at their loads (see
    /// [`inline_producers`]), each with the number of loads.
    pub producers_inlined: Vec<(u32, usize)>,
    /// Local parameters whose stores were deleted because nothing loads them any more.
    pub locals_replaced: Vec<u32>,
    /// Local parameters that stay, each with the reason.
    pub locals_kept: Vec<(u32, String)>,
    /// Stores and reductions deleted by scalar replacement.
    pub stores_deleted: usize,
    /// Instructions removed by dead-code elimination (a loop counts as one).
    pub insts_removed: usize,
    /// Parameters removed because nothing names them any more.
    pub params_removed: Vec<u32>,
    /// Anything else worth saying (an input that does not validate, for one).
    pub notes: Vec<String>,
}

impl PassReport {
    /// The report as lines of text, one fact per line.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for d in &self.fusion {
            out.push(d.to_string());
        }
        if self.loads_forwarded > 0 {
            out.push(format!(
                "{} load(s) replaced by the stored value",
                self.loads_forwarded
            ));
        }
        if self.loads_deduplicated > 0 {
            out.push(format!(
                "{} redundant load(s) removed",
                self.loads_deduplicated
            ));
        }
        if self.values_reused > 0 {
            out.push(format!(
                "{} recomputed value(s) replaced by an earlier one",
                self.values_reused
            ));
        }
        for (p, sites) in &self.producers_inlined {
            out.push(format!(
                "local param {p} recomputed at its {sites} load(s): its producer loop is deleted"
            ));
        }
        for p in &self.locals_replaced {
            out.push(format!(
                "local param {p} replaced by SSA values: its stores are deleted"
            ));
        }
        for (p, why) in &self.locals_kept {
            out.push(format!("local param {p} kept: {why}"));
        }
        if self.stores_deleted > 0 {
            out.push(format!(
                "{} store(s) to locals deleted",
                self.stores_deleted
            ));
        }
        if self.insts_removed > 0 {
            out.push(format!(
                "{} dead instruction(s) removed",
                self.insts_removed
            ));
        }
        for p in &self.params_removed {
            out.push(format!("param {p} removed: no longer used"));
        }
        out.extend(self.notes.iter().cloned());
        out
    }
}

impl fmt::Display for PassReport {
    /// One fact per line, as [`PassReport::lines`] gives them.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for line in self.lines() {
            writeln!(f, "{line}")?;
        }
        Ok(())
    }
}

/// The result of [`optimize`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Optimized {
    /// The optimized kernel, valid whenever the input was.
    pub kernel: Kernel,
    /// For each parameter of the input, its index in [`Optimized::kernel`], or `None` if it was
    /// removed (the host then drops the task argument or scalar).
    pub param_map: Vec<Option<u32>>,
    /// What happened.
    pub report: PassReport,
}

/// Runs the fusion pipeline (see the [module documentation](self)) on `kernel`.
///
/// An input that does not validate comes back unchanged, with a note in the report; so does
/// any input the passes would turn into an invalid kernel (which would be a bug: the output is
/// validated before it is returned). The output is a pure function of the input: the same
/// kernel and facts give a byte-identical result.
pub fn optimize(kernel: &Kernel, facts: &FusionFacts) -> Optimized {
    let identity = || (0..kernel.params.len() as u32).map(Some).collect();
    if let Err(e) = validate(kernel) {
        return Optimized {
            kernel: kernel.clone(),
            param_map: identity(),
            report: PassReport {
                notes: vec![format!("not optimized: {e}")],
                ..PassReport::default()
            },
        };
    }
    let mut report = PassReport::default();
    let (k, decisions) = fuse_loops(kernel, facts);
    report.fusion = decisions;
    let (k, c) = cse(&k);
    add_cse(&mut report, c);
    let (k, fwd) = forward_loads(&k, facts);
    add_forward(&mut report, fwd);
    let (k, c) = cse(&k);
    add_cse(&mut report, c);
    let (k, inl) = inline_producers(&k, facts);
    add_inlined(&mut report, inl);
    let (k, d) = dce(&k);
    add_dce(&mut report, d);
    let (k, sr) = scalar_replace(&k, facts);
    add_scalar(&mut report, sr);
    let (k, d) = dce(&k);
    add_dce(&mut report, d);
    let (k, param_map) = remove_unused_params(&k);
    let k = renumber(&k);
    for (old, new) in param_map.iter().enumerate() {
        if new.is_none() {
            report.params_removed.push(old as u32);
        }
    }
    if let Err(e) = validate(&k) {
        report.notes.push(format!(
            "internal error: the optimized kernel is invalid ({e}); using the input unchanged"
        ));
        return Optimized {
            kernel: kernel.clone(),
            param_map: identity(),
            report,
        };
    }
    Optimized {
        kernel: k,
        param_map,
        report,
    }
}

fn add_forward(r: &mut PassReport, s: ForwardStats) {
    r.loads_forwarded += s.forwarded;
    r.loads_deduplicated += s.deduplicated;
}

fn add_inlined(r: &mut PassReport, s: Inlined) {
    r.producers_inlined.extend(s.producers);
}

fn add_cse(r: &mut PassReport, s: CseStats) {
    r.values_reused += s.reused;
}

fn add_scalar(r: &mut PassReport, s: ScalarReplacement) {
    r.locals_replaced.extend(s.replaced);
    r.locals_kept.extend(s.kept);
    r.stores_deleted += s.stores_deleted;
}

fn add_dce(r: &mut PassReport, s: DceStats) {
    r.insts_removed += s.removed;
}

/// What one pass run by name gives: the new kernel, the facts that describe its parameters and
/// a report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassOutput {
    /// The transformed kernel.
    pub kernel: Kernel,
    /// The facts for the transformed kernel's parameters (the input's, unless the pass
    /// renumbered the parameters).
    pub facts: FusionFacts,
    /// What the pass did (empty for passes that report nothing).
    pub report: PassReport,
    /// For each parameter of the input, its index in the output (`None` if removed).
    pub param_map: Vec<Option<u32>>,
}

impl PassOutput {
    /// The output of a pass that keeps the parameters and reports nothing.
    pub fn new(kernel: Kernel, facts: &FusionFacts) -> PassOutput {
        PassOutput {
            param_map: (0..kernel.params.len() as u32).map(Some).collect(),
            kernel,
            facts: facts.clone(),
            report: PassReport::default(),
        }
    }
}

/// A pass that [`by_name`] can find.
pub type PassFn = fn(&Kernel, &FusionFacts) -> PassOutput;

/// The names [`by_name`] knows, in pipeline order.
pub const PASS_NAMES: &[&str] = &[
    "fuse-loops",
    "cse",
    "forward",
    "inline-producers",
    "scalar-replace",
    "dce",
    "remove-unused-params",
    "optimize",
];

/// The pass called `name` (one of [`PASS_NAMES`]), or `None`.
///
/// - `fuse-loops`: [`fuse_loops`];
/// - `cse`: [`cse`];
/// - `forward`: [`forward_loads`];
/// - `inline-producers`: [`inline_producers`];
/// - `scalar-replace`: [`scalar_replace`];
/// - `dce`: [`dce`];
/// - `remove-unused-params`: [`remove_unused_params`] (the facts follow the parameters);
/// - `optimize`: [`optimize`] (likewise).
pub fn by_name(name: &str) -> Option<PassFn> {
    let pass: PassFn = match name {
        "fuse-loops" => |k, f| {
            let (kernel, decisions) = fuse_loops(k, f);
            let mut out = PassOutput::new(kernel, f);
            out.report.fusion = decisions;
            out
        },
        "cse" => |k, f| {
            let (kernel, s) = cse(k);
            let mut out = PassOutput::new(kernel, f);
            add_cse(&mut out.report, s);
            out
        },
        "forward" => |k, f| {
            let (kernel, s) = forward_loads(k, f);
            let mut out = PassOutput::new(kernel, f);
            add_forward(&mut out.report, s);
            out
        },
        "inline-producers" => |k, f| {
            let (kernel, s) = inline_producers(k, f);
            let mut out = PassOutput::new(kernel, f);
            add_inlined(&mut out.report, s);
            out
        },
        "scalar-replace" => |k, f| {
            let (kernel, s) = scalar_replace(k, f);
            let mut out = PassOutput::new(kernel, f);
            add_scalar(&mut out.report, s);
            out
        },
        "dce" => |k, f| {
            let (kernel, s) = dce(k);
            let mut out = PassOutput::new(kernel, f);
            add_dce(&mut out.report, s);
            out
        },
        "remove-unused-params" => |k, f| {
            let (kernel, map) = remove_unused_params(k);
            let mut out = PassOutput::new(kernel, &f.remap(&map));
            for (old, new) in map.iter().enumerate() {
                if new.is_none() {
                    out.report.params_removed.push(old as u32);
                }
            }
            out.param_map = map;
            out
        },
        "optimize" => |k, f| {
            let o = optimize(k, f);
            PassOutput {
                facts: f.remap(&o.param_map),
                kernel: o.kernel,
                report: o.report,
                param_map: o.param_map,
            }
        },
        _ => return None,
    };
    Some(pass)
}
