//! Which requests of the outbox go out now, and which deletes go out together as one `multi`.
//!
//! ZooKeeper applies a `multi` as one transaction: the per-request costs of a write at the
//! server (its queues, the commit processor, the log append) are paid once for all of its
//! operations. So the deletes of our own nodes that wait while the connection is busy go out
//! as one `multi`. Nothing waits on purpose on an idle connection, and the order of writes is
//! the order of the calls, whatever happens to a `multi`:
//! - a `multi` takes *consecutive* coalescible deletes only: the first other write ends it;
//! - a run of deletes waits only for the requests that were unanswered on the wire when its
//!   first delete was queued (it would have waited behind them at the server anyway), or
//!   until it is full;
//! - no write goes out while a `multi` before it is unsettled (unanswered): a `multi` fails
//!   as a whole on its first error, and its deletes are then sent again one by one, ahead of
//!   every write queued after them;
//! - only reads that cannot see the writes left behind (neither the written node nor its
//!   parent) move ahead of them; nothing moves ahead of a request of any other kind.

use std::collections::VecDeque;

use crate::wire::jute::Reader;
use crate::wire::proto::op;

/// What a queued request is, for the order rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Class {
    /// A read of one node (its data, existence or children), setting a watch or not.
    Read(String),
    /// A write of one node that goes out alone.
    Write(String),
    /// A delete of one of our own nodes, which may go out in a `multi` with others.
    Delete(String),
    /// Anything else (a `multi`, a sync, a watch removal, CloseSession): nothing moves ahead
    /// of it, and it waits as a write does.
    Ordered,
}

impl Class {
    /// The class of a request `frame` (length prefix, xid, opcode, body), a delete being
    /// `Delete` if it may be coalesced.
    pub(super) fn of(frame: &[u8], coalescible: bool) -> Class {
        let Some(opcode) = frame.get(8..12) else {
            return Class::Ordered;
        };
        let opcode = i32::from_be_bytes(opcode.try_into().expect("4 bytes"));
        let path = || frame.get(12..).and_then(|b| Reader::new(b).string().ok());
        let class = match opcode {
            op::EXISTS | op::GET_DATA | op::GET_CHILDREN2 => path().map(Class::Read),
            op::DELETE if coalescible => path().map(Class::Delete),
            op::DELETE | op::CREATE | op::CREATE2 | op::CREATE_CONTAINER | op::SET_DATA => {
                path().map(Class::Write)
            }
            _ => None,
        };
        class.unwrap_or(Class::Ordered)
    }
}

/// Whether a read of `read` can see the write of `written`: the node itself, or its parent's
/// children.
pub(super) fn sees(read: &str, written: &str) -> bool {
    read == written || parent(written) == read
}

fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => "",
    }
}

/// A request waiting in the outbox, as the planner sees it.
pub(super) trait Queued {
    fn urgent(&self) -> bool;
    fn class(&self) -> &Class;
    /// The sequence number the next request written had when this one was queued: requests
    /// numbered below it were on the wire before it.
    fn after(&self) -> u64;
    fn len(&self) -> usize;
}

/// What the planner knows of the wire.
pub(super) struct Wire<'a> {
    /// How many more requests may go on the wire (urgent ones go anyway).
    pub(super) room: usize,
    /// The sequence number of the oldest request on the wire unanswered, if any.
    pub(super) oldest_unanswered: Option<u64>,
    /// The paths of the `multi`s on the wire unanswered (none: no `multi` is unsettled).
    pub(super) unsettled: &'a [Vec<String>],
    /// How many bytes one write takes at most (the first request goes whatever its size).
    pub(super) max_bytes: usize,
    /// How many deletes one `multi` takes at most.
    pub(super) max_ops: usize,
    /// How many bytes of delete bodies one `multi` takes at most.
    pub(super) max_multi_bytes: usize,
}

/// One request to write, or several deletes to write as one `multi` (indices into the queue,
/// in its order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Take {
    One(usize),
    Multi(Vec<usize>),
}

