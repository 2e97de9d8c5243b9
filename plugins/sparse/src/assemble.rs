//! Constructions computed in the plugin from data it reads from the host: COO triplets and
//! SciPy-style CSR arrays (checked, then sorted and merged), and the transpose. Each reads its
//! inputs once (which runs the tasks that produce them) and hands the result to the host as
//! new stores.

use weft_sdk::host::{self, Store};
use weft_sdk::ir::DType;
use weft_sdk::ir::shape::tuple;
use weft_sdk::{Error, error, ir_dtype, wit_dtype};

use crate::tasks::check;
use crate::{Matrix, Parts};

/// Little-endian elements of `dtype` (`i32`, `i64`, `f32` or `f64`), widened. Each width has
/// its own loop of fixed-size loads: a copy of a run-time length per element (a call in
/// Wasm) made decoding a tenth of `from_coo`'s time.
fn decode<T>(bytes: &[u8], dtype: DType, mut wide: impl FnMut(u64, usize) -> T) -> Vec<T> {
    if dtype.size() == 4 {
        bytes
            .as_chunks::<4>()
            .0
            .iter()
            .map(|&c| wide(u64::from(u32::from_le_bytes(c)), 4))
            .collect()
    } else {
        bytes
            .as_chunks::<8>()
            .0
            .iter()
            .map(|&c| wide(u64::from_le_bytes(c), 8))
            .collect()
    }
}

/// An integer of `size` bytes, sign-extended.
fn int(bits: u64, size: usize) -> i64 {
    if size == 4 {
        i64::from(bits as u32 as i32)
    } else {
        bits as i64
    }
}

/// A float of `size` bytes, widened.
fn float(bits: u64, size: usize) -> f64 {
    if size == 4 {
        f64::from(f32::from_bits(bits as u32))
    } else {
        f64::from_bits(bits)
    }
}

/// A vector store, read: its shape checked, its type one of `allowed`.
fn read_vector(
    s: &Store,
    op: &str,
    what: &str,
    allowed: [DType; 2],
) -> Result<(Vec<u8>, DType), Error> {
    let shape = s.shape();
    if shape.len() != 1 {
        return Err(error(format!(
            "{op}: {what} must be a vector, not of shape {}",
            tuple(&shape)
        )));
    }
    let d = ir_dtype(s.dtype());
    if !allowed.contains(&d) {
        return Err(error(format!(
            "{op}: {what} must hold {} or {}, not {d}",
            allowed[0], allowed[1]
        )));
    }
    Ok((host::read_bytes(s)?, d))
}

/// A vector store's integers, widened to `i64`; `what` names it in errors.
fn read_ints(s: &Store, op: &str, what: &str) -> Result<Vec<i64>, Error> {
    let (bytes, d) = read_vector(s, op, what, [DType::I32, DType::I64])?;
    Ok(decode(&bytes, d, int))
}

/// A vector store's floats, widened to `f64`, and their type.
fn read_floats(s: &Store, op: &str, what: &str) -> Result<(Vec<f64>, DType), Error> {
    let (bytes, d) = read_vector(s, op, what, [DType::F32, DType::F64])?;
    Ok((decode(&bytes, d, float), d))
}

/// Index bytes of `i`, collected as fixed-size words into a buffer sized once (`values`
/// knows its length), with no zeroing pass first.
fn index_bytes(
    values: impl ExactSizeIterator<Item = i64>,
    i: DType,
    op: &str,
) -> Result<Vec<u8>, Error> {
    if i != DType::I32 {
        return Ok(values
            .map(i64::to_le_bytes)
            .collect::<Vec<_>>()
            .into_flattened());
    }
    let mut out: Vec<[u8; 4]> = Vec::with_capacity(values.len());
    for v in values {
        let v = i32::try_from(v)
            .map_err(|_| error(format!("{op}: index {v} does not fit i32 indices")))?;
        out.push(v.to_le_bytes());
    }
    Ok(out.into_flattened())
}

