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
    /// The token of the core that made it: store ids mean nothing to another core (another
    /// tenant), so a core refuses a handle whose token is not its own.
    owner: Arc<CoreToken>,
}

/// The identity of one runtime core, shared by its handles ([`crate::Core::resolve`]).
#[derive(Debug, Default)]
pub struct CoreToken;

impl Drop for HandleInner {
    fn drop(&mut self) {
        // The runtime may be gone already; then there is nothing to free.
        let _ = self.released.send(self.id);
    }
}

impl StoreHandle {
    /// A handle that tells `released` when its last clone is dropped.
    pub(crate) fn new(
        id: StoreId,
        released: Sender<StoreId>,
        owner: Arc<CoreToken>,
    ) -> StoreHandle {
        StoreHandle(Arc::new(HandleInner {
            id,
            released,
            owner,
        }))
    }

    /// The store's id, in the runtime that made the handle. Use [`crate::Core::resolve`]
    /// where a handle comes from outside, so that another runtime's handle is refused.
    pub fn id(&self) -> StoreId {
        self.0.id
    }

    /// Whether the core with this token made the handle.
    pub(crate) fn made_by(&self, token: &Arc<CoreToken>) -> bool {
        Arc::ptr_eq(&self.0.owner, token)
    }
}

impl std::fmt::Debug for StoreHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoreHandle({})", self.0.id.0)
    }
}
