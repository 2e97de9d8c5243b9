//! What fusion costs per task, measured on the host's fusion layer directly:
//!
//! - the analysis of a window (constraints, temporaries, the fused task and kernel passes) per
//!   submitted task, on a memo miss and on a memo hit, for launch domains of 1 to 10^6 points:
//!   the analysis never looks at points, so the cost must not grow with the domain;
//! - compiling the fused kernel with Cranelift;
//! - the analysis per task against the window's length (16 to 4,096 tasks), every plan a memo
//!   miss, for element-wise chains, chains of 0-d tasks (`trace = trace * s + 1`) and
//!   in-place updates of one array from a store of its own per task (`acc += a[i] * s`): it
//!   must stay flat (`analysis_by_window`, `analysis_per_task_us_window_16` and `_4096`);
//! - end to end through the numeric plugin: submitting, analysing (a memo hit) and dispatching
//!   one task of a steady-state loop on tiny arrays (plugin call included), beside NumPy's
//!   cost for the same operation measured in the same run by `python3`
//!   (`end_to_end_per_task_us`, `numpy_per_op_us`; `null` with `numpy_unavailable` where
//!   NumPy is missing).
//!
//! The window is a chain of `--n` element-wise tasks `t[i+1] = t[i] * s + 1` over arrays of
//! 2^20 elements, the intermediate ones temporaries. Prints one JSON line.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use weft::{Numeric, Runtime};
use weft_cpu::Compiler;
use weft_examples::{AppError, Args, Cli, Report, run_main, timing::median};
use weft_fusion::Fuser;
use weft_ir::{DType, KernelBuilder, Privilege, Scalar};
use weft_runtime::KernelEntry;
use weft_runtime::partition::{Partition, Tiling};
use weft_runtime::stores::{StoreId, Stores};
use weft_runtime::task::{IndexTask, PluginId, TaskArg};

const NAME: &str = "bench_dispatch";
const ELEMENTS: u64 = 1 << 20;

/// `out = a * s + 1` over stores of `rank` 1 or 0.
fn kernel(rank: u32) -> Result<Arc<KernelEntry>, AppError> {
    let mut k = KernelBuilder::new("bench.axpb");
    let a = k.store(DType::F64, rank, Privilege::Read);
    let out = k.store(DType::F64, rank, Privilege::Write);
    let s = k.scalar(DType::F64);
    k.body().parallel(out, |b, i| {
        let x = b.load(a, i);
        let y = b.mul(x, s);
        let one = b.const_f64(1.0);
        let z = b.add(y, one);
        b.store(out, i, z);
    });
    Ok(Arc::new(KernelEntry::new("bench.axpb", &k.finish())?))
}

/// `acc = acc + a * s` over vectors: an update in place.
fn accumulate() -> Result<Arc<KernelEntry>, AppError> {
    let mut k = KernelBuilder::new("bench.accumulate");
    let a = k.store(DType::F64, 1, Privilege::Read);
    let acc = k.store(DType::F64, 1, Privilege::ReadWrite);
    let s = k.scalar(DType::F64);
    k.body().parallel(acc, |b, i| {
        let x = b.load(a, i);
        let y = b.mul(x, s);
        let old = b.load(acc, i);
        let z = b.add(old, y);
        b.store(acc, i, z);
    });
    Ok(Arc::new(KernelEntry::new("bench.accumulate", &k.finish())?))
}

/// The chains whose analysis per task is measured against the window's length.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Chain {
    /// `t[i+1] = t[i] * s + 1` over vectors, the intermediate ones temporaries.
    ElementWise,
    /// `trace = trace * s + 1` over 0-d stores, one point each.
    Scalar,
    /// `acc += a[i] * s` over vectors, a store `a[i]` of its own per task (a loop body that
    /// updates one array from many others, as `C[i, :] += alpha * A[i, k] * A[:, k]` does):
    /// one store read and written by every task, and as many stores as tasks.
    InPlace,
}

impl Chain {
    /// Its name in the report.
    fn name(self) -> &'static str {
        match self {
            Chain::ElementWise => "element-wise",
            Chain::Scalar => "0-d",
            Chain::InPlace => "in-place",
        }
    }
}

/// A chain of `len` tasks launched on `points` points, over stores of `ELEMENTS` elements
/// (`scalar` false) or 0-d stores (`scalar` true, one point: `trace = trace * s + 1`).
fn window(
    stores: &mut Stores,
    len: usize,
    points: u64,
    scalar: bool,
) -> Result<(Vec<IndexTask>, Vec<StoreId>), AppError> {
    chain_window(
        stores,
        len,
        points,
        if scalar {
            Chain::Scalar
        } else {
            Chain::ElementWise
        },
    )
}