/// A column index as the assembly keeps it: `u32` for a matrix of 32-bit indices (checked to
/// fit `i32` when read), `i64` otherwise. Half the bytes to move for the usual 32-bit case.
trait Column: Copy + Ord + Default {
    /// The column, known to fit.
    fn new(c: i64) -> Self;
    /// The little-endian bytes of `cols`, as the matrix's index type, collected as fixed-size
    /// words (a copy of a run-time length per element is a call in Wasm).
    fn bytes(cols: &[Self]) -> Vec<u8>;
}

impl Column for u32 {
    fn new(c: i64) -> u32 {
        c as u32
    }
    fn bytes(cols: &[u32]) -> Vec<u8> {
        let words: Vec<[u8; 4]> = cols.iter().map(|c| c.to_le_bytes()).collect();
        words.into_flattened()
    }
}

impl Column for i64 {
    fn new(c: i64) -> i64 {
        c
    }
    fn bytes(cols: &[i64]) -> Vec<u8> {
        let words: Vec<[u8; 8]> = cols.iter().map(|c| c.to_le_bytes()).collect();
        words.into_flattened()
    }
}

/// The stores of a matrix from its CSR arrays.
fn make<C: Column>(
    rows: u64,
    cols: u64,
    m: &Compressed<C>,
    (v, i): (DType, DType),
    op: &str,
) -> Result<Parts, Error> {
    let crd = C::bytes(&m.cols);
    let vals = if v == DType::F32 {
        let words: Vec<[u8; 4]> = m.vals.iter().map(|&x| (x as f32).to_le_bytes()).collect();
        words.into_flattened()
    } else {
        let words: Vec<[u8; 8]> = m.vals.iter().map(|x| x.to_le_bytes()).collect();
        words.into_flattened()
    };
    make_from_bytes(rows, cols, &m.indptr, (&crd, &vals), (v, i), op)
}

/// [`make`], with `crd` and `vals` given as the bytes of their stores (of types `i` and `v`).
fn make_from_bytes(
    rows: u64,
    cols: u64,
    indptr: &[i64],
    (crd, vals): (&[u8], &[u8]),
    (v, i): (DType, DType),
    op: &str,
) -> Result<Parts, Error> {
    let mut ranges = Vec::with_capacity(indptr.len().saturating_sub(1) * 2);
    for w in indptr.windows(2) {
        ranges.extend([w[0], w[1]]);
    }
    let pos = host::store_from_bytes(
        &[rows, 2],
        wit_dtype(i),
        &index_bytes(ranges.into_iter(), i, op)?,
    )?;
    let n = (crd.len() / i.size()) as u64;
    let crd = host::store_from_bytes(&[n], wit_dtype(i), crd)?;
    let vals = host::store_from_bytes(&[n], wit_dtype(v), vals)?;
    Ok(Parts {
        pos,
        crd,
        vals,
        rows,
        cols,
    })
}

/// Checks an index type.
fn index_type(i: DType, op: &str) -> Result<(), Error> {
    if matches!(i, DType::I32 | DType::I64) {
        Ok(())
    } else {
        Err(error(format!(
            "{op}: the index type must be i32 or i64, not {i}"
        )))
    }
}

/// A count of rows as a `usize` the plugin can allocate row pointers for.
fn row_count(rows: u64, op: &str) -> Result<usize, Error> {
    // Row pointers take 8 bytes a row in the plugin's memory (at most 4 GiB on wasm32).
    usize::try_from(rows)
        .ok()
        .filter(|&r| r < (u32::MAX / 16) as usize)
        .ok_or_else(|| {
            error(format!(
                "{op}: {rows} rows are too many to assemble in the plugin"
            ))
        })
}

/// Rows per block in [`compress`]'s first pass: a block's entries (about 10,000 for
/// PageRank's graph) fit in the cache.
const BLOCK_SHIFT: usize = 10;

