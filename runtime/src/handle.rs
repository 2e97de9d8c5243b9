//! Application handles to stores.

use std::sync::Arc;
use std::sync::mpsc::Sender;

use crate::stores::StoreId;

/// An application's handle to a store. Clones share one handle; when the last clone is dropped
/// the runtime is told, which (once no pending task needs the store) frees it.
#[derive(Clone)]
pub struct StoreHandle(Arc<HandleInner>);

struct HandleInner {
    id: StoreId,
    released: Sender<StoreId>,
}

impl Drop for HandleInner {
    fn drop(&mut self) {
        // The runtime may be gone already; then there is nothing to free.
        let _ = self.released.send(self.id);
    }
}

impl StoreHandle {
    /// A handle that tells `released` when its last clone is dropped.
    pub(crate) fn new(id: StoreId, released: Sender<StoreId>) -> StoreHandle {
        StoreHandle(Arc::new(HandleInner { id, released }))
    }

    /// The store's id.
    pub fn id(&self) -> StoreId {
        self.0.id
    }
}

impl std::fmt::Debug for StoreHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoreHandle({})", self.0.id.0)
    }
}
