//! Tenants: one `Runtime` each, on threads of their own. A hostile tenant (a memory bomb, a
//! runaway kernel, another tenant's handles) gets errors, and the well-behaved tenant's
//! results stay right and arrive on time.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use weft::numeric::BinaryOp;
use weft::{Config, DType, Limits, PluginLimits, Runtime, Value, WorkerPool};

const MISBEHAVE: &str = "weft:testing/misbehave#";

/// The well-behaved tenant: `y = 2 x + 1` over and over, checked against plain Rust each
/// time. It lends one array's handle to the hostile tenant, and checks afterwards that the
/// array is untouched. Returns how long its work took.
fn good_tenant(
    pool: Option<WorkerPool>,
    lend: mpsc::Sender<weft::StoreHandle>,
    done: mpsc::Receiver<()>,
) -> Duration {
    let np = weft_tests::numeric_with(Config {
        component_cache: None,
        threads: 1,
        pool,
        limits: Limits {
            store_bytes: 64 << 20,
            ..Limits::default()
        },
        ..Config::default()
    });
    let n = 10_000;
    let values: Vec<f64> = (0..n).map(|i| i as f64).collect();
    // Stores made first, so that the lent array's id is one the other tenant reaches.
    let earlier: Vec<_> = (0..50).map(|_| np.zeros(&[1], DType::F64)).collect();
    let x = np.from_vec(&[n as u64], &values);
    drop(earlier);
    lend.send(x.handle().expect("an array").clone())
        .expect("the other tenant listens");
    let start = Instant::now();
    for round in 0..40 {
        let y = x.binary(BinaryOp::Mul, 2.0).binary(BinaryOp::Add, 1.0);
        let got = y.to_vec().expect("computes");
        assert!(
            got.iter().zip(&values).all(|(g, v)| *g == 2.0 * v + 1.0),
            "round {round}: a wrong result"
        );
    }
    let took = start.elapsed();
    // Once the hostile tenant has tried everything, the lent array is unchanged.
    done.recv().expect("the other tenant finishes");
    assert_eq!(
        x.to_vec().expect("reads"),
        values,
        "the array was not changed"
    );
    took
}

/// The hostile tenant: a memory bomb, a runaway kernel and the other tenant's handle.
fn hostile_tenant(
    pool: Option<WorkerPool>,
    borrowed: mpsc::Receiver<weft::StoreHandle>,
    done: mpsc::Sender<()>,
) {
    let mut rt = Runtime::new(Config {
        component_cache: None,
        threads: 1,
        pool,
        limits: Limits {
            store_bytes: 4 << 20,
            kernel_time: Some(Duration::from_millis(200)),
            ..Limits::default()
        },
        ..Config::default()
    })
    .expect("runtime");
    let p = rt
        .load_with_limits(
            weft_plugin_artifacts::TEST_MISBEHAVE,
            PluginLimits {
                store_bytes: 1 << 20,
                ..PluginLimits::default()
            },
        )
        .expect("loads");
    let call = |rt: &mut Runtime, f: &str, args: &[Value]| {
        rt.call(p, &format!("{MISBEHAVE}{f}"), args)
            .map(|out| format!("{out:?}"))
    };
    // A memory bomb stops at the plugin's quota.
    let out = call(
        &mut rt,
        "bomb",
        &[Value::List(vec![Value::U64(1 << 20)]), Value::U32(1000)],
    )
    .expect("returns");
    assert!(out.contains("U32(0)") && out.contains("quota"), "{out}");
    // A runaway kernel is cancelled at the kernel time limit.
    let start = Instant::now();
    let out = call(
        &mut rt,
        "run",
        &[Value::String("forever".into()), Value::U64(4)],
    )
    .expect("returns");
    assert!(out.contains("time limit of 200 ms"), "{out}");
    assert!(start.elapsed() < Duration::from_secs(10));
    // The other tenant's handle means nothing here, even where this tenant has a store with
    // the same id.
    let theirs = borrowed.recv().expect("the other tenant lends one");
    let mut mine = Vec::new();
    while mine.len() < 10_000
        && mine
            .last()
            .is_none_or(|m: &weft::StoreHandle| m.id() < theirs.id())
    {
        mine.push(
            rt.store_from_bytes(&[2], DType::F64, &[0; 16])
                .expect("a store"),
        );
    }
    assert!(mine.iter().any(|m| m.id() == theirs.id()), "ids coincide");
    let err = rt.read_bytes(&theirs).expect_err("refused").to_string();
    assert!(err.contains("another runtime"), "{err}");
    let err = call(&mut rt, "write-into", &[Value::Store(theirs.clone())])
        .expect_err("refused")
        .to_string();
    assert!(err.contains("another runtime"), "{err}");
    drop(theirs);
    done.send(()).expect("the other tenant waits");
}

/// Runs the two tenants on two threads, each runtime on `pool` (or a pool of its own).
fn two_tenants(pool: Option<WorkerPool>) {
    let (lend, borrowed) = mpsc::channel();
    let (done, finished) = mpsc::channel();
    let theirs = pool.clone();
    let hostile = std::thread::spawn(move || hostile_tenant(theirs, borrowed, done));
    let good = std::thread::spawn(move || good_tenant(pool, lend, finished));
    hostile.join().expect("the hostile tenant's checks hold");
    let took = good.join().expect("the good tenant's results are right");
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

#[test]
fn a_hostile_tenant_neither_breaks_nor_stalls_a_well_behaved_one() {
    two_tenants(None);
}

#[test]
fn tenants_sharing_one_worker_pool_neither_break_nor_stall_each_other() {
    // One worker for both: the runaway kernel holds it until the kernel time limit, and the
    // well-behaved tenant's launches are served in between.
    let pool = WorkerPool::new(1).expect("a pool");
    two_tenants(Some(pool.clone()));
    assert_eq!(pool.threads(), 1);
    assert_eq!(pool.sharers(), 1, "both runtimes gave the pool back");
}