/// Sorts entries (`row[k]`, `col[k]`, `val[k]`, every row below `rows`) by row, then column,
/// sums duplicates in input order, and returns the CSR arrays.
///
/// SciPy's `tocsr` and `sum_duplicates`: a counting sort by row (stable, linear) that moves
/// each entry's column and value together, then each row's entries sorted on their own,
/// stably (rows are short: an insertion sort, linear where a row is already in order), so
/// duplicates still meet in input order, and merged in place. A comparison sort of all the
/// triplets made `from_coo` of a 2M-edge graph twice as slow.
///
/// Each pass is a function of its own over slices: in Wasm a `Vec` whose address escapes
/// lives in linear memory, and a loop that stores through it reloads its pointer and length
/// at every step; a slice argument stays in registers (this halved the passes' instructions).
fn compress<C: Column>(rows: usize, row: &[u32], col: &[C], val: &[f64]) -> Compressed<C> {
    let mut start = vec![0usize; rows + 1];
    count_rows(row, &mut start);
    // Entries move to their rows in two passes: first, in input order, to their block of
    // `1 << BLOCK_SHIFT` rows (a few hundred places to write to, each written in sequence),
    // then within the block, whose entries stay in the cache. One scatter straight to the rows
    // wrote each entry to a random place in the whole array, and that was most of its time.
    let mut block_next: Vec<usize> = (0..(rows >> BLOCK_SHIFT) + 1)
        .map(|b| start[(b << BLOCK_SHIFT).min(rows)])
        .collect();
    let mut staged = vec![(0u32, C::default(), 0f64); row.len()];
    stage_by_block(row, col, val, &mut block_next, &mut staged);
    drop(block_next);
    let mut next = start[..rows].to_vec();
    // Columns and values in arrays of their own, as SciPy keeps them.
    let (mut cols, mut vals) = (vec![C::default(); row.len()], vec![0f64; row.len()]);
    scatter_to_rows(&staged, &mut next, &mut cols, &mut vals);
    drop((next, staged));
    let mut indptr = vec![0i64; rows + 1];
    let kept = sort_and_merge_rows(&start, &mut cols, &mut vals, &mut indptr);
    cols.truncate(kept);
    vals.truncate(kept);
    Compressed { indptr, cols, vals }
}

/// `start[r]` becomes the first entry of row `r` once sorted (`start[rows]` the count).
#[inline(never)]
fn count_rows(row: &[u32], start: &mut [usize]) {
    for &r in row {
        if let Some(n) = start.get_mut(r as usize + 1) {
            *n += 1;
        }
    }
    let mut sum = 0;
    for s in start.iter_mut() {
        sum += *s;
        *s = sum;
    }
}

/// Entries per step of [`stage_by_block`]'s and [`scatter_to_rows`]' loops. Cranelift keeps
/// few of a Wasm loop's values in registers across its back edge (where the epoch check may
/// call out): the loop spills and reloads them once per step, so a step moves four entries.
const STEP: usize = 4;

/// Moves each entry, in input order, to the next free place of its block of rows.
#[inline(never)]
fn stage_by_block<C: Column>(
    row: &[u32],
    col: &[C],
    val: &[f64],
    block_next: &mut [usize],
    staged: &mut [(u32, C, f64)],
) {
    let n = row.len().min(col.len()).min(val.len());
    let (row, col, val) = (&row[..n], &col[..n], &val[..n]);
    let mut place = |k: usize| {
        let r = row[k];
        if let Some(at) = block_next.get_mut(r as usize >> BLOCK_SHIFT) {
            if let Some(slot) = staged.get_mut(*at) {
                *slot = (r, col[k], val[k]);
            }
            *at += 1;
        }
    };
    let whole = n - n % STEP;
    for k in (0..whole).step_by(STEP) {
        for j in 0..STEP {
            place(k + j);
        }
    }
    for k in whole..n {
        place(k);
    }
}

