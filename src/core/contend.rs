//! Contending for a lock: place our node, find the node that blocks it, wait for that node to
//! go (or the session to change), and claim the lock, leaving nothing behind on any other path.

use std::sync::Arc;
use std::time::Instant;

use log::debug;

use crate::error::{Error, Result};
use crate::rt::cancel::interruption;
use crate::session::listing::list_shared;
use crate::session::prefetch::{Prefetched, Then};
use crate::session::watch::{NodeEvent, Signal, Wake};
use crate::session::{Liveness, Session};
use crate::znode::layout::{check_data_size, nodes_ahead, owner_data, LockNode};

use super::claim::{claim, node_vanished};
use super::held::Held;
use super::kind::{Kind, Role};
use super::place::{create_node, Created};
use super::wait::{Attempt, Patience};
use super::withdraw::OurNode;

/// Acquires `lock_path` as a contender of `kind`, on `session`. `Ok(None)` when the lock was
/// busy and the patience ran out; nothing is left behind on any path that does not return
/// `Ok(Some(..))`.
///
/// The recipe's front end takes the session from its client, once per acquisition: every step
/// of an acquisition made of several nodes (a multi-lock's members, a semaphore's gate and
/// leases) must use one session, so that an expiry between two steps fails the whole
/// acquisition instead of mixing a lost node with fresh ones.
pub(crate) fn acquire_on(
    session: &Arc<Session>,
    lock_path: &str,
    kind: &Kind,
    attempt: &Attempt,
    deadline: Option<Instant>,
    options: &Options,
) -> Result<Option<Held>> {
    let patience = attempt.patience;
    let data = options.data.clone().unwrap_or_else(owner_data);
    check_data_size(&data)?;
    let contended = contend(session, lock_path, kind, patience, deadline, &data);
    let held = past_deadline_is_busy(session, deadline, contended)?;
    let Some(mut held) = held else {
        return Ok(None);
    };
    if options.revocable {
        let watch = session.watch_own_node(held.node_path())?;
        held.make_revocable(watch);
    }
    Ok(Some(held))
}

/// Per-acquisition choices of a recipe.
#[derive(Debug, Clone, Default)]
pub(crate) struct Options {
    /// Listen for revocation requests while held.
    pub(crate) revocable: bool,
    /// The node's data; [`owner_data`] if `None`.
    pub(crate) data: Option<Vec<u8>>,
}

/// The outcome of an acquisition's requests, with a request that ran into the deadline on a
/// live connection (a slow reply, or one that was simply still on its way when the time ran
/// out) read as a timeout, not an outage: the session layer reports every wait that reached
/// its deadline as [`Error::ConnectionLoss`], whatever the connection's state. Every
/// acquisition front end (`acquire_on`, `acquire_lease`) passes its outcome through here.
pub(super) fn past_deadline_is_busy(
    session: &Session,
    deadline: Option<Instant>,
    outcome: Result<Option<Held>>,
) -> Result<Option<Held>> {
    match outcome {
        Err(Error::ConnectionLoss) if deadline.is_some_and(|d| Instant::now() >= d) => {
            gave_up(session)
        }
        outcome => outcome,
    }
}

/// After the deadline: during an outage the caller learns that the lock could not be decided,
/// not that it is busy. A wait stopped by cancellation or by closing the client says so.
pub(super) fn gave_up(session: &Session) -> Result<Option<Held>> {
    if let Some(stopped) = interruption() {
        return Err(stopped);
    }
    if session.liveness() == Liveness::Connected {
        Ok(None)
    } else {
        Err(Error::ConnectionLoss)
    }
}

