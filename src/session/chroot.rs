//! The connect string's chroot, kept so that it can be created again.

use crate::wire as zk;

use super::op::Op;

/// The connect string's chroot, and a handle on the same session outside it, so that the
/// chroot can be created again if someone deletes it.
#[derive(Clone)]
pub(super) struct Chroot {
    pub(super) path: String,
    pub(super) root: zk::Transport,
}

impl Chroot {
    /// Creates the chroot and its missing ancestors. They are persistent nodes, never
    /// containers: once the server swept an empty container chroot, a client inside it could
    /// not create anything any more (every request would fail with NoNode).
    pub(super) fn create(&self, acl: zk::Acls) -> Op<()> {
        let (zk, path) = (self.root.clone(), self.path.clone());
        Box::pin(async move {
            zk.mkdir(&path, &zk::CreateMode::Persistent.with_acls(acl))
                .await
        })
    }
}
