//! Kernels built from the input, valid by construction, run by Cranelift-compiled code over
//! buffers between guard pages and by `weft-ir`'s reference interpreter, on the same stores,
//! launches and tilings.
//!
//! A kernel reads two `f64` stores at any index the input computes (so accesses leave the
//! stores, and the views that are slices of bigger roots), mixes `f64` and `i64` arithmetic
//! (every binary, unary, comparison, select and cast the IR has for them, the math functions
//! lowered to polynomials), runs bounded `for` loops that carry values and may read a store
//! at their induction value (a CSR row's access: one range check before the loop, and a
//! prefetch past its first iteration), and writes its parallel loop's own element of the
//! output (race-free). What must hold: nothing panics, no access leaves a buffer (a guard
//! page would stop the process), and the two runs agree: the same output bits (any NaN
//! equals any NaN: the IR does not fix NaN payloads), or both fail.

use std::sync::Arc;

use weft_ir::builder::Value;
use weft_ir::{BinaryOp, CmpOp, DType, KernelBuilder, Privilege, Scalar, UnaryOp};
use weft_runtime::testing::FakeBackend;
use weft_runtime::{
    Core, KernelEntry, NoFusion, Partition, PluginId, Settings, StoreId, TaskArg, Tiling,
};

use crate::bytes::Bytes;

/// The binary operators the IR has for floats and for integers, and its float unary ones.
fn float_binary() -> Vec<BinaryOp> {
    let bitwise = [
        BinaryOp::And,
        BinaryOp::Or,
        BinaryOp::Xor,
        BinaryOp::Shl,
        BinaryOp::Shr,
    ];
    BinaryOp::ALL
        .into_iter()
        .filter(|op| !bitwise.contains(op))
        .collect()
}

fn int_binary() -> Vec<BinaryOp> {
    BinaryOp::ALL
        .into_iter()
        .filter(|op| !matches!(op, BinaryOp::Pow | BinaryOp::Atan2))
        .collect()
}

fn float_unary() -> Vec<UnaryOp> {
    UnaryOp::ALL
        .into_iter()
        .filter(|op| *op != UnaryOp::Not)
        .collect()
}

/// The values a kernel under construction can use, by type.
struct Pool {
    floats: Vec<Value>,
    ints: Vec<Value>,
}

impl Pool {
    fn float(&self, b: &mut Bytes) -> Value {
        self.floats[b.below(self.floats.len())]
    }

    fn int(&self, b: &mut Bytes) -> Value {
        self.ints[b.below(self.ints.len())]
    }
}

/// Builds `out[i] = f(a, c, s, t, i)` from the input (see the module documentation).
fn kernel(b: &mut Bytes) -> Option<Arc<KernelEntry>> {
    let mut k = KernelBuilder::new("fz.gen");
    let out = k.store(DType::F64, 1, Privilege::Write);
    let a = k.store(DType::F64, 1, Privilege::Read);
    let c = k.store(DType::F64, 1, Privilege::Read);
    let s = k.scalar(DType::F64);
    let t = k.scalar(DType::I64);
    let steps = b.below(24);
    let (fbin, ibin, fun) = (float_binary(), int_binary(), float_unary());
    k.body().parallel(out, |bb, i| {
        let mut pool = Pool {
            floats: vec![s],
            ints: vec![i[0], t],
        };
        for _ in 0..steps {
            match b.byte() % 11 {
                0 => pool.floats.push(bb.const_f64(b.float())),
                1 => pool.ints.push(bb.const_i64(b.word())),
                2 => {
                    let op = fbin[b.below(fbin.len())];
                    let (x, y) = (pool.float(b), pool.float(b));
                    pool.floats.push(bb.binary(op, x, y));
                }
                3 => {
                    let op = ibin[b.below(ibin.len())];
                    let (x, y) = (pool.int(b), pool.int(b));
                    pool.ints.push(bb.binary(op, x, y));
                }
                4 => {
                    let op = fun[b.below(fun.len())];
                    let x = pool.float(b);
                    pool.floats.push(bb.unary(op, x));
                }
                5 | 6 => {
                    // At the loop's own index plus an offset, or anywhere.
                    let at = pool.int(b);
                    let at = if b.byte().is_multiple_of(2) {
                        bb.binary(BinaryOp::Add, i[0], at)
                    } else {
                        at
                    };
                    let from = if b.byte().is_multiple_of(2) { a } else { c };
                    pool.floats.push(bb.load(from, &[at]));
                }
                7 => {
                    let op = CmpOp::ALL[b.below(CmpOp::ALL.len())];
                    let (x, y) = (pool.float(b), pool.float(b));
                    let cond = bb.cmp(op, x, y);
                    let (p, q) = (pool.float(b), pool.float(b));
                    pool.floats.push(bb.select(cond, p, q));
                }
                8 => {
                    if b.byte().is_multiple_of(2) {
                        let x = pool.float(b);
                        pool.ints.push(bb.cast(DType::I64, x));
                    } else {
                        let x = pool.int(b);
                        pool.floats.push(bb.cast(DType::F64, x));
                    }
                }
                9 => {
                    let op = [UnaryOp::Neg, UnaryOp::Abs, UnaryOp::Not][b.below(3)];
                    let x = pool.int(b);
                    pool.ints.push(bb.unary(op, x));
                }
                _ => {
                    // A bounded loop that carries one value of each type.
                    let lo = bb.const_i64(0);
                    let hi = bb.const_i64(b.below(9) as i64);
                    let init = [pool.float(b), pool.int(b)];
                    let (fop, iop) = (fbin[b.below(fbin.len())], ibin[b.below(ibin.len())]);
                    let extra = pool.float(b);
                    // Either the induction value itself or a store's element there (a CSR
                    // row's access, whose range the loop checks once and prefetches past).
                    let read = if b.byte().is_multiple_of(2) {
                        Some(if b.byte().is_multiple_of(2) { a } else { c })
                    } else {
                        None
                    };
                    let results = bb.for_loop(lo, hi, &init, |lb, j, carried| {
                        let jf = match read {
                            Some(from) => lb.load(from, &[j]),
                            None => lb.cast(DType::F64, j),
                        };
                        let x = lb.binary(fop, carried[0], jf);
                        let x = lb.binary(BinaryOp::Add, x, extra);
                        let n = lb.binary(iop, carried[1], j);
                        vec![x, n]
                    });
                    if let [x, n] = results[..] {
                        pool.floats.push(x);
                        pool.ints.push(n);
                    }
                }
            }
        }
        let result = pool.float(b);
        bb.store(out, i, result);
    });
    KernelEntry::new("fz.gen", &k.finish()).ok().map(Arc::new)
}