/// Moves each staged entry, in order, to the next free place of its row.
#[inline(never)]
fn scatter_to_rows<C: Column>(
    staged: &[(u32, C, f64)],
    next: &mut [usize],
    cols: &mut [C],
    vals: &mut [f64],
) {
    let n = cols.len().min(vals.len());
    let (cols, vals) = (&mut cols[..n], &mut vals[..n]);
    let mut place = |&(r, c, v): &(u32, C, f64)| {
        if let Some(at) = next.get_mut(r as usize) {
            let k = *at;
            if k < n {
                cols[k] = c;
                vals[k] = v;
            }
            *at = k + 1;
        }
    };
    let mut steps = staged.chunks_exact(STEP);
    for step in &mut steps {
        for e in step {
            place(e);
        }
    }
    for e in steps.remainder() {
        place(e);
    }
}

/// Sorts each row's entries by column and sums its duplicates, compacting the entries to the
/// front; fills `indptr` and returns the number kept. A row already in strictly increasing
/// order (the usual case) is only checked and moved.
#[inline(never)]
fn sort_and_merge_rows<C: Column>(
    start: &[usize],
    cols: &mut [C],
    vals: &mut [f64],
    indptr: &mut [i64],
) -> usize {
    let mut kept = 0usize;
    for (w, end) in start.windows(2).zip(indptr.iter_mut().skip(1)) {
        let (lo, hi) = (w[0], w[1]);
        if strictly_increasing(&cols[lo..hi]) {
            if kept != lo {
                cols.copy_within(lo..hi, kept);
                vals.copy_within(lo..hi, kept);
            }
            kept += hi - lo;
        } else {
            kept = merge_row(cols, vals, (lo, hi), kept);
        }
        *end = kept as i64;
    }
    kept
}

/// Whether `cols` increases strictly: sorted, without duplicates.
fn strictly_increasing<C: Column>(cols: &[C]) -> bool {
    cols.windows(2).all(|w| w[0] < w[1])
}

/// Sorts the entries `lo..hi` by column, stably, and moves them to `kept..` with each run of
/// duplicates summed in order; returns the new `kept` (`kept <= lo`).
#[inline(never)]
fn merge_row<C: Column>(
    cols: &mut [C],
    vals: &mut [f64],
    (lo, hi): (usize, usize),
    mut kept: usize,
) -> usize {
    sort_by_column(&mut cols[lo..hi], &mut vals[lo..hi]);
    let first = kept;
    for k in lo..hi {
        let (c, v) = (cols[k], vals[k]);
        if kept > first && cols[kept - 1] == c {
            vals[kept - 1] += v;
        } else {
            cols[kept] = c;
            vals[kept] = v;
            kept += 1;
        }
    }
    kept
}

/// A matrix's CSR arrays, as [`compress`] leaves them.
struct Compressed<C> {
    /// Row `r` is `indptr[r]..indptr[r + 1]` of the entries.
    indptr: Vec<i64>,
    /// Each entry's column, in order within a row.
    cols: Vec<C>,
    /// Each entry's value, its duplicates' sum.
    vals: Vec<f64>,
}

/// Sorts one row's entries (`cols` and `vals` alike) by column, stably.
fn sort_by_column<C: Column>(cols: &mut [C], vals: &mut [f64]) {
    if cols.len() > 32 {
        let mut pairs: Vec<(C, f64)> = cols.iter().copied().zip(vals.iter().copied()).collect();
        pairs.sort_by_key(|e| e.0);
        for ((c, v), (pc, pv)) in cols.iter_mut().zip(vals.iter_mut()).zip(pairs) {
            (*c, *v) = (pc, pv);
        }
        return;
    }
    for i in 1..cols.len() {
        let (c, v) = (cols[i], vals[i]);
        let mut j = i;
        while j > 0 && cols[j - 1] > c {
            cols[j] = cols[j - 1];
            vals[j] = vals[j - 1];
            j -= 1;
        }
        cols[j] = c;
        vals[j] = v;
    }
}

/// Element `k` of a vector store's integers (`dtype` `i32` or `i64`, as `bytes`).
fn word(bytes: &[u8], dtype: DType, k: usize) -> i64 {
    let size = dtype.size();
    let mut w = [0u8; 8];
    w[..size].copy_from_slice(&bytes[k * size..(k + 1) * size]);
    int(u64::from_le_bytes(w), size)
}

