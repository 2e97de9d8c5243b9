//! `sdk/GUIDE.md` and the README cannot drift from code that builds: every block the guide
//! marks `<!-- excerpt: FILE -->` must appear word for word in that file of a plugin made from
//! the template (named `my-stats`), or, for a FILE starting with `/`, in that file of this
//! workspace; the test suite builds and runs such a plugin (`tests/tests/all/template.rs`)
//! and the workspace's plugins. Every block the README marks so must appear line for line
//! (indentation aside) in FILE, a path from the workspace root; its application and tenant
//! examples are `tests/tests/all/readme.rs`'s, which runs them.

use std::path::Path;

use weft_plugin_build::new_plugin;

/// The guide's excerpts: (file, the block's text).
fn excerpts(guide: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = guide.lines();
    while let Some(line) = lines.next() {
        let Some(file) = line
            .strip_prefix("<!-- excerpt: ")
            .and_then(|l| l.strip_suffix(" -->"))
        else {
            continue;
        };
        let fence = lines.next().unwrap_or_default();
        assert!(
            fence.starts_with("```"),
            "an excerpt of {file} is a fenced block"
        );
        let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        out.push((file.to_string(), body.join("\n")));
    }
    out
}

#[test]
fn the_guides_code_is_the_templates() {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let guide = std::fs::read_to_string(manifest_dir.join("../GUIDE.md")).expect("GUIDE.md");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("guide-{}", std::process::id()))
        .join("my-stats");
    let _ = std::fs::remove_dir_all(&dir);
    new_plugin(&dir, "my-stats", &manifest_dir.join("..")).expect("the template is written");
    let found = excerpts(&guide);
    assert!(found.len() >= 8, "the guide shows the template: {found:?}");
    for (file, block) in &found {
        let path = match file.strip_prefix('/') {
            Some(in_workspace) => manifest_dir.join("../..").join(in_workspace),
            None => dir.join(file),
        };
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(
            text.contains(block.as_str()),
            "GUIDE.md's excerpt of {file} is not in it:\n{block}"
        );
    }
    let _ = std::fs::remove_dir_all(dir.parent().expect("temp dir"));
}

#[test]
fn the_readmes_code_is_in_the_workspace() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let found = excerpts(&readme);
    let files: Vec<&str> = found.iter().map(|(f, _)| f.as_str()).collect();
    for expected in ["tests/tests/all/readme.rs", "plugins/stats/src/lib.rs"] {
        assert!(
            files.contains(&expected),
            "the README shows {expected}: {files:?}"
        );
    }
    for (file, block) in &found {
        let text =
            std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        let wanted: Vec<&str> = block.lines().map(str::trim).collect();
        assert!(
            !wanted.is_empty() && lines.windows(wanted.len()).any(|w| w == wanted.as_slice()),
            "README.md's excerpt of {file} is not in it:\n{block}"
        );
    }
}
