//! The message plans of the stencil and of CG for 2 to 1024 ranks under weak scaling, and of
//! dense products (square, and tall and skinny) for 4 to 4096 ranks over the grids the
//! automatic choice takes (2-D, 2.5-D and 3-D, memory unbounded) and by Cannon's algorithm
//! (a 65,536-square product on the square rank counts), and of a product of a matrix by a
//! vector by parts (`65,536 x 2^20`) by rows and over grids of up to 8 layers, derived without MPI
//! (`weft_dist::simulate`): per-rank bytes and messages per iteration, and the time one rank
//! takes to derive its plan. Prints one JSON line.
//!
//! `cargo run --release -p weft-dist --bin simulate_ranks -- [--max-ranks N]
//! [--max-product-ranks N]`

use serde_json::{Value, json};
use weft_dist::simulate::{Held, ProductPlans, Simulated, cannon, cg, matvec, product, stencil};
use weft_runtime::products::Budget;

/// Per rank: the stencil's rows and columns (4096 x 4096 on two ranks), CG's grid rows and
/// width (the 2000 x 2000 problem on two ranks).
const STENCIL_ROWS: u64 = 2048;
const STENCIL_COLS: u64 = 4094;
const CG_ROWS: u64 = 1000;
const CG_WIDTH: u64 = 2000;
/// The products: `n x n` by `n x n`, and a tall `m x k` by a small `k x n`.
const SQUARE: (u64, u64, u64) = (16_384, 16_384, 16_384);
const TALL: (u64, u64, u64) = (1 << 22, 256, 256);
/// Cannon's product: square, with 64 blocks of `k` so that its `q` steps (one block of the
/// canonical tree's level each) reach the 64x64 grid of 4,096 ranks.
const CANNON: (u64, u64, u64) = (65_536, 65_536, 65_536);
/// The product of a matrix by a vector: `m x k` by `k`, rows long enough to be summed by parts.
const MATVEC: (u64, u64) = (65_536, 1 << 20);

/// One row of the product by a vector on `ranks` ranks: by rows (`A` held by rows, `x`
/// whole on every rank), and over `ranks / l x l` points with `l` the most layers (up to 8)
/// that divide the ranks, `A` held in that grid's tiles (as a product on that grid leaves
/// it), `x` by rows. The layers' volume is the layer's parts of `x` (about `k / l`) and
/// `(l - 1) / l` of a slice of its tile's partial sums (`layers_volume_bytes`); by rows it
/// is `k` less the rank's share.
fn matvec_row(ranks: usize) -> Result<Value, String> {
    let (m, k) = MATVEC;
    let p = ranks as u64;
    let l = (0..=3)
        .map(|d| 1u64 << d)
        .filter(|l| p.is_multiple_of(*l))
        .max()
        .unwrap_or(1);
    let (rows, _) = matvec(ranks, MATVEC, (p, 1), Held::Rows).map_err(|e| e.to_string())?;
    let (grid, layers) =
        matvec(ranks, MATVEC, (p / l, l), Held::Grid).map_err(|e| e.to_string())?;
    let span = (8 / layers) * weft_ir::matvec::part_width(k);
    let slice = m.div_ceil(p / layers).div_ceil(layers);
    let volume = (span + (layers - 1) * slice) * 8;
    let by_rows = (k - k / p) * 8;
    eprintln!(
        "{ranks:5} ranks: A @ x {MATVEC:?} by rows {} B / {} messages, over {}x1x{layers}          with A in its tiles {} B / {} messages per rank",
        rows.recv_bytes_max,
        rows.messages_max,
        p / layers,
        grid.recv_bytes_max,
        grid.messages_max
    );
    Ok(json!({
        "ranks": ranks,
        "grid": format!("{}x1x{layers}", p / layers),
        "rows_recv_bytes_max": rows.recv_bytes_max,
        "rows_messages_max": rows.messages_max,
        "rows_volume_bytes": by_rows,
        "layers_recv_bytes_max": grid.recv_bytes_max,
        "layers_messages_max": grid.messages_max,
        "layers_volume_bytes": volume,
        "layers_recv_over_volume": grid.recv_bytes_max as f64 / volume.max(1) as f64,
        "layers_over_rows": grid.recv_bytes_max as f64 / rows.recv_bytes_max.max(1) as f64,
    }))
}