/// A matrix from COO triplets: duplicates summed, columns sorted.
pub(crate) fn from_coo(
    rows: u64,
    cols: u64,
    row: &Store,
    col: &Store,
    val: &Store,
    i: DType,
) -> Result<Parts, Error> {
    let op = "from-coo";
    index_type(i, op)?;
    let ints = [DType::I32, DType::I64];
    let (rb, rt) = read_vector(row, op, "row", ints)?;
    let (cb, ct) = read_vector(col, op, "col", ints)?;
    let (v, vt) = read_floats(val, op, "val")?;
    let (nr, nc) = (rb.len() / rt.size(), cb.len() / ct.size());
    if nr != nc || nr != v.len() {
        return Err(error(format!(
            "{op}: row, col and val have lengths {nr}, {nc} and {}",
            v.len()
        )));
    }
    // SciPy's words (`coo_matrix`'s checks), and the entry.
    let outside = |k: usize| {
        let (ri, ci) = (word(&rb, rt, k), word(&cb, ct, k));
        let (axis, x, bound) = if ri < 0 || ri as u64 >= rows {
            (0, ri, rows)
        } else {
            (1, ci, cols)
        };
        if x < 0 {
            error(format!("{op}: negative axis {axis} index: {x} (entry {k})"))
        } else {
            error(format!(
                "{op}: axis {axis} index {x} exceeds matrix dimension {bound} (entry {k})"
            ))
        }
    };
    let row_total = row_count(rows, op)?;
    // Indices decode straight to the words the assembly keeps (rows stay below
    // `u32::MAX / 16`, 32-bit columns below `2^31`).
    let r = decode_below(&rb, rt, rows).map_err(outside)?;
    if i == DType::I32 {
        let c = decode_below(&cb, ct, cols.min(1 << 31)).map_err(|k| {
            let x = word(&cb, ct, k);
            if x >= 0 && (x as u64) < cols {
                error(format!("{op}: index {x} does not fit i32 indices"))
            } else {
                outside(k)
            }
        })?;
        make(rows, cols, &compress(row_total, &r, &c, &v), (vt, i), op)
    } else {
        let c: Vec<i64> = decode(&cb, ct, int);
        if let Some(k) = c.iter().position(|&x| x < 0 || x as u64 >= cols) {
            return Err(outside(k));
        }
        make(rows, cols, &compress(row_total, &r, &c, &v), (vt, i), op)
    }
}

/// Integers (`i32` or `i64` bytes) as `u32`s, each checked to lie in `0..bound` (`bound <=
/// 2^32`); `Err(k)` names the first outside. One pass without a branch per element (an index
/// outside sets a flag), and a scan for the first only when the flag is set: a scan of the
/// result after made a third of the decoding's instructions in Wasm.
fn decode_below(bytes: &[u8], dtype: DType, bound: u64) -> Result<Vec<u32>, usize> {
    let mut outside = false;
    let out = decode(bytes, dtype, |bits, size| {
        let x = int(bits, size);
        // A negative index is a huge `u64`.
        outside |= x as u64 >= bound;
        x as u32
    });
    if outside {
        let first = (0..out.len()).find(|&k| word(bytes, dtype, k) as u64 >= bound);
        return Err(first.unwrap_or(0));
    }
    Ok(out)
}

