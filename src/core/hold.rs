//! A node held on the way through an acquisition of several (a multi-lock's members, a
//! semaphore's gate and leases), whatever the session: a [`Held`] on a [`Session`], a claimed
//! node in the simulation (`core/sim`). The core's sequences of several nodes
//! ([`ordered`](super::ordered), [`permits`](super::permits)) are written once against these
//! traits, so the simulation runs them as the recipes do.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::Result;
use crate::session::Session;
use crate::znode::layout::owner_data;

use super::claim::Claimed;
use super::contend::{contend, past_deadline_is_busy};
use super::held::Held;
use super::kind::Kind;
use super::seam::ZkSession;
use super::session_view::Liveness;
use super::wait::Attempt;

/// A node that holds a lock (or a gate, or a lease) for an acquisition of several.
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

impl Hold for Held {
    fn node_path(&self) -> &str {
        Held::node_path(self)
    }
    fn liveness(&self) -> Liveness {
        Held::liveness(self)
    }
    fn release_in_background(&mut self, done: impl Send + 'static) {
        Held::release_in_background(self, done);
    }
    fn release_logged(&mut self, wait: Duration) -> impl Future<Output = ()> + Send + '_ {
        Held::release_logged(self, wait)
    }
}

impl Holds for Session {
    type Held = Held;
    fn hold(claimed: Claimed<Session>, lock_path: &str) -> Held {
        claimed.held(lock_path)
    }
}

/// Acquires `lock_path` as a contender of `kind` with the owner's data, on any session: the
/// steps of an acquisition of several for each of its locks (what
/// [`acquire_on`](super::contend::acquire_on) is for one, without its options).
pub(crate) async fn take<S: Holds>(
    session: &Arc<S>,
    lock_path: &str,
    kind: &Kind,
    attempt: &Attempt,
    deadline: Option<Instant>,
) -> Result<Option<S::Held>> {
    let contended = contend(session, lock_path, kind, attempt, deadline, &owner_data()).await;
    let claimed = past_deadline_is_busy(session.as_ref(), deadline, contended)?;
    Ok(claimed.map(|claimed| S::hold(claimed, lock_path)))
}
