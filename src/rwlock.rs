//! `DistributedRwLock`: ZooKeeper's shared-lock recipe, node-compatible with Curator's
//! `InterProcessReadWriteLock`.

use crate::client::Client;
use crate::error::Result;
use crate::guard::LockGuard;
use crate::layout::{LockNode, READ_NAME, WRITE_NAME};
use crate::queue::{acquisitions, queue_calls, LockQueue};
use crate::recipe::{previous_node, Kind, Options, Role};
use crate::wait::Attempt;

/// Proof that a read lock is held; see [`LockGuard`].
pub type ReadGuard = LockGuard;

/// Proof that a write lock is held; see [`LockGuard`].
pub type WriteGuard = LockGuard;

const READ: usize = 0;
const NAMES: &[(&str, Role)] = &[(READ_NAME, Role::Read), (WRITE_NAME, Role::Write)];

/// A reader waits only for the nearest writer queued before it.
fn nearest_lower_writer(ahead: &[LockNode]) -> Option<usize> {
    ahead.iter().rposition(|n| n.name_index != READ)
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
/// Not reentrant, and no upgrade or downgrade: like `std::sync::RwLock`, a thread that asks for
/// either side while holding the other (or a write while holding a read) waits for itself;
/// use a timed or cancellable call where that can happen. Cheap to clone.
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

    acquisitions!("a read lock (no writer queued before us)" => ReadGuard, via acquire_read:
        read, try_read, read_timeout, read_cancellable, read_with;
        async read_async, try_read_async, read_timeout_async, read_cancellable_async,
        read_with_async);

    acquisitions!("the write lock (exclusive)" => WriteGuard, via acquire_write:
        write, try_write, write_timeout, write_cancellable, write_with;
        async write_async, try_write_async, write_timeout_async, write_cancellable_async,
        write_with_async);

    async fn acquire_read(&self, attempt: Attempt, background: bool) -> Result<Option<ReadGuard>> {
        self.queue.acquire(&READER, attempt, background).await
    }

    async fn acquire_write(
        &self,
        attempt: Attempt,
        background: bool,
    ) -> Result<Option<WriteGuard>> {
        self.queue.acquire(&WRITER, attempt, background).await
    }

    queue_calls!(READER, WRITER);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(roles: &[usize]) -> Vec<LockNode> {
        roles
            .iter()
            .enumerate()
            .map(|(i, &name_index)| LockNode {
                sequence: i as i64,
                name: format!("n{i}"),
                name_index,
            })
            .collect()
    }

    /// Who holds, by each node's own rule (what `contenders()` reports as `holds`).
    fn holders(roles: &[usize]) -> Vec<bool> {
        let nodes = queue(roles);
        (0..nodes.len())
            .map(|at| {
                let kind = if nodes[at].name_index == READ {
                    &READER
                } else {
                    &WRITER
                };
                (kind.blocker)(&nodes[..at]).is_none()
            })
            .collect::<Vec<_>>()
    }

    #[test]
    fn holders_are_the_leading_readers_or_the_leading_writer() {
        assert_eq!(holders(&[0, 0, 1, 0]), [true, true, false, false]); // R R W R
        assert_eq!(holders(&[1, 0, 0]), [true, false, false]); // W R R
        assert_eq!(holders(&[1, 1]), [true, false]); // W W
        assert_eq!(holders(&[0]), [true]);
    }

    #[test]
    fn readers_wait_only_for_the_nearest_lower_writer() {
        let nodes = queue(&[0, 0, 1, 0, 1, 0]); // R R W R W R
        assert_eq!(nearest_lower_writer(&nodes[..0]), None);
        assert_eq!(nearest_lower_writer(&nodes[..1]), None);
        assert_eq!(nearest_lower_writer(&nodes[..3]), Some(2));
        assert_eq!(nearest_lower_writer(&nodes[..5]), Some(4));
    }

    #[test]
    fn sole_blocker_decides_handoff_without_relist() {
        let nodes = queue(&[1, 0, 0]); // W R R: both readers go when the writer leaves
        assert!(READER.sole_blocker(&nodes[..2], 0));
        let nodes = queue(&[1, 1, 0]); // W W R: the first writer leaving is not enough
        assert!(!READER.sole_blocker(&nodes[..2], 1));
        let nodes = queue(&[0, 0, 1]); // R R W: the writer needs both readers gone
        assert!(!WRITER.sole_blocker(&nodes[..2], 1));
    }
}
