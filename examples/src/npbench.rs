//! NPBench's kernels (github.com/spcl/npbench) written in Weft statement for statement, as a
//! NumPy user ports them, on NPBench's own initialization: `examples/numpy/npbench.py` makes
//! each kernel's inputs with NPBench's formulas and writes them as `.npy` files, which
//! [`Inputs::load`] uploads; the same script runs NumPy's version and compares the outputs.
//! The `npbench` binary times both.
//!
//! Each kernel takes its inputs (fresh copies of the arrays it writes) and returns its
//! outputs by name: the arrays it writes in place, or what it returns.

use std::collections::BTreeMap;
use std::path::Path;

use weft::npy::NpyData;
use weft::numeric::Reduction;
use weft::{Array, ComplexArray, Ix, Numeric, Range, Sparse};
use weft_ir::DType;

use crate::AppError;

mod complex_kernels;
pub mod loop_kernels;

/// A kernel's inputs as `npbench.py init` wrote them: sizes, arrays and scalars by name.
pub struct Inputs {
    /// The preset's sizes (`N`, `TSTEPS`, ...).
    pub sizes: BTreeMap<String, i64>,
    /// The array arguments, uploaded.
    pub arrays: BTreeMap<String, Array>,
    /// The complex array arguments (`complex128` files), uploaded.
    pub complex: BTreeMap<String, ComplexArray>,
    /// The scalar arguments (0-d in the files).
    pub scalars: BTreeMap<String, f64>,
    /// The names of the kernel's outputs, in order.
    pub outputs: Vec<String>,
    /// The sparse plugin, for the kernels that build sparse matrices.
    pub sparse: Option<Sparse>,
    /// The numeric plugin the arrays live in.
    pub np: Numeric,
}

impl Inputs {
    /// Reads `dir/sizes.json` and every argument's `.npy`, uploading the arrays; `sparse` is
    /// the sparse plugin loaded into `np`'s runtime, if any. The preset's integer sizes go to
    /// `sizes`, its other numbers (a kernel's float parameters) to `scalars`.
    pub fn load(np: &Numeric, dir: &Path, sparse: Option<&Sparse>) -> Result<Inputs, AppError> {
        let text = std::fs::read_to_string(dir.join("sizes.json"))?;
        let spec: serde_json::Value = serde_json::from_str(&text)?;
        let (mut sizes, mut scalars) = (BTreeMap::new(), BTreeMap::new());
        for (k, v) in spec["sizes"].as_object().ok_or("sizes.json has no sizes")? {
            match (v.as_i64(), v.as_f64()) {
                (Some(i), _) => {
                    sizes.insert(k.clone(), i);
                }
                (None, Some(f)) => {
                    scalars.insert(k.clone(), f);
                }
                _ => return Err(format!("size {k} is not a number").into()),
            }
        }
        let names = |key: &str| -> Result<Vec<String>, AppError> {
            spec[key]
                .as_array()
                .ok_or_else(|| format!("sizes.json has no {key}"))?
                .iter()
                .map(|v| Ok(v.as_str().ok_or("a name is not a string")?.to_string()))
                .collect()
        };
        let (mut arrays, mut complex) = (BTreeMap::new(), BTreeMap::new());
        for arg in names("args")? {
            // Straight into a store, bit for bit, in the file's dtype (a trip through the
            // plugin would pass its memory cap on the larger presets).
            let path = dir.join(format!("{arg}.npy"));
            let file = weft::npy::read(&path)?;
            if matches!(file.data, NpyData::C128(_) | NpyData::C64(_)) {
                complex.insert(arg, np.load_complex(&path)?);
                continue;
            }
            let a = np.load(&path)?;
            if a.shape()?.is_empty() {
                scalars.insert(arg, a.item()?);
                continue;
            }
            arrays.insert(arg, a);
        }
        Ok(Inputs {
            sizes,
            arrays,
            complex,
            scalars,
            outputs: names("outputs")?,
            sparse: sparse.cloned(),
            np: np.clone(),
        })
    }

    /// Size `name`.
    pub fn size(&self, name: &str) -> Result<i64, AppError> {
        self.sizes
            .get(name)
            .copied()
            .ok_or_else(|| format!("no size {name}").into())
    }

    /// Array `name`.
    pub fn array(&self, name: &str) -> Result<&Array, AppError> {
        self.arrays
            .get(name)
            .ok_or_else(|| format!("no array {name}").into())
    }

    /// Complex array `name`.
    pub fn complex(&self, name: &str) -> Result<&ComplexArray, AppError> {
        self.complex
            .get(name)
            .ok_or_else(|| format!("no complex array {name}").into())
    }

    /// Scalar `name`.
    pub fn scalar(&self, name: &str) -> Result<f64, AppError> {
        self.scalars
            .get(name)
            .copied()
            .ok_or_else(|| format!("no scalar {name}").into())
    }

    /// Fresh copies of the arrays, for one run of a kernel that writes its arguments.
    pub fn copies(&self) -> Inputs {
        Inputs {
            sizes: self.sizes.clone(),
            arrays: self
                .arrays
                .iter()
                .map(|(k, v)| (k.clone(), v.copy()))
                .collect(),
            complex: self
                .complex
                .iter()
                .map(|(k, v)| (k.clone(), v.copy()))
                .collect(),
            scalars: self.scalars.clone(),
            outputs: self.outputs.clone(),
            sparse: self.sparse.clone(),
            np: self.np.clone(),
        }
    }
}

/// A kernel's outputs by name; a complex output is two, its parts named `NAME.real` and
/// `NAME.imag` (NumPy's attributes), which `npbench.py` compares with its output's.
pub type Outputs = Vec<(String, Array)>;

/// One kernel: its NPBench name and its Weft body.
pub struct Kernel {
    /// NPBench's name.
    pub name: &'static str,
    /// The body.
    pub run: fn(&Inputs) -> Result<Outputs, AppError>,
}

/// The kernels, in NPBench's order of this list.
pub const KERNELS: &[Kernel] = &[
    Kernel {
        name: "jacobi_1d",
        run: jacobi_1d,
    },
    Kernel {
        name: "jacobi_2d",
        run: jacobi_2d,
    },
    Kernel {
        name: "heat_3d",
        run: heat_3d,
    },
    Kernel {
        name: "fdtd_2d",
        run: fdtd_2d,
    },
    Kernel {
        name: "gesummv",
        run: gesummv,
    },
    Kernel {
        name: "atax",
        run: atax,
    },
    Kernel {
        name: "bicg",
        run: bicg,
    },
    Kernel {
        name: "mvt",
        run: mvt,
    },
    Kernel {
        name: "gemver",
        run: gemver,
    },
    Kernel {
        name: "softmax",
        run: softmax,
    },
    Kernel {
        name: "go_fast",
        run: go_fast,
    },
    Kernel {
        name: "compute",
        run: compute,
    },
    Kernel {
        name: "gemm",
        run: gemm,
    },
    Kernel {
        name: "k2mm",
        run: k2mm,
    },
    Kernel {
        name: "k3mm",
        run: k3mm,
    },
    Kernel {
        name: "doitgen",
        run: doitgen,
    },
    Kernel {
        name: "covariance",
        run: covariance,
    },
    Kernel {
        name: "floyd_warshall",
        run: floyd_warshall,
    },
    Kernel {
        name: "trisolv",
        run: trisolv,
    },
    Kernel {
        name: "hdiff",
        run: hdiff,
    },
    Kernel {
        name: "syrk",
        run: syrk,
    },
    Kernel {
        name: "mlp",
        run: mlp,
    },
    Kernel {
        name: "arc_distance",
        run: arc_distance,
    },
    Kernel {
        name: "syr2k",
        run: syr2k,
    },
    Kernel {
        name: "correlation",
        run: correlation,
    },
    Kernel {
        name: "trmm",
        run: trmm,
    },
    Kernel {
        name: "symm",
        run: symm,
    },
    Kernel {
        name: "lu",
        run: lu,
    },
    Kernel {
        name: "ludcmp",
        run: ludcmp,
    },
    Kernel {
        name: "deriche",
        run: deriche,
    },
    Kernel {
        name: "vadv",
        run: vadv,
    },
    Kernel {
        name: "adi",
        run: adi,
    },
    Kernel {
        name: "cavity_flow",
        run: cavity_flow,
    },
    Kernel {
        name: "spmv",
        run: spmv,
    },
    Kernel {
        name: "conv2d_bias",
        run: conv2d_bias,
    },
    Kernel {
        name: "nbody",
        run: nbody,
    },
    Kernel {
        name: "lenet",
        run: lenet,
    },
    Kernel {
        name: "resnet",
        run: resnet,
    },
    Kernel {
        name: "channel_flow",
        run: channel_flow,
    },
    Kernel {
        name: "cholesky",
        run: cholesky,
    },
    Kernel {
        name: "cholesky2",
        run: cholesky2,
    },
    Kernel {
        name: "gramschmidt",
        run: gramschmidt,
    },
    Kernel {
        name: "durbin",
        run: durbin,
    },
    Kernel {
        name: "seidel_2d",
        run: seidel_2d,
    },
    Kernel {
        name: "nussinov",
        run: nussinov,
    },
    Kernel {
        name: "covariance2",
        run: covariance2,
    },
    Kernel {
        name: "crc16",
        run: crc16,
    },
    Kernel {
        name: "mandelbrot1",
        run: complex_kernels::mandelbrot1,
    },
    Kernel {
        name: "mandelbrot2",
        run: complex_kernels::mandelbrot2,
    },
    Kernel {
        name: "stockham_fft",
        run: complex_kernels::stockham_fft,
    },
    Kernel {
        name: "contour_integral",
        run: complex_kernels::contour_integral,
    },
    Kernel {
        name: "scattering_self_energies",
        run: complex_kernels::scattering_self_energies,
    },
    Kernel {
        name: "azimint_hist",
        run: azimint_hist,
    },
    Kernel {
        name: "azimint_naive",
        run: azimint_naive,
    },
];

