//! The catalogue of recipes: for each one, the names of its nodes (Apache Curator's), the kinds
//! its contenders queue as (names, blocker rule and metric label; see `core/kind.rs`), and how
//! its nodes lie under a lock path, by which inspection tells what is at a path
//! ([`Client::inspect`](crate::Client::inspect)).
//!
//! A recipe is its own file, with its front end, plus its entry here: its kinds and, if it has
//! a layout of its own, a line in [`CATALOGUE`] (and a [`LockKind`]). Nothing else names its
//! nodes: the core takes them from the kinds, inspection and the `zklock` tool from the
//! catalogue. (A new metric label is a `metrics::Recipe` too, which names the label values the
//! metrics documentation lists.)

use crate::core::kind::{nearest_lower_writer, previous_node, Kind, Rival, Role, READ};
use crate::core::permits::SemaphoreAt;
use crate::metrics::Recipe;
use crate::znode::layout::name_and_sequence;

/// The text before the sequence number in a mutex node's name (Curator: `LockInternals`
/// `lockName` of `InterProcessMutex`).
const LOCK_NAME: &str = "lock-";

/// Curator's `InterProcessReadWriteLock` reader and writer names (same length, the sequence
/// follows directly).
const READ_NAME: &str = "__READ__";
const WRITE_NAME: &str = "__WRIT__";

/// Curator's `LeaderLatch` participant name.
const LATCH_NAME: &str = "latch-";

/// The name of a semaphore's permit nodes, Curator's "lease" nodes (`InterProcessSemaphoreV2`).
const PERMIT_NAME: &str = "lease-";

/// [`DistributedMutex`](crate::DistributedMutex): ZooKeeper's lock recipe, Curator's
/// `InterProcessMutex`.
pub(crate) const MUTEX: Kind = Kind {
    names: &[(LOCK_NAME, Role::Exclusive)],
    ours: 0,
    blocker: previous_node,
    metric: Recipe::Mutex,
    recipe: "mutex",
    rival: |children| rival_of(LockKind::Mutex, children),
};

/// The names of a [`DistributedRwLock`](crate::DistributedRwLock)'s nodes, readers and writers
/// in one queue (Curator's `InterProcessReadWriteLock`), the readers' first ([`READ`]).
const RW_NAMES: &[(&str, Role)] = &[(READ_NAME, Role::Read), (WRITE_NAME, Role::Write)];

/// A reader of a [`DistributedRwLock`](crate::DistributedRwLock).
pub(crate) const READER: Kind = Kind {
    names: RW_NAMES,
    ours: READ,
    blocker: nearest_lower_writer,
    metric: Recipe::RwLockRead,
    recipe: "rwlock",
    rival: |children| rival_of(LockKind::RwLock, children),
};

/// A writer of a [`DistributedRwLock`](crate::DistributedRwLock): waits for the node just
/// before it, reader or writer.
pub(crate) const WRITER: Kind = Kind {
    names: RW_NAMES,
    ours: 1,
    blocker: previous_node,
    metric: Recipe::RwLockWrite,
    recipe: "rwlock",
    rival: |children| rival_of(LockKind::RwLock, children),
};

/// A participant of a [`LeaderElection`](crate::LeaderElection) (Curator's `LeaderLatch`): the
/// first one leads.
pub(crate) const LATCH: Kind = Kind {
    names: &[(LATCH_NAME, Role::Participant)],
    ours: 0,
    blocker: previous_node,
    metric: Recipe::Election,
    recipe: "election",
    rival: |children| rival_of(LockKind::Election, children),
};

/// How a [`Semaphore`](crate::Semaphore) lies under its path, as Curator's
/// `InterProcessSemaphoreV2`: permit takers queue on a mutex, the gate; the one at its head
/// creates a permit node (Curator: a lease) and waits until at most `permits` of them exist.
/// The values are Curator's node names.
pub(crate) struct SemaphoreLayout {
    /// The child of the semaphore's path holding the permit nodes.
    pub(crate) permit_parent: &'static str,
    /// The names of the permit nodes.
    pub(crate) permit_names: &'static [(&'static str, Role)],
    /// The child of the semaphore's path holding the gate, a mutex.
    pub(crate) gate: &'static str,
    pub(crate) gate_kind: &'static Kind,
    pub(crate) metric: Recipe,
}

pub(crate) const SEMAPHORE: SemaphoreLayout = SemaphoreLayout {
    permit_parent: "leases",
    permit_names: &[(PERMIT_NAME, Role::Lease)],
    gate: "locks",
    gate_kind: &MUTEX,
    metric: Recipe::Semaphore,
};

