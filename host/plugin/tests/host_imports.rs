//! The host imports of a plugin (`host/plugin/src/imports.rs`), called directly as Rust functions
//! on a `PluginState` with a core in it (no Wasm): with extreme shapes, strides and steps,
//! every call answers with a value or an error, never a panic, an abort or a hang; and what
//! a read returns is charged to the quotas of stores.

use std::sync::mpsc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use wasmtime::component::Resource;
use weft_ir::{DType, Kernel, Param, Privilege};
use weft_plugin::bindings::base::weft::plugin::host::{self, Host as _, HostStore as _};
use weft_plugin::bindings::base::weft::plugin::types;
use weft_plugin::imports::{PluginState, StoreRes};
use weft_plugin::limits::{Limiter, PluginLimits};
use weft_runtime::testing::fake_core;
use weft_runtime::view::MAX_VIEW_ELEMENTS;
use weft_runtime::{Limits, PluginId};

const NAME: &str = "hostile";
const PLUGIN: PluginId = PluginId(1);
const MIB: u64 = 1 << 20;

/// The ranks the registered kernels take (`r<rank>` reads, `w<rank>` writes an f64 store).
const KERNEL_RANKS: u32 = 4;

/// A plugin's state with a core of its own in it: the runtime's quota of store bytes is
/// `runtime_quota`, the plugin's `plugin_quota`; kernels `r0`..`r3` and `w0`..`w3` are in
/// the core's cache (one f64 store parameter, read or written, an empty body).
fn state(runtime_quota: u64, plugin_quota: u64) -> PluginState {
    let mut core = fake_core(Limits {
        store_bytes: runtime_quota,
        // The fake back end launches point by point in a debug build: fewer points than the
        // default bound keep a case short (the bound is what is tested).
        launch_points: 1 << 10,
        ..Limits::default()
    });
    for rank in 0..KERNEL_RANKS {
        for (key, privilege) in [("r", Privilege::Read), ("w", Privilege::Write)] {
            let key = format!("{key}{rank}");
            let kernel = Kernel {
                name: key.clone(),
                params: vec![Param::Store {
                    dtype: DType::F64,
                    rank,
                    privilege,
                }],
                body: Vec::new(),
            };
            core.kernel(PLUGIN, NAME, &key, || Ok(weft_ir::flat::to_flat(&kernel)))
                .expect("an empty kernel is valid");
        }
    }
    let limits = PluginLimits {
        store_bytes: plugin_quota,
        ..PluginLimits::default()
    };
    let mut state = PluginState::new(
        PLUGIN,
        NAME.to_string(),
        Limiter::new(&limits),
        1_000,
        plugin_quota,
    );
    state.core = Some(Box::new(core));
    state
}

/// Another use of a handle (the plugin passes handles by `borrow`).
fn again(r: &Resource<StoreRes>) -> Resource<StoreRes> {
    Resource::new_borrow(r.rep())
}

/// A new store through `create-store`, which must succeed.
fn create(state: &mut PluginState, shape: &[u64], dtype: types::Dtype) -> Resource<StoreRes> {
    state
        .create_store(shape.to_vec(), dtype)
        .expect("no fault")
        .expect("a small store")
}

/// The scenario of issue 40: a store of one element broadcast to 2^40 elements (no storage,
/// so no quota was charged) and read made the host allocate 8 TiB and abort. The read is
/// charged in full: under a 1 MiB runtime (tenant) quota, a quota error.
#[test]
fn a_broadcast_of_one_element_to_2_40_read_is_a_quota_error_under_a_1_mib_quota() {
    let mut state = state(MIB, u64::MAX);
    let one = create(&mut state, &[1], types::Dtype::F64);
    let huge = state
        .broadcast_to(again(&one), vec![1 << 40])
        .expect("no fault")
        .expect("2^40 elements are within the view bound");
    let e = state
        .read_bytes(again(&huge))
        .expect("no fault")
        .expect_err("over the quota")
        .message;
    assert!(
        e.contains("the runtime") && e.contains("8796093022208 bytes") && e.contains("quota"),
        "{e}"
    );
    // The plugin's own quota holds it to the same rule.
    let mut state = self::state(u64::MAX, MIB);
    let one = create(&mut state, &[1], types::Dtype::F64);
    let huge = state
        .broadcast_to(again(&one), vec![1 << 40])
        .expect("no fault")
        .expect("a view");
    let e = state
        .read_bytes(again(&huge))
        .expect("no fault")
        .expect_err("over the quota")
        .message;
    assert!(e.contains("plugin `hostile`") && e.contains("quota"), "{e}");
    // A read within the quotas still reads, broadcast or not.
    let small = state
        .broadcast_to(again(&one), vec![3, 2])
        .expect("no fault")
        .expect("a view");
    let bytes = state.read_bytes(small).expect("no fault").expect("a read");
    assert_eq!(bytes, vec![0; 48]);
}

