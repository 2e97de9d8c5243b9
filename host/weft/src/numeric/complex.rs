//! Complex arrays (NumPy's `complex128` and `complex64`): a [`ComplexArray`] holds its real
//! and imaginary parts as two real arrays of one shape (`f64` parts for `complex128`, `f32`
//! for `complex64`), and each complex operation is written with the parts' real operations,
//! so that the tasks it submits fuse with everything around them like any other.
//!
//! The formulas are NumPy's own: products `(ac - bd) + (ad + bc)i`; quotients by Smith's
//! method with NumPy's branches (the larger of the divisor's parts divides the smaller, and
//! a zero divisor gives NumPy's infinities and NaNs); integer powers by NumPy's repeated
//! squaring (NumPy itself switches to `cpow` from an exponent of 100 on, so larger ones
//! differ in the last bits); `exp` as `exp(a) (cos b + i sin b)`. A real operand (array or
//! scalar) multiplies and divides each part directly, where NumPy makes it `c + 0i` first:
//! the same bits for finite parts, but NumPy's `inf * 0` terms make NaNs (`(1 + inf i) *
//! 0.5` is `nan + inf i` there, `0.5 + inf i` here) and its zeros' signs can differ. The magnitude [`ComplexArray::abs`] is computed as `m sqrt(1 + (n/m)^2)` (`m`, `n` the larger and smaller magnitudes of the
//! parts), which neither overflows nor underflows where the parts do not, and is within two
//! units in the last place of NumPy's `hypot` (not its bits). Sums and products of matrices
//! sum each part separately, so their last bits may differ from NumPy's, which sums the
//! pairs together.

use weft_ir::DType;

use super::{Array, Ix, Numeric, Operand, Range, Result};
use crate::Error;

/// A complex scalar: `re + im i`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Complex {
    /// The real part.
    pub re: f64,
    /// The imaginary part.
    pub im: f64,
}

impl Complex {
    /// The imaginary unit, NumPy's `1j`.
    pub const I: Complex = Complex { re: 0.0, im: 1.0 };

    /// `re + im i`.
    pub fn new(re: f64, im: f64) -> Complex {
        Complex { re, im }
    }

    /// The magnitude (`hypot`).
    pub fn abs(self) -> f64 {
        self.re.hypot(self.im)
    }

    /// `self ** n`, as NumPy's `power` of a complex scalar by an integral exponent (`n` of
    /// 1, 2 and 3 by products, others by repeated squaring, a negative `n` the reciprocal).
    pub fn powi(self, n: i32) -> Complex {
        match n {
            0 => Complex::new(1.0, 0.0),
            1 => self,
            2 => self * self,
            3 => self * self * self,
            _ => {
                let (mut left, mut power, mut acc) = (n.unsigned_abs(), self, None::<Complex>);
                loop {
                    if left & 1 == 1 {
                        acc = Some(acc.map_or(power, |a| a * power));
                    }
                    left >>= 1;
                    if left == 0 {
                        break;
                    }
                    power = power * power;
                }
                let acc = acc.unwrap_or(Complex::new(1.0, 0.0));
                if n < 0 {
                    Complex::new(1.0, 0.0) / acc
                } else {
                    acc
                }
            }
        }
    }
}

/// `(a - c) + (b - d)i`.
impl std::ops::Sub for Complex {
    type Output = Complex;
    fn sub(self, o: Complex) -> Complex {
        Complex::new(self.re - o.re, self.im - o.im)
    }
}

/// NumPy's complex product `(ac - bd) + (ad + bc)i`.
impl std::ops::Mul for Complex {
    type Output = Complex;
    fn mul(self, o: Complex) -> Complex {
        Complex::new(
            self.re * o.re - self.im * o.im,
            self.re * o.im + self.im * o.re,
        )
    }
}

