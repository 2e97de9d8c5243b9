//! Global memory: illegal addresses lose the context for every device on it, fresh memory
//! is dirty, freed memory is pooled.

use weft_ptx::Error;
use weft_ptx::device::Device;
use weft_ptx::sim::{SimContext, SimDevice};

use super::{HEADER, grid, load};

/// A module whose one thread does `inst` at `[%p + off]` from its parameter `p`.
fn access_module(inst: &str) -> String {
    format!(
        "{HEADER}.visible .entry poke(.param .u64 p)\n{{\n    .reg .u64 %p, %v;\n    .reg .b32 %w;\n    \
         ld.param.u64 %p, [p];\n    {inst}\n    ret;\n}}\n"
    )
}

#[test]
fn an_illegal_address_loses_the_context_for_every_device() {
    let ctx = SimContext::new();
    let mut dev = ctx.device();
    let buf = dev.alloc(64).unwrap();
    let f = load(
        &mut dev,
        &access_module("ld.global.u32 %w, [%p+64];"),
        "poke",
    );
    let Err(Error::DeviceLost(msg)) = dev.launch(&f, grid(1, 1), &[buf]) else {
        panic!("an out-of-bounds read must lose the device");
    };
    let addr = format!("0x{:x}", buf + 64);
    assert!(
        msg.contains("`test`") && msg.contains("`poke`") && msg.contains(&addr),
        "{msg}"
    );
    assert!(
        msg.contains("a load of 4 bytes") && msg.contains("outside every allocation"),
        "{msg}"
    );
    // Sticky: every later call of every device on the context.
    let mut other = ctx.device();
    let same = |r: Result<(), Error>| match r {
        Err(Error::DeviceLost(m)) => assert_eq!(m, msg),
        r => panic!("expected the sticky error, got {r:?}"),
    };
    same(other.alloc(8).map(drop));
    same(other.synchronize());
    same(dev.write(buf, &[1]));
    same(other.read(buf, &mut [0]));
    same(other.launch(&f, grid(1, 1), &[buf]));
    same(other.load("x", HEADER, &[]).map(drop));
    other.free(buf);
    assert_eq!(ctx.lost(), Some(msg));
    // Another context still works.
    let mut fresh = SimDevice::new();
    let b = fresh.alloc(64).unwrap();
    let f = load(
        &mut fresh,
        &access_module("ld.global.u32 %w, [%p+60];"),
        "poke",
    );
    fresh.launch(&f, grid(1, 1), &[b]).unwrap();
    fresh.synchronize().unwrap();
}

#[test]
fn misaligned_and_unallocated_accesses_are_illegal() {
    for (inst, want) in [
        ("st.global.u64 [%p+4], %v;", "misaligned"),
        ("ld.global.u64 %v, [%p+-8];", "outside every allocation"),
        ("atom.global.add.u32 %w, [%p+2], 1;", "misaligned"),
        ("ld.global.u64 %v, [0];", "outside every allocation"),
        (
            "st.global.u64 [%p+256], %v;",
            "past the end of the allocation of 260 bytes",
        ),
    ] {
        let mut dev = SimDevice::new();
        let buf = dev.alloc(260).unwrap();
        let f = load(&mut dev, &access_module(inst), "poke");
        match dev.launch(&f, grid(1, 1), &[buf]) {
            Err(Error::DeviceLost(m)) => assert!(m.contains(want), "{inst}: {m}"),
            r => panic!("{inst}: {r:?}"),
        }
    }
}

