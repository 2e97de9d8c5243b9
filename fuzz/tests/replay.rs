//! Replays fuzz inputs through the checks of the `runtime_ops` and `kernel_exec` targets,
//! without libFuzzer: the files `WEFT_FUZZ_REPLAY` names (colon-separated) through the
//! target `WEFT_FUZZ_TARGET` names (default `runtime_ops`), or, without them, both targets'
//! committed corpora. `WEFT_FUZZ_TRACE=1` prints `runtime_ops`' operations.

fn corpus(target: &str) -> Vec<std::path::PathBuf> {
    let dir = format!("{}/corpus/{target}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default()
}

fn run(target: &str, files: &[std::path::PathBuf]) {
    for f in files {
        let data = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        match target {
            "runtime_ops" => weft_fuzz::runtime_ops(&data),
            "kernel_exec" => weft_fuzz::kernel_exec(&data),
            other => panic!("no target `{other}`"),
        }
    }
}

#[test]
fn replay() {
    match std::env::var("WEFT_FUZZ_REPLAY") {
        Ok(list) => {
            let files: Vec<std::path::PathBuf> = list.split(':').map(Into::into).collect();
            let target = std::env::var("WEFT_FUZZ_TARGET").unwrap_or("runtime_ops".into());
            run(&target, &files);
        }
        Err(_) => {
            for target in ["runtime_ops", "kernel_exec"] {
                run(target, &corpus(target));
            }
        }
    }
}
