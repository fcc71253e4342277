//! What a recipe contributes to the waiting core: the names of its nodes, what each stands for,
//! and who a contender must wait for. The recipes' kinds themselves are in the catalogue
//! (`recipes/catalogue.rs`).

use crate::metrics::Recipe;
use crate::znode::layout::LockNode;

/// What a recipe contributes to the core: its node naming, and who a contender waits for.
pub(crate) struct Kind {
    /// The name parts before the sequence number of every node kind sharing the queue, e.g.
    /// `["__READ__", "__WRIT__"]` (Curator's `lockName`s), with what each means.
    pub(crate) names: &'static [(&'static str, Role)],
    /// Which of `names` our node carries.
    pub(crate) ours: usize,
    /// Given the lock nodes ahead of ours, in order, the index of the one we must wait for,
    /// or `None` if we hold the lock. A rule looks at no node after the one it picks (those
    /// are nodes it lets pass), which [`next_in_way`](Self::next_in_way) relies on.
    pub(crate) blocker: fn(&[LockNode]) -> Option<usize>,
    /// The `recipe` label of this kind's acquisitions in the metrics.
    pub(crate) metric: Recipe,
    /// The recipe's name, as errors give it (`mutex`, `rwlock`, `election`).
    pub(crate) recipe: &'static str,
    /// Given the children of the lock path, another recipe whose nodes are there: a contender
    /// refuses to queue beside them ([`Error::RecipeConflict`](crate::Error::RecipeConflict)).
    pub(crate) rival: fn(&[String]) -> Option<Rival>,
}

/// Another recipe at a lock path, as its children's names show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rival {
    /// Its name, as errors give it.
    pub(crate) recipe: &'static str,
    /// Children of the lock path that hold its nodes, in the order to read them: it is there
    /// only while one of them has children (a semaphore's gate, then its permit nodes: a
    /// permit node is taken before the gate is left, so a reader in that order cannot miss a
    /// taker moving from one to the other). Empty: its nodes are right under the lock path.
    pub(crate) holders: &'static [&'static str],
}

impl Kind {
    pub(crate) fn lock_names(&self) -> Vec<&'static str> {
        self.names.iter().map(|(name, _)| *name).collect()
    }

    /// The node we would wait for next once `blocker` is gone, as far as `ahead` shows:
    /// `None` if the blocker is the only node in our way. Sequence numbers only grow and our
    /// listing holds every node created before ours, so no new node can get in our way: once
    /// the blocker and this one (and so, by the rule, every node in our way before it) are
    /// gone, we hold the lock without listing again (we only check that our own node still
    /// exists).
    pub(crate) fn next_in_way(&self, ahead: &[LockNode], blocker: usize) -> Option<usize> {
        // Without the blocker, the rule would look at the nodes before it only.
        (self.blocker)(&ahead[..blocker])
    }
}

/// The exclusive lock's rule (ZooKeeper's lock recipe): wait for the node just before ours.
pub(crate) fn previous_node(ahead: &[LockNode]) -> Option<usize> {
    ahead.len().checked_sub(1)
}

/// Which of a read/write queue's names a reader's node carries (the first).
pub(crate) const READ: usize = 0;

/// The read/write lock's rule for a reader: wait only for the nearest writer queued before it
/// (readers ignore readers).
pub(crate) fn nearest_lower_writer(ahead: &[LockNode]) -> Option<usize> {
    ahead.iter().rposition(|n| n.name_index != READ)
}

/// What a node in a lock's queue stands for, as reported by inspection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Role {
    /// A contender for an exclusive lock ([`DistributedMutex`](crate::DistributedMutex)).
    Exclusive,
    /// A reader of a [`DistributedRwLock`](crate::DistributedRwLock).
    Read,
    /// A writer of a [`DistributedRwLock`](crate::DistributedRwLock).
    Write,
    /// A permit node of a [`Semaphore`](crate::Semaphore) (Curator's "lease", the name tools show).
    Lease,
    /// A participant of a [`LeaderElection`](crate::LeaderElection).
    Participant,
}