/// `a[lo..hi]` along each dimension.
fn s(a: &Array, ranges: &[(i64, i64)]) -> Array {
    let r: Vec<Range> = ranges.iter().map(|&(lo, hi)| Range::new(lo, hi)).collect();
    a.slice(&r)
}

/// The named arrays, in order, as outputs.
fn outputs(x: &Inputs) -> Result<Outputs, AppError> {
    x.outputs
        .iter()
        .map(|o| Ok((o.clone(), x.array(o)?.clone())))
        .collect()
}

/// The steps of NPBench's `for t in range(1, TSTEPS)`.
fn time_steps(steps: i64) -> usize {
    usize::try_from(steps.saturating_sub(1)).unwrap_or(0)
}

fn jacobi_1d(x: &Inputs) -> Result<Outputs, AppError> {
    let (steps, n) = (x.size("TSTEPS")?, x.size("N")?);
    let (a, b) = (x.array("A")?, x.array("B")?);
    let sweep = |from: &Array, to: &Array| -> weft::Result<()> {
        let sum = &(&s(from, &[(0, n - 2)]) + &s(from, &[(1, n - 1)])) + &s(from, &[(2, n)]);
        s(to, &[(1, n - 1)]).assign(&(sum * 0.33333))
    };
    // `for _ in 1..steps`, as a replayed trace (see `Numeric::repeat`).
    a.numeric().repeat(time_steps(steps), |_| {
        sweep(a, b)?;
        sweep(b, a)
    })?;
    outputs(x)
}

fn jacobi_2d(x: &Inputs) -> Result<Outputs, AppError> {
    let (steps, n) = (x.size("TSTEPS")?, x.size("N")?);
    let (a, b) = (x.array("A")?, x.array("B")?);
    let (i, lo, hi) = ((1, n - 1), (0, n - 2), (2, n));
    let sweep = |f: &Array, to: &Array| -> weft::Result<()> {
        let sum = &(&(&(&s(f, &[i, i]) + &s(f, &[i, lo])) + &s(f, &[i, hi])) + &s(f, &[hi, i]))
            + &s(f, &[lo, i]);
        s(to, &[i, i]).assign(&(sum * 0.2))
    };
    a.numeric().repeat(time_steps(steps), |_| {
        sweep(a, b)?;
        sweep(b, a)
    })?;
    outputs(x)
}

fn heat_3d(x: &Inputs) -> Result<Outputs, AppError> {
    let (steps, n) = (x.size("TSTEPS")?, x.size("N")?);
    let (a, b) = (x.array("A")?, x.array("B")?);
    let (i, lo, hi) = ((1, n - 1), (0, n - 2), (2, n));
    let sweep = |f: &Array, to: &Array| -> weft::Result<()> {
        let c = s(f, &[i, i, i]);
        let twice = &c * 2.0;
        let axis =
            |p: [(i64, i64); 3], m: [(i64, i64); 3]| (&(&s(f, &p) - &twice) + &s(f, &m)) * 0.125;
        let sum = &(&(&axis([hi, i, i], [lo, i, i]) + &axis([i, hi, i], [i, lo, i]))
            + &axis([i, i, hi], [i, i, lo]))
            + &c;
        s(to, &[i, i, i]).assign(&sum)
    };
    a.numeric().repeat(time_steps(steps), |_| {
        sweep(a, b)?;
        sweep(b, a)
    })?;
    outputs(x)
}

fn fdtd_2d(x: &Inputs) -> Result<Outputs, AppError> {
    let (tmax, nx, ny) = (x.size("TMAX")?, x.size("NX")?, x.size("NY")?);
    let (ex, ey, hz, fict) = (
        x.array("ex")?,
        x.array("ey")?,
        x.array("hz")?,
        x.array("_fict_")?,
    );
    // `for t in range(TMAX)`, as a replayed trace (see `Numeric::repeat`): the view of
    // `_fict_[t]` moves by one element a step.
    let steps = usize::try_from(tmax).unwrap_or(0);
    ex.numeric().repeat(steps, |t| {
        let t = i64::try_from(t).map_err(|e| weft::Error::Usage(e.to_string()))?;
        s(ey, &[(0, 1), (0, ny)]).assign(&fict.index(&[Ix::At(t)]))?;
        let mut v = s(ey, &[(1, nx), (0, ny)]);
        v -= &((&s(hz, &[(1, nx), (0, ny)]) - &s(hz, &[(0, nx - 1), (0, ny)])) * 0.5);
        let mut v = s(ex, &[(0, nx), (1, ny)]);
        v -= &((&s(hz, &[(0, nx), (1, ny)]) - &s(hz, &[(0, nx), (0, ny - 1)])) * 0.5);
        let (r, c, r1, c1) = ((0, nx - 1), (0, ny - 1), (1, nx), (1, ny));
        let curl = &(&(&s(ex, &[r, c1]) - &s(ex, &[r, c])) + &s(ey, &[r1, c])) - &s(ey, &[r, c]);
        let mut v = s(hz, &[r, c]);
        v -= &(curl * 0.7);
        Ok(())
    })?;
    outputs(x)
}

fn gesummv(x: &Inputs) -> Result<Outputs, AppError> {
    let (alpha, beta) = (x.scalar("alpha")?, x.scalar("beta")?);
    let (a, b, v) = (x.array("A")?, x.array("B")?, x.array("x")?);
    let out = (a * alpha).matmul(v) + (b * beta).matmul(v);
    Ok(vec![("out".into(), out)])
}

fn atax(x: &Inputs) -> Result<Outputs, AppError> {
    let (a, v) = (x.array("A")?, x.array("x")?);
    Ok(vec![("out".into(), a.matmul(v).matmul(a))])
}

fn bicg(x: &Inputs) -> Result<Outputs, AppError> {
    let (a, p, r) = (x.array("A")?, x.array("p")?, x.array("r")?);
    Ok(vec![("s".into(), r.matmul(a)), ("q".into(), a.matmul(p))])
}

fn mvt(x: &Inputs) -> Result<Outputs, AppError> {
    let a = x.array("A")?;
    let mut x1 = x.array("x1")?.clone();
    x1 += &a.matmul(x.array("y_1")?);
    let mut x2 = x.array("x2")?.clone();
    x2 += &x.array("y_2")?.matmul(a);
    outputs(x)
}

fn gemver(x: &Inputs) -> Result<Outputs, AppError> {
    let (alpha, beta) = (x.scalar("alpha")?, x.scalar("beta")?);
    let a = x.array("A")?;
    let v = |name: &str| x.array(name);
    let mut am = a.clone();
    am += &(v("u1")?.outer(v("v1")?) + v("u2")?.outer(v("v2")?));
    let mut xv = v("x")?.clone();
    xv += &((v("y")? * beta).matmul(a) + v("z")?);
    let mut w = v("w")?.clone();
    w += &(a * alpha).matmul(v("x")?);
    outputs(x)
}

fn softmax(x: &Inputs) -> Result<Outputs, AppError> {
    let v = x.array("x")?;
    let max = v.reduce_axes(Reduction::Max, Some(&[-1]), true);
    let e = (v - &max).exp();
    let sum = e.reduce_axes(Reduction::Sum, Some(&[-1]), true);
    Ok(vec![("out".into(), &e / &sum)])
}

fn go_fast(x: &Inputs) -> Result<Outputs, AppError> {
    let a = x.array("a")?;
    let n = a.shape()?.first().copied().unwrap_or(0) as i64;
    let np = a.numeric();
    let trace = np.zeros(&[], DType::F64);
    // `for i in range(a.shape[0]): trace += np.tanh(a[i, i])`, as a replayed trace (see
    // `Numeric::repeat`): the view of `a[i, i]` moves by `n + 1` elements a step.
    np.repeat(usize::try_from(n).unwrap_or(0), |i| {
        let i = i64::try_from(i).map_err(|e| weft::Error::Usage(e.to_string()))?;
        let mut sum = trace.clone();
        sum += &a.index(&[Ix::At(i), Ix::At(i)]).tanh();
        sum.check()
    })?;
    Ok(vec![("out".into(), a + &trace)])
}

fn compute(x: &Inputs) -> Result<Outputs, AppError> {
    let (a1, a2) = (x.array("array_1")?, x.array("array_2")?);
    let (a, b, c) = (x.scalar("a")?, x.scalar("b")?, x.scalar("c")?);
    let out = &(&(a1.clip(2i64, 10i64) * a as i64) + &(a2 * b as i64)) + c as i64;
    Ok(vec![("out".into(), out)])
}

fn gemm(x: &Inputs) -> Result<Outputs, AppError> {
    let (alpha, beta) = (x.scalar("alpha")?, x.scalar("beta")?);
    let (a, b, c) = (x.array("A")?, x.array("B")?, x.array("C")?);
    c.assign(&((a * alpha).matmul(b) + c * beta))?;
    outputs(x)
}

fn k2mm(x: &Inputs) -> Result<Outputs, AppError> {
    let (alpha, beta) = (x.scalar("alpha")?, x.scalar("beta")?);
    let (a, b, c, d) = (x.array("A")?, x.array("B")?, x.array("C")?, x.array("D")?);
    d.assign(&((a * alpha).matmul(b).matmul(c) + d * beta))?;
    outputs(x)
}

fn k3mm(x: &Inputs) -> Result<Outputs, AppError> {
    let (a, b, c, d) = (x.array("A")?, x.array("B")?, x.array("C")?, x.array("D")?);
    Ok(vec![("out".into(), a.matmul(b).matmul(c).matmul(d))])
}

