//! Boxes in and out of a rank's copy of a root: packing what a plan sends into one message
//! per peer, and unpacking what it receives, in the order both sides list the boxes.

use std::collections::BTreeMap;

use weft_runtime::Rect;

use crate::Error;
use crate::comm::Comm;
use crate::plan::ExchangePlan;

/// Bytes of a rank's copy of a root storage, wherever they live.
pub trait ByteAccess {
    /// How many bytes there are.
    fn len(&self) -> u64;
    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copies bytes `at..at + out.len()` into `out`.
    fn read(&mut self, at: u64, out: &mut [u8]) -> Result<(), Error>;
    /// Overwrites bytes `at..at + data.len()` with `data`.
    fn write(&mut self, at: u64, data: &[u8]) -> Result<(), Error>;
}

/// Bytes in host memory.
#[derive(Debug)]
pub struct Slice<'a>(pub &'a mut [u8]);

impl ByteAccess for Slice<'_> {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }

    fn read(&mut self, at: u64, out: &mut [u8]) -> Result<(), Error> {
        let at = usize::try_from(at).map_err(|e| Error::Transfer(e.to_string()))?;
        let src = self
            .0
            .get(at..at + out.len())
            .ok_or_else(|| Error::Transfer(format!("bytes {at}.. outside the copy")))?;
        out.copy_from_slice(src);
        Ok(())
    }

    fn write(&mut self, at: u64, data: &[u8]) -> Result<(), Error> {
        let at = usize::try_from(at).map_err(|e| Error::Transfer(e.to_string()))?;
        let dst = self
            .0
            .get_mut(at..at + data.len())
            .ok_or_else(|| Error::Transfer(format!("bytes {at}.. outside the copy")))?;
        dst.copy_from_slice(data);
        Ok(())
    }
}

/// A rank's copy of a root storage: row-major, `element` bytes per element.
pub struct Local<'a> {
    /// The bytes.
    pub bytes: &'a mut dyn ByteAccess,
    /// The root's shape.
    pub root: &'a [u64],
    /// Bytes per element.
    pub element: usize,
}

/// Calls `f(byte offset, bytes)` for each run of `b` along its last dimension, in row-major
/// order; an error if `b` does not fit in `root` or `len`.
fn runs(
    b: &Rect,
    root: &[u64],
    element: usize,
    len: u64,
    mut f: impl FnMut(u64, usize),
) -> Result<(), Error> {
    let rank = root.len();
    if b.origin.len() != rank || b.extent.len() != rank {
        return Err(Error::Transfer(format!(
            "a box of rank {} for a root of rank {rank}",
            b.origin.len()
        )));
    }
    if (0..rank).any(|d| b.origin[d].saturating_add(b.extent[d]) > root[d]) {
        return Err(Error::Transfer(format!(
            "box {b:?} outside the root {root:?}"
        )));
    }
    let total: u64 = root.iter().product();
    if (total as u128) * (element as u128) > u128::from(len) {
        return Err(Error::Transfer(format!(
            "{len} bytes hold no root {root:?}"
        )));
    }
    if b.volume() == 0 {
        return Ok(());
    }
    if rank == 0 {
        // A 0-d store: its one element.
        f(0, element);
        return Ok(());
    }
    let strides = weft_runtime::view::row_major_strides(root);
    let row = b.extent[rank - 1] as usize * element;
    let outer = &b.extent[..rank - 1];
    for p in weft_runtime::partition::points(outer) {
        let at: u64 = (0..rank)
            .map(|d| (b.origin[d] + p.get(d).copied().unwrap_or(0)) * strides[d] as u64)
            .sum();
        f(at * element as u64, row);
    }
    Ok(())
}

/// The elements of `boxes` of `local`, one after another.
pub fn pack(local: &mut Local<'_>, boxes: &[Rect]) -> Result<Vec<u8>, Error> {
    let mut spans = Vec::new();
    for b in boxes {
        runs(b, local.root, local.element, local.bytes.len(), |at, n| {
            spans.push((at, n))
        })?;
    }
    let mut out = vec![0u8; spans.iter().map(|s| s.1).sum()];
    let mut put = 0;
    for (at, n) in spans {
        local.bytes.read(at, &mut out[put..put + n])?;
        put += n;
    }
    Ok(out)
}

