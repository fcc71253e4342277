//! `DistributedMutex`: ZooKeeper's lock recipe, node-compatible with Curator's
//! `InterProcessMutex`.

use std::fmt;

use crate::client::Client;
use crate::error::Result;
use crate::guard::LockGuard;
use crate::inspect::Contender;
use crate::path::LOCK_NAME;
use crate::queue::{acquisitions, LockQueue};
use crate::recipe::{previous_node, Kind, Options, Role};
use crate::wait::Attempt;

/// A mutual-exclusion lock shared by every process that uses the same ZooKeeper path.
///
/// Contenders queue in the order they asked (FIFO); each waits only for the contender just ahead
/// of it, so a release wakes exactly one waiter. Lock nodes are named like Curator's
/// `InterProcessMutex` nodes (`_c_<uuid>-lock-<sequence>`), so zklock and Curator processes
/// exclude each other on the same path.
///
/// The mutex is `Send + Sync` and cheap to clone (clones are the same lock). Its guards own
/// what they need: they can outlive the mutex, move to other threads or tasks, and be
/// returned from functions. Locks are not reentrant: like `std::sync::Mutex`, a thread that
/// locks again while it holds a guard waits for that guard (use a timed or cancellable call
/// where that can happen).
#[derive(Clone)]
pub struct DistributedMutex {
    queue: LockQueue,
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
        Ok(DistributedMutex {
            queue: LockQueue::new(client, path, Options::default())?,
        })
    }

    /// Makes the guards of this mutex listen for revocation requests
    /// ([`request_revocation`](Self::request_revocation), or Curator's `Revoker`): see
    /// [`LockGuard::revocation_requested`]. The guard then also learns at once when its node is
    /// deleted by someone else (an operator breaking the lock): its state turns
    /// [`LockState::Lost`](crate::LockState::Lost). Costs one extra request per acquisition.
    pub fn revocable(mut self) -> Self {
        self.queue.options.revocable = true;
        self
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        &self.queue.path
    }

    acquisitions!("the lock" => LockGuard, via acquire:
        lock, try_lock, lock_timeout, lock_cancellable, lock_with);

    fn acquire(&self, attempt: Attempt) -> Result<Option<LockGuard>> {
        self.queue.acquire(&MUTEX, attempt)
    }

    /// The contenders queued on this lock, holder first, with the owner data each stored in
    /// its node (`host=.. pid=.. thread=..` for zklock nodes).
    ///
    /// Blocks for a few round trips.
    ///
    /// # Errors
    /// Connection and server errors; an absent lock path is an empty queue.
    pub fn contenders(&self) -> Result<Vec<Contender>> {
        self.queue.contenders(&MUTEX)
    }

    /// Deletes a contender's node, typically a stale holder's (a hung process that keeps its
    /// session alive), as seen by an earlier [`contenders`](Self::contenders) call. The node is
    /// deleted only if it is unchanged since then (same creation zxid and data version), so an
    /// operator never removes a node other than the one shown. Its owner, if alive, finds the
    /// lock lost. Blocks for one round trip (more if the reply is lost: the node is then read
    /// again rather than deleted blindly).
    ///
    /// Returns `Ok(true)` once the node is gone after our delete, `Ok(false)` if the server
    /// said it was gone already.
    ///
    /// # Errors
    /// [`Error::NodeChanged`](crate::Error::NodeChanged) if the node changed;
    /// [`Error::NoAuth`](crate::Error::NoAuth) if its ACL forbids us; connection errors.
    pub fn break_contender(&self, contender: &Contender) -> Result<bool> {
        self.queue.break_contender(contender)
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
        self.queue.request_revocation(contender)
    }
}

impl fmt::Debug for DistributedMutex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DistributedMutex")
            .field("path", &self.queue.path)
            .finish()
    }
}
