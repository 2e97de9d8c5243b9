//! Loop distribution in strips: a parallel loop whose points run `for` loops *and* a long
//! straight run of arithmetic (logistic regression's step: a row's dot product, the sigmoid
//! of it, then the row's share of the gradient) is cut into consecutive *segments*, each a
//! parallel loop of its own over the same points, so that the straight run compiles to vector
//! code (see [`crate::lower::vector`]) while the segments with `for` loops keep their scalar
//! or lane code. Values that one segment computes and a later one uses go through *scratch*
//! stores: hidden rank-1 parameters, written and read at the loop's own index.
//!
//! The segments of one loop form a *group*, which compiles to one step: a driver function
//! (see `lower::driver`) runs them strip by strip, [`STRIP_ROWS`] points at a time, each
//! segment over the whole strip before the next, with the scratch stores pointed at small
//! buffers on its stack. So the scratch values stay in the first-level cache and the rows a
//! strip reads twice (once per segment) in the second, and the group over rows `lo..hi`
//! means exactly what the loop did over them. The launcher sees one parallel step, as before.
//!
//! # When a loop is cut
//! - Its rank is 1 (the strips are rows of scratch buffers of a fixed size).
//! - Its body has a `for` loop at its top level, and a run of at least [`HEAVY`] value
//!   operations between (or around) its `for` loops.
//! - No reduction into a 0-d store is left in it (those that stay after [`crate::leaves`]
//!   keep register accumulators, which each call of a segment would write out again).
//! - Every store parameter that the loop writes (stores or reduces into) is accessed by one
//!   segment only, so moving a segment's work for later points before another segment's work
//!   for earlier ones cannot be seen (a parallel loop's points are independent; the order of a
//!   store's reductions is unchanged, being all in one segment).
//! - At most [`MAX_CROSSING`] values cross each cut, none a `bool`.
//!
//! The cuts sit where the fewest values cross: the first cut at the earliest such place in
//! the run, the second at the latest. Operations of the body that depend on no point (the
//! constants of a lowered `exp`, index arithmetic on extents) move to the kernel's top level,
//! where every segment's function recomputes what it uses.
//!
//! After a fault (an index out of bounds) the stores hold unspecified values, as ever; a
//! strip's earlier segments may have run for points past the one that faulted, and when two
//! points would fault in different segments, the one reported may differ from the uncut loop's.

use std::collections::{HashMap, HashSet};

use weft_ir::passes::{map_uses, op_uses};
use weft_ir::validate::Types;
use weft_ir::{Access, DType, Inst, Kernel, Op, ParallelLoop, Param, Privilege, ValueId};

/// Points per strip of a group's driver.
pub(crate) const STRIP_ROWS: i64 = 512;

/// The value operations a straight run needs to be worth a segment of its own.
pub(crate) const HEAVY: usize = 16;

/// The most values that may cross one cut.
pub(crate) const MAX_CROSSING: usize = 4;

/// More fresh value ids than one cut takes (three segment indices and a load in each
/// segment per crossing value).
const FRESH_IDS: u32 = 64;

/// A loop cut into segments, as the rewritten kernel holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Group {
    /// The position in the rewritten kernel's body of the first segment's loop.
    pub first: usize,
    /// How many segments (consecutive parallel loops from `first`).
    pub loops: usize,
    /// Which segment holds the straight run (an offset from `first`).
    pub heavy: usize,
    /// The scratch store parameters the segments pass values through.
    pub scratch: Vec<u32>,
    /// The position of the original loop among the kernel's top-level parallel loops.
    pub source: usize,
    /// The store parameter the loop runs over (the scratch stores are shaped like it).
    pub over: u32,
}

