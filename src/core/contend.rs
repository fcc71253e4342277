//! Contending for a lock: place our node, find the node that blocks it, wait for that node to
//! go (or the session to change), and claim the lock, leaving nothing behind on any other path.
//! One future, which blocking callers wait on with their own thread and async callers await.

use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::Instant;

use log::{debug, error};

use super::floors::{Floors, QueueId};
use crate::error::{Error, Result};
use crate::znode::layout::{check_data_size, nodes_ahead, owner_data, LockNode};

use super::claim::{claim, node_vanished, Claimed};
use super::held::Held;
use super::hold::Holds;
use super::kind::{Kind, Rival};
use super::place::{create_node, Created};
use super::seam::{HoldingSession, ZkSession};
use super::session_view::{Children, Elapsed, Fired, Liveness};
use super::wait::{Budget, Patience};
use super::withdraw::OurNode;

/// Acquires `lock_path` as a contender of `kind`, on `session`. `Ok(None)` when the lock was
/// busy and the patience ran out; nothing is left behind on any path that does not return
/// `Ok(Some(..))`.
///
/// The recipe's front end takes the session from its client, once per acquisition: every step
/// of an acquisition made of several nodes (a multi-lock's members, a semaphore's gate and
/// permit nodes) must use one session, so that an expiry between two steps fails the whole
/// acquisition instead of mixing a lost node with fresh ones.
pub(crate) async fn acquire_on<S: ZkSession + HoldingSession>(
    session: &Arc<S>,
    lock_path: &str,
    kind: &Kind,
    attempt: &Budget,
    deadline: Option<Instant>,
    options: &Options,
) -> Result<Option<Held>> {
    let data = options.data.clone().unwrap_or_else(owner_data);
    check_data_size(&data)?;
    let contended = contend(session, lock_path, kind, attempt, deadline, &data).await;
    let held = past_deadline_is_busy(session.as_ref(), deadline, contended)?
        .map(|claimed| claimed.held(lock_path));
    let Some(mut held) = held else {
        return Ok(None);
    };
    if options.revocable {
        held.make_revocable()?;
    }
    Ok(Some(held))
}

/// Acquires `lock_path` as a contender of `kind` with the owner's data, on any session: the
/// steps of an acquisition of several for each of its locks (what
/// [`acquire_on`] is for one, without its options).
pub(crate) async fn take<S: Holds>(
    session: &Arc<S>,
    lock_path: &str,
    kind: &Kind,
    attempt: &Budget,
    deadline: Option<Instant>,
) -> Result<Option<S::Held>> {
    let contended = contend(session, lock_path, kind, attempt, deadline, &owner_data()).await;
    let claimed = past_deadline_is_busy(session.as_ref(), deadline, contended)?;
    Ok(claimed.map(|claimed| S::hold(claimed, lock_path)))
}

/// Per-acquisition choices of a recipe.
#[derive(Debug, Clone, Default)]
pub(crate) struct Options {
    /// Listen for revocation requests while held.
    pub(crate) revocable: bool,
    /// The node's data; [`owner_data`] if `None`.
    pub(crate) data: Option<Vec<u8>>,
    /// Local handoff, with this many local holds at most once another contender waits (see
    /// `cohort.rs`); exclusive kinds only.
    pub(crate) local_handoff: Option<u32>,
}

/// The outcome of an acquisition's requests, with a request that ran into the deadline (a
/// slow reply, or one that was simply still on its way when the time ran out) read as
/// [`Elapsed`]: the session layer reports every wait that reached its deadline as
/// [`Error::ConnectionLoss`], whatever the connection's state. Every acquisition front end
/// (`acquire_on`, `acquire_permit_node`) passes its outcome through here.
pub(crate) fn past_deadline_is_busy<T>(
    session: &impl ZkSession,
    deadline: Option<Instant>,
    outcome: Result<Option<T>>,
) -> Result<Option<T>> {
    match outcome {
        Err(Error::ConnectionLoss { .. }) if deadline.is_some_and(|d| session.now() >= d) => {
            Elapsed.outcome(session.liveness())
        }
        outcome => outcome,
    }
}

