//! What the connection engine tells its callers: the session's protocol state
//! ([`KeeperState`]) and its data and child watch events. Who waits for which path, so that a
//! notification (or the end of the session) reaches each of them once, and so that every live
//! watch can be set again on a new connection.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

use super::completion::{pair, Completion, Slot};
use super::proto::{EventType, WatchedEvent};

/// A session's state as the protocol reports it: ZooKeeper's `KeeperState` (the Java
/// client's `Watcher.Event.KeeperState`, the states zklock's transport produces). The session
/// layer reads it as a `Liveness`, and the public `SessionState` is decided from that and the
/// lease (`core/standing.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeeperState {
    /// Not connected: connecting for the first time, or reconnecting.
    Disconnected,
    SyncConnected,
    Expired,
    AuthFailed,
    Closed,
}

impl KeeperState {
    /// Terminal: the session is over and this state never changes again.
    pub fn is_terminated(self) -> bool {
        matches!(
            self,
            KeeperState::Expired | KeeperState::AuthFailed | KeeperState::Closed
        )
    }
}

struct StateInner {
    state: KeeperState,
    version: u64,
    wakers: HashMap<u64, Waker>,
    next_waiter: u64,
}

/// The one place the session's state is kept; the I/O thread sets it.
pub(crate) struct StateCell(Mutex<StateInner>);

impl StateCell {
    pub(crate) fn new(state: KeeperState) -> Arc<StateCell> {
        Arc::new(StateCell(Mutex::new(StateInner {
            state,
            version: 0,
            wakers: HashMap::new(),
            next_waiter: 0,
        })))
    }

    pub(crate) fn get(&self) -> KeeperState {
        self.0.lock().state
    }

    /// Moves to `state`, unless the session is already over; `false` if nothing changed.
    pub(crate) fn set(&self, state: KeeperState) -> bool {
        let wakers: Vec<Waker> = {
            let mut inner = self.0.lock();
            if inner.state == state || inner.state.is_terminated() {
                return false;
            }
            inner.state = state;
            inner.version += 1;
            inner.wakers.drain().map(|(_, w)| w).collect()
        };
        for waker in wakers {
            waker.wake();
        }
        true
    }
}

/// Observes the session's state changes; each clone keeps its own place.
#[derive(Clone)]
pub struct StateWatcher {
    cell: Arc<StateCell>,
    seen: u64,
}

impl StateWatcher {
    pub(crate) fn new(cell: Arc<StateCell>) -> StateWatcher {
        StateWatcher { cell, seen: 0 }
    }

    /// The current state, marked as seen.
    pub fn state(&mut self) -> KeeperState {
        let inner = self.cell.0.lock();
        self.seen = inner.version;
        inner.state
    }

    /// The current state, without marking it seen.
    pub fn peek_state(&self) -> KeeperState {
        self.cell.get()
    }

    /// Resolves with the new state once it differs from the one last seen. Never resolves
    /// after a terminal state has been seen: check [`state`](Self::state) before waiting.
    pub fn changed(&mut self) -> Changed<'_> {
        Changed {
            watcher: self,
            key: None,
        }
    }
}

/// The future of [`StateWatcher::changed`].
pub struct Changed<'a> {
    watcher: &'a mut StateWatcher,
    key: Option<u64>,
}

impl Future for Changed<'_> {
    type Output = KeeperState;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<KeeperState> {
        let this = &mut *self;
        let mut inner = this.watcher.cell.0.lock();
        if inner.version != this.watcher.seen {
            this.watcher.seen = inner.version;
            if let Some(key) = this.key.take() {
                inner.wakers.remove(&key);
            }
            return Poll::Ready(inner.state);
        }
        let key = *this.key.get_or_insert_with(|| {
            inner.next_waiter += 1;
            inner.next_waiter
        });
        inner.wakers.insert(key, cx.waker().clone());
        Poll::Pending
    }
}

impl Drop for Changed<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.watcher.cell.0.lock().wakers.remove(&key);
        }
    }
}

/// What a watch is set on: a node's data or its children.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum WatchKind {
    Data,
    Child,
}

impl WatchKind {
    /// The watcher type of a RemoveWatches request (`WatcherType`).
    pub(crate) fn remove_type(self) -> i32 {
        match self {
            WatchKind::Child => 1,
            WatchKind::Data => 2,
        }
    }
}

type Key = (String, WatchKind);

pub(crate) struct Registration {
    id: u64,
    slot: Slot<WatchedEvent>,
    /// How much of the server's path is the client's chroot.
    chroot_len: usize,
}

#[derive(Default)]
struct Entry {
    registered: Vec<Registration>,
    /// Requests that set this watch, sent and not yet answered. While any is on its way, a
    /// dropped watcher must not remove the watch on the server: the request would set it
    /// before the removal, and its watcher would then wait for nothing.
    setting: usize,
}

