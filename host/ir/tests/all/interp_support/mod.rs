//! Differential testing of passes with the reference interpreter (`weft_ir::interp`): builds
//! arguments for a kernel from its [`FusionFacts`] (parameters of one iteration class get equal
//! extents; parameters of one alias set become shifted windows of one storage, as a stencil's
//! views of one grid are), runs the kernel before and after a pass on copies of the same data,
//! and compares every storage that no local parameter uses.

#![allow(dead_code, clippy::unwrap_used)]

use weft_ir::interp::{Arg, Storage, View, run_with_limit};

/// The most instructions one differential run may execute (random kernels may loop long).
pub const STEP_LIMIT: u64 = 200_000;
use weft_ir::passes::FusionFacts;
use weft_ir::{DType, Kernel, Param, Scalar};

/// A small deterministic generator (SplitMix64).
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// A random element of `dtype`: floats in [-2, 2) with two decimals, integers in 0..4 (so
    /// that computed indices often land in bounds), bools either way, unsigned storage types
    /// anywhere in their range.
    pub fn scalar(&mut self, dtype: DType) -> Scalar {
        let f = (self.below(400) as f64 - 200.0) / 100.0;
        match dtype {
            DType::F64 => Scalar::F64(f),
            DType::F32 => Scalar::F32(f as f32),
            DType::I64 => Scalar::I64(self.below(4) as i64),
            DType::I32 => Scalar::I32(self.below(4) as i32),
            DType::Bool => Scalar::Bool(self.below(2) == 1),
            // Any element of the type: the `i64` value its bits load as.
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => {
                Scalar::from_bits(dtype, self.next())
            }
        }
    }
}

/// Dimensions beyond this many have extent 1 and no margin, so that storages stay small
/// whatever the rank.
const BIG_DIMS: usize = 3;

/// The extents of a parameter of rank `rank` in iteration space `space`.
fn extents(rank: u32, space: u64) -> Vec<i64> {
    let base = [7i64, 5, 3];
    (0..rank as usize)
        .map(|d| base.get(d).copied().unwrap_or(1) + (space % 2) as i64 * (d == 0) as i64)
        .collect()
}

/// Arguments and storages for `kernel` under `facts`, filled from `seed`. Returns also, for
/// each storage, whether a local parameter uses it.
pub fn make_args(
    kernel: &Kernel,
    facts: &FusionFacts,
    seed: u64,
) -> (Vec<Arg>, Vec<Storage>, Vec<bool>) {
    let mut rng = Rng(seed);
    let n = kernel.params.len();
    let mut args = Vec::with_capacity(n);
    let mut storages: Vec<Storage> = Vec::new();
    let mut local_storage: Vec<bool> = Vec::new();
    // Per alias set: (storage, dtype, rank, members so far).
    let mut sets: Vec<(u32, usize, DType, u32, usize)> = Vec::new();
    for (i, p) in kernel.params.iter().enumerate() {
        let i32_ = i as u32;
        match *p {
            Param::Scalar { dtype } => args.push(Arg::Scalar(rng.scalar(dtype))),
            Param::Store { dtype, rank, .. } => {
                // Classes 0, 2, 4... have one shape and 1, 3, 5... another; parameters in no
                // class have the first (kernels index one store at another's loop index).
                let space = facts.class_of(i32_).map_or(0, u64::from);
                let ext = extents(rank, space);
                // Every storage of a rank fits the largest extents plus a margin of 1 on each
                // side, so every member of an alias set fits in its set's storage.
                let shape: Vec<i64> = (0..rank as usize)
                    .map(|d| {
                        let e = extents(rank, 1)[d].max(extents(rank, 0)[d]);
                        if d < BIG_DIMS { e + 2 } else { e }
                    })
                    .collect();
                let len: i64 = shape.iter().product();
                let member = match facts.alias_of(i32_) {
                    Some(set) => sets
                        .iter_mut()
                        .find(|s| s.0 == set && s.2 == dtype && s.3 == rank)
                        .map(|s| {
                            s.4 += 1;
                            (s.1, s.4 - 1)
                        }),
                    None => None,
                };
                let (storage, m) = match member {
                    Some(x) => x,
                    None => {
                        let data = (0..len).map(|_| rng.scalar(dtype)).collect();
                        storages.push(Storage { dtype, data });
                        local_storage.push(false);
                        let s = storages.len() - 1;
                        if let Some(set) = facts.alias_of(i32_) {
                            sets.push((set, s, dtype, rank, 1));
                        }
                        (s, 0)
                    }
                };
                if facts.is_local(i32_) {
                    local_storage[storage] = true;
                }
                // Member m of an alias set is shifted by one along one dimension.
                let big = (rank as usize).min(BIG_DIMS);
                let mut start: Vec<i64> = (0..rank as usize)
                    .map(|d| i64::from(d < BIG_DIMS))
                    .collect();
                if m > 0 && big > 0 {
                    let d = ((m - 1) / 2) % big;
                    start[d] = if (m - 1) % 2 == 0 { 0 } else { 2 };
                }
                args.push(Arg::Store(View::window(storage, &shape, &start, &ext)));
            }
        }
    }
    (args, storages, local_storage)
}

