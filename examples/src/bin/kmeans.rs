//! k-means on `--n` random points of `--dim` coordinates with `--clusters` centroids (see
//! [`weft_examples::kmeans`]), against NumPy in the same run.
//!
//! `--warmup` untimed and `--iters` timed Lloyd steps, each reading its inertia as a
//! convergence test would. With `--out DIR` the points go to `DIR/x.npy` and the centroids to
//! `DIR/c.npy`, and `examples/numpy/kmeans.py` runs the NumPy program on the same points in
//! the same run: the report has NumPy's median step (`numpy_seconds_per_iter`,
//! `speedup_vs_numpy`) and the largest difference of the centroids from NumPy's, relative to
//! the largest centroid coordinate (`centroids_max_rel_diff_vs_numpy`); where NumPy is
//! missing, those are `null` and `numpy_unavailable` says why. `--out` is a temporary
//! directory when not given.

use std::process::ExitCode;

use weft_examples::kmeans;
use weft_examples::{
    AppError, Args, Cli, Kind, Report, bench_then, load_numeric, numpy_peer, out_dir_or_temp,
    run_main,
};

const NAME: &str = "kmeans";

fn main() -> ExitCode {
    let cli = Cli::new(
        NAME,
        "k-means (Lloyd's steps) on random points, against NumPy in the same run.",
        1_000_000,
        5,
    )
    .range("n", 1, 1 << 26)
    .help("n", "points")
    .help("iters", "timed Lloyd steps")
    .default_value("warmup", "1")
    .extra(
        "dim",
        "D",
        "coordinates per point",
        Kind::Count { min: 1, max: 4096 },
        "32",
    )
    .extra(
        "clusters",
        "K",
        "centroids (at most --n)",
        Kind::Count { min: 1, max: 4096 },
        "64",
    );
    let args = cli.parse_env_or_exit();
    run_main(NAME, || run(&args))
}

fn run(args: &Args) -> Result<(), AppError> {
    let n = args.n;
    let d = args.extra_u64("dim").ok_or("bad --dim")?;
    let k = args.extra_u64("clusters").ok_or("bad --clusters")?;
    if k > n {
        return Err(format!("--clusters {k} is more than the {n} points").into());
    }
    let np = load_numeric(args)?;
    let points = kmeans::points(n, d, args.seed);
    let x = np.from_vec(&[n, d], &points);
    let mut c = np.from_vec(&[k, d], &kmeans::start(&points, d, k));
    let mut inertia = f64::NAN;
    let (timing, per_iter, _) = bench_then(
        &np,
        args.warmup,
        args.iters,
        || {
            let (next, total) = kmeans::step(&np, &x, &c, k);
            inertia = total.item()?;
            c = next;
            Ok(())
        },
        |_| Ok(()),
    )?;
    let centroids = c.to_vec()?;

    let (dir, temporary) = out_dir_or_temp(args, NAME)?;
    weft::npy::write(dir.join("x.npy"), &[n, d], weft::npy::NpyData::F64(points))?;
    weft::npy::write(
        dir.join("c.npy"),
        &[k, d],
        weft::npy::NpyData::F64(centroids.clone()),
    )?;
    let peer = numpy_peer::run_program(
        "kmeans.py",
        &[
            dir.display().to_string(),
            k.to_string(),
            args.iters.max(1).to_string(),
            args.warmup.to_string(),
        ],
    )
    .and_then(|(step, their_inertia)| {
        let theirs = weft::npy::read(dir.join("c_numpy.npy"))
            .map_err(|e| e.to_string())?
            .data
            .to_f64();
        if theirs.len() != centroids.len() {
            return Err(format!(
                "NumPy wrote {} centroid coordinates, Weft {}",
                theirs.len(),
                centroids.len()
            ));
        }
        let scale = theirs.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let diff = theirs
            .iter()
            .zip(&centroids)
            .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()))
            / scale.max(f64::MIN_POSITIVE);
        Ok((step, their_inertia, diff))
    });
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    }

    let mut report = Report::new(NAME, args);
    report
        .timing(&timing, &per_iter)
        .set("points", n)
        .set("dim", d)
        .set("clusters", k)
        .set("steps", (args.warmup + args.iters) as u64)
        .set("inertia", inertia);
    let versus = match &peer {
        Ok((step, their_inertia, diff)) => {
            report
                .set("numpy_seconds_per_iter", *step)
                .set("speedup_vs_numpy", step / timing.median)
                .set("numpy_inertia", *their_inertia)
                .set("centroids_max_rel_diff_vs_numpy", *diff);
            format!(
                "NumPy {:.1} ms ({:.2}x); centroids within {diff:.1e} of NumPy's",
                step * 1e3,
                step / timing.median
            )
        }
        Err(why) => {
            for key in [
                "numpy_seconds_per_iter",
                "speedup_vs_numpy",
                "numpy_inertia",
                "centroids_max_rel_diff_vs_numpy",
            ] {
                report.set(key, serde_json::Value::Null);
            }
            report.set("numpy_unavailable", why.as_str());
            format!("NumPy unavailable: {why}")
        }
    };
    report.runtime_stats(&np);
    args.say(&format!(
        "{NAME}: {n} points of {d}, {k} clusters: {:.1} ms per step (median of {}); {versus}; \
         inertia {inertia:.6e}",
        timing.median * 1e3,
        args.iters,
    ))?;
    report.print()?;
    Ok(())
}
