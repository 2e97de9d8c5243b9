//! The 5-point Jacobi heat iteration of Figure 1a of the Diffuse paper (ASPLOS'25):
//!
//! ```python
//! grid = np.random.rand(N + 2, N + 2)
//! center = grid[1:-1, 1:-1]
//! north = grid[0:-2, 1:-1]
//! east = grid[1:-1, 2:]
//! west = grid[1:-1, 0:-2]
//! south = grid[2:, 1:-1]
//! for i in range(niters):
//!     avg = center + north + east + west + south
//!     work = 0.2 * avg
//!     center[:] = work
//! ```
//!
//! The five views alias one grid: each sweep reads all of them and then writes the interior
//! through `center`, so the write of sweep `i` is seen by every read of sweep `i + 1` (the
//! aliasing that keeps Diffuse from fusing `center[:] = work` with its neighbours).
//!
//! The initial grid is `(n+2) x (n+2)` f64: the interior uniform in [0, 1) from the seed, and
//! fixed boundary values: the top row (row 0, corners included) [`HOT`], the bottom row and
//! the left and right columns [`COLD`]. The sweeps never write the boundary. (The corners are
//! never read by the 5-point stencil.)

use weft::{Array, Numeric, Range};
use weft_ir::DType;

/// The value of the top boundary row.
pub const HOT: f64 = 1.0;
/// The value of the other three boundary edges.
pub const COLD: f64 = 0.0;

/// The initial `(n+2) x (n+2)` grid (see the module docs).
pub fn initial_grid(np: &Numeric, n: u64, seed: u64) -> weft::Result<Array> {
    let grid = np.random_uniform(
        &[n + 2, n + 2],
        0.0,
        1.0,
        crate::sub_seed(seed, 0),
        DType::F64,
    );
    grid.slice(&[Range::from(-1), Range::all()]).assign(COLD)?; // bottom row
    grid.slice(&[Range::all(), Range::new(0, 1)]).assign(COLD)?; // left column
    grid.slice(&[Range::all(), Range::from(-1)]).assign(COLD)?; // right column
    grid.slice(&[Range::new(0, 1), Range::all()]).assign(HOT)?; // top row
    Ok(grid)
}

/// The grid and its five aliasing views.
#[derive(Clone, Debug)]
pub struct Stencil {
    /// The whole `(n+2) x (n+2)` grid.
    pub grid: Array,
    /// `grid[1:-1, 1:-1]`.
    pub center: Array,
    /// `grid[0:-2, 1:-1]`.
    pub north: Array,
    /// `grid[1:-1, 2:]`.
    pub east: Array,
    /// `grid[1:-1, 0:-2]`.
    pub west: Array,
    /// `grid[2:, 1:-1]`.
    pub south: Array,
}

impl Stencil {
    /// Makes the views of `grid`.
    pub fn new(grid: &Array) -> Stencil {
        let inner = Range::new(1, -1);
        Stencil {
            grid: grid.clone(),
            center: grid.slice(&[inner, inner]),
            north: grid.slice(&[Range::new(0, -2), inner]),
            east: grid.slice(&[inner, Range::from(2)]),
            west: grid.slice(&[inner, Range::new(0, -2)]),
            south: grid.slice(&[Range::from(2), inner]),
        }
    }

    /// One sweep: `center[:] = 0.2 * (center + north + east + west + south)`.
    pub fn step(&self) -> weft::Result<()> {
        let avg = &self.center + &self.north + &self.east + &self.west + &self.south;
        let work = 0.2 * avg;
        self.center.assign(&work)
    }
}

/// Runs `sweeps` sweeps on `grid` in place.
pub fn run(grid: &Array, sweeps: usize) -> weft::Result<()> {
    let s = Stencil::new(grid);
    for _ in 0..sweeps {
        s.step()?;
    }
    Ok(())
}