fn row(s: &Simulated) -> Value {
    json!({
        "ranks": s.ranks,
        "recv_bytes_max": s.recv_bytes_max,
        "recv_bytes_mean": s.recv_bytes_mean,
        "send_bytes_max": s.send_bytes_max,
        "messages_max": s.messages_max,
        "plan_seconds_median": s.plan_seconds_median,
    })
}

/// The largest over the smallest per-rank bytes of the runs with at least 4 ranks.
fn spread(runs: &[Simulated]) -> f64 {
    let bytes: Vec<u64> = runs
        .iter()
        .filter(|s| s.ranks >= 4)
        .map(|s| s.recv_bytes_max)
        .collect();
    let (lo, hi) = (bytes.iter().min(), bytes.iter().max());
    match (lo, hi) {
        (Some(&lo), Some(&hi)) if lo > 0 => hi as f64 / lo as f64,
        _ => 1.0,
    }
}

/// One product's row: its grid, the plans' figures, and the schedule's volume per rank
/// (8 bytes an element): what one point reads (`panel_bytes`: its panels of `A` and `B` over
/// its layer's terms and, with layers, the other layers' partial sums of its slice of the
/// tile: `2 n^2 / sqrt(l P) + (l - 1) n^2 / P` for a square product), of which the layers'
/// sums (`layer_sum_bytes`); SUMMA's count (`summa_bytes`: the panels less the rank's share of
/// each operand, for one layer); and the textbook volume of the grid's family for a square
/// product, `2 n^2 / sqrt(l P)` (`textbook_bytes`, without the sum of the layers), with the
/// busiest rank's bytes over each.
fn product_row(
    ranks: usize,
    shape: (u64, u64, u64),
    held: Held,
    r: ProductPlans,
    grid: String,
) -> Value {
    let (panel, summa) = (r.panel_elements * 8, r.summa_elements * 8);
    let (m, n, _) = shape;
    let textbook = (2.0 * (m * n) as f64 / ((r.grid.layers * ranks as u64) as f64).sqrt()) * 8.0;
    let recv = r.plans.recv_bytes_max;
    let over = |v: u64| recv as f64 / v.max(1) as f64;
    let line = json!({
        "ranks": ranks,
        "grid": grid,
        "layers": r.grid.layers,
        "recv_bytes_max": recv,
        "messages_max": r.plans.messages_max,
        "panel_bytes": panel,
        "layer_sum_bytes": r.sum_elements * 8,
        "summa_bytes": summa,
        "textbook_bytes": textbook,
        "recv_over_panels": over(panel),
        "recv_over_summa": over(summa),
        "recv_over_textbook": recv as f64 / textbook.max(1.0),
        "plan_seconds_median": r.plans.plan_seconds_median,
    });
    eprintln!(
        "{ranks:5} ranks: {shape:?} held by {held:?}, {grid} grid: {recv} B / {} messages per \
         rank; {:.3} of the panels, {:.3} of 2 n^2 / sqrt(l P)",
        r.plans.messages_max,
        over(panel),
        recv as f64 / textbook.max(1.0),
    );
    line
}

/// [`product_row`] for the grid the automatic choice takes.
fn auto_row(ranks: usize, shape: (u64, u64, u64), held: Held) -> Result<Value, String> {
    let r = product(ranks, shape, held, Budget::unbounded()).map_err(|e| e.to_string())?;
    let grid = if r.grid.layers > 1 {
        format!("{}x{}x{}", r.grid.rows, r.grid.cols, r.grid.layers)
    } else {
        format!("{}x{}", r.grid.rows, r.grid.cols)
    };
    Ok(product_row(ranks, shape, held, r, grid))
}

