//! Which requests of the outbox go out now, and which writes go out together as one `multi`.
//!
//! ZooKeeper applies a `multi` as one transaction: the per-request costs of a write at the
//! server (its queues, the commit processor, the log append) are paid once for all of its
//! operations. So the creates of lock nodes and the deletes of our own nodes that wait while
//! the connection is busy go out as one `multi`. Nothing waits on purpose on an idle
//! connection, and the order of writes is the order of the calls, whatever happens to a
//! `multi`:
//! - a `multi` takes *consecutive* coalescible writes only: the first other write ends it;
//!   it never takes two creates under one parent (the nodes of a `multi` share its zxid, and
//!   fencing tokens must strictly increase per lock path);
//! - a run of them waits only for the requests that were unanswered on the wire when its
//!   first was queued (it would have waited behind them at the server anyway), or until it
//!   is full;
//! - no write of a related node (the same node, its parent or a child) goes out while a
//!   `multi` before it is unsettled (unanswered), nor any request of another kind: a `multi`
//!   fails as a whole on its first error, and its writes are then sent again one by one, ahead
//!   of every write queued after them. Writes of unrelated nodes may then land before them:
//!   their callers were concurrent, and each still gets the outcome of its own request.
//!   Siblings are not related: a create under a lock path whose sibling is in a failed `multi`
//!   then takes its place in the queue first (again, concurrent callers); holding it back
//!   would hold every create on a busy lock path to one `multi` a round trip (10,000 waiters
//!   on 100 lock paths queued in twice the time of requests sent alone);
//! - a read goes out behind an unsettled `multi` (the server answers it after the `multi`);
//!   should that `multi` fail, its answer is put aside and the read sent again behind the
//!   writes sent again (see `outbox`);
//! - only reads that cannot see the writes left behind in the queue (neither the written
//!   node nor its parent) move ahead of them; nothing moves ahead of a request of any other
//!   kind.
//!
//! Reads the plan sends one right after another go out as one `multiRead` (see `bundle`):
//! the server answers them in that order with nothing of the session's between them, as it
//! would have answered them alone. A `multiRead` that fails as a whole (its answer over the
//! client's limit) is sent again read by read, after whatever went out behind it; so while
//! one is unsettled, and behind a read that may join one in the same batch, no write it could
//! see and no request of another kind goes out, and such a read passes no write it would hold
//! back that way (a stream of them could hold the write for ever).

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
    /// A create of a lock node (its path before the sequence number), which may go out in a
    /// `multi` with others.
    Create(String),
    /// Anything else (a `multi`, a sync, a watch removal, CloseSession): nothing moves ahead
    /// of it, and it waits as a write does.
    Ordered,
}

