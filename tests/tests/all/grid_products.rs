//! Dense products launched over grids of `C`'s tiles (`WEFT_MATMUL_GRID`,
//! `weft_runtime::products`) give exactly the bits of the plugin's own launch and of the
//! canonical order written out in plain Rust (`weft_tests::reference::canonical_product`:
//! blocks of 1,024 terms, each a chain of `fma`s, combined by the aligned tree): on shapes
//! that no grid divides, small (the compiled kernel's path) and large (the blocked
//! routine's), with several blocks of terms, in `f32` and `f64`, with a transposed operand,
//! by Cannon's algorithm, and for a product by a vector that takes the canonical product; and
//! products of a matrix stored by rows by a long vector (by parts, `weft_ir::matvec`) over
//! grids of layers give the bits of the plugin's launch and of the parts order written out.

use weft::ProductGrid;
use weft::{Config, DType, Numeric};

fn numeric(grid: ProductGrid) -> Numeric {
    weft_tests::numeric_with(Config {
        threads: 2,
        pieces: 2,
        matmul_grid: grid,
        component_cache: None,
        explain: true,
        ..Config::from_env()
    })
}

/// The bits of `A @ B` on `np`, `A` made as the transpose of a stored `(k, m)` matrix when
/// `transposed`; and the explanations it gave.
fn product(
    np: &Numeric,
    (m, k, n): (usize, usize, usize),
    dtype: DType,
    transposed: bool,
) -> (Vec<f64>, String) {
    let (a, b) = (
        weft_tests::uniform_data(m * k, 3, -1.0, 1.0),
        weft_tests::uniform_data(k * n, 4, -1.0, 1.0),
    );
    let (m64, k64, n64) = (m as u64, k as u64, n as u64);
    let a = if transposed {
        let mut stored = vec![0.0; m * k];
        for i in 0..m {
            for p in 0..k {
                stored[p * m + i] = a[i * k + p];
            }
        }
        np.from_f64s(&[k64, m64], &stored, dtype).t()
    } else {
        np.from_f64s(&[m64, k64], &a, dtype)
    };
    // Made by a task, as an application's arrays usually are.
    let b = np.from_f64s(&[k64, n64], &b, dtype) * 1.0;
    let c = a.matmul(&b).to_vec().expect("the product");
    let explained = np.runtime(|rt| rt.take_explanations()).join("\n");
    (c, explained)
}

#[test]
fn products_over_any_grid_give_the_chains_bits() {
    let grids = [(1, 1), (2, 2), (3, 2), (1, 4), (4, 1), (5, 7)];
    for (m, k, n) in [(37, 29, 23), (130, 257, 70), (21, 3100, 19)] {
        for dtype in [DType::F64, DType::F32] {
            let single = dtype == DType::F32;
            let rows = product(&numeric(ProductGrid::Rows), (m, k, n), dtype, false).0;
            let (a, b) = (
                weft_tests::uniform_data(m * k, 3, -1.0, 1.0),
                weft_tests::uniform_data(k * n, 4, -1.0, 1.0),
            );
            let want = weft_tests::reference::canonical_product(&a, &b, (m, k, n), single);
            assert!(rows == want, "{m}x{k}x{n} {dtype}: rows against the chain");
            for (r, c) in grids {
                let grid = ProductGrid::Fixed {
                    rows: r,
                    cols: c,
                    layers: 1,
                };
                for transposed in [false, true] {
                    let (got, explained) = product(&numeric(grid), (m, k, n), dtype, transposed);
                    let what = format!("{m}x{k}x{n} {dtype} on {r}x{c}, transposed {transposed}");
                    assert!(got == want, "{what}: not the chain's bits");
                    assert!(
                        explained.contains(&format!("over a {r}x{c} grid of C's tiles")),
                        "{what}: {explained}"
                    );
                }
            }
        }
    }
}

