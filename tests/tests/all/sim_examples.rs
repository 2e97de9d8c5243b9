//! Every example binary at a small size, run twice: on the CPU (`--device cpu`) and on the
//! simulated GPU (`--device sim`: the GPU back end, every PTX instruction interpreted on the
//! host). Every `.npy` file `--out` writes must be the same bytes, and the result fields of
//! the JSON line (means, residuals, output hashes, the examples' own bit checks) the same
//! values: the GPU back end gives the CPU's bits.
//!
//! The binaries are `weft-examples`' (`examples/src/bin`), found beside this test binary
//! (`<target>/<profile>/`), where `cargo test --workspace` builds them for the examples' own
//! tests. Where one is missing (`cargo test -p weft-tests` alone), the first test builds them
//! (`cargo build -p weft-examples --bins`, with the `mpi` feature when this crate has it). A
//! binary that is there is used as it is, even if older than the sources: after changing the
//! host, run the tests with `--workspace` (or build the examples first).
//!
//! Each run has `--iters 1 --threads 2`. The solvers (`cg`, `bicgstab`, `gmg`) run at their
//! defaults (`--tol 1e-8`, at most 10,000 iterations), which converge on these grids in a few
//! dozen iterations, so both runs exit with 0 (one that stopped short of `--tol` would exit
//! with 1, and fail here); their iteration counts and residuals are among the fields compared.
//!
//! Not run ([`SKIPPED`] says why): `bench_gather`, `bench_dispatch`, `bench_ptx` and
//! `weft-gpu-check`. `plugin_calls`, `bench_components` and `bench_service` write no files and report timings
//! only: they must run on the simulated GPU, and nothing is compared. The benchmarks write no files either; their
//! JSON lines carry their results' bits (`fused_output_bits`) or their own checks of them
//! (`bits_equal_*`, `fused_equals_*`, `max_rel_diff_*`), which are compared.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// One example's run: its binary, its small size, and the fields of its JSON line that must
/// be the same on both devices.
struct Example {
    bin: &'static str,
    args: &'static [&'static str],
    fields: &'static [&'static str],
}

