//! Kernel ids are names, never proofs: a kernel forged to carry another kernel's id (a
//! collision, which the test-only hook `KernelEntry::with_forged_id` makes) never runs the
//! other kernel's machine code, and the launcher refuses bindings of another element size
//! than the code was compiled for, whatever the cache holds.

use std::sync::Arc;

use weft_ir::{DType, KernelBuilder, Privilege};
use weft_runtime::testing::{f64_store, f64_values};
use weft_runtime::{
    Backend, Binding, Core, IndexTask, KernelEntry, NoFusion, Owner, Partition, PluginId, Settings,
    TaskArg, Tiling,
};

use weft_cpu::{CpuBackend, CpuOptions};

/// `out[i] = a[i] + a[i]` over stores of `dtype`.
fn doubling(name: &str, dtype: DType) -> weft_ir::Kernel {
    let mut b = KernelBuilder::new(name);
    let a = b.store(dtype, 1, Privilege::Read);
    let out = b.store(dtype, 1, Privilege::Write);
    b.body().parallel(out, |b, i| {
        let x = b.load(a, i);
        let y = b.add(x, x);
        b.store(out, i, y);
    });
    b.finish()
}

fn backend() -> CpuBackend {
    CpuBackend::with_options(&CpuOptions {
        threads: 1,
        guard_pages: true,
        ..CpuOptions::default()
    })
    .expect("a CPU back end")
}

fn whole(n: u64) -> Partition {
    Partition::Tiling(Tiling {
        tile: weft_runtime::smallvec::smallvec![n],
        offset: weft_runtime::smallvec::smallvec![0],
        projection: weft_runtime::smallvec::smallvec![Some(0)],
        skew: None,
    })
}

fn task(
    kernel: &Arc<KernelEntry>,
    a: weft_runtime::StoreId,
    out: weft_runtime::StoreId,
    n: u64,
) -> IndexTask {
    IndexTask::new(
        PluginId(0),
        kernel.clone(),
        vec![1],
        vec![
            TaskArg::new(a, whole(n), Privilege::Read),
            TaskArg::new(out, whole(n), Privilege::Write),
        ],
        Vec::new(),
    )
}

#[test]
fn a_kernel_forged_with_another_kernels_id_is_refused_not_run() {
    let genuine =
        Arc::new(KernelEntry::new("t.double", &doubling("t.double", DType::F64)).expect("valid"));
    // The same id on a kernel over 4-byte elements: run with the genuine kernel's code, it
    // would write 8-byte elements over 4-byte buffers.
    let forged = Arc::new(
        KernelEntry::with_forged_id(doubling("t.double_i32", DType::I32), genuine.id())
            .expect("valid"),
    );
    assert_eq!(forged.id(), genuine.id());
    let mut core = Core::new(Settings::default(), Box::new(backend()), Box::new(NoFusion));
    let a = f64_store(&mut core, &[1.0, 2.0, 3.0, 4.0]).expect("a store");
    let out = core.create_store(vec![4], DType::F64).expect("a store");
    core.submit(task(&genuine, a, out, 4)).expect("submits");
    assert_eq!(
        f64_values(&mut core, out).expect("reads"),
        vec![2.0, 4.0, 6.0, 8.0]
    );
    let ints: Vec<u8> = [1i32, 2, 3, 4]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let small_a = core
        .store_from_bytes(vec![4], DType::I32, &ints)
        .expect("a store");
    let small_out = core.create_store(vec![4], DType::I32).expect("a store");
    let refused = core
        .submit(task(&forged, small_a, small_out, 4))
        .and_then(|()| core.read_bytes(small_out).map(|_| ()))
        .expect_err("the forged kernel must not run");
    assert!(
        refused
            .to_string()
            .contains("cached under this kernel's id"),
        "{refused}"
    );
    // The runtime goes on: the genuine kernel still runs.
    let out2 = core.create_store(vec![4], DType::F64).expect("a store");
    core.submit(task(&genuine, a, out2, 4)).expect("submits");
    assert_eq!(
        f64_values(&mut core, out2).expect("reads"),
        vec![2.0, 4.0, 6.0, 8.0]
    );
}

#[test]
fn a_confirmed_hit_needs_the_same_ir_and_a_fresh_entry_of_it_is_one() {
    let mut b = backend();
    let genuine =
        Arc::new(KernelEntry::new("t.double", &doubling("t.double", DType::F64)).expect("valid"));
    let again =
        Arc::new(KernelEntry::new("t.double", &doubling("t.double", DType::F64)).expect("valid"));
    let forged = Arc::new(
        KernelEntry::with_forged_id(doubling("t.double_i32", DType::I32), genuine.id())
            .expect("valid"),
    );
    b.prepare(&genuine, Owner(0)).expect("compiles");
    assert!(b.is_prepared(&genuine));
    assert!(
        b.is_prepared(&again),
        "another entry of the same IR is a hit"
    );
    assert!(!b.is_prepared(&forged), "the same id on other IR is not");
    let e = b
        .prepare(&forged, Owner(0))
        .expect_err("a collision is an error");
    assert!(e.to_string().contains("t.double"), "{e}");
}

#[test]
fn the_launcher_refuses_bindings_of_another_element_size() {
    let mut b = backend();
    let kernel =
        Arc::new(KernelEntry::new("t.double", &doubling("t.double", DType::F64)).expect("valid"));
    b.prepare(&kernel, Owner(0)).expect("compiles");
    let small = b.alloc(4).expect("a buffer");
    let binding = |element_size: usize| Binding::Buffer {
        buffer: small,
        offset: 0,
        extents: vec![4].into(),
        strides: vec![1].into(),
        origin: vec![0].into(),
        view: vec![4].into(),
        element_size,
        deferred: None,
    };
    // Four 1-byte elements fit the buffer, so the view check passes; the code was compiled
    // for 8-byte elements, so the launch must be refused before anything runs.
    let e = b
        .launch(kernel.id(), &[binding(1), binding(1)], &[])
        .expect_err("1-byte bindings for 8-byte parameters");
    assert!(
        e.to_string().contains("compiled for 8-byte elements"),
        "{e}"
    );
    let e = b
        .launch(kernel.id(), &[binding(1)], &[])
        .expect_err("too few bindings");
    assert!(e.to_string().contains("1 store bindings for 2"), "{e}");
    let mut bytes = [0xFFu8; 4];
    b.read(small, 0, &mut bytes).expect("reads");
    assert_eq!(bytes, [0; 4], "nothing was written");
}