/// With no quota at all (the defaults of a trusted application), a read no host can
/// allocate is an error, not an abort of the host.
#[test]
fn a_read_past_any_memory_is_an_error_without_quotas() {
    let mut state = state(u64::MAX, u64::MAX);
    let one = create(&mut state, &[1], types::Dtype::F64);
    let huge = state
        .broadcast_to(again(&one), vec![MAX_VIEW_ELEMENTS])
        .expect("no fault")
        .expect("a view at the bound");
    // 2^51 bytes: past the address space of any machine this runs on.
    let e = state
        .read_bytes(huge)
        .expect("no fault")
        .expect_err("no host has 2 PiB")
        .message;
    assert!(e.contains("cannot allocate"), "{e}");
    // Past the bound: no view at all.
    let e = state
        .broadcast_to(again(&one), vec![1 << 32, 1 << 32])
        .expect("no fault")
        .expect_err("past the bound")
        .message;
    assert!(e.contains("MAX_VIEW_ELEMENTS"), "{e}");
}

/// A broadcast whose element count wraps to 0 in u64 was called empty and not overlapping:
/// a task could write through it. It is refused where it is made now; and writing through a
/// broadcast within the bound is refused at submit.
#[test]
fn a_write_through_a_broadcast_is_refused() {
    let mut state = state(MIB, MIB);
    let one = create(&mut state, &[1, 1], types::Dtype::F64);
    let wrapped = state
        .broadcast_to(again(&one), vec![1 << 32, 1 << 32])
        .expect("no fault");
    assert!(wrapped.is_err());
    let b = state
        .broadcast_to(again(&one), vec![1 << 20, 1 << 20])
        .expect("no fault")
        .expect("within the bound");
    let task = host::IndexTask {
        kernel: "w2".into(),
        launch: vec![1],
        args: vec![host::TaskArg {
            store: again(&b),
            partition: types::Partition::None,
            privilege: types::Privilege::Write,
        }],
        scalars: Vec::new(),
    };
    let e = state
        .submit(task)
        .expect("no fault")
        .expect_err("a broadcast");
    assert!(e.message.contains("broadcast"), "{}", e.message);
}

/// A number a plugin sends: most often one related to the extent it applies to (so that
/// views and tasks are often valid and the calls reach deep), else one at the edges.
#[derive(Clone, Debug)]
enum N {
    /// 0, 1, extent - 1, extent, extent / 2, extent + 1.
    Rel(u8),
    /// As given.
    Abs(u64),
}

impl N {
    fn at(&self, extent: u64) -> u64 {
        match *self {
            N::Rel(0) => 0,
            N::Rel(1) => 1,
            N::Rel(2) => extent.saturating_sub(1),
            N::Rel(3) => extent,
            N::Rel(4) => extent / 2,
            N::Rel(_) => extent.saturating_add(1),
            N::Abs(v) => v,
        }
    }
}

/// A list a plugin sends: as long as the store's rank unless `len` says otherwise (ranks 0
/// to 8), its entries from `items` in turn.
#[derive(Clone, Debug)]
struct L {
    len: Option<usize>,
    items: Vec<N>,
}

impl L {
    /// The list against a store of shape `shape`.
    fn at(&self, shape: &[u64]) -> Vec<u64> {
        let len = self.len.unwrap_or(shape.len());
        (0..len)
            .map(|d| {
                let n = self.items.get(d % self.items.len().max(1));
                let extent = shape.get(d).copied().unwrap_or(1);
                n.map_or(extent, |n| n.at(extent))
            })
            .collect()
    }

    /// As steps (or offsets): small ones of both signs, or the edges.
    fn steps(&self, rank: usize) -> Vec<i64> {
        let len = self.len.unwrap_or(rank);
        (0..len)
            .map(|d| match self.items.get(d % self.items.len().max(1)) {
                Some(N::Rel(k)) => [1, -1, 2, -2, 3, 0][*k as usize % 6],
                Some(N::Abs(v)) => {
                    [*v as i64, i64::MAX, i64::MIN, (*v as i64).wrapping_neg()][d % 4]
                }
                None => 1,
            })
            .collect()
    }
}