fn doitgen(x: &Inputs) -> Result<Outputs, AppError> {
    let (nr, nq, np_) = (x.size("NR")?, x.size("NQ")?, x.size("NP")?);
    let (a, c4) = (x.array("A")?, x.array("C4")?);
    a.assign(
        &a.reshape(&[nr, nq, 1, np_])
            .matmul(c4)
            .reshape(&[nr, nq, np_]),
    )?;
    outputs(x)
}

fn covariance(x: &Inputs) -> Result<Outputs, AppError> {
    let m = x.size("M")?;
    let float_n = x.scalar("float_n")?;
    let mut data = x.array("data")?.clone();
    let mean = data.mean_axes(Some(&[0]), false);
    data -= &mean;
    let np = data.numeric();
    let cov = np.zeros(&[m as u64, m as u64], data.dtype()?);
    let all = Ix::Slice(Range::all());
    // `for i in range(M)`, as a replayed trace (see `Numeric::repeat`): the views move by a
    // row or a column and shrink by one element a step, and so does the product's buffer.
    np.repeat(usize::try_from(m).unwrap_or(0), |i| {
        let i = index(i)?;
        let tail = Ix::Slice(Range::new(i, m));
        let v = data
            .index(&[all, Ix::At(i)])
            .matmul(&data.index(&[all, tail]))
            / (float_n - 1.0);
        cov.index(&[tail, Ix::At(i)]).assign(&v)?;
        cov.index(&[Ix::At(i), tail]).assign(&v)
    })?;
    Ok(vec![("out".into(), cov)])
}

fn floyd_warshall(x: &Inputs) -> Result<Outputs, AppError> {
    let path = x.array("path")?;
    let n = path.shape()?.first().copied().unwrap_or(0) as i64;
    let all = Ix::Slice(Range::all());
    // `for k in range(path.shape[0])`, as a replayed trace (see `Numeric::repeat`): the
    // views of `path[:, k]` and `path[k, :]` move by 1 and `n` elements a step.
    path.numeric()
        .repeat(usize::try_from(n).unwrap_or(0), |k| {
            let k = i64::try_from(k).map_err(|e| weft::Error::Usage(e.to_string()))?;
            let column = path.index(&[all, Ix::At(k)]).reshape(&[n, 1]);
            let row = path.index(&[Ix::At(k), all]).reshape(&[1, n]);
            path.assign(&path.minimum(&(&column + &row)))
        })?;
    outputs(x)
}

fn trisolv(x: &Inputs) -> Result<Outputs, AppError> {
    let (l, v, b) = (x.array("L")?, x.array("x")?, x.array("b")?);
    let n = v.shape()?.first().copied().unwrap_or(0);
    // `for i in range(x.shape[0])`, as a replayed trace (see `Numeric::repeat`): each row's
    // views move by a row and grow by one element.
    l.numeric().repeat(usize::try_from(n).unwrap_or(0), |i| {
        let i = i64::try_from(i).map_err(|e| weft::Error::Usage(e.to_string()))?;
        let dot = l
            .index(&[Ix::At(i), Ix::Slice(Range::new(0, i))])
            .matmul(&v.slice(&[Range::new(0, i)]));
        let value = (&b.index(&[Ix::At(i)]) - &dot) / &l.index(&[Ix::At(i), Ix::At(i)]);
        v.index(&[Ix::At(i)]).assign(&value)
    })?;
    outputs(x)
}

fn hdiff(x: &Inputs) -> Result<Outputs, AppError> {
    let (input, out, coeff) = (
        x.array("in_field")?,
        x.array("out_field")?,
        x.array("coeff")?,
    );
    let shape = out.shape()?;
    let (i, j, k) = (shape[0] as i64, shape[1] as i64, shape[2] as i64);
    let f = |a: &Array, r: (i64, i64), c: (i64, i64)| s(a, &[r, c, (0, k)]);
    let lap = &f(input, (1, i + 3), (1, j + 3)) * 4.0
        - &(&(&(&f(input, (2, i + 4), (1, j + 3)) + &f(input, (0, i + 2), (1, j + 3)))
            + &f(input, (1, i + 3), (2, j + 4)))
            + &f(input, (1, i + 3), (0, j + 2)));
    let res = &f(&lap, (1, i + 2), (1, j + 1)) - &f(&lap, (0, i + 1), (1, j + 1));
    let flx = (&res * &(&f(input, (2, i + 3), (2, j + 2)) - &f(input, (1, i + 2), (2, j + 2))))
        .gt(0.0)
        .select(0.0, &res);
    let res = &f(&lap, (1, i + 1), (1, j + 2)) - &f(&lap, (1, i + 1), (0, j + 1));
    let fly = (&res * &(&f(input, (2, i + 2), (2, j + 3)) - &f(input, (2, i + 2), (1, j + 2))))
        .gt(0.0)
        .select(0.0, &res);
    let diff = &(&(&f(&flx, (1, i + 1), (0, j)) - &f(&flx, (0, i), (0, j)))
        + &f(&fly, (0, i), (1, j + 1)))
        - &f(&fly, (0, i), (0, j));
    out.assign(&(&f(input, (2, i + 2), (2, j + 2)) - &(coeff * &diff)))?;
    outputs(x)
}

/// The loops of NPBench's `syrk` and `syr2k`: for each row `i` of `c`, `C[i, :i + 1] *=
/// beta`, then `for k in range(cols)`, as a replayed trace (see `Numeric::repeat`), `C[i, :i
/// + 1] += term(i, k)`, whose views move by one element a step.
fn rank_update(
    c: &Array,
    beta: f64,
    (rows, cols): (i64, i64),
    term: impl Fn(i64, i64) -> Array,
) -> Result<(), AppError> {
    for i in 0..rows {
        let mut head = c.index(&[Ix::At(i), span(0, i + 1)]);
        head *= beta;
        c.numeric()
            .repeat(usize::try_from(cols).unwrap_or(0), |k| {
                let mut sum = head.clone();
                sum += &term(i, index(k)?);
                sum.check()
            })?;
    }
    Ok(())
}

/// The rows and columns of a matrix.
fn rows_cols(a: &Array) -> Result<(i64, i64), AppError> {
    match a.shape()?[..] {
        [rows, cols] => Ok((rows as i64, cols as i64)),
        ref other => Err(format!("expected a matrix, got shape {other:?}").into()),
    }
}

fn syrk(x: &Inputs) -> Result<Outputs, AppError> {
    let (alpha, beta) = (x.scalar("alpha")?, x.scalar("beta")?);
    let (c, a) = (x.array("C")?, x.array("A")?);
    rank_update(c, beta, rows_cols(a)?, |i, k| {
        let column = a.index(&[span(0, i + 1), Ix::At(k)]);
        &(&a.index(&[Ix::At(i), Ix::At(k)]) * alpha) * &column
    })?;
    outputs(x)
}

fn syr2k(x: &Inputs) -> Result<Outputs, AppError> {
    let (alpha, beta) = (x.scalar("alpha")?, x.scalar("beta")?);
    let (c, a, b) = (x.array("C")?, x.array("A")?, x.array("B")?);
    rank_update(c, beta, rows_cols(a)?, |i, k| {
        let column = |m: &Array| m.index(&[span(0, i + 1), Ix::At(k)]);
        let at = |m: &Array| m.index(&[Ix::At(i), Ix::At(k)]);
        &(&(&column(a) * alpha) * &at(b)) + &(&(&column(b) * alpha) * &at(a))
    })?;
    outputs(x)
}

fn correlation(x: &Inputs) -> Result<Outputs, AppError> {
    let m = x.size("M")?;
    let float_n = x.scalar("float_n")?;
    let mut data = x.array("data")?.clone();
    let mean = data.mean_axes(Some(&[0]), false);
    let stddev = data.std_axes(Some(&[0]), false, 0);
    stddev.assign_where(&stddev.le(0.1), 1.0)?;
    data -= &mean;
    data /= &(&stddev * float_n.sqrt());
    let np = data.numeric();
    let corr = np.eye(m as u64, data.dtype()?);
    let all = Ix::Slice(Range::all());
    // `for i in range(M - 1)`, as a replayed trace, as `covariance`'s.
    np.repeat(usize::try_from(m - 1).unwrap_or(0), |i| {
        let i = index(i)?;
        let tail = Ix::Slice(Range::new(i + 1, m));
        let v = data
            .index(&[all, Ix::At(i)])
            .matmul(&data.index(&[all, tail]));
        corr.index(&[Ix::At(i), tail]).assign(&v)?;
        corr.index(&[tail, Ix::At(i)]).assign(&v)
    })?;
    Ok(vec![("corr".into(), corr)])
}

fn trmm(x: &Inputs) -> Result<Outputs, AppError> {
    let alpha = x.scalar("alpha")?;
    let (a, b) = (x.array("A")?, x.array("B")?);
    let shape = b.shape()?;
    let (rows, cols) = (shape[0] as i64, shape[1] as i64);
    for i in 0..rows {
        let below = Ix::Slice(Range::new(i + 1, rows));
        let column = a.index(&[below, Ix::At(i)]);
        // `for j in range(B.shape[1])`, as a replayed trace (see `Numeric::repeat`): the views
        // of `B[i, j]` and `B[i + 1:, j]` move by one element a step.
        b.numeric()
            .repeat(usize::try_from(cols).unwrap_or(0), |j| {
                let j = i64::try_from(j).map_err(|e| weft::Error::Usage(e.to_string()))?;
                let mut at = b.index(&[Ix::At(i), Ix::At(j)]);
                at += &column.dot(&b.index(&[below, Ix::At(j)]));
                at.check()
            })?;
    }
    let mut all = b.clone();
    all *= alpha;
    outputs(x)
}