/// `kernel` with each top-level parallel loop that qualifies (and is not in `skip`, a set of
/// positions among the top-level parallel loops) cut into segments, and the groups. The
/// scratch parameters follow the kernel's own. `types` are `kernel`'s.
pub(crate) fn rewrite(
    kernel: &Kernel,
    types: &Types,
    skip: &HashSet<usize>,
) -> (Kernel, Vec<Group>) {
    let mut out = Kernel {
        name: kernel.name.clone(),
        params: kernel.params.clone(),
        body: Vec::with_capacity(kernel.body.len()),
    };
    let mut groups = Vec::new();
    let mut next = kernel.value_bound();
    let mut loop_index = 0usize;
    for inst in &kernel.body {
        let Op::Parallel(pl) = &inst.op else {
            out.body.push(inst.clone());
            continue;
        };
        let source = loop_index;
        loop_index += 1;
        // A cut takes a few fresh value ids (an index per segment, a load per crossing value):
        // a kernel near the limit keeps its loop.
        let room = next.saturating_add(FRESH_IDS) < weft_ir::semantics::MAX_VALUE_ID;
        let split = if skip.contains(&source) || !room {
            None
        } else {
            plan(pl, &kernel.params, types)
        };
        let Some(split) = split else {
            out.body.push(inst.clone());
            continue;
        };
        let cut = apply(pl, split, &mut out.params, &mut next);
        out.body.extend(cut.hoisted);
        let first = out.body.len();
        let loops = cut.loops.len();
        out.body.extend(cut.loops.into_iter().map(|l| Inst {
            results: vec![],
            op: Op::Parallel(l),
        }));
        groups.push(Group {
            first,
            loops,
            heavy: cut.heavy,
            scratch: cut.scratch,
            source,
            over: pl.over,
        });
    }
    (out, groups)
}

/// Where to cut one loop.
struct Split {
    /// The body's operations that depend on no point, in order (they move out of the loop).
    hoisted: Vec<Inst>,
    /// The rest of the body.
    rest: Vec<Inst>,
    /// The segments: ranges of `rest`.
    ranges: Vec<std::ops::Range<usize>>,
    /// Which range is the straight run.
    heavy: usize,
    /// The values crossing a cut: (value, its type, the range defining it).
    crossing: Vec<(ValueId, DType, usize)>,
}

/// The values `inst` uses, at any depth (a `for` loop's yields included).
fn uses_of(inst: &Inst, f: &mut impl FnMut(ValueId)) {
    op_uses(&inst.op, f);
    match &inst.op {
        Op::For(l) => {
            for i in &l.body {
                uses_of(i, f);
            }
            l.yields.iter().copied().for_each(f);
        }
        Op::Parallel(p) => {
            for i in &p.body {
                uses_of(i, f);
            }
        }
        _ => {}
    }
}

/// Whether `body` reduces into a 0-d store anywhere.
fn reduces_to_scalar(body: &[Inst]) -> bool {
    body.iter().any(|inst| match &inst.op {
        Op::Reduce(acc, ..) => acc.indices.is_empty(),
        Op::For(l) => reduces_to_scalar(&l.body),
        _ => false,
    })
}

/// Calls `f(param, writes)` on every access in `inst`, at any depth.
fn accesses(inst: &Inst, f: &mut impl FnMut(u32, bool)) {
    match &inst.op {
        Op::Load(a) => f(a.param, false),
        Op::Store(a, _) | Op::Reduce(a, _, _) => f(a.param, true),
        Op::For(l) => {
            for i in &l.body {
                accesses(i, f);
            }
        }
        _ => {}
    }
}

