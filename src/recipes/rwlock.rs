//! `DistributedRwLock`: ZooKeeper's shared-lock recipe, node-compatible with Curator's
//! `InterProcessReadWriteLock`.

use crate::client::Client;
use crate::core::contend::Options;
use crate::core::wait::Budget;
use crate::error::Result;

use super::catalogue::{READER, WRITER};
use super::guard::LockGuard;
use super::queue::{acquisitions, queue_calls, LockQueue};

/// Proof that a read lock is held; see [`LockGuard`].
pub type ReadGuard = LockGuard;

/// Proof that a write lock is held; see [`LockGuard`].
pub type WriteGuard = LockGuard;

/// A read/write lock shared by every process that uses the same ZooKeeper path: any number of
/// readers hold it together, a writer holds it alone.
///
/// Readers and writers queue in one FIFO: a reader waits only for the nearest writer queued
/// before it, a writer for the node just before it. A waiting writer therefore blocks readers
/// that queue after it, so writers are never starved. Nodes are named like Curator's
/// `InterProcessReadWriteLock` (`_c_<uuid>-__READ__<seq>`, `_c_<uuid>-__WRIT__<seq>`), so zklock
/// and Curator processes share the same lock.
///
/// Not reentrant, and no upgrade or downgrade: like `std::sync::RwLock`, a thread that asks for
/// either side while holding the other (or a write while holding a read) waits for itself;
/// use a timed call or a cancel token where that can happen. Cheap to clone.
#[derive(Clone, Debug)]
pub struct DistributedRwLock {
    queue: LockQueue,
}

impl DistributedRwLock {
    /// A read/write lock on the ZooKeeper node `path`; nothing is sent until first use.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for a path that is not absolute and
    /// canonical.
    pub fn new(client: &Client, path: &str) -> Result<DistributedRwLock> {
        Ok(DistributedRwLock {
            queue: LockQueue::new(client, path, Options::default())?,
        })
    }

    /// Local handoff for the write lock: the writers of this lock's [`Client`] queue in this
    /// process behind one node and pass it on without the server, as
    /// [`DistributedMutex::local_handoff`](crate::DistributedMutex::local_handoff) describes
    /// (with the same `batch` bound once another contender, a reader included, waits).
    /// Readers are not affected: they share the lock already, each with a node of its own.
    /// Off by default.
    ///
    /// ```no_run
    /// # fn main() -> zklock::Result<()> {
    /// # let client = zklock::Client::connect("127.0.0.1:2181")?;
    /// let lock = zklock::DistributedRwLock::new(&client, "/locks/table")?.local_handoff(128);
    /// let writer = lock.write()?;
    /// # drop(writer);
    /// # Ok(()) }
    /// ```
    pub fn local_handoff(mut self, batch: u32) -> Self {
        self.queue.options.local_handoff = Some(batch);
        self
    }

    acquisitions!("a read lock (no writer queued before us)" => ReadGuard, via acquire_read():
        read, try_read, read_timeout, read_with;
        async read_async, try_read_async, read_with_async);

    acquisitions!("the write lock (exclusive)" => WriteGuard, via acquire_write():
        write, try_write, write_timeout, write_with;
        async write_async, try_write_async, write_with_async);

    async fn acquire_read(&self, attempt: Budget, background: bool) -> Result<Option<ReadGuard>> {
        self.queue.acquire(&READER, attempt, background).await
    }

    async fn acquire_write(&self, attempt: Budget, background: bool) -> Result<Option<WriteGuard>> {
        self.queue.acquire(&WRITER, attempt, background).await
    }

    queue_calls!(READER, WRITER);
}
