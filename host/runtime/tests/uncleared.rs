//! Fresh stores that a task, or a write of host bytes, fills whole get their buffer without
//! the zero fill, and only those: the fake back end fills such buffers with the byte `0xA5`,
//! so a store that was wrongly left uncleared would read back as garbage instead of zeros.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use weft_ir::{DType, KernelBuilder, Privilege};
use weft_runtime::testing::{FakeBackend, f64_store, f64_values};
use weft_runtime::{
    Core, Error, IndexTask, KernelEntry, NoFusion, Partition, PluginId, Settings, StoreId, TaskArg,
    Tiling,
};

fn core() -> (Core, Arc<std::sync::Mutex<weft_runtime::testing::Log>>) {
    let backend = FakeBackend::default();
    let log = backend.log();
    let core = Core::new(Settings::default(), Box::new(backend), Box::new(NoFusion));
    (core, log)
}

/// `out = 2 a` over `out`'s points, or `out += 2 a` when `update` (which reads `out`).
fn double(update: bool) -> Arc<KernelEntry> {
    let name = if update { "t.add_double" } else { "t.double" };
    let mut b = KernelBuilder::new(name);
    let a = b.store(DType::F64, 1, Privilege::Read);
    let privilege = if update {
        Privilege::ReadWrite
    } else {
        Privilege::Write
    };
    let out = b.store(DType::F64, 1, privilege);
    b.body().parallel(out, |b, i| {
        let x = b.load(a, i);
        let y = b.add(x, x);
        let z = if update {
            let old = b.load(out, i);
            b.add(old, y)
        } else {
            y
        };
        b.store(out, i, z);
    });
    Arc::new(KernelEntry::new(name, &b.finish()).unwrap())
}

/// Tiles of `tile` elements, one per point of the launch.
fn tiles(tile: u64) -> Partition {
    Partition::Tiling(Tiling {
        tile: smallvec::smallvec![tile],
        offset: smallvec::smallvec![0],
        projection: smallvec::smallvec![Some(0)],
        skew: None,
    })
}

/// `kernel(a -> out)` over `points` points of `tile` elements each.
fn task(kernel: &Arc<KernelEntry>, a: StoreId, out: StoreId, points: u64, tile: u64) -> IndexTask {
    let privilege = kernel
        .ir()
        .params
        .last()
        .map_or(Privilege::Write, |p| match p {
            weft_ir::Param::Store { privilege, .. } => *privilege,
            weft_ir::Param::Scalar { .. } => Privilege::Write,
        });
    IndexTask::new(
        PluginId(0),
        kernel.clone(),
        vec![points],
        vec![
            TaskArg::new(a, tiles(tile), Privilege::Read),
            TaskArg::new(out, tiles(tile), privilege),
        ],
        Vec::new(),
    )
}

#[test]
fn a_store_written_whole_by_its_first_task_is_left_uncleared_and_reads_right() {
    let (mut core, log) = core();
    let input: Vec<f64> = (0..7).map(f64::from).collect();
    let a = f64_store(&mut core, &input).unwrap();
    let before = log.lock().unwrap().uncleared.len();
    let out = core.create_store(vec![7], DType::F64).unwrap();
    core.submit(task(&double(false), a, out, 3, 3)).unwrap();
    let got = f64_values(&mut core, out).unwrap();
    assert_eq!(got, input.iter().map(|x| 2.0 * x).collect::<Vec<_>>());
    assert_eq!(log.lock().unwrap().uncleared.len(), before + 1);
}

#[test]
fn a_store_made_from_bytes_is_left_uncleared_and_reads_its_bytes() {
    let (mut core, log) = core();
    let input = [1.5, -2.0, 3.25];
    let a = f64_store(&mut core, &input).unwrap();
    assert_eq!(log.lock().unwrap().uncleared.len(), 1);
    assert_eq!(f64_values(&mut core, a).unwrap(), input);
}

#[test]
fn bytes_written_to_part_of_a_fresh_store_leave_the_rest_zero() {
    let (mut core, log) = core();
    let wide = core.create_store(vec![6], DType::F64).unwrap();
    let part = core.slice(wide, &[1], &[5]).unwrap();
    let bytes: Vec<u8> = [1.0f64, 2.0, 3.0, 4.0]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    core.write_bytes(part, &bytes).unwrap();
    assert_eq!(
        f64_values(&mut core, wide).unwrap(),
        vec![0.0, 1.0, 2.0, 3.0, 4.0, 0.0]
    );
    assert!(log.lock().unwrap().uncleared.is_empty());
}

#[test]
fn a_store_read_first_or_written_in_part_is_zeroed() {
    let (mut core, log) = core();
    let a = f64_store(&mut core, &[1.0, 2.0, 3.0, 4.0]).unwrap();
    // Only `a`, made from bytes, is uncleared.
    let before = log.lock().unwrap().uncleared.clone();
    assert_eq!(before.len(), 1);
    // Read before written: `out += 2 a` starts from zeros.
    let out = core.create_store(vec![4], DType::F64).unwrap();
    core.submit(task(&double(true), a, out, 2, 2)).unwrap();
    assert_eq!(
        f64_values(&mut core, out).unwrap(),
        vec![2.0, 4.0, 6.0, 8.0]
    );
    // Written through a view of part of the storage: the rest stays zero.
    let wide = core.create_store(vec![6], DType::F64).unwrap();
    let part = core.slice(wide, &[1], &[5]).unwrap();
    core.submit(task(&double(false), a, part, 1, 4)).unwrap();
    assert_eq!(
        f64_values(&mut core, wide).unwrap(),
        vec![0.0, 2.0, 4.0, 6.0, 8.0, 0.0]
    );
    assert_eq!(log.lock().unwrap().uncleared, before);
}

#[test]
fn a_fault_in_a_task_given_an_uncleared_buffer_leaves_the_store_zero() {
    let (mut core, log) = core();
    let kernel = double(false);
    log.lock().unwrap().faulty.insert("t.double".into());
    let a = f64_store(&mut core, &[1.0, 2.0]).unwrap();
    let before = log.lock().unwrap().uncleared.len();
    let out = core.create_store(vec![2], DType::F64).unwrap();
    core.submit(task(&kernel, a, out, 1, 2)).unwrap();
    let e = core.flush().unwrap_err();
    assert!(matches!(&e, Error::KernelFault { .. }), "{e}");
    // The output's buffer, after `a`'s.
    let uncleared = log.lock().unwrap().uncleared[before..].to_vec();
    assert_eq!(uncleared.len(), 1);
    assert_eq!(
        log.lock().unwrap().freed,
        uncleared,
        "the buffer was given back"
    );
    // The store holds no value now: a read says why.
    let read = f64_values(&mut core, out).unwrap_err();
    assert!(matches!(&read, Error::KernelFault { .. }), "{read}");
}
