//! The seam between the waiting core's decisions and ZooKeeper: the requests, watches and
//! session-state changes an acquisition uses, and what a held node asks of its session, as
//! traits in the core's own words. The session layer implements them for its `Session` (see
//! `session/seam.rs`); unit tests and the simulation (`core/sim`) drive the whole wait loop
//! through a simulated ZooKeeper.
//!
//! Dispatch is static for the wait: the core is generic over the store, and for the session
//! its futures are the ones it awaited before the seam existed (as small, and `Send`). A held
//! node, kept for as long as a guard lives, reaches its session through [`HoldingSession`].

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::rt::cancel::CancelToken;

use super::floors::Floors;
use super::own_node::OwnNodeWatch;
use super::session_view::{Create, Fired, Listed, Liveness, NodeStat};
use super::standing::Standing;

/// The session operations that place our node in a queue, so that unit tests can drive every
/// outcome of a create.
pub(crate) trait NodeStore: Sync {
    /// Places our node in `lock_path` (the session's `create_lock_node_async`): a create dropped unanswered is withdrawn in
    /// the background; on a live connection `settling()` is called then, and what it gives
    /// is dropped once that withdrawal is settled.
    fn create<D: Send + 'static>(
        &self,
        lock_path: &str,
        prefix: &str,
        data: &[u8],
        deadline: Option<Instant>,
        settling: impl FnOnce() -> D + Send,
    ) -> impl Future<Output = Result<Create>> + Send;
    fn wait_connected(&self, deadline: Option<Instant>) -> impl Future<Output = Result<()>> + Send;
    fn sync(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<()>> + Send;
    fn list(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<Vec<String>>> + Send;
    fn stat(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<Option<NodeStat>>> + Send;
    fn ensure_path(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<()>> + Send;
    /// Deletes, in the background, every child of `lock_path` starting with `prefix`.
    fn sweep(&self, lock_path: &str, prefix: &str);

    /// The clock every deadline and wait of the core is measured on: the monotonic clock for
    /// the session, a virtual one in the simulation (`core/sim`). Statically dispatched, so
    /// the real build calls `Instant::now()` as before.
    fn now(&self) -> Instant;
    /// Resolves once [`now`](Self::now) reaches `at`.
    fn sleep_until(&self, at: Instant) -> impl Future<Output = ()> + Send;
    /// A fresh id for a protected node name: random for the session, seeded in the
    /// simulation (so that a seed replays byte for byte).
    fn unique_id(&self) -> crate::random::Uuid;
}

/// What both an acquisition ([`ZkSession`]) and a held node ([`HoldingSession`]) read of
/// their session, declared once.
pub(crate) trait SessionFacts {
    /// The session's id: the `ephemeralOwner` of the nodes it creates.
    fn id(&self) -> i64;
    fn liveness(&self) -> Liveness;
    /// Why the session ended, once it has.
    fn ended_error(&self) -> Error;
}

/// Everything else an acquisition asks of its session: listings, watches, the session's state
/// and its changes, and withdrawing a node in the background.
pub(crate) trait ZkSession: NodeStore + SessionFacts + Send + Sized + 'static {
    /// A watch set on a node or on a path's children; dropping it unsets it.
    type Watch: Send;
    /// The session's state changes, from when they were asked for.
    type States: Send;

    /// The children of `lock_path` with its stat, from a listing sent no earlier than `since`
    /// (shared with the session's other waiters, see `session/listing.rs`).
    fn list_since(
        &self,
        lock_path: &str,
        deadline: Option<Instant>,
        since: Instant,
    ) -> impl Future<Output = Result<Listed>> + Send;
    /// The children of `path` with its stat, listed now.
    fn list_with_stat(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<Listed>> + Send;
    /// Watches the node `path`; `None` if it does not exist.
    fn watch_node(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<Option<Self::Watch>>> + Send;
    /// Lists `path` and watches its children.
    fn watch_children(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<(Vec<String>, Self::Watch)>> + Send;
    /// What `watch` reports when it fires.
    fn fired(watch: Self::Watch) -> impl Future<Output = Fired> + Send;
    /// The session's state changes from now on.
    fn states(&self) -> Self::States;
    /// Resolves at the next state change (never once the state is terminal: check
    /// [`liveness`](SessionFacts::liveness) first).
    fn state_changed(states: &mut Self::States) -> impl Future<Output = ()> + Send + '_;
    /// Deletes our node `path` in the background, until it is gone or the session has ended;
    /// `done` is dropped once that is settled.
    fn withdraw_in_background(&self, path: &str, done: impl Send + 'static);
    /// What the session has learnt of its queues (see [`Floors`]).
    fn floors(&self) -> &Floors;
}

/// A future of the session, boxed: a held node reaches its session through a trait object.
pub(crate) type Pending<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What a held node (`held.rs`) asks of the session it was claimed on, for as long as a guard
/// keeps it: where the lock stands, its own node's watch, the waits on the session, and the
/// release.
pub(crate) trait HoldingSession: SessionFacts + Send + Sync + 'static {
    /// The session's timeout, as the server granted it.
    fn timeout(&self) -> Duration;
    /// Where a lock held on this session stands now, by the one rule (see `standing.rs`),
    /// with our node `deleted` or not.
    fn standing(&self, deleted: bool) -> Standing;
    /// Watches our node `path` for the revocation marker and its deletion by someone else.
    fn watch_own_node(&self, path: &str) -> Result<OwnNodeWatch>;
    /// Resolves once the session is no longer connected (`true`) or at `deadline` (`false`).
    fn wait_disconnected(&self, deadline: Option<Instant>) -> Pending<'_, bool>;
    /// Cancelled when the client is closed: wakes a blocked release.
    fn closes(&self) -> &CancelToken;
    /// Deletes our node `path`, waiting for the server at most `wait` (retried in the
    /// background after that): `Ok(false)` if it was gone already.
    fn delete_node<'a>(&'a self, path: &'a str, wait: Duration) -> Pending<'a, Result<bool>>;
    /// Deletes our node `path` in the background, until it is gone or the session has ended;
    /// `done` is dropped once that is settled.
    fn withdraw_in_background(&self, path: &str, done: Box<dyn Send>);
}
