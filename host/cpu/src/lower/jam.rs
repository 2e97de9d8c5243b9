//! Unroll-and-jam of a parallel loop's points: the body of several consecutive points at once,
//! their `for` loops merged into one, so that a value the points share (the `x[j]` of a
//! `matvec` row) is loaded once for all of them and each thread reads several rows of a
//! matrix side by side.
//!
//! A rank-1 parallel loop over index `i` qualifies when
//! - its body holds at least one `for` loop, none of them inside another, with bounds that do
//!   not depend on the point (every point runs the same iterations), and no stores or
//!   reductions inside;
//! - it reduces into no store (a reduction's order across points is the accumulator's);
//! - every index of every access is either `i` itself or does not depend on the point.
//!
//! The jammed body for `R` points holds, run by run of the body's top level: the run's
//! instructions for point `i`, then for `i + 1`, and so on (a copy leaves out what does not
//! depend on the point: it reuses point `i`'s value); each `for` loop becomes one loop whose
//! carried values are those of every point's copy in point order, whose body is point `i`'s
//! body followed by the other points' copies of what depends on the point.
//!
//! Every point computes exactly what it computes alone, by the same operations in the same
//! order, so the results are the same bits. The accesses fault as they would one point at a
//! time: an access of point `i + k` indexes the same elements as point `i`'s, except on the
//! dimensions indexed by the point itself, which the launcher proves in bounds; so point
//! `i + k` faults only where point `i` faults first.

use std::collections::{HashMap, HashSet};

use weft_ir::passes::{map_op_uses, op_uses};
use weft_ir::validate::Types;
use weft_ir::{DType, Inst, Op, ParallelLoop, ValueId};

/// The body of a parallel loop for several consecutive points at once.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Jam {
    /// The index of each point, in order: the loop's own index, then fresh values that the
    /// lowering defines as the index plus 1, 2, and so on.
    pub points: Vec<ValueId>,
    /// The body for every point of `points`.
    pub body: Vec<Inst>,
}

/// Fresh value ids past a kernel's, and the types of those handed out.
pub(crate) struct Fresh {
    next: u32,
    /// Each fresh value and its type.
    pub types: Vec<(ValueId, DType)>,
}

impl Fresh {
    /// Fresh ids from `bound` on (one past the kernel's largest value id).
    pub(crate) fn new(bound: u32) -> Fresh {
        Fresh {
            next: bound,
            types: Vec::new(),
        }
    }

    fn value(&mut self, t: DType) -> Result<ValueId, String> {
        let v = ValueId(self.next);
        self.next = self
            .next
            .checked_add(1)
            .ok_or("the kernel has too many values to jam")?;
        self.types.push((v, t));
        Ok(v)
    }
}

/// The body of `pl` for `rows` consecutive points (at least 2), or why it does not qualify.
pub(crate) fn jam(
    pl: &ParallelLoop,
    rows: usize,
    types: &Types,
    fresh: &mut Fresh,
) -> Result<Jam, String> {
    let [index] = pl.indices[..] else {
        return Err(format!("a loop of rank {}", pl.indices.len()));
    };
    if rows < 2 {
        return Err(format!("{rows} rows"));
    }
    // Checked before anything is copied: most loops (every element-wise one) have none.
    if !pl.body.iter().any(|i| matches!(i.op, Op::For(_))) {
        return Err("no `for` loop in the body".into());
    }
    let point = point_values(pl, index)?;
    let mut points = vec![index];
    let mut copies = Vec::with_capacity(rows - 1);
    for _ in 1..rows {
        let p = fresh.value(DType::I64)?;
        points.push(p);
        copies.push(HashMap::from([(index, p)]));
    }
    let mut cx = Copier {
        types,
        fresh,
        point: &point,
    };
    let mut body = Vec::new();
    let mut run: Vec<&Inst> = Vec::new();
    let mut loops = 0;
    for inst in &pl.body {
        let Op::For(l) = &inst.op else {
            run.push(inst);
            continue;
        };
        cx.run(&mut run, &mut copies, &mut body)?;
        loops += 1;
        let mut merged = l.clone();
        let mut results = inst.results.clone();
        for map in &mut copies {
            for &c in &l.carried {
                cx.define(c, map)?;
            }
            for b in &l.body {
                if let Some(copy) = cx.copy(b, map)? {
                    merged.body.push(copy);
                }
            }
            let at = |v: &ValueId| map.get(v).copied().unwrap_or(*v);
            merged.init.extend(l.init.iter().map(at));
            merged.carried.extend(l.carried.iter().map(at));
            merged.yields.extend(l.yields.iter().map(at));
            for &r in &inst.results {
                results.push(cx.define(r, map)?);
            }
        }
        body.push(Inst {
            results,
            op: Op::For(merged),
        });
    }
    cx.run(&mut run, &mut copies, &mut body)?;
    if loops == 0 {
        return Err("no `for` loop in the body".into());
    }
    Ok(Jam { points, body })
}

