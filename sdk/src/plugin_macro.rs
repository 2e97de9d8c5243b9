//! [`plugin!`](crate::plugin): a plugin's entry point in one invocation.

/// Declares a plugin: its bindings (its world, with the shared `weft:plugin` interfaces
/// mapped to this crate's), its type, and the `plugin` interface every plugin exports (its
/// name, its version from Cargo, and the kernel bodies, from a function of the key).
///
/// ```text
/// weft_sdk::plugin! {
///     plugin: Stats,                      // the type the exports are implemented on
///     name: "stats",                      // the name the host shows in errors and traces
///     wit: ["wit", "../weft/wit"],        // WIT paths (literals), as wit-bindgen takes them
///     world: "acme:stats/stats-plugin",   // a world that includes weft:plugin/plugin-base
///     kernels: kernels::body,             // fn(&str) -> Result<weft_sdk::ir::Kernel, String>
/// }
///
/// impl bindings::exports::acme::stats::stats::Guest for Stats { /* the plugin's own exports */ }
/// ```
///
/// The plugin crate depends on `weft-sdk` and `wit-bindgen`. `bindings` is the generated
/// module, for the plugin's own interface's `Guest` trait and types.
#[macro_export]
macro_rules! plugin {
    (
        plugin: $plugin:ident,
        name: $name:expr,
        wit: $wit:tt,
        world: $world:literal,
        kernels: $kernels:expr $(,)?
    ) => {
        /// Bindings of the plugin's world; the shared `weft:plugin` interfaces are the SDK's.
        #[allow(missing_docs)]
        mod bindings {
            wit_bindgen::generate!({
                path: $wit,
                world: $world,
                with: {
                    "weft:plugin/types@0.1.0": weft_sdk::bindings::weft::plugin::types,
                    "weft:plugin/host@0.1.0": weft_sdk::bindings::weft::plugin::host,
                    "weft:plugin/kernel-ir@0.1.0": weft_sdk::bindings::weft::plugin::kernel_ir,
                },
            });
        }

        /// The plugin (the host owns every store, so it needs no state of its own).
        pub struct $plugin;

        bindings::export!($plugin with_types_in bindings);

        impl bindings::exports::weft::plugin::plugin::Guest for $plugin {
            fn name() -> String {
                ($name).to_string()
            }

            fn version() -> String {
                env!("CARGO_PKG_VERSION").to_string()
            }

            fn kernel_body(
                key: String,
            ) -> Result<$crate::kernel_ir::Kernel, $crate::Error> {
                let body: fn(&str) -> Result<$crate::ir::Kernel, String> = $kernels;
                let kernel = body(&key).map_err($crate::error)?;
                Ok($crate::kernel_to_wit(&kernel))
            }
        }
    };
}
