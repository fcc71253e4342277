//! Following the head of a queue from outside it (an election's leader, for
//! `LeaderElection::observe`): read the first node, and arm one watch that fires when the head
//! may have changed, without joining the queue and without polling.
//!
//! The watch is chosen so that it fires only for what can change the head: a data watch on the
//! head node (it fires on the node's deletion, which is how a head changes: later nodes have
//! higher sequence numbers and never overtake it); with no head, a child watch on the queue
//! (a new node); with no queue node at all, a child watch on the nearest ancestor that exists
//! (the queue's creation). Only reads are sent: an observer needs no write permission and
//! leaves nothing on the server but the one watch, which dropping [`HeadWatch`] removes.

use std::time::Instant;

use crate::core::session_view::Elapsed;
use crate::error::{Error, Result};
use crate::rt::runtime::sleep_until;
use crate::wire as zk;
use crate::znode::layout::{sorted_lock_nodes, LockNode};
use crate::znode::path::parent;

use super::{NodeData, Session};

/// The first node of a queue, and what it holds.
pub(crate) struct Head {
    pub(crate) node: LockNode,
    pub(crate) data: NodeData,
}

/// The watch armed by [`Session::head_async`]. Dropped before it fired, it removes its watch
/// from the server.
pub(crate) struct HeadWatch(zk::OneshotWatcher);

/// Why [`Session::head_changed_async`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Woke {
    /// The watch fired: the head may have changed.
    Fired,
    /// The connection came back after a loss: look again, in case an event was missed.
    Reconnected,
    /// The deadline passed first.
    Elapsed(Elapsed),
}

/// What ended one wait of [`Session::head_changed_async`].
enum Race {
    Fired(zk::EventType),
    State,
    Timer,
}

impl Session {
    /// The first node under `path` carrying one of `names` (queue order, as the waiting core
    /// orders it), or `None`, and a watch that fires when that may change (see the module
    /// docs). A few round trips; each read is retried across reconnects until `deadline`.
    pub(crate) async fn head_async(
        &self,
        path: &str,
        names: &[&str],
        deadline: Option<Instant>,
    ) -> Result<(Option<Head>, HeadWatch)> {
        loop {
            let children = match self.list_async(path, deadline).await {
                Ok(children) => children,
                Err(Error::NoNode { .. }) => match self.watch_creation(path, deadline).await? {
                    Some(watch) => return Ok((None, watch)),
                    None => continue, // Created meanwhile.
                },
                Err(err) => return Err(err),
            };
            let Some(first) = sorted_lock_nodes(children, names).into_iter().next() else {
                // Nobody queued: watch for the first to come.
                let (children, watcher) = match self.watch_children_async(path, deadline).await {
                    Ok(watched) => watched,
                    Err(Error::NoNode { .. }) => continue, // Swept meanwhile.
                    Err(err) => return Err(err),
                };
                if sorted_lock_nodes(children, names).is_empty() {
                    return Ok((None, HeadWatch(watcher)));
                }
                continue; // Someone queued meanwhile: watch the head instead.
            };
            let head_path = format!("{path}/{}", first.name);
            match self.read_and_watch_async(&head_path, deadline).await? {
                Some((data, watcher)) => {
                    let head = Head { node: first, data };
                    return Ok((Some(head), HeadWatch(watcher)));
                }
                None => continue, // Gone since the listing: the next one is the head.
            }
        }
    }

    /// A child watch on the nearest existing ancestor of the missing `path`, set once that
    /// ancestor's children show that the way down to `path` is still missing; `None` if it is
    /// there now (look again).
    async fn watch_creation(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> Result<Option<HeadWatch>> {
        let mut missing = path;
        loop {
            let above = parent(missing).unwrap_or("/");
            match self.watch_children_async(above, deadline).await {
                Ok((children, watcher)) => {
                    let name = &missing[missing.rfind('/').map_or(0, |i| i + 1)..];
                    if children.iter().any(|c| c == name) {
                        return Ok(None);
                    }
                    return Ok(Some(HeadWatch(watcher)));
                }
                Err(Error::NoNode { .. }) if above != "/" => missing = above,
                Err(err) => return Err(err),
            }
        }
    }

    /// Waits until `watch` fires, the connection returns after a loss, or `deadline` passes;
    /// an error once the session has ended (expired, closed): nothing more can be followed on
    /// it. The watch is re-armed by the transport on a reconnect; a reconnect still wakes
    /// the caller, so that it reads again whatever may have changed meanwhile.
    pub(crate) async fn head_changed_async(
        &self,
        watch: HeadWatch,
        deadline: Option<Instant>,
    ) -> Result<Woke> {
        let mut fired = Box::pin(watch.0.changed());
        let mut states = self.state_watcher();
        let mut timer = deadline.map(sleep_until);
        let mut lost = false;
        loop {
            // Checked before waiting: a terminal state never changes again.
            let now = states.state();
            if now.is_terminated() {
                return Err(self.ended_error());
            }
            match now {
                zk::KeeperState::SyncConnected if lost => return Ok(Woke::Reconnected),
                zk::KeeperState::SyncConnected => {}
                _ => lost = true,
            }
            let mut changed = Box::pin(states.changed());
            let woke = std::future::poll_fn(|cx| {
                use std::future::Future;
                use std::task::Poll;
                if let Poll::Ready(event) = fired.as_mut().poll(cx) {
                    return Poll::Ready(Race::Fired(event.event_type));
                }
                if changed.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Race::State);
                }
                let timed_out = timer
                    .as_mut()
                    .is_some_and(|t| std::pin::Pin::new(t).poll(cx).is_ready());
                if timed_out {
                    Poll::Ready(Race::Timer)
                } else {
                    Poll::Pending
                }
            })
            .await;
            drop(changed);
            match woke {
                Race::Timer => return Ok(Woke::Elapsed(Elapsed)),
                // The session's end fires every watch: say so rather than look again.
                Race::Fired(zk::EventType::Session)
                    if self.liveness() == super::Liveness::Ended =>
                {
                    return Err(self.ended_error())
                }
                Race::Fired(_) => return Ok(Woke::Fired),
                Race::State => {} // Judged at the top.
            }
        }
    }
}
