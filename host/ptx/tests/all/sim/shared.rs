//! Shared memory and barriers: a block's `.shared` arrays in a window of their own, dirty
//! when the block starts, checked on every access; `bar.sync` runs a block's threads in
//! lockstep. The hand-written modules here are also assembled by `ptxas` when it is found.

use weft_ptx::Error;
use weft_ptx::device::{Device, Grid};
use weft_ptx::sim::{SimContext, SimDevice};

use super::{HEADER, Rng, grid, load};

/// A block's sum of `%ntid.x` (a power of two, at most 1024) `f64`s by a pairwise tree in
/// shared memory: `sh[t] += sh[t + s]` for `s` = `ntid/2`, `ntid/4`, ... 1, a barrier
/// between levels; elements past `n` count as 0. Block `b`'s sum goes to `out[b]`.
fn block_sum() -> String {
    format!(
        "{HEADER}
.visible .entry block_sum(.param .u64 x, .param .u64 out, .param .u64 n)
.maxntid 1024, 1, 1
{{
    .reg .u64 %rd<12>;
    .reg .u32 %r<6>;
    .reg .f64 %fd<4>;
    .reg .pred %p<4>;
    .shared .align 8 .b8 weft_sh[8192];

    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [out];
    ld.param.u64 %rd3, [n];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mul.wide.u32 %rd4, %r2, %r3;
    cvt.u64.u32 %rd5, %r1;
    add.s64 %rd4, %rd4, %rd5;
    mov.f64 %fd1, 0d0000000000000000;
    setp.ge.u64 %p1, %rd4, %rd3;
    @%p1 bra $put;
    shl.b64 %rd6, %rd4, 3;
    add.s64 %rd6, %rd1, %rd6;
    ld.global.f64 %fd1, [%rd6];
$put:
    mov.u64 %rd7, weft_sh;
    shl.b64 %rd8, %rd5, 3;
    add.s64 %rd8, %rd7, %rd8;
    st.shared.f64 [%rd8], %fd1;
    bar.sync 0;
    shr.u32 %r4, %r3, 1;
$level:
    setp.eq.u32 %p2, %r4, 0;
    @%p2 bra $done;
    setp.ge.u32 %p3, %r1, %r4;
    @%p3 bra $wait;
    mul.wide.u32 %rd9, %r4, 8;
    add.s64 %rd9, %rd8, %rd9;
    ld.shared.f64 %fd2, [%rd8];
    ld.shared.f64 %fd3, [%rd9];
    add.rn.f64 %fd2, %fd2, %fd3;
    st.shared.f64 [%rd8], %fd2;
$wait:
    barrier.sync 0;
    shr.u32 %r4, %r4, 1;
    bra.uni $level;
$done:
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $end;
    ld.shared.f64 %fd1, [weft_sh];
    mul.wide.u32 %rd10, %r2, 8;
    add.s64 %rd10, %rd2, %rd10;
    st.global.f64 [%rd10], %fd1;
$end:
    ret;
}}
"
    )
}

/// What [`block_sum`] computes for one block: the same pairwise tree.
fn tree_sum(xs: &[f64], threads: usize) -> f64 {
    let mut v = xs.to_vec();
    v.resize(threads, 0.0);
    let mut s = threads / 2;
    while s > 0 {
        for i in 0..s {
            v[i] += v[i + s];
        }
        s /= 2;
    }
    v[0]
}

/// `n` values of mixed magnitudes and signs, so that the order of a sum shows.
fn mixed(n: usize, seed: u64) -> Vec<f64> {
    let mut r = Rng(seed);
    (0..n)
        .map(|_| {
            let mag = (r.next() % 40) as i32 - 20;
            let x = (r.next() >> 11) as f64 / (1u64 << 53) as f64 * 2f64.powi(mag);
            if r.next().is_multiple_of(2) { x } else { -x }
        })
        .collect()
}

