//! Message plans run over MPI, `mpirun -n 1..4` (`dist_check`): on every rank, every element
//! its points read holds its last writer's value; a binary started without `mpirun` is one
//! rank; and a rank that fails ends the job on every rank with an error naming it.
#![cfg(feature = "mpi")]

use std::process::{Command, Output};

fn mpirun(ranks: usize, args: &[&str]) -> Output {
    Command::new("mpirun")
        .args(["--oversubscribe", "-n", &ranks.to_string()])
        .arg(env!("CARGO_BIN_EXE_dist_check"))
        .args(args)
        // Containers and CI run as root; Open MPI refuses that without these.
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .output()
        .expect("mpirun runs (scripts/test installs Open MPI)")
}

/// The JSON line `dist_check` prints last on `ranks` ranks with `args`, which must end
/// cleanly; it names as many ranks.
fn json_line(ranks: usize, args: &[&str]) -> serde_json::Value {
    let out = mpirun(ranks, args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{ranks} ranks {args:?}: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout.lines().last().unwrap_or_default();
    let json: serde_json::Value = serde_json::from_str(line).expect("one JSON line");
    assert_eq!(json["ranks"], ranks, "{args:?}: {json}");
    json
}

#[test]
fn plans_deliver_every_element_on_one_to_four_ranks() {
    let mut sent = Vec::new();
    for ranks in 1..=4 {
        let json = json_line(ranks, &[]);
        sent.push(json["bytes_sent"].as_u64().expect("bytes_sent"));
    }
    assert_eq!(sent[0], 0, "one rank sends nothing");
    assert!(sent[1..].iter().all(|&b| b > 0), "{sent:?}");
}

#[test]
fn without_mpirun_the_binary_is_one_rank() {
    let out = Command::new(env!("CARGO_BIN_EXE_dist_check"))
        .output()
        .expect("dist_check runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"ranks\":1"));
}

#[test]
fn a_rank_that_fails_ends_every_rank_with_its_error() {
    let start = std::time::Instant::now();
    let out = mpirun(3, &["--fault-on-rank", "1"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("rank 1 of 3 failed: a kernel fault"),
        "the error names the rank: {stderr}"
    );
    assert!(
        start.elapsed() < std::time::Duration::from_secs(60),
        "the other ranks did not hang"
    );
}

/// The outcomes `dist_check` prints, in rank order, for a job mode on 3 ranks (`args`), which
/// must end cleanly.
fn job_outcomes(args: &[&str]) -> Vec<String> {
    let json = json_line(3, args);
    let outcomes: Vec<String> = json["outcomes"]
        .as_array()
        .expect("outcomes")
        .iter()
        .map(|o| o.as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(outcomes.len(), 3, "{args:?}: {json}");
    outcomes
}

/// On a job's own communicator, rank 1's part of the job stops before its first exchange,
/// told to (as after a failed task) or cancelled: the other ranks' runs fail with a stop
/// naming it instead of waiting for it, rank 0 gets every rank's outcome, and the ranks are
/// in step again on the world.
#[test]
fn a_job_stopped_on_one_rank_stops_the_others_and_they_meet_again() {
    for (flag, why) in [
        ("--stop-on-rank", "a fault, on purpose"),
        ("--cancel-on-rank", "cancelled"),
    ] {
        let start = std::time::Instant::now();
        let outcomes = job_outcomes(&[flag, "1"]);
        assert!(outcomes[1].contains(why), "{flag}: {outcomes:?}");
        for r in [0, 2] {
            assert!(
                outcomes[r].contains(&format!("stopped: rank 1 stopped: {why}")),
                "{flag}: rank {r}: {outcomes:?}"
            );
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "{flag}: the other ranks did not hang"
        );
    }
}

/// Every rank's part stops at once: rank 1 first, the others when its notice has reached
/// them but before they read it. They take rank 1's notice as why (and send none of their
/// own), and rank 0 still gets every outcome.
#[test]
fn ranks_stopping_at_once_take_the_first_notice() {
    let outcomes = job_outcomes(&["--stop-on-every-rank-after", "1"]);
    for r in [0, 2] {
        assert_eq!(
            outcomes[r], "rank 1 stopped: a fault, on purpose",
            "rank {r}: {outcomes:?}"
        );
    }
}