/// Makes the copies of instructions for the points after the first; each copy's map takes a
/// value of the loop's body to the copy's.
struct Copier<'a> {
    types: &'a Types,
    fresh: &'a mut Fresh,
    /// The values that depend on the point.
    point: &'a HashSet<ValueId>,
}

impl Copier<'_> {
    /// A fresh value for the copy of `v`, recorded in `map`.
    fn define(
        &mut self,
        v: ValueId,
        map: &mut HashMap<ValueId, ValueId>,
    ) -> Result<ValueId, String> {
        let t = self
            .types
            .get(v)
            .ok_or_else(|| format!("no type for value {v}"))?;
        let c = self.fresh.value(t)?;
        map.insert(v, c);
        Ok(c)
    }

    /// The copy of `inst` for the copy `map`, or `None` if it does not depend on the point
    /// (the copy uses the first point's values).
    fn copy(
        &mut self,
        inst: &Inst,
        map: &mut HashMap<ValueId, ValueId>,
    ) -> Result<Option<Inst>, String> {
        if !copied(inst, self.point) {
            return Ok(None);
        }
        let mut op = inst.op.clone();
        map_op_uses(&mut op, &mut |v| map.get(&v).copied().unwrap_or(v));
        let results = inst
            .results
            .iter()
            .map(|&r| self.define(r, map))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(Inst { results, op }))
    }

    /// Appends the run of instructions `run` to `body`, for the first point and then for each
    /// copy, and empties it.
    fn run(
        &mut self,
        run: &mut Vec<&Inst>,
        copies: &mut [HashMap<ValueId, ValueId>],
        body: &mut Vec<Inst>,
    ) -> Result<(), String> {
        body.extend(run.iter().map(|&i| i.clone()));
        for map in copies {
            for inst in run.iter() {
                if let Some(copy) = self.copy(inst, map)? {
                    body.push(copy);
                }
            }
        }
        run.clear();
        Ok(())
    }
}

/// Whether each point needs its own copy of `inst`: it depends on the point, or writes.
fn copied(inst: &Inst, point: &HashSet<ValueId>) -> bool {
    matches!(inst.op, Op::Store(..) | Op::Reduce(..))
        || inst.results.iter().any(|r| point.contains(r))
}

