//! The integration tests of `weft-ir`, in one test binary: the text filetests, the flat form,
//! math lowering, parse errors, the passes, round trips and the validator's table.

mod common;
mod filetests;
mod flat;
mod interp_faults;
mod interp_support;
#[path = "common/math_cases.rs"]
mod math_cases;
mod math_lowering;
mod parse_errors;
mod passes;
mod reduction_order;
mod rem_lowering;
mod roundtrip;
mod validate_table;
