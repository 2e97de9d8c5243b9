//! Loading and launching: malformed modules are refused with their line, launches check
//! their arguments and the step limit, and the emitter's own modules run against the IR's
//! reference interpreter.

use weft_ir::builder::KernelBuilder;
use weft_ir::interp::{Arg, Storage, View};
use weft_ir::passes::math::lower_math;
use weft_ir::{DType, Privilege, ReduceOp, Scalar, ValidKernel};
use weft_ptx::Error;
use weft_ptx::device::{Device, Grid};
use weft_ptx::sim::{SimContext, SimDevice};

use super::{HEADER, INT_EDGES, Rng, floats, grid, load};

#[test]
fn malformed_modules_are_refused_with_their_line() {
    let body = |inst: &str| {
        format!(
            "{HEADER}.visible .entry e(.param .u64 p)\n{{\n    .reg .u64 %r;\n    {inst}\n    ret;\n}}\n"
        )
    };
    for (ptx, want) in [
        (
            body("foo.bar %r;"),
            "line 7 (entry `e`): unknown instruction `foo.bar`: `foo.bar %r;`",
        ),
        (
            body("add.s64 %r, %r, %q;"),
            "line 7 (entry `e`): unknown register `%q`",
        ),
        (body("add.s32 %r, %r, 1;"), "line 7"),
        (body("bra $nowhere;"), "unknown label `$nowhere`"),
        (
            body("bar.sync 0, 32;"),
            "line 7 (entry `e`): `bar.sync`: a barrier with a thread count is not simulated",
        ),
        (body("bar.sync 1;"), "only barrier 0"),
        (body("bar.arrive 0;"), "only `bar.sync` and `barrier.sync`"),
        (
            body("bar.warp.sync -1;"),
            "only `bar.sync` and `barrier.sync`",
        ),
        (
            body("ld.local.u64 %r, [%r];"),
            "the .local state space is not simulated",
        ),
        (
            body("ld.shared.u64 %r, [nowhere];"),
            "unknown register or shared array `nowhere`",
        ),
        (
            body("cvta.shared.u64 %r, %r;"),
            "generic addresses of shared memory",
        ),
        (
            body("st.shared.u64 [16], %r;"),
            "an immediate shared address",
        ),
        (
            body(".shared .b8 sh[8];\n    ld.global.u64 %r, [sh];"),
            "line 8 (entry `e`): `sh` is a shared array",
        ),
        (body(".shared .b8 buf[];"), "dynamic shared memory"),
        (
            body(".shared .f64 buf[6145];"),
            "line 7 (entry `e`): `buf`: more than 49152 bytes",
        ),
        (
            body(".shared .f64 a[4096];\n    .shared .f64 b[4096];"),
            "line 8 (entry `e`): `b`: the entry's shared arrays take more than the 49152",
        ),
        (body(".shared .b8 %r[8];"), "`%r` is declared twice"),
        (
            body(".shared .pred flags[8];"),
            "unsupported shared array type `.pred`",
        ),
        (
            format!("{HEADER}.extern .shared .align 8 .b8 dyn[];\n"),
            "line 4: `.extern .shared`: dynamic shared memory is not simulated",
        ),
        (
            format!("{HEADER}.shared .b8 a[8];\n.shared .u32 a;\n"),
            "line 5: a second `.shared` `a`",
        ),
        (body("mov.u64 %r, 0x1ffffffffffffffff;"), "line 7"),
        (
            body("add.rn.f64 %r, %r, %r"),
            "line 7 (entry `e`): a malformed operand `%rret`",
        ),
        (body("cvt.s32.f64 %r, %r;"), "line 7"),
        (body("ld.global.u64 %r, [%r+];"), "malformed address"),
        (body(".local .b8 buf[16];"), "not simulated"),
        (body("mov.u32 %tid.x, 1;"), "line 7"),
        (format!("{HEADER}.visible .entry e(\n{{"), "line 5"),
        ("garbage".to_string(), "line 1"),
        (
            ".version 7.8\n.target sm_80\n.address_size 32\n".to_string(),
            "line 3",
        ),
        (format!("{HEADER}.func f()\n{{\n}}\n"), "device functions"),
    ] {
        match SimDevice::new().load("bad", &ptx, &["e".to_string()]) {
            Err(Error::Driver(m)) => {
                assert!(
                    m.starts_with("kernel `bad`: the PTX JIT failed:") && m.contains(want),
                    "{m}\n{ptx}"
                )
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("accepted:\n{ptx}"),
        }
    }
    // A missing entry.
    match SimDevice::new().load("k", &body("ret;"), &["nope".to_string()]) {
        Err(Error::Driver(m)) => assert!(m.contains("no entry `nope`"), "{m}"),
        r => panic!("{:?}", r.map(|_| ())),
    }
}

#[test]
fn no_prefix_of_a_module_panics() {
    let ptx = emitted("axpy.ir").text;
    let mut dev = SimDevice::new();
    let chars: Vec<(usize, char)> = ptx.char_indices().collect();
    for &(at, _) in chars.iter().step_by(3) {
        let _ = dev.load("cut", &ptx[..at], &["weft_0".to_string()]);
        let mangled = format!("{}@!{}", &ptx[..at], &ptx[at..]);
        let _ = dev.load("mangled", &mangled, &["weft_0".to_string()]);
    }
}

#[test]
fn launches_check_their_arguments_and_step_limit() {
    let ctx = SimContext::with_step_limit(10_000);
    let mut dev = ctx.device();
    let spin =
        format!("{HEADER}.visible .entry spin(.param .u64 p)\n{{\n$top:\n    bra.uni $top;\n}}\n");
    let f = load(&mut dev, &spin, "spin");
    match dev.launch(&f, grid(1, 1), &[]) {
        Err(Error::Driver(m)) => assert!(m.contains("`spin` takes 1 parameters"), "{m}"),
        r => panic!("{r:?}"),
    }
    match dev.launch(&f, grid(1, 1), &[0]) {
        Err(Error::KernelFault { kernel, message }) => {
            assert_eq!(kernel, "test");
            assert!(message.contains("step limit of 10000"), "{message}");
        }
        r => panic!("{r:?}"),
    }
    // Not sticky.
    dev.synchronize().unwrap();
    assert!(matches!(
        dev.launch(&f, grid(0, 1), &[0]),
        Err(Error::Driver(_))
    ));
    let limited = format!("{HEADER}.visible .entry e()\n.maxntid 64, 1, 1\n{{\n    ret;\n}}\n");
    let e = load(&mut dev, &limited, "e");
    assert!(matches!(
        dev.launch(&e, grid(1, 128), &[]),
        Err(Error::Driver(_))
    ));
    dev.launch(&e, grid(3, 64), &[]).unwrap();
}

// ---- the emitter's modules ----

fn emitted(file: &str) -> weft_ptx::Module {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/filetests")
        .join(file);
    crate::filetests::emit_file(&path).unwrap().unwrap()
}

fn emit_text(src: &str) -> weft_ptx::Module {
    let kernel = weft_ir::text::parse(src).unwrap();
    weft_ptx::emit(&ValidKernel::new(lower_math(&kernel)).unwrap()).unwrap()
}

#[test]
fn every_filetest_module_loads() {
    let mut n = 0;
    for path in crate::filetests::files() {
        let Ok(Ok(m)) = crate::filetests::emit_file(&path) else {
            continue;
        };
        let names: Vec<String> = m.entries.iter().map(|e| e.name.clone()).collect();
        let loaded = SimDevice::new()
            .load("filetest", &m.text, &names)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(loaded.functions.len(), names.len());
        n += 1;
    }
    assert!(n >= 10, "only {n} filetests emitted");
}

fn dense_view(storage: usize, extents: &[i64]) -> View {
    let mut strides = vec![1i64; extents.len()];
    for d in (0..extents.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * extents[d + 1];
    }
    View {
        storage,
        offset: 0,
        strides,
        extents: extents.to_vec(),
        origin: vec![0; extents.len()],
    }
}

/// Runs `module` (of `kernel`) on the simulator with the interpreter's arguments: each
/// storage in its own allocation, the ABI laid out by hand. Returns the storages after it
/// and the fault word.
fn run_module(
    module: &weft_ptx::Module,
    kernel: &weft_ir::Kernel,
    args: &[Arg],
    storages: &[Storage],
) -> (Vec<Storage>, u32) {
    let mut dev = SimDevice::new();
    let names: Vec<String> = module.entries.iter().map(|e| e.name.clone()).collect();
    let fs = dev
        .load(&kernel.name, &module.text, &names)
        .unwrap()
        .functions;
    let fault = dev.alloc(4).unwrap();
    dev.memset_zero(fault, 4).unwrap();
    let mut bases = Vec::new();
    for s in storages {
        let size = s.dtype.size();
        let bytes: Vec<u8> = s
            .data
            .iter()
            .flat_map(|v| v.to_bits().to_le_bytes()[..size].to_vec())
            .collect();
        // Padded to whole 32-bit words: a bool reduction is an atomic on the word holding
        // its byte.
        let p = dev
            .alloc(bytes.len().max(1).next_multiple_of(4) as u64)
            .unwrap();
        dev.write(p, &bytes).unwrap();
        bases.push(p);
    }
    for (entry, f) in module.entries.iter().zip(&fs) {
        assert!(
            entry.leaves.is_empty() && entry.trees.is_empty(),
            "the harness lays out no leaves"
        );
        let mut words = vec![fault];
        for a in args {
            match a {
                Arg::Scalar(s) => words.push(s.to_bits()),
                Arg::Store(v) => {
                    let size = storages[v.storage].dtype.size() as i64;
                    words.push(bases[v.storage].wrapping_add((v.offset * size) as u64));
                    for list in [&v.extents, &v.strides, &v.origin] {
                        words.extend(list.iter().map(|&x| x as u64));
                    }
                }
            }
        }
        let Arg::Store(over) = &args[entry.over as usize] else {
            panic!("not a store")
        };
        let g = if entry.rows {
            let b = |n: i64, t: u64| ((n as u64).div_ceil(t).clamp(1, 3)) as u32;
            Grid {
                blocks: [b(over.extents[1], 32), b(over.extents[0], 8), 1],
                threads: [32, 8, 1],
            }
        } else {
            let n: i64 = over.extents.iter().product();
            grid(((n as u64).div_ceil(256).clamp(1, 3)) as u32, 256)
        };
        dev.launch(f, g, &words).unwrap();
    }
    let mut word = [0u8; 4];
    dev.read(fault, &mut word).unwrap();
    let out = storages
        .iter()
        .zip(&bases)
        .map(|(s, &p)| {
            let size = s.dtype.size();
            let mut bytes = vec![0u8; s.data.len() * size];
            dev.read(p, &mut bytes).unwrap();
            let data = bytes
                .chunks(size)
                .map(|c| {
                    let mut w = [0u8; 8];
                    w[..size].copy_from_slice(c);
                    Scalar::from_bits(s.dtype, u64::from_le_bytes(w))
                })
                .collect();
            Storage {
                dtype: s.dtype,
                data,
            }
        })
        .collect();
    (out, u32::from_le_bytes(word))
}

fn same(a: &Scalar, b: &Scalar) -> bool {
    match (a, b) {
        (Scalar::F32(x), Scalar::F32(y)) if x.is_nan() && y.is_nan() => true,
        (Scalar::F64(x), Scalar::F64(y)) if x.is_nan() && y.is_nan() => true,
        _ => a.to_bits() == b.to_bits(),
    }
}

/// Values of `dtype` with edge cases.
fn values(dtype: DType, n: usize, seed: u64) -> Vec<Scalar> {
    let mut r = Rng(seed);
    let xs = floats();
    (0..n)
        .map(|_| match dtype {
            DType::F64 => {
                Scalar::F64(r.pick(&xs) * if r.next().is_multiple_of(3) { 1e3 } else { 1.0 })
            }
            DType::F32 => Scalar::F32(r.pick(&xs) as f32),
            DType::I64 => Scalar::I64(if r.next().is_multiple_of(4) {
                r.pick(INT_EDGES) as i64
            } else {
                (r.next() % 2001) as i64 - 1000
            }),
            DType::I32 => Scalar::I32(r.pick(INT_EDGES) as i32),
            DType::Bool => Scalar::Bool(r.next().is_multiple_of(2)),
            // An unsigned storage type's elements are the i64 values loading them gives:
            // every bit pattern of its width, zero-extended (u64: 2^63 and more included).
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => Scalar::from_bits(
                dtype,
                if r.next().is_multiple_of(3) {
                    r.pick(INT_EDGES)
                } else {
                    r.next()
                },
            ),
        })
        .collect()
}

/// A store parameter's dense array (extents, elements), or a scalar's value.
enum In {
    Store(Vec<i64>, Vec<Scalar>),
    Scalar(Scalar),
}

/// Random inputs for `kernel`: every store `n` elements along each dimension.
fn random_inputs(kernel: &weft_ir::Kernel, n: i64) -> Vec<In> {
    let mut out = Vec::new();
    for (i, p) in kernel.params.iter().enumerate() {
        out.push(match *p {
            weft_ir::Param::Store { dtype, rank, .. } => {
                let len = n.pow(rank) as usize;
                In::Store(vec![n; rank as usize], values(dtype, len, 17 + i as u64))
            }
            weft_ir::Param::Scalar { dtype } => In::Scalar(values(dtype, 1, 99)[0]),
        });
    }
    out
}

/// Kernel `src` (math-lowered, as the back end gets it) on the simulator and in the
/// reference interpreter: the same stores bit for bit (NaN payloads aside), or both fail
/// (the fault word set).
fn agrees(name: &str, src: &str, inputs: Option<Vec<In>>, n: i64) {
    let kernel = lower_math(&weft_ir::text::parse(src).unwrap());
    agrees_kernel(name, &kernel, inputs, n);
}

/// [`agrees`] for a kernel already math-lowered; returns its module.
fn agrees_kernel(
    name: &str,
    kernel: &weft_ir::Kernel,
    inputs: Option<Vec<In>>,
    n: i64,
) -> weft_ptx::Module {
    let module = weft_ptx::emit(&ValidKernel::new(kernel.clone()).unwrap()).unwrap();
    let (mut storages, mut args) = (Vec::new(), Vec::new());
    let inputs = inputs.unwrap_or_else(|| random_inputs(kernel, n));
    assert_eq!(
        inputs.len(),
        kernel.params.len(),
        "{name}: an input a parameter"
    );
    for (param, input) in kernel.params.iter().zip(inputs) {
        args.push(match input {
            In::Store(extents, data) => {
                // The parameter's type: an unsigned store's elements are i64 scalars.
                let weft_ir::Param::Store { dtype, .. } = *param else {
                    panic!("{name}: a store for a scalar parameter")
                };
                storages.push(Storage { dtype, data });
                Arg::Store(dense_view(storages.len() - 1, &extents))
            }
            In::Scalar(s) => Arg::Scalar(s),
        });
    }
    let mut want = storages.clone();
    let reference = weft_ir::interp::run(kernel, &args, &mut want);
    let (got, fault) = run_module(&module, kernel, &args, &storages);
    match reference {
        Err(e) => assert_ne!(
            fault, 0,
            "{name}: the interpreter failed ({e}), the simulator did not"
        ),
        Ok(()) => {
            assert_eq!(fault, 0, "{name}: fault {fault}");
            for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                for (j, (a, b)) in g.data.iter().zip(&w.data).enumerate() {
                    assert!(
                        same(a, b),
                        "{name}: storage {k}[{j}]: simulator {a:?}, interpreter {b:?}"
                    );
                }
            }
        }
    }
    module
}