fn symm(x: &Inputs) -> Result<Outputs, AppError> {
    let (alpha, beta) = (x.scalar("alpha")?, x.scalar("beta")?);
    let (c, a, b) = (x.array("C")?, x.array("A")?, x.array("B")?);
    let shape = c.shape()?;
    let (rows, cols) = (shape[0] as i64, shape[1] as i64);
    let np = c.numeric();
    let temp2 = np.empty(&[cols as u64], c.dtype()?);
    let mut scaled = c.clone();
    scaled *= beta;
    for i in 0..rows {
        let head = Ix::Slice(Range::new(0, i));
        let a_row = a.index(&[Ix::At(i), head]);
        // `for j in range(C.shape[1])`, as a replayed trace: every view moves by one element
        // (one column) a step.
        np.repeat(usize::try_from(cols).unwrap_or(0), |j| {
            let j = i64::try_from(j).map_err(|e| weft::Error::Usage(e.to_string()))?;
            let mut column = c.index(&[head, Ix::At(j)]);
            column += &(&(&b.index(&[Ix::At(i), Ix::At(j)]) * alpha) * &a_row);
            temp2
                .index(&[Ix::At(j)])
                .assign(&b.index(&[head, Ix::At(j)]).dot(&a_row))
        })?;
        let mut row = c.index(&[Ix::At(i)]);
        row += &(&(&(&b.index(&[Ix::At(i)]) * alpha) * &a.index(&[Ix::At(i), Ix::At(i)]))
            + &(&temp2 * alpha));
        row.check()?;
    }
    outputs(x)
}

/// A loop's index as the `i64` that views take.
fn index(k: usize) -> weft::Result<i64> {
    i64::try_from(k).map_err(|e| weft::Error::Usage(e.to_string()))
}

/// `a[lo:hi]` of one dimension, as an index.
fn span(lo: i64, hi: i64) -> Ix {
    Ix::Slice(Range::new(lo, hi))
}

fn lu(x: &Inputs) -> Result<Outputs, AppError> {
    lu_in_place(x.array("A")?)?;
    outputs(x)
}

/// NPBench's LU factorization loops (`lu`, and the first half of `ludcmp`), in place.
fn lu_in_place(a: &Array) -> weft::Result<()> {
    let n = a.shape()?.first().copied().unwrap_or(0) as i64;
    let np = a.numeric();
    for i in 0..n {
        // Both `for j` loops as replayed traces: their views grow and move by one element.
        np.repeat(usize::try_from(i).unwrap_or(0), |j| {
            let j = index(j)?;
            let mut at = a.index(&[Ix::At(i), Ix::At(j)]);
            at -= &a
                .index(&[Ix::At(i), span(0, j)])
                .matmul(&a.index(&[span(0, j), Ix::At(j)]));
            at /= &a.index(&[Ix::At(j), Ix::At(j)]);
            at.check()
        })?;
        np.repeat(usize::try_from(n - i).unwrap_or(0), |j| {
            let j = i + index(j)?;
            let mut at = a.index(&[Ix::At(i), Ix::At(j)]);
            at -= &a
                .index(&[Ix::At(i), span(0, i)])
                .matmul(&a.index(&[span(0, i), Ix::At(j)]));
            at.check()
        })?;
    }
    Ok(())
}

/// The factorization of `lu`, then the forward and backward substitutions, each row's dot
/// product with what is solved so far (replayed traces: the views grow, or shrink and move
/// back, by one element a step).
fn ludcmp(x: &Inputs) -> Result<Outputs, AppError> {
    let (a, b) = (x.array("A")?, x.array("b")?);
    lu_in_place(a)?;
    let n = a.shape()?.first().copied().unwrap_or(0) as i64;
    let np = a.numeric();
    let len = b.shape()?;
    let (xv, yv) = (np.zeros(&len, b.dtype()?), np.zeros(&len, b.dtype()?));
    let steps = usize::try_from(n).unwrap_or(0);
    np.repeat(steps, |i| {
        let i = index(i)?;
        let dot = a
            .index(&[Ix::At(i), span(0, i)])
            .matmul(&yv.index(&[span(0, i)]));
        yv.index(&[Ix::At(i)])
            .assign(&(&b.index(&[Ix::At(i)]) - &dot))
    })?;
    np.repeat(steps, |k| {
        let i = n - 1 - index(k)?;
        let dot = a
            .index(&[Ix::At(i), span(i + 1, n)])
            .matmul(&xv.index(&[span(i + 1, n)]));
        let value = (&yv.index(&[Ix::At(i)]) - &dot) / &a.index(&[Ix::At(i), Ix::At(i)]);
        xv.index(&[Ix::At(i)]).assign(&value)
    })?;
    Ok(vec![
        ("A".into(), a.clone()),
        ("x".into(), xv),
        ("y".into(), yv),
    ])
}

/// The Deriche edge detector: a recursive filter along each row, forward and backward, then
/// along each column; each recurrence one replayed trace of column (or row) updates.
fn deriche(x: &Inputs) -> Result<Outputs, AppError> {
    let alpha = x.scalar("alpha")?;
    let img = x.array("imgIn")?;
    let shape = img.shape()?;
    let (w, h) = (shape[0] as i64, shape[1] as i64);
    // The coefficients, as NumPy computes them (in float64).
    let e = (-alpha).exp();
    let k = (1.0 - e) * (1.0 - e) / (1.0 + alpha * e - (2.0 * alpha).exp());
    let (a1, a2, a3, a4) = (
        k,
        k * e * (alpha - 1.0),
        k * e * (alpha + 1.0),
        -k * (-2.0 * alpha).exp(),
    );
    let (b1, b2) = (2f64.powf(-alpha), -(-2.0 * alpha).exp());
    let np = img.numeric();
    let dtype = img.dtype()?;
    let all = Ix::Slice(Range::all());
    let col = |a: &Array, j: i64| a.index(&[all, Ix::At(j)]);
    let row = |a: &Array, i: i64| a.index(&[Ix::At(i), all]);
    // `a * p + b * q + c * r + d * s`, summed left to right as NumPy does.
    let four = |terms: [(f64, Array); 4]| {
        let [(a, p), (b, q), (c, r), (d, t)] = terms;
        &(&(&(&p * a) + &(&q * b)) + &(&r * c)) + &(&t * d)
    };
    let steps = |n: i64| usize::try_from(n - 2).unwrap_or(0);

    let y1 = np.empty(&shape, dtype);
    col(&y1, 0).assign(&(&col(img, 0) * a1))?;
    col(&y1, 1).assign(&(&(&(&col(img, 1) * a1) + &(&col(img, 0) * a2)) + &(&col(&y1, 0) * b1)))?;
    np.repeat(steps(h), |t| {
        let j = index(t)? + 2;
        col(&y1, j).assign(&four([
            (a1, col(img, j)),
            (a2, col(img, j - 1)),
            (b1, col(&y1, j - 1)),
            (b2, col(&y1, j - 2)),
        ]))
    })?;
    let y2 = np.empty(&shape, dtype);
    col(&y2, h - 1).assign(0.0)?;
    col(&y2, h - 2).assign(&(&col(img, h - 1) * a3))?;
    np.repeat(steps(h), |t| {
        let j = h - 3 - index(t)?;
        col(&y2, j).assign(&four([
            (a3, col(img, j + 1)),
            (a4, col(img, j + 2)),
            (b1, col(&y2, j + 1)),
            (b2, col(&y2, j + 2)),
        ]))
    })?;
    let out = &y1 + &y2;

    row(&y1, 0).assign(&(&row(&out, 0) * a1))?;
    row(&y1, 1)
        .assign(&(&(&(&row(&out, 1) * a1) + &(&row(&out, 0) * a2)) + &(&row(&y1, 0) * b1)))?;
    np.repeat(steps(w), |t| {
        let i = index(t)? + 2;
        row(&y1, i).assign(&four([
            (a1, row(&out, i)),
            (a2, row(&out, i - 1)),
            (b1, row(&y1, i - 1)),
            (b2, row(&y1, i - 2)),
        ]))
    })?;
    row(&y2, w - 1).assign(0.0)?;
    row(&y2, w - 2).assign(&(&row(&out, w - 1) * a3))?;
    np.repeat(steps(w), |t| {
        let i = w - 3 - index(t)?;
        row(&y2, i).assign(&four([
            (a3, row(&out, i + 1)),
            (a4, row(&out, i + 2)),
            (b1, row(&y2, i + 1)),
            (b2, row(&y2, i + 2)),
        ]))
    })?;
    out.assign(&(&y1 + &y2))?;
    Ok(vec![("imgOut".into(), out)])
}