impl Class {
    /// The class of a request `frame` (length prefix, xid, opcode, body), a delete or a
    /// create being `Delete` or `Create` if it may be coalesced.
    pub(super) fn of(frame: &[u8], coalescible: bool) -> Class {
        let Some(opcode) = frame.get(8..12) else {
            return Class::Ordered;
        };
        let opcode = i32::from_be_bytes(opcode.try_into().expect("4 bytes"));
        let path = || frame.get(12..).and_then(|b| Reader::new(b).string().ok());
        let class = match opcode {
            op::EXISTS | op::GET_DATA | op::GET_CHILDREN2 => path().map(Class::Read),
            op::DELETE if coalescible => path().map(Class::Delete),
            op::CREATE | op::CREATE2 if coalescible => path().map(Class::Create),
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

/// Whether the order of writes of `a` and `b` may matter: the same node, or parent and child
/// (a lock path and its nodes).
fn related(a: &str, b: &str) -> bool {
    a == b || parent(a) == b || parent(b) == a
}

/// The parent of `path` (`/` for a child of the root).
pub(super) fn parent(path: &str) -> &str {
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
    /// A read that may go out in a `multiRead` with the reads written right after it.
    fn bundles(&self) -> bool;
}

impl Class {
    /// Whether it may go out in a `multi`.
    fn coalescible(&self) -> bool {
        matches!(self, Class::Delete(_) | Class::Create(_))
    }
}

/// The most bytes the answer to one operation of a `multi` takes: a failed one answers a
/// header and an error code; a create answers its path with the sequence number and, from
/// ZooKeeper 3.9, a stat.
fn reply_len(class: &Class) -> usize {
    match class {
        Class::Create(path) => 16 + 4 + path.len() + 10 + 68,
        _ => 16,
    }
}

/// What the planner knows of the wire.
pub(super) struct Wire<'a> {
    /// How many more requests may go on the wire (urgent ones go anyway).
    pub(super) room: usize,
    /// The sequence number of the oldest request on the wire unanswered, if any.
    pub(super) oldest_unanswered: Option<u64>,
    /// The paths the `multi`s on the wire unanswered write, and those the `multiRead`s read.
    pub(super) unsettled: &'a [&'a str],
    /// How many bytes one write takes at most (the first request goes whatever its size).
    pub(super) max_bytes: usize,
    /// How many operations one `multi` takes at most.
    pub(super) max_ops: usize,
    /// How many bytes of operations one `multi` takes at most.
    pub(super) max_multi_bytes: usize,
    /// How many bytes the answer to one `multi` may take at most (the client's largest reply).
    pub(super) max_multi_reply: usize,
    /// How many queued requests one plan looks at beyond those it takes: the outbox may hold
    /// tens of thousands (waiters re-listing after a reconnect), and a plan is made after
    /// every reply. What lies further back waits for a later plan.
    pub(super) max_scan: usize,
}

/// One request to write, or several writes to write as one `multi` (indices into the queue,
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
    // What the `multi`s unsettled or taken in this batch write: no related write goes now.
    let mut in_flight: Vec<&str> = wire.unsettled.to_vec();
    // Something was left behind: no write may go ahead of it.
    let mut left_behind = false;
    // Left behind: an `Ordered` request (nothing passes it), and the paths of writes.
    let mut barrier = false;
    let mut held: Vec<&str> = Vec::new();
    // Members of a `multi` taken, passed over when the scan reaches them (sized at the first).
    let mut in_multi: Vec<bool> = Vec::new();
    let mut passed = 0;
    let mut i = 0;
    while i < queue.len() && takes.len() < limit {
        let item = &queue[i];
        if in_multi.get(i) == Some(&true) {
            i += 1;
            continue;
        }
        if takes.len() + passed > wire.max_scan {
            break;
        }
        if left_behind {
            passed += 1;
        }
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
                // One that may go out in a `multiRead` holds related writes back as its
                // `multiRead` would (below), so it must not pass one either (a stream of
                // such reads could hold it for ever); `related` includes what it `sees`.
                let bundles = item.bundles();
                let waits_for: fn(&str, &str) -> bool = if bundles { related } else { sees };
                if barrier || held.iter().any(|w| waits_for(path, w)) {
                    left_behind = true;
                } else {
                    takes.push(Take::One(i));
                    bytes += item.len();
                    room -= 1;
                    if bundles {
                        // Should its `multiRead` fail as a whole, it is sent again after
                        // whatever this batch wrote behind it: treated as unsettled already.
                        in_flight.push(path);
                    }
                }
                i += 1;
            }
            class
                if class.coalescible()
                    && !left_behind
                    && !path_of(class).is_some_and(|p| touches(&in_flight, p)) =>
            {
                let (run, full) = run_from(queue, i, wire, &in_flight);
                if in_multi.is_empty() && run.len() > 1 {
                    in_multi = vec![false; queue.len()];
                }
                let busy = wire.oldest_unanswered.is_some_and(|o| o < item.after());
                if busy && !full {
                    // It waits for the replies it would have waited for at the server, and
                    // every write behind it with it.
                    held.extend(path_of(class));
                    left_behind = true;
                    i += 1;
                    continue;
                }
                bytes += run.iter().map(|k| queue[*k].len()).sum::<usize>();
                room -= 1;
                if run.len() == 1 {
                    takes.push(Take::One(i));
                } else {
                    run.iter().for_each(|k| in_multi[*k] = true);
                    in_flight.extend(run.iter().filter_map(|k| path_of(queue[*k].class())));
                    takes.push(Take::Multi(run));
                }
                i += 1;
            }
            Class::Ordered if in_flight.is_empty() && !left_behind => {
                takes.push(Take::One(i));
                bytes += item.len();
                room -= 1;
                i += 1;
            }
            Class::Ordered => {
                barrier = true;
                left_behind = true;
                i += 1;
            }
            class if !left_behind && !path_of(class).is_some_and(|p| touches(&in_flight, p)) => {
                takes.push(Take::One(i));
                bytes += item.len();
                room -= 1;
                i += 1;
            }
            class => {
                held.extend(path_of(class));
                left_behind = true;
                i += 1;
            }
        }
    }
    takes
}

/// Whether a write of `path` is related to one of `writes`.
fn touches(writes: &[&str], path: &str) -> bool {
    writes.iter().any(|w| related(w, path))
}

fn path_of(class: &Class) -> Option<&str> {
    class.path()
}