/// Every example binary that runs here (see the module's documentation for the others).
const EXAMPLES: &[Example] = &[
    Example {
        bin: "black_scholes",
        args: &["--n", "1003"],
        fields: &["call_mean", "put_mean"],
    },
    Example {
        bin: "stencil",
        args: &["--n", "29"],
        fields: &["interior_mean"],
    },
    Example {
        bin: "jacobi",
        args: &["--n", "47"],
        fields: &["relative_residual"],
    },
    Example {
        bin: "gemm",
        args: &["--n", "37"],
        fields: &["c_sum"],
    },
    Example {
        // Rows past 8,192 terms: the product by parts.
        bin: "gemv",
        args: &["--n", "64", "--k", "8200"],
        fields: &["y_sum"],
    },
    Example {
        bin: "lstsq",
        args: &["--n", "301", "--cols", "23"],
        fields: &["normal_residual", "relative_error"],
    },
    Example {
        bin: "cg",
        args: &["--grid", "16"],
        fields: &["iterations", "converged", "relative_residual"],
    },
    Example {
        bin: "bicgstab",
        args: &["--grid", "16"],
        fields: &["iterations", "converged", "relative_residual"],
    },
    Example {
        bin: "gmg",
        args: &["--grid", "15"],
        fields: &["iterations", "converged", "relative_residual"],
    },
    Example {
        bin: "logreg",
        args: &["--n", "1001"],
        fields: &["max_weight_diff_vs_rayon"],
    },
    Example {
        bin: "cfd",
        args: &["--n", "17", "--nit", "3"],
        fields: &["udiff", "max_diff_fused_vs_unfused"],
    },
    Example {
        bin: "swe",
        args: &["--n", "15"],
        fields: &[
            "simulated_time",
            "relative_mass_drift",
            "max_diff_fused_vs_unfused",
        ],
    },
    Example {
        bin: "plugin_calls",
        args: &["--n", "100"],
        fields: &[],
    },
    Example {
        bin: "bench_components",
        args: &["--n", "1000"],
        fields: &[],
    },
    Example {
        bin: "bench_service",
        args: &["--n", "4"],
        fields: &[],
    },
    Example {
        bin: "bench_black_scholes",
        args: &["--n", "1003"],
        fields: &[
            "fused_output_bits",
            "max_rel_diff_vs_unfused",
            "max_rel_diff_vs_rust_loop",
        ],
    },
    Example {
        bin: "bench_stencil",
        args: &["--n", "21", "--sweeps", "2"],
        fields: &["fused_equals_unfused", "fused_equals_rust"],
    },
    Example {
        bin: "npbench",
        args: &["--preset", "XS", "--iters", "1"],
        fields: &["kernels", "max_rel_diff_max"],
    },
    Example {
        bin: "kmeans",
        args: &["--n", "5000", "--dim", "3", "--clusters", "4"],
        fields: &["inertia", "points"],
    },
    Example {
        bin: "pagerank",
        args: &["--n", "2000", "--degree", "4", "--iters", "2"],
        fields: &["rank_sum", "last_change", "ranks_equal_scipy"],
    },
    Example {
        bin: "bench_graph",
        args: &["--n", "2000", "--degree", "4"],
        fields: &["nnz", "y_sum", "y_equals_scipy"],
    },
    Example {
        bin: "bench_spmv",
        args: &["--grid", "6"],
        fields: &["bits_equal_sequential", "bits_equal_lanes"],
    },
    Example {
        bin: "bench_spmv",
        args: &["--row-len", "37", "--rows", "101"],
        fields: &[
            "bits_equal_sequential",
            "bits_equal_lanes",
            "rows_differing_from_lanes",
        ],
    },
    Example {
        bin: "bench_products",
        args: &["--divide", "64", "--warmup", "0"],
        fields: &["shapes", "sampled_sum"],
    },
    Example {
        bin: "bench_krylov",
        args: &["--grid", "9", "--rounds", "1"],
        fields: &[
            "cg_max_rel_diff_residuals",
            "cg_max_rel_diff_residuals_hand_written",
            "bicgstab_max_rel_diff_residuals",
            "bicgstab_max_rel_diff_residuals_hand_written",
        ],
    },
];

/// The binaries in `examples/src/bin` (by source name) that no test here runs, and why.
const SKIPPED: &[(&str, &str)] = &[
    (
        "bench_gather",
        "it measures the CPU back end's SIMD paths below the runtime, and refuses any other \
         device",
    ),
    (
        "bench_dispatch",
        "it times the fusion layer's analysis and Cranelift compiles below the runtime; its \
         JSON line holds timings only",
    ),
    (
        "bench_ptx",
        "it emits PTX without running it; nothing runs on a device",
    ),
    (
        "gpu_check",
        "`weft-gpu-check`, the GPU machine's staged checks: not an example; its `bits` stage \
         compares the device with the CPU itself",
    ),
];

/// `<target>/<profile>/`: this test binary runs from its `deps/`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .and_then(Path::parent)
        .expect("the test binary lies in <target>/<profile>/deps")
        .to_path_buf()
}

/// Builds `weft-examples`' binaries into this test binary's target directory and profile,
/// unless every one of `names` is already there.
fn build_examples(names: &[&str]) -> Result<(), String> {
    let dir = profile_dir();
    if names.iter().all(|n| dir.join(n).is_file()) {
        return Ok(());
    }
    let profile = match dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev".to_string(),
        Some(p) => p.to_string(),
        None => return Err(format!("{}: no profile", dir.display())),
    };
    let target = dir.parent().ok_or("no target directory")?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "-p",
        "weft-examples",
        "--bins",
        "--profile",
        &profile,
    ])
    .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
    .env("CARGO_TARGET_DIR", target);
    if cfg!(feature = "mpi") {
        cmd.args(["--features", "weft-examples/mpi"]);
    }
    let status = cmd.status().map_err(|e| format!("cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building the examples: {status}"));
    }
    Ok(())
}