/// Vertical advection (NPBench's `vadv`): a tridiagonal solve along the last axis of every
/// column, forward then backward, each `k` one step of a replayed trace over `(I, J)` planes.
fn vadv(x: &Inputs) -> Result<Outputs, AppError> {
    const BET_M: f64 = 0.5;
    const BET_P: f64 = 0.5;
    let dtr = x.scalar("dtr_stage")?;
    let v = |name: &str| x.array(name);
    let (ustage, u, wcon, upos, utens) = (
        v("utens_stage")?,
        v("u_stage")?,
        v("wcon")?,
        v("u_pos")?,
        v("utens")?,
    );
    let shape = ustage.shape()?;
    let (ni, nk) = (shape[0] as i64, shape[2] as i64);
    let np = ustage.numeric();
    let dtype = ustage.dtype()?;
    let (ccol, dcol) = (np.empty(&shape, dtype), np.empty(&shape, dtype));
    let data_col = np.empty(&shape[..2], dtype);
    let all = Ix::Slice(Range::all());
    let at = |a: &Array, k: i64| a.index(&[all, all, Ix::At(k)]);
    // `wcon[1:, :, k] + wcon[:-1, :, k]`.
    let wsum = |k: i64| {
        &wcon.index(&[span(1, ni + 1), all, Ix::At(k)])
            + &wcon.index(&[span(0, ni), all, Ix::At(k)])
    };
    // `dtr * u_pos[k] + utens[k] + utens_stage[k] + correction`.
    let dstart = |k: i64, correction: &Array| {
        &(&(&(&at(upos, k) * dtr) + &at(utens, k)) + &at(ustage, k)) + correction
    };
    let neg = |a: &Array| a * -1.0;
    // k = 0.
    let gcv = &wsum(1) * 0.25;
    let cs = &gcv * BET_M;
    at(&ccol, 0).assign(&(&gcv * BET_P))?;
    let bcol = dtr - &at(&ccol, 0);
    let correction = &neg(&cs) * &(&at(u, 1) - &at(u, 0));
    at(&dcol, 0).assign(&dstart(0, &correction))?;
    let divided = 1.0 / &bcol;
    at(&ccol, 0).assign(&(&at(&ccol, 0) * &divided))?;
    at(&dcol, 0).assign(&(&at(&dcol, 0) * &divided))?;
    // k = 1 .. K - 2.
    np.repeat(usize::try_from(nk - 2).unwrap_or(0), |t| {
        let k = index(t)? + 1;
        let gav = &wsum(k) * -0.25;
        let gcv = &wsum(k + 1) * 0.25;
        let (as_, cs, acol) = (&gav * BET_M, &gcv * BET_M, &gav * BET_P);
        at(&ccol, k).assign(&(&gcv * BET_P))?;
        let bcol = &(dtr - &acol) - &at(&ccol, k);
        let correction =
            &(&neg(&as_) * &(&at(u, k - 1) - &at(u, k))) - &(&cs * &(&at(u, k + 1) - &at(u, k)));
        at(&dcol, k).assign(&dstart(k, &correction))?;
        let divided = 1.0 / &(&bcol - &(&at(&ccol, k - 1) * &acol));
        at(&ccol, k).assign(&(&at(&ccol, k) * &divided))?;
        let d = &(&at(&dcol, k) - &(&at(&dcol, k - 1) * &acol)) * &divided;
        at(&dcol, k).assign(&d)
    })?;
    // k = K - 1.
    let k = nk - 1;
    let gav = &wsum(k) * -0.25;
    let (as_, acol) = (&gav * BET_M, &gav * BET_P);
    let bcol = dtr - &acol;
    let correction = &neg(&as_) * &(&at(u, k - 1) - &at(u, k));
    at(&dcol, k).assign(&dstart(k, &correction))?;
    let divided = 1.0 / &(&bcol - &(&at(&ccol, k - 1) * &acol));
    let d = &(&at(&dcol, k) - &(&at(&dcol, k - 1) * &acol)) * &divided;
    at(&dcol, k).assign(&d)?;
    // Back substitution.
    data_col.assign(&at(&dcol, k))?;
    at(ustage, k).assign(&(&(&data_col - &at(upos, k)) * dtr))?;
    np.repeat(usize::try_from(nk - 1).unwrap_or(0), |t| {
        let k = nk - 2 - index(t)?;
        let datacol = &at(&dcol, k) - &(&at(&ccol, k) * &data_col);
        data_col.assign(&datacol)?;
        at(ustage, k).assign(&(&(&datacol - &at(upos, k)) * dtr))
    })?;
    outputs(x)
}

/// Alternating-direction implicit solver (NPBench's `adi`): per time step, a tridiagonal solve
/// along every column, then along every row, each sweep over `j` one step of a replayed trace
/// over whole columns or rows.
fn adi(x: &Inputs) -> Result<Outputs, AppError> {
    let (tsteps, n) = (x.size("TSTEPS")?, x.size("N")?);
    let u = x.array("u")?;
    let np = u.numeric();
    let (shape, dtype) = (u.shape()?, u.dtype()?);
    let (v, p, q) = (
        np.empty(&shape, dtype),
        np.empty(&shape, dtype),
        np.empty(&shape, dtype),
    );
    // The coefficients, as NumPy computes them.
    let (dx, dy, dt) = (1.0 / n as f64, 1.0 / n as f64, 1.0 / tsteps as f64);
    let (b1, b2) = (2.0, 1.0);
    let mul1 = b1 * dt / (dx * dx);
    let mul2 = b2 * dt / (dy * dy);
    let (a, b) = (-mul1 / 2.0, 1.0 + mul2);
    let c = a;
    let (d, e) = (-mul2 / 2.0, 1.0 + mul2);
    let f = d;
    let inner = span(1, n - 1);
    // `m[1:N-1, j]` and `m[j, 1:N-1]`.
    let col = |m: &Array, j: i64| m.index(&[inner, Ix::At(j)]);
    let row = |m: &Array, j: i64| m.index(&[Ix::At(j), inner]);
    let sweep = usize::try_from(n - 2).unwrap_or(0);
    for _ in 0..tsteps {
        row(&v, 0).assign(1.0)?;
        col(&p, 0).assign(0.0)?;
        col(&q, 0).assign(&row(&v, 0))?;
        np.repeat(sweep, |t| {
            let j = index(t)? + 1;
            let denominator = &(&col(&p, j - 1) * a) + b;
            col(&p, j).assign(&(-c / &denominator))?;
            let terms = &(&(&(&u.index(&[Ix::At(j), span(0, n - 2)]) * -d)
                + &(&row(u, j) * (1.0 + 2.0 * d)))
                - &(&u.index(&[Ix::At(j), span(2, n)]) * f))
                - &(&col(&q, j - 1) * a);
            col(&q, j).assign(&(&terms / &denominator))
        })?;
        row(&v, n - 1).assign(1.0)?;
        np.repeat(sweep, |t| {
            let j = n - 2 - index(t)?;
            row(&v, j).assign(&(&(&col(&p, j) * &row(&v, j + 1)) + &col(&q, j)))
        })?;
        col(u, 0).assign(1.0)?;
        col(&p, 0).assign(0.0)?;
        col(&q, 0).assign(&col(u, 0))?;
        np.repeat(sweep, |t| {
            let j = index(t)? + 1;
            let denominator = &(&col(&p, j - 1) * d) + e;
            col(&p, j).assign(&(-f / &denominator))?;
            let terms = &(&(&(&v.index(&[span(0, n - 2), Ix::At(j)]) * -a)
                + &(&col(&v, j) * (1.0 + 2.0 * a)))
                - &(&v.index(&[span(2, n), Ix::At(j)]) * c))
                - &(&col(&q, j - 1) * d);
            col(&q, j).assign(&(&terms / &denominator))
        })?;
        col(u, n - 1).assign(1.0)?;
        np.repeat(sweep, |t| {
            let j = n - 2 - index(t)?;
            col(u, j).assign(&(&(&col(&p, j) * &col(u, j + 1)) + &col(&q, j)))
        })?;
    }
    outputs(x)
}

/// A part of a CFD Python grid that its stencils update.
#[derive(Clone, Copy)]
enum Part {
    /// `m[1:-1, 1:-1]`, its neighbours `m[1:-1, 2:]`, `m[1:-1, 0:-2]`, `m[2:, 1:-1]` and
    /// `m[0:-2, 1:-1]`.
    Interior,
    /// `m[1:-1, -1]` of a grid periodic in x: east is `m[1:-1, 0]`, west `m[1:-1, -2]`.
    LastColumn,
    /// `m[1:-1, 0]` of a grid periodic in x: east is `m[1:-1, 1]`, west `m[1:-1, -1]`.
    FirstColumn,
}

/// The constants of CFD Python's steps 11 and 12.
#[derive(Clone, Copy)]
struct Flow {
    ny: i64,
    nx: i64,
    dt: f64,
    dx: f64,
    dy: f64,
    rho: f64,
    nu: f64,
}

impl Flow {
    /// The constants of a kernel's inputs (`dt`, `dx`, `dy`, `rho`, `nu`), on `u`'s grid.
    fn of(x: &Inputs, u: &Array) -> Result<Flow, AppError> {
        let (ny, nx) = rows_cols(u)?;
        Ok(Flow {
            ny,
            nx,
            dt: x.scalar("dt")?,
            dx: x.scalar("dx")?,
            dy: x.scalar("dy")?,
            rho: x.scalar("rho")?,
            nu: x.scalar("nu")?,
        })
    }

    /// The centre of `part` of `m` and its east, west, north and south neighbours.
    fn views(&self, m: &Array, part: Part) -> [Array; 5] {
        let (ny, nx) = (self.ny, self.nx);
        let rows = |lo: i64, hi: i64| span(lo, hi);
        let column = |j: i64, r: Ix| m.index(&[r, Ix::At(j)]);
        match part {
            Part::Interior => [
                s(m, &[(1, ny - 1), (1, nx - 1)]),
                s(m, &[(1, ny - 1), (2, nx)]),
                s(m, &[(1, ny - 1), (0, nx - 2)]),
                s(m, &[(2, ny), (1, nx - 1)]),
                s(m, &[(0, ny - 2), (1, nx - 1)]),
            ],
            Part::LastColumn | Part::FirstColumn => {
                let (c, e, w) = match part {
                    Part::LastColumn => (nx - 1, 0, nx - 2),
                    _ => (0, 1, nx - 1),
                };
                [
                    column(c, rows(1, ny - 1)),
                    column(e, rows(1, ny - 1)),
                    column(w, rows(1, ny - 1)),
                    column(c, rows(2, ny)),
                    column(c, rows(0, ny - 2)),
                ]
            }
        }
    }

