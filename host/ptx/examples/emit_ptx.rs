//! Prints the PTX module of a kernel in `weft-ir`'s text form (math lowered first), as the
//! GPU back end emits it: `cargo run -p weft-ptx --example emit_ptx -- FILE.ir`.

use weft_ir::passes::math::lower_math;
use weft_ir::{ValidKernel, text};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).ok_or("usage: emit_ptx FILE.ir")?;
    let src = std::fs::read_to_string(&path)?;
    let kernel = text::parse(&src)?;
    let valid = ValidKernel::new(lower_math(&kernel)).map_err(|e| e.message)?;
    print!("{}", weft_ptx::emit(&valid)?.text);
    Ok(())
}
