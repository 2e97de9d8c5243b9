//! Deferred stores (fusion through a bounded anti-dependence, [`Binding`]'s `deferred`): every
//! point's loads must see the old values of what the launch stores.
//!
//! - **A sole launch** (its task's only point, [`Backend::set_sole_launch`]) stores into a
//!   second buffer of the target's size and, once its last entry has run, the two buffers
//!   swap: no copy. The old buffer stays as the target's *shadow*: it equals the new one
//!   outside the rectangle just written, so the next launch that defers a store into the
//!   same rectangle of the same buffer (the next sweep of a stencil) stores into the shadow
//!   and swaps again. Anything else that writes the buffer drops its shadow; without one,
//!   the launch copies the buffer whole into a fresh one first.
//! - **Other launches** store into a dense temporary of the rectangle, which a copy kernel
//!   (emitted from the IR like any other) moves into place at
//!   [`Backend::finish_deferred`], once every point of the task has run: a later point may
//!   still read the rows an earlier one wrote.

use weft_ir::{Param, Privilege};
use weft_runtime::{Backend, Binding, BufferId};

use super::{PtxBackend, dense_strides, elements};
use crate::device::Device;
use crate::{Error, Result};

/// The rectangle of a buffer a deferred binding writes: offset, extents and strides.
pub(super) type Rect = (u64, Vec<i64>, Vec<i64>);

/// A swap to make once a sole launch's entries have run.
pub(super) struct Swap {
    target: BufferId,
    written: BufferId,
    rect: Rect,
}

/// A dense temporary to copy into place at the end of the task.
pub(super) struct HeldCopy {
    temp: BufferId,
    dense: Binding,
    target: Binding,
}

impl<D: Device> PtxBackend<D> {
    /// Drops buffer `id`'s shadow, if it has one: something else is about to write it.
    pub(super) fn drop_shadow(&mut self, id: BufferId) {
        if let Some((shadow, _)) = self.shadows.remove(&id) {
            self.free(shadow);
        }
    }

    /// The bindings of a launch with its deferred ones rebound (see the module
    /// documentation), and the swaps to make after its entries. Drops the shadows of the
    /// buffers the launch writes otherwise.
    pub(super) fn rebind_deferred(
        &mut self,
        params: &[Param],
        bindings: &[Binding],
    ) -> Result<(Vec<Binding>, Vec<Swap>)> {
        let privileges = params.iter().filter_map(|p| match p {
            Param::Store { privilege, .. } => Some(*privilege),
            Param::Scalar { .. } => None,
        });
        for (b, privilege) in bindings.iter().zip(privileges) {
            if let Binding::Buffer {
                buffer,
                deferred: None,
                ..
            } = b
                && privilege != Privilege::Read
            {
                self.drop_shadow(*buffer);
            }
        }
        let mut out = bindings.to_vec();
        let mut swaps: Vec<Swap> = Vec::new();
        for b in out.iter_mut() {
            let Binding::Buffer {
                buffer,
                offset,
                extents,
                strides,
                origin,
                view,
                element_size,
                deferred: Some(_),
            } = b
            else {
                continue;
            };
            if self.sole_launch {
                let rect: Rect = (*offset, extents.to_vec(), strides.to_vec());
                let written = match swaps.iter().find(|s| s.target == *buffer) {
                    Some(s) => s.written,
                    None => {
                        let written = self.swap_buffer(*buffer, &rect)?;
                        swaps.push(Swap {
                            target: *buffer,
                            written,
                            rect,
                        });
                        written
                    }
                };
                *b = Binding::Buffer {
                    buffer: written,
                    offset: *offset,
                    extents: extents.clone(),
                    strides: strides.clone(),
                    origin: origin.clone(),
                    view: view.clone(),
                    element_size: *element_size,
                    deferred: None,
                };
                continue;
            }
            let bytes = elements(extents).saturating_mul(*element_size as u64);
            let temp = self.new_buffer(bytes, false)?;
            let dense = Binding::Buffer {
                buffer: temp,
                offset: 0,
                extents: extents.clone(),
                strides: dense_strides(extents).into(),
                origin: origin.clone(),
                view: view.clone(),
                element_size: *element_size,
                deferred: None,
            };
            let mut target = std::mem::replace(b, dense.clone());
            if let Binding::Buffer { deferred, .. } = &mut target {
                *deferred = None;
            }
            self.held_copies.push(HeldCopy {
                temp,
                dense,
                target,
            });
        }
        Ok((out, swaps))
    }

    /// The buffer a sole launch stores `target`'s rectangle `rect` into: `target`'s shadow
    /// when it has one for that rectangle, else a copy of `target`.
    fn swap_buffer(&mut self, target: BufferId, rect: &Rect) -> Result<BufferId> {
        match self.shadows.remove(&target) {
            Some((shadow, r)) if &r == rect => return Ok(shadow),
            Some((shadow, _)) => self.free(shadow),
            None => {}
        }
        let (from, bytes) = self.buffer(target)?;
        let written = self.new_buffer(bytes, false)?;
        let (to, _) = self.buffer(written)?;
        self.device.copy(to, from, bytes)?;
        Ok(written)
    }

    /// Makes the swaps of a sole launch whose entries have all run: each target's buffer
    /// becomes the one written, and its old one its shadow.
    pub(super) fn finish_swaps(&mut self, swaps: Vec<Swap>) -> Result<()> {
        for s in swaps {
            let old = self.buffer(s.target)?;
            let new = self.buffer(s.written)?;
            self.buffers.insert(s.target, new);
            self.buffers.insert(s.written, old);
            self.shadows.insert(s.target, (s.written, s.rect));
        }
        Ok(())
    }

    /// Lands (`commit`) or drops the dense temporaries of the task's deferred stores.
    pub(super) fn land_copies(&mut self, commit: bool) -> Result<()> {
        let held = std::mem::take(&mut self.held_copies);
        let mut result = Ok(());
        for h in held {
            if commit && result.is_ok() {
                result = self.copy_into_place(&h);
            }
            self.free(h.temp);
        }
        result
    }

    fn copy_into_place(&mut self, h: &HeldCopy) -> Result<()> {
        let (rank, size) = match &h.target {
            Binding::Buffer {
                extents,
                element_size,
                ..
            }
            | Binding::Scratch {
                extents,
                element_size,
                ..
            } => (extents.len(), *element_size),
        };
        let copy = self.copy_kernel(size, rank)?;
        self.launch(copy, &[h.dense.clone(), h.target.clone()], &[])
            .map_err(|e| Error::Memory(format!("a deferred store: {e}")))
    }
}
