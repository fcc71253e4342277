//! `DistributedMutex`: ZooKeeper's lock recipe, node-compatible with Curator's
//! `InterProcessMutex`.

use crate::client::Client;
use crate::core::contend::Options;
use crate::core::wait::Attempt;
use crate::error::Result;

use super::catalogue::MUTEX;
use super::guard::LockGuard;
use super::queue::{acquisitions, queue_calls, LockQueue};

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
/// locks again while it holds a guard waits for that guard (use a timed call or a cancel
/// token where that can happen).
#[derive(Clone, Debug)]
pub struct DistributedMutex {
    queue: LockQueue,
}

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

    acquisitions!("the lock" => LockGuard, via acquire():
        lock, try_lock, lock_timeout, lock_with;
        async lock_async, try_lock_async, lock_with_async);

    async fn acquire(&self, attempt: Attempt, background_drop: bool) -> Result<Option<LockGuard>> {
        self.queue.acquire(&MUTEX, attempt, background_drop).await
    }

    queue_calls!(MUTEX);
}