/// One call of a host import, on handles chosen by index into the handles made so far.
#[derive(Clone, Debug)]
enum Op {
    Create(L, u8),
    FromBytes(L, u8, Option<usize>),
    Slice(usize, L, L),
    Strided(usize, L, L, L),
    Permute(usize, Vec<u32>, bool),
    Broadcast(usize, Vec<u64>, L),
    Reshape(usize, u8, L),
    MayOverlap(usize, usize),
    SameRoot(usize, usize),
    Read(usize),
    Submit(usize, u8, L, Part, usize),
    PreferredTiling(L),
    Shape(usize),
    Dtype(usize),
    Drop(usize),
}

/// A partition as a plugin may send it.
#[derive(Clone, Debug)]
enum Part {
    None,
    Tiling(L, L, Vec<Option<u32>>),
    Image(u32),
}

/// Sizes at the edges: 0, 1, 2, 2^32, 2^40, 2^48, 2^63, u64::MAX, and small ones.
fn size() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(2),
        Just(1 << 32),
        Just(1 << 40),
        Just(MAX_VIEW_ELEMENTS),
        Just(1 << 63),
        Just(u64::MAX),
        Just(u64::MAX - 1),
        0u64..6,
    ]
}

fn n() -> impl Strategy<Value = N> {
    prop_oneof![3 => (0u8..6).prop_map(N::Rel), 1 => size().prop_map(N::Abs)]
}

/// A list of ranks 0 to 8: mostly the store's rank.
fn l() -> impl Strategy<Value = L> {
    (
        prop_oneof![3 => Just(None), 1 => (0usize..=8).prop_map(Some)],
        proptest::collection::vec(n(), 0..=8),
    )
        .prop_map(|(len, items)| L { len, items })
}

