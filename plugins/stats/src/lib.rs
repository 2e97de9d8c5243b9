//! stats: mean, variance, clipping and z-scores of f64 vectors, and a 3x3 box blur (`image`),
//! written with the SDK. Each operation is tasks over the host's stores, so they fuse.

use weft_sdk::{Dtype, Error, Launch, Partition::None as Whole, Store, host, scalar_store};
mod image;

weft_sdk::plugin! {
    plugin: Stats,
    name: "stats",
    wit: ["../../wit", "wit"],
    world: "plugin:stats/plugin",
    kernels: weft_sdk::body_of::<(Mean, SquaredDeviation, Clip, Standardize, image::BoxBlur)>,
}

impl bindings::exports::plugin::stats::ops::Guest for Stats {
    fn mean(x: &Store) -> Result<Store, Error> {
        Ok(mean("mean", x)?.0)
    }

    fn var(x: &Store) -> Result<Store, Error> {
        Ok(var("var", x)?.1)
    }

    fn clip(x: &Store, lo: f64, hi: f64) -> Result<Store, Error> {
        let launch = Launch::preferred(&x.require("clip", Dtype::F64, 1)?);
        if lo.is_nan() || hi.is_nan() || lo > hi {
            return Err(weft_sdk::error(format!("clip: lo {lo} > hi {hi}")));
        }
        let out = host::create_store(&x.shape(), Dtype::F64)?;
        Clip {}.submit(&launch, (x, launch.tiled()), (&out, launch.tiled()), lo, hi)?;
        Ok(out)
    }

    fn zscore(x: &Store) -> Result<Store, Error> {
        let (m, v, launch) = var("zscore", x)?;
        let out = host::create_store(&x.shape(), Dtype::F64)?;
        let (x, out_) = ((x, launch.tiled()), (&out, launch.tiled()));
        Standardize {}.submit(&launch, x, (&m, Whole), (&v, Whole), out_)?;
        Ok(out)
    }
}

/// The mean of the f64 vector `x` (a 0-d store; NaN if `x` is empty, as NumPy's), its length
/// and a launch over it.
fn mean(op: &str, x: &Store) -> Result<(Store, f64, Launch), Error> {
    let n = x.require(op, Dtype::F64, 1)?[0] as f64;
    let launch = Launch::preferred(&x.shape());
    let m = scalar_store(if n > 0.0 { 0.0 } else { f64::NAN })?;
    Mean {}.submit(&launch, (x, launch.tiled()), (&m, Whole), 1.0 / n)?;
    Ok((m, n, launch))
}

/// The mean and the variance of `x` (0-d stores), and a launch over `x`.
fn var(op: &str, x: &Store) -> Result<(Store, Store, Launch), Error> {
    let (m, n, launch) = mean(op, x)?;
    let (v, x) = (
        scalar_store(if n > 0.0 { 0.0 } else { f64::NAN })?,
        (x, launch.tiled()),
    );
    SquaredDeviation {}.submit(&launch, x, (&m, Whole), (&v, Whole), 1.0 / n)?;
    Ok((m, v, launch))
}

weft_sdk::kernel! {
    /// `m += x[i] * inv_n`.
    struct Mean {}
    stores { x: (F64, 1, Read), m: (F64, 0, Reduce(Sum)) }
    scalars { inv_n: f64 }
    parallel(x, |b, i| b.reduce(m, &[], b.mul(b.load(x, i), inv_n)))
}

weft_sdk::kernel! {
    /// `v += (x[i] - m)^2 * inv_n`.
    struct SquaredDeviation {}
    stores { x: (F64, 1, Read), m: (F64, 0, Read), v: (F64, 0, Reduce(Sum)) }
    scalars { inv_n: f64 }
    parallel(x, |b, i| {
        let d = b.sub(b.load(x, i), b.load(m, &[]));
        b.reduce(v, &[], b.mul(b.mul(d, d), inv_n));
    })
}

weft_sdk::kernel! {
    /// `out[i] = min(max(x[i], lo), hi)`.
    struct Clip {}
    stores { x: (F64, 1, Read), out: (F64, 1, Write) }
    scalars { lo: f64, hi: f64 }
    parallel(out, |b, i| b.store(out, i, b.min(b.max(b.load(x, i), lo), hi)))
}

weft_sdk::kernel! {
    /// `out[i] = (x[i] - m) / sqrt(v)`.
    struct Standardize {}
    stores { x: (F64, 1, Read), m: (F64, 0, Read), v: (F64, 0, Read), out: (F64, 1, Write) }
    parallel(out, |b, i| {
        let d = b.sub(b.load(x, i), b.load(m, &[]));
        b.store(out, i, b.div(d, b.sqrt(b.load(v, &[]))));
    })
}
