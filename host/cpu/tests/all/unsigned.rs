//! The unsigned storage types (`u8` .. `u64`): loads zero-extend to `i64` values, stores keep
//! the low bits of the width; checked against Rust's own unsigned arithmetic, on one and two
//! threads, with the body both alone (where the vector paths would take it, were the stores
//! signed) and after a signed loop.

use weft_ir::{BinaryOp, CmpOp, DType, Privilege};

use crate::util::{Kb, compile, dense, run_on};

/// `o8 = a + 200`, `wide = a`, `o16 = b * b`, `o32 = c * 3 + 1`, `o64 = d + d`,
/// `big = d > 2^62` (a signed comparison of the loaded bits: true only below 2^63), and
/// `o32b = d` (the low 32 bits).
fn kernel() -> weft_ir::Kernel {
    let mut k = Kb::new();
    let a = k.store(DType::U8, 1, Privilege::Read);
    let b = k.store(DType::U16, 1, Privilege::Read);
    let c = k.store(DType::U32, 1, Privilege::Read);
    let d = k.store(DType::U64, 1, Privilege::Read);
    let o8 = k.store(DType::U8, 1, Privilege::Write);
    let wide = k.store(DType::I64, 1, Privilege::Write);
    let o16 = k.store(DType::U16, 1, Privilege::Write);
    let o32 = k.store(DType::U32, 1, Privilege::Write);
    let o64 = k.store(DType::U64, 1, Privilege::Write);
    let big = k.store(DType::Bool, 1, Privilege::Write);
    let o32b = k.store(DType::U32, 1, Privilege::Write);
    k.parallel(o8, 1, |k, ix| {
        let i = ix[0];
        let x = k.load(a, &[i]);
        let c200 = k.i64(200);
        let s = k.add(x, c200);
        k.store_to(o8, &[i], s);
        k.store_to(wide, &[i], x);
        let y = k.load(b, &[i]);
        let yy = k.mul(y, y);
        k.store_to(o16, &[i], yy);
        let z = k.load(c, &[i]);
        let three = k.i64(3);
        let one = k.i64(1);
        let z3 = k.mul(z, three);
        let z31 = k.add(z3, one);
        k.store_to(o32, &[i], z31);
        let w = k.load(d, &[i]);
        let ww = k.bin(BinaryOp::Add, w, w);
        k.store_to(o64, &[i], ww);
        let lim = k.i64(1 << 62);
        let gt = k.cmp(CmpOp::Gt, w, lim);
        k.store_to(big, &[i], gt);
        k.store_to(o32b, &[i], w);
    });
    k.finish("unsigned")
}

#[test]
fn unsigned_stores_load_zero_extended_and_store_their_low_bits() {
    weft_ir::validate(&kernel()).expect("valid");
    let compiled = compile(&kernel());
    let n = 1003usize;
    let a: Vec<u8> = (0..n).map(|i| (i * 37 % 256) as u8).collect();
    let b: Vec<u16> = (0..n).map(|i| (i * 7919 % 65536) as u16).collect();
    let c: Vec<u32> = (0..n).map(|i| u32::MAX - (i as u32) * 123_457).collect();
    let d: Vec<u64> = (0..n)
        .map(|i| (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
        .collect();
    for threads in [1, 2] {
        let (mut a, mut b, mut c, mut d) = (a.clone(), b.clone(), c.clone(), d.clone());
        let mut o8 = vec![0u8; n];
        let mut wide = vec![0i64; n];
        let mut o16 = vec![0u16; n];
        let mut o32 = vec![0u32; n];
        let mut o64 = vec![0u64; n];
        let mut big = vec![0u8; n];
        let mut o32b = vec![0u32; n];
        let e = [n as i64];
        let views = [
            dense(&mut a, &e),
            dense(&mut b, &e),
            dense(&mut c, &e),
            dense(&mut d, &e),
            dense(&mut o8, &e),
            dense(&mut wide, &e),
            dense(&mut o16, &e),
            dense(&mut o32, &e),
            dense(&mut o64, &e),
            dense(&mut big, &e),
            dense(&mut o32b, &e),
        ];
        run_on(&compiled, &views, &[], threads).expect("runs");
        for i in 0..n {
            assert_eq!(o8[i], a[i].wrapping_add(200), "u8 at {i}");
            assert_eq!(wide[i], i64::from(a[i]), "zero-extended at {i}");
            assert_eq!(o16[i], b[i].wrapping_mul(b[i]), "u16 at {i}");
            assert_eq!(o32[i], c[i].wrapping_mul(3).wrapping_add(1), "u32 at {i}");
            assert_eq!(o64[i], d[i].wrapping_add(d[i]), "u64 at {i}");
            assert_eq!(big[i], u8::from((d[i] as i64) > (1 << 62)), "bits at {i}");
            assert_eq!(o32b[i], d[i] as u32, "low bits at {i}");
        }
    }
}