/// A window of `len` tasks of `chain` launched on `points` points (one, for 0-d stores).
fn chain_window(
    stores: &mut Stores,
    len: usize,
    points: u64,
    chain: Chain,
) -> Result<(Vec<IndexTask>, Vec<StoreId>), AppError> {
    let scalar = chain == Chain::Scalar;
    let (entry, shape, partition) = if scalar {
        (kernel(0)?, vec![], Partition::None)
    } else {
        let tiling = Partition::Tiling(Tiling {
            tile: weft_runtime::smallvec::smallvec![ELEMENTS.div_ceil(points)],
            offset: weft_runtime::smallvec::smallvec![0],
            projection: weft_runtime::smallvec::smallvec![Some(0)],
            skew: None,
        });
        let entry = if chain == Chain::InPlace {
            accumulate()?
        } else {
            kernel(1)?
        };
        (entry, vec![ELEMENTS], tiling)
    };
    let ids: Vec<StoreId> = (0..=len)
        .map(|_| stores.create(shape.clone(), DType::F64))
        .collect::<Result<_, _>>()?;
    let arg = |stores: &Stores, id: StoreId, privilege| -> Result<TaskArg, AppError> {
        Ok(TaskArg::folded(
            stores,
            id,
            partition.clone(),
            privilege,
            &[points],
        )?)
    };
    let mut tasks = Vec::with_capacity(len);
    for i in 0..len {
        let out = if chain == Chain::InPlace {
            arg(stores, ids[len], Privilege::ReadWrite)?
        } else {
            arg(stores, ids[i + 1], Privilege::Write)?
        };
        tasks.push(IndexTask::new(
            PluginId(0),
            entry.clone(),
            vec![points],
            vec![arg(stores, ids[i], Privilege::Read)?, out],
            vec![Scalar::F64(1.0001)],
        ));
    }
    for t in &tasks {
        for a in &t.args {
            stores.add_pending(a.store);
        }
    }
    // The application keeps the first and the last store; the rest are temporaries (of the
    // in-place chain, the operands, which it drops once submitted).
    for &id in &ids[1..len] {
        // Nothing is allocated, so no buffer comes back to free.
        let _ = stores.release(id);
    }
    Ok((tasks, ids))
}

/// The windows of the scaling measurement: from 16 to 4,096 tasks.
const WINDOWS: [usize; 5] = [16, 64, 256, 1024, 4096];

/// Analysis per task, in seconds, of a window of `len` tasks analysed as the runtime does
/// (plan the front, take the planned prefix, plan the rest), every plan a memo miss (a fresh
/// memo each: a long chain's prefixes are alike and would hit), the median of `reps` runs;
/// and the number of plans it took.
fn analysis_per_task(len: usize, chain: Chain, reps: usize) -> Result<(f64, usize), AppError> {
    let mut stores = Stores::default();
    let (tasks, _) = chain_window(&mut stores, len, 1, chain)?;
    let readers = weft_runtime::FastMap::default();
    let mut samples = Vec::new();
    let mut plans = 0;
    for _ in 0..reps {
        let mut fusers: Vec<Fuser> = (0..len).map(|_| Fuser::default()).collect();
        let start = Instant::now();
        let (mut at, mut count) = (0, 0);
        while at < tasks.len() {
            let planned = fusers[count].analyse(&tasks[at..], &stores, &readers)?;
            if planned.hit {
                return Err("a fresh memo had a hit".into());
            }
            at += planned.plan.prefix.max(1);
            count += 1;
        }
        samples.push(start.elapsed().as_secs_f64() / len as f64);
        plans = count;
    }
    Ok((median(&samples), plans))
}

