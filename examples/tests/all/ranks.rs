//! Every example on 1, 2, 3 and 4 ranks (`mpirun`), on sizes that do not divide evenly: the
//! `--out` files equal the single process's byte for byte, every task's plan is the same on
//! every rank (`WEFT_CHECK_REPLICATION=1`), the JSON line reports the ranks and what was
//! sent, and a rank holds only the pieces of stores that its points use.
#![cfg(feature = "mpi")]

use std::path::{Path, PathBuf};
use std::process::Command;

/// (binary, arguments): small runs of every example.
fn examples() -> Vec<(&'static str, &'static str, Vec<&'static str>)> {
    vec![
        (
            "black_scholes",
            env!("CARGO_BIN_EXE_black_scholes"),
            vec!["--n", "10007", "--iters", "2"],
        ),
        (
            "stencil",
            env!("CARGO_BIN_EXE_stencil"),
            vec!["--n", "37", "--iters", "3"],
        ),
        (
            "jacobi",
            env!("CARGO_BIN_EXE_jacobi"),
            vec!["--n", "101", "--iters", "3"],
        ),
        ("cg", env!("CARGO_BIN_EXE_cg"), vec!["--grid", "23"]),
        (
            "bicgstab",
            env!("CARGO_BIN_EXE_bicgstab"),
            // 16,900 unknowns: past `numeric`'s `SMALL_DOT`, so its dot products are
            // reductions over the ranks' pieces, not one point reading whole vectors.
            vec!["--grid", "130"],
        ),
        // 65,025 unknowns on the finest level, past `SMALL_DOT` as for `bicgstab`.
        ("gmg", env!("CARGO_BIN_EXE_gmg"), vec!["--grid", "255"]),
        (
            "cfd",
            env!("CARGO_BIN_EXE_cfd"),
            vec!["--n", "29", "--iters", "2"],
        ),
        (
            "swe",
            env!("CARGO_BIN_EXE_swe"),
            vec!["--n", "33", "--iters", "2"],
        ),
        (
            "logreg",
            env!("CARGO_BIN_EXE_logreg"),
            vec!["--n", "2003", "--iters", "3"],
        ),
        // Uneven shapes: on 4 ranks the product goes over a 2x2 grid.
        (
            "gemm",
            env!("CARGO_BIN_EXE_gemm"),
            vec!["--n", "97", "--iters", "2"],
        ),
        (
            "lstsq",
            env!("CARGO_BIN_EXE_lstsq"),
            vec!["--n", "2003", "--cols", "71", "--iters", "2"],
        ),
    ]
}

fn out_dir(name: &str, ranks: usize) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("weft-ranks-{}-{name}-{ranks}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Runs `bin` on `ranks` ranks (1: without `mpirun`) writing into `dir`; returns its JSON line.
fn run(bin: &str, args: &[&str], ranks: usize, dir: &Path) -> serde_json::Value {
    run_with(bin, args, ranks, dir, &[])
}

/// [`run`] with more environment variables.
fn run_with(
    bin: &str,
    args: &[&str],
    ranks: usize,
    dir: &Path,
    env: &[(&str, &str)],
) -> serde_json::Value {
    let mut cmd = if ranks == 1 {
        Command::new(bin)
    } else {
        let mut c = Command::new("mpirun");
        c.args(["--oversubscribe", "-n", &ranks.to_string(), bin]);
        c
    };
    let out = cmd
        .args(args)
        .args(["--threads", "1", "--out"])
        .arg(dir)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        // Every task's plan, compared across ranks: control replication holds.
        .env("WEFT_CHECK_REPLICATION", "1")
        .envs(env.iter().copied())
        .output()
        .expect("the example runs (scripts/test installs Open MPI)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{bin} on {ranks} ranks: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{bin}: {e}: {line}"))
}

fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("the --out directory")
        .map(|e| {
            let p = e.expect("an entry").path();
            let name = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read(&p).expect("readable"))
        })
        .collect();
    out.sort();
    out
}

