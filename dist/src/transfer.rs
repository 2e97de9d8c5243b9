//! Boxes in and out of a rank's copy of a root: packing what a plan sends into one message
//! per peer, and unpacking what it receives, in the order both sides list the boxes.

use std::collections::BTreeMap;

use weft_runtime::Rect;

use crate::Error;
use crate::comm::Comm;
use crate::plan::ExchangePlan;

/// A rank's copy of a root storage: row-major, `element` bytes per element.
#[derive(Debug)]
pub struct Local<'a> {
    /// The bytes.
    pub bytes: &'a mut [u8],
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
    len: usize,
    mut f: impl FnMut(usize, usize),
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
    if (total as u128) * (element as u128) > len as u128 {
        return Err(Error::Transfer(format!(
            "{len} bytes hold no root {root:?}"
        )));
    }
    if b.volume() == 0 {
        return Ok(());
    }
    let strides = weft_runtime::view::row_major_strides(root);
    let row = b.extent[rank - 1] as usize * element;
    let outer = &b.extent[..rank - 1];
    for p in weft_runtime::partition::points(outer) {
        let at: u64 = (0..rank)
            .map(|d| (b.origin[d] + p.get(d).copied().unwrap_or(0)) * strides[d] as u64)
            .sum();
        f(at as usize * element, row);
    }
    Ok(())
}

/// The elements of `boxes` of `local`, one after another.
pub fn pack(local: &Local<'_>, boxes: &[Rect]) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    for b in boxes {
        runs(b, local.root, local.element, local.bytes.len(), |at, n| {
            out.extend_from_slice(&local.bytes[at..at + n]);
        })?;
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
    let mut read = 0usize;
    let len = local.bytes.len();
    for b in boxes {
        let mut spans = Vec::new();
        runs(b, local.root, local.element, len, |at, n| {
            spans.push((at, n))
        })?;
        for (at, n) in spans {
            local.bytes[at..at + n].copy_from_slice(&data[read..read + n]);
            read += n;
        }
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
    comm.exchange(&sends, &mut recvs)?;
    for (from, data) in &recvs {
        if let Some(t) = plan.recvs.get(from) {
            unpack(local, &t.boxes, data)?;
        }
    }
    Ok(sends.values().map(|v| v.len() as u64).sum())
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
                origin: vec![1, 1],
                extent: vec![2, 3],
            },
            Rect {
                origin: vec![3, 0],
                extent: vec![1, 5],
            },
        ];
        let packed = pack(
            &Local {
                bytes: &mut src,
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
                bytes: &mut dst,
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
        let outside = [Rect {
            origin: vec![3, 3],
            extent: vec![2, 1],
        }];
        assert!(
            pack(
                &Local {
                    bytes: &mut src,
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
                    bytes: &mut dst,
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
