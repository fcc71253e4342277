//! `DistributedMutex`: ZooKeeper's lock recipe, node-compatible with Curator's
//! `InterProcessMutex`.

use std::fmt;
use std::time::Duration;

use crate::client::Client;
use crate::error::Result;
use crate::guard::LockGuard;
use crate::inspect::{self, Contender};
use crate::path::{validate_lock_path, LOCK_NAME};
use crate::recipe::{self, deadline_after, previous_node, Kind, Options, Patience, Role};

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
    revocable: bool,
}

pub(crate) const MUTEX: Kind = Kind {
    names: &[(LOCK_NAME, Role::Exclusive)],
    ours: 0,
    blocker: previous_node,
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
            revocable: false,
        })
    }

    /// Makes the guards of this mutex listen for revocation requests
    /// ([`request_revocation`](Self::request_revocation), or Curator's `Revoker`): see
    /// [`LockGuard::revocation_requested`]. The guard then also learns at once when its node is
    /// deleted by someone else (an operator breaking the lock): its state turns
    /// [`LockState::Lost`](crate::LockState::Lost). Costs one extra request per acquisition.
    pub fn revocable(mut self) -> Self {
        self.revocable = true;
        self
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
        self.acquire(Patience::Forever).and_then(recipe::waited)
    }

    /// Takes the lock if no one else holds it or waits for it; never waits for other
    /// contenders. Still one round trip to the server; if the connection is down it waits for
    /// it at most the session timeout.
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
    /// call) has passed. Returns `Ok(None)` on timeout; our queued node is deleted first (the
    /// call may overrun by up to one second waiting for that delete), so nothing is left
    /// behind.
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

    pub(crate) fn acquire(&self, patience: Patience) -> Result<Option<LockGuard<'_>>> {
        let token = self.client.enter(&self.path)?;
        let held = recipe::acquire(
            &self.client,
            &self.path,
            &MUTEX,
            patience,
            &Options {
                revocable: self.revocable,
                data: None,
            },
        )?;
        Ok(held.map(|held| LockGuard::new(held, token)))
    }

    /// The contenders queued on this lock, holder first, with the owner data each stored in
    /// its node (`host=.. pid=.. thread=..` for zklock nodes).
    ///
    /// Blocks for a few round trips.
    ///
    /// # Errors
    /// Connection and server errors; an absent lock path is an empty queue.
    pub fn contenders(&self) -> Result<Vec<Contender>> {
        inspect::contenders(&self.client, &self.path, MUTEX.names)
    }

    /// Deletes a contender's node, typically a stale holder's (a hung process that keeps its
    /// session alive), as seen by an earlier [`contenders`](Self::contenders) call. The node is
    /// deleted only if it is unchanged since then, so an operator never removes a node other
    /// than the one shown. Its owner, if alive, finds the lock lost. Blocks for one round trip.
    ///
    /// Returns `Ok(false)` if the node is already gone.
    ///
    /// # Errors
    /// [`Error::NodeChanged`](crate::Error::NodeChanged) if the node
    /// changed; [`Error::NoAuth`](crate::Error::NoAuth) if its ACL forbids us; connection
    /// errors.
    pub fn break_contender(&self, contender: &Contender) -> Result<bool> {
        inspect::break_contender(&self.client, &self.path, contender)
    }

    /// Asks the holder of `contender`'s node to release the lock, by writing Curator's
    /// revocation marker (`__REVOKE__`) into the node. A zklock holder of a
    /// [`revocable`](Self::revocable) mutex sees it through
    /// [`LockGuard::revocation_requested`]; a Curator holder through its `RevocationListener`.
    /// The holder decides; nothing is released by force. Blocks for one round trip.
    ///
    /// Returns `Ok(false)` if the node is gone.
    ///
    /// # Errors
    /// Connection and server errors.
    pub fn request_revocation(&self, contender: &Contender) -> Result<bool> {
        inspect::request_revocation(&self.client, &self.path, contender)
    }
}

impl fmt::Debug for DistributedMutex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DistributedMutex")
            .field("path", &self.path)
            .finish()
    }
}
