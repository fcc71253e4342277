//! An in-memory ZooKeeper for one lock path, behind the [`Queue`] seam: the wait loop's unit
//! tests drive it step by step (in the spirit of tokio's `batch_semaphore` tests), deleting
//! nodes, dropping the connection and losing notifications where a real server cannot be
//! made to.
//!
//! Our session creates nodes through the seam; the test adds the other sessions' nodes with
//! [`Memory::add_other`]. Watches fire as ZooKeeper's do (once, on deletion or a child
//! change), unless the test removes a node [`unseen`](Memory::remove_unseen).

use std::collections::BTreeMap;
use std::future::{poll_fn, Future};
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::Instant;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::session::create::Create;
use crate::session::floors::Floors;
use crate::session::listing::{Children, Listed};
use crate::session::{Liveness, NodeStat};
use crate::wire as zk;
use crate::znode::layout::protected_prefix;

use super::queue::{NodeStore, Queue};

/// Our session's id; other sessions' nodes belong to [`OTHER`].
pub(super) const OURS: i64 = 1;
pub(super) const OTHER: i64 = 2;

/// The store: the lock path's children and the session's state.
pub(super) struct Memory {
    nodes: Mutex<Nodes>,
    state: Arc<StateCell>,
    floors: Floors,
}

#[derive(Default)]
struct Nodes {
    /// The lock path's children, by name.
    children: BTreeMap<String, NodeStat>,
    /// The last zxid and sequence number handed out.
    zxid: i64,
    sequence: i32,
    /// Set watches: on a child's name, or on the lock path's children (`None`).
    watches: Vec<(Option<String>, Arc<WatchCell>)>,
    /// Every node watched, in order.
    watched: Vec<String>,
    /// How many listings were asked for.
    listings: usize,
    /// The owner the next creates report for their node (a stale or foreign reply), if not us.
    reported_owner: Option<i64>,
}

impl Memory {
    pub(super) fn new() -> Arc<Memory> {
        Arc::new(Memory {
            // zxid 1 created the lock path itself.
            nodes: Mutex::new(Nodes {
                zxid: 1,
                ..Nodes::default()
            }),
            state: Arc::new(StateCell {
                inner: Mutex::new((Liveness::Connected, 0, Vec::new())),
            }),
            floors: Floors::default(),
        })
    }

    /// Adds another session's node named `lock_name` (e.g. `lock-`) to the queue.
    pub(super) fn add_other(&self, lock_name: &str) -> String {
        let prefix = format!(
            "{}{lock_name}",
            protected_prefix(&crate::random::Uuid::new_v4())
        );
        self.nodes.lock().add(&prefix, OTHER)
    }

    /// Sets the lock path's child counter: the next node is numbered `next`.
    pub(super) fn set_counter(&self, next: i32) {
        self.nodes.lock().sequence = next;
    }

    /// Deletes the child `name`, firing the watches on it and on the lock path's children.
    pub(super) fn delete(&self, name: &str) {
        let mut nodes = self.nodes.lock();
        assert!(nodes.children.remove(name).is_some(), "{name} exists");
        nodes.fire(name);
    }

    /// Deletes the child `name` without notifying anyone: a notification lost in an outage.
    pub(super) fn remove_unseen(&self, name: &str) {
        assert!(self.nodes.lock().children.remove(name).is_some());
    }

    /// The names of our session's nodes.
    pub(super) fn ours(&self) -> Vec<String> {
        let nodes = self.nodes.lock();
        let ours = nodes
            .children
            .iter()
            .filter(|(_, s)| s.ephemeral_owner == OURS);
        ours.map(|(name, _)| name.clone()).collect()
    }

    /// The node watched last.
    pub(super) fn last_watched(&self) -> Option<String> {
        self.nodes.lock().watched.last().cloned()
    }

    pub(super) fn listings(&self) -> usize {
        self.nodes.lock().listings
    }

    /// Makes the next creates report `owner` as their node's `ephemeralOwner`.
    pub(super) fn report_owner(&self, owner: i64) {
        self.nodes.lock().reported_owner = Some(owner);
    }

    pub(super) fn set_liveness(&self, liveness: Liveness) {
        let wakers = {
            let mut state = self.state.inner.lock();
            state.0 = liveness;
            state.1 += 1;
            std::mem::take(&mut state.2)
        };
        wakers.into_iter().for_each(Waker::wake);
    }

    fn listing(&self) -> Listed {
        let mut nodes = self.nodes.lock();
        nodes.listings += 1;
        Children::new(nodes.children.keys().cloned().collect(), PATH_STAT)
    }
}

/// The lock path's stat: created by zxid 1.
const PATH_STAT: NodeStat = NodeStat {
    czxid: 1,
    ephemeral_owner: 0,
    ctime: 1,
    version: 0,
};

impl Nodes {
    fn add(&mut self, prefix: &str, owner: i64) -> String {
        let name = format!("{prefix}{:010}", self.sequence);
        // As ZooKeeper 3.8: the counter never goes down, so it sticks at i32::MAX.
        self.sequence = self.sequence.saturating_add(1);
        self.zxid += 1;
        let stat = NodeStat {
            czxid: self.zxid,
            ephemeral_owner: owner,
            ctime: self.zxid,
            version: 0,
        };
        self.children.insert(name.clone(), stat);
        name
    }

