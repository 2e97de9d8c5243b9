//! The SDK's template, as a plugin author uses it: `weft_plugin_build::new_plugin` writes a
//! crate outside this workspace, `weft-plugin-build` compiles it into a component, and the
//! component loads beside numeric, fuses with numeric's tasks and computes what plain Rust
//! computes. (The crate builds offline against this workspace's lock file, so every
//! dependency is already in cargo's cache.)

use std::path::{Path, PathBuf};

use weft::{Config, Value};
use weft_ir::DType;
use weft_plugin_build::{Build, Profile, new_plugin};

const OPS: &str = "plugin:my-stats/ops#";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// Makes the plugin from the template and builds it; returns its component.
fn build_template_plugin() -> Vec<u8> {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let dir = tmp
        .join(format!("template-{}", std::process::id()))
        .join("my-stats");
    let _ = std::fs::remove_dir_all(&dir);
    let manifest =
        new_plugin(&dir, "my-stats", &workspace().join("sdk")).expect("the template is written");
    std::fs::copy(workspace().join("Cargo.lock"), dir.join("Cargo.lock")).expect("lock file");
    let build = Build {
        cargo: PathBuf::from(option_env!("CARGO").unwrap_or("cargo")),
        manifest,
        package: "my-stats".into(),
        // Kept between runs (the crate's name and path change, its dependencies do not).
        target_dir: tmp
            .parent()
            .expect("target dir")
            .join("wasm-plugins-template"),
        profile: Profile::Small,
        offline: true,
    };
    let component = build.component().expect("the template plugin builds");
    let _ = std::fs::remove_dir_all(dir.parent().expect("temp dir"));
    component
}

#[test]
fn a_plugin_from_the_template_builds_loads_fuses_and_matches_plain_rust() {
    let component = build_template_plugin();
    let np = weft_tests::numeric_with(Config {
        threads: 2,
        component_cache: None,
        explain: true,
        ..Config::default()
    });
    let stats = np
        .runtime(|rt| rt.load(&component))
        .expect("the plugin loads beside numeric");
    let call = |name: &str, args: &[Value]| {
        np.runtime(|rt| rt.invoke(stats, &format!("{OPS}{name}"), args))
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .unwrap_or_else(|| panic!("{name} returned nothing"))
    };
    let n = 1001u64;
    let x = np.linspace(0.0, 1.0, n, DType::F64);
    let y = &x + 1.0;
    let scaled = call("scale", &[Value::try_from(&y).unwrap(), 2.5.into()]);
    let scaled = np
        .from_value(scaled, DType::F64, &[n])
        .expect("an f64 vector");
    let z = scaled.sqrt();
    let total = call("total", &[Value::try_from(&z).unwrap()]);
    let total = np.from_value(total, DType::F64, &[]).expect("a 0-d array");

    // Against plain Rust, from the same x.
    let xs = x.to_vec().unwrap();
    let want: Vec<f64> = xs.iter().map(|v| ((v + 1.0) * 2.5).sqrt()).collect();
    assert_eq!(z.to_vec().unwrap(), want, "element-wise results are exact");
    let want_total: f64 = want.iter().sum();
    let got_total = total.item().unwrap();
    assert!(
        (got_total - want_total).abs() <= 1e-12 * want_total.abs(),
        "{got_total} against {want_total}"
    );

    // The plugin's tasks fused with numeric's: one explanation lists both.
    let text = np.runtime(|rt| rt.take_explanations()).join("");
    let fused_block = text
        .split("weft fusion:")
        .find(|block| block.contains("my-stats.scale.r1") && block.contains("numeric."))
        .unwrap_or_else(|| panic!("scale did not fuse with numeric's tasks:\n{text}"));
    assert!(fused_block.contains("fused"), "{fused_block}");

    // Its errors name it and the call.
    let ints = np.zeros(&[3], DType::I64);
    let e = np
        .runtime(|rt| {
            rt.invoke(
                stats,
                &format!("{OPS}total"),
                &[Value::try_from(&ints).unwrap()],
            )
        })
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("my-stats") && e.contains("total") && e.contains("f64"),
        "{e}"
    );
}
