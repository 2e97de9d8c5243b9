//! A 3x3 box blur of f32 or f64 images: a neighbourhood kernel, one declaration for both
//! dtypes (`sdk/GUIDE.md`, section "Neighbours: a 3x3 filter").

use weft_sdk::ir::DType;
use weft_sdk::ir::builder::{BodyBuilder, StoreParam, Value};
use weft_sdk::{Dtype, Error, Launch, Partition, Store, host, ir_dtype};

impl crate::bindings::exports::plugin::stats::image::Guest for crate::Stats {
    fn box_blur(x: &Store) -> Result<Store, Error> {
        let (dtype, shape) = (x.dtype(), x.shape());
        if !matches!(dtype, Dtype::F32 | Dtype::F64) || shape.len() != 2 {
            return Err(weft_sdk::error(format!(
                "box-blur: needs a 2-dimensional f32 or f64 array, not {} of shape {}",
                ir_dtype(dtype),
                weft_sdk::ir::shape::tuple(&shape)
            )));
        }
        let out = host::create_store(&shape, dtype)?;
        let launch = Launch::preferred(&shape);
        // Each point writes its tile of `out` and reads `x` whole: its rows' neighbours lie
        // in other points' tiles.
        let blur = BoxBlur {
            dtype: ir_dtype(dtype),
        };
        blur.submit(&launch, (x, Partition::None), (&out, launch.tiled()))?;
        Ok(out)
    }
}

weft_sdk::kernel! {
    /// `out[r, c]` = the mean of `x[r + dr, c + dc]` for `dr` and `dc` in `-1..=1`, indices
    /// clamped into the image (its edges repeat outward), in `dtype`.
    pub(crate) struct BoxBlur { dtype: DType }
    stores { x: (dtype, 2, Read), out: (dtype, 2, Write) }
    parallel(out, |b, i| {
        let rows = [-1, 0, 1].map(|shift| neighbour(b, (x, out), 0, i[0], shift));
        let cols = [-1, 0, 1].map(|shift| neighbour(b, (x, out), 1, i[1], shift));
        let mut sum = b.const_of(dtype, 0.0);
        for r in rows {
            for c in cols {
                sum = b.add(sum, b.load(x, &[r, c]));
            }
        }
        b.store(out, i, b.div(sum, b.const_of(dtype, 9.0)));
    })
}

/// Index `i + shift` of `out` along dimension `d` as an index of `x`, clamped into `x`. Each
/// store is indexed relative to its own sub-store: `x` is whole, so its indices are global,
/// and `out`'s tile starts at `origin(out, d)`.
fn neighbour(
    b: &BodyBuilder,
    (x, out): (StoreParam, StoreParam),
    d: u32,
    i: Value,
    shift: i64,
) -> Value {
    let global = b.add(b.origin(out, d), b.add(i, b.const_i64(shift)));
    let last = b.sub(b.extent(x, d), b.const_i64(1));
    b.min(b.max(global, b.const_i64(0)), last)
}