/// Decides whether and where to cut `pl`.
fn plan(pl: &ParallelLoop, params: &[Param], types: &Types) -> Option<Split> {
    if pl.indices.len() != 1 || reduces_to_scalar(&pl.body) {
        return None;
    }
    if !pl.body.iter().any(|i| matches!(i.op, Op::For(_))) {
        return None;
    }
    // Operations that depend on no point move out.
    let mut varying: HashSet<ValueId> = pl.indices.iter().copied().collect();
    let (mut hoisted, mut rest) = (Vec::new(), Vec::new());
    for inst in &pl.body {
        let mut depends = false;
        op_uses(&inst.op, &mut |v| depends |= varying.contains(&v));
        if inst.op.is_value() && !depends {
            hoisted.push(inst.clone());
        } else {
            inst.results.iter().for_each(|r| {
                varying.insert(*r);
            });
            rest.push(inst.clone());
        }
    }
    // The heaviest straight run.
    let n = rest.len();
    // Value operations before each position: a run's weight in constant time (a kernel may
    // have hundreds of thousands of instructions).
    let mut before = Vec::with_capacity(n + 1);
    before.push(0usize);
    for inst in &rest {
        before.push(before[before.len() - 1] + usize::from(inst.op.is_value()));
    }
    let weight = |r: std::ops::Range<usize>| before[r.end] - before[r.start];
    let mut best: Option<(usize, usize)> = None;
    let mut start = 0;
    for pos in 0..=n {
        if rest.get(pos).is_none_or(|i| matches!(i.op, Op::For(_))) {
            if pos > start && best.is_none_or(|(a, b)| weight(start..pos) > weight(a..b)) {
                best = Some((start, pos));
            }
            start = pos + 1;
        }
    }
    let (a, b) = best?;
    if weight(a..b) < HEAVY {
        return None;
    }
    // Where each value of `rest` is defined, and the last position that uses it.
    let mut def_at: HashMap<ValueId, usize> = HashMap::new();
    let mut last_use: HashMap<ValueId, usize> = HashMap::new();
    for (pos, inst) in rest.iter().enumerate() {
        uses_of(inst, &mut |v| {
            last_use.insert(v, pos);
        });
        for r in &inst.results {
            def_at.insert(*r, pos);
        }
    }
    let crossing_at = |c: usize| -> Vec<ValueId> {
        let mut vs: Vec<ValueId> = def_at
            .iter()
            .filter(|(v, d)| **d < c && last_use.get(v).is_some_and(|u| *u >= c))
            .map(|(v, _)| *v)
            .collect();
        vs.sort_unstable();
        vs
    };
    // How many values cross each cut: a value defined at `d` and last used at `u > d`
    // crosses the cuts `d + 1 ..= u`; counted with one sweep rather than per cut.
    let mut delta = vec![0i64; n + 2];
    for (v, &d) in &def_at {
        if let Some(&u) = last_use.get(v)
            && u > d
        {
            delta[d + 1] += 1;
            delta[u + 1] -= 1;
        }
    }
    let mut crossing = Vec::with_capacity(n + 1);
    let mut live = 0i64;
    for d in &delta[..=n] {
        live += d;
        crossing.push(live);
    }
    let c1 = (a..=b).min_by_key(|&c| (crossing[c], c))?;
    let c2 = (c1..=b).min_by_key(|&c| (crossing[c], std::cmp::Reverse(c)))?;
    if weight(c1..c2) < HEAVY {
        return None;
    }
    let mut ranges = Vec::new();
    let mut heavy = 0;
    for r in [0..c1, c1..c2, c2..n] {
        if r.is_empty() {
            continue;
        }
        if r.start == c1 && r.end == c2 {
            heavy = ranges.len();
        }
        ranges.push(r);
    }
    if ranges.len() < 2 {
        return None;
    }
    let segment_of = |pos: usize| ranges.iter().position(|r| r.contains(&pos));
    // A store parameter written by the loop is accessed in one segment only.
    let mut seen: HashMap<u32, (HashSet<usize>, bool)> = HashMap::new();
    for (pos, inst) in rest.iter().enumerate() {
        let seg = segment_of(pos)?;
        accesses(inst, &mut |p, w| {
            let e = seen.entry(p).or_default();
            e.0.insert(seg);
            e.1 |= w;
        });
    }
    if seen.values().any(|(segs, w)| *w && segs.len() > 1) {
        return None;
    }
    // The values crossing a cut.
    let mut crossing = Vec::new();
    for cut in ranges.iter().skip(1).map(|r| r.start) {
        let vs = crossing_at(cut);
        if vs.len() > MAX_CROSSING {
            return None;
        }
        for v in vs {
            if crossing.iter().any(|(w, _, _)| *w == v) {
                continue;
            }
            let t = types.get(v)?;
            if t == DType::Bool {
                return None;
            }
            crossing.push((v, t, segment_of(*def_at.get(&v)?)?));
        }
    }
    // Scratch stores are new parameters; a kernel near the limits keeps its loop.
    u32::try_from(params.len() + crossing.len()).ok()?;
    Some(Split {
        hoisted,
        rest,
        ranges,
        heavy,
        crossing,
    })
}

/// A loop cut by [`apply`].
struct Cut {
    hoisted: Vec<Inst>,
    loops: Vec<ParallelLoop>,
    heavy: usize,
    scratch: Vec<u32>,
}

