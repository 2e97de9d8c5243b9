//! The operations behind every host import of a plugin, driven with arbitrary shapes: the
//! core functions that `weft-plugin`'s imports call, one for one (create-store,
//! store-from-bytes, slice, strided, permute, broadcast-to, reshape, may-overlap, read-bytes,
//! write, submit, preferred-tiling, drop), with extents, starts, steps, axes, tiles and
//! launches drawn from the integer limits (0, 1, 2^32, 2^40, 2^48, 2^63, `u64::MAX`, negative
//! and huge steps) and ranks 0 to 8, under a plugin quota of 1 MiB and a runtime quota of
//! 64 MiB.
//!
//! What must hold: nothing panics, aborts or runs away (libFuzzer's timeout); every refusal
//! is an error; a view never has more than `MAX_VIEW_ELEMENTS` elements; a read that returns
//! bytes returns exactly the view's volume times its element size, never more than the
//! plugin's quota; a view that repeats elements is never written; and once every handle is
//! dropped and the window flushed, the core holds no store and no byte.
//!
//! The plugin's imports add only handle bookkeeping to these calls (their own property test,
//! `weft-plugin`'s `host_imports`, drives them through a `PluginState`); this target runs
//! without wasmtime, so that it builds with the other targets.

use std::sync::Arc;

use weft_ir::{DType, KernelBuilder, Privilege};
use weft_runtime::testing::FakeBackend;
use weft_runtime::view::MAX_VIEW_ELEMENTS;
use weft_runtime::{
    Core, IndexTask, KernelEntry, Limits, Partition, PluginId, Settings, StoreId, TaskArg, Tiling,
};

use crate::bytes::Bytes;

/// The plugin's quota of store bytes.
const PLUGIN_QUOTA: u64 = 1 << 20;

/// An extent, start or tile: small, or at one of the limits.
fn extent(b: &mut Bytes<'_>) -> u64 {
    const LIMITS: [u64; 10] = [
        0,
        1,
        1 << 32,
        1 << 40,
        1 << 48,
        (1 << 48) + 1,
        1 << 63,
        u64::MAX,
        u64::MAX - 1,
        (1 << 32) - 1,
    ];
    match b.byte() {
        v @ 0..=199 => u64::from(v % 9),
        v => LIMITS[usize::from(v - 200) % LIMITS.len()],
    }
}

/// A step: small of either sign (never mind 0: it must be refused), or at a limit.
fn step(b: &mut Bytes<'_>) -> i64 {
    match b.byte() {
        v @ 0..=199 => i64::from(v % 9) - 4,
        250 => i64::MAX,
        251 => i64::MIN,
        252 => 1 << 40,
        253 => -(1 << 40),
        254 => 1 << 32,
        _ => -(1 << 32),
    }
}

fn shape(b: &mut Bytes<'_>, rank: usize) -> Vec<u64> {
    (0..rank).map(|_| extent(b)).collect()
}

fn dtype(b: &mut Bytes<'_>) -> DType {
    DType::ALL[b.below(DType::ALL.len())]
}

/// `out[i] = a[i]` over rank-`rank` `f64` stores.
fn copy_kernel(rank: u32) -> Arc<KernelEntry> {
    let name = format!("fz.copy{rank}");
    let mut k = KernelBuilder::new(&name);
    let out = k.store(DType::F64, rank, Privilege::Write);
    let a = k.store(DType::F64, rank, Privilege::Read);
    k.body().parallel(out, |b, i| {
        let x = b.load(a, i);
        b.store(out, i, x);
    });
    match KernelEntry::new(&name, &k.finish()) {
        Ok(e) => Arc::new(e),
        Err(e) => panic!("`{name}` is valid by construction: {e}"),
    }
}