/// Whether `rival`, seen by its names among the lock path's children, has nodes there: one
/// whose nodes lie in children of its own (a semaphore) may have left them empty, and empty
/// containers stay until the server sweeps them, keeping no one out.
async fn rival_present<S: ZkSession>(
    session: &S,
    lock_path: &str,
    rival: Rival,
    deadline: Option<Instant>,
) -> Result<bool> {
    if rival.holders.is_empty() {
        return Ok(true);
    }
    for holder in rival.holders {
        match session
            .list(&format!("{lock_path}/{holder}"), deadline)
            .await
        {
            Ok(children) if !children.is_empty() => return Ok(true),
            Ok(_) | Err(Error::NoNode { .. }) => {}
            Err(err) => return Err(err),
        }
    }
    Ok(false)
}

/// The wait loop of [`acquire_on`], on any [`ZkSession`]: our node, claimed, or `None` (busy).
pub(crate) async fn contend<S: ZkSession>(
    session: &Arc<S>,
    lock_path: &str,
    kind: &Kind,
    attempt: &Budget,
    deadline: Option<Instant>,
    data: &[u8],
) -> Result<Option<Claimed<S>>> {
    let lock_name = kind.names[kind.ours].0;
    // The steps before and between waits are boxed: a future is as large as its largest
    // state, and ten thousand waiting tasks should each hold only the wait's.
    let created = Box::pin(create_node(
        session, lock_path, lock_name, data, attempt, deadline,
    ))
    .await?;
    let Created {
        mut contender,
        name,
        stat,
        children,
        generation,
    } = match created {
        Ok(created) => created,
        Err(elapsed) => return elapsed.outcome(session.liveness()),
    };
    if let Some(rival) = (kind.rival)(&children.names) {
        if Box::pin(rival_present(session.as_ref(), lock_path, rival, deadline)).await? {
            // Dropping `contender` withdraws the node.
            return Err(Error::RecipeConflict {
                path: lock_path.to_owned(),
                ours: kind.recipe,
                theirs: rival.recipe,
            });
        }
    }
    let lock_names = kind.lock_names();
    // (A name of ours that is no lock node would be missing from every listing.)
    let Some(ours) = LockNode::parse(name, &lock_names) else {
        return Err(node_vanished(&mut contender, lock_path));
    };
    if !orderable(ours.sequence) {
        // Dropping `contender` withdraws the node.
        error!(
            "{}: the lock path has used up its sequence numbers; delete it while no one holds \
             or waits on it",
            contender.node_path
        );
        return Err(Error::SequenceExhausted {
            path: lock_path.to_owned(),
        });
    }
    // The nodes ahead of ours, as the listing taken with the create shows them.
    let mut known: Option<Option<Ahead>> = Some(Ahead::of(&ours, &children, &lock_names));
    // Our node lives in this incarnation of the lock path as long as it lives at all.
    let queue = QueueId {
        path: lock_path.to_owned(),
        dir: children.stat.czxid,
        name: lock_names[0],
    };
    let floors = session.floors();
    drop(children);
    // Set when woken by a reconnect: the listing may be shared with the session's other
    // waiters woken by it, if asked for since (see `listing.rs`).
    let mut shared_since: Option<Instant> = None;
    loop {
        let ahead = match (known.take(), shared_since.take()) {
            (Some(ahead), _) => ahead,
            (None, Some(since)) => {
                let listed = Box::pin(session.list_since(lock_path, deadline, since)).await?;
                Ahead::of(&ours, &listed, &lock_names)
            }
            (None, None) => {
                let listed = Box::pin(session.list(lock_path, deadline)).await?;
                nodes_ahead(&listed, &ours, &lock_names).map(Ahead::own)
            }
        };
        let Some(ahead) = ahead else {
            return Err(node_vanished(&mut contender, lock_path));
        };
        // Every node below the lowest one listed is gone for good.
        floors.learn(&queue, ahead.first().map_or(ours.sequence, |n| n.sequence));
        let Some(blocker) = (kind.blocker)(&ahead) else {
            return claim(contender, lock_path, stat, generation).map(Some);
        };
        if let Patience::DontWait = attempt.patience {
            return Ok(None);
        }
        // What must be gone besides the blocker: for us to hold the lock, the next node in our
        // way (by the rule, every one in our way before it too); for the queue to be empty
        // below us, the highest other node ahead. Others on the session may learn that they
        // are (see `floors.rs`) while we wait, which spares a listing when the blocker goes.
        let next_in_way = kind.next_in_way(&ahead, blocker).map(|i| ahead[i].sequence);
        let highest_other = match ahead.len() - 1 {
            last if last != blocker => Some(ahead[last].sequence),
            _ => blocker.checked_sub(1).map(|i| ahead[i].sequence),
        };
        let blocker_path = format!("{lock_path}/{}", ahead[blocker].name);
        // The queue ahead can be long and the wait too: with many waiters, keeping each one's
        // copy alive grows memory with the square of the queue.
        drop(ahead);
        // Followed from before the watch is asked for: a reconnect between its reply and the
        // wait would otherwise go unseen, and a watch the reconnect lost never fires.
        let states = session.states();
        let watcher = match Box::pin(session.watch_node(&blocker_path, deadline)).await {
            Ok(Some(watcher)) => watcher,
            Ok(None) => continue, // Gone already: re-list at once.
            // The session's word for a request that ran into the deadline.
            Err(Error::ConnectionLoss { .. }) => return Elapsed.outcome(session.liveness()),
            Err(err) => return Err(err),
        };
        debug!("{} waits for {blocker_path}", contender.node_path);
        let woken = Box::pin(wait_for_change(
            session.as_ref(),
            states,
            watcher,
            &mut contender,
            deadline,
        ))
        .await?;
        match woken {
            Woken::Deleted
                if gone(floors, &queue, next_in_way)
                    && session.liveness() == Liveness::Connected =>
            {
                // No listing needed (nothing can be in our way now), but our own node must
                // still be there: someone may have deleted it while we waited. Reading one
                // node is cheaper than listing a long queue.
                let own = Box::pin(session.stat(&contender.node_path, deadline)).await?;
                match own {
                    Some(now) if now.czxid == stat.czxid => {
                        if gone(floors, &queue, highest_other) {
                            floors.learn(&queue, ours.sequence);
                        }
                        return claim(contender, lock_path, stat, generation).map(Some);
                    }
                    _ => return Err(node_vanished(&mut contender, lock_path)),
                }
            }
            Woken::Deleted | Woken::Recheck => {}
            Woken::Reconnected { since } => shared_since = Some(since),
            Woken::Elapsed(elapsed) => return elapsed.outcome(session.liveness()),
        }
    }
}

