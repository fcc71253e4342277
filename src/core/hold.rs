//! A node held on the way through an acquisition of several (a multi-lock's members, a
//! semaphore's gate and permit nodes), whatever the session: a `Held` on a session of the client
//! (see `held.rs`), a claimed node in the simulation (`core/sim`). The core's sequences of
//! several nodes ([`ordered`](super::ordered), [`permits`](super::permits), each through
//! `contend::take`) are written once against these traits, so the simulation runs them as
//! the recipes do.

use std::future::Future;
use std::time::Duration;

use super::claim::Claimed;
use super::seam::ZkSession;
use super::session_view::Liveness;

/// A node that holds a lock (or a gate, or a permit node) for an acquisition of several.
pub(crate) trait Hold: Send + 'static {
    fn node_path(&self) -> &str;
    /// Where the session holding the node stands.
    fn liveness(&self) -> Liveness;
    /// Releases without waiting: deleted in the background until gone or the session has
    /// ended; `done` is dropped then.
    fn release_in_background(&mut self, done: impl Send + 'static);
    /// Releases, waiting for the server at most about `wait` (the background goes on after
    /// that); a failure is logged.
    fn release_logged(&mut self, wait: Duration) -> impl Future<Output = ()> + Send + '_;
}

/// A session whose claimed nodes can be held as [`Hold`]s.
pub(crate) trait Holds: ZkSession {
    type Held: Hold;
    /// The node `claimed` in `lock_path`, held.
    fn hold(claimed: Claimed<Self>, lock_path: &str) -> Self::Held;
}
