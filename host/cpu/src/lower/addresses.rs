//! Fixed addresses of this process that compiled code reads (the cancel flag, constant
//! tables), as symbols of the JIT module rather than constants in the code.
//!
//! A constant address would make each function's Cranelift IR differ from process to process
//! (and from kernel to kernel, for tables), so no compiled function could be reused from the
//! code cache ([`crate::function_cache`]). A symbol's name lives outside the IR that the cache
//! hashes, and the module resolves it when it is finalized: the symbol
//! `weft.address.<hex>` is the address `<hex>` itself ([`address_symbol`]), and the code is
//! the same `movabs` of a 64-bit immediate that a constant gives.

use cranelift_codegen::ir::{InstBuilder, Value};
use cranelift_module::{Linkage, Module};

use super::{FnLower, LResult};

/// The prefix of the names of address symbols.
const PREFIX: &str = "weft.address.";

/// The address that the symbol `name` stands for, if it is an address symbol (the JIT
/// module's lookup of imported symbols).
pub(crate) fn address_symbol(name: &str) -> Option<*const u8> {
    let hex = name.strip_prefix(PREFIX)?;
    let address = usize::from_str_radix(hex, 16).ok()?;
    Some(std::ptr::with_exposed_provenance(address))
}

impl FnLower<'_, '_> {
    /// The value `address`, read from a symbol of the module (declared once per function).
    pub(super) fn fixed_address(&mut self, address: u64) -> LResult<Value> {
        let gv = match self.addresses.get(&address) {
            Some(&gv) => gv,
            None => {
                let name = format!("{PREFIX}{address:x}");
                let id = self
                    .module
                    .declare_data(&name, Linkage::Import, false, false)
                    .map_err(|e| format!("declare {name}: {e}"))?;
                let gv = self.module.declare_data_in_func(id, self.b.func);
                self.addresses.insert(address, gv);
                gv
            }
        };
        Ok(self.b.ins().symbol_value(self.ptr_ty, gv))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_symbol_names_its_address_and_nothing_else_is_one() {
        let p = address_symbol("weft.address.7f00dead0010").expect("an address symbol");
        assert_eq!(p.addr(), 0x7f00_dead_0010);
        assert!(address_symbol("weft.address.xyz").is_none());
        assert!(address_symbol("exp").is_none());
    }
}
