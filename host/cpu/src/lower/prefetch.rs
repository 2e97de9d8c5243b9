//! Software prefetches of the streams a short `for` loop reads.
//!
//! A CSR row reads `crd` and `vals` from `pos[i]` to `pos[i + 1]`: five entries per row of a
//! 2-D Poisson matrix, so each row starts two short runs of loads somewhere ahead of the last
//! row's. The hardware prefetchers follow such streams late. Where a `for` loop reads a rank-1
//! store of unit stride at its induction value, the loop's preheader therefore prefetches
//! that store [`AHEAD`] iterations past the loop's first one: the rows that follow read there.
//!
//! Measured before adopting it, on a 2-core AMD EPYC with AVX-512 (a scratch plain-Rust CSR
//! product with `p . q` over the 2000^2 Poisson matrix, each row prefetching `vals` and `crd`
//! 192 entries ahead, medians of 20 products alternating with the same loop without
//! prefetches, three runs): 0.88, 0.92 and 0.88x the time with 2 threads, 0.91, 0.90 and
//! 0.81x with 1. Prefetching both at the same distance in bytes (so `crd` twice as many
//! entries ahead) did worse.
//!
//! Cranelift has no prefetch instruction. The lowering emits a *marker* instead: a byte load
//! from the address to prefetch whose result is unused, with the trap code [`marker_flags`]
//! gives it (the trap keeps the load alive, and puts its offset in the trap table). Once
//! Cranelift has compiled the function, [`patch`] rewrites each marker in place:
//! `movzx r32, byte [m]` (`[REX] 0F B6 /r`) becomes `prefetcht0 [m]` (`[REX] 0F 18 /1`), of
//! the same length and with the same addressing bytes. A prefetch never faults, whatever the
//! address. A marker in any other form is a compile error: a marker never runs as a load.

use cranelift_codegen::MachTrap;
use cranelift_codegen::ir::{MemFlagsData, TrapCode};

use super::LResult;

/// How many iterations ahead of a loop's first one its streams are prefetched.
pub(crate) const AHEAD: i64 = 192;

/// The user trap code of markers. The lowering gives no other instruction a user trap code.
const MARKER_CODE: u8 = 77;

/// The flags of a marker load.
pub(crate) fn marker_flags() -> MemFlagsData {
    MemFlagsData::new().with_trap_code(TrapCode::user(MARKER_CODE))
}

/// Whether `code` is a marker's trap code.
fn is_marker(code: TrapCode) -> bool {
    TrapCode::user(MARKER_CODE) == Some(code)
}

/// Rewrites every marker of the compiled function `code` (its trap table `traps`) into a
/// prefetch; returns how many there were.
pub(crate) fn patch(code: &mut [u8], traps: &[MachTrap]) -> LResult<usize> {
    let mut patched = 0;
    for trap in traps.iter().filter(|t| is_marker(t.code)) {
        let at = trap.offset as usize;
        prefetch_in_place(code, at).map_err(|why| {
            format!("internal: the prefetch marker at offset {at} of a compiled function {why}")
        })?;
        patched += 1;
    }
    Ok(patched)
}

/// Rewrites the `movzx r32, byte [m]` at `code[at..]` into `prefetcht0 [m]`.
fn prefetch_in_place(code: &mut [u8], at: usize) -> Result<(), &'static str> {
    let get = |i: usize| code.get(i).copied().ok_or("runs past the code's end");
    let mut op = at;
    let rex = get(at)?;
    if rex & 0xf0 == 0x40 {
        op += 1;
    }
    if (get(op)?, get(op + 1)?) != (0x0f, 0xb6) {
        return Err("is not a `movzx` byte load");
    }
    let modrm = get(op + 2)?;
    if modrm >> 6 == 0b11 {
        return Err("reads a register, not memory");
    }
    if op > at {
        // REX.R and REX.W are the destination's; keep only the address's X and B bits.
        code[at] = 0x40 | (rex & 0x03);
    }
    code[op + 1] = 0x18;
    // `/1`: prefetcht0; the mod and r/m fields keep the address.
    code[op + 2] = (modrm & 0xc7) | (1 << 3);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte forms below, as `objdump -M intel` reads them before and after.
    #[test]
    fn markers_become_prefetches_of_the_same_address() {
        let cases: [(&[u8], &[u8]); 4] = [
            // movzx eax, BYTE PTR [rcx]  ->  prefetcht0 BYTE PTR [rcx]
            (&[0x0f, 0xb6, 0x01], &[0x0f, 0x18, 0x09]),
            // movzx r9d, BYTE PTR [r13+rax*8+0x600]  ->  prefetcht0 [r13+rax*8+0x600]
            (
                &[0x45, 0x0f, 0xb6, 0x8c, 0xc5, 0x00, 0x06, 0x00, 0x00],
                &[0x41, 0x0f, 0x18, 0x8c, 0xc5, 0x00, 0x06, 0x00, 0x00],
            ),
            // movzx esi, BYTE PTR [rbx+r14*4+0x300]  ->  prefetcht0 [rbx+r14*4+0x300]
            (
                &[0x42, 0x0f, 0xb6, 0xb4, 0xb3, 0x00, 0x03, 0x00, 0x00],
                &[0x42, 0x0f, 0x18, 0x8c, 0xb3, 0x00, 0x03, 0x00, 0x00],
            ),
            // movzx r10d, BYTE PTR [r11+0x10]  ->  prefetcht0 [r11+0x10]
            (
                &[0x45, 0x0f, 0xb6, 0x53, 0x10],
                &[0x41, 0x0f, 0x18, 0x4b, 0x10],
            ),
        ];
        for (before, after) in cases {
            let mut code = before.to_vec();
            assert_eq!(prefetch_in_place(&mut code, 0), Ok(()));
            assert_eq!(code, after, "{before:02x?}");
        }
    }

    #[test]
    fn anything_but_a_byte_load_from_memory_is_refused() {
        // movzx eax, cl (a register operand)
        assert!(prefetch_in_place(&mut [0x0f, 0xb6, 0xc1], 0).is_err());
        // mov eax, DWORD PTR [rcx]
        assert!(prefetch_in_place(&mut [0x8b, 0x01], 0).is_err());
        // cut short
        assert!(prefetch_in_place(&mut [0x45, 0x0f], 0).is_err());
    }
}
