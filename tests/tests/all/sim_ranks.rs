//! The distributed runtime on the simulated GPU: programs on 2 ranks of `mpirun`, each rank's
//! kernels run by the GPU back end on its own simulated GPU (`WEFT_DEVICE=sim`, `--device
//! sim`), with every task's plan compared across ranks (`WEFT_CHECK_REPLICATION=1`), give the
//! bits of one process on the CPU: the fusion property tests' random programs
//! (`rank_programs`, as `ranks.rs` runs them on the CPU) and a few examples, whose `--out`
//! files must be the same bytes (as `examples/tests/all/ranks.rs` compares them on the CPU).
#![cfg(feature = "mpi")]

use std::path::Path;
use std::process::{Command, Output};

use crate::sim_examples::{example_bin, npy_difference, npy_files, out_dir};

/// `cmd` with Open MPI allowed to run as root (containers, CI), and its output.
fn output(mut cmd: Command, what: &str) -> Output {
    let out = cmd
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        // No PTX check (`WEFT_PTX_CHECK`) in the children: ptx_modules.rs emits and assembles
        // every example's kernels, and the simulated GPU loads and runs the PTX itself.
        .env_remove("WEFT_PTX_CHECK")
        .output()
        .expect("it runs (scripts/test installs Open MPI)");
    assert!(
        out.status.success(),
        "{what}: {}\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    out
}

/// `bin args` on 2 ranks of `mpirun`, plans compared across ranks.
fn two_ranks(bin: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("mpirun");
    cmd.args(["--oversubscribe", "-n", "2"])
        .arg(bin)
        .args(args)
        .env("WEFT_CHECK_REPLICATION", "1");
    cmd
}

#[test]
fn random_programs_on_two_simulated_gpus_equal_one_cpu_process() {
    let bin = Path::new(env!("CARGO_BIN_EXE_rank_programs"));
    let args = ["24", "1"];
    let mut one = Command::new(bin);
    one.args(args).env("WEFT_DEVICE", "cpu");
    let want =
        String::from_utf8_lossy(&output(one, "rank_programs on the CPU").stdout).into_owned();
    assert_eq!(want.lines().count(), 24, "{want}");
    let mut sim = two_ranks(bin, &args);
    sim.env("WEFT_DEVICE", "sim");
    let got = output(sim, "rank_programs on 2 ranks, simulated GPUs");
    // One line per program: a hash of the bits of every array it holds and of every read.
    assert_eq!(
        String::from_utf8_lossy(&got.stdout),
        want,
        "2 ranks on simulated GPUs against one process on the CPU"
    );
}

#[test]
fn examples_on_two_simulated_gpus_equal_one_cpu_process() {
    // Sizes that do not divide evenly between the ranks: halos (the stencil, CFD, the
    // Poisson matrix's rows), reductions across ranks (CG's dot products) and gathers.
    let examples: [(&str, &[&str]); 4] = [
        ("stencil", &["--n", "37", "--iters", "3"]),
        ("cg", &["--grid", "23"]),
        ("cfd", &["--n", "29", "--iters", "2", "--nit", "5"]),
        ("black_scholes", &["--n", "10007", "--iters", "2"]),
    ];
    for (name, args) in examples {
        let bin = example_bin(name);
        let (cpu_dir, sim_dir) = (
            out_dir(&format!("{name}-1cpu")),
            out_dir(&format!("{name}-2sim")),
        );
        let mut one = Command::new(&bin);
        one.args(args)
            .args(["--threads", "1", "--device", "cpu", "--out"])
            .arg(&cpu_dir);
        output(one, &format!("{name} on the CPU"));
        let mut sim = two_ranks(&bin, args);
        sim.args(["--threads", "1", "--device", "sim", "--out"])
            .arg(&sim_dir);
        let out = output(sim, &format!("{name} on 2 ranks, simulated GPUs"));
        let line = String::from_utf8_lossy(&out.stdout);
        let json: serde_json::Value = serde_json::from_str(line.lines().last().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{name}: {e}: {line}"));
        assert_eq!(json["ranks"], 2, "{name}: {json}");
        let (want, got) = (npy_files(&cpu_dir), npy_files(&sim_dir));
        assert!(!want.is_empty(), "{name} wrote no files");
        let names = |f: &[(String, Vec<u8>)]| f.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
        assert_eq!(names(&got), names(&want), "{name}: the files written");
        let differ: Vec<String> = got
            .iter()
            .zip(&want)
            .filter_map(|((file, g), (_, w))| npy_difference(g, w).map(|d| format!("{file}: {d}")))
            .collect();
        assert!(
            differ.is_empty(),
            "{name} on 2 ranks of simulated GPUs differs from one CPU process:\n{}",
            differ.join("\n")
        );
        let _ = std::fs::remove_dir_all(&cpu_dir);
        let _ = std::fs::remove_dir_all(&sim_dir);
    }
}