/// Runs `A @ B` on shapes that no grid divides, with three and four blocks of `k`, in `f32`
/// and `f64`, `A` as stored and transposed, on each grid `grids(k)` gives with a line its
/// explanation must hold and whether it says the grid was cut: each gives the canonical
/// order's bits.
fn grids_give_the_canonical_bits(grids: impl Fn(usize) -> Vec<(ProductGrid, String, bool)>) {
    for (m, k, n) in [(23, 4000, 17), (9, 2100, 30)] {
        for dtype in [DType::F64, DType::F32] {
            let single = dtype == DType::F32;
            let (a, b) = (
                weft_tests::uniform_data(m * k, 3, -1.0, 1.0),
                weft_tests::uniform_data(k * n, 4, -1.0, 1.0),
            );
            let want = weft_tests::reference::canonical_product(&a, &b, (m, k, n), single);
            for (grid, ran, cut) in grids(k) {
                for transposed in [false, true] {
                    let (got, explained) = product(&numeric(grid), (m, k, n), dtype, transposed);
                    let what = format!("{m}x{k}x{n} {dtype} on {grid:?}, transposed {transposed}");
                    assert!(got == want, "{what}: not the canonical bits");
                    assert!(explained.contains(&ran), "{what}: {explained}");
                    assert_eq!(explained.contains("cut to"), cut, "{what}: {explained}");
                }
            }
        }
    }
}

/// Grids of layers (2.5-D, `RxCxL`) split `k` into aligned subtrees of the canonical order's
/// blocks and sum the layers by the tree's top levels: the canonical bits; a grid with more
/// layers than the blocks allow is cut to fewer.
#[test]
fn products_over_grids_of_layers_give_the_canonical_bits() {
    grids_give_the_canonical_bits(|k| {
        [(1, 1, 2), (2, 3, 2), (3, 2, 4), (1, 1, 4)]
            .into_iter()
            .map(|(r, c, l)| {
                // 4,000 terms are four blocks (four layers of one); 2,100 three (two layers
                // of two and one: four are cut to two).
                let layers = if k < 3073 { l.min(2) } else { l };
                let ran = if layers > 1 {
                    format!("over a {r}x{c}x{layers} grid: {layers} layers")
                } else {
                    format!("over a {r}x{c} grid of C's tiles")
                };
                let grid = ProductGrid::Fixed {
                    rows: r,
                    cols: c,
                    layers: l,
                };
                (grid, ran, layers < l)
            })
            .collect()
    });
}

/// Cannon's algorithm (`cannon:Q`): `Q` steps of skewed blocks of `k`, the blocks' sums
/// summed by the canonical tree on each tile's point, give the canonical bits; a side the
/// blocks of `k` do not allow is cut.
#[test]
fn products_by_cannons_algorithm_give_the_canonical_bits() {
    grids_give_the_canonical_bits(|k| {
        [2, 4]
            .into_iter()
            .map(|asked| {
                // 4,000 terms are four blocks (four steps of one); 2,100 three (two steps).
                let side = if k < 3073 { 2 } else { asked };
                let ran = format!("Cannon's algorithm on a {side}x{side} grid: {side} steps");
                (ProductGrid::Cannon { side: Some(asked) }, ran, side < asked)
            })
            .collect()
    });
}

/// `A.T @ x` on a runtime with `grid`, `A.T` the transpose of `stored` (`(k, m)`, by rows):
/// the product's values and the explanations.
fn by_vector(
    grid: ProductGrid,
    stored: &[f64],
    x: &[f64],
    (m, k): (usize, usize),
) -> (Vec<f64>, String) {
    let np = numeric(grid);
    let a = np.from_f64s(&[k as u64, m as u64], stored, DType::F64).t();
    let x = np.from_f64s(&[k as u64], x, DType::F64);
    let y = a.matvec(&x).to_vec().expect("the product");
    (y, np.runtime(|rt| rt.take_explanations()).join("\n"))
}

#[test]
fn a_product_by_a_vector_through_the_canonical_product_keeps_its_bits_on_a_grid() {
    // `A.T @ x`: `A.T` is not stored by rows, so the plugin takes the canonical product with
    // `x` as one row of `BT` (a launch of `(m, 1)`); a grid keeps one column.
    let (m, k) = (45usize, 31usize);
    let stored = weft_tests::uniform_data(m * k, 5, -1.0, 1.0);
    let x = weft_tests::uniform_data(k, 6, -1.0, 1.0);
    let run = |grid| by_vector(grid, &stored, &x, (m, k));
    let (want, _) = run(ProductGrid::Rows);
    let (got, explained) = run(ProductGrid::Fixed {
        rows: 3,
        cols: 3,
        layers: 1,
    });
    assert!(got == want);
    assert!(
        explained.contains("over a 3x1 grid") && explained.contains("cut to the product's extents"),
        "{explained}"
    );
}

