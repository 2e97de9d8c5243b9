//! A hostile application for the host's tests: it passes a store handle it was never given.

use weft_app::bindings::weft::plugin::host::Store;

fn main() {
    // SAFETY: none, on purpose: this handle index names nothing in this component's table,
    // and the host must refuse it (the component model traps on an unknown handle).
    let forged = unsafe { Store::from_handle(4242) };
    let shape = forged.shape();
    println!("{shape:?}");
}
