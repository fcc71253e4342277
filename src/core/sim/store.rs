//! The simulated world seen as one lock path with our session on it and another session's
//! nodes added by hand: what the core's unit tests drive (the in-memory stores they used
//! before the simulation are gone; every assertion they made is kept).

use std::sync::Arc;

use crate::znode::layout::protected_prefix;

use super::client::SimSession;
use super::world::Mode;
use super::Sim;

/// One lock path, our session, and another.
pub(crate) struct Store {
    pub(crate) sim: Sim,
    pub(crate) session: Arc<SimSession>,
    /// The other session's id.
    pub(crate) other: i64,
    pub(crate) lock: String,
}

impl Store {
    /// `lock` made (as a container), with our session and another connected.
    pub(crate) fn new(lock: &str) -> Store {
        let store = Store::without_path(lock);
        store.sim.world.lock().mkdirs(lock, Mode::Container);
        store
    }

    /// The same, `lock` not made.
    pub(crate) fn without_path(lock: &str) -> Store {
        let sim = Sim::new(1);
        let session = sim.session();
        let other = sim.session().id;
        Store {
            sim,
            session,
            other,
            lock: lock.to_owned(),
        }
    }

    /// Adds the other session's node named `lock_name` (e.g. `lock-`) to the queue.
    pub(crate) fn add_other(&self, lock_name: &str) -> String {
        let mut world = self.sim.world.lock();
        world.ids += 1;
        let id = crate::random::Uuid::from_u128(u128::from(world.ids) << 64);
        let path = format!("{}/{}{lock_name}", self.lock, protected_prefix(&id));
        let created = world.create_now(self.other, &path, true).expect("created");
        created[self.lock.len() + 1..].to_owned()
    }

    /// Sets the lock path's child counter: the next node is numbered `next`.
    pub(crate) fn set_counter(&self, next: i32) {
        self.sim.world.lock().set_cversion(&self.lock, next);
    }

    /// Deletes the child `name` as the operator (firing the watches it fires).
    pub(crate) fn delete(&self, name: &str) {
        let path = format!("{}/{name}", self.lock);
        assert!(self.sim.world.lock().delete_now(&path), "{name} exists");
    }

    /// The names of our session's nodes, once everything in flight has settled.
    pub(crate) fn ours(&self) -> Vec<String> {
        self.sim.settle();
        let world = self.sim.world.lock();
        let prefix = format!("{}/", self.lock);
        world
            .ephemerals()
            .into_iter()
            .filter(|(path, owner)| *owner == self.session.id && path.starts_with(&prefix))
            .map(|(path, _)| path[prefix.len()..].to_owned())
            .collect()
    }

    /// The node our session watched last.
    pub(crate) fn last_watched(&self) -> Option<String> {
        let world = self.sim.world.lock();
        let watched = world.session(self.session.id).watched.last()?;
        Some(watched.rsplit('/').next().unwrap_or_default().to_owned())
    }

    /// How many listings the server answered our session.
    pub(crate) fn listings(&self) -> usize {
        self.sim.world.lock().processed(self.session.id, "children")
    }

    /// Makes the next creates report `owner` as their node's `ephemeralOwner`.
    pub(crate) fn report_owner(&self, owner: i64) {
        self.sim.world.lock().reported_owner = Some(owner);
    }

    /// Our session's connection drops.
    pub(crate) fn disconnect(&self) {
        self.sim.world.lock().drop_link(self.session.id);
    }

    /// Our session reconnects, every change to what it watched during the outage missed.
    pub(crate) fn reconnect_missing_changes(&self) {
        let mut world = self.sim.world.lock();
        world.lose_watch_percent = 100;
        world.reconnect(self.session.id);
        world.lose_watch_percent = 0;
    }
}