    /// `build_up_b`'s source term of the pressure on `part`.
    fn source(&self, u: &Array, v: &Array, part: Part) -> Array {
        let Flow {
            dt, dx, dy, rho, ..
        } = *self;
        let [_, ue, uw, un, us] = self.views(u, part);
        let [_, ve, vw, vn, vs] = self.views(v, part);
        // NumPy squares by multiplying (`x**2` is `x*x`).
        let squared = |a: &Array| a * a;
        let du = &(&ue - &uw) / (2.0 * dx);
        let dv = &(&vn - &vs) / (2.0 * dy);
        let cross = &(&(&(&(&un - &us) / (2.0 * dy)) * &(&ve - &vw)) / (2.0 * dx)) * 2.0;
        let inner = &(&(&(&(&du + &dv) * (1.0 / dt)) - &squared(&du)) - &cross) - &squared(&dv);
        &inner * rho
    }

    /// One Jacobi sweep of the pressure on `part`, from the previous pressure `pn`.
    fn pressure(&self, pn: &Array, b: &Array, part: Part) -> Array {
        let (dx2, dy2) = (self.dx * self.dx, self.dy * self.dy);
        let denominator = 2.0 * (dx2 + dy2);
        let [_, e, w, n, so] = self.views(pn, part);
        let [bc, ..] = self.views(b, part);
        let sides = &(&(&e + &w) * dy2) + &(&(&n + &so) * dx2);
        &(&sides / denominator) - &(&bc * (dx2 * dy2 / denominator))
    }

    /// `dt / dx**2 * (m_e - 2 * m_c + m_w) + dt / dy**2 * (m_n - 2 * m_c + m_s)` on `part`.
    fn laplacian(&self, m: &Array, part: Part) -> Array {
        let (dx2, dy2) = (self.dx * self.dx, self.dy * self.dy);
        let [c, e, w, n, so] = self.views(m, part);
        &(&(&(&e - &(&c * 2.0)) + &w) * (self.dt / dx2))
            + &(&(&(&n - &(&c * 2.0)) + &so) * (self.dt / dy2))
    }

    /// The new `u` (`along_x`) or `v` on `part`, from the previous velocities `un` and `vn`
    /// and the pressure `p`.
    fn velocity(&self, un: &Array, vn: &Array, p: &Array, part: Part, along_x: bool) -> Array {
        let Flow {
            dt,
            dx,
            dy,
            rho,
            nu,
            ..
        } = *self;
        let [uc, ..] = self.views(un, part);
        let [vc, ..] = self.views(vn, part);
        let (own, [mc, _, mw, _, ms]) = if along_x {
            (un, self.views(un, part))
        } else {
            (vn, self.views(vn, part))
        };
        let [_, pe, pw, pn, ps] = self.views(p, part);
        let gradient = if along_x {
            &(&pe - &pw) * (dt / (2.0 * rho * dx))
        } else {
            &(&pn - &ps) * (dt / (2.0 * rho * dy))
        };
        &(&(&(&mc - &(&(&(&uc * dt) / dx) * &(&mc - &mw))) - &(&(&(&vc * dt) / dy) * &(&mc - &ms)))
            - &gradient)
            + &(&self.laplacian(own, part) * nu)
    }
}

/// Lid-driven cavity flow (NPBench's `cavity_flow`, CFD Python's step 11): per time step, the
/// pressure's source term, `nit` Jacobi sweeps of the pressure with its boundaries, and the
/// velocities' update with theirs, every step one replayed trace.
fn cavity_flow(x: &Inputs) -> Result<Outputs, AppError> {
    let (nt, nit) = (x.size("nt")?, x.size("nit")?);
    let (u, v, p) = (x.array("u")?, x.array("v")?, x.array("p")?);
    let flow = Flow::of(x, u)?;
    let (ny, nx) = (flow.ny, flow.nx);
    let np = u.numeric();
    let b = np.zeros(&u.shape()?, u.dtype()?);
    let all = Ix::Slice(Range::all());
    let row = |m: &Array, i: i64| m.index(&[Ix::At(i), all]);
    let col = |m: &Array, j: i64| m.index(&[all, Ix::At(j)]);
    let mid = |m: &Array| s(m, &[(1, ny - 1), (1, nx - 1)]);
    np.repeat(usize::try_from(nt).unwrap_or(0), |_| {
        let (un, vn) = (u.copy(), v.copy());
        mid(&b).assign(&flow.source(u, v, Part::Interior))?;
        for _ in 0..nit {
            let pn = p.copy();
            mid(p).assign(&flow.pressure(&pn, &b, Part::Interior))?;
            col(p, nx - 1).assign(&col(p, nx - 2))?;
            row(p, 0).assign(&row(p, 1))?;
            col(p, 0).assign(&col(p, 1))?;
            row(p, ny - 1).assign(0.0)?;
        }
        mid(u).assign(&flow.velocity(&un, &vn, p, Part::Interior, true))?;
        mid(v).assign(&flow.velocity(&un, &vn, p, Part::Interior, false))?;
        row(u, 0).assign(0.0)?;
        col(u, 0).assign(0.0)?;
        col(u, nx - 1).assign(0.0)?;
        row(u, ny - 1).assign(1.0)?;
        row(v, 0).assign(0.0)?;
        row(v, ny - 1).assign(0.0)?;
        col(v, 0).assign(0.0)?;
        col(v, nx - 1).assign(0.0)
    })?;
    outputs(x)
}

/// Channel flow (NPBench's `channel_flow`, CFD Python's step 12): as the cavity, periodic in
/// x, with a forcing term, until the relative change of `u`'s sum is at most 0.001: a replayed
/// trace whose test (`Numeric::repeat_while`) reads that change on the host after each step,
/// as NumPy's `while udiff > .001` does. Returns the steps taken with the fields.
fn channel_flow(x: &Inputs) -> Result<Outputs, AppError> {
    let nit = x.size("nit")?;
    let (u, v, p) = (x.array("u")?, x.array("v")?, x.array("p")?);
    let flow = Flow::of(x, u)?;
    let ny = flow.ny;
    let forcing = x.scalar("F")? * flow.dt;
    let np = u.numeric();
    let all = Ix::Slice(Range::all());
    let row = |m: &Array, i: i64| m.index(&[Ix::At(i), all]);
    let parts = [Part::Interior, Part::LastColumn, Part::FirstColumn];
    // `while udiff > .001:`, each step's `udiff` left in a 0-d array that the test reads.
    let udiff = np.full(&[], 1.0, DType::F64);
    let mut steps = 0i64;
    let step = |_| {
        let (un, vn) = (u.copy(), v.copy());
        let b = u.zeros_like();
        for part in parts {
            let [bc, ..] = flow.views(&b, part);
            bc.assign(&flow.source(u, v, part))?;
        }
        for _ in 0..nit {
            let pn = p.copy();
            for part in parts {
                let [pc, ..] = flow.views(p, part);
                pc.assign(&flow.pressure(&pn, &b, part))?;
            }
            row(p, ny - 1).assign(&row(p, ny - 2))?;
            row(p, 0).assign(&row(p, 1))?;
        }
        // NumPy's order: `u` and `v` inside, then `u`'s columns, then `v`'s.
        let [uc, ..] = flow.views(u, Part::Interior);
        uc.assign(&(&flow.velocity(&un, &vn, p, Part::Interior, true) + forcing))?;
        let [vc, ..] = flow.views(v, Part::Interior);
        vc.assign(&flow.velocity(&un, &vn, p, Part::Interior, false))?;
        for part in [Part::LastColumn, Part::FirstColumn] {
            let [uc, ..] = flow.views(u, part);
            uc.assign(&(&flow.velocity(&un, &vn, p, part, true) + forcing))?;
        }
        for part in [Part::LastColumn, Part::FirstColumn] {
            let [vc, ..] = flow.views(v, part);
            vc.assign(&flow.velocity(&un, &vn, p, part, false))?;
        }
        row(u, 0).assign(0.0)?;
        row(u, ny - 1).assign(0.0)?;
        row(v, 0).assign(0.0)?;
        row(v, ny - 1).assign(0.0)?;
        udiff.assign(&(&(&u.sum() - &un.sum()) / &u.sum()))
    };
    np.repeat_while(usize::MAX, step, |_| {
        steps += 1;
        Ok(udiff.item()? > 0.001)
    })?;
    Ok(vec![
        ("u".into(), u.clone()),
        ("v".into(), v.clone()),
        ("p".into(), p.clone()),
        ("stepcount".into(), np.full(&[], steps as f64, DType::I64)),
    ])
}

/// Sparse matrix-vector product (NPBench's `spmv`) of a random CSR matrix: NumPy's loop over
/// the rows (`y[i] = vals @ x[cols]` for each row's slice of the arrays) is the product the
/// sparse plugin runs on a matrix made from the same three arrays.
fn spmv(x: &Inputs) -> Result<Outputs, AppError> {
    let sp = x.sparse.as_ref().ok_or("spmv needs the sparse plugin")?;
    let size = |name: &str| -> Result<u64, AppError> { Ok(u64::try_from(x.size(name)?)?) };
    let a = sp.from_csr_arrays(
        (size("M")?, size("N")?),
        x.array("A_row")?,
        x.array("A_col")?,
        x.array("A_val")?,
    )?;
    Ok(vec![("y".into(), a.matvec(x.array("x")?))])
}

/// NPBench's `conv2d` (NHWC): each output position `(i, j)` the sum over the `K x K` window and
/// the input channels of the window times the weights, every `j` of a row one step of a
/// replayed trace.
fn conv2d(input: &Array, weights: &Array) -> Result<Array, AppError> {
    let (is, ws) = (input.shape()?, weights.shape()?);
    let (&[n, h, w, _], &[k, _, _, c_out]) = (&is[..], &ws[..]) else {
        return Err(format!(
            "conv2d: the input must be (N, H, W, C_in), the weights (K, K, C_in, C_out); got \
             {is:?} and {ws:?}"
        )
        .into());
    };
    let k = k as i64;
    let (h_out, w_out) = (h as i64 - k + 1, w as i64 - k + 1);
    let np = input.numeric();
    let output = np.empty(&[n, h_out as u64, w_out as u64, c_out], DType::F32);
    let all = Ix::Slice(Range::all());
    let wx = weights.index(&[Ix::NewAxis, all, all, all]);
    for i in 0..h_out {
        np.repeat(usize::try_from(w_out).unwrap_or(0), |t| {
            let j = index(t)?;
            let window = input.index(&[all, span(i, i + k), span(j, j + k), all, Ix::NewAxis]);
            let sum = (&window * &wx).reduce_axes(Reduction::Sum, Some(&[1, 2, 3]), false);
            output.index(&[all, Ix::At(i), Ix::At(j), all]).assign(&sum)
        })?;
    }
    Ok(output)
}

