//! `DistributedMutex`: ZooKeeper's lock recipe, node-compatible with Curator's
//! `InterProcessMutex`.

use std::fmt;
use std::time::Duration;

use crate::client::{Client, HoldToken};
use crate::error::Result;
use crate::path::{sorted_lock_nodes, validate_lock_path, LockNode, LOCK_NAME};
use crate::recipe::{self, deadline_after, Held, Kind, LockState, Patience};

/// A mutual-exclusion lock shared by every process that uses the same ZooKeeper path.
///
/// Contenders queue in the order they asked (FIFO); each waits only for the contender just ahead
/// of it, so a release wakes exactly one waiter. Lock nodes are named like Curator's
/// `InterProcessMutex` nodes (`_c_<uuid>-lock-<sequence>`), so zklock and Curator processes
/// exclude each other on the same path.
///
/// The mutex is `Send + Sync`: share one between threads with `Arc` or scoped threads. Locks are
/// not reentrant: a thread that asks again for a lock it holds through the same [`Client`] gets
/// [`Error::WouldDeadlock`](crate::Error::WouldDeadlock).
pub struct DistributedMutex {
    client: Client,
    path: String,
}

const MUTEX: Kind = Kind {
    lock_name: LOCK_NAME,
    blocker: |_, ours| ours.checked_sub(1),
};

impl DistributedMutex {
    /// A mutex on the ZooKeeper node `path` (relative to the client's chroot). Nothing is sent
    /// to the server until the first acquisition, which creates the path (and its missing
    /// parents) as container nodes if needed.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) if `path` is not an absolute, canonical
    /// ZooKeeper path other than `/`.
    pub fn new(client: &Client, path: &str) -> Result<DistributedMutex> {
        validate_lock_path(path)?;
        Ok(DistributedMutex {
            client: client.clone(),
            path: path.to_owned(),
        })
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Blocks until the lock is held.
    ///
    /// Waits as long as it takes for the lock itself; a lost connection is waited out too, but
    /// the call returns an error once the session expires, so it cannot hang past an outage
    /// longer than the session timeout.
    ///
    /// # Errors
    /// [`Error::WouldDeadlock`](crate::Error::WouldDeadlock) if this thread already holds the
    /// lock through the same client; [`Error::SessionExpired`](crate::Error::SessionExpired);
    /// [`Error::EphemeralParent`](crate::Error::EphemeralParent),
    /// [`Error::NoAuth`](crate::Error::NoAuth) and other server errors. No node is left behind.
    pub fn lock(&self) -> Result<LockGuard<'_>> {
        self.acquire(Patience::Forever)
            .map(|guard| guard.expect("waiting forever only returns holding"))
    }

    /// Takes the lock if no one else holds it or waits for it; never waits for other
    /// contenders. Still one or two round trips to the server; if the connection is down it
    /// waits for it at most the session timeout.
    ///
    /// Returns `Ok(None)` when the lock is busy; no node is left behind.
    ///
    /// # Errors
    /// As [`lock`](Self::lock), plus [`Error::ConnectionLoss`](crate::Error::ConnectionLoss)
    /// if the connection did not return in time.
    pub fn try_lock(&self) -> Result<Option<LockGuard<'_>>> {
        self.acquire(Patience::None)
    }

    /// Blocks until the lock is held or `timeout` (measured on the monotonic clock from the
    /// call) has passed. Returns `Ok(None)` on timeout; our queued node is deleted first, so
    /// nothing is left behind.
    ///
    /// The timeout is honoured during outages too: if the connection is down when it runs
    /// out, the call returns [`Error::ConnectionLoss`](crate::Error::ConnectionLoss) instead
    /// of `None`, and a node created meanwhile is deleted in the background once the
    /// connection returns.
    ///
    /// # Errors
    /// As [`try_lock`](Self::try_lock).
    pub fn lock_timeout(&self, timeout: Duration) -> Result<Option<LockGuard<'_>>> {
        self.acquire(Patience::Until(deadline_after(timeout)))
    }

    fn acquire(&self, patience: Patience) -> Result<Option<LockGuard<'_>>> {
        let token = self.client.enter(&self.path)?;
        let held = recipe::acquire(&self.client, &self.path, &MUTEX, patience)?;
        Ok(held.map(|held| LockGuard {
            mutex: self,
            held,
            _token: token,
        }))
    }

    /// The contenders queued on this lock, holder first, with the owner data each stored in
    /// its node (`host=.. pid=.. thread=..` for zklock nodes).
    ///
    /// Blocks for a few round trips.
    ///
    /// # Errors
    /// Connection and server errors; an absent lock path is an empty queue.
    pub fn contenders(&self) -> Result<Vec<Contender>> {
        let deadline = Some(self.client.call_deadline());
        let session = self.client.session(deadline)?;
        let children = match session.list(&self.path, deadline) {
            Ok(children) => children,
            Err(crate::Error::ZooKeeper { code: -101, .. }) => return Ok(Vec::new()),
            Err(err) => return Err(err),
        };
        let mut contenders = Vec::new();
        for LockNode { sequence, name } in sorted_lock_nodes(children, LOCK_NAME) {
            // A node may go away between the listing and the read: it is no contender then.
            if let Some((data, stat)) =
                session.get_data(&format!("{}/{name}", self.path), deadline)?
            {
                contenders.push(Contender {
                    node_name: name,
                    sequence,
                    session_id: stat.ephemeral_owner,
                    owner: String::from_utf8_lossy(&data).into_owned(),
                    created_ms: stat.ctime,
                    fencing_token: stat.czxid,
                    version: stat.version,
                });
            }
        }
        Ok(contenders)
    }

    /// Deletes a contender's node, typically a stale holder's (a hung process that keeps its
    /// session alive), as seen by an earlier [`contenders`](Self::contenders) call. The node is
    /// deleted only if it is unchanged since then, so an operator never removes a node other
    /// than the one shown. Its owner, if alive, finds the lock lost. Blocks for one round trip.
    ///
    /// Returns `Ok(false)` if the node is already gone.
    ///
    /// # Errors
    /// [`Error::ZooKeeper`](crate::Error::ZooKeeper) with code -103 (BadVersion) if the node
    /// changed; [`Error::NoAuth`](crate::Error::NoAuth) if its ACL forbids us; connection
    /// errors.
    pub fn break_contender(&self, contender: &Contender) -> Result<bool> {
        if contender.node_name.is_empty() || contender.node_name.contains('/') {
            return Err(crate::Error::InvalidPath {
                path: contender.node_name.clone(),
                reason: "not a node name",
            });
        }
        let deadline = Some(self.client.call_deadline());
        let session = self.client.session(deadline)?;
        let path = format!("{}/{}", self.path, contender.node_name);
        let deleted = session.delete_if_unchanged(&path, contender.version, deadline)?;
        if deleted {
            log::warn!(
                "broke lock node {path} (owner {:?}, session {:#x})",
                contender.owner,
                contender.session_id
            );
        }
        Ok(deleted)
    }
}