/// Whether a node of ours numbered `sequence` has a place of its own in the queue. Past 2^31
/// the parent's counter no longer advances: ZooKeeper 3.8 raises `cversion` only to a larger
/// value, so once it reaches `i32::MAX` every new node is numbered `2147483647` (and creates
/// pipelined behind one another are numbered past it, negative); nodes sharing a number
/// would be ordered by their random prefixes, and two could each find themselves first.
/// The one node that was given `2147483647` first cannot be told apart from those after it.
fn orderable(sequence: i64) -> bool {
    (0..i64::from(i32::MAX)).contains(&sequence)
}

/// Whether the node numbered `sequence` (none: `true`) of `queue` is known to be gone.
fn gone(floors: &Floors, queue: &QueueId, sequence: Option<i64>) -> bool {
    sequence.is_none_or(|sequence| sequence < floors.gone_below(queue))
}

/// The lock nodes ahead of ours, in queue order: a view into a listing's sorted nodes, which
/// every waiter that read the listing shares (a wave of ten thousand waiters woken by one
/// listing sorts it once, not once each).
struct Ahead {
    nodes: Arc<Vec<LockNode>>,
    end: usize,
}

impl Ahead {
    /// The nodes ahead of `ours` in `listed`; `None` if `ours` is not in it.
    fn of(ours: &LockNode, listed: &Children, lock_names: &[&'static str]) -> Option<Ahead> {
        let nodes = listed.sorted(lock_names);
        let end = nodes
            .iter()
            .position(|n| n.sequence == ours.sequence && n.name == ours.name)?;
        Some(Ahead { nodes, end })
    }

    /// Nodes ahead found by this waiter alone.
    fn own(ahead: Vec<LockNode>) -> Ahead {
        let end = ahead.len();
        Ahead {
            nodes: Arc::new(ahead),
            end,
        }
    }
}

impl std::ops::Deref for Ahead {
    type Target = [LockNode];