/// Every watch of the session, by server path and kind.
#[derive(Default)]
pub(crate) struct Watches {
    entries: HashMap<Key, Entry>,
    next_id: u64,
}

/// What removing a watcher left: a RemoveWatches to send for this path and kind.
pub(crate) struct Removal {
    pub(crate) path: String,
    pub(crate) kind: WatchKind,
}

impl Watches {
    /// A request that sets a watch on `path` is about to be sent.
    pub(crate) fn setting(&mut self, path: &str, kind: WatchKind) {
        self.entries
            .entry((path.to_owned(), kind))
            .or_default()
            .setting += 1;
    }

    /// That request got its reply (or was lost): registers a watcher if the server set the
    /// watch (`set`). The watcher's handle removes it when dropped, through `owner`.
    pub(crate) fn settled(
        &mut self,
        path: &str,
        kind: WatchKind,
        set: bool,
        chroot_len: usize,
        owner: &Weak<dyn Unwatch>,
    ) -> Option<OneshotWatcher> {
        let key = (path.to_owned(), kind);
        let entry = self.entries.entry(key.clone()).or_default();
        entry.setting = entry.setting.saturating_sub(1);
        let watcher = if set {
            self.next_id += 1;
            let (slot, fired) = pair();
            entry.registered.push(Registration {
                id: self.next_id,
                slot,
                chroot_len,
            });
            Some(OneshotWatcher {
                fired,
                key: Some((key.clone(), self.next_id)),
                owner: owner.clone(),
            })
        } else {
            None
        };
        if entry.registered.is_empty() && entry.setting == 0 {
            self.entries.remove(&key);
        }
        watcher
    }

    /// Takes out watcher `id`; a RemoveWatches is due if it was the last one on its key and no
    /// request is setting the watch again.
    fn remove(&mut self, key: &Key, id: u64) -> Option<Removal> {
        let entry = self.entries.get_mut(key)?;
        let before = entry.registered.len();
        entry.registered.retain(|r| r.id != id);
        if entry.registered.len() == before {
            return None; // Fired (or taken by the session's end) already.
        }
        if entry.registered.is_empty() && entry.setting == 0 {
            self.entries.remove(key);
            return Some(Removal {
                path: key.0.clone(),
                kind: key.1,
            });
        }
        None
    }

    /// The watchers a notification of `event_type` on `path` fires, taken out.
    pub(crate) fn fire(
        &mut self,
        path: &str,
        event_type: EventType,
    ) -> Vec<(Registration, EventType)> {
        let kinds: &[WatchKind] = match event_type {
            EventType::NodeDeleted => &[WatchKind::Data, WatchKind::Child],
            EventType::NodeChildrenChanged => &[WatchKind::Child],
            EventType::NodeCreated | EventType::NodeDataChanged => &[WatchKind::Data],
            EventType::Session => &[],
        };
        let mut fired = Vec::new();
        for &kind in kinds {
            let key = (path.to_owned(), kind);
            if let Some(entry) = self.entries.get_mut(&key) {
                fired.extend(entry.registered.drain(..).map(|r| (r, event_type)));
                if entry.setting == 0 {
                    self.entries.remove(&key);
                }
            }
        }
        fired
    }

    /// Every watcher, taken out: the session is over.
    pub(crate) fn take_all(&mut self) -> Vec<(Registration, EventType)> {
        self.entries
            .drain()
            .flat_map(|(_, e)| e.registered)
            .map(|r| (r, EventType::Session))
            .collect()
    }

    /// The paths to set again on a new connection: (data watches, child watches).
    pub(crate) fn armed(&self) -> (Vec<String>, Vec<String>) {
        let (mut data, mut child) = (Vec::new(), Vec::new());
        for ((path, kind), entry) in &self.entries {
            if entry.registered.is_empty() {
                continue;
            }
            match kind {
                WatchKind::Data => data.push(path.clone()),
                WatchKind::Child => child.push(path.clone()),
            }
        }
        (data, child)
    }

    /// How many watchers are registered.
    #[cfg(test)]
    pub(crate) fn count(&self) -> usize {
        self.entries.values().map(|e| e.registered.len()).sum()
    }
}

/// Delivers fired watchers' events; called without the registry's lock held.
pub(crate) fn deliver(fired: Vec<(Registration, EventType)>, server_path: &str) {
    for (registration, event_type) in fired {
        let path = server_path
            .get(registration.chroot_len..)
            .filter(|p| !p.is_empty())
            .unwrap_or("/")
            .to_owned();
        registration
            .slot
            .fill(Ok(WatchedEvent { event_type, path }));
    }
}

/// Delivers the session's end to watchers taken by [`Watches::take_all`].
pub(crate) fn deliver_end(fired: Vec<(Registration, EventType)>) {
    for (registration, event_type) in fired {
        registration.slot.fill(Ok(WatchedEvent {
            event_type,
            path: String::new(),
        }));
    }
}

