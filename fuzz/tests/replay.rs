//! Replays the inputs named by `WEFT_FUZZ_REPLAY` (files, colon-separated) through every
//! target's checks, without libFuzzer: `WEFT_FUZZ_TRACE=1` prints the runtime operations.
//! Without the variable it replays the committed `runtime_ops` corpus.

#[test]
fn replay() {
    let files: Vec<std::path::PathBuf> = match std::env::var("WEFT_FUZZ_REPLAY") {
        Ok(list) => list.split(':').map(Into::into).collect(),
        Err(_) => std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/corpus/runtime_ops"))
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default(),
    };
    for f in files {
        let data = std::fs::read(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        weft_fuzz::runtime_ops(&data);
    }
}