/// A 2-D convolution with bias (NPBench's `conv2d_bias`, NHWC, `float32`).
fn conv2d_bias(x: &Inputs) -> Result<Outputs, AppError> {
    let (input, weights, bias) = (x.array("input")?, x.array("weights")?, x.array("bias")?);
    Ok(vec![("output".into(), &conv2d(input, weights)? + bias)])
}

/// NPBench's `maxpool2d`: the maximum of each 2 x 2 window, every `j` of a row one step of a
/// replayed trace.
fn maxpool2d(x: &Array) -> Result<Array, AppError> {
    let shape = x.shape()?;
    let [n, h, w, c] = shape[..] else {
        return Err(format!("maxpool2d: expected (N, H, W, C), got {shape:?}").into());
    };
    let np = x.numeric();
    let output = np.empty(&[n, h / 2, w / 2, c], x.dtype()?);
    let all = Ix::Slice(Range::all());
    for i in 0..(h / 2) as i64 {
        np.repeat(usize::try_from(w / 2).unwrap_or(0), |t| {
            let j = index(t)?;
            let window = x.index(&[all, span(2 * i, 2 * i + 2), span(2 * j, 2 * j + 2), all]);
            let max = window.reduce_axes(Reduction::Max, Some(&[1, 2]), false);
            output.index(&[all, Ix::At(i), Ix::At(j), all]).assign(&max)
        })?;
    }
    Ok(output)
}

/// LeNet-5's inference (NPBench's `lenet`, NHWC, `float32`): two convolutions with bias, ReLU
/// and max pooling, then three fully connected layers.
fn lenet(x: &Inputs) -> Result<Outputs, AppError> {
    let a = |name: &str| x.array(name);
    let relu = |v: Array| v.maximum(0.0);
    let (n, c_before_fc1) = (x.scalar("N")? as i64, x.scalar("C_before_fc1")? as i64);
    let y = relu(&conv2d(a("input")?, a("conv1")?)? + a("conv1bias")?);
    let y = maxpool2d(&y)?;
    let y = relu(&conv2d(&y, a("conv2")?)? + a("conv2bias")?);
    let y = maxpool2d(&y)?.reshape(&[n, c_before_fc1]);
    let y = relu(&y.matmul(a("fc1w")?) + a("fc1b")?);
    let y = relu(&y.matmul(a("fc2w")?) + a("fc2b")?);
    Ok(vec![("output".into(), &y.matmul(a("fc3w")?) + a("fc3b")?)])
}

/// The pairwise separations `x.T - x`, `y.T - y` and `z.T - z` of the positions.
fn separations(pos: &Array) -> [Array; 3] {
    let all = Ix::Slice(Range::all());
    [0, 1, 2].map(|c| {
        let x = pos.index(&[all, span(c, c + 1)]);
        &x.t() - &x
    })
}

/// NPBench's `getAcc`: the accelerations of the particles, `(N, 3)`.
fn nbody_acc(pos: &Array, mass: &Array, g: f64, softening: f64) -> weft::Result<Array> {
    let [dx, dy, dz] = separations(pos);
    let inv_r3 = &(&(&(&dx * &dx) + &(&dy * &dy)) + &(&dz * &dz)) + softening * softening;
    // `inv_r3[inv_r3 > 0] = inv_r3[inv_r3 > 0]**(-1.5)`, as a select over the whole array: the
    // same elements change, and no count is read on the host, so the step can be replayed.
    inv_r3.assign_where(&inv_r3.gt(0.0), &inv_r3.pow(-1.5))?;
    let axis = |d: &Array| (&(d * &inv_r3) * g).matmul(mass);
    let np = pos.numeric();
    Ok(np.concatenate(&[&axis(&dx), &axis(&dy), &axis(&dz)], 1))
}

/// NPBench's `getEnergy`: the kinetic and the potential energy, 0-d each.
fn nbody_energy(pos: &Array, vel: &Array, mass: &Array, g: f64) -> weft::Result<(Array, Array)> {
    let kinetic = (mass * &(vel * vel)).sum() * 0.5;
    let [dx, dy, dz] = separations(pos);
    let inv_r = (&(&(&dx * &dx) + &(&dy * &dy)) + &(&dz * &dz)).sqrt();
    inv_r.assign_where(&inv_r.gt(0.0), &(1.0 / &inv_r))?;
    let potential = (&(&(mass * &mass.t()) * -1.0) * &inv_r).triu(1).sum() * g;
    Ok((kinetic, potential))
}

/// N-body simulation (NPBench's `nbody`, after Philip Mocz): leapfrog steps of pairwise
/// gravity on `N` particles, the energies after each, every step one replayed trace.
fn nbody(x: &Inputs) -> Result<Outputs, AppError> {
    let (mass, pos, vel) = (x.array("mass")?, x.array("pos")?, x.array("vel")?);
    let (dt, g, softening) = (x.scalar("dt")?, x.scalar("G")?, x.scalar("softening")?);
    let nt = x.scalar("Nt")? as i64;
    let np = mass.numeric();
    let mut v = vel.clone();
    v -= &(&(mass * vel).mean_axes(Some(&[0]), false) / &mass.mean());
    v.check()?;
    let acc = nbody_acc(pos, mass, g, softening)?;
    let (ke, pe) = (
        np.empty(&[nt as u64 + 1], DType::F64),
        np.empty(&[nt as u64 + 1], DType::F64),
    );
    let (k0, p0) = nbody_energy(pos, vel, mass, g)?;
    ke.index(&[Ix::At(0)]).assign(&k0)?;
    pe.index(&[Ix::At(0)]).assign(&p0)?;
    np.repeat(usize::try_from(nt).unwrap_or(0), |i| {
        let i = index(i)?;
        let mut v = vel.clone();
        v += &(&(&acc * dt) / 2.0);
        let mut p = pos.clone();
        p += &(vel * dt);
        acc.assign(&nbody_acc(pos, mass, g, softening)?)?;
        v += &(&(&acc * dt) / 2.0);
        let (k, e) = nbody_energy(pos, vel, mass, g)?;
        ke.index(&[Ix::At(i + 1)]).assign(&k)?;
        pe.index(&[Ix::At(i + 1)]).assign(&e)?;
        v.check()?;
        p.check()
    })?;
    Ok(vec![("KE".into(), ke), ("PE".into(), pe)])
}

/// NPBench's `batchnorm2d`: `(x - mean) / sqrt(std + eps)` over axis 0.
fn batchnorm2d(x: &Array) -> Array {
    let mean = x.mean_axes(Some(&[0]), true);
    let std = x.std_axes(Some(&[0]), true, 0);
    &(x - &mean) / &(&std + 1e-5).sqrt()
}

/// A residual block (NPBench's `resnet`, NHWC): a 1 x 1 convolution into a zero-padded
/// `float64` array, a 3 x 3 and another 1 x 1 convolution, each followed by batch
/// normalization, ReLU between them, and the input added back. The convolutions' outputs are
/// `float32` (NumPy's `np.empty(..., dtype=np.float32)`), their products `float64` where the
/// input is.
fn resnet(x: &Inputs) -> Result<Outputs, AppError> {
    let (input, conv1, conv2, conv3) = (
        x.array("input")?,
        x.array("conv1")?,
        x.array("conv2")?,
        x.array("conv3")?,
    );
    let (is, c1s) = (input.shape()?, conv1.shape()?);
    let (&[n, h, w, _], Some(&c2)) = (&is[..], c1s.get(3)) else {
        return Err(format!("resnet: expected an (N, H, W, C) input, got {is:?}").into());
    };
    let relu = |v: Array| v.maximum(0.0);
    let np = input.numeric();
    let padded = np.zeros(&[n, h + 2, w + 2, c2], DType::F64);
    padded
        .index(&[
            Ix::Slice(Range::all()),
            span(1, h as i64 + 1),
            span(1, w as i64 + 1),
            Ix::Slice(Range::all()),
        ])
        .assign(&conv2d(input, conv1)?)?;
    let y = relu(batchnorm2d(&padded));
    let y = relu(batchnorm2d(&conv2d(&y, conv2)?));
    let y = batchnorm2d(&conv2d(&y, conv3)?);
    Ok(vec![("output".into(), relu(&y + input))])
}

fn cholesky(x: &Inputs) -> Result<Outputs, AppError> {
    let a = x.array("A")?;
    let n = a.shape()?.first().copied().unwrap_or(0) as i64;
    let np = a.numeric();
    let diagonal = |i: i64| a.index(&[Ix::At(i), Ix::At(i)]);
    diagonal(0).assign(&diagonal(0).sqrt())?;
    for i in 1..n {
        np.repeat(usize::try_from(i).unwrap_or(0), |j| {
            let j = index(j)?;
            let mut at = a.index(&[Ix::At(i), Ix::At(j)]);
            at -= &a
                .index(&[Ix::At(i), span(0, j)])
                .dot(&a.index(&[Ix::At(j), span(0, j)]));
            at /= &diagonal(j);
            at.check()
        })?;
        let row = a.index(&[Ix::At(i), span(0, i)]);
        let mut d = diagonal(i);
        d -= &row.dot(&row);
        d.assign(&d.sqrt())?;
    }
    outputs(x)
}

