//! stats' 3x3 box blur (`src/image.rs`, the guide's neighbourhood kernel) in the real host,
//! built from this crate by the SDK's harness as a plugin author's test builds it: its results
//! against plain Rust in f32 and f64 on one and three pieces, what fuses with it, and its
//! errors.

use weft_plugin_test::weft::Range;
use weft_plugin_test::{Config, DType, PluginTest, Value, fused};

/// stats, built from this crate (once for the whole test binary), beside numeric, with the
/// preferred launch splitting arrays into `pieces` tiles.
fn stats(pieces: u64) -> PluginTest {
    let config = Config {
        pieces,
        ..PluginTest::config()
    };
    PluginTest::build_with(env!("CARGO_MANIFEST_DIR"), config).expect("stats builds and loads")
}

/// An image of `rows` x `cols` irregular values, exact in f32.
fn pixels(rows: usize, cols: usize) -> Vec<f64> {
    (0..rows * cols)
        .map(|i| ((i * 7919) % 101) as f64 / 8.0 - 6.0)
        .collect()
}

/// The 3x3 box blur in plain Rust, edges repeated: the nine neighbours summed in row-major
/// order from zero, then divided by 9, in the arithmetic of `T`.
fn blur<T>(x: &[T], rows: usize, cols: usize, zero: T, nine: T) -> Vec<T>
where
    T: Copy + std::ops::Add<Output = T> + std::ops::Div<Output = T>,
{
    let at = |r: usize, c: usize, dr: isize, dc: isize| {
        let r = r.saturating_add_signed(dr).min(rows - 1);
        let c = c.saturating_add_signed(dc).min(cols - 1);
        x[r * cols + c]
    };
    let mut out = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        for c in 0..cols {
            let mut sum = zero;
            for dr in -1..=1 {
                for dc in -1..=1 {
                    sum = sum + at(r, c, dr, dc);
                }
            }
            out.push(sum / nine);
        }
    }
    out
}

fn arg(a: &weft_plugin_test::Array) -> Value {
    Value::try_from(a).expect("a numeric array is a store")
}

#[test]
fn the_box_blur_matches_plain_rust_in_f32_and_f64_on_one_and_three_pieces() {
    for pieces in [1, 3] {
        let t = stats(pieces);
        for (rows, cols) in [(37, 23), (1, 1), (2, 5), (6, 1)] {
            let values = pixels(rows, cols);
            let shape = [rows as u64, cols as u64];
            for dtype in [DType::F32, DType::F64] {
                let x = t.numeric().from_f64s(&shape, &values, dtype);
                let got = t
                    .call_array("box_blur", &[arg(&x)], dtype, &shape)
                    .expect("box-blur runs")
                    .to_vec()
                    .expect("the blurred image");
                let want: Vec<f64> = if dtype == DType::F32 {
                    let x32: Vec<f32> = values.iter().map(|&v| v as f32).collect();
                    let want = blur(&x32, rows, cols, 0.0f32, 9.0f32);
                    want.into_iter().map(f64::from).collect()
                } else {
                    blur(&values, rows, cols, 0.0, 9.0)
                };
                // Exact: the same operations in the same order, IEEE in both.
                let differs = (got.iter().zip(&want)).position(|(g, w)| g.to_bits() != w.to_bits());
                assert!(
                    got.len() == want.len() && differs.is_none(),
                    "{dtype} {rows}x{cols} on {pieces} piece(s): {} elements, {} wanted; \
                     first difference at (row, column) {:?}: {:?}",
                    got.len(),
                    want.len(),
                    differs.map(|i| (i / cols, i % cols)),
                    differs.map(|i| (got[i], want[i])),
                );
            }
        }
        // A view is indexed as its own array: the blur of rows 3.. of a larger image is the
        // blur of those rows alone.
        let (rows, cols) = (30, 7);
        let values = pixels(rows, cols);
        let x = t.numeric().from_vec(&[rows as u64, cols as u64], &values);
        let lower = x.slice(&[Range::from(3), Range::all()]);
        let got = t
            .call_array("box_blur", &[arg(&lower)], DType::F64, &[27, 7])
            .expect("box-blur of a view");
        let want = blur(&values[3 * cols..], rows - 3, cols, 0.0, 9.0);
        assert_eq!(
            got.to_vec().expect("read"),
            want,
            "a view, {pieces} piece(s)"
        );
    }
}