    fn deref(&self) -> &[LockNode] {
        &self.nodes[..self.end]
    }
}

/// Why a wait for a watched node ended.
pub(super) enum Woken {
    Deleted,
    /// The node changed: look again.
    Recheck,
    /// The connection came back: look again, with a listing asked for no earlier than
    /// `since` (when this waiter first found the session disconnected, or else began
    /// waiting): one asked for after that was sent after the outage began, and so is
    /// answered once the connection is back.
    Reconnected {
        since: Instant,
    },
    Elapsed(Elapsed),
}

/// What woke a waiter, as [`wait_for_change`] races its sources.
enum Wake {
    Node(Fired),
    Session,
    Elapsed(Elapsed),
}

/// Waits for `watcher` to fire, a reconnect, or the deadline. Session end is an error (and
/// disarms `contender`: the server already removed the node). Dropping the watcher (on
/// return, or when the future is dropped) removes the watch from the server.
///
/// `state` must be taken ([`ZkSession::states`]) before the watch was asked for: a disconnect
/// and reconnect between the watch's reply and this wait is then seen as a state change
/// (the reconnect may have lost the watch; simulation seed 1385).
pub(super) async fn wait_for_change<S: ZkSession>(
    session: &S,
    mut state: S::States,
    watcher: S::Watch,
    contender: &mut OurNode<S>,
    deadline: Option<Instant>,
) -> Result<Woken> {
    let mut since = session.now();
    let mut disconnected_seen = false;
    let mut fired = std::pin::pin!(S::fired(watcher));
    let timer = deadline.map(|at| session.sleep_until(at));
    let mut timer = std::pin::pin!(timer);
    // A state change may have slipped in before the watch was set: if not connected now,
    // start with a session change pending.
    let mut session_changed = session.liveness() != Liveness::Connected;
    loop {
        let wake = if std::mem::take(&mut session_changed) {
            Wake::Session
        } else {
            let mut changed = std::pin::pin!(S::state_changed(&mut state));
            std::future::poll_fn(|cx| {
                if let Poll::Ready(event) = fired.as_mut().poll(cx) {
                    return Poll::Ready(Wake::Node(event));
                }
                if changed.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Wake::Session);
                }
                match timer.as_mut().as_pin_mut().map(|t| t.poll(cx)) {
                    Some(Poll::Ready(())) => Poll::Ready(Wake::Elapsed(Elapsed)),
                    _ => Poll::Pending,
                }
            })
            .await
        };
        match wake {
            Wake::Node(Fired::Deleted) => return Ok(Woken::Deleted),
            Wake::Node(Fired::SessionEnded) => break,
            Wake::Node(Fired::Changed) => return Ok(Woken::Recheck),
            Wake::Session => match session.liveness() {
                Liveness::Ended => break,
                // Reconnected: watches are re-armed, but re-check rather than trust that a
                // deletion during the outage was delivered.
                Liveness::Connected => return Ok(Woken::Reconnected { since }),
                Liveness::Disconnected => {
                    if !disconnected_seen {
                        disconnected_seen = true;
                        since = session.now();
                    }
                    debug!("{}: connection lost while waiting", contender.node_path)
                }
            },
            Wake::Elapsed(elapsed) => return Ok(Woken::Elapsed(elapsed)),
        }
    }
    contender.armed = false;
    // The session ended: expired, or closed by us (a close also cancels, and the waiter may
    // see the session's end before the cancellation): the session says which.
    Err(session.ended_error())
}

#[cfg(test)]
mod tests {
    //! The wait loop driven on the simulated ZooKeeper (see `sim/store.rs`): each test polls a
    //! contender until it waits (every request and message moved), changes the queue or the
    //! session under it, and polls again.

    use std::future::Future;
    use std::pin::Pin;

    use super::*;
    use crate::core::kind::{nearest_lower_writer, previous_node, Role, READ};
    use crate::core::sim::client::SimSession;
    use crate::core::sim::store::Store;
    use crate::core::sim::Sim;
    use crate::metrics::Recipe;

    const LOCK: &str = "/lock";

    const EXCLUSIVE: Kind = Kind {
        names: &[("lock-", Role::Exclusive)],
        ours: 0,
        blocker: previous_node,
        metric: Recipe::Mutex,
        recipe: "test",
        rival: |_| None,
    };
    const RW_NAMES: &[(&str, Role)] = &[("__READ__", Role::Read), ("__WRIT__", Role::Write)];
    const READER: Kind = Kind {
        names: RW_NAMES,
        ours: READ,
        blocker: nearest_lower_writer,
        metric: Recipe::RwLockRead,
        recipe: "test",
        rival: |_| None,
    };
    const WRITER: Kind = Kind {
        names: RW_NAMES,
        ours: 1,
        blocker: previous_node,
        metric: Recipe::RwLockWrite,
        recipe: "test",
        rival: |_| None,
    };

