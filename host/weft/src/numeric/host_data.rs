//! Data in and out of a Rust application, in every dtype: [`Numeric::from_slice`] and
//! [`Array::to_vec_of`] copy typed host values straight into and out of a store (no trip
//! through the plugin, no conversion through `f64`), and [`Numeric::load`] and
//! [`Array::save`] read and write NumPy's `.npy` files in the array's own dtype.

use std::path::Path;
use std::rc::Rc;

use weft_io::npy::{self, NpyData};
use weft_ir::DType;

use super::{Array, ComplexArray, Numeric, shape_text};
use crate::{Error, Result};

mod sealed {
    pub trait Sealed {}
    impl Sealed for f64 {}
    impl Sealed for f32 {}
    impl Sealed for i64 {}
    impl Sealed for i32 {}
    impl Sealed for bool {}
    impl Sealed for u8 {}
    impl Sealed for u16 {}
    impl Sealed for u32 {}
    impl Sealed for u64 {}
}

/// A Rust type an array's elements can be read as and written from: `f64`, `f32`, `i64`,
/// `i32`, `bool`, `u8`, `u16`, `u32` and `u64`, one per [`DType`].
pub trait Element: Copy + sealed::Sealed {
    /// The dtype whose elements are this type.
    const DTYPE: DType;
    /// Appends the element's little-endian bytes (one byte, 0 or 1, for a bool).
    fn put(self, out: &mut Vec<u8>);
    /// The element in `bytes` (exactly [`DType::size`] of them).
    fn get(bytes: &[u8]) -> Self;
}

macro_rules! number_element {
    ($t:ty, $dtype:expr) => {
        impl Element for $t {
            const DTYPE: DType = $dtype;
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn get(bytes: &[u8]) -> Self {
                let mut word = [0u8; std::mem::size_of::<$t>()];
                word.copy_from_slice(bytes);
                <$t>::from_le_bytes(word)
            }
        }
    };
}

number_element!(f64, DType::F64);
number_element!(f32, DType::F32);
number_element!(i64, DType::I64);
number_element!(i32, DType::I32);
number_element!(u8, DType::U8);
number_element!(u16, DType::U16);
number_element!(u32, DType::U32);
number_element!(u64, DType::U64);

impl Element for bool {
    const DTYPE: DType = DType::Bool;
    fn put(self, out: &mut Vec<u8>) {
        out.push(u8::from(self));
    }
    fn get(bytes: &[u8]) -> Self {
        bytes.first().is_some_and(|&b| b != 0)
    }
}

/// The elements of `bytes` (little-endian, `T`'s size each).
fn elements<T: Element>(bytes: &[u8]) -> Vec<T> {
    bytes.chunks_exact(T::DTYPE.size()).map(T::get).collect()
}

impl Numeric {
    /// An array of `T`'s dtype and `shape` holding `values` in row-major order, copied
    /// straight into a store (no trip through the plugin). `values` must hold exactly as many
    /// elements as the shape.
    #[track_caller]
    pub fn from_slice<T: Element>(&self, shape: &[u64], values: &[T]) -> Array {
        let _site = self.site_guard(std::panic::Location::caller());
        let count = shape.iter().try_fold(1u64, |a, &e| a.checked_mul(e));
        if count != u64::try_from(values.len()).ok() {
            return self.wrap(Err(Error::Usage(format!(
                "numeric.from_slice: {} values cannot fill an array of shape {}",
                values.len(),
                shape_text(shape)
            ))));
        }
        let mut bytes = Vec::with_capacity(values.len() * T::DTYPE.size());
        for &v in values {
            v.put(&mut bytes);
        }
        let value = self
            .inner
            .rt
            .borrow_mut()
            .store_from_bytes(shape, T::DTYPE, &bytes);
        Array {
            np: self.clone(),
            slot: super::Slot::Ready(value.map_err(Rc::new)),
        }
    }

    /// The array in the `.npy` file at `path` (NumPy's `np.load` of one array), in its own
    /// dtype: `f64`, `f32`, `i64`, `i32`, `bool` or `uint8` .. `uint64`, C order.
    #[track_caller]
    pub fn load(&self, path: impl AsRef<Path>) -> Result<Array> {
        let _site = self.site_guard(std::panic::Location::caller());
        let file = npy::read(&path)?;
        let a = match file.data {
            NpyData::F64(v) => self.from_slice(&file.shape, &v),
            NpyData::F32(v) => self.from_slice(&file.shape, &v),
            NpyData::I64(v) => self.from_slice(&file.shape, &v),
            NpyData::I32(v) => self.from_slice(&file.shape, &v),
            NpyData::Bool(v) => self.from_slice(&file.shape, &v),
            NpyData::U8(v) => self.from_slice(&file.shape, &v),
            NpyData::U16(v) => self.from_slice(&file.shape, &v),
            NpyData::U32(v) => self.from_slice(&file.shape, &v),
            NpyData::U64(v) => self.from_slice(&file.shape, &v),
            NpyData::C128(_) | NpyData::C64(_) => {
                return Err(Error::Usage(format!(
                    "numeric.load: {} holds a complex array (`{}`): load it with load_complex",
                    path.as_ref().display(),
                    file.data.descr()
                )));
            }
        };
        a.check()?;
        Ok(a)
    }