fn run(args: &Args) -> Result<(), AppError> {
    let len = args.n as usize;
    let reps = args.iters.max(1);
    let mut rows = Vec::new();
    let mut compile_ms: f64 = 0.0;
    for points in [1u64, 10, 100, 1_000, 10_000, 100_000, 1_000_000] {
        let mut stores = Stores::default();
        let (tasks, _) = window(&mut stores, len, points, false)?;
        let readers = weft_runtime::FastMap::default();
        let mut miss = Vec::new();
        let mut hit = Vec::new();
        for _ in 0..reps {
            let mut fuser = Fuser::default();
            let start = Instant::now();
            let planned = fuser.analyse(&tasks, &stores, &readers)?;
            miss.push(start.elapsed().as_secs_f64() / len as f64);
            if planned.plan.prefix != len {
                return Err(format!("only {} of {len} tasks fused", planned.plan.prefix).into());
            }
            let start = Instant::now();
            for _ in 0..100 {
                let again = fuser.analyse(&tasks, &stores, &readers)?;
                if !again.hit {
                    return Err("the second plan was not a memo hit".into());
                }
            }
            hit.push(start.elapsed().as_secs_f64() / (100 * len) as f64);
            if points == 1
                && let Some(fused) = &planned.plan.fused
            {
                let mut backend = Compiler::new()?;
                let _ = backend.compile(kernel(1)?.ir())?; // the module's first function
                let start = Instant::now();
                backend.compile(fused.kernel.ir())?;
                compile_ms = compile_ms.max(start.elapsed().as_secs_f64() * 1e3);
            }
        }
        rows.push(serde_json::json!({
            "points": points,
            "analysis_us_per_task_miss": median(&miss) * 1e6,
            "analysis_us_per_task_hit": median(&hit) * 1e6,
        }));
    }

    // Analysis per task against the window's length, for element-wise, 0-d and in-place
    // chains.
    let mut scaling = Vec::new();
    let mut per_window = std::collections::BTreeMap::new();
    for chain in [Chain::ElementWise, Chain::Scalar, Chain::InPlace] {
        for len in WINDOWS {
            let reps = if len >= 1024 { 3 } else { reps };
            let (per_task, plans) = analysis_per_task(len, chain, reps)?;
            let worst = per_window.entry(len).or_insert(0.0f64);
            *worst = worst.max(per_task);
            scaling.push(serde_json::json!({
                "tasks": len,
                "chain": chain.name(),
                "analysis_us_per_task": per_task * 1e6,
                "plans": plans,
            }));
        }
    }
    let window_us = |len: usize| per_window.get(&len).copied().unwrap_or(0.0) * 1e6;

    // End to end: a steady-state loop of element-wise ops on tiny arrays.
    let np = Numeric::new(Runtime::new(args.config())?, weft_plugin_artifacts::NUMERIC)?;
    let x = np.ones(&[16], DType::F64);
    let step = |x: &weft::Array| -> weft::Array {
        let mut y = x * 1.0001 + 1.0;
        for _ in 1..len {
            y = &y * 1.0001 + 1.0;
        }
        y
    };
    step(&x).to_vec()?;
    step(&x).to_vec()?;
    let mut per_task = Vec::new();
    for _ in 0..reps {
        let before = np.runtime(|rt| rt.stats().tasks_submitted);
        let start = Instant::now();
        step(&x).to_vec()?;
        let tasks = np.runtime(|rt| rt.stats().tasks_submitted) - before;
        per_task.push(start.elapsed().as_secs_f64() / tasks as f64);
    }

    let hit_max = rows
        .iter()
        .filter_map(|r| r["analysis_us_per_task_hit"].as_f64())
        .fold(0.0, f64::max);
    let miss_max = rows
        .iter()
        .filter_map(|r| r["analysis_us_per_task_miss"].as_f64())
        .fold(0.0, f64::max);
    let numpy = weft_examples::numpy_peer::per_tiny_op(2 * len, reps);
    let mut report = Report::new(NAME, args);
    match &numpy {
        Ok(seconds) => report.set("numpy_per_op_us", seconds * 1e6),
        Err(why) => report
            .set("numpy_per_op_us", serde_json::Value::Null)
            .set("numpy_unavailable", why.as_str()),
    };
    report
        .set("analysis_by_window", serde_json::Value::Array(scaling))
        .set("analysis_per_task_us_window_16", window_us(16))
        .set("analysis_per_task_us_window_4096", window_us(4096))
        .set("end_to_end_per_task_us", median(&per_task) * 1e6)
        .set("seconds_per_iter", median(&per_task))
        .set("window_tasks", len as u64)
        .set("by_launch_points", serde_json::Value::Array(rows))
        .set("analysis_us_per_task_hit_max", hit_max)
        .set("analysis_us_per_task_miss_max", miss_max)
        .set("fused_kernel_compile_ms", compile_ms)
        .set("end_to_end_us_per_task", median(&per_task) * 1e6)
        .runtime_stats(&np);
    args.say(&format!(
        "{NAME}: window of {len} tasks: analysis per task {miss_max:.2} us on a miss, {hit_max:.3} us on a hit \
         (worst over 1..10^6 points); compiling the fused kernel {compile_ms:.2} ms; \
         end to end {:.2} us per task (NumPy {}); analysis per task from an empty memo {:.2} us \
         at a window of 16 tasks, {:.2} us at 4096",
        median(&per_task) * 1e6,
        numpy.as_ref().map_or_else(|e| format!("unavailable: {e}"), |s| format!("{:.2} us per op", s * 1e6)),
        window_us(16),
        window_us(4096),
    ))?;
    report.print()?;
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::new(
        NAME,
        "The cost of fusion analysis, memo hits, compilation and dispatch, per task.",
        32,
        7,
    )
    .range("n", 2, 256)
    .help("n", "tasks in the window");
    let args = cli.parse_env_or_exit();
    run_main(NAME, || run(&args))
}