/// A matrix from SciPy-style CSR arrays, checked. `indices` and `data` go to the new stores
/// as the bytes they are when their types are already the matrix's (the usual case): only
/// `indptr` is decoded whole, and the columns are checked straight from their bytes.
pub(crate) fn from_csr_arrays(
    rows: u64,
    cols: u64,
    indptr: &Store,
    indices: &Store,
    data: &Store,
) -> Result<Parts, Error> {
    let op = "from-csr-arrays";
    let i = ir_dtype(indptr.dtype());
    index_type(i, op)?;
    let p = read_ints(indptr, op, "indptr")?;
    let (c, ct) = read_vector(indices, op, "indices", [DType::I32, DType::I64])?;
    let (v, vt) = read_vector(data, op, "data", [DType::F32, DType::F64])?;
    let entries = c.len() / ct.size();
    if Some(p.len() as u64) != rows.checked_add(1) {
        return Err(error(format!(
            "{op}: indptr has {} entries, a matrix of {rows} rows needs one more",
            p.len()
        )));
    }
    if entries != v.len() / vt.size() {
        return Err(error(format!(
            "{op}: indices and data have lengths {} and {}",
            entries,
            v.len() / vt.size()
        )));
    }
    if p.first() != Some(&0) {
        return Err(error(format!("{op}: indptr must start at 0")));
    }
    if let Some(r) = p.windows(2).position(|w| w[1] < w[0]) {
        return Err(error(format!(
            "{op}: indptr is not monotone: indptr[{}] = {} > indptr[{}] = {}",
            r,
            p[r],
            r + 1,
            p[r + 1]
        )));
    }
    if p.last().copied() != Some(entries as i64) {
        return Err(error(format!(
            "{op}: indptr ends at {}, but there are {} entries",
            p.last().map_or("nothing".to_string(), |e| e.to_string()),
            entries
        )));
    }
    let size = ct.size();
    let column = |k: usize| {
        let mut word = [0u8; 8];
        word[..size].copy_from_slice(&c[k * size..(k + 1) * size]);
        int(u64::from_le_bytes(word), size)
    };
    let outside = |x: i64| x < 0 || x as u64 >= cols;
    if let Some(k) = (0..entries).find(|&k| outside(column(k))) {
        return Err(error(format!(
            "{op}: column index {} of entry {k} is outside 0..{cols}",
            column(k)
        )));
    }
    let c = if ct == i {
        c
    } else {
        index_bytes(decode(&c, ct, int).into_iter(), i, op)?
    };
    make_from_bytes(rows, cols, &p, (&c, &v), (vt, i), op)
}

/// The transpose, with sorted columns.
pub(crate) fn transpose(m: &Matrix<'_>, rows: u64, cols: u64) -> Result<Parts, Error> {
    let op = "transpose";
    let s = check(m, op)?;
    if s.rows != rows {
        return Err(error(format!(
            "{op}: pos has {} rows, the matrix {rows}",
            s.rows
        )));
    }
    let pos = decode(&host::read_bytes(m.pos)?, s.i, int);
    let crd = read_ints(m.crd, op, "crd")?;
    let (vals, vt) = read_floats(m.vals, op, "vals")?;
    // The transpose's rows are the columns, which `row_count` keeps below `u32::MAX / 16`.
    let new_rows = row_count(cols, op)?;
    let (mut new_row, mut new_col) = (Vec::with_capacity(crd.len()), Vec::with_capacity(crd.len()));
    let mut new_val = Vec::with_capacity(crd.len());
    for r in 0..row_count(rows, op)? {
        let (lo, hi) = (pos[2 * r], pos[2 * r + 1]);
        if lo < 0 || hi < lo || hi as u64 > crd.len() as u64 {
            return Err(error(format!(
                "{op}: row {r} has the range {lo}..{hi} of {} entries",
                crd.len()
            )));
        }
        for j in lo as usize..hi as usize {
            let c = crd[j];
            if c < 0 || c as u64 >= cols {
                return Err(error(format!(
                    "{op}: column {c} of entry {j} is outside 0..{cols}"
                )));
            }
            new_row.push(c as u32);
            new_col.push(r as i64);
            new_val.push(vals[j]);
        }
    }
    if s.i == DType::I32 {
        let new_col: Vec<u32> = new_col.into_iter().map(u32::new).collect();
        let m = compress(new_rows, &new_row, &new_col, &new_val);
        make(cols, rows, &m, (vt, s.i), op)
    } else {
        let m = compress(new_rows, &new_row, &new_col, &new_val);
        make(cols, rows, &m, (vt, s.i), op)
    }
}

