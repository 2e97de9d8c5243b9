//! Replays fuzz inputs through the checks of the `runtime_ops`, `kernel_exec`,
//! `kernel_write` and `host_shapes` targets, without libFuzzer: the files `WEFT_FUZZ_REPLAY` names
//! (colon-separated; a folder stands for the files in it) through the target `WEFT_FUZZ_TARGET` names (default `runtime_ops`), or,
//! without them, the four targets' committed corpora. `WEFT_FUZZ_TRACE=1` prints
//! `runtime_ops`' operations, and `kernel_write`'s kernels and results.

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
            "host_shapes" => weft_fuzz::host_shapes(&data),
            "kernel_write" => {
                weft_fuzz::kernel_write(&data);
            }
            other => panic!("no target `{other}`"),
        }
    }
}

#[test]
fn replay() {
    match std::env::var("WEFT_FUZZ_REPLAY") {
        Ok(list) => {
            let files: Vec<std::path::PathBuf> = list
                .split(':')
                .flat_map(|p| {
                    let p = std::path::PathBuf::from(p);
                    match std::fs::read_dir(&p) {
                        Ok(d) => {
                            let mut files: Vec<_> =
                                d.filter_map(|e| e.ok().map(|e| e.path())).collect();
                            files.sort();
                            files
                        }
                        Err(_) => vec![p],
                    }
                })
                .collect();
            let target = std::env::var("WEFT_FUZZ_TARGET").unwrap_or("runtime_ops".into());
            run(&target, &files);
        }
        Err(_) => {
            for target in ["runtime_ops", "kernel_exec", "kernel_write", "host_shapes"] {
                run(target, &corpus(target));
            }
        }
    }
}
