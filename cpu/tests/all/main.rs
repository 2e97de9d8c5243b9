//! The integration tests of `weft-cpu`, in one test binary: the public API, AVX-512 bodies,
//! errors, loops, lowered math, operators, reductions and vector code, each against an
//! independent reference.

mod api;
mod avx512;
mod deferred;
mod errors;
mod loops;
#[path = "../../../ir/tests/all/common/math_cases.rs"]
mod math_cases;
mod math_lowered;
mod ops;
mod paths;
mod reduce;
mod simd;
mod util;