/// [`product_row`] for Cannon's algorithm: its steps read the panels of its `q x q` grid in
/// blocks, one layer's worth of `k` at a time (the textbook volume is then SUMMA's,
/// `2 n^2 / sqrt(P)`).
fn cannon_row(ranks: usize, held: Held) -> Result<Value, String> {
    let mut r = cannon(ranks, CANNON, held).map_err(|e| e.to_string())?;
    let q = r.grid.rows;
    r.grid.layers = 1;
    Ok(product_row(
        ranks,
        CANNON,
        held,
        r,
        format!("cannon {q}x{q}"),
    ))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut max_ranks = 1024usize;
    let mut max_product_ranks = 4096usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--max-ranks" => {
                max_ranks = args.next().ok_or("--max-ranks needs a value")?.parse()?;
            }
            "--max-product-ranks" => {
                max_product_ranks = args
                    .next()
                    .ok_or("--max-product-ranks needs a value")?
                    .parse()?;
            }
            other => return Err(format!("unknown argument `{other}`").into()),
        }
    }
    let counts: Vec<usize> = std::iter::successors(Some(2usize), |r| r.checked_mul(2))
        .take_while(|&r| r <= max_ranks)
        .collect();
    let mut st = Vec::new();
    let mut c = Vec::new();
    for &ranks in &counts {
        st.push(stencil(ranks, STENCIL_ROWS, STENCIL_COLS)?);
        c.push(cg(ranks, CG_ROWS, CG_WIDTH)?);
        eprintln!(
            "{ranks:5} ranks: stencil {} B / {} messages per rank, CG {} B / {} messages; plan {:.1} / {:.1} us",
            st[st.len() - 1].recv_bytes_max,
            st[st.len() - 1].messages_max,
            c[c.len() - 1].recv_bytes_max,
            c[c.len() - 1].messages_max,
            st[st.len() - 1].plan_seconds_median * 1e6,
            c[c.len() - 1].plan_seconds_median * 1e6,
        );
    }
    let mut products = serde_json::Map::new();
    for (name, shape) in [("square", SQUARE), ("tall", TALL)] {
        for (layout, held) in [("rows", Held::Rows), ("grid", Held::Grid)] {
            let rows = std::iter::successors(Some(4usize), |r| r.checked_mul(2))
                .take_while(|&r| r <= max_product_ranks)
                .map(|r| auto_row(r, shape, held))
                .collect::<Result<Vec<_>, _>>()?;
            products.insert(format!("{name}_held_by_{layout}"), Value::Array(rows));
        }
    }
    for (layout, held) in [("rows", Held::Rows), ("grid", Held::Grid)] {
        let rows = std::iter::successors(Some(4usize), |r| r.checked_mul(4))
            .take_while(|&r| r <= max_product_ranks)
            .map(|r| cannon_row(r, held))
            .collect::<Result<Vec<_>, _>>()?;
        products.insert(format!("cannon_held_by_{layout}"), Value::Array(rows));
    }
    let matvecs = std::iter::successors(Some(4usize), |r| r.checked_mul(2))
        .take_while(|&r| r <= max_product_ranks)
        .map(matvec_row)
        .collect::<Result<Vec<_>, _>>()?;
    let line = json!({
        "example": "simulate_ranks",
        "stencil_rows_per_rank": STENCIL_ROWS,
        "stencil_cols": STENCIL_COLS,
        "cg_grid_rows_per_rank": CG_ROWS,
        "cg_grid_width": CG_WIDTH,
        "stencil": st.iter().map(row).collect::<Vec<_>>(),
        "cg": c.iter().map(row).collect::<Vec<_>>(),
        "stencil_bytes_spread_4_up": spread(&st),
        "cg_bytes_spread_4_up": spread(&c),
        "product_square_mkn": [SQUARE.0, SQUARE.2, SQUARE.1],
        "product_tall_mkn": [TALL.0, TALL.2, TALL.1],
        "product_cannon_mkn": [CANNON.0, CANNON.2, CANNON.1],
        "products": products,
        "matvec_mk": [MATVEC.0, MATVEC.1],
        "matvec_by_parts": matvecs,
    });
    println!("{line}");
    Ok(())
}