/// Runs the operations the input spells (see the module documentation).
pub fn host_shapes(data: &[u8]) {
    let mut b = Bytes::new(data);
    let settings = Settings {
        limits: Limits {
            store_bytes: 64 << 20,
            // The fake back end interprets point by point: few points keep a run short.
            launch_points: 256,
            ..Limits::default()
        },
        ..Settings::default()
    };
    let mut core = Core::new(
        settings,
        Box::new(FakeBackend::default()),
        Box::new(weft_fusion::Fuser::default()),
    );
    let owner = PluginId(7);
    let plugin = Some((owner, "fuzzed", PLUGIN_QUOTA));
    let kernels = [copy_kernel(1), copy_kernel(2)];
    let mut held: Vec<StoreId> = Vec::new();
    let pick = |b: &mut Bytes<'_>, held: &[StoreId]| -> Option<StoreId> {
        (!held.is_empty()).then(|| held[b.below(held.len())])
    };
    let mut ops = 0;
    while !b.done() && ops < 64 {
        ops += 1;
        match b.below(13) {
            0 => {
                let rank = b.below(9);
                let s = shape(&mut b, rank);
                if let Ok(id) =
                    core.create_store_as(owner, "fuzzed", PLUGIN_QUOTA, s, dtype(&mut b))
                {
                    held.push(id);
                }
            }
            1 => {
                let rank = b.below(4);
                let s = shape(&mut b, rank);
                let dt = dtype(&mut b);
                let len = usize::from(b.byte()) * dt.size();
                let bytes = vec![0u8; len];
                if let Ok(id) = core.store_from_bytes_as(plugin, s, dt, &bytes) {
                    held.push(id);
                }
            }
            2 => {
                let Some(p) = pick(&mut b, &held) else {
                    continue;
                };
                let rank = b.below(9);
                let (start, stop) = (shape(&mut b, rank), shape(&mut b, rank));
                if let Ok(v) = core.slice(p, &start, &stop) {
                    held.push(v);
                }
            }
            3 => {
                let Some(p) = pick(&mut b, &held) else {
                    continue;
                };
                let rank = b.below(9);
                let start = shape(&mut b, rank);
                let steps: Vec<i64> = (0..rank).map(|_| step(&mut b)).collect();
                let s = shape(&mut b, rank);
                if let Ok(v) = core.view(p, |m| m.strided(&start, &steps, &s)) {
                    held.push(v);
                }
            }
            4 => {
                let Some(p) = pick(&mut b, &held) else {
                    continue;
                };
                let rank = b.below(9);
                let axes: Vec<u32> = (0..rank).map(|_| u32::from(b.byte() % 10)).collect();
                if let Ok(v) = core.view(p, |m| m.permute(&axes)) {
                    held.push(v);
                }
            }
            5 => {
                let Some(p) = pick(&mut b, &held) else {
                    continue;
                };
                let rank = b.below(9);
                let s = shape(&mut b, rank);
                if let Ok(v) = core.view(p, |m| m.broadcast_to(&s)) {
                    held.push(v);
                }
            }
            6 => {
                let Some(p) = pick(&mut b, &held) else {
                    continue;
                };
                let rank = b.below(9);
                let s = shape(&mut b, rank);
                if let Ok(Some(v)) = core.reshape(p, &s) {
                    held.push(v);
                }
            }
            7 => {
                let (Some(x), Some(y)) = (pick(&mut b, &held), pick(&mut b, &held)) else {
                    continue;
                };
                let stores = core.stores();
                if let (Ok(x), Ok(y)) = (stores.get(x), stores.get(y))
                    && let Some(root) = stores.storage(x.storage)
                {
                    let _ = x.map.may_overlap(&y.map, &root.shape);
                }
            }
            8 => {
                let Some(s) = pick(&mut b, &held) else {
                    continue;
                };
                let (map, size) = match core.stores().get(s) {
                    Ok(info) => (info.map.clone(), info.dtype.size()),
                    Err(_) => continue,
                };
                assert!(
                    map.volume() <= MAX_VIEW_ELEMENTS,
                    "a view of shape {:?} passed the bound",
                    map.shape
                );
                if let Ok(bytes) = core.read_bytes_as(plugin, s) {
                    let want = map.volume() * size as u64;
                    assert_eq!(bytes.len() as u64, want, "a read of shape {:?}", map.shape);
                    assert!(want <= PLUGIN_QUOTA, "a read past the plugin's quota");
                }
            }
            9 => {
                let Some(s) = pick(&mut b, &held) else {
                    continue;
                };
                let len = usize::from(b.byte()) * 8;
                let repeats = core
                    .stores()
                    .get(s)
                    .map(|info| info.map.overlaps_itself())
                    .unwrap_or(false);
                let written = core.write_bytes(s, &vec![0u8; len]);
                assert!(
                    !(repeats && written.is_ok()),
                    "a view that repeats elements was written"
                );
            }
            10 => {
                let (Some(out), Some(a)) = (pick(&mut b, &held), pick(&mut b, &held)) else {
                    continue;
                };
                let rank = 1 + b.below(2);
                let launch_rank = b.below(3);
                let launch = shape(&mut b, launch_rank);
                let partition = |b: &mut Bytes<'_>| {
                    if b.below(4) == 0 {
                        Partition::None
                    } else {
                        Partition::Tiling(Tiling {
                            tile: shape(b, rank).into(),
                            offset: (0..rank).map(|_| step(b)).collect(),
                            projection: (0..rank)
                                .map(|_| match b.below(4) {
                                    0 => None,
                                    d => Some((d - 1) as u32),
                                })
                                .collect(),
                            skew: None,
                        })
                    }
                };
                let (po, pa) = (partition(&mut b), partition(&mut b));
                let task = IndexTask::new(
                    owner,
                    kernels[rank - 1].clone(),
                    launch,
                    vec![
                        TaskArg::new(out, po, Privilege::Write),
                        TaskArg::new(a, pa, Privilege::Read),
                    ],
                    Vec::new(),
                );
                let _ = core.submit(task);
            }
            11 => {
                let rank = b.below(9);
                let s = shape(&mut b, rank);
                let _ = core.preferred_tiling(&s);
            }
            _ => {
                if !held.is_empty() {
                    let i = b.below(held.len());
                    core.release(held.swap_remove(i));
                }
            }
        }
    }
    for s in held.drain(..) {
        core.release(s);
    }
    let _ = core.flush();
    core.collect_released();
    let (stores, bytes) = core.memory();
    assert_eq!(
        (stores, bytes),
        (0, 0),
        "stores left after every handle was dropped"
    );
}
