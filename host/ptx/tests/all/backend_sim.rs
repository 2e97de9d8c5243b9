//! The GPU back end (`PtxBackend`) on the simulated GPU: the bugs a first run on a GPU would
//! have met, each caught here. A float sum into a 0-d store (the canonical tree on the
//! device, whose level kernel takes rank-2 views), a launch whose bindings do not match the
//! kernel's ranks, an index check that fails, a sticky device error seen by every runtime on
//! the device, another runtime's bytes, and a kernel name that would break the driver's C
//! string.

use std::sync::Arc;

use weft_ir::reduction::canonical;
use weft_ir::{DType, ReduceOp, Scalar};
use weft_ptx::PtxBackend;
use weft_ptx::device::{Device, Grid};
use weft_ptx::sim::SimContext;
use weft_runtime::{Backend, Binding, BufferId, KernelEntry, Owner};

fn entry_of(text: &str) -> Arc<KernelEntry> {
    let kernel = weft_ir::text::parse(text).expect("the kernel parses");
    let kernel = weft_ir::passes::math::lower_math(&kernel);
    Arc::new(KernelEntry::new(&kernel.name.clone(), &kernel).expect("the kernel is valid"))
}

/// A back end on a simulated GPU of its own, with the kernel of `text` prepared.
fn simulated_with(text: &str) -> (PtxBackend<weft_ptx::sim::SimDevice>, Arc<KernelEntry>) {
    let mut backend = PtxBackend::simulated();
    let entry = entry_of(text);
    backend.prepare(&entry, Owner::RUNTIME).expect("prepares");
    (backend, entry)
}

/// A rank-1 binding of `n` elements of `size` bytes at the start of `buffer`.
pub(crate) fn vector(buffer: BufferId, n: usize, size: usize) -> Binding {
    window(buffer, 0, n, size, None)
}

/// A rank-1 binding of `n` elements of `size` bytes from element `offset` of `buffer`,
/// deferred with the halo `deferred` where there is one.
fn window(buffer: BufferId, offset: u64, n: usize, size: usize, deferred: Option<u32>) -> Binding {
    Binding::Buffer {
        buffer,
        offset,
        extents: vec![n as i64].into(),
        strides: vec![1].into(),
        origin: vec![0].into(),
        view: vec![n as u64].into(),
        element_size: size,
        deferred,
    }
}

/// A 0-d binding of an `f64` at the start of `buffer`.
pub(crate) fn scalar_store(buffer: BufferId) -> Binding {
    Binding::Buffer {
        buffer,
        offset: 0,
        extents: vec![].into(),
        strides: vec![].into(),
        origin: vec![].into(),
        view: vec![].into(),
        element_size: 8,
        deferred: None,
    }
}

