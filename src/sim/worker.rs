//! One simulated task: its acquisitions, one after the other, through the core's own sequences
//! and the front end every recipe runs, each held for a while (or until a revocation request)
//! and released; what it acquired and how it ended go to the book for the checks.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use crate::core::contend::take;
use crate::core::hold::Hold;
use crate::core::kind::Role;
use crate::core::ordered::take_in_order;
use crate::core::permits::take_permits;
use crate::core::seam::{NodeStore, SessionFacts};
use crate::core::wait::Budget;
use crate::error::Error;
use crate::recipes::catalogue::SEMAPHORE;
use crate::rt::cancel::CancelToken;
use crate::session::Liveness;
use crate::wire as zk;

use crate::core::sim::client::{sleep_until, Shared, SimSession};
use crate::core::sim::held::SimHeld;
use crate::core::sim::world::parent_of;

use super::book::{
    undocumented, Acquisition, DroppedAfter, Holder, SharedBook, Target, Wait, ONE_CALL,
};
use super::checks::check_deadline;
use super::local::{self, SharedLocalBook};

/// What an acquisition ends with: the nodes held, in the order taken.
type Acquired = crate::error::Result<Option<Vec<SimHeld>>>;

/// Holds until `until`, or, if `revocable` (the holder's own-node watches), until one of them
/// reports a revocation request (a change of its node's data): `true` then.
async fn hold(world: &Shared, until: Duration, revocable: Option<&[u64]>) -> bool {
    std::future::poll_fn(|cx| {
        let mut world = world.lock();
        for w in revocable.unwrap_or_default() {
            if world.watch_fired(*w, cx.waker()) == Some(Some(zk::EventType::NodeDataChanged)) {
                return Poll::Ready(true);
            }
        }
        if world.now >= until {
            return Poll::Ready(false);
        }
        world.add_timer(until, cx.waker());
        Poll::Pending
    })
    .await
}