    type Outcome = Result<Option<Claimed<SimSession>>>;

    /// A contender's acquisition, polled by hand.
    struct Contender(Pin<Box<dyn Future<Output = Outcome>>>, Sim);

    impl Contender {
        fn new(store: &Store, kind: &'static Kind) -> Contender {
            let session = store.session.clone();
            Contender(
                Box::pin(async move {
                    let attempt = Budget::forever();
                    contend(&session, LOCK, kind, &attempt, None, b"").await
                }),
                store.sim.clone(),
            )
        }

        /// Runs the acquisition until it waits (`None`) or ends.
        fn poll(&mut self) -> Option<Outcome> {
            self.1.poll(self.0.as_mut())
        }

        fn waits(&mut self) {
            if let Some(outcome) = self.poll() {
                panic!(
                    "expected a wait, got {:?}",
                    outcome.map(|c| c.map(|c| c.node_path))
                );
            }
        }

        fn claims(&mut self, store: &Store) {
            let claimed = self
                .poll()
                .expect("done")
                .expect("no error")
                .expect("claimed");
            assert_eq!(claimed.node_path, format!("{LOCK}/{}", store.ours()[0]));
        }

        fn loses(&mut self) {
            match self.poll() {
                Some(Err(Error::LockLost { path })) => assert_eq!(path, LOCK),
                other => panic!("expected LockLost, got {:?}", other.map(|o| o.is_ok())),
            }
        }
    }

    #[test]
    fn the_blockers_deletion_hands_the_lock_over() {
        let store = Store::new(LOCK);
        let holder = store.add_other("lock-");
        let mut waiter = Contender::new(&store, &EXCLUSIVE);
        waiter.waits();
        assert_eq!(store.last_watched(), Some(holder.clone()));
        waiter.waits();
        store.delete(&holder);
        waiter.claims(&store);
        assert_eq!(store.ours().len(), 1, "the claimed node stays");
    }

    #[test]
    fn a_node_ahead_withdrawing_makes_the_waiter_wait_on_the_next_one() {
        let store = Store::new(LOCK);
        let holder = store.add_other("lock-");
        let queued = store.add_other("lock-");
        let mut waiter = Contender::new(&store, &EXCLUSIVE);
        waiter.waits();
        assert_eq!(store.last_watched(), Some(queued.clone()));
        let listings = store.listings();
        store.delete(&queued);
        waiter.waits();
        assert!(store.listings() > listings, "listed again");
        assert_eq!(store.last_watched(), Some(holder.clone()));
        store.delete(&holder);
        waiter.claims(&store);
    }

    #[test]
    fn readers_ignore_readers() {
        let store = Store::new(LOCK);
        store.add_other("__READ__");
        store.add_other("__READ__");
        let mut reader = Contender::new(&store, &READER);
        reader.claims(&store);
        assert_eq!(store.last_watched(), None, "never waited");

        // Behind a writer, a reader waits for that writer, not for the reader queued between.
        let store = Store::new(LOCK);
        store.add_other("__READ__");
        let writer = store.add_other("__WRIT__");
        store.add_other("__READ__");
        let mut reader = Contender::new(&store, &READER);
        reader.waits();
        assert_eq!(store.last_watched(), Some(writer.clone()));
        store.delete(&writer);
        reader.claims(&store);
    }

    #[test]
    fn a_writer_queues_behind_readers() {
        let store = Store::new(LOCK);
        let first = store.add_other("__READ__");
        let second = store.add_other("__READ__");
        let mut writer = Contender::new(&store, &WRITER);
        writer.waits();
        assert_eq!(store.last_watched(), Some(second.clone()));
        store.delete(&second);
        writer.waits();
        assert_eq!(store.last_watched(), Some(first.clone()));
        store.delete(&first);
        writer.claims(&store);
    }

    #[test]
    fn a_reconnect_makes_the_waiter_look_again() {
        let store = Store::new(LOCK);
        let holder = store.add_other("lock-");
        let mut waiter = Contender::new(&store, &EXCLUSIVE);
        waiter.waits();
        store.disconnect();
        waiter.waits();
        // Released during the outage, and the notification lost with the connection (the
        // server forgot the watch with it, and the reconnect's SetWatches misses the change).
        store.delete(&holder);
        waiter.waits();
        store.reconnect_missing_changes();
        waiter.claims(&store);
    }

