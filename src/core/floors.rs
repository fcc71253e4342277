//! What a session has learnt of its lock queues: below which sequence number every node of a
//! queue is gone for good.
//!
//! Sequence numbers only grow, so a listing whose lowest lock node is numbered `n` proves that
//! no lock node below `n` will ever exist again in that directory; and a contender that holds
//! a lock with nothing ahead of it proves the same for its own number. A waiter woken by its
//! predecessor's deletion can then tell, from what others on the session learnt meanwhile,
//! that nothing else is ahead of it, and take the lock without listing the queue again. In a
//! long queue of one process that saves a listing of the whole queue from every handoff.
//!
//! A directory deleted and made again restarts its numbers: facts are kept per directory
//! incarnation (its creation zxid), never carried over to a new one. They are only hints:
//! forgetting one costs a listing, nothing else, so the table is bounded by forgetting.

use std::collections::HashMap;

use parking_lot::Mutex;

/// One queue: a lock path in one incarnation, and the node name that tells its lock nodes
/// apart (the first of its recipe's names).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct QueueId {
    pub(crate) path: String,
    /// The lock path's creation zxid.
    pub(crate) dir: i64,
    pub(crate) name: &'static str,
}

/// How many queues a session remembers; past this it starts over.
const MAX_QUEUES: usize = 4096;

/// Per queue, the lowest sequence number a node of it may still have.
#[derive(Default)]
pub(crate) struct Floors(Mutex<HashMap<QueueId, i64>>);

impl Floors {
    /// Every lock node of `queue` numbered below this is gone for good (`i64::MIN` when
    /// nothing is known).
    pub(crate) fn gone_below(&self, queue: &QueueId) -> i64 {
        self.0.lock().get(queue).copied().unwrap_or(i64::MIN)
    }

    /// Records that every lock node of `queue` numbered below `sequence` is gone.
    pub(crate) fn learn(&self, queue: &QueueId, sequence: i64) {
        let mut floors = self.0.lock();
        if let Some(floor) = floors.get_mut(queue) {
            *floor = (*floor).max(sequence);
            return;
        }
        if floors.len() >= MAX_QUEUES {
            floors.clear();
        }
        floors.insert(queue.clone(), sequence);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(dir: i64) -> QueueId {
        QueueId {
            path: "/l".into(),
            dir,
            name: "lock-",
        }
    }

    #[test]
    fn floors_only_rise_and_stay_with_their_incarnation() {
        let floors = Floors::default();
        assert_eq!(floors.gone_below(&queue(1)), i64::MIN);
        floors.learn(&queue(1), 7);
        floors.learn(&queue(1), 3); // an older listing read late
        assert_eq!(floors.gone_below(&queue(1)), 7);
        // The directory made again numbers from 0: nothing learnt of the old one applies.
        assert_eq!(floors.gone_below(&queue(2)), i64::MIN);
    }

    #[test]
    fn the_table_is_bounded() {
        let floors = Floors::default();
        for dir in 0..(MAX_QUEUES as i64 * 3) {
            floors.learn(&queue(dir), 1);
        }
        assert!(floors.0.lock().len() <= MAX_QUEUES);
    }
}