/// The first `n` f64 values of `buffer`, read back.
pub(crate) fn download(backend: &mut dyn Backend, buffer: BufferId, n: usize) -> Vec<f64> {
    let mut bytes = vec![0u8; 8 * n];
    backend.read(buffer, 0, &mut bytes).expect("reads");
    bytes
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

/// A new buffer holding `values` (at least 8 bytes, so that an empty one is a buffer too).
pub(crate) fn upload(backend: &mut dyn Backend, values: &[f64]) -> BufferId {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let id = backend.alloc(bytes.len().max(8) as u64).expect("alloc");
    if !bytes.is_empty() {
        backend.write(id, 0, &bytes).expect("write");
    }
    id
}

const DOT: &str = "kernel @test.dot(%x: store<f64, 1, read>, %y: store<f64, 1, read>, \
                   %s: store<f64, 0, reduce(sum)>) {\n  parallel %x (%i) {\n    \
                   %a = load %x[%i]\n    %b = load %y[%i]\n    %m = mul %a, %b\n    \
                   reduce sum %s[], %m\n  }\n}\n";

/// A dot product of a rank-1 loop, on the device's canonical tree: the same bits as the
/// canonical order computed on the host, for lengths around powers of two and an offset
/// piece. (The launcher once bound rank-1 views to the rank-2 level kernel and panicked.)
#[test]
fn a_dot_product_reduces_on_the_device_in_the_canonical_order() {
    let (mut backend, dot) = simulated_with(DOT);
    for n in [1usize, 2, 3, 7, 64, 255, 256, 257, 1000, 4099] {
        let x: Vec<f64> = (0..n).map(|i| ((i * 7 % 13) as f64 - 6.0) / 3.0).collect();
        let y: Vec<f64> = (0..n).map(|i| 1.0 / (1.0 + i as f64)).collect();
        let (bx, by) = (upload(&mut backend, &x), upload(&mut backend, &y));
        let s = backend.alloc(8).expect("alloc");
        backend
            .launch(
                dot.id(),
                &[vector(bx, n, 8), vector(by, n, 8), scalar_store(s)],
                &[],
            )
            .expect("the dot launches");
        let mut parts = backend.take_reductions().expect("reductions");
        assert_eq!(parts.len(), 1, "n = {n}");
        let got = parts[0].partial.finish().expect("finishes");
        let want = canonical(ReduceOp::Sum, DType::F64, &[n as u64], &|p| {
            let i = p[0] as usize;
            Scalar::F64(x[i] * y[i])
        });
        assert_eq!(got, want, "n = {n}");
        for b in [bx, by, s] {
            backend.free(b);
        }
    }
}

/// A launch whose binding has another rank than the kernel's parameter is an error naming
/// the kernel, not a panic, and the back end keeps working.
#[test]
fn a_binding_of_the_wrong_rank_is_an_error() {
    let (mut backend, dot) = simulated_with(DOT);
    let x = upload(&mut backend, &[1.0; 16]);
    let s = backend.alloc(8).expect("alloc");
    let square = Binding::Buffer {
        buffer: x,
        offset: 0,
        extents: vec![4, 4].into(),
        strides: vec![4, 1].into(),
        origin: vec![0, 0].into(),
        view: vec![4, 4].into(),
        element_size: 8,
        deferred: None,
    };
    let e = backend
        .launch(dot.id(), &[square, vector(x, 16, 8), scalar_store(s)], &[])
        .expect_err("a rank-2 binding for a rank-1 store");
    assert!(e.to_string().contains("test.dot"), "{e}");
    assert!(e.to_string().contains("rank"), "{e}");
    backend
        .launch(
            dot.id(),
            &[vector(x, 16, 8), vector(x, 16, 8), scalar_store(s)],
            &[],
        )
        .expect("a good launch after the bad one");
    let mut parts = backend.take_reductions().expect("reductions");
    assert_eq!(
        parts[0].partial.finish().expect("finishes"),
        Some(Scalar::F64(16.0))
    );
}

const GATHER: &str = "kernel @test.gather(%x: store<f64, 1, read>, %idx: store<i64, 1, read>, \
                      %out: store<f64, 1, write>) {\n  parallel %out (%i) {\n    \
                      %j = load %idx[%i]\n    %v = load %x[%j]\n    store %out[%i], %v\n  }\n}\n";

/// The bindings of [`GATHER`] over `x = [10, 11, 12, 13]`, indices `idx` and a new output,
/// with the indices' and the output's buffers.
fn gather_of(backend: &mut dyn Backend, idx: [i64; 4]) -> ([Binding; 3], BufferId, BufferId) {
    let x = upload(backend, &[10.0, 11.0, 12.0, 13.0]);
    let bytes: Vec<u8> = idx.iter().flat_map(|v| v.to_le_bytes()).collect();
    let idx = backend.alloc(32).expect("alloc");
    backend.write(idx, 0, &bytes).expect("write");
    let out = backend.alloc(32).expect("alloc");
    (
        [vector(x, 4, 8), vector(idx, 4, 8), vector(out, 4, 8)],
        idx,
        out,
    )
}

/// An index check that fails on the device is reported at the next synchronization as a
/// fault of the kernel naming the access; the device is not lost and later launches run.
#[test]
fn a_failed_index_check_is_a_kernel_fault_not_a_lost_device() {
    let (mut backend, gather) = simulated_with(GATHER);
    let (args, idx, out) = gather_of(&mut backend, [3, 0, 9, 1]);
    backend.launch(gather.id(), &args, &[]).expect("enqueues");
    let e = backend.synchronize().expect_err("index 9 of 4");
    let text = e.to_string();
    assert!(text.contains("test.gather"), "{text}");
    assert!(!text.contains("lost"), "{text}");
    // Fixed, the same launch runs.
    let good: Vec<u8> = [3i64, 0, 2, 1]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    backend.write(idx, 0, &good).expect("write");
    backend.launch(gather.id(), &args, &[]).expect("enqueues");
    let got = download(&mut backend, out, 4);
    assert_eq!(got, [13.0, 10.0, 12.0, 11.0]);
}

/// A cancelled job's launches are refused with the job's error, and the next job (another
/// token, or none) launches again.
#[test]
fn launches_of_a_cancelled_job_are_refused() {
    let (mut backend, gather) = simulated_with(GATHER);
    let (args, _, out) = gather_of(&mut backend, [3, 0, 2, 1]);
    let token = Arc::new(weft_runtime::CancelToken::default());
    backend.set_cancel(Some(token.clone()));
    backend
        .launch(gather.id(), &args, &[])
        .expect("runs before the cancel");
    backend.synchronize().expect("synchronizes");
    token.cancel();
    let e = backend
        .launch(gather.id(), &args, &[])
        .expect_err("refused after the cancel")
        .to_string();
    assert!(
        e.contains(weft_runtime::backend::CANCELLED_BY_JOB) && e.contains("test.gather"),
        "{e}"
    );
    backend.set_cancel(None);
    backend
        .launch(gather.id(), &args, &[])
        .expect("the next job runs");
    assert_eq!(download(&mut backend, out, 4), [13.0, 10.0, 12.0, 11.0]);
}

/// A sticky device error (an illegal address that no check of ours stopped: here a raw
/// module launched on the device) is `DeviceLost` for every runtime on that device, on its
/// next call, without a hang or a panic; a runtime on another device still works.
#[test]
fn a_lost_device_is_an_error_for_every_runtime_on_it() {
    let context = SimContext::new();
    let mut first = PtxBackend::simulated_on(&context);
    let mut second = PtxBackend::simulated_on(&context);
    let mut elsewhere = PtxBackend::simulated();
    let a = upload(&mut first, &[1.0, 2.0]);
    let b = upload(&mut second, &[3.0, 4.0]);
    let c = upload(&mut elsewhere, &[5.0, 6.0]);
    let bad = ".version 7.8\n.target sm_80\n.address_size 64\n\
               .visible .entry bad(.param .u64 p)\n{\n  .reg .u64 %a;\n  .reg .f64 %v;\n  \
               ld.param.u64 %a, [p];\n  ld.global.f64 %v, [%a];\n  ret;\n}\n";
    let mut raw = context.device();
    let loaded = raw
        .load("test.bad", bad, &["bad".to_string()])
        .expect("the module loads");
    let grid = Grid {
        blocks: [1, 1, 1],
        threads: [1, 1, 1],
    };
    let e = raw
        .launch(&loaded.functions[0], grid, &[16])
        .expect_err("address 16 is no allocation");
    assert!(matches!(e, weft_ptx::Error::DeviceLost(_)), "{e}");
    for (backend, id) in [(&mut first, a), (&mut second, b)] {
        let mut bytes = vec![0u8; 16];
        let e = backend
            .read(id, 0, &mut bytes)
            .expect_err("the device is lost");
        assert!(e.to_string().contains("lost"), "{e}");
    }
    let mut bytes = vec![0u8; 16];
    elsewhere
        .read(c, 0, &mut bytes)
        .expect("another device works");
    assert_eq!(f64::from_le_bytes(bytes[8..].try_into().expect("8")), 6.0);
}

/// Memory one runtime freed and another gets from the device reads as zeros, never as the
/// first runtime's bytes, even where the second asked for memory it will write itself.
#[test]
fn no_runtime_sees_another_runtimes_bytes() {
    let context = SimContext::new();
    let secret: Vec<f64> = (0..512).map(|i| 1e6 + i as f64).collect();
    {
        let mut first = PtxBackend::simulated_on(&context);
        let id = upload(&mut first, &secret);
        first.free(id);
    }
    let mut second = PtxBackend::simulated_on(&context);
    for uninit in [true, false] {
        let id = if uninit {
            second.alloc_uninit(4096).expect("alloc")
        } else {
            second.alloc(4096).expect("alloc")
        };
        let mut bytes = vec![0xffu8; 4096];
        second.read(id, 0, &mut bytes).expect("reads");
        assert!(
            bytes.iter().all(|&b| b == 0),
            "uninit {uninit}: another runtime's bytes"
        );
        second.free(id);
    }
    // The simulated device does hand freed memory back with its bytes: the zeros above are
    // the back end's doing.
    let mut raw = context.device();
    let address = raw.alloc(64).expect("alloc");
    raw.write(address, &[7u8; 64]).expect("write");
    raw.free(address);
    let again = raw.alloc(64).expect("alloc");
    let mut bytes = vec![0u8; 64];
    raw.read(again, &mut bytes).expect("read");
    assert_eq!(bytes, [7u8; 64]);
}

/// A kernel name with a NUL and a line break (a plugin names its kernels) makes a module
/// whose text has neither in its comment, which the device loads.
#[test]
fn a_kernel_name_cannot_break_the_module_text() {
    let mut kernel = weft_ir::text::parse(DOT).expect("parses");
    kernel.name = "evil\0name\n.entry x(".to_string();
    let valid = weft_ir::ValidKernel::new(kernel).expect("valid");
    let module = weft_ptx::emit(&valid).expect("emits");
    assert!(!module.text.contains('\0'));
    assert!(module.text.contains("// weft kernel: evil name .entry x("));
    let mut device = weft_ptx::sim::SimDevice::new();
    let names: Vec<String> = module.entries.iter().map(|e| e.name.clone()).collect();
    device
        .load("evil", &module.text, &names)
        .expect("the module loads");
}

/// The device-to-device copy probe gives one positive rate per sample.
#[test]
fn the_copy_probe_reports_a_rate_per_sample() {
    let mut backend = PtxBackend::simulated();
    let rates = backend
        .copy_bandwidth(1 << 16, 3)
        .expect("probes")
        .expect("a device probe");
    assert_eq!(rates.len(), 3);
    assert!(rates.iter().all(|r| r.is_finite() && *r > 0.0), "{rates:?}");
}

/// A sole launch over the target's whole view folds the dot product into the 0-d target on
/// the device (`target = target + dot`, the canonical order's bits) and holds nothing back;
/// lengths cover no pass, one pass and two of the shared-memory tree, a last pass that folds
/// and one of two blocks that leaves the fold to its own launch.
#[test]
fn a_sole_launch_folds_its_reduction_on_the_device() {
    let (mut backend, dot) = simulated_with(DOT);
    backend.set_sole_launch(true);
    // Past 2^21 + 2^8 points the level-8 pass takes two blocks (no pass folds), past 2^22
    // a second pass of one block folds.
    for n in [
        5usize,
        1024,
        1025,
        8191,
        8193,
        70_001,
        (1 << 21) + 3,
        3_000_000,
        (1 << 22) + 5,
    ] {
        let x: Vec<f64> = (0..n).map(|i| ((i * 7 % 13) as f64 - 6.0) / 3.0).collect();
        let y: Vec<f64> = (0..n).map(|i| 1.0 / (1.0 + (i % 1000) as f64)).collect();
        let (bx, by) = (upload(&mut backend, &x), upload(&mut backend, &y));
        let s = upload(&mut backend, &[0.125]);
        backend
            .launch(
                dot.id(),
                &[vector(bx, n, 8), vector(by, n, 8), scalar_store(s)],
                &[],
            )
            .expect("the dot launches");
        assert!(
            backend.take_reductions().expect("reductions").is_empty(),
            "n = {n}: folded on the device, nothing held back"
        );
        let mut bytes = [0u8; 8];
        backend.read(s, 0, &mut bytes).expect("reads");
        let root = canonical(ReduceOp::Sum, DType::F64, &[n as u64], &|p| {
            let i = p[0] as usize;
            Scalar::F64(x[i] * y[i])
        });
        let Some(Scalar::F64(root)) = root else {
            panic!("a root");
        };
        assert_eq!(
            f64::from_le_bytes(bytes).to_bits(),
            (0.125 + root).to_bits(),
            "n = {n}"
        );
        for b in [bx, by, s] {
            backend.free(b);
        }
    }
}

/// A piece of a longer view (not a sole launch, or not the whole view) holds back the
/// canonical tree's nodes of its range, read in one copy: the same bits as the canonical
/// order of the whole view once the pieces merge. Pieces start and end off every node
/// boundary (a thread's eight, a block's 8192) and span two passes.
#[test]
fn pieces_of_a_view_hold_back_nodes_that_merge_to_the_canonical_bits() {
    for pieces in [
        &[(0usize, 1234usize), (1234, 4097), (4097, 5000)][..],
        &[(0, 3), (3, 8195), (8195, 30_001), (30_001, 40_000)][..],
    ] {
        pieces_merge(pieces);
    }
}

/// Elements `lo..hi` of an `n`-element f64 vector in `buffer`, as a piece of its view.
fn piece_of(buffer: BufferId, lo: usize, hi: usize, n: usize) -> Binding {
    Binding::Buffer {
        buffer,
        offset: lo as u64,
        extents: vec![(hi - lo) as i64].into(),
        strides: vec![1].into(),
        origin: vec![lo as i64].into(),
        view: vec![n as u64].into(),
        element_size: 8,
        deferred: None,
    }
}

fn pieces_merge(pieces: &[(usize, usize)]) {
    let (mut backend, dot) = simulated_with(DOT);
    let n = pieces.last().map_or(0, |p| p.1);
    let x: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
    let (bx, s) = (upload(&mut backend, &x), backend.alloc(8).expect("alloc"));
    let mut merged: Option<weft_ir::reduction::Partial> = None;
    for &(lo, hi) in pieces {
        let piece = piece_of(bx, lo, hi, n);
        backend
            .launch(dot.id(), &[piece.clone(), piece, scalar_store(s)], &[])
            .expect("a piece launches");
        let mut parts = backend.take_reductions().expect("reductions");
        assert_eq!(parts.len(), 1);
        let part = parts.remove(0).partial;
        match &mut merged {
            Some(m) => m.merge(part).expect("merges"),
            None => merged = Some(part),
        }
    }
    let got = merged.expect("parts").finish().expect("finishes");
    let want = canonical(ReduceOp::Sum, DType::F64, &[n as u64], &|p| {
        Scalar::F64(x[p[0] as usize] * x[p[0] as usize])
    });
    assert_eq!(got, want);
}

const SUM_AND_PRODUCT: &str = "kernel @test.sum_prod(%x: store<f64, 1, read>, \
                               %s: store<f64, 0, reduce(sum)>, \
                               %p: store<f64, 0, reduce(prod)>) {\n  parallel %x (%i) {\n    \
                               %a = load %x[%i]\n    reduce sum %s[], %a\n    \
                               reduce prod %p[], %a\n  }\n}\n";

/// A rank-1 entry's blocks combine the first eight levels of both of its reductions (a sum
/// and a product) before they write their leaves: pieces of a view that start and end off
/// every block's 256 points, one shorter than a block inside one, and one long enough that
/// the grid-stride loop takes a second step (more points than 2^16 blocks of 256 threads),
/// merge to the canonical order's bits.
#[test]
fn grouped_leaves_of_a_sum_and_a_product_merge_to_the_canonical_bits() {
    let long = (1usize << 24) + 1000;
    let pieces = [
        (0usize, 37usize),
        (37, 300),
        (300, 301),
        (301, 70_001),
        (70_001, 70_001 + long),
    ];
    let n = pieces[pieces.len() - 1].1;
    let x: Vec<f64> = (0..n)
        .map(|i| 1.0 + ((i * 7919 % 1013) as f64 - 506.0) * 1e-9)
        .collect();
    let (mut backend, k) = simulated_with(SUM_AND_PRODUCT);
    let bx = upload(&mut backend, &x);
    let (s, p) = (
        backend.alloc(8).expect("alloc"),
        backend.alloc(8).expect("alloc"),
    );
    let mut merged: Vec<Option<weft_ir::reduction::Partial>> = vec![None, None];
    for &(lo, hi) in &pieces {
        let piece = piece_of(bx, lo, hi, n);
        backend
            .launch(k.id(), &[piece, scalar_store(s), scalar_store(p)], &[])
            .expect("a piece launches");
        for part in backend.take_reductions().expect("reductions") {
            let slot = &mut merged[part.param as usize - 1];
            match slot {
                Some(m) => m.merge(part.partial).expect("merges"),
                None => *slot = Some(part.partial),
            }
        }
    }
    for (slot, op) in merged.into_iter().zip([ReduceOp::Sum, ReduceOp::Prod]) {
        let got = slot.expect("parts").finish().expect("finishes");
        let want = canonical(op, DType::F64, &[n as u64], &|q| {
            Scalar::F64(x[q[0] as usize])
        });
        assert_eq!(got, want, "{op:?}");
    }
}

/// A copy between buffers runs on the device, in order with the launches: the bytes a
/// launch wrote before it arrive, a launch after it sees the copy, and nothing is read back
/// to the host; a copy past either buffer's end is an error that copies nothing.
#[test]
fn a_buffer_copy_runs_on_the_device_in_order_with_the_launches() {
    let (mut backend, counts) = counting();
    let copy = entry_of(COPY);
    backend.prepare(&copy, Owner::RUNTIME).expect("prepares");
    let x = upload(&mut backend, &[1.0, 2.0, 3.0, 4.0]);
    let y = upload(&mut backend, &[0.0; 4]);
    let z = upload(&mut backend, &[9.0; 4]);
    let reads = counts.borrow().reads;
    backend
        .launch(copy.id(), &[vector(x, 4, 8), vector(y, 4, 8)], &[])
        .expect("enqueues");
    backend.copy(y, z, 24).expect("copies three elements");
    assert_eq!(counts.borrow().reads, reads, "nothing read back");
    let e = backend.copy(y, z, 40).expect_err("past the end");
    assert!(e.to_string().contains("40 bytes"), "{e}");
    let got = download(&mut backend, z, 4);
    assert_eq!(got, [1.0, 2.0, 3.0, 9.0]);
}

/// A kernel whose one loop sums `x * (k + 1)` into `count` 0-d stores.
fn many_sums(count: usize) -> String {
    let mut params = String::from("%x: store<f64, 1, read>");
    let mut body = String::from("    %a = load %x[%i]\n");
    for k in 0..count {
        params.push_str(&format!(", %s{k}: store<f64, 0, reduce(sum)>"));
        body.push_str(&format!(
            "    %c{k} = const f64 {}.0\n    %m{k} = mul %a, %c{k}\n    reduce sum %s{k}[], %m{k}\n",
            k + 1
        ));
    }
    format!("kernel @test.sums{count}({params}) {{\n  parallel %x (%i) {{\n{body}  }}\n}}\n")
}

/// A loop with at most `MAX_GROUPED_LEAVES` float sums combines them in its blocks; one with
/// more (whose slots would pass a block's 48 KiB of static shared memory) writes a leaf per
/// point; both give the canonical order's bits.
#[test]
fn a_loop_with_too_many_sums_for_shared_memory_writes_a_leaf_per_point() {
    use weft_ptx::emit::GROUP_LEVELS;
    for (count, level) in [(16, GROUP_LEVELS), (17, 0)] {
        let text = many_sums(count);
        let kernel = weft_ir::text::parse(&text).expect("parses");
        let valid = weft_ir::ValidKernel::new(kernel).expect("valid");
        let module = weft_ptx::emit(&valid).expect("emits");
        assert_eq!(module.entries[0].leaf_level, level, "{count} sums");
        let (mut backend, k) = simulated_with(&text);
        backend.set_sole_launch(true);
        let n = 3001usize;
        let x: Vec<f64> = (0..n).map(|i| (i as f64 * 0.71).cos()).collect();
        let bx = upload(&mut backend, &x);
        let sums: Vec<BufferId> = (0..count).map(|_| upload(&mut backend, &[0.0])).collect();
        let mut bindings = vec![vector(bx, n, 8)];
        bindings.extend(sums.iter().map(|&b| scalar_store(b)));
        backend.launch(k.id(), &bindings, &[]).expect("launches");
        for (j, &b) in sums.iter().enumerate() {
            let mut bytes = [0u8; 8];
            backend.read(b, 0, &mut bytes).expect("reads");
            let want = canonical(ReduceOp::Sum, DType::F64, &[n as u64], &|p| {
                Scalar::F64(x[p[0] as usize] * (j + 1) as f64)
            });
            let Some(Scalar::F64(want)) = want else {
                panic!("a root");
            };
            assert_eq!(
                f64::from_le_bytes(bytes).to_bits(),
                (0.0 + want).to_bits(),
                "{count} sums, sum {j}"
            );
        }
    }
}

const COPY: &str = "kernel @test.copy(%x: store<f64, 1, read>, %y: store<f64, 1, write>) {\n  \
                    parallel %y (%i) {\n    %v = load %x[%i]\n    store %y[%i], %v\n  }\n}\n";

/// The index check of an access at the loop's own indices is made once, before the loop:
/// a source shorter than the loop faults naming that access (and the loop stores nothing),
/// an empty loop never faults, and an equal one runs.
#[test]
fn checks_the_loop_range_proves_are_made_once_before_the_loop() {
    let (mut backend, copy) = simulated_with(COPY);
    let x = upload(&mut backend, &[1.0, 2.0, 3.0]);
    let y = upload(&mut backend, &[9.0; 4]);
    backend
        .launch(copy.id(), &[vector(x, 3, 8), vector(y, 4, 8)], &[])
        .expect("enqueues");
    let e = backend
        .synchronize()
        .expect_err("x has 3 elements, the loop 4");
    assert!(e.to_string().contains("test.copy"), "{e}");
    assert!(e.to_string().contains("load"), "{e}");
    let mut bytes = vec![0u8; 32];
    backend.read(y, 0, &mut bytes).expect("reads");
    assert!(
        bytes.chunks_exact(8).all(|c| c == 9.0f64.to_le_bytes()),
        "the faulting loop stored nothing"
    );
    backend
        .launch(copy.id(), &[vector(x, 0, 8), vector(y, 0, 8)], &[])
        .expect("enqueues");
    backend.synchronize().expect("an empty loop never faults");
    backend
        .launch(copy.id(), &[vector(x, 3, 8), vector(y, 3, 8)], &[])
        .expect("enqueues");
    assert_eq!(download(&mut backend, y, 4), [1.0, 2.0, 3.0, 9.0]);
}

/// The entries' 32-bit-offset variants give the 64-bit entries' bits: a strided gather, a
/// reversed view and a dot product, each run both ways.
#[test]
fn narrow_offsets_give_the_wide_entries_bits() {
    let run = |narrow: bool| -> Vec<u64> {
        let mut backend = PtxBackend::simulated();
        backend.set_narrow_offsets(narrow);
        let (copy, dot) = (entry_of(COPY), entry_of(DOT));
        backend.prepare(&copy, Owner::RUNTIME).expect("prepares");
        backend.prepare(&dot, Owner::RUNTIME).expect("prepares");
        let n = 300usize;
        let x: Vec<f64> = (0..2 * n).map(|i| (i as f64).sqrt() - 7.0).collect();
        let bx = upload(&mut backend, &x);
        let y = backend.alloc(8 * n as u64).expect("alloc");
        let reversed = Binding::Buffer {
            buffer: bx,
            offset: 2 * n as u64 - 1,
            extents: vec![n as i64].into(),
            strides: vec![-2].into(),
            origin: vec![0].into(),
            view: vec![n as u64].into(),
            element_size: 8,
            deferred: None,
        };
        backend
            .launch(copy.id(), &[reversed.clone(), vector(y, n, 8)], &[])
            .expect("the copy launches");
        let s = backend.alloc(8).expect("alloc");
        backend
            .launch(dot.id(), &[reversed, vector(y, n, 8), scalar_store(s)], &[])
            .expect("the dot launches");
        let mut parts = backend.take_reductions().expect("reductions");
        let total = parts[0].partial.finish().expect("finishes");
        let mut bytes = vec![0u8; 8 * n];
        backend.read(y, 0, &mut bytes).expect("reads");
        let mut bits: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        if let Some(Scalar::F64(t)) = total {
            bits.push(t.to_bits());
        }
        assert_eq!(
            f64::from_bits(bits[0]),
            x[2 * n - 1],
            "the reversed view's first element"
        );
        bits
    };
    assert_eq!(run(true), run(false));
}

/// Which arguments may take the 32-bit variants: every offset and extent within `i32`.
#[test]
fn narrow_offsets_need_every_offset_within_i32() {
    use weft_ptx::emit::fits_narrow;
    assert!(fits_narrow(&[8190, 8190], &[8192, 1]));
    assert!(fits_narrow(&[], &[]));
    assert!(fits_narrow(&[0, 1 << 40], &[1, 1]), "no elements");
    assert!(fits_narrow(&[1 << 20], &[-2047]));
    assert!(!fits_narrow(&[1 << 20], &[-2049]));
    assert!(!fits_narrow(&[i64::from(i32::MAX) + 1], &[1]));
    assert!(!fits_narrow(&[50_000, 50_000], &[50_000, 1]));
    assert!(fits_narrow(&[2, 2], &[(1 << 30) - 1, 1]));
}

/// A device that counts what the back end asks of the simulated one.
#[derive(Default)]
struct Counts {
    launches: usize,
    reads: usize,
    copies: usize,
    /// Every launch's grid, in order.
    grids: Vec<Grid>,
}

struct Counting {
    inner: weft_ptx::sim::SimDevice,
    counts: std::rc::Rc<std::cell::RefCell<Counts>>,
}

impl Device for Counting {
    type Function = <weft_ptx::sim::SimDevice as Device>::Function;
    type Mark = <weft_ptx::sim::SimDevice as Device>::Mark;
    fn name(&self) -> weft_ptx::Result<String> {
        self.inner.name()
    }
    fn alloc(&mut self, bytes: u64) -> weft_ptx::Result<u64> {
        self.inner.alloc(bytes)
    }
    fn free(&mut self, address: u64) {
        self.inner.free(address)
    }
    fn memset_zero(&mut self, address: u64, bytes: u64) -> weft_ptx::Result<()> {
        self.inner.memset_zero(address, bytes)
    }
    fn write(&mut self, address: u64, data: &[u8]) -> weft_ptx::Result<()> {
        self.inner.write(address, data)
    }
    fn read(&mut self, address: u64, out: &mut [u8]) -> weft_ptx::Result<()> {
        self.counts.borrow_mut().reads += 1;
        self.inner.read(address, out)
    }
    fn copy(&mut self, dst: u64, src: u64, bytes: u64) -> weft_ptx::Result<()> {
        self.counts.borrow_mut().copies += 1;
        self.inner.copy(dst, src, bytes)
    }
    fn load(
        &mut self,
        kernel: &str,
        ptx: &str,
        entries: &[String],
    ) -> weft_ptx::Result<weft_ptx::device::LoadedModule<Self::Function>> {
        self.inner.load(kernel, ptx, entries)
    }
    fn launch(&mut self, f: &Self::Function, grid: Grid, args: &[u64]) -> weft_ptx::Result<()> {
        let mut counts = self.counts.borrow_mut();
        counts.launches += 1;
        counts.grids.push(grid);
        drop(counts);
        self.inner.launch(f, grid, args)
    }
    fn synchronize(&mut self) -> weft_ptx::Result<()> {
        self.inner.synchronize()
    }
    fn wait_for(&mut self, limit: std::time::Duration) -> weft_ptx::Result<bool> {
        self.inner.wait_for(limit)
    }
    fn write_now(&mut self, address: u64, data: &[u8]) -> weft_ptx::Result<()> {
        self.inner.write_now(address, data)
    }
    fn mark(&mut self) -> weft_ptx::Result<Self::Mark> {
        self.inner.mark()
    }
    fn elapsed(
        &mut self,
        from: &Self::Mark,
        to: &Self::Mark,
    ) -> weft_ptx::Result<std::time::Duration> {
        self.inner.elapsed(from, to)
    }
}

fn counting() -> (
    PtxBackend<Counting>,
    std::rc::Rc<std::cell::RefCell<Counts>>,
) {
    let counts = std::rc::Rc::new(std::cell::RefCell::new(Counts::default()));
    let device = Counting {
        inner: weft_ptx::sim::SimDevice::new(),
        counts: counts.clone(),
    };
    (PtxBackend::on(device, None), counts)
}

/// A dot product of a sole launch makes a fixed number of launches (its entry, which
/// combines the first eight levels, one pass of the shared-memory tree per thirteen levels
/// after those, the last of one block folding too) and reads nothing back until the
/// application reads the result; the synchronization then reads the epoch's fault words in
/// one copy.
#[test]
fn a_dot_product_makes_no_round_trip() {
    let (mut backend, counts) = counting();
    let dot = entry_of(DOT);
    backend.prepare(&dot, Owner::RUNTIME).expect("prepares");
    backend.set_sole_launch(true);
    let n = 300_000usize;
    let x = upload(&mut backend, &vec![0.5; n]);
    let s = backend.alloc(8).expect("alloc");
    let before = counts.borrow().launches;
    for _ in 0..3 {
        backend
            .launch(
                dot.id(),
                &[vector(x, n, 8), vector(x, n, 8), scalar_store(s)],
                &[],
            )
            .expect("the dot launches");
    }
    // 300,000 leaves: levels 1-8 in the entry's blocks, 9-18 in one pass of one block,
    // which folds.
    assert_eq!(counts.borrow().launches - before, 3 * (1 + 1));
    assert_eq!(counts.borrow().reads, 0, "nothing read back");
    backend.synchronize().expect("no fault");
    assert_eq!(counts.borrow().reads, 1, "the fault words, in one copy");
    let mut bytes = [0u8; 8];
    backend.read(s, 0, &mut bytes).expect("reads");
    assert_eq!(f64::from_le_bytes(bytes), 3.0 * 0.25 * n as f64);
}

const SWEEP: &str = "kernel @test.sweep(%in: store<f64, 1, read>, %left: store<f64, 1, read>, \
                     %out: store<f64, 1, write>) {\n  parallel %out (%i) {\n    \
                     %a = load %in[%i]\n    %b = load %left[%i]\n    %c = add %a, %b\n    \
                     store %out[%i], %c\n  }\n}\n";

/// A sole launch's deferred store lands by swapping buffers: after the first sweep (a copy
/// of the whole buffer) each sweep is one launch and no copy, and every sweep reads the old
/// values (Jacobi, not Gauss-Seidel); a write between sweeps drops the shadow, so the next
/// sweep copies again and sees the write.
#[test]
fn deferred_stores_of_sole_launches_swap_buffers() {
    let (mut backend, counts) = counting();
    let sweep = entry_of(SWEEP);
    backend.prepare(&sweep, Owner::RUNTIME).expect("prepares");
    backend.set_sole_launch(true);
    let n = 10usize;
    let mut want: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let grid = upload(&mut backend, &want);
    let view = |offset: u64, deferred: Option<u32>| window(grid, offset, n - 1, 8, deferred);
    // out[i] = in[i] + in[i - 1] over grid[1..], in = grid[1..], left = grid[..n-1].
    let args = [view(1, None), view(0, None), view(1, Some(1))];
    let reference = |want: &mut Vec<f64>| {
        let old = want.clone();
        for i in 1..n {
            want[i] = old[i] + old[i - 1];
        }
    };
    for k in 0..4 {
        let (launches, copies) = (counts.borrow().launches, counts.borrow().copies);
        backend
            .launch(sweep.id(), &args, &[])
            .expect("the sweep launches");
        reference(&mut want);
        assert_eq!(
            counts.borrow().launches - launches,
            1,
            "sweep {k}: one launch"
        );
        let copied = counts.borrow().copies - copies;
        // The first sweep copies, and the one after the write below.
        assert_eq!(copied, usize::from(k == 0 || k == 3), "sweep {k}: copies");
        if k == 2 {
            // A write into the grid drops the shadow.
            backend
                .write(grid, 0, &7.0f64.to_le_bytes())
                .expect("writes");
            want[0] = 7.0;
        }
    }
    let copies = counts.borrow().copies;
    backend
        .launch(sweep.id(), &args, &[])
        .expect("the sweep launches");
    reference(&mut want);
    assert_eq!(
        counts.borrow().copies - copies,
        0,
        "a shadow again after sweep 3"
    );
    assert_eq!(download(&mut backend, grid, n), want);
}

const DOUBLE_2D: &str = "kernel @test.double2(%a: store<f64, 2, read>, %b: store<f64, 2, write>) \
                         {\n  parallel %b (%i, %j) {\n    %v = load %a[%i, %j]\n    \
                         %w = add %v, %v\n    store %b[%i, %j], %w\n  }\n}\n";

/// A row-major `rows x cols` binding of `f64` at the start of `buffer`.
fn matrix(buffer: BufferId, rows: usize, cols: usize) -> Binding {
    Binding::Buffer {
        buffer,
        offset: 0,
        extents: vec![rows as i64, cols as i64].into(),
        strides: vec![cols as i64, 1].into(),
        origin: vec![0, 0].into(),
        view: vec![rows as u64, cols as u64].into(),
        element_size: 8,
        deferred: None,
    }
}

/// Grid caps bound every launch's blocks and leave the results as they were: a rank-2 loop
/// on a 2-D grid and a dot product (grouped leaves, then the tree passes), each with the
/// default caps and with caps of one and two blocks, where the threads stride over the rest.
#[test]
fn grid_caps_bound_the_launches_and_leave_the_bits() {
    let run = |caps: weft_ptx::GridCaps| -> (Vec<u64>, Vec<Grid>) {
        let (mut backend, counts) = counting();
        backend.set_grid_caps(caps);
        let (double, dot) = (entry_of(DOUBLE_2D), entry_of(DOT));
        backend.prepare(&double, Owner::RUNTIME).expect("prepares");
        backend.prepare(&dot, Owner::RUNTIME).expect("prepares");
        let (rows, cols) = (37usize, 70usize);
        let a: Vec<f64> = (0..rows * cols).map(|i| (i as f64).sin()).collect();
        let ba = upload(&mut backend, &a);
        let bb = backend.alloc(8 * (rows * cols) as u64).expect("alloc");
        backend
            .launch(
                double.id(),
                &[matrix(ba, rows, cols), matrix(bb, rows, cols)],
                &[],
            )
            .expect("the rank-2 loop launches");
        let mut bits: Vec<u64> = download(&mut backend, bb, rows * cols)
            .iter()
            .map(|v| v.to_bits())
            .collect();
        let n = rows * cols;
        let s = backend.alloc(8).expect("alloc");
        backend
            .launch(
                dot.id(),
                &[vector(ba, n, 8), vector(ba, n, 8), scalar_store(s)],
                &[],
            )
            .expect("the dot launches");
        let mut parts = backend.take_reductions().expect("reductions");
        match parts[0].partial.finish().expect("finishes") {
            Some(Scalar::F64(t)) => bits.push(t.to_bits()),
            other => panic!("a dot of f64: {other:?}"),
        }
        let grids = counts.borrow().grids.clone();
        (bits, grids)
    };
    let (want, default_grids) = run(weft_ptx::GridCaps::default());
    assert_eq!(
        default_grids[0].blocks,
        [3, 5, 1],
        "70 columns and 37 rows in blocks of 32 x 8"
    );
    assert_eq!(
        default_grids[1].blocks,
        [11, 1, 1],
        "2590 points in blocks of 256"
    );
    for (blocks, rows_blocks) in [(1u32, 1u64), (2, 2)] {
        let caps = weft_ptx::GridCaps {
            blocks,
            rows_blocks,
        };
        let (got, grids) = run(caps);
        assert_eq!(got, want, "{caps:?}");
        // The 2-D grid: its columns' blocks, and one row of blocks (the cap is below them);
        // the dot's entry: the cap's blocks of 256 threads.
        assert_eq!(grids[0].blocks, [3, 1, 1], "{caps:?}");
        assert_eq!(grids[1].blocks, [blocks, 1, 1], "{caps:?}: {grids:?}");
        assert_eq!(grids[1].threads, [256, 1, 1], "{caps:?}: {grids:?}");
    }
}

/// `out[i] = (in[i] + left[i]) * 3` in a store of the unsigned type `T` (`u8` or `u16`).
fn unsigned_sweep(t: &str) -> String {
    format!(
        "kernel @test.sweep.{t}(%in: store<{t}, 1, read>, %left: store<{t}, 1, read>, \
         %out: store<{t}, 1, write>) {{\n  %three = const i64 3\n  parallel %out (%i) {{\n    \
         %a = load %in[%i]\n    %b = load %left[%i]\n    %c = add %a, %b\n    \
         %d = mul %c, %three\n    store %out[%i], %d\n  }}\n}}\n"
    )
}

/// Deferred stores into `u8` and `u16` stores, on launches that are not their task's only
/// one: the launch stores into a dense temporary, which the copy kernel of the element's
/// size moves into place at `finish_deferred`. Every byte moves as it is (a `u8` byte of 200
/// is not a `bool`'s 1), each sweep reads the old values, and the arithmetic wraps at the
/// width.
#[test]
fn deferred_stores_into_unsigned_stores_copy_every_bit() {
    for (t, size) in [("u8", 1usize), ("u16", 2)] {
        let mut backend = PtxBackend::simulated();
        let sweep = entry_of(&unsigned_sweep(t));
        backend.prepare(&sweep, Owner::RUNTIME).expect("prepares");
        let n = 300usize;
        let mask = (1u64 << (8 * size)) - 1;
        let mut want: Vec<u64> = (0..n as u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40 & mask)
            .collect();
        let bytes = |v: &[u64]| -> Vec<u8> {
            v.iter()
                .flat_map(|x| x.to_le_bytes()[..size].to_vec())
                .collect()
        };
        let grid = backend.alloc((n * size) as u64).expect("alloc");
        backend.write(grid, 0, &bytes(&want)).expect("writes");
        let view = |offset: u64, deferred: Option<u32>| window(grid, offset, n - 1, size, deferred);
        let args = [view(1, None), view(0, None), view(1, Some(1))];
        for k in 0..3 {
            backend
                .launch(sweep.id(), &args, &[])
                .expect("the sweep launches");
            backend.finish_deferred(true).expect("lands");
            let old = want.clone();
            for i in 1..n {
                want[i] = (old[i] + old[i - 1]).wrapping_mul(3) & mask;
            }
            let mut got = vec![0u8; n * size];
            backend.read(grid, 0, &mut got).expect("reads");
            assert_eq!(got, bytes(&want), "{t}, sweep {k}");
        }
        assert!(
            want.iter().any(|&v| v > 1 && v <= 0xff),
            "{t}: bytes other than 0 and 1"
        );
    }
}