    #[test]
    fn our_node_deleted_while_waiting_is_a_lost_lock() {
        let store = Store::new(LOCK);
        let holder = store.add_other("lock-");
        let mut waiter = Contender::new(&store, &EXCLUSIVE);
        waiter.waits();
        let ours = store.ours().pop().expect("queued");
        store.delete(&ours);
        waiter.waits();
        store.delete(&holder);
        waiter.loses();
        assert!(store.ours().is_empty());
    }

    /// Our session's nodes, in queue order.
    fn ours_in_order(store: &Store) -> Vec<String> {
        let mut ours = store.ours();
        ours.sort_by(|a, b| a[a.len() - 10..].cmp(&b[b.len() - 10..]));
        ours
    }

    impl Contender {
        /// The node claimed, now that the acquisition ends.
        fn claimed(&mut self) -> String {
            let claimed = self.poll().expect("done").expect("no error");
            let node_path = claimed.expect("claimed").node_path;
            node_path.rsplit('/').next().unwrap().to_owned()
        }
    }

    #[test]
    fn what_the_session_learnt_spares_the_listing_at_a_handoff() {
        let store = Store::new(LOCK);
        let holder = store.add_other("lock-");
        let mut first = Contender::new(&store, &EXCLUSIVE);
        first.waits();
        let mut second = Contender::new(&store, &EXCLUSIVE);
        second.waits();
        let [first_node, second_node] = <[String; 2]>::try_from(ours_in_order(&store)).unwrap();
        assert_eq!(store.last_watched(), Some(first_node.clone()));
        let listings = store.listings();
        store.delete(&holder);
        assert_eq!(first.claimed(), first_node);
        // `first` held the lock with nothing ahead, so the holder's node, which `second`
        // listed ahead of `first`'s, is gone: `first`'s release hands over without a listing.
        store.delete(&first_node);
        assert_eq!(second.claimed(), second_node);
        assert_eq!(store.listings(), listings, "no listing at either handoff");
    }

    #[test]
    fn a_node_ahead_withdrawing_is_no_handoff_even_with_what_was_learnt() {
        let store = Store::new(LOCK);
        let holder = store.add_other("lock-");
        let mut first = Contender::new(&store, &EXCLUSIVE);
        first.waits();
        let mut second = Contender::new(&store, &EXCLUSIVE);
        second.waits();
        let first_node = ours_in_order(&store)[0].clone();
        // `first` gives up (its node is withdrawn) while the holder still holds: `second`
        // must wait for the holder.
        drop(first);
        assert!(!store.ours().contains(&first_node));
        let listings = store.listings();
        second.waits();
        assert!(store.listings() > listings, "listed again");
        assert_eq!(store.last_watched(), Some(holder.clone()));
        store.delete(&holder);
        second.claims(&store);
    }

    #[test]
    fn a_used_up_counter_queues_nothing() {
        let store = Store::new(LOCK);
        store.set_counter(i32::MAX - 1);
        let holder = store.add_other("lock-");
        // Numbered 2147483647, as every node after it would be: refused, and withdrawn.
        let mut late = Contender::new(&store, &EXCLUSIVE);
        match late.poll() {
            Some(Err(Error::SequenceExhausted { path })) => assert_eq!(path, LOCK),
            other => panic!(
                "expected SequenceExhausted, got {:?}",
                other.map(|o| o.is_ok())
            ),
        }
        drop(late);
        assert!(store.ours().is_empty(), "withdrawn");
        // Nor is the holder's place taken by a node numbered like the ones after it.
        let mut later = Contender::new(&store, &EXCLUSIVE);
        assert!(matches!(
            later.poll(),
            Some(Err(Error::SequenceExhausted { .. }))
        ));
        drop(later);
        store.delete(&holder);
        assert!(store.ours().is_empty());
    }

    #[test]
    fn a_node_of_another_session_is_not_claimed() {
        let store = Store::new(LOCK);
        store.report_owner(store.other);
        let mut contender = Contender::new(&store, &EXCLUSIVE);
        contender.loses();
        assert!(store.ours().is_empty(), "withdrawn, not held");
    }
}