/// NumPy's complex quotient (Smith's method with NumPy's branches).
impl std::ops::Div for Complex {
    type Output = Complex;
    fn div(self, o: Complex) -> Complex {
        let (a, b) = (self.re, self.im);
        let (c, d) = (o.re, o.im);
        if c.abs() >= d.abs() {
            if c == 0.0 && d == 0.0 {
                return Complex::new(a / c.abs(), b / c.abs());
            }
            let rat = d / c;
            let scl = 1.0 / (c + d * rat);
            Complex::new((a + b * rat) * scl, (b - a * rat) * scl)
        } else {
            let rat = c / d;
            let scl = 1.0 / (d + c * rat);
            Complex::new((a * rat + b) * scl, (b * rat - a) * scl)
        }
    }
}

/// A complex array (or a view of one): its real and imaginary parts, two real arrays of one
/// shape and one float dtype. See the module's documentation for the formulas.
#[derive(Clone, Debug)]
pub struct ComplexArray {
    re: Array,
    im: Array,
}

/// The right-hand side of a complex operation: a complex array, a real array (its imaginary
/// part zero), or a scalar.
pub enum ComplexOperand<'a> {
    /// A complex array.
    Complex(&'a ComplexArray),
    /// A real array.
    Real(&'a Array),
    /// A complex scalar.
    Scalar(Complex),
}

impl<'a> From<&'a ComplexArray> for ComplexOperand<'a> {
    fn from(a: &'a ComplexArray) -> Self {
        ComplexOperand::Complex(a)
    }
}

impl<'a> From<&'a Array> for ComplexOperand<'a> {
    fn from(a: &'a Array) -> Self {
        ComplexOperand::Real(a)
    }
}

impl From<Complex> for ComplexOperand<'_> {
    fn from(c: Complex) -> Self {
        ComplexOperand::Scalar(c)
    }
}

impl From<f64> for ComplexOperand<'_> {
    fn from(x: f64) -> Self {
        ComplexOperand::Scalar(Complex::new(x, 0.0))
    }
}

/// `a` as a float part: integer and bool arrays become `f64` (NumPy's complex128).
fn float_part(a: &Array) -> Array {
    match a.dtype() {
        Ok(DType::F64 | DType::F32) => a.clone(),
        _ => a.astype(DType::F64),
    }
}

/// The real and imaginary parts of a value written into a complex array (a real operand's
/// imaginary part is zero).
fn value_parts<'a>(value: &'a ComplexOperand<'a>) -> (Operand<'a>, Operand<'a>) {
    match value {
        ComplexOperand::Complex(z) => (Operand::Array(&z.re), Operand::Array(&z.im)),
        ComplexOperand::Real(a) => (Operand::Array(a), Operand::Scalar(0.0)),
        ComplexOperand::Scalar(c) => (Operand::Scalar(c.re), Operand::Scalar(c.im)),
    }
}

/// `part` in `re`'s dtype (a real operand of a wider type widens the real part: the
/// imaginary part follows, so that both parts keep one dtype).
fn like(part: &Array, re: &Array) -> Array {
    match (part.dtype(), re.dtype()) {
        (Ok(a), Ok(b)) if a != b => part.astype(b),
        _ => part.clone(),
    }
}

/// `part` broadcast to `like`'s shape (the imaginary part of a sum with a real operand that
/// broadcast the real part).
fn widened(part: &Array, like: &Array) -> Array {
    match like.shape() {
        Ok(shape) => part.broadcast_to(&shape),
        Err(_) => like.clone(),
    }
}

impl Numeric {
    /// The complex array `re + im i` (NumPy's `re + im * 1j`), the two broadcast together
    /// and copied; integer parts become `f64`. The parts' dtype is the wider of theirs.
    #[track_caller]
    pub fn complex(&self, re: &Array, im: &Array) -> ComplexArray {
        let _site = self.site_guard(std::panic::Location::caller());
        let shape = match (re.shape(), im.shape()) {
            (Ok(a), Ok(b)) => super::products::broadcast_batch(&a, &b).ok_or_else(|| {
                Error::Usage(format!(
                    "numeric.complex: operands could not be broadcast together with shapes {} \
                     {}",
                    super::shape_text(&a),
                    super::shape_text(&b)
                ))
            }),
            (Err(e), _) | (_, Err(e)) => Err(e),
        };
        let shape = match shape {
            Ok(s) => s,
            Err(e) => {
                let bad = self.wrap(Err(e));
                return ComplexArray {
                    re: bad.clone(),
                    im: bad,
                };
            }
        };
        let (re, im) = (float_part(re), float_part(im));
        let dtype = match (re.dtype(), im.dtype()) {
            (Ok(DType::F32), Ok(DType::F32)) => DType::F32,
            _ => DType::F64,
        };
        ComplexArray {
            re: re.broadcast_to(&shape).astype(dtype),
            im: im.broadcast_to(&shape).astype(dtype),
        }
    }

