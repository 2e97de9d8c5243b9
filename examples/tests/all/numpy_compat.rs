//! NumPy reads the `.npy` files written by `weft_examples::npy` (and by an example's `--out`),
//! and `weft_examples::npy` reads files written by NumPy's `np.save`. They need `python3` with
//! NumPy, which `scripts/test` installs; without it they fail and say so.

use std::path::{Path, PathBuf};
use std::process::Command;

use weft_examples::npy::{self, Npy, NpyData};

fn require_numpy() {
    let ok = Command::new("python3")
        .args(["-c", "import numpy"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "these tests need python3 with NumPy: run scripts/test (which installs it), \
         or `python3 -m pip install numpy`"
    );
}

fn temp_dir(name: &str) -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("numpy-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

const DESCRIBE: &str = r#"
import json, sys
import numpy as np
for path in sys.argv[1:]:
    a = np.load(path, allow_pickle=False)
    print(json.dumps([path, list(a.shape), a.dtype.str, bool(a.flags.c_contiguous), a.tobytes().hex()]))
"#;

/// What NumPy sees in each file: shape, dtype string, and data bytes.
fn numpy_describe(paths: &[PathBuf]) -> Vec<(Vec<u64>, String, String)> {
    let out = Command::new("python3")
        .arg("-c")
        .arg(DESCRIBE)
        .args(paths)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "numpy failed to load the files:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    stdout
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).expect("json");
            assert_eq!(v[3], true, "not C-contiguous: {line}");
            let shape = v[1]
                .as_array()
                .expect("shape")
                .iter()
                .map(|d| d.as_u64().expect("dim"))
                .collect();
            (
                shape,
                v[2].as_str().expect("dtype").to_string(),
                v[4].as_str().expect("hex").to_string(),
            )
        })
        .collect()
}

#[test]
fn numpy_reads_what_we_write() {
    require_numpy();
    let dir = temp_dir("write");
    let cases: Vec<(&str, Vec<u64>, NpyData)> = vec![
        (
            "f8.npy",
            vec![5],
            NpyData::F64(vec![1.0, -2.5, 1e-300, f64::MAX, 0.1]),
        ),
        ("scalar.npy", vec![], NpyData::F64(vec![0.02])),
        (
            "matrix.npy",
            vec![3, 4],
            NpyData::F64((0..12).map(f64::from).collect()),
        ),
        (
            "f4.npy",
            vec![2, 2],
            NpyData::F32(vec![1.5, -0.0, 3.25, 1e-3]),
        ),
        (
            "i8.npy",
            vec![4],
            NpyData::I64(vec![i64::MIN, -1, 0, i64::MAX]),
        ),
        ("i4.npy", vec![2], NpyData::I32(vec![-7, 7])),
        (
            "b1.npy",
            vec![2, 3],
            NpyData::Bool(vec![true, false, true, true, false, false]),
        ),
        ("empty.npy", vec![0, 5], NpyData::F64(vec![])),
        (
            "cube.npy",
            vec![2, 1, 3],
            NpyData::F64(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        ),
    ];
    let mut paths = Vec::new();
    for (name, shape, data) in &cases {
        let path = dir.join(name);
        npy::write(&path, shape, data.clone()).expect("writes");
        paths.push(path);
    }
    let seen = numpy_describe(&paths);
    assert_eq!(seen.len(), cases.len());
    for ((name, shape, data), (np_shape, np_dtype, np_hex)) in cases.iter().zip(seen) {
        assert_eq!(&np_shape, shape, "{name}: shape");
        assert_eq!(np_dtype, data.descr(), "{name}: dtype");
        assert_eq!(np_hex, hex(&data.to_bytes()), "{name}: data");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn numpy_reads_an_examples_output() {
    require_numpy();
    let dir = temp_dir("example");
    let out = Command::new(env!("CARGO_BIN_EXE_black_scholes"))
        .args(["--n", "33", "--iters", "1", "--out"])
        .arg(&dir)
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names = ["S", "X", "T", "R", "V", "call", "put"];
    let paths: Vec<PathBuf> = names.iter().map(|n| dir.join(format!("{n}.npy"))).collect();
    let seen = numpy_describe(&paths);
    for ((name, path), (shape, dtype, data)) in names.iter().zip(&paths).zip(seen) {
        let ours = npy::read(path).expect("reads");
        let want: Vec<u64> = if matches!(*name, "R" | "V") {
            vec![]
        } else {
            vec![33]
        };
        assert_eq!(shape, want, "{name}: shape as NumPy sees it");
        assert_eq!(dtype, "<f8", "{name}");
        assert_eq!(data, hex(&ours.data.to_bytes()), "{name}: data");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn we_read_what_numpy_writes() {
    require_numpy();
    let dir = temp_dir("read");
    let script = r#"
import sys
import numpy as np
d = sys.argv[1]
np.save(d + "/f8.npy", np.arange(12, dtype="<f8").reshape(3, 4) / 8)
np.save(d + "/scalar.npy", np.float64(0.3))
np.save(d + "/f4.npy", np.array([1.5, -2.0], dtype="<f4"))
np.save(d + "/i8.npy", np.array([[-3], [4]], dtype="<i8"))
np.save(d + "/b1.npy", np.array([True, False, True]))
np.save(d + "/slice.npy", np.arange(20.0).reshape(4, 5)[1:3, ::2])
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(&dir)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |name: &str| -> Npy { npy::read(dir.join(name)).expect("reads") };
    let f8 = read("f8.npy");
    assert_eq!(f8.shape.as_slice(), &[3, 4]);
    assert_eq!(
        f8.data,
        NpyData::F64((0..12).map(|i| f64::from(i) / 8.0).collect())
    );
    let s = read("scalar.npy");
    assert_eq!((s.shape, s.data), (vec![], NpyData::F64(vec![0.3])));
    assert_eq!(read("f4.npy").data, NpyData::F32(vec![1.5, -2.0]));
    let i8 = read("i8.npy");
    assert_eq!((i8.shape, i8.data), (vec![2, 1], NpyData::I64(vec![-3, 4])));
    assert_eq!(read("b1.npy").data, NpyData::Bool(vec![true, false, true]));
    let sl = read("slice.npy");
    assert_eq!(sl.shape.as_slice(), &[2, 3]);
    assert_eq!(sl.data, NpyData::F64(vec![5.0, 7.0, 9.0, 10.0, 12.0, 14.0]));
    let _ = std::fs::remove_dir_all(&dir);
}