/// What goes out now from `queue`, in order, at most `limit` takes.
pub(super) fn plan<T: Queued>(queue: &VecDeque<T>, wire: &Wire<'_>, limit: usize) -> Vec<Take> {
    let mut takes = Vec::new();
    let mut room = wire.room;
    let mut bytes = 0;
    // A write may go out: no `multi` unsettled, none taken in this batch.
    let mut writes_open = wire.unsettled.is_empty();
    // Something was left behind: no write may go ahead of it.
    let mut left_behind = false;
    // Left behind: an `Ordered` request (nothing passes it), and the paths of writes.
    let mut barrier = false;
    let mut held: Vec<&str> = wire
        .unsettled
        .iter()
        .flatten()
        .map(String::as_str)
        .collect();
    let mut i = 0;
    while i < queue.len() && takes.len() < limit {
        let item = &queue[i];
        if bytes > 0 && bytes + item.len() > wire.max_bytes {
            break;
        }
        if item.urgent() {
            takes.push(Take::One(i));
            bytes += item.len();
            i += 1;
            continue;
        }
        if room == 0 {
            break;
        }
        match item.class() {
            Class::Read(path) => {
                if barrier || held.iter().any(|w| sees(path, w)) {
                    left_behind = true;
                } else {
                    takes.push(Take::One(i));
                    bytes += item.len();
                    room -= 1;
                }
                i += 1;
            }
            Class::Delete(_) if writes_open && !left_behind => {
                // The run: the consecutive deletes from here, within the bounds.
                let (mut run, mut run_bytes) = (Vec::new(), 0);
                let mut j = i;
                while let Some(next) = queue.get(j) {
                    let Class::Delete(_) = next.class() else {
                        break;
                    };
                    if next.urgent()
                        || run.len() >= wire.max_ops
                        || (!run.is_empty() && run_bytes + next.len() > wire.max_multi_bytes)
                    {
                        break;
                    }
                    run_bytes += next.len();
                    run.push(j);
                    j += 1;
                }
                let full = run.len() >= wire.max_ops
                    || queue.get(j).is_some_and(|next| {
                        matches!(next.class(), Class::Delete(_)) && !next.urgent()
                    });
                let busy = wire.oldest_unanswered.is_some_and(|o| o < item.after());
                if busy && !full {
                    // It waits for the replies it would have waited for at the server.
                    for k in &run {
                        if let Class::Delete(path) = queue[*k].class() {
                            held.push(path);
                        }
                    }
                    left_behind = true;
                    i = j;
                    continue;
                }
                bytes += run_bytes;
                room -= 1;
                if run.len() == 1 {
                    takes.push(Take::One(i));
                } else {
                    takes.push(Take::Multi(run));
                    writes_open = false;
                }
                i = j;
            }
            Class::Write(_) | Class::Delete(_) if writes_open && !left_behind => {
                takes.push(Take::One(i));
                bytes += item.len();
                room -= 1;
                i += 1;
            }
            Class::Ordered if writes_open && !left_behind => {
                takes.push(Take::One(i));
                bytes += item.len();
                room -= 1;
                i += 1;
            }
            Class::Write(path) | Class::Delete(path) => {
                held.push(path);
                left_behind = true;
                i += 1;
            }
            Class::Ordered => {
                barrier = true;
                left_behind = true;
                i += 1;
            }
        }
    }
    takes
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Item {
        class: Class,
        urgent: bool,
        after: u64,
    }

    impl Queued for Item {
        fn urgent(&self) -> bool {
            self.urgent
        }
        fn class(&self) -> &Class {
            &self.class
        }
        fn after(&self) -> u64 {
            self.after
        }
        fn len(&self) -> usize {
            40
        }
    }

    fn item(class: Class, after: u64) -> Item {
        Item {
            class,
            urgent: false,
            after,
        }
    }

    fn del(path: &str, after: u64) -> Item {
        item(Class::Delete(path.into()), after)
    }

    fn wire(oldest: Option<u64>, unsettled: &[Vec<String>]) -> Wire<'_> {
        Wire {
            room: 256,
            oldest_unanswered: oldest,
            unsettled,
            max_bytes: 256 * 1024,
            max_ops: 4,
            max_multi_bytes: 64 * 1024,
        }
    }

    fn q(items: Vec<Item>) -> VecDeque<Item> {
        items.into_iter().collect()
    }

    #[test]
    fn classes_are_read_from_the_frame() {
        let frame = |opcode: i32| {
            let mut w = crate::wire::jute::Writer::frame();
            w.int(7).int(opcode).string("/a/b").int(-1);
            w.finish()
        };
        assert_eq!(
            Class::of(&frame(op::DELETE), true),
            Class::Delete("/a/b".into())
        );
        assert_eq!(
            Class::of(&frame(op::DELETE), false),
            Class::Write("/a/b".into())
        );
        assert_eq!(
            Class::of(&frame(op::CREATE2), true),
            Class::Write("/a/b".into())
        );
        assert_eq!(
            Class::of(&frame(op::GET_CHILDREN2), true),
            Class::Read("/a/b".into())
        );
        assert_eq!(Class::of(&frame(op::SYNC), true), Class::Ordered);
        assert_eq!(Class::of(&frame(op::MULTI), true), Class::Ordered);
        assert_eq!(Class::of(&[0; 6], true), Class::Ordered);
    }

    #[test]
    fn an_idle_connection_sends_a_delete_at_once_and_alone() {
        let queue = q(vec![del("/l/a", 5)]);
        assert_eq!(plan(&queue, &wire(None, &[]), 99), vec![Take::One(0)]);
        // Only requests written after it are unanswered: it waits for nothing.
        assert_eq!(plan(&queue, &wire(Some(5), &[]), 99), vec![Take::One(0)]);
    }

    #[test]
    fn deletes_wait_for_the_replies_before_them_then_go_as_one_multi() {
        let queue = q(vec![del("/l/a", 5), del("/m/b", 5), del("/n/c", 6)]);
        assert!(plan(&queue, &wire(Some(4), &[]), 99).is_empty());
        assert_eq!(
            plan(&queue, &wire(Some(5), &[]), 99),
            vec![Take::Multi(vec![0, 1, 2])]
        );
    }

    #[test]
    fn a_full_run_goes_at_once_and_the_rest_waits_for_its_answer() {
        let queue = q((0..6).map(|i| del(&format!("/l{i}/n"), 5)).collect());
        let takes = plan(&queue, &wire(Some(1), &[]), 99);
        // The second run must not go while the first `multi` is unsettled.
        assert_eq!(takes, vec![Take::Multi(vec![0, 1, 2, 3])]);
    }

    #[test]
    fn the_first_write_that_cannot_join_ends_the_run_and_waits_for_the_multi() {
        let queue = q(vec![
            del("/l/a", 5),
            del("/m/b", 5),
            item(Class::Write("/k/x".into()), 5),
            del("/n/c", 5),
        ]);
        assert_eq!(
            plan(&queue, &wire(None, &[]), 99),
            vec![Take::Multi(vec![0, 1])]
        );
    }

    #[test]
    fn no_write_goes_out_while_a_multi_is_unsettled() {
        let unsettled = vec![vec!["/l/a".to_owned(), "/m/b".to_owned()]];
        let queue = q(vec![
            item(Class::Write("/k/x".into()), 5),
            item(Class::Ordered, 5),
            del("/n/c", 5),
        ]);
        assert!(plan(&queue, &wire(None, &unsettled), 99).is_empty());
    }

    #[test]
    fn reads_of_other_nodes_move_ahead_of_held_writes_and_no_others() {
        let unsettled = vec![vec!["/l/a".to_owned()]];
        let queue = q(vec![
            item(Class::Write("/k/x".into()), 5),
            item(Class::Read("/k/x".into()), 5), // the written node
            item(Class::Read("/k".into()), 5),   // its parent's children
            item(Class::Read("/l".into()), 5),   // the multi's parent
            item(Class::Read("/other".into()), 5),
            item(Class::Ordered, 5),
            item(Class::Read("/else".into()), 5), // behind an ordered request
        ]);
        assert_eq!(
            plan(&queue, &wire(None, &unsettled), 99),
            vec![Take::One(4)]
        );
    }

    #[test]
    fn a_write_never_passes_a_read_left_behind() {
        let unsettled = vec![vec!["/l/a".to_owned()]];
        let queue = q(vec![item(Class::Read("/l".into()), 5)]);
        assert!(plan(&queue, &wire(None, &unsettled), 99).is_empty());
        // Settled: the read and the write behind it go, in order.
        let queue = q(vec![
            item(Class::Read("/l".into()), 5),
            item(Class::Write("/l/b".into()), 5),
        ]);
        assert_eq!(
            plan(&queue, &wire(None, &[]), 99),
            vec![Take::One(0), Take::One(1)]
        );
    }

    #[test]
    fn a_held_run_holds_the_writes_behind_it_but_not_unrelated_reads() {
        let queue = q(vec![
            del("/l/a", 5),
            item(Class::Write("/m/b".into()), 6),
            item(Class::Read("/l".into()), 6),
            item(Class::Read("/m/b".into()), 6),
            item(Class::Read("/z".into()), 6),
        ]);
        assert_eq!(plan(&queue, &wire(Some(3), &[]), 99), vec![Take::One(4)]);
    }

    #[test]
    fn urgent_requests_go_first_whatever_waits() {
        let mut queue = q(vec![del("/l/a", 5), del("/m/b", 5)]);
        queue.push_front(Item {
            class: Class::Ordered,
            urgent: true,
            after: 5,
        });
        assert_eq!(plan(&queue, &wire(Some(1), &[]), 99), vec![Take::One(0)]);
        let unsettled = vec![vec!["/l/a".to_owned()]];
        assert_eq!(
            plan(&queue, &wire(Some(1), &unsettled), 99),
            vec![Take::One(0)]
        );
    }

    #[test]
    fn plain_writes_pipeline_as_before() {
        let queue = q(vec![
            item(Class::Write("/l/a".into()), 5),
            item(Class::Read("/l".into()), 5),
            item(Class::Write("/l/b".into()), 5),
        ]);
        assert_eq!(
            plan(&queue, &wire(Some(1), &[]), 99),
            vec![Take::One(0), Take::One(1), Take::One(2)]
        );
    }

    #[test]
    fn room_on_the_wire_bounds_what_goes() {
        let queue = q(vec![
            item(Class::Read("/a".into()), 5),
            item(Class::Read("/b".into()), 5),
        ]);
        let mut w = wire(None, &[]);
        w.room = 1;
        assert_eq!(plan(&queue, &w, 99), vec![Take::One(0)]);
    }
}