/// Cuts `pl` as `split` says, adding the scratch parameters to `params`.
fn apply(pl: &ParallelLoop, split: Split, params: &mut Vec<Param>, next: &mut u32) -> Cut {
    let mut fresh = || {
        let v = ValueId(*next);
        *next += 1;
        v
    };
    let Split {
        hoisted,
        rest,
        ranges,
        heavy,
        crossing,
    } = split;
    let mut scratch = Vec::new();
    let mut scratch_of = HashMap::new();
    for (v, t, _) in &crossing {
        let param = params.len() as u32;
        params.push(Param::Store {
            dtype: *t,
            rank: 1,
            privilege: Privilege::ReadWrite,
        });
        scratch.push(param);
        scratch_of.insert(*v, param);
    }
    let index = pl.indices[0];
    let mut loops = Vec::with_capacity(ranges.len());
    for (seg, range) in ranges.iter().enumerate() {
        let own = if seg == 0 { index } else { fresh() };
        let at = |param: u32| Access {
            param,
            indices: vec![own],
        };
        let mut body = Vec::new();
        // Values from earlier segments, loaded at the start.
        let mut renamed: HashMap<ValueId, ValueId> = HashMap::new();
        renamed.insert(index, own);
        for (v, _, def_seg) in &crossing {
            let used = rest[range.clone()].iter().any(|inst| {
                let mut u = false;
                uses_of(inst, &mut |w| u |= w == *v);
                u
            });
            if *def_seg < seg && used {
                let loaded = fresh();
                body.push(Inst {
                    results: vec![loaded],
                    op: Op::Load(at(scratch_of[v])),
                });
                renamed.insert(*v, loaded);
            }
        }
        for inst in &rest[range.clone()] {
            let mut inst = inst.clone();
            map_uses(std::slice::from_mut(&mut inst), &mut |v| {
                renamed.get(&v).copied().unwrap_or(v)
            });
            let stores: Vec<Inst> = inst
                .results
                .iter()
                .filter_map(|r| scratch_of.get(r).map(|&p| (r, p)))
                .map(|(r, p)| Inst {
                    results: vec![],
                    op: Op::Store(at(p), *r),
                })
                .collect();
            body.push(inst);
            body.extend(stores);
        }
        loops.push(ParallelLoop {
            over: pl.over,
            indices: vec![own],
            body,
        });
    }
    Cut {
        hoisted,
        loops,
        heavy,
        scratch,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_ir::ValidKernel;
    use weft_ir::interp::{Arg, Storage, View, run};
    use weft_ir::text::parse;

    /// A logistic-regression-like row loop: a dot product in a `for` loop, a long straight run
    /// on it, then a `for` loop reducing the row's share into a vector.
    const ROWS: &str = r#"
kernel @rows(%arg0: store<f64, 2, read>, %arg1: store<f64, 1, read>, %arg2: store<f64, 1, read>, %arg3: store<f64, 1, reduce(sum)>) {
  %0 = extent %arg0, 1
  parallel %arg2 (%1) {
    %2 = const i64 0
    %3 = const f64 0.0
    %6 = for %4 = %2 to %0 iter(%5 = %3) {
      %7 = load %arg0[%1, %4]
      %8 = load %arg1[%4]
      %9 = mul %7, %8
      %10 = add %5, %9
      yield %10
    }
    %11 = const f64 1.5
    %12 = mul %6, %11
    %13 = add %12, %11
    %14 = mul %13, %13
    %15 = sub %14, %12
    %16 = mul %15, %11
    %17 = add %16, %13
    %18 = mul %17, %17
    %19 = sub %18, %16
    %20 = mul %19, %11
    %21 = add %20, %19
    %22 = mul %21, %21
    %23 = sub %22, %20
    %24 = mul %23, %11
    %25 = add %24, %23
    %26 = mul %25, %25
    %27 = sub %26, %24
    %28 = load %arg2[%1]
    %29 = sub %27, %28
    for %30 = %2 to %0 {
      %31 = load %arg0[%1, %30]
      %32 = mul %31, %29
      reduce sum %arg3[%30], %32
    }
  }
}
"#;

    fn valid(src: &str) -> ValidKernel {
        ValidKernel::new(parse(src).expect("parses")).expect("valid")
    }

    #[test]
    fn cuts_the_straight_run_out_with_one_value_across_each_cut() {
        let k = valid(ROWS);
        let (out, groups) = rewrite(k.kernel(), k.types(), &HashSet::new());
        assert_eq!(groups.len(), 1);
        let g = &groups[0];
        assert_eq!((g.loops, g.heavy), (3, 1));
        assert_eq!(g.scratch, vec![4, 5]);
        assert_eq!(out.params.len(), 6);
        let loops: Vec<&ParallelLoop> = out.body[g.first..g.first + g.loops]
            .iter()
            .filter_map(|i| match &i.op {
                Op::Parallel(p) => Some(p),
                _ => None,
            })
            .collect();
        assert_eq!(loops.len(), 3);
        // The heavy segment loads one scratch value and stores one.
        let heavy = loops[1];
        assert!(heavy.body.iter().all(|i| !matches!(i.op, Op::For(_))));
        let scratch_loads = heavy
            .body
            .iter()
            .filter(|i| matches!(&i.op, Op::Load(a) if a.param == 4))
            .count();
        let scratch_stores = heavy
            .body
            .iter()
            .filter(|i| matches!(&i.op, Op::Store(a, _) if a.param == 5))
            .count();
        assert_eq!((scratch_loads, scratch_stores), (1, 1));
        ValidKernel::new(out).expect("the rewritten kernel is valid");
    }

    #[test]
    fn the_cut_kernel_computes_what_the_loop_did() {
        let k = valid(ROWS);
        let (out, groups) = rewrite(k.kernel(), k.types(), &HashSet::new());
        assert_eq!(groups.len(), 1);
        let (m, d) = (37usize, 5usize);
        let a: Vec<f64> = (0..m * d)
            .map(|i| ((i * 7 % 11) as f64 - 5.0) / 8.0)
            .collect();
        let x: Vec<f64> = (0..d).map(|i| 0.25 * i as f64 - 0.5).collect();
        let y: Vec<f64> = (0..m).map(|i| (i % 3) as f64).collect();
        let (mi, di) = (m as i64, d as i64);
        let mut storages = vec![
            Storage::from_f64(DType::F64, &a),
            Storage::from_f64(DType::F64, &x),
            Storage::from_f64(DType::F64, &y),
            Storage::zeros(DType::F64, d),
        ];
        let mut args = vec![
            Arg::Store(View::dense(0, &[mi, di])),
            Arg::Store(View::dense(1, &[di])),
            Arg::Store(View::dense(2, &[mi])),
            Arg::Store(View::dense(3, &[di])),
        ];
        let mut before = storages.clone();
        run(k.kernel(), &args, &mut before).expect("runs");
        // Whole-length scratch stores: the segments run one after the other over every point.
        storages.push(Storage::zeros(DType::F64, m));
        storages.push(Storage::zeros(DType::F64, m));
        args.push(Arg::Store(View::dense(4, &[mi])));
        args.push(Arg::Store(View::dense(5, &[mi])));
        run(&out, &args, &mut storages).expect("runs");
        assert_eq!(before[3], storages[3]);
        assert!(before[3].to_f64().iter().all(|v| *v != 0.0));
    }

    #[test]
    fn a_loop_writing_one_store_from_two_segments_stays_whole() {
        // The straight run stores into %arg3 as the reduction loop does.
        let src = ROWS.replace(
            "    %28 = load %arg2[%1]",
            "    %33 = const i64 0\n    reduce sum %arg3[%33], %27\n    %28 = load %arg2[%1]",
        );
        let k = valid(&src);
        let (_, groups) = rewrite(k.kernel(), k.types(), &HashSet::new());
        assert!(groups.is_empty());
    }

    #[test]
    fn a_short_run_or_a_skipped_loop_stays_whole() {
        let k = valid(ROWS);
        let (out, groups) = rewrite(k.kernel(), k.types(), &HashSet::from([0]));
        assert!(groups.is_empty());
        assert_eq!(&out, k.kernel());
        // Cut the run down below HEAVY operations.
        let mut lines: Vec<&str> = ROWS.lines().collect();
        lines.retain(|l| {
            ![
                "%14 ", "%15 ", "%16 ", "%17 ", "%18 ", "%19 ", "%20 ", "%21 ", "%22 ", "%23 ",
            ]
            .iter()
            .any(|p| l.trim_start().starts_with(p))
        });
        let short = lines
            .join("\n")
            .replace("%24 = mul %23, %11", "%24 = mul %13, %11")
            .replace("%25 = add %24, %23", "%25 = add %24, %12");
        let k = valid(&short);
        let (_, groups) = rewrite(k.kernel(), k.types(), &HashSet::new());
        assert!(groups.is_empty());
    }
}
