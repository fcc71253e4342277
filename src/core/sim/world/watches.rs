//! The clients' side of watches: each registration a simulated session holds (the server's
//! watch table is the model's), fired by the notification for its path once that arrives, as
//! a ZooKeeper client's watch manager fires every watcher of the path.

use std::task::Waker;

use zklock_proto::{PathWatchRequest, Request};

use super::World;
use crate::wire as zk;

/// What kind of watch a registration is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum WatchKind {
    Data,
    Child,
}

impl WatchKind {
    /// Whether a notification of `event` fires a watch of this kind.
    fn fired_by(self, event: zk::EventType) -> bool {
        match event {
            zk::EventType::NodeCreated | zk::EventType::NodeDataChanged => self == WatchKind::Data,
            zk::EventType::NodeChildrenChanged => self == WatchKind::Child,
            zk::EventType::NodeDeleted | zk::EventType::Session => true,
        }
    }
}

/// A client's watch: who set it, on what, and its one-shot outcome.
pub(crate) struct WatchReg {
    pub(super) session: i64,
    pub(super) kind: WatchKind,
    pub(super) path: String,
    /// The client knows of it: the reply that set it was delivered (a notification that
    /// arrives before that reply is not for it).
    pub(super) active: bool,
    pub(super) fired: Option<zk::EventType>,
    pub(super) waker: Option<Waker>,
}

impl World {
    /// A registration of session `id`, active once the reply that set it is delivered.
    pub(super) fn register(&mut self, id: i64, kind: WatchKind, path: &str) -> u64 {
        let w = self.next_watch;
        self.next_watch += 1;
        self.watches.insert(
            w,
            WatchReg {
                session: id,
                kind,
                path: path.to_owned(),
                active: false,
                fired: None,
                waker: None,
            },
        );
        w
    }

    /// The reply that set `w` reached its client.
    pub(super) fn activate(&mut self, w: u64) {
        if let Some(reg) = self.watches.get_mut(&w) {
            reg.active = true;
        }
    }

    /// A notification reached session `id`: every watch of its path that it fires fires.
    pub(super) fn notified(&mut self, id: i64, path: &str, event: zk::EventType) {
        let fired: Vec<u64> = self
            .watches
            .iter()
            .filter(|(_, w)| {
                w.session == id
                    && w.active
                    && w.fired.is_none()
                    && w.path == path
                    && w.kind.fired_by(event)
            })
            .map(|(k, _)| *k)
            .collect();
        for w in fired {
            self.fire(w, event);
        }
    }

    pub(crate) fn fire(&mut self, w: u64, event: zk::EventType) {
        if let Some(reg) = self.watches.get_mut(&w) {
            if reg.fired.is_none() {
                reg.fired = Some(event);
                if let Some(waker) = reg.waker.take() {
                    waker.wake();
                }
            }
        }
    }

    /// The watch's event if it fired (registering `waker` if not); `None` if it is gone.
    pub(crate) fn watch_fired(&mut self, w: u64, waker: &Waker) -> Option<Option<zk::EventType>> {
        let reg = self.watches.get_mut(&w)?;
        if reg.fired.is_none() {
            reg.waker = Some(waker.clone());
        }
        Some(reg.fired)
    }

    /// Sets a data watch for `id` on `path` at once (an exists with a watch, answered on the
    /// spot): how the simulation follows a holder's own node, as the guard's own-node watch
    /// does. Never left out of a reconnect's SetWatches.
    pub(crate) fn watch_now(&mut self, id: i64, path: &str) -> u64 {
        let w = self.register(id, super::WatchKind::Data, path);
        self.activate(w);
        self.robust.insert(w);
        // A connection that does not carry it now re-arms it when it reconnects.
        if self.flows(id) && !self.server_ended(id) {
            let conn = self.session(id).conn;
            let exists = Request::Exists(PathWatchRequest {
                path: path.to_owned(),
                watch: true,
            });
            let _ = self.request(conn, exists);
        }
        w
    }

    /// What the watch `w` reported, if it fired (and was delivered).
    pub(crate) fn watch_event(&self, w: u64) -> Option<zk::EventType> {
        self.watches.get(&w).and_then(|reg| reg.fired)
    }

    /// The client dropped its watcher: the last of its session on that path, it is removed
    /// from the server (RemoveWatches).
    pub(crate) fn unwatch(&mut self, w: u64) {
        self.robust.remove(&w);
        let Some(reg) = self.watches.remove(&w) else {
            return;
        };
        let others = self.watches.values().any(|o| {
            o.session == reg.session
                && o.kind == reg.kind
                && o.path == reg.path
                && o.fired.is_none()
        });
        // (Fired or not: a watch fired by the client itself, as a claim on a node already gone
        // fires its own, may still be at the server.)
        if !others {
            self.remove_server_watch(reg.session, reg.kind, &reg.path);
        }
    }

    /// The watches still registered: (session, path), the clients' and the server's.
    pub(crate) fn live_watches(&self) -> Vec<(i64, String)> {
        let clients = self.watches.values().map(|w| (w.session, w.path.clone()));
        let server = self
            .model
            .watches_by_session()
            .into_iter()
            .filter(|(session, _)| *session != super::OPERATOR)
            .flat_map(|(session, paths)| paths.into_iter().map(move |p| (session, p)));
        clients.chain(server).collect()
    }
}
