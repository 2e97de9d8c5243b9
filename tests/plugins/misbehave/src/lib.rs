//! A test plugin that misbehaves on request: it traps, loops forever, eats memory, or hands
//! the host invalid kernel IR. It is built like the real plugins (a Wasm component made by
//! `plugins/artifacts`), so the host's sandboxing is tested on the real path.

use weft_sdk::ir::{DType, Privilege};
use weft_sdk::{KernelBuilder, Launch, Task, host, kernel_to_wit};

wit_bindgen::generate!({
    inline: "
        package weft:testing;

        interface misbehave {
            /// Panics (a trap in the host).
            trap: func();
            /// Never returns.
            spin: func();
            /// Allocates `mb` megabytes and returns the sum of their bytes.
            hog: func(mb: u32) -> u64;
            /// Returns `x + 1`: proof that the plugin still works.
            ok: func(x: u32) -> u32;
            /// Submits a task whose kernel key is `key`.
            submit: func(key: string) -> result<_, string>;
        }

        world misbehave-plugin {
            include weft:plugin/plugin-base@0.1.0;
            export misbehave;
        }
    ",
    path: "../../../wit",
    world: "weft:testing/misbehave-plugin",
    with: {
        "weft:plugin/types@0.1.0": weft_sdk::bindings::weft::plugin::types,
        "weft:plugin/host@0.1.0": weft_sdk::bindings::weft::plugin::host,
        "weft:plugin/kernel-ir@0.1.0": weft_sdk::bindings::weft::plugin::kernel_ir,
    },
});

struct Misbehave;

impl exports::weft::plugin::plugin::Guest for Misbehave {
    fn name() -> String {
        "misbehave".into()
    }

    fn version() -> String {
        env!("CARGO_PKG_VERSION").into()
    }

    fn kernel_body(key: String) -> Result<weft_sdk::kernel_ir::Kernel, weft_sdk::types::Error> {
        let mut k = KernelBuilder::new(format!("misbehave.{key}"));
        let out = k.store(DType::F64, 1, Privilege::Write);
        match key.as_str() {
            // A valid kernel: out[i] = 1.
            "fill-one" => {
                k.body().parallel(out, |b, i| {
                    let one = b.const_f64(1.0);
                    b.store(out, i, one);
                });
            }
            // Invalid IR: a load through a write-only parameter.
            "load-from-write-only" => {
                k.body().parallel(out, |b, i| {
                    let v = b.load(out, i);
                    b.store(out, i, v);
                });
            }
            "trap-in-kernel-body" => panic!("asked to trap"),
            other => return Err(weft_sdk::error(format!("unknown kernel `{other}`"))),
        }
        Ok(kernel_to_wit(&k.finish()))
    }
}

impl exports::weft::testing::misbehave::Guest for Misbehave {
    fn trap() {
        panic!("asked to trap");
    }

    fn spin() {
        let mut x: u64 = 1;
        loop {
            x = std::hint::black_box(x.wrapping_mul(3));
        }
    }

    fn hog(mb: u32) -> u64 {
        let bytes = vec![1u8; mb as usize * (1 << 20)];
        std::hint::black_box(&bytes)
            .iter()
            .map(|&b| u64::from(b))
            .sum()
    }

    fn ok(x: u32) -> u32 {
        x + 1
    }

    fn submit(key: String) -> Result<(), String> {
        let out = host::create_store(&[8], weft_sdk::Dtype::F64).map_err(|e| e.message)?;
        let launch = Launch::preferred(&[8]);
        Task::new(key, &launch)
            .arg(&out, launch.tiled(), weft_sdk::Privilege::Write)
            .submit()
            .map_err(|e| e.message)
    }
}

export!(Misbehave);
