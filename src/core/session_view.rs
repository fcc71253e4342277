//! What the core sees of a session and of a node, in its own words: the session's
//! [`Liveness`], a node's [`NodeStat`], a lock path's [`Children`], how a lock node's
//! [`Create`] ended, what a watch reports when it [`Fired`], and that a deadline
//! [`Elapsed`]. The session layer (and the simulation) produce them; the core decides
//! on them without knowing the transport.

use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};
use crate::znode::layout::{sorted_lock_nodes, LockNode};

/// How the state of a session looks to a lock holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Liveness {
    Connected,
    /// No word from the server for a while (the transport gives a connection up after 2/5 of
    /// the session timeout of silence) or connection dropped: the session may live, or may be
    /// expiring.
    Disconnected,
    /// Terminal: expired, closed or refused.
    Ended,
}

/// The subset of a node's `Stat` that zklock uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NodeStat {
    /// Zxid of the create: ensemble-wide monotonic, hence a fencing token.
    pub(crate) czxid: i64,
    /// Session id owning an ephemeral node, 0 for persistent ones.
    pub(crate) ephemeral_owner: i64,
    /// Creation time, milliseconds since the epoch (server clock).
    pub(crate) ctime: i64,
    /// Data version: bumped by every setData (Curator's revocation request writes it).
    pub(crate) version: i32,
}

/// Outcome of a lock node's create (`Session::create_lock_node_async`).
pub(crate) enum Create {
    /// Created; the listing of the lock path taken right after, and the lock path's own stat
    /// from the same reply, when it could be read.
    Created {
        name: String,
        stat: NodeStat,
        children: Option<Vec<String>>,
        parent: Option<NodeStat>,
    },
    /// The connection dropped before the reply: the node may or may not exist.
    Unknown,
    /// The deadline passed first. The request is still pending; a background task deletes the
    /// node if it appears.
    Elapsed(Elapsed),
    /// The lock path does not exist (yet, or any more).
    ParentMissing,
}

/// The deadline passed before the wait ended: the one value every layer reports it with, from
/// a session's create ([`Create::Elapsed`]) and the waits on a watch (`contend::Woken`,
/// `session::follow::Woke`) or in a local queue (`cohort::wait_locally`) up to the
/// acquisition's end, where [`outcome`](Self::outcome) alone says what it means to the caller.
/// (A request that ran into the deadline comes back from the session as
/// [`Error::ConnectionLoss`], the public error it has always been:
/// `contend::past_deadline_is_busy` and the waits for a watch read it as `Elapsed`.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Elapsed;

impl Elapsed {
    /// What an acquisition whose deadline passed returns, on a session that is `liveness`:
    /// busy (`Ok(None)`) on a live connection; during an outage, that the lock could not be
    /// decided ([`Error::ConnectionLoss`]), not that it is busy.
    pub(crate) fn outcome<T>(self, liveness: Liveness) -> Result<Option<T>> {
        if liveness == Liveness::Connected {
            Ok(None)
        } else {
            Err(Error::connection_loss())
        }
    }
}

/// What a watch on a node reports when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fired {
    /// The node was deleted.
    Deleted,
    /// The node (or its children) changed otherwise: look again.
    Changed,
    /// The watch will never fire: the session ended.
    SessionEnded,
}

/// A listing of a lock path, shared by the waiters that read it.
pub(crate) type Listed = Arc<Children>;

/// A lock path's children, with the lock path's own stat from the same reply.
pub(crate) struct Children {
    pub(crate) names: Vec<String>,
    pub(crate) stat: NodeStat,
    /// The lock nodes in queue order, sorted once for every waiter that reads this listing
    /// (each then finds its place in it), for the lock names they were sorted by.
    sorted: OnceLock<(Vec<&'static str>, Arc<Vec<LockNode>>)>,
}

impl Children {
    pub(crate) fn new(names: Vec<String>, stat: NodeStat) -> Listed {
        Arc::new(Children {
            names,
            stat,
            sorted: OnceLock::new(),
        })
    }

    /// The lock nodes carrying one of `lock_names`, in queue order.
    pub(crate) fn sorted(&self, lock_names: &[&'static str]) -> Arc<Vec<LockNode>> {
        if let Some((names, sorted)) = self.sorted.get() {
            if names.as_slice() == lock_names {
                return sorted.clone();
            }
        }
        let sorted = Arc::new(sorted_lock_nodes(self.names.clone(), lock_names));
        let _ = self.sorted.set((lock_names.to_vec(), sorted.clone()));
        sorted
    }
}