#[test]
fn memory_is_dirty_pooled_and_bounded() {
    let ctx = SimContext::new();
    let (mut a, mut b) = (ctx.device(), ctx.device());
    let p = a.alloc(1000).unwrap();
    assert_eq!(p % 256, 0);
    let mut out = vec![0u8; 1000];
    a.read(p, &mut out).unwrap();
    assert!(out.iter().all(|&x| x != 0), "fresh memory must not be zero");
    let data: Vec<u8> = (0..1000).map(|i| (i % 251) as u8).collect();
    a.write(p, &data).unwrap();
    a.free(p);
    let q = b.alloc(1000).unwrap();
    assert_eq!(
        q, p,
        "an allocation of the same size reuses the freed range"
    );
    b.read(q, &mut out).unwrap();
    assert_eq!(out, data, "with its old bytes");
    // Copies and zeroing within and between allocations.
    let r = b.alloc(16).unwrap();
    b.copy(r, q + 8, 16).unwrap();
    b.memset_zero(q, 8).unwrap();
    let mut w = [0u8; 16];
    b.read(r, &mut w).unwrap();
    assert_eq!(&w[..], &data[8..24]);
    b.read(q, &mut w).unwrap();
    assert_eq!(&w[..8], &[0; 8]);
    assert!(b.wait_for(std::time::Duration::ZERO).unwrap());
    // Reading past the end is an illegal address.
    assert!(matches!(
        b.read(r + 8, &mut [0; 9]),
        Err(Error::DeviceLost(_))
    ));
    assert!(matches!(a.alloc(8), Err(Error::DeviceLost(_))));
}

/// Narrow unsigned accesses, as the emitter writes them for the unsigned storage types:
/// `ld.global.u8`, `.u16` and `.u32` into a register of 16 or 32 bits, then `cvt.u64`,
/// zero-extend (a byte of `0xff` is 255, not -1); `cvt.u16.u64` and `cvt.u32.u64` keep the
/// low bits, and `st.global.u8`, `.u16` and `.u32` write only their own bytes.
#[test]
fn narrow_unsigned_accesses_zero_extend_and_write_only_their_bytes() {
    let ptx = format!(
        "{HEADER}.visible .entry narrow(.param .u64 p)\n{{\n    \
         .reg .u64 %p, %x, %y, %z, %v;\n    .reg .u16 %b, %h;\n    .reg .u32 %w;\n    \
         ld.param.u64 %p, [p];\n    \
         ld.global.u8 %b, [%p+1];\n    cvt.u64.u16 %x, %b;\n    st.global.u64 [%p+16], %x;\n    \
         ld.global.u16 %h, [%p+2];\n    cvt.u64.u16 %y, %h;\n    st.global.u64 [%p+24], %y;\n    \
         ld.global.u32 %w, [%p+4];\n    cvt.u64.u32 %z, %w;\n    st.global.u64 [%p+32], %z;\n    \
         ld.global.u64 %v, [%p+8];\n    \
         cvt.u16.u64 %b, %v;\n    st.global.u8 [%p+40], %b;\n    \
         cvt.u16.u64 %h, %v;\n    st.global.u16 [%p+42], %h;\n    \
         cvt.u32.u64 %w, %v;\n    st.global.u32 [%p+44], %w;\n    ret;\n}}\n"
    );
    let mut dev = SimDevice::new();
    let buf = dev.alloc(48).unwrap();
    let mut bytes = vec![0x5a_u8; 48];
    bytes[..8].copy_from_slice(&[0x11, 0xff, 0x34, 0xf2, 0xf4, 0x03, 0x02, 0x81]);
    bytes[8..16].copy_from_slice(&0xfedc_ba98_7654_3210_u64.to_le_bytes());
    dev.write(buf, &bytes).unwrap();
    let f = load(&mut dev, &ptx, "narrow");
    dev.launch(&f, grid(1, 1), &[buf]).unwrap();
    let mut got = vec![0u8; 48];
    dev.read(buf, &mut got).unwrap();
    let word = |at: usize| u64::from_le_bytes(got[at..at + 8].try_into().unwrap());
    assert_eq!(word(16), 0xff);
    assert_eq!(word(24), 0xf234);
    assert_eq!(word(32), 0x8102_03f4);
    assert_eq!(got[40], 0x10);
    assert_eq!(got[41], 0x5a, "a byte's store leaves the next byte");
    assert_eq!(got[42..44], [0x10, 0x32]);
    assert_eq!(got[44..48], [0x10, 0x32, 0x54, 0x76]);
    assert_eq!(got[..16], bytes[..16]);
}