fn to_bytes(xs: &[f64]) -> Vec<u8> {
    xs.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn words(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// [`block_sum`] over `xs` in blocks of `threads`: each block's sum.
fn run_block_sum(dev: &mut SimDevice, xs: &[f64], threads: u32) -> Vec<f64> {
    let f = load(dev, &block_sum(), "block_sum");
    let blocks = xs.len().div_ceil(threads as usize);
    let px = dev.alloc(8 * xs.len() as u64).unwrap();
    let out = dev.alloc(8 * blocks as u64).unwrap();
    dev.write(px, &to_bytes(xs)).unwrap();
    dev.launch(
        &f,
        grid(blocks as u32, threads),
        &[px, out, xs.len() as u64],
    )
    .unwrap();
    let mut got = vec![0u8; 8 * blocks];
    dev.read(out, &mut got).unwrap();
    dev.free(px);
    dev.free(out);
    words(&got).into_iter().map(f64::from_bits).collect()
}

#[test]
fn a_block_reduction_in_shared_memory_matches_a_pairwise_tree_bit_for_bit() {
    let mut dev = SimDevice::new();
    for (n, threads) in [(5 * 1024 + 300, 1024u32), (3000, 256), (64, 64), (1, 32)] {
        let xs = mixed(n, n as u64 + 1);
        let got = run_block_sum(&mut dev, &xs, threads);
        let mut differs = false;
        for (b, chunk) in xs.chunks(threads as usize).enumerate() {
            let want = tree_sum(chunk, threads as usize);
            assert_eq!(
                got[b].to_bits(),
                want.to_bits(),
                "{n} in blocks of {threads}: block {b}: got {}, want {want}",
                got[b]
            );
            differs |= chunk.iter().sum::<f64>().to_bits() != want.to_bits();
        }
        // The data tells the tree from a left-to-right sum.
        assert!(differs || n < 1000, "{n}: every block's sum is order-free");
    }
    dev.synchronize().unwrap();
}

/// Each thread reads its slot of a module-scope array (as `.u64`) and of an entry-scope one
/// (as `.s32` into a 64-bit register) before it writes them, and stores what it read.
fn read_before_write() -> String {
    format!(
        "{HEADER}
.shared .align 8 .u64 weft_a[128];

.visible .entry dirty(.param .u64 out)
.maxntid 128, 1, 1
{{
    .reg .u64 %rd<10>;
    .reg .u32 %r<4>;
    .reg .s64 %s;
    .shared .align 4 .b8 weft_b[512];

    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r3, %r2, %r3, %r1;
    mul.wide.u32 %rd2, %r3, 16;
    add.s64 %rd2, %rd1, %rd2;
    mul.wide.u32 %rd3, %r1, 8;
    mov.u64 %rd4, weft_a;
    add.s64 %rd4, %rd4, %rd3;
    ld.shared.u64 %rd5, [%rd4];
    st.global.u64 [%rd2], %rd5;
    mov.u32 %r2, weft_b;
    mad.lo.s32 %r2, %r1, 4, %r2;
    ld.shared.s32 %s, [%r2];
    st.global.s64 [%rd2+8], %s;
    st.shared.u64 [%rd4], 0;
    st.shared.u32 [%r2], 0;
    ret;
}}
"
    )
}

#[test]
fn shared_memory_starts_dirty_in_every_block() {
    let mut dev = SimDevice::new();
    let f = load(&mut dev, &read_before_write(), "dirty");
    let (blocks, threads) = (3u32, 128u32);
    let n = (blocks * threads) as u64;
    let out = dev.alloc(16 * n).unwrap();
    dev.memset_zero(out, 16 * n).unwrap();
    dev.launch(&f, grid(blocks, threads), &[out]).unwrap();
    let mut got = vec![0u8; 16 * n as usize];
    dev.read(out, &mut got).unwrap();
    // Each block finds the pattern again, not the zeros the one before it left.
    for (i, w) in words(&got).chunks(2).enumerate() {
        assert_eq!(w[0], 0xA5A5_A5A5_A5A5_A5A5, "thread {i}: the .u64 load");
        assert_eq!(
            w[1], 0xFFFF_FFFF_A5A5_A5A5,
            "thread {i}: the .s32 load, extended"
        );
    }
}

#[test]
fn arrays_lie_in_declaration_order_at_their_alignment_and_padding_is_no_array() {
    let ptx = format!(
        "{HEADER}
.shared .align 4 .b8 weft_unused[64];
.shared .align 16 .b8 weft_m[4];

.visible .entry layout(.param .u64 out)
{{
    .reg .u64 %rd<6>;
    .reg .u32 %r1;
    .shared .u8 weft_a[3];
    .shared .align 8 .f64 weft_b[2];
    .shared .u16 weft_c[2][3];
    .shared .u32 weft_d;

    ld.param.u64 %rd1, [out];
    mov.u64 %rd2, weft_m;
    st.global.u64 [%rd1], %rd2;
    mov.u64 %rd2, weft_a;
    st.global.u64 [%rd1+8], %rd2;
    mov.u64 %rd2, weft_b;
    st.global.u64 [%rd1+16], %rd2;
    mov.u64 %rd2, weft_c;
    st.global.u64 [%rd1+24], %rd2;
    mov.u32 %r1, weft_d;
    st.global.u32 [%rd1+32], %r1;
    st.shared.u32 [weft_d], 77;
    ld.shared.u32 %r1, [weft_d];
    st.global.u32 [%rd1+36], %r1;
    st.shared.u16 [weft_c+10], 5;
    ret;
}}
"
    );
    let mut dev = SimDevice::new();
    let f = load(&mut dev, &ptx, "layout");
    let out = dev.alloc(40).unwrap();
    dev.launch(&f, grid(1, 1), &[out]).unwrap();
    let mut got = [0u8; 40];
    dev.read(out, &mut got).unwrap();
    let w = words(&got);
    // The module's array the entry names (not the one it does not), then its own.
    assert_eq!(&w[..4], &[0x1000, 0x1004, 0x1008, 0x1018]);
    assert_eq!(w[4], (77 << 32) | 0x1024);
    check_ptx("layout", &ptx);

    // The bytes between `weft_a` and `weft_b` belong to neither.
    let poke = ptx.replace(
        "st.shared.u16 [weft_c+10], 5;",
        "st.shared.u8 [weft_a+3], 5;",
    );
    let f = load(&mut dev, &poke, "layout");
    match dev.launch(&f, grid(1, 1), &[out]) {
        Err(Error::DeviceLost(m)) => assert!(
            m.contains("a shared store of 1 bytes at 0x1007, outside every shared array")
                && m.contains("(the entry's shared arrays lie at 0x1000..0x1028)"),
            "{m}"
        ),
        r => panic!("{r:?}"),
    }
}

#[test]
fn a_shared_access_outside_its_arrays_loses_the_context() {
    for (inst, want) in [
        (
            "ld.shared.f64 %fd1, [%rd2+8192];",
            "a shared load of 8 bytes at 0x3000, outside every shared array",
        ),
        (
            "ld.shared.f64 %fd1, [%rd2+8188];",
            "a shared load of 8 bytes at 0x2ffc, misaligned",
        ),
        (
            "ld.shared.u64 %rd3, [%rd2+8184];\n    ld.shared.u32 %r1, [%rd2+8190];",
            "a shared load of 4 bytes at 0x2ffe, misaligned",
        ),
        (
            "mov.u64 %rd3, 0;\n    st.shared.f64 [%rd3], %fd1;",
            "a shared store of 8 bytes at 0x0, outside every shared array",
        ),
        (
            "st.shared.u64 [%rd1], %rd1;",
            "a shared store of 8 bytes at 0x7f",
        ),
        (
            "atom.shared.add.u32 %r1, [%rd2+8192], 1;",
            "a shared atomic of 4 bytes at 0x3000",
        ),
    ] {
        let ptx = format!(
            "{HEADER}
.visible .entry oob(.param .u64 p)
.maxntid 64, 1, 1
{{
    .reg .u64 %rd<4>;
    .reg .u32 %r1;
    .reg .f64 %fd1;
    .reg .pred %p1;
    .shared .align 8 .b8 weft_sh[8192];
    ld.param.u64 %rd1, [p];
    mov.u64 %rd2, weft_sh;
    mov.f64 %fd1, 0d3FF0000000000000;
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p1, %r1, 5;
    bar.sync 0;
    @%p1 bra $end;
    {inst}
$end:
    ret;
}}
"
        );
        check_ptx("oob", &ptx);
        let ctx = SimContext::new();
        let mut dev = ctx.device();
        let f = load(&mut dev, &ptx, "oob");
        let buf = dev.alloc(8).unwrap();
        let Err(Error::DeviceLost(m)) = dev.launch(&f, grid(3, 64), &[buf]) else {
            panic!("{inst}: the access must lose the context");
        };
        let last = inst.lines().last().unwrap();
        let line = ptx.lines().position(|l| l.contains(last)).unwrap() + 1;
        assert!(
            m.contains("kernel `test`: entry `oob`: an illegal memory access")
                && m.contains(want)
                && m.contains(&format!(
                    "(thread (5, 0, 0) of block (0, 0, 0), line {line})"
                )),
            "{inst}: {m}"
        );
        // The context is lost for every device on it.
        assert!(matches!(
            ctx.device().synchronize(),
            Err(Error::DeviceLost(_))
        ));
    }
    // Past the end of an array, by name.
    let ptx = format!(
        "{HEADER}
.visible .entry past()
{{
    .reg .u64 %rd1;
    .shared .align 8 .b8 weft_x[16];
    .shared .align 2 .b8 weft_y[6];
    mov.u64 %rd1, weft_y;
    st.shared.u32 [%rd1+4], 1;
    ret;
}}
"
    );
    check_ptx("past", &ptx);
    let mut dev = SimDevice::new();
    let f = load(&mut dev, &ptx, "past");
    match dev.launch(&f, grid(1, 1), &[]) {
        Err(Error::DeviceLost(m)) => assert!(
            m.contains(
                "a shared store of 4 bytes at 0x1014, past the end of the shared array \
                 `weft_y` of 6 bytes at 0x1010"
            ),
            "{m}"
        ),
        r => panic!("{r:?}"),
    }
}

/// Every thread writes its slot, waits at the barrier, and reads its neighbour's (the next
/// thread's, in a block of `(32, 4)` threads): which it sees only if the block runs in
/// lockstep. Odd threads of the second kind end before the barrier, and must not hold the
/// even ones up.
fn neighbours() -> String {
    format!(
        "{HEADER}
.visible .entry next(.param .u64 out)
.reqntid 32, 4, 1
{{
    .reg .u64 %rd<6>;
    .reg .u32 %r<10>;
    .shared .align 4 .u32 weft_sh[128];

    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, %tid.y;
    mov.u32 %r3, %ntid.x;
    mad.lo.s32 %r4, %r2, %r3, %r1;
    mov.u32 %r5, %ctaid.x;
    mad.lo.s32 %r6, %r4, 3, %r5;
    mov.u32 %r7, weft_sh;
    shl.b32 %r8, %r4, 2;
    add.s32 %r8, %r7, %r8;
    st.shared.u32 [%r8], %r6;
    bar.sync 0;
    add.s32 %r9, %r4, 1;
    and.b32 %r9, %r9, 127;
    shl.b32 %r9, %r9, 2;
    add.s32 %r9, %r7, %r9;
    ld.shared.u32 %r6, [%r9];
    mad.lo.s32 %r5, %r5, 128, %r4;
    mul.wide.u32 %rd2, %r5, 4;
    add.s64 %rd2, %rd1, %rd2;
    st.global.u32 [%rd2], %r6;
    ret;
}}

.visible .entry early(.param .u64 out)
.maxntid 64, 1, 1
{{
    .reg .u64 %rd<3>;
    .reg .u32 %r<6>;
    .reg .pred %p1;
    .shared .align 4 .u32 weft_sh[64];

    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    and.b32 %r2, %r1, 1;
    setp.ne.u32 %p1, %r2, 0;
    @%p1 bra $end;
    mov.u32 %r3, weft_sh;
    mad.lo.s32 %r4, %r1, 4, %r3;
    add.s32 %r5, %r1, 100;
    st.shared.u32 [%r4], %r5;
    bar.sync 0;
    add.s32 %r5, %r1, 2;
    and.b32 %r5, %r5, 63;
    mad.lo.s32 %r4, %r5, 4, %r3;
    ld.shared.u32 %r5, [%r4];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd2, %rd1, %rd2;
    st.global.u32 [%rd2], %r5;
    bar.sync 0;
$end:
    ret;
}}
"
    )
}

#[test]
fn a_barrier_runs_the_block_in_lockstep() {
    let mut dev = SimDevice::new();
    let ptx = neighbours();
    let f = load(&mut dev, &ptx, "next");
    let blocks = 3u32;
    let out = dev.alloc(4 * 128 * u64::from(blocks)).unwrap();
    let g = Grid {
        blocks: [blocks, 1, 1],
        threads: [32, 4, 1],
    };
    dev.launch(&f, g, &[out]).unwrap();
    let mut got = vec![0u8; 4 * 128 * blocks as usize];
    dev.read(out, &mut got).unwrap();
    for (i, c) in got.chunks(4).enumerate() {
        let (b, t) = (i as u32 / 128, i as u32 % 128);
        let want = ((t + 1) % 128) * 3 + b;
        assert_eq!(
            u32::from_le_bytes(c.try_into().unwrap()),
            want,
            "block {b}, thread {t}"
        );
    }

    let f = load(&mut dev, &ptx, "early");
    let out = dev.alloc(4 * 64).unwrap();
    dev.memset_zero(out, 4 * 64).unwrap();
    dev.launch(&f, grid(2, 64), &[out]).unwrap();
    let mut got = vec![0u8; 4 * 64];
    dev.read(out, &mut got).unwrap();
    for (t, c) in got.chunks(4).enumerate() {
        let want = if t % 2 == 0 {
            (t as u32 + 2) % 64 + 100
        } else {
            0
        };
        assert_eq!(
            u32::from_le_bytes(c.try_into().unwrap()),
            want,
            "thread {t}"
        );
    }
    dev.synchronize().unwrap();
}

#[test]
fn the_step_limit_counts_across_barriers() {
    let ptx = format!(
        "{HEADER}
.visible .entry spin()
.maxntid 32, 1, 1
{{
$top:
    bar.sync 0;
    bra.uni $top;
}}
"
    );
    check_ptx("spin", &ptx);
    let mut dev = SimContext::with_step_limit(10_000).device();
    let f = load(&mut dev, &ptx, "spin");
    match dev.launch(&f, grid(2, 32), &[]) {
        Err(Error::KernelFault { message, .. }) => assert!(
            message.contains("step limit of 10000")
                && message.contains("thread (0, 0, 0) of block (0, 0, 0)"),
            "{message}"
        ),
        r => panic!("{r:?}"),
    }
    dev.synchronize().unwrap();
}

#[test]
fn a_block_of_register_files_too_large_is_refused_at_launch() {
    let ptx = format!(
        "{HEADER}.visible .entry big()\n{{\n    .reg .b64 %r<40000>;\n    bar.sync 0;\n    ret;\n}}\n"
    );
    let mut dev = SimDevice::new();
    let f = load(&mut dev, &ptx, "big");
    match dev.launch(&f, grid(1, 1024), &[]) {
        Err(Error::Driver(m)) => assert!(m.contains("too many resources"), "{m}"),
        r => panic!("{r:?}"),
    }
    dev.launch(&f, grid(2, 512), &[]).unwrap();
}

#[test]
fn shared_atomics_combine_the_block() {
    let ptx = format!(
        "{HEADER}
.visible .entry count(.param .u64 out)
.maxntid 256, 1, 1
{{
    .reg .u64 %rd<3>;
    .reg .u32 %r<4>;
    .reg .pred %p1;
    .shared .align 4 .u32 weft_n[2];

    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra $go;
    st.shared.u32 [weft_n], 0;
    st.shared.u32 [weft_n+4], 0;
$go:
    bar.sync 0;
    atom.shared.add.u32 %r2, [weft_n], 1;
    red.shared.max.u32 [weft_n+4], %r1;
    bar.sync 0;
    @%p1 bra $end;
    ld.shared.u32 %r2, [weft_n];
    ld.shared.u32 %r3, [weft_n+4];
    mov.u32 %r1, %ctaid.x;
    mul.wide.u32 %rd2, %r1, 8;
    add.s64 %rd2, %rd1, %rd2;
    st.global.u32 [%rd2], %r2;
    st.global.u32 [%rd2+4], %r3;
$end:
    ret;
}}
"
    );
    let mut dev = SimDevice::new();
    let f = load(&mut dev, &ptx, "count");
    let out = dev.alloc(16).unwrap();
    dev.launch(&f, grid(2, 200), &[out]).unwrap();
    let mut got = [0u8; 16];
    dev.read(out, &mut got).unwrap();
    let w: Vec<u32> = got
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(w, [200, 199, 200, 199]);
    check_ptx("count", &ptx);
}

/// Assembles `ptx` with `ptxas` for `sm_80` and `sm_90`, when `ptxas` is found.
fn check_ptx(name: &str, ptx: &str) {
    let Ok(ptxas) = weft_ptx::ptxas::find() else {
        return;
    };
    for arch in ["sm_80", "sm_90"] {
        weft_ptx::ptxas::assemble_with(&ptxas, ptx, arch, name).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn the_hand_written_modules_are_valid_ptx() {
    check_ptx("block_sum", &block_sum());
    check_ptx("read_before_write", &read_before_write());
    check_ptx("neighbours", &neighbours());
}

#[test]
fn no_prefix_of_a_shared_module_panics() {
    let mut dev = SimDevice::new();
    for ptx in [block_sum(), neighbours(), read_before_write()] {
        let chars: Vec<(usize, char)> = ptx.char_indices().collect();
        for &(at, _) in chars.iter().step_by(5) {
            let _ = dev.load("cut", &ptx[..at], &["next".to_string()]);
            let mangled = format!("{}[{}", &ptx[..at], &ptx[at..]);
            let _ = dev.load("mangled", &mangled, &["next".to_string()]);
        }
    }
}