/// Two cores that run each task alone: one compiled over guarded buffers, one interpreted.
fn cores() -> Option<(Core, Core)> {
    Some((
        Core::new(
            Settings::default(),
            Box::new(crate::guarded_backend()?),
            Box::new(NoFusion),
        ),
        Core::new(
            Settings::default(),
            Box::new(FakeBackend::default()),
            Box::new(NoFusion),
        ),
    ))
}

/// A store of `n` values from the input, or a slice of a bigger root holding them (so that
/// the root has elements outside the view).
fn input(core: &mut Core, data: &[f64], pad: (u64, u64)) -> Option<StoreId> {
    let n = data.len() as u64;
    let mut all = vec![-7.5; pad.0 as usize];
    all.extend_from_slice(data);
    all.extend(std::iter::repeat_n(9.25, pad.1 as usize));
    let bytes: Vec<u8> = all.iter().flat_map(|v| v.to_le_bytes()).collect();
    let root = core
        .store_from_bytes(vec![all.len() as u64], DType::F64, &bytes)
        .ok()?;
    if pad == (0, 0) {
        return Some(root);
    }
    let view = core.slice(root, &[pad.0], &[pad.0 + n]).ok();
    core.release(root);
    view
}

fn same_bits(f: &[u8], a: &[u8]) -> bool {
    f.len() == a.len()
        && f.chunks_exact(8).zip(a.chunks_exact(8)).all(|(x, y)| {
            let word = |c: &[u8]| {
                let mut w = [0u8; 8];
                w.copy_from_slice(c);
                f64::from_le_bytes(w)
            };
            let (x, y) = (word(x), word(y));
            x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
        })
}

/// Runs the kernel, stores and launch that `data` decodes on both cores and compares them
/// (see the module documentation).
pub fn kernel_exec(data: &[u8]) {
    let mut b = Bytes::new(data);
    let Some(kernel) = kernel(&mut b) else {
        panic!("a kernel built valid was refused");
    };
    let Some((mut compiled, mut interpreted)) = cores() else {
        return;
    };
    let lens = [b.below(20), b.below(20), b.below(20)];
    let values: Vec<Vec<f64>> = lens
        .iter()
        .map(|&n| (0..n).map(|_| b.float()).collect())
        .collect();
    let pads: Vec<(u64, u64)> = (0..3)
        .map(|_| (b.below(3) as u64, b.below(3) as u64))
        .collect();
    let points = 1 + b.below(3) as u64;
    let tile = b.word().unsigned_abs();
    let offset = b.word();
    let scalars = vec![Scalar::F64(b.float()), Scalar::I64(b.word())];
    let mut outputs = Vec::new();
    for core in [&mut compiled, &mut interpreted] {
        let stores: Option<Vec<StoreId>> = values
            .iter()
            .zip(&pads)
            .map(|(v, &pad)| input(core, v, pad))
            .collect();
        let Some(stores) = stores else {
            panic!("small stores are made on both cores");
        };
        let tiled = Partition::Tiling(Tiling {
            tile: weft_runtime::smallvec::smallvec![tile],
            offset: weft_runtime::smallvec::smallvec![offset],
            projection: weft_runtime::smallvec::smallvec![Some(0)],
            skew: None,
        });
        let task = weft_runtime::IndexTask::new(
            PluginId(0),
            kernel.clone(),
            vec![points],
            vec![
                TaskArg::new(stores[0], tiled, Privilege::Write),
                TaskArg::new(stores[1], Partition::None, Privilege::Read),
                TaskArg::new(stores[2], Partition::None, Privilege::Read),
            ],
            scalars.clone(),
        );
        let submitted = core.submit(task);
        let flushed = core.flush();
        let read = core.read_bytes(stores[0]);
        outputs.push((submitted.is_ok(), flushed.is_ok(), read));
        for s in stores {
            core.release(s);
        }
        let _ = core.flush();
        assert_eq!(core.memory(), (0, 0), "stores or bytes left");
    }
    let (c, i) = (&outputs[0], &outputs[1]);
    if std::env::var_os("WEFT_FUZZ_TRACE").is_some() {
        eprintln!("kernel_exec: compiled {c:?}\n  interpreted {i:?}");
    }
    assert_eq!(c.0, i.0, "submit: compiled {c:?} against interpreted {i:?}");
    assert_eq!(c.1, i.1, "flush: compiled {c:?} against interpreted {i:?}");
    match (&c.2, &i.2) {
        (Ok(x), Ok(y)) => assert!(
            same_bits(x, y),
            "compiled and interpreted results differ: {c:?} against {i:?}"
        ),
        (Err(_), Err(_)) => {}
        _ => panic!("read: compiled {c:?} against interpreted {i:?}"),
    }
}