    /// A complex array of zeros: `dtype` is the parts' (`F64` for NumPy's `complex128`, `F32`
    /// for `complex64`).
    #[track_caller]
    pub fn complex_zeros(&self, shape: &[u64], dtype: DType) -> ComplexArray {
        let _site = self.site_guard(std::panic::Location::caller());
        let dtype = match dtype {
            DType::F32 => DType::F32,
            DType::F64 => DType::F64,
            other => {
                let bad = self.wrap(Err(Error::Usage(format!(
                    "numeric.complex_zeros: complex parts are f64 or f32, not {other}"
                ))));
                return ComplexArray {
                    re: bad.clone(),
                    im: bad,
                };
            }
        };
        ComplexArray {
            re: self.zeros(shape, dtype),
            im: self.zeros(shape, dtype),
        }
    }
}

impl ComplexArray {
    /// The complex array of these parts, which must have one shape and one float dtype.
    pub fn from_parts(re: Array, im: Array) -> Result<ComplexArray> {
        let (rs, is) = (re.shape()?, im.shape()?);
        let (rd, id) = (re.dtype()?, im.dtype()?);
        if rs != is || rd != id || !matches!(rd, DType::F64 | DType::F32) {
            return Err(Error::Usage(format!(
                "numeric.complex: the parts must have one shape and one float dtype, not {} {rd} \
                 and {} {id}",
                super::shape_text(&rs),
                super::shape_text(&is)
            )));
        }
        Ok(ComplexArray { re, im })
    }

    /// `a + 0i`: a real array as a complex one, a copy (integer arrays become
    /// `complex128`).
    #[track_caller]
    pub fn from_real(a: &Array) -> ComplexArray {
        let re = float_part(a).copy();
        ComplexArray {
            im: re.zeros_like(),
            re,
        }
    }

    /// The real part, NumPy's `z.real`: the array itself, so that assigning to it changes
    /// this complex array.
    pub fn re(&self) -> &Array {
        &self.re
    }

    /// The imaginary part, NumPy's `z.imag`, as [`ComplexArray::re`].
    pub fn im(&self) -> &Array {
        &self.im
    }

    /// The shape.
    pub fn shape(&self) -> Result<Vec<u64>> {
        self.im.shape()?;
        self.re.shape()
    }

    /// The parts' dtype: `F64` for `complex128`, `F32` for `complex64`.
    pub fn dtype(&self) -> Result<DType> {
        self.re.dtype()
    }

    /// The first error either part carries, if any.
    pub fn check(&self) -> Result<()> {
        self.re.check()?;
        self.im.check()
    }

    /// The elements in row-major order. This runs the pending tasks.
    pub fn to_vec(&self) -> Result<Vec<Complex>> {
        let (re, im) = (self.re.to_vec()?, self.im.to_vec()?);
        Ok(re
            .into_iter()
            .zip(im)
            .map(|(re, im)| Complex { re, im })
            .collect())
    }

    /// The single element of a 0-d (or one-element) array.
    pub fn item(&self) -> Result<Complex> {
        Ok(Complex::new(self.re.item()?, self.im.item()?))
    }

    /// Applies `f` to both parts (views, copies, conversions).
    pub(super) fn each(&self, f: impl Fn(&Array) -> Array) -> ComplexArray {
        ComplexArray {
            re: f(&self.re),
            im: f(&self.im),
        }
    }

    /// A copy.
    #[track_caller]
    pub fn copy(&self) -> ComplexArray {
        self.each(Array::copy)
    }

    /// The parts converted to `dtype` (`F64`: `complex128`, `F32`: `complex64`).
    #[track_caller]
    pub fn astype(&self, dtype: DType) -> ComplexArray {
        self.each(|p| p.astype(dtype))
    }

