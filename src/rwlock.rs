//! `DistributedRwLock`: ZooKeeper's shared-lock recipe, node-compatible with Curator's
//! `InterProcessReadWriteLock`.

use std::fmt;
use std::time::Duration;

use crate::client::Client;
use crate::error::Result;
use crate::guard::LockGuard;
use crate::inspect::{self, Contender};
use crate::path::{validate_lock_path, LockNode};
use crate::recipe::{self, deadline_after, previous_node, Kind, Options, Patience, Role};

/// Proof that a read lock is held; see [`LockGuard`].
pub type ReadGuard<'a> = LockGuard<'a>;

/// Proof that a write lock is held; see [`LockGuard`].
pub type WriteGuard<'a> = LockGuard<'a>;

// Curator's names: both the same length, the sequence follows directly.
const READ: usize = 0;
const NAMES: &[(&str, Role)] = &[("__READ__", Role::Read), ("__WRIT__", Role::Write)];

/// A reader waits only for the nearest writer queued before it.
fn nearest_lower_writer(nodes: &[LockNode], ours: usize) -> Option<usize> {
    nodes[..ours].iter().rposition(|n| n.role != READ)
}

const READER: Kind = Kind {
    names: NAMES,
    ours: READ,
    blocker: nearest_lower_writer,
};
pub(crate) const WRITER: Kind = Kind {
    names: NAMES,
    ours: 1,
    blocker: previous_node,
};

/// A read/write lock shared by every process that uses the same ZooKeeper path: any number of
/// readers hold it together, a writer holds it alone.
///
/// Readers and writers queue in one FIFO: a reader waits only for the nearest writer queued
/// before it, a writer for the node just before it. A waiting writer therefore blocks readers
/// that queue after it, so writers are never starved. Nodes are named like Curator's
/// `InterProcessReadWriteLock` (`_c_<uuid>-__READ__<seq>`, `_c_<uuid>-__WRIT__<seq>`), so zklock
/// and Curator processes share the same lock.
///
/// Not reentrant, and no upgrade or downgrade: a thread holding either side through the same
/// [`Client`] gets [`Error::WouldDeadlock`](crate::Error::WouldDeadlock) for another.
pub struct DistributedRwLock {
    client: Client,
    path: String,
    options: Options,
}

impl DistributedRwLock {
    /// A read/write lock on the ZooKeeper node `path`; nothing is sent until first use.
    ///
    /// # Errors
    /// [`Error::InvalidPath`](crate::Error::InvalidPath) for a path that is not absolute and
    /// canonical.
    pub fn new(client: &Client, path: &str) -> Result<DistributedRwLock> {
        validate_lock_path(path)?;
        Ok(DistributedRwLock {
            client: client.clone(),
            path: path.to_owned(),
            options: Options::default(),
        })
    }

    /// Makes the guards listen for revocation requests and notice at once if their node is
    /// deleted by someone else; see
    /// [`DistributedMutex::revocable`](crate::DistributedMutex::revocable).
    pub fn revocable(mut self) -> Self {
        self.options.revocable = true;
        self
    }

    /// Asks the holder of `contender`'s node to release; see
    /// [`DistributedMutex::request_revocation`](crate::DistributedMutex::request_revocation).
    ///
    /// # Errors
    /// As there.
    pub fn request_revocation(&self, contender: &Contender) -> Result<bool> {
        inspect::request_revocation(&self.client, &self.path, contender)
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Blocks until a read lock is held (no writer queued before us).
    ///
    /// # Errors
    /// As [`DistributedMutex::lock`](crate::DistributedMutex::lock).
    pub fn read(&self) -> Result<ReadGuard<'_>> {
        self.acquire(&READER, Patience::Forever)
            .and_then(recipe::waited)
    }