fn part() -> impl Strategy<Value = Part> {
    prop_oneof![
        Just(Part::None),
        (
            l(),
            l(),
            proptest::collection::vec(proptest::option::of(0u32..3), 0..=8)
        )
            .prop_map(|(t, o, p)| Part::Tiling(t, o, p)),
        (0u32..3).prop_map(Part::Image),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let h = 0usize..64;
    prop_oneof![
        1 => (l(), 0u8..5).prop_map(|(s, d)| Op::Create(s, d)),
        1 => (l(), 0u8..5, proptest::option::of(0usize..200))
            .prop_map(|(s, d, n)| Op::FromBytes(s, d, n)),
        1 => (h.clone(), l(), l()).prop_map(|(h, a, b)| Op::Slice(h, a, b)),
        1 => (h.clone(), l(), l(), l()).prop_map(|(h, a, s, b)| Op::Strided(h, a, s, b)),
        1 => (
            h.clone(),
            proptest::collection::vec(0u32..10, 0..=8),
            proptest::bool::ANY
        )
            .prop_map(|(h, a, reverse)| Op::Permute(h, a, reverse)),
        1 => (h.clone(), proptest::collection::vec(size(), 0..3), l())
            .prop_map(|(h, lead, s)| Op::Broadcast(h, lead, s)),
        1 => (h.clone(), 0u8..5, l()).prop_map(|(h, how, s)| Op::Reshape(h, how, s)),
        1 => (h.clone(), h.clone()).prop_map(|(a, b)| Op::MayOverlap(a, b)),
        1 => (h.clone(), h.clone()).prop_map(|(a, b)| Op::SameRoot(a, b)),
        2 => h.clone().prop_map(Op::Read),
        4 => (
            h.clone(),
            0u8..8,
            l(),
            part(),
            prop_oneof![4 => Just(1usize), 1 => Just(2usize)]
        )
            .prop_map(|(h, p, launch, part, args)| Op::Submit(h, p, launch, part, args)),
        1 => l().prop_map(Op::PreferredTiling),
        1 => h.clone().prop_map(Op::Shape),
        1 => h.clone().prop_map(Op::Dtype),
        1 => h.prop_map(Op::Drop),
    ]
}

fn dtype(d: u8) -> types::Dtype {
    match d % 5 {
        0 => types::Dtype::F64,
        1 => types::Dtype::F32,
        2 => types::Dtype::I32,
        3 => types::Dtype::I64,
        _ => types::Dtype::Bool,
    }
}

fn privilege(p: u8) -> types::Privilege {
    match p % 4 {
        0 => types::Privilege::Read,
        1 => types::Privilege::Write,
        2 => types::Privilege::ReadWrite,
        _ => types::Privilege::Reduce(types::ReduceOp::Sum),
    }
}

/// The quotas every case runs under.
const RUNTIME_QUOTA: u64 = MIB;
const PLUGIN_QUOTA: u64 = MIB / 2;

/// What a case did, to check that the calls reach deep.
#[derive(Debug, Default)]
struct Reached {
    views: u32,
    reads: u32,
    tasks: u32,
}

/// Runs `ops` on a fresh plugin state, checking what each call may answer. A fault (an
/// `Err` of the outer result: an unknown or dropped handle) and an error are both answers.
fn run(ops: Vec<Op>) -> Result<Reached, String> {
    let mut state = state(RUNTIME_QUOTA, PLUGIN_QUOTA);
    let mut reached = Reached::default();
    // A few handles to start from: a matrix, a scalar, an empty store, a broadcast.
    let mut handles = vec![
        create(&mut state, &[4, 3], types::Dtype::F64),
        create(&mut state, &[], types::Dtype::F64),
        create(&mut state, &[0, 5], types::Dtype::I32),
        create(&mut state, &[1], types::Dtype::F64),
    ];
    if let Ok(Ok(b)) = state.broadcast_to(again(&handles[3]), vec![1 << 40]) {
        handles.push(b);
    }
    let pick = |handles: &[Resource<StoreRes>], i: usize| again(&handles[i % handles.len()]);
    for op in ops {
        // The shape of a store, as the plugin would ask for it (empty for a bad handle).
        let shape_of =
            |state: &mut PluginState, h: usize| state.shape(pick(&handles, h)).unwrap_or_default();
        let made = match op {
            Op::Create(shape, d) => state
                .create_store(shape.at(&[3, 2]), dtype(d))
                .map(|r| r.ok()),
            Op::FromBytes(shape, d, n) => {
                let shape = shape.at(&[3, 2]);
                // The right length where it is small, else some bytes.
                let size = match d % 5 {
                    0 | 3 => 8usize,
                    1 | 2 => 4,
                    _ => 1,
                };
                let right = shape
                    .iter()
                    .try_fold(size, |a, &e| a.checked_mul(usize::try_from(e).ok()?))
                    .filter(|&n| n <= 4096);
                let len = n.or(right).unwrap_or(16);
                state
                    .store_from_bytes(shape, dtype(d), vec![0; len])
                    .map(|r| r.ok())
            }
            Op::Slice(h, a, b) => {
                let parent = shape_of(&mut state, h);
                let (start, stop) = (a.at(&parent), b.at(&parent));
                state.slice(pick(&handles, h), start, stop).map(|r| r.ok())
            }
            Op::Strided(h, a, s, b) => {
                let parent = shape_of(&mut state, h);
                let (start, step, shape) = (a.at(&parent), s.steps(parent.len()), b.at(&parent));
                state
                    .strided(pick(&handles, h), start, step, shape)
                    .map(|r| r.ok())
            }
            Op::Permute(h, axes, reverse) => {
                let rank = shape_of(&mut state, h).len() as u32;
                let axes = if reverse {
                    (0..rank).rev().collect()
                } else {
                    axes
                };
                state.permute(pick(&handles, h), axes).map(|r| r.ok())
            }
            Op::Broadcast(h, lead, stretch) => {
                let parent = shape_of(&mut state, h);
                let stretched: Vec<u64> = parent
                    .iter()
                    .zip(stretch.at(&parent))
                    .map(|(&e, s)| if e == 1 { s } else { e })
                    .collect();
                let shape = lead.into_iter().chain(stretched).collect();
                state.broadcast_to(pick(&handles, h), shape).map(|r| r.ok())
            }
            Op::Reshape(h, how, other) => {
                let parent = shape_of(&mut state, h);
                let volume = parent
                    .iter()
                    .try_fold(1u64, |a, &e| a.checked_mul(e))
                    .unwrap_or(u64::MAX);
                let shape = match how {
                    0 => vec![volume],
                    1 => [1].into_iter().chain(parent.iter().copied()).collect(),
                    2 => parent.iter().rev().copied().collect(),
                    3 => match parent.split_first() {
                        Some((&e, rest)) if e % 2 == 0 => {
                            [2, e / 2].into_iter().chain(rest.iter().copied()).collect()
                        }
                        _ => parent.clone(),
                    },
                    _ => other.at(&parent),
                };
                state
                    .reshape(pick(&handles, h), shape)
                    .map(|r| r.ok().flatten())
            }
            Op::MayOverlap(a, b) => {
                let _ = state.may_overlap(pick(&handles, a), pick(&handles, b));
                Ok(None)
            }
            Op::SameRoot(a, b) => {
                let _ = state.same_root(pick(&handles, a), pick(&handles, b));
                Ok(None)
            }
            Op::Read(h) => {
                if let Ok(Ok(bytes)) = state.read_bytes(pick(&handles, h)) {
                    reached.reads += 1;
                    // Charged: never more than either quota allows one store.
                    if bytes.len() as u64 > PLUGIN_QUOTA.min(RUNTIME_QUOTA) {
                        return Err(format!("a read of {} bytes passed the quota", bytes.len()));
                    }
                }
                Ok(None)
            }
            Op::Submit(h, p, launch, part, args) => {
                let shape = shape_of(&mut state, h);
                let rank = shape.len() as u32;
                // The kernel of the store's rank, reading or writing as the privilege does.
                let kernel = match (rank < KERNEL_RANKS, p % 4) {
                    (true, 0) => format!("r{rank}"),
                    (true, _) => format!("w{rank}"),
                    _ => "no-such-kernel".to_string(),
                };
                let partition = match part {
                    Part::None => types::Partition::None,
                    Part::Tiling(tile, offset, projection) => {
                        types::Partition::Tiling(types::Tiling {
                            tile: tile.at(&shape),
                            offset: offset.steps(shape.len()),
                            projection,
                        })
                    }
                    Part::Image(k) => types::Partition::Image(k),
                };
                let args = (0..args)
                    .map(|i| host::TaskArg {
                        store: pick(&handles, h + i),
                        partition: partition.clone(),
                        privilege: privilege(if p % 4 == 0 || i > 0 { 0 } else { 1 }),
                    })
                    .collect();
                let submitted = state.submit(host::IndexTask {
                    kernel,
                    launch: launch.at(&[2]),
                    args,
                    scalars: Vec::new(),
                });
                if let Ok(Ok(())) = submitted {
                    reached.tasks += 1;
                }
                Ok(None)
            }
            Op::PreferredTiling(shape) => {
                let _ = state.preferred_tiling(shape.at(&[5, 3]));
                Ok(None)
            }
            Op::Shape(h) => {
                let _ = state.shape(pick(&handles, h));
                Ok(None)
            }
            Op::Dtype(h) => {
                let _ = state.dtype(pick(&handles, h));
                Ok(None)
            }
            Op::Drop(h) => {
                let i = h % handles.len();
                if handles.len() > 1 {
                    let r = handles.swap_remove(i);
                    let _ = host::HostStore::drop(&mut state, r);
                }
                Ok(None)
            }
        };
        if let Ok(Some(h)) = made {
            reached.views += 1;
            handles.push(h);
        }
    }
    // Whatever is pending runs now (the core's drop flushes too).
    if let Some(core) = state.core.as_deref_mut() {
        let _ = core.flush();
    }
    Ok(reached)
}

/// The calls reach deep: over many cases, views are made, stores read and tasks submitted.
#[test]
fn the_generated_calls_reach_past_the_first_checks() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let ops = proptest::collection::vec(op(), 1..24);
    let mut total = Reached::default();
    for _ in 0..64 {
        let case = ops.new_tree(&mut runner).expect("a case").current();
        let reached = run(case).expect("no read past the quota");
        total.views += reached.views;
        total.reads += reached.reads;
        total.tasks += reached.tasks;
    }
    assert!(
        total.views > 64 && total.reads > 32 && total.tasks > 8,
        "{total:?}"
    );
}

/// How long one case may take before it counts as a hang.
const CASE_TIME: Duration = Duration::from_secs(60);

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1024,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Every host import, called with extreme shapes, strides, steps, tilings and launches
    /// (ranks 0 to 8), answers with a value or an error: never a panic, an abort or a hang,
    /// and never a read past the quotas.
    #[test]
    fn every_host_import_answers_extreme_input_with_an_error_not_a_crash(
        ops in proptest::collection::vec(op(), 1..24),
    ) {
        let (send, receive) = mpsc::channel();
        let worker = std::thread::spawn(move || {
            let _ = send.send(run(ops));
        });
        match receive.recv_timeout(CASE_TIME) {
            Ok(result) => {
                let _ = worker.join();
                prop_assert!(result.is_ok(), "{result:?}");
            }
            // The sender is gone without a message: the case panicked.
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let panic = worker.join().err().map(|p| {
                    p.downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default()
                });
                prop_assert!(false, "a host import panicked: {panic:?}");
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                prop_assert!(false, "a case ran past {CASE_TIME:?}: a hang");
            }
        }
    }
}
