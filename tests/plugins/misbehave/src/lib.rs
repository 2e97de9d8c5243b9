//! A test plugin that misbehaves on request: it traps, loops forever, eats memory, hands the
//! host invalid kernel IR, keeps handles it was only lent, asks for huge stores and tilings at
//! the integer limits. It is built like the real plugins (a Wasm component made by
//! `plugins/artifacts`), so the host's sandboxing is tested on the real path.

use std::cell::RefCell;

use weft_sdk::ir::{DType, Privilege, ReduceOp};
use weft_sdk::{KernelBuilder, Launch, Task, host, kernel_to_wit};

wit_bindgen::generate!({
    inline: "
        package weft:testing;

        interface misbehave {
            use weft:plugin/host@0.1.0.{store};

            /// Panics (a trap in the host).
            trap: func();
            /// Never returns.
            spin: func();
            /// Allocates `mb` megabytes and returns the sum of their bytes.
            hog: func(mb: u32) -> u64;
            /// Returns `x + 1`: proof that the plugin still works.
            ok: func(x: u32) -> u32;
            /// Submits a task whose kernel key is `key` over a new store of 8 elements.
            submit: func(key: string) -> result<_, string>;
            /// Submits the task of kernel `key` over a new store of `n` elements, and reads the
            /// store back.
            run: func(key: string, n: u64) -> result<list<u8>, string>;
            /// Fills a temporary of 8 elements and copies it into a result, both tasks with a
            /// tiling of this tile and offset over a launch of `points` points; the temporary
            /// dies, so the two tasks fuse. Returns the result's bytes.
            tiled: func(tile: u64, offset: s64, points: u64) -> result<list<u8>, string>;
            /// Submits `fill-one` over a new store of 8 elements with this launch domain.
            launch: func(domain: list<u64>) -> result<_, string>;
            /// Submits `fill-one` with `n` arguments, all the same new store.
            many-args: func(n: u32) -> result<_, string>;
            /// Keeps a view of `s` (a store lent for this call only) for later.
            keep: func(s: borrow<store>) -> result<_, string>;
            /// Writes ones into the view `keep` kept, and reads it.
            poke: func() -> result<list<u8>, string>;
            /// Writes ones into `s`.
            write-into: func(s: borrow<store>) -> result<_, string>;
            /// Creates stores of this shape and keeps them, until one is refused; returns how
            /// many it made and the refusal.
            bomb: func(shape: list<u64>, count: u32) -> tuple<u32, string>;
            /// Drops every store `bomb` and `keep` kept.
            forget: func();
            /// Submits the task of kernel `key` (`shifted-copy`: `dst[i] = src[i + shift]`, or
            /// `shifted-add`: `dst[i] += src[i + shift]`) over `dst`'s preferred tiling, reading
            /// all of `src`: a task that fails with an index out of bounds when `shift` takes
            /// `i` past `src`. Nothing is read back, so the task stays pending and may fuse.
            shifted: func(key: string, src: borrow<store>, dst: borrow<store>, shift: s64) -> result<_, string>;
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

thread_local! {
    /// Stores this plugin keeps between calls.
    static KEPT: RefCell<Vec<weft_sdk::Store>> = const { RefCell::new(Vec::new()) };
}

/// How many live `f64` values the `huge-frame` kernel holds at once.
const FRAME_VALUES: usize = 40_000;

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
            // out[i] = in[i].
            "copy" => {
                let input = k.store(DType::F64, 1, Privilege::Read);
                k.body().parallel(out, |b, i| {
                    let v = b.load(input, i);
                    b.store(out, i, v);
                });
            }
            // Invalid IR: a load through a write-only parameter.
            "load-from-write-only" => {
                k.body().parallel(out, |b, i| {
                    let v = b.load(out, i);
                    b.store(out, i, v);
                });
            }
            // out[i] = in[i + shift], in read whole.
            "shifted-copy" => {
                let input = k.store(DType::F64, 1, Privilege::Read);
                let shift = k.scalar(DType::I64);
                k.body().parallel(out, |b, i| {
                    let j = b.add(i[0], shift);
                    let v = b.load(input, &[j]);
                    b.store(out, i, v);
                });
            }
            // acc[i] += in[i + shift], in read whole (`acc` in place of `out`).
            "shifted-add" => {
                let mut k = KernelBuilder::new("misbehave.shifted-add");
                let acc = k.store(DType::F64, 1, Privilege::ReadWrite);
                let input = k.store(DType::F64, 1, Privilege::Read);
                let shift = k.scalar(DType::I64);
                k.body().parallel(acc, |b, i| {
                    let j = b.add(i[0], shift);
                    let v = b.load(input, &[j]);
                    let old = b.load(acc, i);
                    let new = b.add(old, v);
                    b.store(acc, i, new);
                });
                return Ok(kernel_to_wit(&k.finish()));
            }
            // A data race: every point of the parallel loop writes element 0.
            "race" => {
                k.body().parallel(out, |b, i| {
                    let zero = b.const_i64(0);
                    let v = b.cast(DType::F64, i[0]);
                    b.store(out, &[zero], v);
                });
            }
            // Not a race: a sum into element 0 is a reduction.
            "sum-into-first" => {
                let acc = k.store(DType::F64, 1, Privilege::Reduce(ReduceOp::Sum));
                k.body().parallel(out, |b, i| {
                    let zero = b.const_i64(0);
                    let one = b.const_f64(1.0);
                    b.store(out, i, one);
                    b.reduce(acc, &[zero], one);
                });
            }
            // A loop that runs for 2^62 iterations.
            "forever" => {
                k.body().parallel(out, |b, i| {
                    let zero = b.const_i64(0);
                    let huge = b.const_i64(1 << 62);
                    let start = b.const_f64(0.0);
                    let sum = b.for_loop(zero, huge, &[start], |b, _, acc| {
                        let one = b.const_f64(1.0);
                        vec![b.add(acc[0], one)]
                    });
                    let _ = i;
                    b.store(out, i, sum[0]);
                });
            }
            // Many values live at once (carried around a loop): a frame of hundreds of
            // kilobytes.
            "huge-frame" => {
                k.body().parallel(out, |b, i| {
                    let x = b.cast(DType::F64, i[0]);
                    let init: Vec<_> = (0..FRAME_VALUES)
                        .map(|c| b.add(x, b.const_f64(c as f64)))
                        .collect();
                    let zero = b.const_i64(0);
                    let two = b.const_i64(2);
                    let last = b.for_loop(zero, two, &init, |b, _, carried| {
                        carried.iter().map(|&v| b.mul(v, v)).collect()
                    });
                    let sum = last.iter().fold(x, |acc, &v| b.add(acc, v));
                    b.store(out, i, sum);
                });
            }
            // A kernel with more parameters than any real one has.
            "many-params" => {
                for _ in 0..100_000 {
                    k.scalar(DType::F64);
                }
                k.body().parallel(out, |b, i| {
                    let one = b.const_f64(1.0);
                    b.store(out, i, one);
                });
            }
            "trap-in-kernel-body" => panic!("asked to trap"),
            other => return Err(weft_sdk::error(format!("unknown kernel `{other}`"))),
        }
        Ok(kernel_to_wit(&k.finish()))
    }
}

