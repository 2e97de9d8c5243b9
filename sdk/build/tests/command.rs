//! The `weft-plugin-build` command: it builds a plugin crate into the same component that
//! `plugins/artifacts` embeds, and refuses a bad command line with exit code 2.

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_weft-plugin-build");

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("the workspace root")
        .to_path_buf()
}

#[test]
fn builds_the_component_that_artifacts_embeds() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    // plugins/artifacts builds into <target>/wasm-plugins: reusing it keeps this fast.
    let target_dir = tmp.parent().expect("target dir").join("wasm-plugins");
    let out = tmp.join(format!("misbehave-{}.wasm", std::process::id()));
    let manifest = workspace().join("tests/plugins/misbehave/Cargo.toml");
    let run = Command::new(BIN)
        .arg("--manifest-path")
        .arg(&manifest)
        .args(["--profile", "plugin", "--target-dir"])
        .arg(&target_dir)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("the command runs");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let bytes = std::fs::read(&out).expect("the component was written");
    // A component's preamble: the Wasm magic, then version 0x0d and layer 1.
    assert_eq!(&bytes[..8], b"\0asm\x0d\x00\x01\x00");
    assert_eq!(
        bytes,
        weft_plugin_artifacts::TEST_MISBEHAVE,
        "the same component as the embedded one"
    );
    let said = String::from_utf8_lossy(&run.stdout);
    assert!(said.contains("weft-test-misbehave"), "{said}");
}

#[test]
fn a_bad_command_line_exits_with_2() {
    for args in [&[][..], &["--out"][..], &["--bogus", "x"][..]] {
        let run = Command::new(BIN).args(args).output().expect("runs");
        assert_eq!(run.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&run.stderr).contains("usage:"));
    }
}