/// The values of `pl`'s body that depend on the point (`index`, a `for` loop's carried values
/// and results, and whatever uses them), after checking that the body qualifies.
fn point_values(pl: &ParallelLoop, index: ValueId) -> Result<HashSet<ValueId>, String> {
    let mut point = HashSet::from([index]);
    let uses_point = |op: &Op, point: &HashSet<ValueId>| {
        let mut any = false;
        op_uses(op, &mut |v| any |= point.contains(&v));
        any
    };
    let check_access = |op: &Op, point: &HashSet<ValueId>| -> Result<(), String> {
        let acc = match op {
            Op::Load(a) | Op::Store(a, _) => a,
            Op::Reduce(..) => return Err("it reduces into a store".into()),
            Op::Parallel(_) => return Err("a nested parallel loop".into()),
            _ => return Ok(()),
        };
        match acc
            .indices
            .iter()
            .find(|&&v| v != index && point.contains(&v))
        {
            Some(v) => Err(format!(
                "store parameter {} is indexed by {v}, which depends on the point",
                acc.param
            )),
            None => Ok(()),
        }
    };
    for inst in &pl.body {
        check_access(&inst.op, &point)?;
        if let Op::For(l) = &inst.op {
            if point.contains(&l.lo) || point.contains(&l.hi) {
                return Err("a `for` loop's bounds depend on the point".into());
            }
            point.extend(l.carried.iter().copied());
            for b in &l.body {
                if matches!(b.op, Op::Store(..) | Op::For(_)) {
                    return Err(format!(
                        "a `for` loop's body holds a {}",
                        super::inst::op_name(&b.op)
                    ));
                }
                check_access(&b.op, &point)?;
                if uses_point(&b.op, &point) {
                    point.extend(b.results.iter().copied());
                }
            }
            point.extend(inst.results.iter().copied());
        } else if uses_point(&inst.op, &point) {
            point.extend(inst.results.iter().copied());
        }
    }
    Ok(point)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use weft_ir::validate::ValidKernel;

    /// The jam of the first parallel loop of the kernel in `src`, for `rows` points, printed as
    /// a kernel whose loop has the jammed body.
    fn jammed(src: &str, rows: usize) -> Result<String, String> {
        let k = weft_ir::text::parse(src).unwrap();
        let valid = ValidKernel::new(k.clone()).unwrap();
        let pos = k
            .body
            .iter()
            .position(|i| matches!(i.op, Op::Parallel(_)))
            .unwrap();
        let Op::Parallel(pl) = &k.body[pos].op else {
            unreachable!()
        };
        let mut bound = 0;
        weft_ir::visit_defs(&k.body, &mut |v| bound = bound.max(v.0 + 1));
        let mut fresh = Fresh::new(bound);
        let j = jam(pl, rows, valid.types(), &mut fresh)?;
        let mut out = k.clone();
        let Op::Parallel(pl) = &mut out.body[pos].op else {
            unreachable!()
        };
        pl.body = j.body;
        let points: Vec<String> = j.points.iter().map(|p| p.to_string()).collect();
        Ok(format!("points {}\n{out}", points.join(" ")))
    }

    const MATVEC: &str = "kernel @mv(%arg0: store<f64, 2, read>, %arg1: store<f64, 1, read>, %arg2: store<f64, 1, write>) {
  %0 = extent %arg0, 1
  parallel %arg2 (%1) {
    %2 = const i64 0
    %3 = const f64 0.0
    %13, %14 = for %4 = %2 to %0 iter(%5 = %3, %6 = %3) {
      %7 = load %arg0[%1, %4]
      %8 = load %arg1[%4]
      %9 = mul %7, %8
      %10 = add %5, %9
      %11 = mul %8, %8
      %12 = add %6, %11
      yield %10, %12
    }
    %15 = add %13, %14
    store %arg2[%1], %15
  }
}
";

    #[test]
    fn a_row_loop_jams_with_the_shared_loads_once() {
        // The copy for point %16 loads its own row of %arg0 and shares %8 and %11.
        let got = jammed(MATVEC, 2).unwrap();
        let want = "points %1 %16
kernel @mv(%arg0: store<f64, 2, read>, %arg1: store<f64, 1, read>, %arg2: store<f64, 1, write>) {
  %0 = extent %arg0, 1
  parallel %arg2 (%1) {
    %2 = const i64 0
    %3 = const f64 0.0
    %13, %14, %23, %24 = for %4 = %2 to %0 iter(%5 = %3, %6 = %3, %17 = %3, %18 = %3) {
      %7 = load %arg0[%1, %4]
      %8 = load %arg1[%4]
      %9 = mul %7, %8
      %10 = add %5, %9
      %11 = mul %8, %8
      %12 = add %6, %11
      %19 = load %arg0[%16, %4]
      %20 = mul %19, %8
      %21 = add %17, %20
      %22 = add %18, %11
      yield %10, %12, %21, %22
    }
    %15 = add %13, %14
    store %arg2[%1], %15
    %25 = add %23, %24
    store %arg2[%16], %25
  }
}
";
        assert_eq!(got, want);
        // The input prints as it reads: the expected text is in the printer's numbering.
        assert_eq!(weft_ir::text::parse(MATVEC).unwrap().to_string(), MATVEC);
    }

    #[test]
    fn a_computed_row_index_does_not_jam() {
        let src = "kernel @csr(%arg0: store<i64, 1, read>, %arg1: store<f64, 1, read>, %arg2: store<f64, 1, write>) {
  parallel %arg2 (%0) {
    %1 = load %arg0[%0]
    %2 = const i64 0
    %3 = const f64 0.0
    %7 = for %4 = %2 to %1 iter(%5 = %3) {
      %6 = load %arg1[%4]
      yield %6
    }
    store %arg2[%0], %7
  }
}";
        let err = jammed(src, 2).unwrap_err();
        assert!(err.contains("bounds depend on the point"), "{err}");
        let src = "kernel @gather(%arg0: store<i64, 1, read>, %arg1: store<f64, 1, read>, %arg2: store<f64, 1, write>) {
  parallel %arg2 (%0) {
    %1 = load %arg0[%0]
    %2 = const i64 0
    %3 = const i64 4
    %4 = const f64 0.0
    %8 = for %5 = %2 to %3 iter(%6 = %4) {
      %7 = load %arg1[%1]
      yield %7
    }
    store %arg2[%0], %8
  }
}";
        let err = jammed(src, 2).unwrap_err();
        assert!(err.contains("indexed by %1"), "{err}");
    }

    #[test]
    fn loops_without_rows_do_not_jam() {
        let src = "kernel @add(%arg0: store<f64, 1, read>, %arg1: store<f64, 1, write>) {
  parallel %arg1 (%0) {
    %1 = load %arg0[%0]
    store %arg1[%0], %1
  }
}";
        assert!(jammed(src, 4).unwrap_err().contains("no `for` loop"));
        let src = "kernel @sum(%arg0: store<f64, 1, read>, %arg1: store<f64, 0, reduce(sum)>) {
  %0 = const i64 0
  %1 = const i64 2
  parallel %arg0 (%2) {
    %3 = const f64 0.0
    %6 = for %4 = %0 to %1 iter(%5 = %3) {
      yield %5
    }
    reduce sum %arg1[], %6
  }
}";
        assert!(jammed(src, 2).unwrap_err().contains("reduces into a store"));
    }
}
