//! Software prefetches of CSR rows (`Compiler::set_prefetch`): a row prefetches its `col` and
//! `val` streams a fixed number of entries past its first one, which for the last rows lies
//! past the stores' ends.

#![allow(clippy::unwrap_used)]

use crate::loops::{Csr, random_csr, spmv_kernel, spmv_reference};
use crate::util::*;
use weft_cpu::{CpuBackend, StoreView};

/// Elements whose last one ends where an inaccessible page begins: a load past the end stops
/// the process, a prefetch does not.
struct BeforeGuard {
    region: *mut libc::c_void,
    region_len: usize,
    data: *mut u8,
}

impl BeforeGuard {
    /// A copy of `values` before a guard page.
    fn new<T: Copy>(values: &[T]) -> BeforeGuard {
        // SAFETY: `sysconf` has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let bytes = std::mem::size_of_val(values);
        let data_len = bytes.next_multiple_of(page).max(page);
        let region_len = data_len + page;
        // SAFETY: an anonymous private mapping at an address the kernel chooses touches no
        // existing memory; the result is checked below.
        let region = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                region_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(region, libc::MAP_FAILED, "mmap");
        // SAFETY: the last page lies inside the mapping just made.
        let guard = unsafe { region.cast::<u8>().add(data_len) };
        // SAFETY: as above; the page is this mapping's own.
        assert_eq!(
            unsafe { libc::mprotect(guard.cast(), page, libc::PROT_NONE) },
            0
        );
        // SAFETY: `bytes <= data_len`, so the copy lies inside the writable pages, ending at
        // the guard page; `T`'s alignment divides the page size and `bytes`.
        let data = unsafe {
            let data = guard.sub(bytes);
            std::ptr::copy_nonoverlapping(values.as_ptr().cast::<u8>(), data, bytes);
            data
        };
        BeforeGuard {
            region,
            region_len,
            data,
        }
    }

    fn view(&self, len: usize) -> StoreView {
        StoreView::dense(self.data, &[len as i64])
    }
}

impl Drop for BeforeGuard {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by `new` with this length and is unmapped once.
        unsafe {
            libc::munmap(self.region, self.region_len);
        }
    }
}

/// A CSR matrix of `rows` rows whose lengths cycle through `lengths`.
fn csr_with_lengths(rows: usize, lengths: &[usize], ncols: usize) -> Csr {
    let mut m = Csr {
        ptr: vec![0],
        col: Vec::new(),
        val: Vec::new(),
        ncols,
    };
    for i in 0..rows {
        for k in 0..lengths[i % lengths.len()] {
            m.col.push(((i * 7 + k * 13) % ncols) as i64);
            m.val.push(((i + k) % 11) as f64 - 5.25);
        }
        m.ptr.push(m.col.len() as i64);
    }
    m
}

#[test]
fn csr_rows_prefetch_past_their_stores_without_faulting() {
    // Short rows (the last rows' prefetches lie past the stores' ends), then rows mixing
    // empty ones with rows longer than the prefetch distance (whose prefetches lie inside
    // them).
    for mut m in [
        random_csr(3000, 1000, 11),
        csr_with_lengths(700, &[0, 1, 250, 5, 400, 3], 1000),
    ] {
        same_with_and_without_prefetches(&mut m);
    }
}

/// Runs `y = m x` from `col` and `val` placed before a guard page, compiled with and without
/// prefetches, on 1 and 2 threads: every run gives the reference's bits.
fn same_with_and_without_prefetches(m: &mut Csr) {
    let rows = m.ptr.len() - 1;
    let mut x: Vec<f64> = (0..m.ncols).map(|i| (i as f64).cos()).collect();
    let want = spmv_reference(m, &x);
    let nnz = m.col.len();
    let col = BeforeGuard::new(&m.col);
    let val = BeforeGuard::new(&m.val);
    let np = m.ptr.len() as i64;
    for prefetch in [true, false] {
        let mut be = CpuBackend::new().unwrap();
        be.compiler().set_prefetch(prefetch);
        assert_eq!(be.compiler().prefetch(), prefetch);
        let k = be.compile(&spmv_kernel()).unwrap();
        assert_eq!(k.prefetched_loops() > 0, prefetch, "prefetch {prefetch}");
        for threads in [1, 2] {
            let mut y = vec![f64::NAN; rows];
            let views = [
                dense(&mut m.ptr, &[np]),
                col.view(nnz),
                val.view(nnz),
                dense(&mut x, &[m.ncols as i64]),
                dense(&mut y, &[rows as i64]),
            ];
            run_on(&k, &views, &[], threads).unwrap();
            assert_eq!(y, want, "prefetch {prefetch}, {threads} threads");
        }
    }
}

/// A loop whose constant bounds leave it empty still compiles and runs: Cranelift drops its
/// blocks, prefetch markers included (found by the `kernel_exec` fuzz target), and a loop of
/// constant bounds that runs still prefetches.
#[test]
fn loops_of_constant_bounds_compile_with_prefetches_whether_or_not_they_run() {
    use weft_ir::{DType, Privilege};
    for (lo, hi) in [(0, 0), (3, 1), (0, 4)] {
        let mut kb = Kb::new();
        let a = kb.store(DType::F64, 1, Privilege::Read);
        let y = kb.store(DType::F64, 1, Privilege::Write);
        let (l, h) = (kb.i64(lo), kb.i64(hi));
        let zero = kb.f64(0.0);
        kb.parallel(y, 1, |kb, idx| {
            let s = kb.for_loop(l, h, &[zero], |kb, j, c| {
                let v = kb.load(a, &[j]);
                vec![kb.add(c[0], v)]
            });
            kb.store_to(y, &[idx[0]], s[0]);
        });
        let mut be = CpuBackend::new().unwrap();
        let k = be.compile(&kb.finish("test.const_bounds")).unwrap();
        assert!(k.prefetched_loops() > 0, "{lo}..{hi}");
        let mut av: Vec<f64> = (0..5).map(|i| i as f64 + 0.5).collect();
        let want: f64 = (lo..hi).map(|j| av[j as usize]).fold(0.0, |s, v| s + v);
        let mut yv = vec![f64::NAN; 3];
        let views = [dense(&mut av, &[5]), dense(&mut yv, &[3])];
        run_on(&k, &views, &[], 1).unwrap();
        assert_eq!(yv, vec![want; 3], "{lo}..{hi}");
    }
}