    /// NumPy's `fromfile(path, dtype)`: a one-dimensional array of the file's elements,
    /// little-endian, with no header (what [`Array::tofile`] writes).
    #[track_caller]
    pub fn fromfile(&self, path: impl AsRef<Path>, dtype: DType) -> Result<Array> {
        let _site = self.site_guard(std::panic::Location::caller());
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| {
            Error::Io(weft_io::Error::Io {
                context: format!("fromfile: reading {}", path.display()),
                source,
            })
        })?;
        if bytes.len() % dtype.size() != 0 {
            return Err(Error::Usage(format!(
                "fromfile: {} holds {} bytes, not a whole number of {dtype} elements",
                path.display(),
                bytes.len()
            )));
        }
        let n = (bytes.len() / dtype.size()) as u64;
        let handle = self
            .inner
            .rt
            .borrow_mut()
            .store_from_bytes(&[n], dtype, &bytes)?;
        Ok(Array {
            np: self.clone(),
            slot: super::Slot::Ready(Ok(handle)),
        })
    }

    /// The complex array in the `.npy` file at `path` (`complex128` or `complex64`; a real
    /// file's array gets a zero imaginary part), its parts uploaded straight into stores.
    #[track_caller]
    pub fn load_complex(&self, path: impl AsRef<Path>) -> Result<ComplexArray> {
        let _site = self.site_guard(std::panic::Location::caller());
        let file = npy::read(&path)?;
        let shape = &file.shape;
        let z = match file.data {
            NpyData::C128(v) => ComplexArray::from_parts(
                self.from_slice(shape, &v.iter().map(|p| p[0]).collect::<Vec<_>>()),
                self.from_slice(shape, &v.iter().map(|p| p[1]).collect::<Vec<_>>()),
            )?,
            NpyData::C64(v) => ComplexArray::from_parts(
                self.from_slice(shape, &v.iter().map(|p| p[0]).collect::<Vec<_>>()),
                self.from_slice(shape, &v.iter().map(|p| p[1]).collect::<Vec<_>>()),
            )?,
            _ => ComplexArray::from_real(&self.load(&path)?),
        };
        z.check()?;
        Ok(z)
    }
}

impl ComplexArray {
    /// Writes the array to a `.npy` file at `path` as NumPy's `complex128` (`f64` parts) or
    /// `complex64` (`f32` parts). On several ranks rank 0 writes the file.
    #[track_caller]
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let shape = self.shape()?;
        let data = match self.dtype()? {
            DType::F32 => {
                let (re, im) = (self.re().to_vec_of::<f32>()?, self.im().to_vec_of::<f32>()?);
                NpyData::C64(re.into_iter().zip(im).map(|(r, i)| [r, i]).collect())
            }
            _ => {
                let (re, im) = (self.re().to_vec_of::<f64>()?, self.im().to_vec_of::<f64>()?);
                NpyData::C128(re.into_iter().zip(im).map(|(r, i)| [r, i]).collect())
            }
        };
        if self.re().np.runtime(|rt| rt.ranks()).0 == 0 {
            npy::write(path, &shape, data)?;
        }
        Ok(())
    }
}

impl Array {
    /// The elements in row-major order as `T`, which must be the array's dtype (convert with
    /// [`Array::astype`] first otherwise): exact, unlike [`Array::to_vec`], which converts to
    /// `f64`. This runs the pending tasks.
    #[track_caller]
    pub fn to_vec_of<T: Element>(&self) -> Result<Vec<T>> {
        let h = self.handle()?;
        let mut rt = self.np.inner.rt.borrow_mut();
        let dtype = rt.dtype(h)?;
        if dtype != T::DTYPE {
            return Err(Error::Usage(format!(
                "to_vec_of: the array holds {dtype}, not {} (convert it with astype first)",
                T::DTYPE
            )));
        }
        let bytes = rt.read_bytes(h)?;
        Ok(elements(&bytes))
    }

    /// NumPy's `a.tofile(path)`: the elements in row-major order as little-endian bytes of
    /// the array's dtype, with no header. This runs the pending tasks. On several ranks every
    /// rank reads the array and rank 0 writes the file.
    #[track_caller]
    pub fn tofile(&self, path: impl AsRef<Path>) -> Result<()> {
        let h = self.handle()?;
        let (bytes, rank) = {
            let mut rt = self.np.inner.rt.borrow_mut();
            (rt.read_bytes(h)?, rt.ranks().0)
        };
        if rank == 0 {
            let path = path.as_ref();
            std::fs::write(path, bytes).map_err(|source| {
                Error::Io(weft_io::Error::Io {
                    context: format!("tofile: writing {}", path.display()),
                    source,
                })
            })?;
        }
        Ok(())
    }

    /// Writes the array to a `.npy` file at `path` (NumPy's `np.save`), in its own dtype.
    /// On several ranks every rank reads the array and rank 0 writes the file.
    #[track_caller]
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let shape = self.shape()?;
        let data = match self.dtype()? {
            DType::F64 => NpyData::F64(self.to_vec_of()?),
            DType::F32 => NpyData::F32(self.to_vec_of()?),
            DType::I64 => NpyData::I64(self.to_vec_of()?),
            DType::I32 => NpyData::I32(self.to_vec_of()?),
            DType::Bool => NpyData::Bool(self.to_vec_of()?),
            DType::U8 => NpyData::U8(self.to_vec_of()?),
            DType::U16 => NpyData::U16(self.to_vec_of()?),
            DType::U32 => NpyData::U32(self.to_vec_of()?),
            DType::U64 => NpyData::U64(self.to_vec_of()?),
        };
        if self.np.runtime(|rt| rt.ranks()).0 == 0 {
            npy::write(path, &shape, data)?;
        }
        Ok(())
    }
}