    /// Fires the watches that the deletion of the child `name` triggers.
    fn fire(&mut self, name: &str) {
        let (fired, kept) = std::mem::take(&mut self.watches)
            .into_iter()
            .partition(|(on, _)| on.as_deref().is_none_or(|on| on == name));
        self.watches = kept;
        for (on, cell) in fired {
            let event = match on {
                Some(_) => zk::EventType::NodeDeleted,
                None => zk::EventType::NodeChildrenChanged,
            };
            cell.fire(event);
        }
    }

    fn watch(&mut self, on: Option<String>) -> Arc<WatchCell> {
        let cell = Arc::new(WatchCell::default());
        self.watched.extend(on.clone());
        self.watches.push((on, cell.clone()));
        cell
    }
}

/// A watch, and the task waiting for it.
#[derive(Default)]
pub(super) struct WatchCell(Mutex<(Option<zk::EventType>, Option<Waker>)>);

impl WatchCell {
    fn fire(&self, event: zk::EventType) {
        let waker = {
            let mut cell = self.0.lock();
            cell.0 = Some(event);
            cell.1.take()
        };
        waker.into_iter().for_each(Waker::wake);
    }
}

/// The session's liveness, how many times it changed, and who waits for the next change.
pub(super) struct StateCell {
    inner: Mutex<(Liveness, u64, Vec<Waker>)>,
}

impl NodeStore for Memory {
    async fn create(&self, _: &str, prefix: &str, _: &[u8], _: Option<Instant>) -> Result<Create> {
        let mut nodes = self.nodes.lock();
        let name = nodes.add(prefix, OURS);
        let mut stat = nodes.children[&name];
        stat.ephemeral_owner = nodes.reported_owner.unwrap_or(OURS);
        Ok(Create::Created {
            name,
            stat,
            children: Some(nodes.children.keys().cloned().collect()),
            parent: Some(PATH_STAT),
        })
    }
    async fn wait_connected(&self, _: Option<Instant>) -> Result<()> {
        Ok(())
    }
    async fn sync(&self, _: &str, _: Option<Instant>) -> Result<()> {
        Ok(())
    }
    async fn list(&self, _: &str, _: Option<Instant>) -> Result<Vec<String>> {
        Ok(self.listing().names.clone())
    }
    async fn stat(&self, path: &str, _: Option<Instant>) -> Result<Option<NodeStat>> {
        let name = path.rsplit('/').next().unwrap_or_default();
        Ok(self.nodes.lock().children.get(name).copied())
    }
    async fn ensure_path(&self, _: &str, _: Option<Instant>) -> Result<()> {
        Ok(())
    }
    fn sweep(&self, _: &str, prefix: &str) {
        self.nodes
            .lock()
            .children
            .retain(|name, _| !name.starts_with(prefix));
    }
}

impl Queue for Memory {
    type Watch = Arc<WatchCell>;
    type States = (Arc<StateCell>, u64);

    fn id(&self) -> i64 {
        OURS
    }
    fn liveness(&self) -> Liveness {
        self.state.inner.lock().0
    }
    fn ended_error(&self) -> Error {
        Error::SessionExpired
    }
    async fn list_since(&self, _: &str, _: Option<Instant>, _: Instant) -> Result<Listed> {
        Ok(self.listing())
    }
    async fn list_with_stat(&self, _: &str, _: Option<Instant>) -> Result<Listed> {
        Ok(self.listing())
    }
    async fn watch_node(&self, path: &str, _: Option<Instant>) -> Result<Option<Self::Watch>> {
        let name = path.rsplit('/').next().unwrap_or_default();
        let mut nodes = self.nodes.lock();
        if !nodes.children.contains_key(name) {
            return Ok(None);
        }
        Ok(Some(nodes.watch(Some(name.to_owned()))))
    }
    async fn watch_children(
        &self,
        _: &str,
        _: Option<Instant>,
    ) -> Result<(Vec<String>, Self::Watch)> {
        let mut nodes = self.nodes.lock();
        nodes.listings += 1;
        let names = nodes.children.keys().cloned().collect();
        Ok((names, nodes.watch(None)))
    }
    fn fired(watch: Self::Watch) -> impl Future<Output = zk::EventType> + Send {
        poll_fn(move |cx| {
            let mut cell = watch.0.lock();
            match cell.0 {
                Some(event) => Poll::Ready(event),
                None => {
                    cell.1 = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
    }
    fn states(&self) -> Self::States {
        let seen = self.state.inner.lock().1;
        (self.state.clone(), seen)
    }
    fn state_changed(states: &mut Self::States) -> impl Future<Output = ()> + Send + '_ {
        poll_fn(move |cx| {
            let (cell, seen) = &mut *states;
            let mut state = cell.inner.lock();
            if state.1 != *seen {
                *seen = state.1;
                return Poll::Ready(());
            }
            state.2.push(cx.waker().clone());
            Poll::Pending
        })
    }
    fn withdraw_in_background(&self, path: &str, done: impl Send + 'static) {
        let name = path.rsplit('/').next().unwrap_or_default();
        let mut nodes = self.nodes.lock();
        if nodes.children.remove(name).is_some() {
            nodes.fire(name);
        }
        drop(done);
    }
    fn floors(&self) -> &Floors {
        &self.floors
    }
}