#[test]
fn a_product_by_a_vector_through_the_canonical_product_splits_k_over_layers() {
    // `A.T @ x` with 2,100 terms (three blocks) and 70 rows (enough that the plugin does not
    // take the wide matrix by columns): the canonical product over a 2x1x2 grid of layers (a
    // 2-D grid of `A`'s row blocks and `k`'s halves), the bits of the plugin's launch and of
    // the order written out.
    let (m, k) = (70usize, 2100usize);
    let stored = weft_tests::uniform_data(m * k, 7, -1.0, 1.0);
    let x = weft_tests::uniform_data(k, 8, -1.0, 1.0);
    let run = |grid| by_vector(grid, &stored, &x, (m, k));
    let (rows, _) = run(ProductGrid::Rows);
    let (got, explained) = run(ProductGrid::Fixed {
        rows: 2,
        cols: 1,
        layers: 2,
    });
    let a: Vec<f64> = (0..m * k).map(|e| stored[(e % k) * m + e / k]).collect();
    let want = weft_tests::reference::canonical_product(&a, &x, (m, k, 1), false);
    assert!(
        rows == want,
        "the plugin's launch against the order written out"
    );
    assert!(got == want, "2x1x2 against the order written out");
    assert!(
        explained.contains("over a 2x1x2 grid: 2 layers"),
        "{explained}"
    );
}

#[test]
fn a_product_by_a_long_vector_splits_k_over_layers_with_its_bits() {
    // `A @ x` with `A` stored by rows and rows of 9,001 terms (past `PARTS_FROM`): the plugin
    // submits the product by parts; grids of layers split each row's eight parts, cut to
    // what the row allows, on rows no grid divides.
    let (m, k) = (70usize, 9001usize);
    let a = weft_tests::uniform_data(m * k, 9, -1.0, 1.0);
    let x = weft_tests::uniform_data(k, 10, -1.0, 1.0);
    let want = weft_tests::reference::matvec_by_parts(&a, &x, (m, k));
    let run = |grid| {
        let np = numeric(grid);
        let am = np.from_f64s(&[m as u64, k as u64], &a, DType::F64) * 1.0;
        let xv = np.from_f64s(&[k as u64], &x, DType::F64);
        let y = am.matvec(&xv).to_vec().expect("the product");
        (y, np.runtime(|rt| rt.take_explanations()).join("\n"))
    };
    let (rows, explained) = run(ProductGrid::Rows);
    assert!(
        rows == want,
        "the plugin's launch against the order written out"
    );
    assert!(!explained.contains("layers of"), "{explained}");
    for (r, c, l, ran, cut) in [
        (2, 1, 2, "over a 2x1x2 grid: 2 layers of 4", false),
        (3, 1, 4, "over a 3x1x4 grid: 4 layers of 2", false),
        (1, 1, 8, "over a 1x1x8 grid: 8 layers of 1", false),
        (4, 3, 64, "over a 4x1x8 grid: 8 layers of 1", true),
    ] {
        let (got, explained) = run(ProductGrid::Fixed {
            rows: r,
            cols: c,
            layers: l,
        });
        assert!(got == want, "{r}x{c}x{l} against the order written out");
        assert!(explained.contains(ran), "{r}x{c}x{l}: {explained}");
        assert_eq!(
            explained.contains("cut to"),
            cut,
            "{r}x{c}x{l}: {explained}"
        );
    }
    // One layer keeps the plugin's launch, the grid of rows.
    let (got, explained) = run(ProductGrid::Fixed {
        rows: 2,
        cols: 2,
        layers: 1,
    });
    assert!(
        got == want && !explained.contains("layers of"),
        "{explained}"
    );
}

#[test]
fn one_process_keeps_the_plugins_launch_unless_a_grid_is_set() {
    let (_, explained) = product(&numeric(ProductGrid::Auto), (40, 30, 20), DType::F64, false);
    assert!(!explained.contains("grid of C's tiles"), "{explained}");
}