fn fill(out: &weft_sdk::Store) -> Result<(), String> {
    let launch = Launch::preferred(&out.shape());
    Task::new("fill-one", &launch)
        .arg(out, launch.tiled(), weft_sdk::Privilege::Write)
        .submit()
        .map_err(|e| e.message)
}

fn tiling(tile: u64, offset: i64) -> weft_sdk::Partition {
    weft_sdk::Partition::Tiling(weft_sdk::Tiling {
        tile: vec![tile],
        offset: vec![offset],
        projection: vec![Some(0)],
    })
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
        let mut task =
            Task::new(key.clone(), &launch).arg(&out, launch.tiled(), weft_sdk::Privilege::Write);
        let acc;
        if key == "sum-into-first" {
            acc = host::create_store(&[1], weft_sdk::Dtype::F64).map_err(|e| e.message)?;
            task = task.arg(
                &acc,
                weft_sdk::Partition::None,
                weft_sdk::Privilege::Reduce(weft_sdk::ReduceOp::Sum),
            );
        }
        task.submit().map_err(|e| e.message)
    }

    fn run(key: String, n: u64) -> Result<Vec<u8>, String> {
        let out = host::create_store(&[n], weft_sdk::Dtype::F64).map_err(|e| e.message)?;
        let launch = Launch::preferred(&[n]);
        Task::new(key, &launch)
            .arg(&out, launch.tiled(), weft_sdk::Privilege::Write)
            .submit()
            .map_err(|e| e.message)?;
        host::read_bytes(&out).map_err(|e| e.message)
    }

    fn tiled(tile: u64, offset: i64, points: u64) -> Result<Vec<u8>, String> {
        let tmp = host::create_store(&[8], weft_sdk::Dtype::F64).map_err(|e| e.message)?;
        let out = host::create_store(&[8], weft_sdk::Dtype::F64).map_err(|e| e.message)?;
        let launch = Launch {
            domain: vec![points],
            tiling: weft_sdk::Tiling {
                tile: vec![tile],
                offset: vec![offset],
                projection: vec![Some(0)],
            },
        };
        Task::new("fill-one", &launch)
            .arg(&tmp, tiling(tile, offset), weft_sdk::Privilege::Write)
            .submit()
            .map_err(|e| e.message)?;
        Task::new("copy", &launch)
            .arg(&out, tiling(tile, offset), weft_sdk::Privilege::Write)
            .arg(&tmp, tiling(tile, offset), weft_sdk::Privilege::Read)
            .submit()
            .map_err(|e| e.message)?;
        drop(tmp);
        host::read_bytes(&out).map_err(|e| e.message)
    }

    fn launch(domain: Vec<u64>) -> Result<(), String> {
        let out = host::create_store(&[8], weft_sdk::Dtype::F64).map_err(|e| e.message)?;
        let launch = Launch {
            tiling: weft_sdk::Tiling {
                tile: vec![1],
                offset: vec![0],
                projection: vec![Some(0)],
            },
            domain,
        };
        Task::new("fill-one", &launch)
            .arg(&out, launch.tiled(), weft_sdk::Privilege::Write)
            .submit()
            .map_err(|e| e.message)
    }

    fn many_args(n: u32) -> Result<(), String> {
        let out = host::create_store(&[8], weft_sdk::Dtype::F64).map_err(|e| e.message)?;
        let launch = Launch::preferred(&[8]);
        let mut task = Task::new("fill-one", &launch);
        for _ in 0..n {
            task = task.arg(&out, launch.tiled(), weft_sdk::Privilege::Write);
        }
        task.submit().map_err(|e| e.message)
    }

    fn keep(s: &weft_sdk::Store) -> Result<(), String> {
        let shape = s.shape();
        let view = s
            .slice(&vec![0; shape.len()], &shape)
            .map_err(|e| e.message)?;
        KEPT.with(|k| k.borrow_mut().push(view));
        Ok(())
    }

    fn poke() -> Result<Vec<u8>, String> {
        KEPT.with(|k| {
            let kept = k.borrow();
            let view = kept.last().ok_or("nothing kept")?;
            fill(view)?;
            host::read_bytes(view).map_err(|e| e.message)
        })
    }

    fn write_into(s: &weft_sdk::Store) -> Result<(), String> {
        fill(s)
    }

    fn bomb(shape: Vec<u64>, count: u32) -> (u32, String) {
        for made in 0..count {
            match host::create_store(&shape, weft_sdk::Dtype::F64) {
                Ok(s) => {
                    // Touch it, so that a lazy allocation happens too.
                    if let Err(e) = fill(&s) {
                        return (made, e);
                    }
                    KEPT.with(|k| k.borrow_mut().push(s));
                }
                Err(e) => return (made, e.message),
            }
        }
        (count, String::new())
    }

    fn forget() {
        KEPT.with(|k| k.borrow_mut().clear());
    }

    fn shifted(
        key: String,
        src: &weft_sdk::Store,
        dst: &weft_sdk::Store,
        shift: i64,
    ) -> Result<(), String> {
        let launch = Launch::preferred(&dst.shape());
        let privilege = if key == "shifted-add" {
            weft_sdk::Privilege::ReadWrite
        } else {
            weft_sdk::Privilege::Write
        };
        Task::new(key, &launch)
            .arg(dst, launch.tiled(), privilege)
            .arg(src, weft_sdk::Partition::None, weft_sdk::Privilege::Read)
            .scalar(weft_sdk::Scalar::I64(shift))
            .submit()
            .map_err(|e| e.message)
    }
}

export!(Misbehave);