/// The column hull of a matrix (see the `column-hull` export), of `pos`'s index type: per row
/// `r`, the start is the least column of rows `r..` and the end one past the greatest column
/// of rows `..=r`, so both never decrease and row `a`'s start to row `b`'s end holds every
/// column of rows `a..=b`. Columns are checked against `0..cols`. It decodes `pos` and `crd`
/// as it goes, from their bytes, in one pass over the entries: a plugin's memory holds little
/// more than the two stores' bytes, the result's, and two words a row.
pub(crate) fn column_hull(pos: &Store, crd: &Store, cols: u64) -> Result<Store, Error> {
    let op = "column-hull";
    let shape = pos.shape();
    if shape.len() != 2 || shape[1] != 2 {
        return Err(error(format!(
            "{op}: pos must have shape (rows, 2), not {}",
            tuple(&shape)
        )));
    }
    let rows = row_count(shape[0], op)?;
    let i = ir_dtype(pos.dtype());
    index_type(i, op)?;
    if ir_dtype(crd.dtype()) != i {
        return Err(error(format!(
            "{op}: pos and crd must share an index type, not {i} and {}",
            ir_dtype(crd.dtype())
        )));
    }
    let size = i.size();
    let at = |bytes: &[u8], k: usize| {
        let mut word = [0u8; 8];
        word[..size].copy_from_slice(&bytes[k * size..(k + 1) * size]);
        int(u64::from_le_bytes(word), size)
    };
    let pos = host::read_bytes(pos)?;
    let crd = host::read_bytes(crd)?;
    let entries = (crd.len() / size) as i64;
    let cols_i = i64::try_from(cols).map_err(|_| error(format!("{op}: {cols} columns")))?;
    // Row r's entries, checked.
    let range = |r: usize| -> Result<(usize, usize), Error> {
        let (lo, hi) = (at(&pos, 2 * r), at(&pos, 2 * r + 1));
        if lo < 0 || hi < lo || hi > entries {
            return Err(error(format!(
                "{op}: row {r} has the range {lo}..{hi} of {entries} entries"
            )));
        }
        Ok((lo as usize, hi as usize))
    };
    // Each row's least column, and one past its greatest (`cols` and 0 for an empty row).
    let (mut lows, mut highs) = (vec![cols_i; rows], vec![0i64; rows]);
    for r in 0..rows {
        let (lo, hi) = range(r)?;
        let (mut least, mut reach) = (cols_i, 0i64);
        for (k, bytes) in crd[lo * size..hi * size].chunks_exact(size).enumerate() {
            let mut word = [0u8; 8];
            word[..size].copy_from_slice(bytes);
            let c = int(u64::from_le_bytes(word), size);
            if c < 0 || c >= cols_i {
                return Err(error(format!(
                    "{op}: column {c} of entry {} is outside 0..{cols}",
                    lo + k
                )));
            }
            least = least.min(c);
            reach = reach.max(c + 1);
        }
        (lows[r], highs[r]) = (least, reach);
    }
    let mut hull = vec![0u8; rows * 2 * size];
    let put = |hull: &mut [u8], k: usize, v: i64| {
        hull[k * size..(k + 1) * size].copy_from_slice(&v.to_le_bytes()[..size]);
    };
    // Ends: the greatest column so far, forwards.
    let mut reach = 0i64;
    for (r, &high) in highs.iter().enumerate() {
        reach = reach.max(high);
        put(&mut hull, 2 * r + 1, reach);
    }
    // Starts: the least column from here on, backwards, never past the row's end (rows with no
    // columns before them read nothing).
    let mut least = cols_i;
    for r in (0..rows).rev() {
        least = least.min(lows[r]);
        let end = at(&hull, 2 * r + 1);
        put(&mut hull, 2 * r, least.min(end));
    }
    host::store_from_bytes(&[rows as u64, 2], wit_dtype(i), &hull)
}