#[test]
fn the_blur_fuses_with_its_producer_on_one_piece_and_with_its_consumers_on_any() {
    for pieces in [1, 3] {
        let t = stats(pieces);
        let np = t.numeric();
        let (rows, cols) = (40, 9);
        let shape = [rows as u64, cols as u64];
        let values = pixels(rows, cols);
        let x = np.from_f64s(&shape, &values, DType::F64);
        x.to_vec().expect("x is made before what follows");
        t.explanations();

        // A producer: numeric writes `y` tiled; the blur reads it whole.
        let y = &x * 2.0;
        let blurred = t
            .call_array("box_blur", &[arg(&y)], DType::F64, &shape)
            .expect("box-blur");
        let doubled: Vec<f64> = values.iter().map(|v| v * 2.0).collect();
        let want = blur(&doubled, rows, cols, 0.0, 9.0);
        assert_eq!(blurred.to_vec().expect("blurred"), want);
        let text = t.explanations();
        if pieces == 1 {
            // One point sees all of `y` through either partition: the same partition.
            assert!(
                fused(&text, "stats.box_blur", "numeric.binary"),
                "one piece: {text}"
            );
        } else {
            // Each point reads rows of `y` that other points write: a true dependence.
            assert!(
                !fused(&text, "stats.box_blur", "numeric."),
                "{pieces} pieces: {text}"
            );
            assert!(
                text.contains("cut before stats.box_blur") && text.contains("true dependence"),
                "{pieces} pieces: {text}"
            );
        }
        // A second neighbourhood kernel over the first's output is the same case.
        let once = t.call_array("box_blur", &[arg(&x)], DType::F64, &shape);
        let once = once.expect("box-blur");
        let twice = t.call_array("box_blur", &[arg(&once)], DType::F64, &shape);
        let want = blur(&blur(&values, rows, cols, 0.0, 9.0), rows, cols, 0.0, 9.0);
        assert_eq!(twice.expect("box-blur").to_vec().expect("twice"), want);
        let text = t.explanations();
        let together = text
            .split("weft fusion:")
            .any(|block| block.matches("\n  - stats.box_blur").count() == 2);
        assert_eq!(together, pieces == 1, "{pieces} piece(s): {text}");

        // Consumers: the blur writes its output tiled like the launch, so element-wise tasks
        // over it and a reduction of it fuse with it, on any number of pieces.
        let blurred = t
            .call_array("box_blur", &[arg(&x)], DType::F64, &shape)
            .expect("box-blur");
        let z = (&blurred + 7.0).sqrt();
        let total = z.sum().item().expect("the sum");
        let text = t.explanations();
        assert!(
            fused(&text, "stats.box_blur", "numeric.binary.add")
                && fused(&text, "stats.box_blur", "numeric.unary.sqrt")
                && fused(&text, "stats.box_blur", "numeric.reduce.sum"),
            "{pieces} piece(s): {text}"
        );
        let want: Vec<f64> = blur(&values, rows, cols, 0.0, 9.0)
            .iter()
            .map(|v| (v + 7.0).sqrt())
            .collect();
        assert_eq!(z.to_vec().expect("z"), want, "{pieces} pieces");
        let sum: f64 = want.iter().sum();
        assert!((total - sum).abs() <= 1e-12 * sum.abs(), "{total} vs {sum}");
    }
}

#[test]
fn bad_images_get_an_error_naming_the_plugin_and_the_call() {
    let t = stats(1);
    let np = t.numeric();
    for (x, says) in [
        (np.zeros(&[3, 3], DType::I64), "not i64 of shape (3, 3)"),
        (np.zeros(&[9], DType::F64), "not f64 of shape (9,)"),
    ] {
        let e = t.call("box-blur", &[arg(&x)]).unwrap_err().to_string();
        assert!(
            e.contains("`stats`")
                && e.contains("box-blur: needs a 2-dimensional f32 or f64 array")
                && e.contains(says),
            "{e}"
        );
    }
}

#[test]
fn the_component_is_built_once_per_test_binary() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let first = PluginTest::component(dir).expect("stats builds");
    let again = PluginTest::component(format!("{dir}/.")).expect("stats builds");
    assert!(std::sync::Arc::ptr_eq(&first, &again), "the same bytes");
    assert!(first.starts_with(b"\0asm"), "a Wasm binary");
}