/// One task: its acquisitions, one after the other, each held for a while and released.
pub(super) async fn worker(
    task: usize,
    session: Arc<SimSession>,
    book: SharedBook,
    local: SharedLocalBook,
    plan: Vec<Acquisition>,
) {
    for acquisition in plan {
        if !acquisition.pause.is_zero() {
            let until = session.world.lock().now + acquisition.pause;
            sleep_until(&session.world, until).await;
        }
        if session.liveness() == Liveness::Ended {
            return;
        }
        let now = session.now();
        let started = session.world.lock().now;
        book.borrow_mut().waits.remove(&task);
        let (mut attempt, deadline) = match acquisition.wait {
            Wait::Forever => (Budget::forever(), None),
            Wait::Try => (Budget::dont_wait(), Some(now + ONE_CALL)),
            Wait::Timeout(timeout) => (Budget::until(now + timeout, timeout), Some(now + timeout)),
        };
        let cancel = CancelToken::new();
        if acquisition.cancel_after.is_some() {
            attempt = attempt.cancelled_by(&cancel);
        }
        let lock = acquisition.lock.as_str();
        if let (Target::Lock(kind), Some(batch)) = (&acquisition.target, acquisition.local) {
            if local::applies(kind) {
                if !local::turn(task, &session, (&book, &local), &acquisition, kind, batch).await {
                    return;
                }
                continue;
            }
        }
        // The core's own sequences, as the recipes run them (`recipes/*.rs`).
        let acquiring: Pin<Box<dyn Future<Output = Acquired>>> = match &acquisition.target {
            Target::Lock(kind) => Box::pin(async {
                let held = take(&session, lock, kind, &attempt, deadline).await?;
                Ok(held.map(|held| vec![held]))
            }),
            Target::Leases { permits, count } => Box::pin(async {
                let semaphore = SEMAPHORE.at(lock, *permits);
                // (A release in the simulation never waits: see `SimHeld`.)
                let gate_wait = Duration::ZERO;
                take_permits(&session, &semaphore, *count, &attempt, deadline, gate_wait).await
            }),
            Target::Multi(members) => {
                Box::pin(take_in_order(&session, members, &attempt, deadline))
            }
        };
        // Through the front end every recipe runs (`Budget::run`): a call that does not
        // acquire waits for its withdrawals, on the virtual clock.
        let closes = CancelToken::new();
        let world = session.world.clone();
        let acquiring: Pin<Box<dyn Future<Output = Acquired> + '_>> = Box::pin(attempt.run_on(
            &closes,
            acquiring,
            || session.now(),
            move |at| {
                let at = at.saturating_duration_since(world.lock().origin);
                sleep_until(&world, at)
            },
        ));
        let acquiring: Pin<Box<dyn Future<Output = Acquired> + '_>> = match acquisition.cancel_after
        {
            Some(after) => Box::pin(cancelled_after(
                &session.world,
                started + after,
                &cancel,
                acquiring,
            )),
            None => acquiring,
        };
        let outcome = match acquisition.drop_after {
            Some(polls) => {
                DroppedAfter {
                    inner: Some(acquiring),
                    polls,
                }
                .await
            }
            None => Some(acquiring.await),
        };
        // What the call promised: its deadline, or its cancel, whichever came first.
        let due = match acquisition.wait {
            Wait::Timeout(timeout) => Some(started + timeout),
            _ => None,
        };
        let due = match (due, acquisition.cancel_after) {
            (Some(due), Some(after)) => Some(due.min(started + after)),
            (due, after) => due.or(after.map(|after| started + after)),
        };
        if let (Some(_), Some(due)) = (&outcome, due) {
            check_deadline(task, &session, &book, lock, due);
        }
        let Some(outcome) = outcome else {
            session
                .world
                .lock()
                .note(|| format!("task {task} dropped its acquisition of {lock}"));
            continue;
        };
        match outcome {
            Ok(None) => {}
            Ok(Some(mut taken)) => {
                let mut watches = Vec::new();
                for (i, held) in taken.iter().enumerate() {
                    let claimed = &held.claimed;
                    let last = i + 1 == taken.len();
                    // The lock each node holds, and as what.
                    let (held_lock, role) = match &acquisition.target {
                        Target::Lock(kind) => (lock, kind.names[kind.ours].1),
                        Target::Leases { .. } => (lock, Role::Lease),
                        Target::Multi(members) => {
                            let path = parent_of(&claimed.node_path);
                            let (path, kind) = members
                                .iter()
                                .find(|(p, _)| p == path)
                                .expect("a node of a member");
                            (path.as_str(), kind.names[kind.ours].1)
                        }
                    };
                    {
                        // Never a node it had seen gone: no answer it read was given after the
                        // node's deletion.
                        let world = session.world.lock();
                        let removed = world.removed.get(&claimed.stat.czxid).copied();
                        let seen = world.task_seen.get(&task).copied().unwrap_or(0);
                        // (Unless the operator put a node of its own under that name and the
                        // claim was decided on a listing: a listing shows names only, and the
                        // core claims by name on it. Decided on a read of the node, it must see
                        // the change.)
                        let on_listing = world.task_last.get(&task) == Some(&"children");
                        let replaced = on_listing && world.replaced.contains(&claimed.node_path);
                        // (A node taken before the last may have been deleted by the operator
                        // since it was claimed, while the task waited for the next one.)
                        let earlier = !last && world.operator_removed.contains(&claimed.stat.czxid);
                        let removed = removed.filter(|_| !replaced && !earlier);
                        if let Some(removed) = removed.filter(|removed| *removed <= seen) {
                            let line = format!(
                                "task {task} holds {}, deleted at zxid {removed}, after reading \
                                 an answer of zxid {seen}",
                                claimed.node_path
                            );
                            drop(world);
                            book.borrow_mut().violations.push(line);
                        }
                    }
                    if claimed.stat.ephemeral_owner != session.id {
                        let line = format!(
                            "task {task} holds {}, a node of {:#x}, not of its session",
                            claimed.node_path, claimed.stat.ephemeral_owner
                        );
                        book.borrow_mut().violations.push(line);
                    }
                    let watch = {
                        let mut world = session.world.lock();
                        world
                            .note(|| format!("task {task} holds {} ({role:?})", claimed.node_path));
                        world.watch_now(session.id, &claimed.node_path)
                    };
                    watches.push(watch);
                    let mut book = book.borrow_mut();
                    book.acquired += 1;
                    book.holders.push(Holder {
                        czxid: claimed.stat.czxid,
                        local: 0,
                        fenced: false,
                        task,
                        lock: held_lock.to_owned(),
                        role,
                        session: session.id,
                        node_path: claimed.node_path.clone(),
                        watch,
                    });
                }
                let until = session.world.lock().now + acquisition.hold;
                let revocable = acquisition.revocable.then_some(&watches[..]);
                if hold(&session.world, until, revocable).await {
                    session
                        .world
                        .lock()
                        .note(|| format!("task {task} releases on a revocation request"));
                }
                book.borrow_mut().holders.retain(|h| h.task != task);
                for watch in watches {
                    session.world.lock().unwatch(watch);
                }
                // The guard's release, in reverse order of taking: deleted in the background
                // until gone or the session has ended.
                while let Some(mut held) = taken.pop() {
                    held.release_in_background(());
                }
            }
            Err(err) => {
                if let Some(wrong) = undocumented(&err, &acquisition) {
                    let line = format!("task {task}: {wrong}");
                    book.borrow_mut().violations.push(line);
                }
                if matches!(err, Error::SessionExpired) {
                    return;
                }
            }
        }
    }
}

/// Runs `acquiring`, cancelling `token` once the virtual clock reaches `at` (the caller's
/// other thread, or its shutdown).
async fn cancelled_after<T>(
    world: &Shared,
    at: Duration,
    token: &CancelToken,
    acquiring: impl Future<Output = T>,
) -> T {
    let mut acquiring = std::pin::pin!(acquiring);
    let mut timer = std::pin::pin!(sleep_until(world, at));
    let mut cancelled = false;
    std::future::poll_fn(|cx| {
        if !cancelled && timer.as_mut().poll(cx).is_ready() {
            cancelled = true;
            world.lock().note(|| "cancel".to_owned());
            token.cancel();
        }
        acquiring.as_mut().poll(cx)
    })
    .await
}