/// Writes `data` (as [`pack`] made it) into `boxes` of `local`.
pub fn unpack(local: &mut Local<'_>, boxes: &[Rect], data: &[u8]) -> Result<(), Error> {
    let want: u64 = boxes.iter().map(Rect::volume).sum::<u64>() * local.element as u64;
    if want != data.len() as u64 {
        return Err(Error::Transfer(format!(
            "received {} bytes where the plan says {want}",
            data.len()
        )));
    }
    let mut spans = Vec::new();
    for b in boxes {
        runs(b, local.root, local.element, local.bytes.len(), |at, n| {
            spans.push((at, n))
        })?;
    }
    let mut read = 0usize;
    for (at, n) in spans {
        local.bytes.write(at, &data[read..read + n])?;
        read += n;
    }
    Ok(())
}

/// Runs `plan` on `local` through `comm`: every box this rank sends leaves, every box it
/// receives lands. Returns the bytes sent.
pub fn run_exchange(
    comm: &dyn Comm,
    plan: &ExchangePlan,
    local: &mut Local<'_>,
) -> Result<u64, Error> {
    let mut sends = BTreeMap::new();
    for (&to, t) in &plan.sends {
        sends.insert(to, pack(local, &t.boxes)?);
    }
    let mut recvs: BTreeMap<usize, Vec<u8>> = plan
        .recvs
        .iter()
        .map(|(&from, t)| (from, vec![0u8; t.elements() as usize * local.element]))
        .collect();
    let sent = sends.values().map(|v| v.len() as u64).sum();
    comm.exchange(sends, &mut recvs)?;
    for (from, data) in &recvs {
        if let Some(t) = plan.recvs.get(from) {
            unpack(local, &t.boxes, data)?;
        }
    }
    Ok(sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boxes_round_trip_and_bad_boxes_are_errors() {
        let root = [4u64, 5];
        let mut src: Vec<u8> = (0..20u8).collect();
        let boxes = vec![
            Rect {
                origin: weft_runtime::smallvec::smallvec![1, 1],
                extent: weft_runtime::smallvec::smallvec![2, 3],
            },
            Rect {
                origin: weft_runtime::smallvec::smallvec![3, 0],
                extent: weft_runtime::smallvec::smallvec![1, 5],
            },
        ];
        let packed = pack(
            &mut Local {
                bytes: &mut Slice(&mut src),
                root: &root,
                element: 1,
            },
            &boxes,
        )
        .unwrap();
        assert_eq!(packed, vec![6, 7, 8, 11, 12, 13, 15, 16, 17, 18, 19]);
        let mut dst = vec![0u8; 20];
        unpack(
            &mut Local {
                bytes: &mut Slice(&mut dst),
                root: &root,
                element: 1,
            },
            &boxes,
            &packed,
        )
        .unwrap();
        for (i, (&d, &s)) in dst.iter().zip(&src).enumerate() {
            let inside = boxes.iter().any(|b| {
                let (r, c) = (i as u64 / 5, i as u64 % 5);
                r >= b.origin[0]
                    && r < b.origin[0] + b.extent[0]
                    && c >= b.origin[1]
                    && c < b.origin[1] + b.extent[1]
            });
            assert_eq!(d, if inside { s } else { 0 }, "element {i}");
        }
        // A 0-d store has one element.
        let mut one = vec![7u8, 9];
        let scalar = [Rect {
            origin: weft_runtime::smallvec::smallvec![],
            extent: weft_runtime::smallvec::smallvec![],
        }];
        let packed0 = pack(
            &mut Local {
                bytes: &mut Slice(&mut one),
                root: &[],
                element: 2,
            },
            &scalar,
        )
        .unwrap();
        assert_eq!(packed0, vec![7, 9]);
        let outside = [Rect {
            origin: weft_runtime::smallvec::smallvec![3, 3],
            extent: weft_runtime::smallvec::smallvec![2, 1],
        }];
        assert!(
            pack(
                &mut Local {
                    bytes: &mut Slice(&mut src),
                    root: &root,
                    element: 1
                },
                &outside
            )
            .is_err()
        );
        assert!(
            unpack(
                &mut Local {
                    bytes: &mut Slice(&mut dst),
                    root: &root,
                    element: 1
                },
                &boxes,
                &packed[1..]
            )
            .is_err()
        );
    }
}