/// How close two results must be.
#[derive(Clone, Copy, Debug)]
pub enum Tolerance {
    /// Bit for bit.
    Exact,
    /// Floats within this relative error (integers and bools exactly).
    Relative(f64),
}

fn close(a: Scalar, b: Scalar, tol: Tolerance) -> bool {
    if a == b {
        return true;
    }
    let (x, y) = match (a, b) {
        (Scalar::F64(x), Scalar::F64(y)) => (x, y),
        (Scalar::F32(x), Scalar::F32(y)) => (f64::from(x), f64::from(y)),
        _ => return false,
    };
    match tol {
        Tolerance::Exact => false,
        Tolerance::Relative(r) => {
            (x.is_nan() && y.is_nan()) || (x - y).abs() <= r * x.abs().max(y.abs()).max(1.0)
        }
    }
}

/// Runs `before` and `after` (whose parameter `param_map[i]` is `before`'s parameter `i`) on
/// the same data from `seed`, and compares every storage no local parameter uses. Returns
/// `Ok(false)` when `before` fails to run (the comparison says nothing then).
pub fn differential(
    before: &Kernel,
    after: &Kernel,
    param_map: &[Option<u32>],
    facts: &FusionFacts,
    seed: u64,
    tol: Tolerance,
) -> Result<bool, String> {
    let (args, storages, local) = make_args(before, facts, seed);
    let mut s1 = storages.clone();
    if run_with_limit(before, &args, &mut s1, STEP_LIMIT).is_err() {
        return Ok(false);
    }
    let mut args2: Vec<Option<Arg>> = vec![None; after.params.len()];
    for (old, new) in param_map.iter().enumerate() {
        if let Some(new) = new {
            let slot = args2
                .get_mut(*new as usize)
                .ok_or_else(|| format!("param map sends {old} to {new}, out of range"))?;
            *slot = Some(args[old].clone());
        }
    }
    let args2: Vec<Arg> = args2
        .into_iter()
        .enumerate()
        .map(|(i, a)| a.ok_or_else(|| format!("no argument for new param {i}")))
        .collect::<Result<_, _>>()?;
    let mut s2 = storages.clone();
    run_with_limit(after, &args2, &mut s2, 2 * STEP_LIMIT)
        .map_err(|e| format!("the transformed kernel fails: {e}"))?;
    for (k, (a, b)) in s1.iter().zip(&s2).enumerate() {
        if local[k] {
            continue;
        }
        for (j, (&x, &y)) in a.data.iter().zip(&b.data).enumerate() {
            if !close(x, y, tol) {
                return Err(format!(
                    "storage {k} element {j} differs: {x:?} before, {y:?} after"
                ));
            }
        }
    }
    Ok(true)
}