/// Asserts that `dir` holds the files of `want`, byte for byte (`what` names the run), and
/// removes it.
fn same_files(dir: &Path, want: &[(String, Vec<u8>)], what: &str) {
    let got = files(dir);
    let names = |f: &[(String, Vec<u8>)]| f.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
    assert_eq!(names(&got), names(want), "{what}");
    for ((file, a), (_, b)) in got.iter().zip(want) {
        assert!(a == b, "{what}: {file} differs from one process's");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn every_example_on_two_to_four_ranks_equals_one_process() {
    for (name, bin, args) in examples() {
        let one = out_dir(name, 1);
        let one_json = run(bin, &args, 1, &one);
        assert_eq!(one_json["ranks"], 1, "{name}");
        let want = files(&one);
        assert!(!want.is_empty(), "{name} wrote no files");
        for ranks in 2..=4 {
            let dir = out_dir(name, ranks);
            let json = run(bin, &args, ranks, &dir);
            assert_eq!(json["ranks"], ranks as u64, "{name}");
            assert!(json["bytes_sent"].as_u64().is_some(), "{name}: {json}");
            if ["stencil", "jacobi", "cfd"].contains(&name) {
                // Iterations over the same partitions and holdings reuse their plans.
                let reused = json["plans_reused"].as_u64().unwrap_or(0);
                let derived = json["plans_derived"].as_u64().unwrap_or(0);
                assert!(
                    reused > 0,
                    "{name} on {ranks} ranks: {reused} reused, {derived} derived"
                );
            }
            if ranks == 4 {
                // Each rank holds the pieces its points use: a quarter of the stores, and
                // their halos, not all of them. A product's points read panels instead: on
                // a 2x2 grid half of each operand and a quarter of `C` (`gemm`); the fit
                // also reads all of `A`'s rows for `A.T @ b` (`lstsq`), less than one process.
                let peak = |j: &serde_json::Value| j["bytes_allocated_peak"].as_u64().unwrap_or(0);
                let (mine, whole) = (peak(&json), peak(&one_json));
                let (times, bound) = match name {
                    "gemm" => (4, 3),
                    "lstsq" => (1, 1),
                    _ => (2, 1),
                };
                assert!(
                    mine > 0 && mine * times < whole * bound,
                    "{name} on 4 ranks: rank 0 held {mine} bytes at most, one process {whole}"
                );
            }
            same_files(&dir, &want, &format!("{name} on {ranks} ranks"));
        }
        let _ = std::fs::remove_dir_all(&one);
    }
}

/// A product whose `k` (3,500 terms: four blocks of the canonical order) splits over layers
/// of ranks (2.5-D grids, `WEFT_MATMUL_GRID=RxCxL`, and the grid `auto` takes on 4 ranks for
/// this shape) gives one process's bytes on 1, 2 and 4 ranks, and reports its grid.
#[test]
fn products_over_grids_of_layers_equal_one_process() {
    four_blocks_equal_one_process(
        "gemm-layers",
        &[
            (1, "2x2x2", "2x2x2"),
            (2, "1x1x2", "1x1x2"),
            (2, "1x2x2", "1x2x2"),
            (4, "1x1x4", "1x1x4"),
            (4, "2x1x2", "2x1x2"),
            (4, "auto", "1x1x4"),
        ],
    );
}

/// Cannon's algorithm (`WEFT_MATMUL_GRID=cannon`, the largest square of ranks, or
/// `cannon:Q`) on 1, 2 and 4 ranks gives one process's bytes: its steps' skewed blocks and the
/// sum of each tile's blocks on its own rank.
#[test]
fn products_by_cannons_algorithm_equal_one_process() {
    four_blocks_equal_one_process(
        "gemm-cannon",
        &[
            (1, "cannon:2", "cannon 2x2"),
            (2, "cannon:2", "cannon 2x2"),
            (2, "cannon:4", "cannon 4x4"),
            (4, "cannon", "cannon 2x2"),
            (4, "cannon:4", "cannon 4x4"),
        ],
    );
}

/// [`grids_equal_one_process`] for `gemm --n 45 --k 3500` (four blocks of `k`), each run
/// `(ranks, WEFT_MATMUL_GRID, the grid gemm must report)`.
fn four_blocks_equal_one_process(name: &str, runs: &[(usize, &str, &str)]) {
    let args = ["--n", "45", "--k", "3500", "--iters", "1"];
    let runs: Vec<GridRun<'_>> = runs
        .iter()
        .map(|&(ranks, setting, grid)| (ranks, vec![("WEFT_MATMUL_GRID", setting)], grid))
        .collect();
    grids_equal_one_process(env!("CARGO_BIN_EXE_gemm"), name, &args, &runs);
}

/// A product of a matrix stored by rows by a long vector (`gemv --n 70 --k 9001`: rows by
/// parts) over grids of layers that split `k` (`WEFT_MATMUL_GRID=Rx1xL`), and by rows (the
/// automatic choice), gives one process's bytes on 1, 2 and 4 ranks, and reports its grid.
#[test]
fn products_by_a_vector_over_grids_of_layers_equal_one_process() {
    let args = ["--n", "70", "--k", "9001", "--iters", "1"];
    let grid = |ranks, setting, grid| (ranks, vec![("WEFT_MATMUL_GRID", setting)], grid);
    let runs = [
        grid(1, "1x1x4", "1x1x4"),
        grid(2, "auto", "2x1"),
        grid(2, "1x1x2", "1x1x2"),
        grid(2, "2x1x2", "2x1x2"),
        grid(4, "2x1x2", "2x1x2"),
        grid(4, "1x1x8", "1x1x8"),
        grid(4, "auto", "4x1"),
    ];
    grids_equal_one_process(env!("CARGO_BIN_EXE_gemv"), "gemv-layers", &args, &runs);
}

/// The automatic choice weighs a rank's memory: on 8 ranks a 2048-square product (two blocks
/// of `k`) takes the 2x2x2 grid of layers, which reads the fewest elements; with
/// `WEFT_RANK_MEMORY` below what that grid's points hold (4.7 million elements, 37.7 MB,
/// against 3.7 million, 29.4 MB, for a 4x2 grid's) it takes 4x2. Both give one process's
/// bytes.
#[test]
fn the_automatic_grid_fits_a_ranks_memory() {
    let args = ["--n", "2048", "--iters", "1", "--warmup", "0"];
    let runs = [
        (8, vec![("WEFT_MATMUL_GRID", "auto")], "2x2x2"),
        (
            8,
            vec![
                ("WEFT_MATMUL_GRID", "auto"),
                ("WEFT_RANK_MEMORY", "32000000"),
            ],
            "4x2",
        ),
    ];
    grids_equal_one_process(env!("CARGO_BIN_EXE_gemm"), "gemm-memory", &args, &runs);
}

/// One run of [`grids_equal_one_process`]: the ranks, the environment, the grid it must
/// report.
type GridRun<'a> = (usize, Vec<(&'a str, &'a str)>, &'a str);

/// Runs `bin` (`gemm` or `gemv`) with `args` on one process (the plugin's rows), then once
/// per `(ranks, environment, grid)` of `runs`: each reports that grid and writes one
/// process's bytes.
fn grids_equal_one_process(bin: &str, name: &str, args: &[&str], runs: &[GridRun<'_>]) {
    let one = out_dir(name, 1);
    let one_json = run_with(bin, args, 1, &one, &[("WEFT_MATMUL_GRID", "rows")]);
    assert_eq!(one_json["grid"], "1x1", "{one_json}");
    let want = files(&one);
    for (i, (ranks, env, grid)) in runs.iter().enumerate() {
        let dir = out_dir(&format!("{name}-{i}"), *ranks);
        let json = run_with(bin, args, *ranks, &dir, env);
        let what = format!("{env:?} on {ranks} ranks");
        assert_eq!(json["grid"], *grid, "{what}: {json}");
        same_files(&dir, &want, &what);
    }
    let _ = std::fs::remove_dir_all(&one);
}