    /// The view `self[ranges]` ([`Array::slice`]).
    #[track_caller]
    pub fn slice(&self, ranges: &[Range]) -> ComplexArray {
        self.each(|p| p.slice(ranges))
    }

    /// The view `self[indices]` ([`Array::index`]).
    #[track_caller]
    pub fn index(&self, indices: &[Ix]) -> ComplexArray {
        self.each(|p| p.index(indices))
    }

    /// Another shape, a view where the layout allows ([`Array::reshape`]).
    #[track_caller]
    pub fn reshape(&self, shape: &[i64]) -> ComplexArray {
        self.each(|p| p.reshape(shape))
    }

    /// The axes permuted ([`Array::permute`]).
    #[track_caller]
    pub fn permute(&self, axes: &[u32]) -> ComplexArray {
        self.each(|p| p.permute(axes))
    }

    /// The transpose, NumPy's `z.T` (not conjugated).
    #[track_caller]
    pub fn t(&self) -> ComplexArray {
        self.each(Array::t)
    }

    /// A new axis of extent 1 ([`Array::expand_dims`]).
    #[track_caller]
    pub fn expand_dims(&self, axis: i64) -> ComplexArray {
        self.each(|p| p.expand_dims(axis))
    }

    /// The read-only view broadcast to `shape`.
    #[track_caller]
    pub fn broadcast_to(&self, shape: &[u64]) -> ComplexArray {
        self.each(|p| p.broadcast_to(shape))
    }

    /// `n` copies of each element along `axis` ([`Array::repeat`]).
    #[track_caller]
    pub fn repeat(&self, repeats: u64, axis: Option<i64>) -> ComplexArray {
        self.each(|p| p.repeat(repeats, axis))
    }