impl fmt::Debug for DistributedMutex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DistributedMutex")
            .field("path", &self.path)
            .finish()
    }
}

/// One contender of a lock, as seen by [`DistributedMutex::contenders`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Contender {
    /// The node's name, the last segment of its path.
    pub node_name: String,
    /// The sequence number ZooKeeper appended; the queue order.
    pub sequence: i64,
    /// The session owning the (ephemeral) node.
    pub session_id: i64,
    /// The node's data, as text: who created it.
    pub owner: String,
    /// When the node was created, in milliseconds since the Unix epoch (server clock).
    pub created_ms: i64,
    /// The node's creation zxid, which would be the holder's fencing token.
    pub fencing_token: i64,
    /// The node's data version (changes when someone writes its data, e.g. a revocation
    /// request); [`DistributedMutex::break_contender`] refuses to delete a changed node.
    pub version: i32,
}

/// Proof that a [`DistributedMutex`] is held; releases the lock when dropped.
///
/// Dropping the guard deletes the lock node, waiting at most for one reply from the server; if
/// the connection is down, the delete is retried in the background until the node is gone or
/// the session has ended (which removes the node too). Use [`unlock`](Self::unlock) to learn
/// whether the release went through.
///
/// The guard may be moved to and released from another thread.
#[must_use = "the lock is released as soon as the guard is dropped"]
#[clippy::has_significant_drop]
pub struct LockGuard<'a> {
    mutex: &'a DistributedMutex,
    held: Held,
    _token: HoldToken,
}

impl LockGuard<'_> {
    /// The full path of our lock node (relative to the client's chroot).
    pub fn node_path(&self) -> &str {
        self.held.node_path()
    }

    /// A number that strictly increases from one holder of this lock to the next (the lock
    /// node's creation zxid, which is monotonic across the whole ensemble). Pass it to the
    /// protected resource so it can refuse a stale holder's late writes.
    pub fn fencing_token(&self) -> i64 {
        self.held.fencing_token()
    }

    /// The id of the session that holds the lock.
    pub fn session_id(&self) -> i64 {
        self.held.session_id()
    }

    /// Whether the lock is still ours as far as this process can tell; never blocks.
    ///
    /// Turns [`LockState::Suspended`] as soon as the client has not heard from the server for
    /// 2/5 of the session timeout (or the connection drops), which is before the server may
    /// expire the session and hand the lock to someone else.
    pub fn state(&self) -> LockState {
        self.held.state()
    }

    /// Blocks until the lock is no longer [`LockState::Held`] and returns the new state:
    /// [`LockState::Suspended`] (connection in doubt: pause work on the resource) or
    /// [`LockState::Lost`]. Lets a holder learn of trouble without polling, for example from a
    /// watchdog thread that stops the work the lock protects.
    pub fn wait_lost(&self) -> LockState {
        self.held.wait_not_held(None).unwrap_or(LockState::Lost)
    }

    /// As [`wait_lost`](Self::wait_lost), but gives up after `timeout` (monotonic clock) and
    /// returns `None` if the lock was still held all along.
    pub fn wait_lost_timeout(&self, timeout: Duration) -> Option<LockState> {
        self.held.wait_not_held(Some(deadline_after(timeout)))
    }

    /// `true` while [`state`](Self::state) is [`LockState::Held`]. Never blocks.
    pub fn is_held(&self) -> bool {
        self.state() == LockState::Held
    }

    /// The mutex this guard holds.
    pub fn mutex(&self) -> &DistributedMutex {
        self.mutex
    }

    /// Releases the lock and reports the outcome. Blocks for at most one reply from the server
    /// (bounded by the session timeout).
    ///
    /// # Errors
    /// [`Error::LockLost`](crate::Error::LockLost) if the lock had been lost (session expired,
    /// node deleted by someone else); [`Error::ConnectionLoss`](crate::Error::ConnectionLoss)
    /// if the delete could not be confirmed: it is then retried in the background until the
    /// node is gone or the session has ended.
    pub fn unlock(mut self) -> Result<()> {
        self.held.release()
    }
}

impl fmt::Debug for LockGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockGuard")
            .field("node_path", &self.node_path())
            .field("fencing_token", &self.fencing_token())
            .field("state", &self.state())
            .finish()
    }
}