/// The path of example binary `name` (built once if any example binary is missing).
pub(crate) fn example_bin(name: &str) -> PathBuf {
    static BUILT: OnceLock<Result<(), String>> = OnceLock::new();
    let mut names: Vec<&str> = EXAMPLES.iter().map(|e| e.bin).collect();
    names.push(name);
    if let Err(e) = BUILT.get_or_init(|| build_examples(&names)) {
        panic!("{e}");
    }
    let path = profile_dir().join(name);
    assert!(path.is_file(), "{} is missing", path.display());
    path
}

/// A fresh, empty directory for one run's `--out`.
pub(crate) fn out_dir(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weft-sim-{}-{label}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Runs example `bin` on `device` with `--out dir`; returns its JSON line.
fn run(bin: &str, args: &[&str], device: &str, dir: &Path) -> serde_json::Value {
    let out = Command::new(example_bin(bin))
        .args(args)
        .args([
            "--iters",
            "1",
            "--threads",
            "2",
            "--device",
            device,
            "--out",
        ])
        .arg(dir)
        // No PTX check (`WEFT_PTX_CHECK`) in the child: ptx_modules.rs emits and assembles
        // every example's kernels, and the simulated GPU loads and runs the PTX itself.
        .env_remove("WEFT_PTX_CHECK")
        // The binaries may be built with MPI; one process is one rank.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("the example runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{bin} {args:?} --device {device}: {}\n{}\n{stdout}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{bin} --device {device}: {e}: {line}"))
}

/// The `.npy` files in `dir` (none if it was not made), by name.
pub(crate) fn npy_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, Vec<u8>)> = entries
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "npy"))
        .map(|p| {
            let name = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read(&p).expect("a readable .npy file"))
        })
        .collect();
    out.sort();
    out
}

/// Where two `.npy` files differ: the first element that does (for `<f8` data) or the first
/// byte; `None` where they are the same bytes.
pub(crate) fn npy_difference(got: &[u8], want: &[u8]) -> Option<String> {
    if got == want {
        return None;
    }
    // Version 1 files: magic (6), version (2), header length (2), header, then the data.
    let header = |b: &[u8]| -> Option<(usize, String)> {
        let len = usize::from(u16::from_le_bytes([*b.get(8)?, *b.get(9)?]));
        let text = String::from_utf8_lossy(b.get(10..10 + len)?).into_owned();
        Some((10 + len, text))
    };
    match (header(got), header(want)) {
        (Some((at, h)), Some((_, w)))
            if h == w && h.contains("'<f8'") && got.len() == want.len() =>
        {
            let values = |b: &[u8]| -> Vec<f64> {
                b[at..]
                    .chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
                    .collect()
            };
            let (g, w) = (values(got), values(want));
            let differ: Vec<usize> = (0..g.len())
                .filter(|&i| g[i].to_bits() != w[i].to_bits())
                .collect();
            let i = differ[0];
            Some(format!(
                "{} of {} elements differ; the first, [{i}]: {:e} ({:#018x}) against the CPU's \
                 {:e} ({:#018x})",
                differ.len(),
                g.len(),
                g[i],
                g[i].to_bits(),
                w[i],
                w[i].to_bits()
            ))
        }
        (Some((_, h)), Some((_, w))) if h != w => Some(format!("header {h:?} against {w:?}")),
        _ => {
            let i = got
                .iter()
                .zip(want)
                .position(|(a, b)| a != b)
                .unwrap_or(got.len().min(want.len()));
            Some(format!(
                "{} bytes against {}; the first difference at byte {i}",
                got.len(),
                want.len()
            ))
        }
    }
}