    /// The operand's parts, `(re, im)`; `None` for a zero imaginary part.
    fn parts<'a>(other: &'a ComplexOperand<'a>) -> (Operand<'a>, Option<Operand<'a>>) {
        match other {
            ComplexOperand::Complex(z) => (Operand::Array(&z.re), Some(Operand::Array(&z.im))),
            ComplexOperand::Real(a) => (Operand::Array(a), None),
            ComplexOperand::Scalar(c) if c.im == 0.0 && c.im.is_sign_positive() => {
                (Operand::Scalar(c.re), None)
            }
            ComplexOperand::Scalar(c) => (Operand::Scalar(c.re), Some(Operand::Scalar(c.im))),
        }
    }

    /// `self + other`.
    #[track_caller]
    pub fn add<'a>(&self, other: impl Into<ComplexOperand<'a>>) -> ComplexArray {
        let other = other.into();
        match Self::parts(&other) {
            (c, Some(d)) => ComplexArray {
                re: self.re.binary(super::BinaryOp::Add, c),
                im: self.im.binary(super::BinaryOp::Add, d),
            },
            (c, None) => {
                let re = self.re.binary(super::BinaryOp::Add, c);
                ComplexArray {
                    im: like(&(&widened(&self.im, &re) + 0.0), &re),
                    re,
                }
            }
        }
    }

    /// `self - other`.
    #[track_caller]
    pub fn sub<'a>(&self, other: impl Into<ComplexOperand<'a>>) -> ComplexArray {
        let other = other.into();
        match Self::parts(&other) {
            (c, Some(d)) => ComplexArray {
                re: self.re.binary(super::BinaryOp::Sub, c),
                im: self.im.binary(super::BinaryOp::Sub, d),
            },
            (c, None) => {
                let re = self.re.binary(super::BinaryOp::Sub, c);
                ComplexArray {
                    im: like(&(&widened(&self.im, &re) - 0.0), &re),
                    re,
                }
            }
        }
    }

    /// `self * other`: `(ac - bd) + (ad + bc)i`, NumPy's formula (`(ac) + (bc)i` by a real
    /// operand).
    #[track_caller]
    pub fn mul<'a>(&self, other: impl Into<ComplexOperand<'a>>) -> ComplexArray {
        let other = other.into();
        let (a, b) = (&self.re, &self.im);
        match Self::parts(&other) {
            (c, Some(d)) => ComplexArray {
                re: a.binary(super::BinaryOp::Mul, c.clone())
                    - b.binary(super::BinaryOp::Mul, d.clone()),
                im: a.binary(super::BinaryOp::Mul, d) + b.binary(super::BinaryOp::Mul, c),
            },
            (c, None) => ComplexArray {
                re: a.binary(super::BinaryOp::Mul, c.clone()),
                im: b.binary(super::BinaryOp::Mul, c),
            },
        }
    }

    /// `self * self`.
    #[track_caller]
    pub fn square(&self) -> ComplexArray {
        self.mul(self)
    }

    /// `self / other`: NumPy's division (Smith's method, with NumPy's branches and its
    /// infinities for a zero divisor; a real divisor multiplies by its reciprocal).
    #[track_caller]
    pub fn div<'a>(&self, other: impl Into<ComplexOperand<'a>>) -> ComplexArray {
        let (a, b) = (&self.re, &self.im);
        match other.into() {
            ComplexOperand::Scalar(c) if c.im == 0.0 && c.im.is_sign_positive() => {
                if c.re == 0.0 {
                    return self.each(|p| p / c.re.abs());
                }
                // A real divisor: NumPy multiplies by its reciprocal.
                self.mul(1.0 / c.re)
            }
            ComplexOperand::Scalar(c) if c.re == 0.0 && c.im == 0.0 => {
                self.each(|p| p / c.re.abs())
            }
            ComplexOperand::Scalar(c) => {
                let (cr, ci) = (c.re, c.im);
                if cr.abs() >= ci.abs() {
                    let rat = ci / cr;
                    let scl = 1.0 / (cr + ci * rat);
                    ComplexArray {
                        re: (a + &(b * rat)) * scl,
                        im: (b - &(a * rat)) * scl,
                    }
                } else {
                    let rat = cr / ci;
                    let scl = 1.0 / (ci + cr * rat);
                    ComplexArray {
                        re: (&(a * rat) + b) * scl,
                        im: (&(b * rat) - a) * scl,
                    }
                }
            }
            ComplexOperand::Real(c) => {
                let zero = c.eq(Operand::Scalar(0.0));
                let by_abs = |x: &Array| x / &c.abs();
                let scale = 1.0 / c;
                ComplexArray {
                    re: zero.select(&by_abs(a), &(a * &scale)),
                    im: zero.select(&by_abs(b), &(b * &scale)),
                }
            }
            ComplexOperand::Complex(z) => {
                let (c, d) = (&z.re, &z.im);
                let (cabs, dabs) = (c.abs(), d.abs());
                let real_larger = cabs.ge(&dabs);
                let both_zero = cabs.eq(Operand::Scalar(0.0)) & dabs.eq(Operand::Scalar(0.0));
                // |c| >= |d|: rat = d/c, scl = 1/(c + d rat).
                let rat1 = d / c;
                let scl1 = 1.0 / (c + &(d * &rat1));
                let re1 = (a + &(b * &rat1)) * &scl1;
                let im1 = (b - &(a * &rat1)) * &scl1;
                // |c| < |d|: rat = c/d, scl = 1/(d + c rat).
                let rat2 = c / d;
                let scl2 = 1.0 / (d + &(c * &rat2));
                let re2 = ((a * &rat2) + b) * &scl2;
                let im2 = ((b * &rat2) - a) * &scl2;
                let re = real_larger.select(&re1, &re2);
                let im = real_larger.select(&im1, &im2);
                ComplexArray {
                    re: both_zero.select(&(a / &cabs), &re),
                    im: both_zero.select(&(b / &cabs), &im),
                }
            }
        }
    }

    /// `-self`.
    #[track_caller]
    pub fn neg(&self) -> ComplexArray {
        self.each(|p| -p)
    }

    /// The complex conjugate, NumPy's `conj`.
    #[track_caller]
    pub fn conj(&self) -> ComplexArray {
        ComplexArray {
            re: self.re.copy(),
            im: -&self.im,
        }
    }

    /// The magnitude, NumPy's `abs` (a real array of the parts' dtype): see the module's
    /// documentation for the formula.
    #[track_caller]
    pub fn abs(&self) -> Array {
        let (x, y) = (self.re.abs(), self.im.abs());
        let (m, n) = (x.maximum(&y), x.minimum(&y));
        let ratio = &n / &m;
        let scaled = &m * &(&(&ratio * &ratio) + 1.0).sqrt();
        let infinite = x.eq(Operand::Scalar(f64::INFINITY)) | y.eq(Operand::Scalar(f64::INFINITY));
        let exact = n.eq(Operand::Scalar(0.0)) | m.eq(Operand::Scalar(f64::INFINITY));
        infinite.select(Operand::Scalar(f64::INFINITY), &exact.select(&m, &scaled))
    }

    /// The angle, NumPy's `angle`: `atan2(im, re)`.
    #[track_caller]
    pub fn angle(&self) -> Array {
        self.im.arctan2(&self.re)
    }

    /// `e^self`, NumPy's `exp`: `exp(a) cos b + exp(a) sin b i` (a zero imaginary part stays
    /// zero, as in NumPy).
    #[track_caller]
    pub fn exp(&self) -> ComplexArray {
        let e = self.re.exp();
        let (cos, sin) = (self.im.cos(), self.im.sin());
        let zero = self.im.eq(Operand::Scalar(0.0));
        ComplexArray {
            re: &e * &cos,
            im: zero.select(&self.im, &(&e * &sin)),
        }
    }

    /// `self ** n` for an integer `n`, as NumPy computes an integer power (`n` of 1, 2 and
    /// 3 by products, others by repeated squaring, a negative `n` as the reciprocal).
    #[track_caller]
    pub fn powi(&self, n: i32) -> ComplexArray {
        match n {
            0 => ComplexArray {
                re: self.re.ones_like(),
                im: self.im.zeros_like(),
            },
            1 => self.copy(),
            2 => self.mul(self),
            3 => self.mul(self).mul(self),
            _ => {
                let mut left = n.unsigned_abs();
                let mut power = self.clone();
                let mut acc: Option<ComplexArray> = None;
                loop {
                    if left & 1 == 1 {
                        acc = Some(match acc {
                            None => power.clone(),
                            Some(a) => a.mul(&power),
                        });
                    }
                    left >>= 1;
                    if left == 0 {
                        break;
                    }
                    power = power.mul(&power);
                }
                let acc = acc.unwrap_or_else(|| self.powi(0));
                if n < 0 {
                    ComplexArray::from_real(&acc.re.ones_like()).div(&acc)
                } else {
                    acc
                }
            }
        }
    }

    /// The sum of all elements (0-d): each part summed.
    #[track_caller]
    pub fn sum(&self) -> ComplexArray {
        self.each(Array::sum)
    }

    /// The sum along `axis` ([`Array::sum_axis`]).
    #[track_caller]
    pub fn sum_axis(&self, axis: i64) -> ComplexArray {
        self.each(|p| p.sum_axis(axis))
    }

    /// The matrix product `self @ b`: `(A C - B D) + (A D + B C) i`, four real products.
    #[track_caller]
    pub fn matmul<'a>(&self, b: impl Into<ComplexOperand<'a>>) -> ComplexArray {
        let (a_re, a_im) = (&self.re, &self.im);
        match b.into() {
            ComplexOperand::Complex(z) => ComplexArray {
                re: a_re.matmul(&z.re) - a_im.matmul(&z.im),
                im: a_re.matmul(&z.im) + a_im.matmul(&z.re),
            },
            ComplexOperand::Real(c) => ComplexArray {
                re: a_re.matmul(c),
                im: a_im.matmul(c),
            },
            ComplexOperand::Scalar(_) => {
                let bad = self.re.np.wrap(Err(Error::Usage(
                    "numeric.matmul: Input operand 1 does not have enough dimensions (a \
                     scalar)"
                        .into(),
                )));
                ComplexArray {
                    re: bad.clone(),
                    im: bad,
                }
            }
        }
    }

    /// Writes `src` (broadcast to this shape) into this array or view, NumPy's `z[...] = src`.
    #[track_caller]
    pub fn assign<'a>(&self, src: impl Into<ComplexOperand<'a>>) -> Result<()> {
        let src = src.into();
        let (re, im) = value_parts(&src);
        self.re.assign(re)?;
        self.im.assign(im)
    }

    /// `self[mask] = value` with `value` broadcast to this shape ([`Array::assign_where`]).
    #[track_caller]
    pub fn assign_where<'a>(
        &self,
        mask: &Array,
        value: impl Into<ComplexOperand<'a>>,
    ) -> Result<()> {
        let value = value.into();
        let (re, im) = value_parts(&value);
        self.re.assign_where(mask, re)?;
        self.im.assign_where(mask, im)
    }

    /// The elements where `mask` is true, as a 1-d array (NumPy's `z[mask]`,
    /// [`Array::masked`]).
    #[track_caller]
    pub fn masked(&self, mask: &Array) -> Result<ComplexArray> {
        Ok(ComplexArray {
            re: self.re.masked(mask)?,
            im: self.im.masked(mask)?,
        })
    }

    /// `self[i0, i1, ...] = values` with one integer index array per dimension
    /// ([`Array::assign_at`]), on both parts.
    #[track_caller]
    pub fn assign_at<'a>(
        &self,
        indices: &[&Array],
        values: impl Into<ComplexOperand<'a>>,
    ) -> Result<()> {
        let values = values.into();
        let (re, im) = value_parts(&values);
        self.re.assign_at(indices, re)?;
        self.im.assign_at(indices, im)
    }

    /// `self[mask] = values`, one value per true element of `mask` in row-major order
    /// (NumPy's `z[m] = f(z[m])`, [`Array::assign_masked`]).
    #[track_caller]
    pub fn assign_masked(&self, mask: &Array, values: &ComplexArray) -> Result<()> {
        let _site = self.re.np.site_guard(std::panic::Location::caller());
        self.re.check_mask("numeric.assign_masked", mask)?;
        let key = self.re.mask_key(mask)?;
        let through_mask = |p: &Array| p.deferred().is_some_and(|c| c.key() == key);
        if through_mask(&values.re) && through_mask(&values.im) {
            self.re.assign_deferred(mask, &values.re)?;
            self.im.assign_deferred(mask, &values.im)?;
            return Ok(());
        }
        let given = values.shape()?;
        match self
            .re
            .masked_slots("numeric.assign_masked", mask, &given)?
        {
            Some(slots) => {
                self.re.assign_from_slots(mask, &values.re, &slots)?;
                self.im.assign_from_slots(mask, &values.im, &slots)
            }
            None => Ok(()),
        }
    }
}

