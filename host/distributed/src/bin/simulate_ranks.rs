//! The message plans of the stencil and of CG for 2 to 1024 ranks under weak scaling, derived
//! without MPI (`weft_dist::simulate`): per-rank bytes and messages per iteration, and the
//! time one rank takes to derive its plan. Prints one JSON line.
//!
//! `cargo run --release -p weft-dist --bin simulate_ranks -- [--max-ranks N]`

use serde_json::{Value, json};
use weft_dist::simulate::{Simulated, cg, stencil};

/// Per rank: the stencil's rows and columns (4096 x 4096 on two ranks), CG's grid rows and
/// width (the 2000 x 2000 problem on two ranks).
const STENCIL_ROWS: u64 = 2048;
const STENCIL_COLS: u64 = 4094;
const CG_ROWS: u64 = 1000;
const CG_WIDTH: u64 = 2000;

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

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut max_ranks = 1024usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--max-ranks" => {
                max_ranks = args.next().ok_or("--max-ranks needs a value")?.parse()?;
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
    });
    println!("{line}");
    Ok(())
}