fn contend(
    session: &Arc<Session>,
    lock_path: &str,
    kind: &Kind,
    patience: Patience,
    deadline: Option<Instant>,
    data: &[u8],
) -> Result<Option<Held>> {
    let Some(Created {
        mut contender,
        name,
        stat,
        children,
        generation,
    }) = create_node(session, lock_path, kind.names[kind.ours].0, data, deadline)?
    else {
        return gave_up(session);
    };
    let lock_names = kind.lock_names();
    // (A name of ours that is no lock node would be missing from every listing.)
    let Some(ours) = LockNode::parse(name, &lock_names) else {
        return Err(node_vanished(&mut contender, lock_path));
    };
    // The nodes ahead of ours, when already known (from the listing taken with the create, or
    // read by the runtime as the blocker went).
    let mut known: Option<Option<Vec<LockNode>>> =
        children.map(|listed| nodes_ahead(&listed, &ours, &lock_names));
    // Set when woken by a reconnect: the listing may be shared with the session's other
    // waiters woken by it, if asked for since (see `listing.rs`).
    let mut shared_since: Option<Instant> = None;
    loop {
        let ahead = match (known.take(), shared_since.take()) {
            (Some(ahead), _) => ahead,
            (None, Some(since)) => {
                let listed = list_shared(session, lock_path, deadline, since)?;
                nodes_ahead(&listed, &ours, &lock_names)
            }
            (None, None) => nodes_ahead(&session.list(lock_path, deadline)?, &ours, &lock_names),
        };
        let Some(ahead) = ahead else {
            return Err(node_vanished(&mut contender, lock_path));
        };
        let Some(blocker) = (kind.blocker)(&ahead) else {
            return claim(contender, lock_path, stat, generation).map(Some);
        };
        if let Patience::DontWait = patience {
            return Ok(None);
        }
        let sole_blocker = kind.sole_blocker(&ahead, blocker);
        let blocker_path = format!("{lock_path}/{}", ahead[blocker].name);
        // The queue ahead can be long and the wait too: with many waiters, keeping each one's
        // copy alive grows memory with the square of the queue.
        drop(ahead);
        // A fresh mailbox per watch: an event the previous watch task posted on its way out
        // (say, a deletion delivered on reconnect) must not be read as news about this one.
        let signal = Signal::new();
        // What we will need to know once the blocker is deleted, asked from the runtime the
        // moment the deletion is notified (the round trip overlaps our wake-up): with no other
        // node ahead, only whether our own node is still there; else the queue.
        let then = if sole_blocker {
            Then::ReadOwn(contender.node_path.clone())
        } else {
            Then::Queue {
                path: lock_path.to_owned(),
                ours: ours.clone(),
                lock_names: lock_names.clone(),
                on_runtime: !matches!(kind.names[kind.ours].1, Role::Read),
            }
        };
        let (watch, prefetch) =
            match session.watch_node(&blocker_path, &signal, deadline, Some(then)) {
                Ok(Some(watched)) => watched,
                Ok(None) => continue, // Gone already: re-list at once.
                Err(Error::ConnectionLoss) => return gave_up(session),
                Err(err) => return Err(err),
            };
        debug!("{} waits for {blocker_path}", contender.node_path);
        match wait_for_change(session, &signal, &mut contender, deadline)? {
            Woken::Deleted if sole_blocker && session.liveness() == Liveness::Connected => {
                // No listing needed (nothing can be ahead of us now), but our own node must
                // still be there: someone may have deleted it while we waited. Reading one
                // node is cheaper than listing a long queue.
                let own = match prefetch.take() {
                    Some(Prefetched::Own(own)) => own,
                    _ => session
                        .get_data(&contender.node_path, deadline)?
                        .map(|(_, s)| s),
                };
                match own {
                    Some(now) if now.czxid == stat.czxid => {
                        return claim(contender, lock_path, stat, generation).map(Some)
                    }
                    _ => return Err(node_vanished(&mut contender, lock_path)),
                }
            }
            Woken::Deleted => {
                // The queue as it is after the deletion, if the runtime could read it.
                match prefetch.take() {
                    Some(Prefetched::Ahead(ahead)) => known = Some(ahead),
                    Some(Prefetched::Listing(listed)) => {
                        known = Some(nodes_ahead(&listed, &ours, &lock_names));
                    }
                    _ => {}
                }
            }
            Woken::Recheck => {}
            Woken::Reconnected { since } => shared_since = Some(since),
            Woken::TimedOut => return gave_up(session),
        }
        drop(watch);
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
    TimedOut,
}

/// Waits for the watch behind `signal` to fire, a reconnect, or the deadline. Session end is an
/// error (and disarms `contender`: the server already removed the node).
pub(super) fn wait_for_change(
    session: &Session,
    signal: &Signal,
    contender: &mut OurNode,
    deadline: Option<Instant>,
) -> Result<Woken> {
    let mut since = Instant::now();
    let mut disconnected_seen = false;
    // A state change may have slipped in before the watch task began listening: if not
    // connected now, start with a session change pending.
    let mut seen_changes: u64 = if session.liveness() == Liveness::Connected {
        0
    } else {
        u64::MAX
    };
    loop {
        match signal.wait(&mut seen_changes, deadline) {
            Wake::Node(NodeEvent::Deleted) => return Ok(Woken::Deleted),
            Wake::Node(NodeEvent::Changed) => return Ok(Woken::Recheck),
            Wake::Node(NodeEvent::SessionEnded) => break,
            Wake::SessionChanged => match session.liveness() {
                Liveness::Ended => break,
                // Reconnected: the client crate re-arms watches, but re-check rather than
                // trust that a deletion during the outage was delivered.
                Liveness::Connected => return Ok(Woken::Reconnected { since }),
                Liveness::Disconnected => {
                    if !disconnected_seen {
                        disconnected_seen = true;
                        since = Instant::now();
                    }
                    debug!("{}: connection lost while waiting", contender.node_path)
                }
            },
            Wake::TimedOut => return Ok(Woken::TimedOut),
        }
    }
    contender.armed = false;
    // The session ended: expired, or closed by us (a close also cancels, and the waiter may
    // see the session's end before the cancellation): say which.
    Err(interruption().unwrap_or_else(|| session.ended_error()))
}
