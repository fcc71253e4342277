//! Withdrawing our node: a contender that gives up, fails or is cancelled deletes the node it
//! queued, waiting for the server only briefly.

use std::sync::Arc;
use std::time::Duration;

use log::debug;

use crate::rt::cancel::{interruption, shielded};
use crate::session::{Liveness, Session};

/// Our node while we wait: deleted on every path that does not end holding the lock.
pub(super) struct OurNode {
    pub(super) session: Arc<Session>,
    pub(super) node_path: String,
    pub(super) armed: bool,
}

impl Drop for OurNode {
    fn drop(&mut self) {
        if self.armed && self.session.liveness() != Liveness::Ended {
            // Wait briefly: the caller's deadline has usually passed already, and the
            // background retry covers a slow or lost reply.
            let wait = withdraw_grace();
            let withdraw = || self.session.delete_node(&self.node_path, wait);
            match shielded(withdraw) {
                Ok(_) => debug!("withdrew {}", self.node_path),
                Err(err) => debug!("withdrawing {}: {err}", self.node_path),
            }
        }
    }
}

/// How long a contender that gives up waits for the delete of its node to be confirmed.
const WITHDRAW_WAIT: Duration = Duration::from_secs(1);

/// The same for a cancelled (or closed) acquisition; the background retry finishes the job.
const CANCEL_WITHDRAW_WAIT: Duration = Duration::from_millis(200);

/// How long cleanup after a failed acquisition waits for the server: a cancelled (or closed)
/// caller is waiting for us and must not be kept for a slow reply.
pub(super) fn withdraw_grace() -> Duration {
    match interruption() {
        Some(_) => CANCEL_WITHDRAW_WAIT,
        None => WITHDRAW_WAIT,
    }
}
