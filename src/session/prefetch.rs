//! The request a waiter has the runtime send the moment the node it waits for is deleted, and
//! where its reply lands (see [`Session::watch_node`](super::Session::watch_node)).

use std::sync::Arc;

use parking_lot::Mutex;

use crate::wire as zk;
use crate::znode::layout::{nodes_ahead, LockNode};

use super::watch::{FollowUp, Leftover};
use super::NodeStat;

/// The request a waiter sends as soon as the node it waits for is deleted (see
/// [`Session::watch_node`]): sent from the runtime the moment the deletion is notified, on the
/// same session, so its reply reflects the queue as it is after the deletion.
#[derive(Debug, Clone)]
pub(crate) enum Then {
    /// List the lock path and keep the lock nodes ahead of `ours` (see
    /// [`nodes_ahead`]): the waiter is woken with the short answer, and the listing is freed
    /// after it is woken.
    Queue {
        path: String,
        ours: LockNode,
        lock_names: Vec<&'static str>,
        /// Sift the listing on the runtime thread. Not for readers: all readers waiting on
        /// one writer wake together, and each sifts its own listing on its own thread rather
        /// than all of them one after another on the runtime thread.
        on_runtime: bool,
    },
    /// Read our own node's stat.
    ReadOwn(String),
}

/// The reply to a [`Then`] request, once the deletion it followed was notified.
#[derive(Debug)]
pub(crate) enum Prefetched {
    /// The nodes ahead of ours, in order; `None` if our node is not in the queue.
    Ahead(Option<Vec<LockNode>>),
    /// The listing, for the waiter to sift.
    Listing(Vec<String>),
    /// Our node's stat, `None` if it is gone.
    Own(Option<NodeStat>),
}

/// Where a [`Then`] request's reply lands; empty if there was none (or it failed: the waiter
/// then sends the request itself).
#[derive(Default, Clone)]
pub(crate) struct Prefetch(Arc<Mutex<Option<Prefetched>>>);

impl Prefetch {
    pub(crate) fn take(&self) -> Option<Prefetched> {
        self.0.lock().take()
    }
}

impl Then {
    pub(super) fn follow_up(self, zk: zk::Client, slot: Prefetch) -> FollowUp {
        Box::new(move || {
            Box::pin(async move {
                let mut leftover: Leftover = None;
                let reply = match self {
                    Then::Queue {
                        path,
                        ours,
                        lock_names,
                        on_runtime,
                    } => zk.list_children(&path).await.map(|children| {
                        if !on_runtime {
                            return Prefetched::Listing(children);
                        }
                        let ahead = nodes_ahead(&children, &ours, &lock_names);
                        leftover = Some(Box::new(children));
                        Prefetched::Ahead(ahead)
                    }),
                    Then::ReadOwn(path) => zk
                        .check_stat(&path)
                        .await
                        .map(|stat| Prefetched::Own(stat.as_ref().map(NodeStat::from))),
                };
                if let Ok(reply) = reply {
                    *slot.0.lock() = Some(reply);
                }
                leftover
            })
        })
    }
}
