//! Which lock paths a create may go out in a `multi` under: those this session has lately
//! seen exist (see `coalesce`).

use std::collections::HashSet;
use std::hash::{Hash, Hasher};

use parking_lot::Mutex;

use super::coalesce::parent;

/// Lock paths this session has lately seen exist, by hash (see `session::create`: a create
/// under one goes into a `multi`; a create under a missing one fails, and with it the whole
/// `multi`, which is then sent again request by request). A hint only: a stale entry or two
/// paths of one hash cost speed, never an outcome. Bounded: forgotten all at once when full
/// (each path is learnt again by its next create).
pub(crate) struct KnownParents {
    hashes: Mutex<HashSet<u64>>,
}

impl KnownParents {
    /// About 1.2 MB at most.
    const MAX: usize = 1 << 16;

    pub(crate) fn new() -> KnownParents {
        KnownParents {
            hashes: Mutex::new(HashSet::new()),
        }
    }

    fn hash(node: &str) -> u64 {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        parent(node).hash(&mut hasher);
        hasher.finish()
    }

    /// Whether the parent of `node` was lately seen to exist.
    pub(crate) fn knows(&self, node: &str) -> bool {
        self.hashes.lock().contains(&Self::hash(node))
    }

    /// The parent of `node` exists (a create below it succeeded), or not (it failed NoNode).
    pub(crate) fn learn(&self, node: &str, exists: bool) {
        let hash = Self::hash(node);
        let mut hashes = self.hashes.lock();
        if !exists {
            hashes.remove(&hash);
        } else if !hashes.contains(&hash) {
            if hashes.len() >= Self::MAX {
                hashes.clear();
            }
            hashes.insert(hash);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_paths_are_known_once_seen_and_forgotten_once_missing() {
        let known = KnownParents::new();
        assert!(!known.knows("/l/_c_1-lock-"));
        known.learn("/l/_c_1-lock-0000000001", true);
        assert!(known.knows("/l/_c_2-lock-"));
        assert!(!known.knows("/m/_c_2-lock-"));
        known.learn("/l/_c_3-lock-", false);
        assert!(!known.knows("/l/_c_2-lock-"));
    }
}
