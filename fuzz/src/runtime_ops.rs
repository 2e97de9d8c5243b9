//! A state machine of runtime operations, run on two cores side by side: one fuses (the real
//! planner, kernels compiled by Cranelift, buffers between guard pages) and one runs every
//! task alone in `weft-ir`'s reference interpreter. The bytes decide the operations: create,
//! write, slice, read, drop, submit (any tiling, launch, owner and scalar, and image
//! partitions through stores of row ranges) and flush.
//!
//! What must hold:
//! - nothing panics, and no access leaves a buffer (a guard page would stop the process);
//! - a submit is refused by both cores or by neither (tasks whose arguments alias one storage
//!   with a write are not submitted: their results depend on the order points run in);
//! - a read gives the same bits on both cores, or fails on both; the fused core may also fail
//!   a read where the unfused one does not only with [`Error::NotRun`]: a fused task of one
//!   plugin that failed loses its other parts;
//! - once every handle is dropped and the window flushed, both cores hold no store, no byte
//!   and no poisoned storage.

use std::sync::Arc;

use weft_ir::{DType, KernelBuilder, Privilege, ReduceOp, Scalar};

use crate::bytes::Bytes;
use weft_runtime::testing::FakeBackend;
use weft_runtime::{
    Core, Error, IndexTask, KernelEntry, NoFusion, Partition, PluginId, Settings, StoreId, TaskArg,
    Tiling,
};

/// The kernels tasks run, all over 1-d `f64` stores, their parallel loop over the first
/// (written) argument.
struct Kernels {
    /// `out = a * k + c` (scalars `k`, `c`).
    affine: Arc<KernelEntry>,
    /// `out = a + b`.
    add: Arc<KernelEntry>,
    /// `x += a * s` (scalar `s`).
    update: Arc<KernelEntry>,
    /// `acc[0] += a[i]` (a sum into the first element of `acc`, read whole), over `a`.
    sum: Arc<KernelEntry>,
    /// `out = a[i + s]` (`a` read whole): an index out of bounds when `s` takes `i` past it.
    shifted: Arc<KernelEntry>,
    /// `out[r] = sum of x[j]` for `j` in `bounds[r, 0]..bounds[r, 1]`, with `x` split by the
    /// image of `bounds` (as CSR rows are).
    rows: Arc<KernelEntry>,
}

fn entry(b: KernelBuilder, name: &str) -> Arc<KernelEntry> {
    match KernelEntry::new(name, &b.finish()) {
        Ok(k) => Arc::new(k),
        Err(e) => panic!("kernel `{name}` is valid by construction: {e}"),
    }
}

impl Kernels {
    fn new() -> Kernels {
        let mut b = KernelBuilder::new("fz.affine");
        let out = b.store(DType::F64, 1, Privilege::Write);
        let a = b.store(DType::F64, 1, Privilege::Read);
        let (k, c) = (b.scalar(DType::F64), b.scalar(DType::F64));
        b.body().parallel(out, |b, i| {
            let x = b.load(a, i);
            let y = b.mul(x, k);
            let z = b.add(y, c);
            b.store(out, i, z);
        });
        let affine = entry(b, "fz.affine");

        let mut b = KernelBuilder::new("fz.add");
        let out = b.store(DType::F64, 1, Privilege::Write);
        let a = b.store(DType::F64, 1, Privilege::Read);
        let c = b.store(DType::F64, 1, Privilege::Read);
        b.body().parallel(out, |b, i| {
            let x = b.load(a, i);
            let y = b.load(c, i);
            let z = b.add(x, y);
            b.store(out, i, z);
        });
        let add = entry(b, "fz.add");

        let mut b = KernelBuilder::new("fz.update");
        let x = b.store(DType::F64, 1, Privilege::ReadWrite);
        let a = b.store(DType::F64, 1, Privilege::Read);
        let s = b.scalar(DType::F64);
        b.body().parallel(x, |b, i| {
            let old = b.load(x, i);
            let v = b.load(a, i);
            let t = b.mul(v, s);
            let new = b.add(old, t);
            b.store(x, i, new);
        });
        let update = entry(b, "fz.update");

        let mut b = KernelBuilder::new("fz.sum");
        let a = b.store(DType::F64, 1, Privilege::Read);
        let acc = b.store(DType::F64, 1, Privilege::Reduce(ReduceOp::Sum));
        b.body().parallel(a, |b, i| {
            let v = b.load(a, i);
            let zero = b.const_i64(0);
            b.reduce(acc, &[zero], v);
        });
        let sum = entry(b, "fz.sum");

        let mut b = KernelBuilder::new("fz.shifted");
        let out = b.store(DType::F64, 1, Privilege::Write);
        let a = b.store(DType::F64, 1, Privilege::Read);
        let s = b.scalar(DType::I64);
        b.body().parallel(out, |b, i| {
            let j = b.add(i[0], s);
            let v = b.load(a, &[j]);
            b.store(out, i, v);
        });
        let shifted = entry(b, "fz.shifted");

        let mut b = KernelBuilder::new("fz.rows");
        let out = b.store(DType::F64, 1, Privilege::Write);
        let bounds = b.store(DType::I64, 2, Privilege::Read);
        let x = b.store(DType::F64, 1, Privilege::Read);
        b.body().parallel(out, |b, i| {
            let (zero, one) = (b.const_i64(0), b.const_i64(1));
            let lo = b.load(bounds, &[i[0], zero]);
            let hi = b.load(bounds, &[i[0], one]);
            // `bounds` holds global indices; the point's `x` starts at `origin(x, 0)`.
            let x0 = b.origin(x, 0);
            let start = b.const_f64(0.0);
            let sum = b.for_loop(lo, hi, &[start], |b, j, acc| {
                let at = b.sub(j, x0);
                let v = b.load(x, &[at]);
                vec![b.add(acc[0], v)]
            });
            b.store(out, i, sum[0]);
        });
        let rows = entry(b, "fz.rows");
        Kernels {
            affine,
            add,
            update,
            sum,
            shifted,
            rows,
        }
    }
}

