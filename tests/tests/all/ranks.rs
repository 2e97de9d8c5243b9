//! A task that fails on one rank only ends the whole job with its error and the rank that
//! raised it, instead of leaving the other ranks waiting (`rank_fault`, under `mpirun`); and
//! `WEFT_CHECK_REPLICATION=1` stops a program whose ranks diverge (`rank_diverge`).
#![cfg(feature = "mpi")]

use std::process::Command;

#[test]
fn a_fault_on_one_rank_ends_every_rank_with_its_error() {
    let bin = env!("CARGO_BIN_EXE_rank_fault");
    // One process: the error comes back to the program.
    let out = Command::new(bin).output().expect("rank_fault runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("take"), "{stderr}");
    // Three ranks: the last piece's owner faults; the job ends on every rank.
    let start = std::time::Instant::now();
    let out = Command::new("mpirun")
        .args(["--oversubscribe", "-n", "3", bin])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun runs (scripts/test installs Open MPI)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("weft: rank 2 of 3 failed, ending the job"),
        "the error names the rank: {stderr}"
    );
    assert!(stderr.contains("take"), "and the operation: {stderr}");
    assert!(
        start.elapsed() < std::time::Duration::from_secs(60),
        "no rank waited for the one that failed"
    );
}

fn mpirun(bin: &str, ranks: usize, check: bool) -> std::process::Output {
    let mut cmd = Command::new("mpirun");
    cmd.args(["--oversubscribe", "-n", &ranks.to_string(), bin])
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    if check {
        cmd.env("WEFT_CHECK_REPLICATION", "1");
    }
    cmd.output()
        .expect("mpirun runs (scripts/test installs Open MPI)")
}

#[test]
fn the_replication_check_names_the_first_task_that_differs() {
    let bin = env!("CARGO_BIN_EXE_rank_diverge");
    let out = mpirun(bin, 3, true);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("replicated control differs across ranks at task"),
        "{stderr}"
    );
    assert!(stderr.contains("rank 1's plan is not rank 0's"), "{stderr}");
    // One rank cannot diverge from itself: the same program passes the check.
    let out = Command::new(bin)
        .env("WEFT_CHECK_REPLICATION", "1")
        .output()
        .expect("rank_diverge runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The fusion property tests' random programs (`weft_tests::programs`), fused, on 2 and 3
/// ranks with every plan compared across ranks: every array and every read equals one
/// process's, bit for bit. (This found a bug: an output took over an input's buffer before
/// the input's elements from other ranks had landed in it.)
#[test]
fn random_programs_on_two_and_three_ranks_equal_one_process() {
    let bin = env!("CARGO_BIN_EXE_rank_programs");
    let args = ["24", "1"];
    let one = Command::new(bin)
        .args(args)
        .output()
        .expect("rank_programs runs");
    assert!(
        one.status.success(),
        "{}",
        String::from_utf8_lossy(&one.stderr)
    );
    let want = String::from_utf8_lossy(&one.stdout).into_owned();
    assert_eq!(want.lines().count(), 24, "{want}");
    for ranks in [2, 3] {
        let out = Command::new("mpirun")
            .args(["--oversubscribe", "-n", &ranks.to_string(), bin])
            .args(args)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env("WEFT_CHECK_REPLICATION", "1")
            .output()
            .expect("mpirun runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), want, "{ranks} ranks");
    }
}

/// Dense products (`rank_products`) on 1 to 4 ranks, over the plugin's rows, the automatic
/// grid and grids set by hand, with every plan compared across ranks: every product's bits
/// equal one process's. On 4 ranks the automatic grid (2x2) moves fewer bytes than the rows.
#[test]
fn products_on_one_to_four_ranks_and_every_grid_equal_one_process() {
    let bin = env!("CARGO_BIN_EXE_rank_products");
    let run = |ranks: usize, grid: &str| {
        let mut cmd = if ranks == 1 {
            Command::new(bin)
        } else {
            let mut c = Command::new("mpirun");
            c.args(["--oversubscribe", "-n", &ranks.to_string(), bin]);
            c
        };
        let out = cmd
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env("WEFT_CHECK_REPLICATION", "1")
            .env("WEFT_MATMUL_GRID", grid)
            .output()
            .expect("rank_products runs (scripts/test installs Open MPI)");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{ranks} ranks, {grid}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (products, traffic): (Vec<&str>, Vec<&str>) =
            stdout.lines().partition(|l| !l.starts_with("traffic:"));
        let sent: u64 = traffic
            .first()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|b| b.parse().ok())
            .unwrap_or_else(|| panic!("a traffic line: {stdout}"));
        (products.join("\n"), sent)
    };
    let (want, _) = run(1, "rows");
    assert_eq!(want.lines().count(), 6, "{want}");
    for (ranks, grids) in [
        (1, &["2x2", "3x1"][..]),
        (2, &["rows", "auto", "1x2", "2x2"][..]),
        (3, &["auto", "1x3", "3x2"][..]),
        (4, &["rows", "auto", "4x1", "1x4"][..]),
    ] {
        for grid in grids {
            let (got, _) = run(ranks, grid);
            assert_eq!(got, want, "{ranks} ranks, WEFT_MATMUL_GRID={grid}");
        }
    }
    let (_, rows) = run(4, "rows");
    let (_, grid) = run(4, "2x2");
    assert!(
        grid < rows,
        "4 ranks: {grid} bytes sent on 2x2, {rows} by rows"
    );
}
