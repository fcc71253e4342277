//! One-shot watches: registered by a read, fired by the change they watch (each notification
//! sent on its session's connection, in order with its replies), re-armed by a reconnect.

use std::task::Waker;

use super::{Msg, World};
use crate::wire as zk;

/// What kind of watch a registration is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WatchKind {
    Data,
    Child,
}

/// A watch: who set it, on what, and its one-shot outcome.
pub(crate) struct WatchReg {
    pub(super) session: i64,
    pub(super) kind: WatchKind,
    pub(super) path: String,
    /// Registered at the server (else waiting to be re-armed by a reconnect, or dead).
    pub(super) armed: bool,
    /// The zxid the session had seen when the watch was set, for a re-arm's comparison.
    pub(super) fired: Option<zk::EventType>,
    pub(super) waker: Option<Waker>,
}

impl World {
    pub(super) fn register(&mut self, id: i64, kind: WatchKind, path: &str) -> u64 {
        let w = self.next_watch;
        self.next_watch += 1;
        self.watches.insert(
            w,
            WatchReg {
                session: id,
                kind,
                path: path.to_owned(),
                armed: true,
                fired: None,
                waker: None,
            },
        );
        w
    }

    /// The watches a change to `path` of `kind` fires: one-shot, each sent on its session's
    /// connection (in order with its replies).
    pub(super) fn trigger(&mut self, path: &str, kind: WatchKind, event: zk::EventType) {
        let fired: Vec<(u64, i64)> = self
            .watches
            .iter()
            .filter(|(_, w)| w.armed && w.kind == kind && w.path == path)
            .map(|(k, w)| (*k, w.session))
            .collect();
        for (w, session) in fired {
            self.watches.get_mut(&w).expect("listed").armed = false;
            self.session_mut(session)
                .inbox
                .push_back(Msg::Event { watch: w, event });
        }
    }

    pub(super) fn trigger_data(&mut self, path: &str, event: zk::EventType) {
        self.trigger(path, WatchKind::Data, event);
    }

    pub(super) fn trigger_child(&mut self, path: &str, event: zk::EventType) {
        self.trigger(path, WatchKind::Child, event);
    }

    pub(crate) fn fire(&mut self, w: u64, event: zk::EventType) {
        if let Some(reg) = self.watches.get_mut(&w) {
            if reg.fired.is_none() {
                reg.fired = Some(event);
                reg.armed = false;
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

    /// Sets a data watch for `id` on `path` at once (no request): how the simulation follows
    /// a holder's own node, as the guard's own-node watch does. Never lost across a reconnect.
    pub(crate) fn watch_now(&mut self, id: i64, path: &str) -> u64 {
        let w = self.register(id, WatchKind::Data, path);
        self.robust.insert(w);
        w
    }

    /// What the watch `w` reported, if it fired (and was delivered).
    pub(crate) fn watch_event(&self, w: u64) -> Option<zk::EventType> {
        self.watches.get(&w).and_then(|reg| reg.fired)
    }

    /// The client dropped its watcher: unfired, it is removed from the server (RemoveWatches).
    pub(crate) fn unwatch(&mut self, w: u64) {
        self.watches.remove(&w);
        self.robust.remove(&w);
    }

    /// The watches still registered: (session, path).
    pub(crate) fn live_watches(&self) -> Vec<(i64, String)> {
        self.watches
            .values()
            .map(|w| (w.session, w.path.clone()))
            .collect()
    }
}
