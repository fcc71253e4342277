//! The session's side of the core's seam (see `core/seam.rs`): a [`Session`] is the store an
//! acquisition waits on, and the session a held node is kept on, through the methods of its
//! request families.

use std::future::Future;
use std::time::{Duration, Instant};

use crate::core::claim::Claimed;
use crate::core::held::Held;
use crate::core::hold::Holds;
use crate::core::own_node::OwnNodeWatch;
use crate::core::seam::{HoldingSession, NodeStore, Pending, SessionFacts, ZkSession};
use crate::core::session_view::{Children, Create, Fired, Listed, Liveness, NodeStat};
use crate::core::standing::Standing;
use crate::error::{Error, Result};
use crate::rt::cancel::CancelToken;
use crate::wire as zk;

use super::listing::list_shared;
use super::Session;

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

impl SessionFacts for Session {
    fn id(&self) -> i64 {
        self.id
    }
    fn liveness(&self) -> Liveness {
        Session::liveness(self)
    }
    fn ended_error(&self) -> Error {
        Session::ended_error(self)
    }
}

impl ZkSession for Session {
    type Watch = zk::OneshotWatcher;
    type States = zk::StateWatcher;

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
    async fn fired(watch: Self::Watch) -> Fired {
        fired(watch.changed().await.event_type)
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
    fn floors(&self) -> &crate::core::floors::Floors {
        &self.floors
    }
}

impl HoldingSession for Session {
    fn timeout(&self) -> Duration {
        self.timeout
    }
    fn standing(&self, deleted: bool) -> Standing {
        Session::standing(self, deleted)
    }
    fn watch_own_node(&self, path: &str) -> Result<OwnNodeWatch> {
        Session::watch_own_node(self, path)
    }
    fn wait_disconnected(&self, deadline: Option<Instant>) -> Pending<'_, bool> {
        Box::pin(self.wait_disconnected_async(deadline))
    }
    fn closes(&self) -> &CancelToken {
        Session::closes(self)
    }
    fn delete_node<'a>(&'a self, path: &'a str, wait: Duration) -> Pending<'a, Result<bool>> {
        Box::pin(self.delete_node_async(path, wait))
    }
    fn withdraw_in_background(&self, path: &str, done: Box<dyn Send>) {
        Session::withdraw_in_background(self, path, done);
    }
}

impl Holds for Session {
    type Held = Held;
    fn hold(claimed: Claimed<Session>, lock_path: &str) -> Held {
        claimed.held(lock_path)
    }
}

/// What a watch's event says to the core.
pub(crate) fn fired(event: zk::EventType) -> Fired {
    match event {
        zk::EventType::NodeDeleted => Fired::Deleted,
        zk::EventType::Session => Fired::SessionEnded,
        _ => Fired::Changed,
    }
}