/// One store as both cores know it: its id on each.
#[derive(Clone, Copy)]
struct Pair {
    fused: StoreId,
    alone: StoreId,
}

/// The two cores and the stores the program holds.
struct Machine {
    fused: Core,
    alone: Core,
    stores: Vec<Pair>,
    /// `(n, 2)` `i64` stores of row ranges, the sources of image partitions.
    bounds: Vec<Pair>,
    kernels: Kernels,
    /// Whether to print each operation (`WEFT_FUZZ_TRACE=1`, to replay a crash).
    trace: bool,
}

fn values(seed: u8, n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|i| (f64::from(seed) * 0.25 + i as f64 * 0.5).to_le_bytes())
        .collect()
}

impl Machine {
    fn new() -> Option<Machine> {
        let backend = crate::guarded_backend()?;
        let settings = Settings {
            window_bound: 8,
            ..Settings::default()
        };
        Some(Machine {
            fused: Core::new(
                settings.clone(),
                Box::new(backend),
                Box::new(weft_fusion::Fuser::default()),
            ),
            alone: Core::new(
                settings,
                Box::new(FakeBackend::default()),
                Box::new(NoFusion),
            ),
            stores: Vec::new(),
            bounds: Vec::new(),
            kernels: Kernels::new(),
            trace: std::env::var_os("WEFT_FUZZ_TRACE").is_some(),
        })
    }

    fn pick(&mut self, b: &mut Bytes) -> Option<Pair> {
        if self.stores.is_empty() {
            return None;
        }
        Some(self.stores[b.below(self.stores.len())])
    }

    fn step(&mut self, b: &mut Bytes) {
        match b.byte() % 9 {
            0 => {
                let n = b.below(12);
                let data = values(b.byte(), n);
                let f = self
                    .fused
                    .store_from_bytes(vec![n as u64], DType::F64, &data);
                let a = self
                    .alone
                    .store_from_bytes(vec![n as u64], DType::F64, &data);
                match (f, a) {
                    (Ok(fused), Ok(alone)) => {
                        if self.trace {
                            eprintln!("s{} = create {n}", self.stores.len());
                        }
                        self.stores.push(Pair { fused, alone });
                    }
                    (f, a) => assert_eq!(f.is_ok(), a.is_ok(), "create: {f:?} against {a:?}"),
                }
            }
            1 => {
                let Some(s) = self.pick(b) else { return };
                let seed = b.byte();
                let len = |core: &Core, id| core.stores().get(id).map(|i| i.shape[0]);
                let (Ok(n), Ok(m)) = (len(&self.fused, s.fused), len(&self.alone, s.alone)) else {
                    panic!("a store the program holds vanished");
                };
                assert_eq!(n, m);
                let data = values(seed, n as usize);
                if self.trace {
                    eprintln!("write store {} (seed {seed})", s.fused.0);
                }
                let f = self.fused.write_bytes(s.fused, &data);
                let a = self.alone.write_bytes(s.alone, &data);
                assert_eq!(f.is_ok(), a.is_ok(), "write: {f:?} against {a:?}");
            }
            2 => {
                let Some(s) = self.pick(b) else { return };
                let (lo, hi) = (b.below(13) as u64, b.below(13) as u64);
                let f = self.fused.slice(s.fused, &[lo], &[hi]);
                let a = self.alone.slice(s.alone, &[lo], &[hi]);
                match (f, a) {
                    (Ok(fused), Ok(alone)) => {
                        if self.trace {
                            eprintln!(
                                "s{} = slice store {} [{lo}..{hi}]",
                                self.stores.len(),
                                s.fused.0
                            );
                        }
                        self.stores.push(Pair { fused, alone });
                    }
                    (f, a) => assert_eq!(f.is_ok(), a.is_ok(), "slice: {f:?} against {a:?}"),
                }
            }
            3 => {
                let Some(s) = self.pick(b) else { return };
                self.compare_read(s);
            }
            4 => {
                if self.stores.is_empty() {
                    return;
                }
                let s = self.stores.swap_remove(b.below(self.stores.len()));
                self.fused.release(s.fused);
                self.alone.release(s.alone);
            }
            5 => {
                // Failures are reported at different flushes (a read may report one first),
                // so only that flushing works is compared.
                let _ = self.fused.flush();
                let _ = self.alone.flush();
            }
            6 => self.create_bounds(b),
            7 => self.submit_rows(b),
            _ => self.submit(b),
        }
    }