/// NPBench's `cholesky2`: NumPy's `linalg.cholesky` (LAPACK's there, `Array::cholesky`'s
/// blocked factorization here) with the strict upper triangle of the input kept.
fn cholesky2(x: &Inputs) -> Result<Outputs, AppError> {
    let a = x.array("A")?;
    a.assign(&(&a.cholesky()? + &a.triu(1)))?;
    outputs(x)
}

fn gramschmidt(x: &Inputs) -> Result<Outputs, AppError> {
    let a = x.array("A")?;
    let n = a.shape()?.get(1).copied().unwrap_or(0) as i64;
    let np = a.numeric();
    let q = a.zeros_like();
    let r = np.zeros(&[n as u64, n as u64], a.dtype()?);
    let all = Ix::Slice(Range::all());
    for k in 0..n {
        let a_k = a.index(&[all, Ix::At(k)]);
        let q_k = q.index(&[all, Ix::At(k)]);
        let r_kk = r.index(&[Ix::At(k), Ix::At(k)]);
        r_kk.assign(&a_k.dot(&a_k).sqrt())?;
        q_k.assign(&(&a_k / &r_kk))?;
        np.repeat(usize::try_from(n - k - 1).unwrap_or(0), |j| {
            let j = k + 1 + index(j)?;
            let r_kj = r.index(&[Ix::At(k), Ix::At(j)]);
            r_kj.assign(&q_k.dot(&a.index(&[all, Ix::At(j)])))?;
            let mut a_j = a.index(&[all, Ix::At(j)]);
            a_j -= &(&q_k * &r_kj);
            a_j.check()
        })?;
    }
    Ok(vec![("Q".into(), q), ("R".into(), r)])
}

fn durbin(x: &Inputs) -> Result<Outputs, AppError> {
    let r = x.array("r")?;
    let n = r.shape()?.first().copied().unwrap_or(0) as i64;
    let np = r.numeric();
    let y = np.empty(&[n as u64], r.dtype()?);
    // alpha and beta live on the device as 0-d arrays, updated in place, so that a step
    // keeps nothing it made and the loop replays.
    let alpha = -&r.index(&[Ix::At(0)]);
    let mut beta = np.ones(&[], r.dtype()?);
    y.index(&[Ix::At(0)]).assign(&alpha)?;
    let reversed = |v: &Array| v.index(&[Ix::Slice(Range::all().step(-1))]);
    np.repeat(usize::try_from(n - 1).unwrap_or(0), |k| {
        let k = 1 + index(k)?;
        beta *= &(1.0 - &(&alpha * &alpha));
        let head = span(0, k);
        let dot = reversed(&r.index(&[head])).dot(&y.index(&[head]));
        alpha.assign(&(-(&r.index(&[Ix::At(k)]) + &dot) / &beta))?;
        let mut y_head = y.index(&[head]);
        y_head += &(&alpha * &reversed(&y.index(&[head])));
        y.index(&[Ix::At(k)]).assign(&alpha)
    })?;
    Ok(vec![("y".into(), y)])
}

/// NPBench's `seidel_2d`: its sweeps, rows and the recurrence along each row, written as a
/// kernel of the application's own (`loop_kernels::seidel_2d_kernel`, run by
/// `Numeric::run_kernel`): one task with the three loops inside, NumPy's bits. (Written
/// statement for statement, each row a replayed step whose scalar tasks fused into a few
/// straight-line kernels, it ran at 1.5x NumPy.)
fn seidel_2d(x: &Inputs) -> Result<Outputs, AppError> {
    let steps = x.size("TSTEPS")?;
    let a = x.array("A")?;
    a.numeric().run_kernel(
        &loop_kernels::seidel_2d_kernel(),
        &[a],
        &[weft_ir::Scalar::I64(steps)],
    )?;
    outputs(x)
}

/// NPBench's `nussinov` (RNA folding), statement for statement, with its innermost loop
/// `for k in range(i + 1, j): table[i, j] = max(table[i, j], table[i, k] + table[k + 1, j])`
/// written as the maximum of a row and a column (the same value: `max` is exact in any
/// order). For each `i`, the pairs `(i, j)` past the first are the steps of a replayed trace
/// (see `Numeric::repeat`), their views moving (and the row and column growing) by one
/// element a step; a step's scalar tasks launch on one point and fuse.
fn nussinov(x: &Inputs) -> Result<Outputs, AppError> {
    let seq = x.array("seq")?;
    let n = x.size("N")?;
    let np = seq.numeric();
    let table = np.zeros(&[n as u64, n as u64], DType::I32);
    let at = |i: i64, j: i64| table.index(&[Ix::At(i), Ix::At(j)]);
    let pair = |i: i64, j: i64| -> weft::Result<()> {
        let t = at(i, j);
        t.assign(&t.maximum(&at(i, j - 1)))?;
        if i + 1 < n {
            t.assign(&t.maximum(&at(i + 1, j)))?;
            if i < j - 1 {
                // `match(seq[i], seq[j])`: 1 where the two bases pair.
                let bases = (&seq.index(&[Ix::At(i)]) + &seq.index(&[Ix::At(j)]))
                    .eq(3i64)
                    .astype(DType::I32);
                t.assign(&t.maximum(&(&at(i + 1, j - 1) + &bases)))?;
            } else {
                t.assign(&t.maximum(&at(i + 1, j - 1)))?;
            }
        }
        if j > i + 1 {
            let row = table.index(&[Ix::At(i), span(i + 1, j)]);
            let column = table.index(&[span(i + 2, j + 1), Ix::At(j)]);
            t.assign(&t.maximum(&(&row + &column).max()))?;
        }
        Ok(())
    };
    for i in (0..n).rev() {
        if i + 1 < n {
            pair(i, i + 1)?;
        }
        // `j` from `i + 2` on: every step takes the same branches.
        let rest = usize::try_from(n - i - 2).unwrap_or(0);
        np.repeat(rest, |k| pair(i, i + 2 + index(k)?))?;
    }
    Ok(vec![("table".into(), table)])
}

/// NPBench's `covariance2`: NumPy's `cov` of the transposed data.
fn covariance2(x: &Inputs) -> Result<Outputs, AppError> {
    Ok(vec![("out".into(), x.array("data")?.t().cov())])
}

/// NPBench's `crc16` (CRC-16-CCITT): its loop over the bytes and their eight bits, written
/// as a kernel of the application's own (`loop_kernels::crc16_kernel`, run by
/// `Numeric::run_kernel`): one task with the two loops inside. (Written statement for
/// statement, with 0-d arrays and a replayed step per byte, it was a fused launch per byte.)
fn crc16(x: &Inputs) -> Result<Outputs, AppError> {
    let data = x.array("data")?;
    let np = data.numeric();
    let crc = np.zeros(&[], DType::I64);
    np.run_kernel(
        &loop_kernels::crc16_kernel(),
        &[data, &crc],
        &[weft_ir::Scalar::I64(0x8408)],
    )?;
    Ok(vec![("crc".into(), crc)])
}

fn arc_distance(x: &Inputs) -> Result<Outputs, AppError> {
    let v = |name: &str| x.array(name);
    let (theta_1, phi_1, theta_2, phi_2) = (v("theta_1")?, v("phi_1")?, v("theta_2")?, v("phi_2")?);
    // NumPy squares by multiplying (`x**2` is `x*x`).
    let half_sin_squared = |d: Array| {
        let s = (d / 2.0).sin();
        &s * &s
    };
    let temp = half_sin_squared(theta_2 - theta_1)
        + &(&(&theta_1.cos() * &theta_2.cos()) * &half_sin_squared(phi_2 - phi_1));
    let distance = temp.sqrt().arctan2(&(1.0 - &temp).sqrt()) * 2.0;
    Ok(vec![("distance".into(), distance)])
}

fn mlp(x: &Inputs) -> Result<Outputs, AppError> {
    let v = |name: &str| x.array(name);
    let h = (v("input")?.matmul(v("w1")?) + v("b1")?).maximum(0.0);
    let h = (h.matmul(v("w2")?) + v("b2")?).maximum(0.0);
    let h = h.matmul(v("w3")?) + v("b3")?;
    let max = h.reduce_axes(Reduction::Max, Some(&[-1]), true);
    let e = (&h - &max).exp();
    let sum = e.reduce_axes(Reduction::Sum, Some(&[-1]), true);
    Ok(vec![("out".into(), &e / &sum)])
}

/// NPBench's `azimint_hist`: the mean of `data` in each of `npt` bins of `radius`, as two
/// histograms (counts, and sums weighted by `data`).
fn azimint_hist(x: &Inputs) -> Result<Outputs, AppError> {
    let (data, radius) = (x.array("data")?, x.array("radius")?);
    let npt = x.size("npt")? as u64;
    let (histu, _) = radius.histogram(npt, None, None)?;
    let (histw, _) = radius.histogram(npt, None, Some(data))?;
    Ok(vec![("out".into(), &histw / &histu)])
}

/// NPBench's `azimint_naive`: the mean of `data` in each of `npt` rings of `radius`, one
/// masked read (`data[mask]`) per ring.
fn azimint_naive(x: &Inputs) -> Result<Outputs, AppError> {
    let (data, radius) = (x.array("data")?, x.array("radius")?);
    let npt = x.size("npt")?;
    let rmax = radius.max().item()?;
    let res = x.np.zeros(&[npt as u64], DType::F64);
    for i in 0..npt {
        let r1 = rmax * i as f64 / npt as f64;
        let r2 = rmax * (i + 1) as f64 / npt as f64;
        let mask = radius.ge(r1).logical_and(&radius.lt(r2));
        let values = data.masked(&mask)?;
        res.index(&[Ix::At(i)]).assign(&values.mean())?;
    }
    Ok(vec![("res".into(), res)])
}