/// Whoever owns the registry: takes a dropped watcher out and removes the server's watch.
pub(crate) trait Unwatch: Send + Sync {
    fn unwatch(&self, key: &(String, WatchKind), id: u64);
}

impl Watches {
    /// For [`Unwatch`] implementations: the registry part of removing a watcher.
    pub(crate) fn unregister(&mut self, key: &(String, WatchKind), id: u64) -> Option<Removal> {
        self.remove(key, id)
    }
}

/// One watch on one node: resolves once with the event that fired it (or
/// [`EventType::Session`] when the session ended first). Dropped unfired, it removes its watch
/// on the server when no one else waits for the same one.
pub struct OneshotWatcher {
    fired: Completion<WatchedEvent>,
    key: Option<((String, WatchKind), u64)>,
    owner: Weak<dyn Unwatch>,
}

impl std::fmt::Debug for OneshotWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OneshotWatcher")
            .field("path", &self.key.as_ref().map(|k| &k.0 .0))
            .finish()
    }
}

impl OneshotWatcher {
    /// Waits for the event.
    pub async fn changed(mut self) -> WatchedEvent {
        let event = (&mut self.fired).await;
        self.key = None; // Fired: nothing to remove.
        event.unwrap_or(WatchedEvent {
            event_type: EventType::Session,
            path: String::new(),
        })
    }
}

impl Drop for OneshotWatcher {
    fn drop(&mut self) {
        if let (Some((key, id)), Some(owner)) = (self.key.take(), self.owner.upgrade()) {
            owner.unwatch(&key, id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoOwner;
    impl Unwatch for NoOwner {
        fn unwatch(&self, _: &(String, WatchKind), _: u64) {}
    }

    fn owner() -> Weak<dyn Unwatch> {
        let strong: Arc<dyn Unwatch> = Arc::new(NoOwner);
        Arc::downgrade(&strong) // dead at once: drops do nothing
    }

    #[test]
    fn a_deletion_fires_data_and_child_watches_once() {
        let mut w = Watches::default();
        let owner = owner();
        w.setting("/a", WatchKind::Data);
        w.setting("/a", WatchKind::Child);
        let data = w.settled("/a", WatchKind::Data, true, 0, &owner).unwrap();
        let child = w.settled("/a", WatchKind::Child, true, 0, &owner).unwrap();
        assert_eq!(w.armed().0, vec!["/a".to_owned()]);
        let fired = w.fire("/a", EventType::NodeDeleted);
        assert_eq!(fired.len(), 2);
        deliver(fired, "/a");
        assert!(w.fire("/a", EventType::NodeDeleted).is_empty());
        assert_eq!(w.count(), 0);
        for watcher in [data, child] {
            let event = crate::rt::runtime::block_on(Box::pin(watcher.changed()), None)
                .ok()
                .unwrap();
            assert_eq!(event.event_type, EventType::NodeDeleted);
        }
    }

    #[test]
    fn removal_waits_for_requests_still_setting_the_watch() {
        let mut w = Watches::default();
        let owner = owner();
        w.setting("/a", WatchKind::Data);
        let first = w.settled("/a", WatchKind::Data, true, 0, &owner).unwrap();
        w.setting("/a", WatchKind::Data); // a second getData+watch is on its way
        let (key, id) = first.key.clone().unwrap();
        assert!(
            w.unregister(&key, id).is_none(),
            "removal while a set is in flight"
        );
        let second = w.settled("/a", WatchKind::Data, true, 0, &owner).unwrap();
        let (key, id) = second.key.clone().unwrap();
        let removal = w.unregister(&key, id).expect("last watcher gone: remove");
        assert_eq!(
            (removal.path.as_str(), removal.kind),
            ("/a", WatchKind::Data)
        );
    }

    #[test]
    fn chroot_is_stripped_from_event_paths() {
        let mut w = Watches::default();
        let owner = owner();
        w.setting("/root/a", WatchKind::Data);
        let watcher = w
            .settled("/root/a", WatchKind::Data, true, 5, &owner)
            .unwrap();
        deliver(w.fire("/root/a", EventType::NodeDataChanged), "/root/a");
        let event = crate::rt::runtime::block_on(Box::pin(watcher.changed()), None)
            .ok()
            .unwrap();
        assert_eq!(event.path, "/a");
    }

    #[test]
    fn state_changes_wake_and_terminal_states_stick() {
        let cell = StateCell::new(KeeperState::SyncConnected);
        let mut watcher = StateWatcher::new(cell.clone());
        assert_eq!(watcher.state(), KeeperState::SyncConnected);
        assert!(cell.set(KeeperState::Disconnected));
        let got = crate::rt::runtime::block_on(Box::pin(watcher.changed()), None)
            .ok()
            .unwrap();
        assert_eq!(got, KeeperState::Disconnected);
        assert!(cell.set(KeeperState::Expired));
        assert!(!cell.set(KeeperState::SyncConnected));
        assert_eq!(cell.get(), KeeperState::Expired);
    }
}