impl Class {
    /// The path it reads or writes.
    pub(super) fn path(&self) -> Option<&str> {
        match self {
            Class::Read(p) | Class::Write(p) | Class::Delete(p) | Class::Create(p) => Some(p),
            Class::Ordered => None,
        }
    }
}

/// The run of coalescible writes from `start`, within the bounds, and whether a bound ended
/// it (more would have joined it: it is full). Reads between them are passed over, unless
/// they see a write that would join (a read queued before a write is answered before it);
/// the first write of any other kind, or related to one `in_flight`, ends the run.
fn run_from<T: Queued>(
    queue: &VecDeque<T>,
    start: usize,
    wire: &Wire<'_>,
    in_flight: &[&str],
) -> (Vec<usize>, bool) {
    let (mut run, mut run_bytes, mut reply) = (Vec::new(), 0, 64);
    let mut parents: Vec<&str> = Vec::new();
    let mut passed: Vec<&str> = Vec::new();
    for (j, next) in queue.iter().enumerate().skip(start).take(wire.max_scan) {
        let class = next.class();
        if next.urgent() {
            return (run, false);
        }
        if let Class::Read(path) = class {
            passed.push(path);
            continue;
        }
        let Some(path) = path_of(class).filter(|_| class.coalescible()) else {
            return (run, false);
        };
        if touches(in_flight, path) {
            return (run, false);
        }
        let parent_taken = matches!(class, Class::Create(_)) && parents.contains(&parent(path));
        if run.len() >= wire.max_ops
            || parent_taken
            || passed.iter().any(|read| sees(read, path))
            || (!run.is_empty() && run_bytes + next.len() > wire.max_multi_bytes)
            || (!run.is_empty() && reply + reply_len(class) > wire.max_multi_reply)
        {
            return (run, true);
        }
        if let Class::Create(_) = class {
            parents.push(parent(path));
        }
        run_bytes += next.len();
        reply += reply_len(class);
        run.push(j);
    }
    (run, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Item {
        class: Class,
        urgent: bool,
        after: u64,
        bundles: bool,
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
        fn bundles(&self) -> bool {
            self.bundles
        }
    }

    fn item(class: Class, after: u64) -> Item {
        Item {
            class,
            urgent: false,
            after,
            bundles: false,
        }
    }

    /// A read that may go out in a `multiRead`.
    fn bundled_read(path: &str, after: u64) -> Item {
        Item {
            bundles: true,
            ..item(Class::Read(path.into()), after)
        }
    }

    fn del(path: &str, after: u64) -> Item {
        item(Class::Delete(path.into()), after)
    }

    fn wire<'a>(oldest: Option<u64>, unsettled: &'a [&'a str]) -> Wire<'a> {
        Wire {
            room: 256,
            oldest_unanswered: oldest,
            unsettled,
            max_bytes: 256 * 1024,
            max_ops: 4,
            max_multi_bytes: 64 * 1024,
            max_multi_reply: 1 << 20,
            max_scan: 1 << 20,
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
        let path = || "/a/b".to_owned();
        for (opcode, coalescible, class) in [
            (op::DELETE, true, Class::Delete(path())),
            (op::DELETE, false, Class::Write(path())),
            (op::CREATE2, true, Class::Create(path())),
            (op::CREATE2, false, Class::Write(path())),
            (op::CREATE_CONTAINER, true, Class::Write(path())),
            (op::GET_CHILDREN2, true, Class::Read(path())),
        ] {
            assert_eq!(Class::of(&frame(opcode), coalescible), class, "op {opcode}");
        }
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
    fn the_first_write_that_cannot_join_ends_the_run() {
        let queue = q(vec![
            del("/l/a", 5),
            del("/m/b", 5),
            item(Class::Write("/k/x".into()), 5),
            del("/n/c", 5),
        ]);
        // Unrelated to the multi: they go behind it.
        assert_eq!(
            plan(&queue, &wire(None, &[]), 99),
            vec![Take::Multi(vec![0, 1]), Take::One(2), Take::One(3)]
        );
        // A child of one of its nodes waits for its answer, and what is behind with it.
        let queue = q(vec![
            del("/l/a", 5),
            del("/m/b", 5),
            item(Class::Write("/l/a/x".into()), 5),
            del("/n/c", 5),
        ]);
        assert_eq!(
            plan(&queue, &wire(None, &[]), 99),
            vec![Take::Multi(vec![0, 1])]
        );
    }

    #[test]
    fn no_related_write_goes_out_while_a_multi_is_unsettled() {
        let unsettled = ["/l/a", "/m/b"];
        for related in ["/l/a", "/l", "/l/a/x", "/m"] {
            let queue = q(vec![item(Class::Write(related.into()), 5)]);
            assert!(plan(&queue, &wire(None, &unsettled), 99).is_empty());
            let queue = q(vec![del(related, 5)]);
            assert!(plan(&queue, &wire(None, &unsettled), 99).is_empty());
        }
        // Nothing passes a request of another kind, nor what is left behind.
        let queue = q(vec![
            item(Class::Ordered, 5),
            item(Class::Write("/k/x".into()), 5),
        ]);
        assert!(plan(&queue, &wire(None, &unsettled), 99).is_empty());
        let queue = q(vec![
            item(Class::Write("/l".into()), 5),
            item(Class::Write("/k/x".into()), 5),
        ]);
        assert!(plan(&queue, &wire(None, &unsettled), 99).is_empty());
        // Unrelated writes go, siblings included, one that joins no multi as well as a new
        // multi.
        let queue = q(vec![
            item(Class::Write("/k/x".into()), 5),
            del("/n/c", 5),
            del("/o/d", 5),
            del("/l/c", 5),
            item(Class::Write("/l/a".into()), 5),
        ]);
        assert_eq!(
            plan(&queue, &wire(None, &unsettled), 99),
            vec![Take::One(0), Take::Multi(vec![1, 2, 3])]
        );
    }

    #[test]
    fn reads_of_other_nodes_move_ahead_of_held_writes_and_no_others() {
        let unsettled = ["/l/a"];
        let queue = q(vec![
            item(Class::Write("/l".into()), 5), // held: its child is in the multi
            item(Class::Read("/l".into()), 5),  // the held node
            item(Class::Read("/".into()), 5),   // its parent's children
            item(Class::Read("/l/a".into()), 5), // the unsettled multi's node: on the wire
            item(Class::Read("/other".into()), 5),
            item(Class::Ordered, 5),
            item(Class::Read("/else".into()), 5), // behind an ordered request
        ]);
        assert_eq!(
            plan(&queue, &wire(None, &unsettled), 99),
            vec![Take::One(3), Take::One(4)]
        );
    }

    #[test]
    fn a_write_never_passes_a_read_left_behind() {
        let queue = q(vec![
            del("/l/a", 5),
            item(Class::Read("/l".into()), 5),
            item(Class::Write("/m/b".into()), 5),
        ]);
        // The delete waits for the wire: so do the read that sees it and the write behind.
        assert!(plan(&queue, &wire(Some(1), &[]), 99).is_empty());
        // Answered: all go, in order.
        assert_eq!(
            plan(&queue, &wire(None, &[]), 99),
            vec![Take::One(0), Take::One(1), Take::One(2)]
        );
    }

    #[test]
    fn creates_and_deletes_go_out_together_and_reads_go_behind_them() {
        let queue = q(vec![
            item(Class::Create("/l/_c_1-lock-".into()), 5),
            item(Class::Read("/l".into()), 5),
            del("/m/n0", 5),
            item(Class::Create("/k/_c_2-lock-".into()), 5),
            item(Class::Read("/k".into()), 5),
        ]);
        // Behind the replies they wait for, the listings of their lock paths wait too.
        assert!(plan(&queue, &wire(Some(4), &[]), 99).is_empty());
        // The reads between them are passed over: one multi, each listing behind it.
        assert_eq!(
            plan(&queue, &wire(None, &[]), 99),
            vec![Take::Multi(vec![0, 2, 3]), Take::One(1), Take::One(4)]
        );
        // A read that sees a later write stays ahead of it: that write ends the run (the
        // run of one goes alone, and what follows it in order).
        let queue = q(vec![
            item(Class::Create("/l/_c_1-lock-".into()), 5),
            item(Class::Read("/k".into()), 5),
            item(Class::Create("/k/_c_2-lock-".into()), 5),
        ]);
        assert_eq!(
            plan(&queue, &wire(None, &[]), 99),
            vec![Take::One(0), Take::One(1), Take::One(2)]
        );
        let queue = q(vec![
            item(Class::Create("/l/_c_1-lock-".into()), 5),
            del("/m/n0", 5),
            item(Class::Create("/k/_c_2-lock-".into()), 5),
            item(Class::Read("/l".into()), 5),
            item(Class::Read("/k".into()), 5),
        ]);
        assert_eq!(
            plan(&queue, &wire(Some(5), &[]), 99),
            vec![Take::Multi(vec![0, 1, 2]), Take::One(3), Take::One(4)]
        );
    }

    #[test]
    fn a_multi_never_takes_two_creates_under_one_parent() {
        let queue = q(vec![
            item(Class::Create("/l/_c_1-lock-".into()), 5),
            del("/l/_c_0-lock-0000000001", 5),
            item(Class::Create("/l/_c_2-lock-".into()), 5),
            item(Class::Create("/k/_c_3-lock-".into()), 5),
        ]);
        // The second create under /l ends the run (full: it goes now, though the wire is
        // busy); what is left waits for the multi.
        assert_eq!(
            plan(&queue, &wire(Some(1), &[]), 99),
            vec![Take::Multi(vec![0, 1])]
        );
        // A sibling create need not wait for that multi's answer: it goes in the next.
        let unsettled = ["/l/_c_1-lock-"];
        let rest = q(vec![
            item(Class::Create("/l/_c_2-lock-".into()), 5),
            item(Class::Create("/k/_c_3-lock-".into()), 5),
        ]);
        assert_eq!(
            plan(&rest, &wire(None, &unsettled), 99),
            vec![Take::Multi(vec![0, 1])]
        );
    }

    #[test]
    fn the_answer_bounds_a_multi_of_creates() {
        let queue = q((0..6)
            .map(|i| item(Class::Create(format!("/l{i}/_c_{i}-lock-")), 5))
            .collect());
        let mut w = wire(None, &[]);
        w.max_ops = 99;
        // Room for the answers of three creates (each its path with a sequence number and a
        // stat, 16 + 4 + 15 + 10 + 68 bytes, beside 64 of the reply's own).
        w.max_multi_reply = 64 + 3 * 113 + 50;
        assert_eq!(plan(&queue, &w, 1), vec![Take::Multi(vec![0, 1, 2])]);
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
            urgent: true,
            ..item(Class::Ordered, 5)
        });
        assert_eq!(plan(&queue, &wire(Some(1), &[]), 99), vec![Take::One(0)]);
        let unsettled = ["/l/a"];
        assert_eq!(
            plan(&queue, &wire(Some(1), &unsettled), 99),
            vec![Take::One(0)]
        );
    }

    #[test]
    fn nothing_a_read_that_may_be_bundled_could_see_goes_behind_it_in_its_batch() {
        // Should their `multiRead` fail as a whole, the reads go out again alone, after
        // whatever followed them in the batch; they must not see a write called after them.
        for write in [
            item(Class::Write("/a/x".into()), 5),
            item(Class::Write("/a".into()), 5),
            del("/a/x", 5),
            item(Class::Create("/a/_c_1-lock-".into()), 5),
            item(Class::Ordered, 5),
        ] {
            let queue = q(vec![bundled_read("/a", 5), bundled_read("/b", 5), write]);
            assert_eq!(
                plan(&queue, &wire(None, &[]), 99),
                vec![Take::One(0), Take::One(1)]
            );
        }
        // Unrelated writes go, and reads that go out alone hold nothing back (they are
        // answered in order, never sent again).
        let queue = q(vec![
            bundled_read("/a", 5),
            item(Class::Write("/c/x".into()), 5),
        ]);
        assert_eq!(
            plan(&queue, &wire(None, &[]), 99),
            vec![Take::One(0), Take::One(1)]
        );
        let queue = q(vec![
            item(Class::Read("/a".into()), 5),
            item(Class::Write("/a/x".into()), 5),
        ]);
        assert_eq!(
            plan(&queue, &wire(None, &[]), 99),
            vec![Take::One(0), Take::One(1)]
        );
    }

    #[test]
    fn a_read_that_may_be_bundled_never_passes_a_write_its_multi_read_would_hold() {
        // The delete waits for the replies in flight. A read of its child cannot see it and
        // passes it alone; bundled, its `multiRead` would hold the delete back in turn, and a
        // stream of such reads could hold it for ever.
        let queue = q(vec![
            del("/a/x", 5),
            bundled_read("/a/x/c", 5),
            item(Class::Read("/a/x/c".into()), 5),
            bundled_read("/b", 5),
        ]);
        assert_eq!(
            plan(&queue, &wire(Some(1), &[]), 99),
            vec![Take::One(2), Take::One(3)]
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
    fn a_plan_looks_at_a_bounded_part_of_a_long_queue() {
        // A held delete, then many reads of its lock path (they wait), then one of another.
        let mut items = vec![del("/l/a", 5)];
        items.extend((0..100).map(|_| item(Class::Read("/l".into()), 5)));
        items.push(item(Class::Read("/other".into()), 5));
        let queue = q(items);
        let mut w = wire(Some(1), &[]);
        w.max_scan = 50;
        assert!(plan(&queue, &w, 99).is_empty());
        w.max_scan = 200;
        assert_eq!(plan(&queue, &w, 99), vec![Take::One(101)]);
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