impl SemaphoreLayout {
    /// Where the nodes of the semaphore at `path` with `permits` permits are, for the core.
    pub(crate) fn at(&self, path: &str, permits: usize) -> SemaphoreAt {
        SemaphoreAt {
            path: path.to_owned(),
            gate: format!("{path}/{}", self.gate),
            gate_kind: self.gate_kind,
            permit_parent: format!("{path}/{}", self.permit_parent),
            permit_name: self.permit_names[0].0,
            permits,
            recipe: LockKind::Semaphore.name(),
            rival: |children| rival_of(LockKind::Semaphore, children),
        }
    }
}

/// A [`MultiLock`](crate::MultiLock) has no nodes of its own (its members are mutexes and
/// write locks, each with its kind): only the metric label of its acquisitions.
pub(crate) const MULTI_METRIC: Recipe = Recipe::Multi;

/// The recipe whose nodes are under a lock path, as [`Client::inspect`](crate::Client::inspect)
/// finds it.
///
/// A [`MultiLock`](crate::MultiLock) is not among them: its members are mutexes and write locks,
/// each found as such.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockKind {
    /// A [`DistributedMutex`](crate::DistributedMutex) (or Curator's `InterProcessMutex`).
    Mutex,
    /// A [`DistributedRwLock`](crate::DistributedRwLock) (`InterProcessReadWriteLock`).
    RwLock,
    /// A [`Semaphore`](crate::Semaphore) (`InterProcessSemaphoreV2`).
    Semaphore,
    /// A [`LeaderElection`](crate::LeaderElection) (`LeaderLatch`).
    Election,
}

impl LockKind {
    /// A short name: `mutex`, `rwlock`, `semaphore` or `election`.
    pub fn name(self) -> &'static str {
        match self {
            LockKind::Mutex => "mutex",
            LockKind::RwLock => "rwlock",
            LockKind::Semaphore => "semaphore",
            LockKind::Election => "election",
        }
    }

    /// Which recipe's nodes are among `children`, the names of a node's children, told by the
    /// names alone: the lock nodes of a mutex, a read/write lock or an election, or a
    /// semaphore's `leases` and `locks`. `None` if none of them is there.
    ///
    /// For tools that look for locks in a tree without reading every node; what is actually
    /// there is for [`Client::inspect`](crate::Client::inspect) to say. Never blocks.
    pub fn of_children<S: AsRef<str>>(children: &[S]) -> Option<LockKind> {
        CATALOGUE
            .iter()
            .find(|entry| entry.layout.is_among(children))
            .map(|entry| entry.kind)
    }
}