/// Runs `example` on the CPU and on the simulated GPU and compares what both wrote.
fn cpu_and_sim_agree(example: &Example) {
    let Example { bin, args, fields } = example;
    let label = format!("{bin}{}", args.join(""));
    let (cpu_dir, sim_dir) = (
        out_dir(&format!("{label}-cpu")),
        out_dir(&format!("{label}-sim")),
    );
    let cpu = run(bin, args, "cpu", &cpu_dir);
    let sim = run(bin, args, "sim", &sim_dir);
    let mut differ = Vec::new();
    for field in *fields {
        let want = &cpu[field];
        assert!(
            !want.is_null(),
            "{bin}: the CPU's JSON line has no {field}: {cpu}"
        );
        if sim[field] != *want {
            differ.push(format!(
                "{field}: sim {} against the CPU's {want}",
                sim[field]
            ));
        }
    }
    let (want, got) = (npy_files(&cpu_dir), npy_files(&sim_dir));
    let names = |f: &[(String, Vec<u8>)]| f.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&got),
        names(&want),
        "{bin} {args:?}: the files written"
    );
    for ((file, g), (_, w)) in got.iter().zip(&want) {
        if let Some(d) = npy_difference(g, w) {
            differ.push(format!("{file}: {d}"));
        }
    }
    assert!(
        differ.is_empty(),
        "{bin} {args:?} on the simulated GPU differs from the CPU:\n{}",
        differ.join("\n")
    );
    if *bin != "plugin_calls" && !bin.starts_with("bench_") {
        assert!(!want.is_empty(), "{bin} wrote no .npy files");
    }
    let _ = std::fs::remove_dir_all(&cpu_dir);
    let _ = std::fs::remove_dir_all(&sim_dir);
}

/// Runs every example whose binary is `bin`.
fn check(bin: &str) {
    let mut ran = 0;
    for example in EXAMPLES.iter().filter(|e| e.bin == bin) {
        cpu_and_sim_agree(example);
        ran += 1;
    }
    assert!(ran > 0, "no example runs {bin}");
}

#[test]
fn black_scholes() {
    check("black_scholes");
}

#[test]
fn stencil() {
    check("stencil");
}

#[test]
fn jacobi() {
    check("jacobi");
}

#[test]
fn gemm() {
    check("gemm");
}

#[test]
fn gemv() {
    check("gemv");
}

#[test]
fn lstsq() {
    check("lstsq");
}

#[test]
fn cg() {
    check("cg");
}

#[test]
fn bicgstab() {
    check("bicgstab");
}

#[test]
fn gmg() {
    check("gmg");
}

#[test]
fn logreg() {
    check("logreg");
}

#[test]
fn cfd() {
    check("cfd");
}

#[test]
fn swe() {
    check("swe");
}

#[test]
fn plugin_calls() {
    check("plugin_calls");
}

#[test]
fn bench_components() {
    check("bench_components");
}

#[test]
fn bench_service() {
    check("bench_service");
}

#[test]
fn bench_black_scholes() {
    check("bench_black_scholes");
}

#[test]
fn bench_stencil() {
    check("bench_stencil");
}

#[test]
fn bench_spmv() {
    check("bench_spmv");
}

#[test]
fn kmeans() {
    check("kmeans");
}

#[test]
fn bench_products() {
    check("bench_products");
}

#[test]
fn bench_krylov() {
    check("bench_krylov");
}

/// A binary added to `examples/src/bin` must be run here, or skipped with a reason.
#[test]
fn every_example_binary_runs_here_or_is_skipped_for_a_reason() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/src/bin");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(dir).expect("examples/src/bin") {
        let path = entry.expect("a directory entry").path();
        let name = match path.extension() {
            Some(x) if x == "rs" => path.file_stem(),
            None if path.is_dir() => path.file_name(),
            _ => continue,
        };
        let name = name.unwrap_or_default().to_string_lossy().into_owned();
        let known = EXAMPLES.iter().any(|e| e.bin == name) || SKIPPED.iter().any(|s| s.0 == name);
        if !known {
            missing.push(name);
        }
    }
    assert!(
        missing.is_empty(),
        "not run on the simulated GPU and not in SKIPPED: {missing:?}"
    );
}