    /// Takes a read lock if no writer holds or waits for the lock; never waits. `Ok(None)` if
    /// busy, leaving nothing behind.
    ///
    /// # Errors
    /// As [`DistributedMutex::try_lock`](crate::DistributedMutex::try_lock).
    pub fn try_read(&self) -> Result<Option<ReadGuard<'_>>> {
        self.acquire(&READER, Patience::None)
    }

    /// Blocks until a read lock is held or `timeout` passes (`Ok(None)`, nothing left behind).
    ///
    /// # Errors
    /// As [`DistributedMutex::lock_timeout`](crate::DistributedMutex::lock_timeout).
    pub fn read_timeout(&self, timeout: Duration) -> Result<Option<ReadGuard<'_>>> {
        self.acquire(&READER, Patience::Until(deadline_after(timeout)))
    }

    /// Blocks until the write lock is held (alone).
    ///
    /// # Errors
    /// As [`DistributedMutex::lock`](crate::DistributedMutex::lock).
    pub fn write(&self) -> Result<WriteGuard<'_>> {
        self.acquire(&WRITER, Patience::Forever)
            .and_then(recipe::waited)
    }

    /// Takes the write lock if nobody holds or waits for the lock; never waits. `Ok(None)` if
    /// busy, leaving nothing behind.
    ///
    /// # Errors
    /// As [`DistributedMutex::try_lock`](crate::DistributedMutex::try_lock).
    pub fn try_write(&self) -> Result<Option<WriteGuard<'_>>> {
        self.acquire(&WRITER, Patience::None)
    }

    /// Blocks until the write lock is held or `timeout` passes (`Ok(None)`, nothing left
    /// behind).
    ///
    /// # Errors
    /// As [`DistributedMutex::lock_timeout`](crate::DistributedMutex::lock_timeout).
    pub fn write_timeout(&self, timeout: Duration) -> Result<Option<WriteGuard<'_>>> {
        self.acquire(&WRITER, Patience::Until(deadline_after(timeout)))
    }

    fn acquire(&self, kind: &Kind, patience: Patience) -> Result<Option<LockGuard<'_>>> {
        let token = self.client.enter(&self.path)?;
        let held = recipe::acquire(&self.client, &self.path, kind, patience, &self.options)?;
        Ok(held.map(|held| LockGuard::new(held, token)))
    }

    /// Readers and writers queued on this lock, in order, with their [`Role`]. The holders are
    /// the leading readers, or the leading writer.
    ///
    /// # Errors
    /// Connection and server errors.
    pub fn contenders(&self) -> Result<Vec<Contender>> {
        inspect::contenders(&self.client, &self.path, NAMES)
    }

    /// Deletes a stale contender's node if unchanged; see
    /// [`DistributedMutex::break_contender`](crate::DistributedMutex::break_contender).
    ///
    /// # Errors
    /// As there.
    pub fn break_contender(&self, contender: &Contender) -> Result<bool> {
        inspect::break_contender(&self.client, &self.path, contender)
    }
}

impl fmt::Debug for DistributedRwLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DistributedRwLock")
            .field("path", &self.path)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(roles: &[usize]) -> Vec<LockNode> {
        roles
            .iter()
            .enumerate()
            .map(|(i, &role)| LockNode {
                sequence: i as i64,
                name: format!("n{i}"),
                role,
            })
            .collect()
    }

    #[test]
    fn readers_wait_only_for_the_nearest_lower_writer() {
        let nodes = queue(&[0, 0, 1, 0, 1, 0]); // R R W R W R
        assert_eq!(nearest_lower_writer(&nodes, 0), None);
        assert_eq!(nearest_lower_writer(&nodes, 1), None);
        assert_eq!(nearest_lower_writer(&nodes, 3), Some(2));
        assert_eq!(nearest_lower_writer(&nodes, 5), Some(4));
    }

    #[test]
    fn sole_blocker_decides_handoff_without_relist() {
        let nodes = queue(&[1, 0, 0]); // W R R: both readers go when the writer leaves
        assert!(READER.sole_blocker_for_tests(&nodes, 2, 0));
        let nodes = queue(&[1, 1, 0]); // W W R: the first writer leaving is not enough
        assert!(!READER.sole_blocker_for_tests(&nodes, 2, 0));
        let nodes = queue(&[0, 0, 1]); // R R W: the writer needs both readers gone
        assert!(!WRITER.sole_blocker_for_tests(&nodes, 2, 1));
    }
}
