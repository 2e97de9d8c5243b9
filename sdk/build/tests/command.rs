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

#[test]
fn new_refuses_bad_names_and_existing_crates() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("new-{}", std::process::id()));
    for name in ["Bad", "9lives", "a_b", "trailing-", "dou--ble"] {
        let run = Command::new(BIN)
            .args(["new"])
            .arg(tmp.join(name))
            .args(["--name", name])
            .output()
            .expect("runs");
        assert_eq!(run.status.code(), Some(1), "{name}");
        assert!(
            String::from_utf8_lossy(&run.stderr).contains("is not a plugin name"),
            "{name}"
        );
    }
    let dir = tmp.join("fine");
    let make = || {
        Command::new(BIN)
            .args(["new"])
            .arg(&dir)
            .args(["--name", "fine-1"])
            .output()
            .expect("runs")
    };
    assert!(make().status.success());
    for file in [
        "Cargo.toml",
        "src/lib.rs",
        "wit/plugin.wit",
        "wit/deps/weft-plugin/weft.wit",
    ] {
        let text = std::fs::read_to_string(dir.join(file)).expect(file);
        assert!(!text.contains("{{"), "{file} has an unfilled placeholder");
    }
    let lib = std::fs::read_to_string(dir.join("src/lib.rs")).expect("lib.rs");
    assert!(
        lib.contains("plugin::fine_1::ops::Guest"),
        "the module name is snake case"
    );
    let again = make();
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already holds a crate"));
    let _ = std::fs::remove_dir_all(&tmp);
}