    fn compare_read(&mut self, s: Pair) {
        let f = self.fused.read_bytes(s.fused);
        let a = self.alone.read_bytes(s.alone);
        if self.trace {
            eprintln!("read store {}: {f:?} / {a:?}", s.fused.0);
        }
        match (&f, &a) {
            (Ok(f), Ok(a)) => assert_eq!(f, a, "fused and unfused results differ"),
            (Err(_), Err(_)) | (Err(Error::NotRun { .. }), Ok(_)) => {}
            _ => panic!("read: fused {f:?} against unfused {a:?}"),
        }
    }

    /// A store of `n` row ranges `[lo, hi)`, small and in any order (empty, reversed,
    /// overlapping, or past the stores they index).
    fn create_bounds(&mut self, b: &mut Bytes) {
        let n = b.below(8);
        let data: Vec<u8> = (0..2 * n)
            .flat_map(|_| (b.below(20) as i64).to_le_bytes())
            .collect();
        let shape = vec![n as u64, 2];
        let f = self
            .fused
            .store_from_bytes(shape.clone(), DType::I64, &data);
        let a = self.alone.store_from_bytes(shape, DType::I64, &data);
        match (f, a) {
            (Ok(fused), Ok(alone)) => self.bounds.push(Pair { fused, alone }),
            (f, a) => assert_eq!(f.is_ok(), a.is_ok(), "bounds: {f:?} against {a:?}"),
        }
    }

    /// A task of `fz.rows`: `out` and `bounds` split by rows alike, `x` by the image of
    /// `bounds`.
    fn submit_rows(&mut self, b: &mut Bytes) {
        if self.bounds.is_empty() {
            return;
        }
        let bounds = self.bounds[b.below(self.bounds.len())];
        let (Some(out), Some(x)) = (self.pick(b), self.pick(b)) else {
            return;
        };
        let storage = |s: &Pair| self.fused.stores().get(s.fused).map(|i| i.storage).ok();
        if storage(&out) == storage(&x) {
            return;
        }
        let launch = vec![1 + b.below(4) as u64];
        let (tile, offset) = (b.word().unsigned_abs(), b.word());
        let by_rows = |cols: usize| {
            Partition::Tiling(Tiling {
                tile: [vec![tile], vec![2; cols]].concat().into(),
                offset: [vec![offset], vec![0; cols]].concat().into(),
                projection: [vec![Some(0)], vec![None; cols]].concat().into(),
                skew: None,
            })
        };
        let owner = PluginId(u32::from(b.byte() % 2));
        let kernel = self.kernels.rows.clone();
        let make = |side: fn(&Pair) -> StoreId| {
            IndexTask::new(
                owner,
                kernel.clone(),
                launch.clone(),
                vec![
                    TaskArg::new(side(&out), by_rows(0), Privilege::Write),
                    TaskArg::new(side(&bounds), by_rows(1), Privilege::Read),
                    TaskArg::new(side(&x), Partition::Image(1), Privilege::Read),
                ],
                Vec::new(),
            )
        };
        if self.trace {
            eprintln!("submit {:?}", make(|s| s.fused));
        }
        let f = self.fused.submit(make(|s| s.fused));
        let a = self.alone.submit(make(|s| s.alone));
        assert_eq!(
            f.is_ok(),
            a.is_ok(),
            "submit: fused {f:?} against unfused {a:?}"
        );
    }