fn filetest(file: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/filetests")
        .join(file);
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn emitted_modules_agree_with_the_interpreter() {
    for (file, n) in [
        ("axpy.ir", 1000),
        ("int_ops.ir", 700),
        ("casts_bools.ir", 700),
        ("float_min_max.ir", 700),
        ("float_rem.ir", 300),
        ("math_all_f32.ir", 300),
        ("math_all_f64.ir", 300),
        ("two_loops_zero_d.ir", 500),
        // Its stencil reads row -1: both fail.
        ("stencil_2d.ir", 40),
    ] {
        agrees(file, &filetest(file), None, n);
    }
    // Rank 2 (a 2-D grid) and rank 3 (indices divided out of the linear one).
    let src = "kernel @k(%a: store<f64, 2, read>, %out: store<f64, 2, write>) {\n  parallel %out (%i, %j) {\n    \
               %v = load %a[%i, %j]\n    %f = cast f64 %i\n    %w = mul %v, %f\n    %x = sub %w, %v\n    \
               store %out[%i, %j], %x\n  }\n}\n";
    agrees("rank 2", src, None, 77);
    let src = "kernel @k(%a: store<i32, 3, read>, %out: store<i64, 3, write>) {\n  parallel %out (%i, %j, %k) {\n    \
               %v = load %a[%i, %j, %k]\n    %w = cast i64 %v\n    %x = mul %w, %j\n    %y = sub %x, %k\n    \
               store %out[%i, %j, %k], %y\n  }\n}\n";
    agrees("rank 3", src, None, 13);
    // Atomic reductions of every kind, the bins in range.
    let n = 600;
    let k = random_inputs(
        &weft_ir::text::parse(&filetest("reduce_atomics.ir")).unwrap(),
        n,
    );
    let inputs = k
        .into_iter()
        .enumerate()
        .map(|(i, input)| match (i, input) {
            (0, In::Store(e, d)) => In::Store(
                e,
                d.iter()
                    .map(|v| Scalar::I64(v.to_bits() as i64 % 7 + 3))
                    .collect(),
            ),
            (_, input) => input,
        })
        .collect();
    agrees(
        "reduce_atomics.ir",
        &filetest("reduce_atomics.ir"),
        Some(inputs),
        n,
    );
    // Sparse rows: a loop over each row's range of columns.
    let rows = 300;
    let mut r = Rng(5);
    let (mut pos, mut col, mut at) = (Vec::new(), Vec::new(), 0i32);
    for _ in 0..rows {
        let len = (r.next() % 6) as i32;
        pos.extend([Scalar::I32(at), Scalar::I32(at + len)]);
        col.extend((0..len).map(|_| Scalar::I32((r.next() % rows as u64) as i32)));
        at += len;
    }
    let nnz = col.len() as i64;
    let inputs = vec![
        In::Store(vec![rows, 2], pos),
        In::Store(vec![nnz], col),
        In::Store(vec![nnz], values(DType::F64, nnz as usize, 3)),
        In::Store(vec![rows], values(DType::F64, rows as usize, 4)),
        In::Store(vec![rows], values(DType::F64, rows as usize, 6)),
    ];
    agrees("spmv_csr.ir", &filetest("spmv_csr.ir"), Some(inputs), 0);
}

/// The unsigned storage types (`u8` .. `u64`) against the interpreter: loads zero-extend
/// (u64: the same 64 bits), the i64 arithmetic between overflows each narrow width, stores
/// keep the low bits. On a thread per point (`unsigned.ir`, random and edge inputs), as
/// indices of gathers (in range only if zero-extended; out of range, both fail), on a 2-D
/// grid, and in a loop split by lanes (its loads predicated by deferred index checks). Each
/// module is also assembled by `ptxas`.
#[test]
fn unsigned_stores_agree_with_the_interpreter() {
    let unsigned = DType::UNSIGNED;
    let assemble = |name: &str, m: &weft_ptx::Module| {
        weft_ptx::ptxas::assemble(&m.text, "sm_80", name).unwrap_or_else(|e| panic!("{e}"));
    };
    let text = filetest("unsigned.ir");
    for n in [1, 255, 700] {
        agrees(&format!("unsigned.ir, {n}"), &text, None, n);
    }
    // Every pairing of the edge values, each taken at every width.
    let edges = INT_EDGES.len();
    let n = edges * edges;
    let column = |dtype: DType, pick: &dyn Fn(usize) -> usize| {
        let data = (0..n)
            .map(|k| Scalar::from_bits(dtype, INT_EDGES[pick(k)]))
            .collect();
        In::Store(vec![n as i64], data)
    };
    let out = |dtype: DType| In::Store(vec![n as i64], values(dtype, n, 1));
    let inputs = vec![
        In::Store(vec![], vec![Scalar::I64(0xff)]),
        column(unsigned[0], &|k| k % edges),
        column(unsigned[1], &|k| k / edges),
        column(unsigned[2], &|k| (k * 7) % edges),
        column(unsigned[3], &|k| k / edges),
        out(DType::U8),
        out(DType::U16),
        out(DType::U32),
        out(DType::U64),
        out(DType::I64),
    ];
    agrees("unsigned.ir, edges", &text, Some(inputs), 0);

    // Gathers: u8 indices are in range of 300 elements (a sign-extended byte of 128 or more
    // would not be), u16 ones folded into range by `rem` first; unfolded, both fail.
    let gather = "kernel @gather(%i8: store<u8, 1, read>, %i16: store<u16, 1, read>, \
                  %x: store<f64, 1, read>, %y: store<f64, 1, write>, %z: store<u16, 1, write>) {\n  \
                  %n = extent %x, 0\n  parallel %y (%i) {\n    %j = load %i8[%i]\n    \
                  %v = load %x[%j]\n    %m = load %i16[%i]\n    %r = rem %m, %n\n    \
                  %u = load %x[%r]\n    %s = add %v, %u\n    store %y[%i], %s\n    \
                  %t = add %m, %j\n    store %z[%i], %t\n  }\n}\n";
    agrees("gather", gather, None, 300);
    let wild = gather.replace("%u = load %x[%r]", "%u = load %x[%m]");
    agrees("gather out of range", &wild, None, 300);

    // Rank 2: a 2-D grid, u16 and a transposed u8 into u32 and u64.
    let src = "kernel @k(%a: store<u16, 2, read>, %b: store<u8, 2, read>, \
               %out: store<u32, 2, write>, %o64: store<u64, 2, write>) {\n  \
               parallel %out (%i, %j) {\n    %v = load %a[%i, %j]\n    %w = load %b[%j, %i]\n    \
               %p = mul %v, %w\n    %q = mul %p, %p\n    %r = sub %w, %v\n    \
               store %out[%i, %j], %q\n    store %o64[%i, %j], %r\n  }\n}\n";
    let m = agrees_kernel(
        "rank 2",
        &lower_math(&weft_ir::text::parse(src).unwrap()),
        None,
        37,
    );
    assert!(m.entries[0].rows, "a 2-D grid");
    assemble("unsigned_rank2", &m);

    // A loop split by lanes: an i64 dot of u8 rows and a u16 vector, into u32 (truncated)
    // and u64 (a product past 2^63).
    let mut k = KernelBuilder::new("test.unsigned.lanes");
    let a = k.store(DType::U8, 2, Privilege::Read);
    let x = k.store(DType::U16, 1, Privilege::Read);
    let y = k.store(DType::U32, 1, Privilege::Write);
    let z = k.store(DType::U64, 1, Privilege::Write);
    let cols = k.extent(a, 1);
    k.parallel(y, |b, idx| {
        let i = idx[0];
        let lo = b.const_i64(0);
        let sum = b.fold_lanes(ReduceOp::Sum, DType::I64, lo, cols, |b, j| {
            let aij = b.load(a, &[i, j]);
            let xj = b.load(x, &[j]);
            b.mul(aij, xj)
        });
        let big = b.const_i64(0x9E37_79B9_7F4A_7C15_u64 as i64);
        let h = b.mul(sum, big);
        b.store(y, idx, sum);
        b.store(z, idx, h);
    });
    let kernel = k.finish_validated().unwrap();
    for n in [3, 45, 300] {
        let m = agrees_kernel(&format!("lanes, {n}"), &kernel, None, n);
        assert_eq!(m.entries[0].lanes, weft_ptx::emit::LANES, "split by lanes");
        assert!(m.text.contains("ld.global.L2::256B.u8"), "{}", m.text);
        assert!(m.text.contains("ld.global.L2::256B.u16"), "{}", m.text);
        assemble("unsigned_lanes", &m);
    }
}

#[test]
fn a_runaway_loop_stops_at_the_step_limit_or_when_the_host_sets_the_fault_word() {
    let m = emitted("for_cancel.ir");
    let mut dev = SimContext::with_step_limit(100_000).device();
    let f = load(&mut dev, &m.text, "weft_0");
    let (fault, x, out) = (
        dev.alloc(4).unwrap(),
        dev.alloc(80).unwrap(),
        dev.alloc(80).unwrap(),
    );
    dev.memset_zero(fault, 4).unwrap();
    let args = [fault, x, 10, 1, 0, out, 10, 1, 0];
    match dev.launch(&f, grid(1, 256), &args) {
        Err(Error::KernelFault { message, .. }) => {
            assert!(message.contains("step limit"), "{message}")
        }
        r => panic!("{r:?}"),
    }
    dev.write_now(fault, &weft_ptx::abi::CANCELLED.to_le_bytes())
        .unwrap();
    dev.launch(&f, grid(1, 256), &args).unwrap();
    dev.synchronize().unwrap();
}

#[test]
fn axpy_runs_on_a_sub_store_and_a_failed_index_check_sets_the_fault_word() {
    let m = emitted("axpy.ir");
    let mut dev = SimDevice::new();
    let f = load(&mut dev, &m.text, "weft_0");
    let n = 3000usize;
    let (x, y): (Vec<f64>, Vec<f64>) = (0..n).map(|i| (i as f64 * 0.37, 1.0 - i as f64)).unzip();
    let bytes = |v: &[f64]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let (fault, px, py) = (
        dev.alloc(4).unwrap(),
        dev.alloc(8 * n as u64).unwrap(),
        dev.alloc(8 * n as u64).unwrap(),
    );
    dev.memset_zero(fault, 4).unwrap();
    dev.write(px, &bytes(&x)).unwrap();
    dev.write(py, &bytes(&y)).unwrap();
    // y[10..2010] += 2.5 x[10..2010], with two blocks striding over the rest.
    let (lo, len) = (10u64, 2000u64);
    let a = 2.5f64;
    let args = [
        fault,
        a.to_bits(),
        px + 8 * lo,
        len,
        1,
        lo,
        py + 8 * lo,
        len,
        1,
        lo,
    ];
    dev.launch(&f, grid(2, 256), &args).unwrap();
    let mut out = vec![0u8; 8 * n];
    dev.read(py, &mut out).unwrap();
    for i in 0..n {
        let got = f64::from_le_bytes(out[8 * i..8 * i + 8].try_into().unwrap());
        let want = if (lo as usize..(lo + len) as usize).contains(&i) {
            a * x[i] + y[i]
        } else {
            y[i]
        };
        assert_eq!(got.to_bits(), want.to_bits(), "y[{i}]");
    }
    let mut word = [0u8; 4];
    dev.read(fault, &mut word).unwrap();
    assert_eq!(word, [0; 4]);

    // A gather whose index is out of range: the check fails, the fault word gets its code.
    let m = emit_text(
        "kernel @gather(%idx: store<i64, 1, read>, %x: store<f64, 1, read>, %y: store<f64, 1, write>) {\n  \
         parallel %y (%i) {\n    %j = load %idx[%i]\n    %v = load %x[%j]\n    store %y[%i], %v\n  }\n}\n",
    );
    let g = load(&mut dev, &m.text, &m.entries[0].name);
    let idx: Vec<u8> = [0i64, 2, 1, 7]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let pi = dev.alloc(32).unwrap();
    dev.write(pi, &idx).unwrap();
    let args = [fault, pi, 4, 1, 0, px, 4, 1, 0, py, 4, 1, 0];
    dev.launch(&g, grid(1, 256), &args).unwrap();
    dev.read(fault, &mut word).unwrap();
    let code = u32::from_le_bytes(word);
    let site = m.faults[(code - 1) as usize];
    assert_eq!(
        (site.param, site.dim, site.access),
        (1, 0, weft_ptx::abi::AccessKind::Load)
    );
    dev.synchronize().unwrap();
}
