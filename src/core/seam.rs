//! The seam between the waiting core's decisions and ZooKeeper: the requests, watches and
//! session-state changes an acquisition uses, as traits the [`Session`] implements, so that
//! unit tests and the simulation (`core/sim`) can drive the whole wait loop through a simulated
//! ZooKeeper.
//!
//! Dispatch is static: the core is generic over the store, and for the [`Session`] its futures
//! are the ones it awaited before the seam existed (as small, and `Send`).

use std::future::Future;
use std::time::Instant;

use crate::error::{Error, Result};
use crate::session::floors::Floors;
use crate::session::listing::list_shared;
use crate::session::Session;
use crate::wire as zk;

use super::session_view::{Children, Create, Listed, Liveness, NodeStat};

/// The session operations that place our node in a queue, so that unit tests can drive every
/// outcome of a create.
pub(crate) trait NodeStore: Sync {
    /// See [`Session::create_lock_node_async`]: a create dropped unanswered is withdrawn in
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
    /// a [`Session`], a virtual one in the simulation (`core/sim`). Statically dispatched, so
    /// the real build calls `Instant::now()` as before.
    fn now(&self) -> Instant;
    /// Resolves once [`now`](Self::now) reaches `at`.
    fn sleep_until(&self, at: Instant) -> impl Future<Output = ()> + Send;
    /// A fresh id for a protected node name: random for a [`Session`], seeded in the
    /// simulation (so that a seed replays byte for byte).
    fn unique_id(&self) -> crate::random::Uuid;
}

/// Everything else an acquisition asks of its session: listings, watches, the session's state
/// and its changes, and withdrawing a node in the background.
pub(crate) trait ZkSession: NodeStore + Send + Sized + 'static {
    /// A watch set on a node or on a path's children; dropping it unsets it.
    type Watch: Send;
    /// The session's state changes, from when they were asked for.
    type States: Send;

    /// The session's id: the `ephemeralOwner` of the nodes it creates.
    fn id(&self) -> i64;
    fn liveness(&self) -> Liveness;
    /// Why the session ended, once it has.
    fn ended_error(&self) -> Error;
    /// The children of `lock_path` with its stat, from a listing sent no earlier than `since`
    /// (see [`list_shared`]).
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
    /// What `watch` reports when it fires ([`zk::EventType::Session`]: never, the session
    /// ended).
    fn fired(watch: Self::Watch) -> impl Future<Output = zk::EventType> + Send;
    /// The session's state changes from now on.
    fn states(&self) -> Self::States;
    /// Resolves at the next state change (never once the state is terminal: check
    /// [`liveness`](Self::liveness) first).
    fn state_changed(states: &mut Self::States) -> impl Future<Output = ()> + Send + '_;
    /// Deletes our node `path` in the background, until it is gone or the session has ended;
    /// `done` is dropped once that is settled.
    fn withdraw_in_background(&self, path: &str, done: impl Send + 'static);
    /// What the session has learnt of its queues (see [`Floors`]).
    fn floors(&self) -> &Floors;
}

impl NodeStore for Session {
    async fn create<D: Send + 'static>(
        &self,
        lock_path: &str,
        prefix: &str,
        data: &[u8],
        deadline: Option<Instant>,
        settling: impl FnOnce() -> D + Send,
    ) -> Result<Create> {
        self.create_lock_node_async(lock_path, prefix, data, deadline, settling)
            .await
    }
    async fn wait_connected(&self, deadline: Option<Instant>) -> Result<()> {
        self.wait_connected_async(deadline).await
    }
    async fn sync(&self, path: &str, deadline: Option<Instant>) -> Result<()> {
        self.sync_async(path, deadline).await
    }
    async fn list(&self, path: &str, deadline: Option<Instant>) -> Result<Vec<String>> {
        self.list_async(path, deadline).await
    }
    async fn stat(&self, path: &str, deadline: Option<Instant>) -> Result<Option<NodeStat>> {
        Ok(self
            .get_data_async(path, deadline)
            .await?
            .map(|(_, stat)| stat))
    }
    async fn ensure_path(&self, path: &str, deadline: Option<Instant>) -> Result<()> {
        self.ensure_path_async(path, deadline).await
    }
    fn sweep(&self, lock_path: &str, prefix: &str) {
        self.sweep_in_background(lock_path, prefix);
    }
    #[inline]
    fn now(&self) -> Instant {
        Instant::now()
    }
    #[inline]
    fn sleep_until(&self, at: Instant) -> impl Future<Output = ()> + Send {
        crate::rt::timer::sleep_until(at)
    }
    #[inline]
    fn unique_id(&self) -> crate::random::Uuid {
        crate::random::Uuid::new_v4()
    }
}

impl ZkSession for Session {
    type Watch = zk::OneshotWatcher;
    type States = zk::StateWatcher;

    fn id(&self) -> i64 {
        self.id
    }
    fn liveness(&self) -> Liveness {
        Session::liveness(self)
    }
    fn ended_error(&self) -> Error {
        Session::ended_error(self)
    }
    fn list_since(
        &self,
        lock_path: &str,
        deadline: Option<Instant>,
        since: Instant,
    ) -> impl Future<Output = Result<Listed>> + Send {
        list_shared(self, lock_path, deadline, since)
    }
    async fn list_with_stat(&self, path: &str, deadline: Option<Instant>) -> Result<Listed> {
        let (names, stat) = self.list_with_stat_async(path, deadline).await?;
        Ok(Children::new(names, stat))
    }
    fn watch_node(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<Option<Self::Watch>>> + Send {
        self.watch_node_async(path, deadline)
    }
    fn watch_children(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> impl Future<Output = Result<(Vec<String>, Self::Watch)>> + Send {
        self.watch_children_async(path, deadline)
    }
    async fn fired(watch: Self::Watch) -> zk::EventType {
        watch.changed().await.event_type
    }
    fn states(&self) -> Self::States {
        self.state_watcher()
    }
    async fn state_changed(states: &mut Self::States) {
        states.changed().await;
    }
    fn withdraw_in_background(&self, path: &str, done: impl Send + 'static) {
        Session::withdraw_in_background(self, path, done);
    }
    fn floors(&self) -> &Floors {
        &self.floors
    }
}
