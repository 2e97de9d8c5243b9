//! The code paths of vectorized loops, from narrowest to widest, and which this CPU can run:
//! what `WEFT_SIMD` (and [`crate::CpuOptions::simd`]) choose between, so that every path can
//! be tested and measured on one machine. Every path gives the same bits, except for the
//! order of float `sum` and `prod` reductions into rank-0 stores between the scalar path and
//! the vector paths (see `weft_ir::semantics`).

use crate::lower::wide::Isa;

/// A code path for vectorized loops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SimdPath {
    /// Scalar code only.
    Scalar,
    /// 128-bit vectors (SSE on x86-64).
    Sse,
    /// 256-bit AVX2 bodies for the loops they take, 128-bit vectors for the rest.
    Avx2,
    /// 512-bit AVX-512 bodies for the loops they take, 128-bit vectors for the rest.
    Avx512,
}

impl SimdPath {
    /// Every path, narrowest first.
    pub const ALL: [SimdPath; 4] = [
        SimdPath::Scalar,
        SimdPath::Sse,
        SimdPath::Avx2,
        SimdPath::Avx512,
    ];

    /// The name `WEFT_SIMD` takes.
    pub fn name(self) -> &'static str {
        match self {
            SimdPath::Scalar => "scalar",
            SimdPath::Sse => "sse",
            SimdPath::Avx2 => "avx2",
            SimdPath::Avx512 => "avx512",
        }
    }

    /// Whether this CPU has the instructions the path needs (enabled by the operating
    /// system): every target the back end vectorizes for has 128-bit vectors (x86-64 and
    /// aarch64); the AVX2 and AVX-512 bodies run on x86-64 Unix.
    pub fn detected(self) -> bool {
        match self {
            SimdPath::Scalar => true,
            SimdPath::Sse => cfg!(any(target_arch = "x86_64", target_arch = "aarch64")),
            SimdPath::Avx2 => Isa::Avx2.detected(),
            SimdPath::Avx512 => Isa::Avx512.detected(),
        }
    }

    /// The path named `name` (as [`SimdPath::name`] writes it).
    pub fn from_name(name: &str) -> Option<SimdPath> {
        SimdPath::ALL.into_iter().find(|p| p.name() == name.trim())
    }
}

impl std::fmt::Display for SimdPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