impl std::fmt::Display for LockKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A recipe other than `ours` whose nodes are among `children` (the names of a lock path's
/// children), by the catalogue's layouts: recipes on one path would each think they hold it,
/// so a contender that finds one refuses to queue. Any two contenders of different recipes
/// both create their node before they list the path, so the later of the two listings sees
/// the other's node: at least one of them refuses.
pub(crate) fn rival_of<S: AsRef<str>>(ours: LockKind, children: &[S]) -> Option<Rival> {
    CATALOGUE
        .iter()
        .filter(|entry| entry.kind != ours)
        .find(|entry| entry.layout.is_among(children))
        .map(|entry| Rival {
            recipe: entry.kind.name(),
            holders: match entry.layout {
                Layout::Queue(_) => &[],
                Layout::Semaphore(_) => SEMAPHORE_HOLDERS,
            },
        })
}

/// Where a semaphore's nodes are, in the order to read them (see [`Rival::holders`]).
const SEMAPHORE_HOLDERS: &[&str] = &[SEMAPHORE.gate, SEMAPHORE.permit_parent];

/// How a recipe's nodes lie under its lock path.
pub(crate) enum Layout {
    /// Contenders queue right under the lock path, each as one of these kinds (which share
    /// their names).
    Queue(&'static [&'static Kind]),
    /// A semaphore's permit nodes and gate.
    Semaphore(&'static SemaphoreLayout),
}

impl Layout {
    /// Whether `children` of a path show this layout, by their names.
    pub(crate) fn is_among<S: AsRef<str>>(&self, children: &[S]) -> bool {
        match self {
            Layout::Queue(kinds) => {
                let names = kinds.first().map(|k| k.lock_names()).unwrap_or_default();
                // Without copying a name: every acquisition scans its listing with this.
                children
                    .iter()
                    .any(|c| name_and_sequence(c.as_ref(), &names).is_some())
            }
            Layout::Semaphore(layout) => children
                .iter()
                .any(|c| [layout.permit_parent, layout.gate].contains(&c.as_ref())),
        }
    }
}

/// A recipe with a layout of its own.
pub(crate) struct Entry {
    pub(crate) kind: LockKind,
    pub(crate) layout: Layout,
}

/// Every recipe with a layout of its own, in the order a path is looked at: the first whose
/// nodes are there is what is there.
pub(crate) const CATALOGUE: &[Entry] = &[
    Entry {
        kind: LockKind::Mutex,
        layout: Layout::Queue(&[&MUTEX]),
    },
    Entry {
        kind: LockKind::RwLock,
        layout: Layout::Queue(&[&READER, &WRITER]),
    },
    Entry {
        kind: LockKind::Election,
        layout: Layout::Queue(&[&LATCH]),
    },
    Entry {
        kind: LockKind::Semaphore,
        layout: Layout::Semaphore(&SEMAPHORE),
    },
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::znode::layout::LockNode;

    /// Every set of names the catalogue has, one set per queue.
    fn name_sets() -> Vec<Vec<&'static str>> {
        let mut sets: Vec<Vec<&str>> = CATALOGUE
            .iter()
            .filter_map(|entry| match entry.layout {
                Layout::Queue(kinds) => Some(kinds[0].lock_names()),
                Layout::Semaphore(_) => None,
            })
            .collect();
        sets.push(SEMAPHORE.permit_names.iter().map(|(n, _)| *n).collect());
        sets.push(SEMAPHORE.gate_kind.lock_names());
        sets
    }

    #[test]
    fn every_name_set_suits_the_fast_parse() {
        // The layout's fast parse relies on it: no name a prefix of another in its set, none
        // starting with a digit or a minus sign.
        for set in name_sets() {
            for a in &set {
                assert!(
                    !a.starts_with(|c: char| c.is_ascii_digit() || c == '-'),
                    "{a}"
                );
                for b in &set {
                    assert!(a == b || !b.starts_with(a), "{a} is a prefix of {b}");
                }
            }
        }
    }

    #[test]
    fn the_kinds_of_a_queue_share_their_names_and_each_names_its_own() {
        for entry in CATALOGUE {
            if let Layout::Queue(kinds) = entry.layout {
                for (i, kind) in kinds.iter().enumerate() {
                    assert_eq!(kind.names, kinds[0].names, "{}", entry.kind);
                    assert!(kind.ours < kind.names.len(), "{}", entry.kind);
                    // Each kind of a queue is its own: no two carry the same name.
                    assert!(kinds[..i].iter().all(|k| k.ours != kind.ours));
                }
            }
        }
    }

    #[test]
    fn a_path_is_told_by_its_childrens_names() {
        let of = |names: &[&str]| LockKind::of_children(names);
        assert_eq!(of(&["_c_1-lock-0000000001"]), Some(LockKind::Mutex));
        assert_eq!(of(&["_c_1-__WRIT__0000000001"]), Some(LockKind::RwLock));
        assert_eq!(of(&["_c_1-latch-0000000001"]), Some(LockKind::Election));
        assert_eq!(of(&["leases"]), Some(LockKind::Semaphore));
        assert_eq!(of(&["locks"]), Some(LockKind::Semaphore));
        assert_eq!(of(&["prod", "build-0000000001"]), None);
        assert_eq!(of(&[]), None);
        let names: Vec<&str> = CATALOGUE.iter().map(|e| e.kind.name()).collect();
        assert_eq!(names, ["mutex", "rwlock", "election", "semaphore"]);
    }

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
    fn next_in_way_decides_handoff_without_relist() {
        let nodes = queue(&[1, 0, 0]); // W R R: both readers go when the writer leaves
        assert_eq!(READER.next_in_way(&nodes[..2], 0), None);
        let nodes = queue(&[1, 1, 0]); // W W R: the first writer leaving is not enough
        assert_eq!(READER.next_in_way(&nodes[..2], 1), Some(0));
        let nodes = queue(&[0, 0, 1]); // R R W: the writer needs both readers gone
        assert_eq!(WRITER.next_in_way(&nodes[..2], 1), Some(0));
        let nodes = queue(&[1, 0, 1, 0]); // W R W R: a reader waits for the nearest writer
        assert_eq!(READER.next_in_way(&nodes[..3], 2), Some(0));
    }
}