macro_rules! complex_operator {
    ($trait:ident, $method:ident) => {
        impl<'a, R: Into<ComplexOperand<'a>>> std::ops::$trait<R> for &ComplexArray {
            type Output = ComplexArray;
            #[track_caller]
            fn $method(self, rhs: R) -> ComplexArray {
                ComplexArray::$method(self, rhs)
            }
        }
        impl<'a, R: Into<ComplexOperand<'a>>> std::ops::$trait<R> for ComplexArray {
            type Output = ComplexArray;
            #[track_caller]
            fn $method(self, rhs: R) -> ComplexArray {
                ComplexArray::$method(&self, rhs)
            }
        }
    };
}

complex_operator!(Add, add);
complex_operator!(Sub, sub);
complex_operator!(Mul, mul);
complex_operator!(Div, div);

impl std::ops::Neg for &ComplexArray {
    type Output = ComplexArray;
    #[track_caller]
    fn neg(self) -> ComplexArray {
        ComplexArray::neg(self)
    }
}

/// `real + z`: the real array promoted, NumPy's `x + z`.
impl std::ops::Add<&ComplexArray> for &Array {
    type Output = ComplexArray;
    #[track_caller]
    fn add(self, rhs: &ComplexArray) -> ComplexArray {
        let re = self + &rhs.re;
        ComplexArray {
            im: like(&(0.0 + &widened(&rhs.im, &re)), &re),
            re,
        }
    }
}

/// `real * c`: a real array times a complex scalar, NumPy's `x * 1j`.
impl std::ops::Mul<Complex> for &Array {
    type Output = ComplexArray;
    #[track_caller]
    fn mul(self, rhs: Complex) -> ComplexArray {
        ComplexArray::from_real(self).mul(rhs)
    }
}
