//! The task behind a holder's [`OwnNodeWatch`]: it follows our lock node on the runtime and
//! raises the watch's flags (see `core/own_node.rs`).

use std::sync::Arc;

use crate::core::own_node::NodeFlags;
use crate::rt::relay::io_log;
use crate::wire as zk;
use crate::znode::layout::REVOKE_MESSAGE;

use super::errors::outcome_unknown;
use super::retry::retry_pause_async;

#[cfg(doc)]
use crate::core::own_node::OwnNodeWatch;

/// The task behind an [`OwnNodeWatch`]: reads our lock node `path` and watches it, raising
/// `flags` for the revocation marker and for the node's deletion by someone else, until the
/// node or the session is gone.
pub(crate) async fn follow_own_node(
    zk: zk::Transport,
    path: String,
    mut state: zk::StateWatcher,
    flags: Arc<NodeFlags>,
) {
    /// Tells waiters when the task ends, also when it is aborted (`Client::close`).
    struct Ended(Arc<NodeFlags>);
    impl Drop for Ended {
        fn drop(&mut self) {
            self.0.ended();
        }
    }
    let _ended = Ended(flags.clone());
    loop {
        if !flags.reading() {
            return;
        }
        let read = zk.get_and_watch_data(&path).await;
        flags.read();
        match read {
            Ok((data, _, watcher)) => {
                // Keep watching after a request: the holder may ignore it, and a later
                // deletion must still mark the lock lost.
                if data == REVOKE_MESSAGE && !flags.revocation_raised() {
                    io_log!(Info, "revocation requested for {path}");
                    flags.raise_revocation();
                }
                match watcher.changed().await.event_type {
                    zk::EventType::NodeDataChanged => {}
                    zk::EventType::NodeDeleted => {
                        io_log!(
                            Warn,
                            "lock node {path} was deleted by someone else: lock lost"
                        );
                        flags.raise_deleted();
                        return;
                    }
                    _ => return, // The session ended: the guard sees that itself.
                }
            }
            Err(err) if outcome_unknown(&err) => {
                if !retry_pause_async(&mut state).await {
                    return;
                }
            }
            Err(zk::Error::NoNode) => {
                flags.raise_deleted();
                return;
            }
            Err(_) => return,
        }
    }
}