    fn partition(b: &mut Bytes) -> Partition {
        if b.byte().is_multiple_of(8) {
            return Partition::None;
        }
        let tile = b.word().unsigned_abs();
        Partition::Tiling(Tiling {
            tile: weft_runtime::smallvec::smallvec![tile],
            offset: weft_runtime::smallvec::smallvec![b.word()],
            projection: weft_runtime::smallvec::smallvec![Some(0)],
            skew: None,
        })
    }

    fn submit(&mut self, b: &mut Bytes) {
        let (Some(x), Some(y), Some(z)) = (self.pick(b), self.pick(b), self.pick(b)) else {
            return;
        };
        let k = &self.kernels;
        let launch = vec![1 + b.below(4) as u64];
        let p = Self::partition(b);
        let q = Self::partition(b);
        let (kernel, args, scalars) = match b.byte() % 5 {
            0 => (
                &k.affine,
                vec![(x, p, Privilege::Write), (y, q, Privilege::Read)],
                vec![
                    Scalar::F64(f64::from(b.byte()) - 100.0),
                    Scalar::F64(f64::from(b.byte())),
                ],
            ),
            1 => (
                &k.add,
                vec![
                    (x, p.clone(), Privilege::Write),
                    (y, q, Privilege::Read),
                    (z, p, Privilege::Read),
                ],
                vec![],
            ),
            2 => (
                &k.update,
                vec![(x, p, Privilege::ReadWrite), (y, q, Privilege::Read)],
                vec![Scalar::F64(0.5)],
            ),
            3 => (
                &k.sum,
                vec![
                    (x, p, Privilege::Read),
                    (y, Partition::None, Privilege::Reduce(ReduceOp::Sum)),
                ],
                vec![],
            ),
            _ => (
                &k.shifted,
                vec![
                    (x, p, Privilege::Write),
                    (y, Partition::None, Privilege::Read),
                ],
                vec![Scalar::I64(b.word())],
            ),
        };
        // Two arguments on one storage, one written, may race (SECURITY.md, *Not guaranteed
        // yet*): such a task's result depends on the order its points run in.
        let storage = |s: &Pair| self.fused.stores().get(s.fused).map(|i| i.storage).ok();
        let aliased = args.iter().enumerate().any(|(i, (s, _, pi))| {
            args.iter()
                .skip(i + 1)
                .any(|(t, _, pj)| storage(s) == storage(t) && (pi.mutates() || pj.mutates()))
        });
        if aliased {
            return;
        }
        let owner = PluginId(u32::from(b.byte() % 2));
        let make = |side: fn(&Pair) -> StoreId| {
            IndexTask::new(
                owner,
                kernel.clone(),
                launch.clone(),
                args.iter()
                    .map(|(s, part, privilege)| TaskArg::new(side(s), part.clone(), *privilege))
                    .collect(),
                scalars.clone(),
            )
        };
        if self.trace {
            eprintln!("submit {:?}", make(|s| s.fused));
        }
        let f = self.fused.submit(make(|s| s.fused));
        let a = self.alone.submit(make(|s| s.alone));
        assert_eq!(
            f.is_ok(),
            a.is_ok(),
            "submit: fused {f:?} against unfused {a:?}"
        );
    }

    /// Drops every handle and flushes: both cores must be empty.
    fn finish(mut self) {
        for s in self.stores.clone() {
            self.compare_read(s);
        }
        let bounds = std::mem::take(&mut self.bounds);
        for s in std::mem::take(&mut self.stores).into_iter().chain(bounds) {
            self.fused.release(s.fused);
            self.alone.release(s.alone);
        }
        let _ = self.fused.flush();
        let _ = self.alone.flush();
        for (name, core) in [("fused", &mut self.fused), ("unfused", &mut self.alone)] {
            assert_eq!(core.memory(), (0, 0), "{name}: stores and bytes left");
            assert!(!core.faults().any_poisoned(), "{name}: poison left");
        }
    }
}

/// Runs the operations `data` decodes on both cores (see the module documentation).
pub fn runtime_ops(data: &[u8]) {
    let Some(mut machine) = Machine::new() else {
        return;
    };
    let mut bytes = Bytes::new(data);
    let mut steps = 0;
    while !bytes.done() && steps < 64 {
        machine.step(&mut bytes);
        steps += 1;
    }
    machine.finish();
}
