//! The invariants the scheduler checks: after every step, no two holders that read `Held` at
//! once (nor a writer and a reader, nor more leases than permits) and fencing tokens that only
//! grow; at quiescence, nothing left behind; and, for every acquisition that returns, its
//! deadline kept.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::core::kind::Role;

use crate::core::sim::client::{Shared, SimSession};
use crate::core::sim::world::OPERATOR;

use super::book::{reads_held, Holder, SharedBook};
use super::local::{self, SharedLocalBook};

/// After step `steps`: no two holders of one of `locks` that both read `Held` now, nor a
/// writer and a reader, nor more lease holders than the lock's `limits`; fencing tokens, in the
/// order their holders first read `Held`, strictly increasing; and local handoff's own checks.
pub(super) fn check_holders(
    world: &Shared,
    book: &SharedBook,
    local_book: &SharedLocalBook,
    locks: &[String],
    limits: &BTreeMap<String, usize>,
    steps: u64,
) {
    let world = world.lock();
    let mut book = book.borrow_mut();
    let now = world.instant();
    let mut violation = None;
    // Fencing tokens, in the order their holders first read `Held` (a holder that never
    // does, e.g. one frozen past its session, never uses its token).
    let book = &mut *book;
    local::observe(&mut local_book.borrow_mut(), &mut book.violations);
    for holder in book.holders.iter_mut() {
        if holder.fenced || matches!(holder.role, Role::Read | Role::Lease) {
            continue;
        }
        if !reads_held(&world, holder, now) {
            continue;
        }
        holder.fenced = true;
        let token = (holder.czxid, holder.local);
        let last = book.last_token.insert(holder.lock.clone(), token);
        if let Some(last) = last.filter(|last| *last >= token) {
            violation = Some(format!(
                "step {}: fencing token of {} went from {last:?} to {token:?} (task {})",
                steps, holder.lock, holder.task
            ));
        }
    }
    for lock in locks {
        let held: Vec<&Holder> = book
            .holders
            .iter()
            .filter(|h| &h.lock == lock && reads_held(&world, h, now))
            .collect();
        let exclusive = held
            .iter()
            .filter(|h| !matches!(h.role, Role::Read | Role::Lease))
            .count();
        let readers = held.iter().filter(|h| h.role == Role::Read).count();
        let leases = held.iter().filter(|h| h.role == Role::Lease).count();
        let permits = limits.get(lock).copied().unwrap_or(0);
        if exclusive > 1 || (exclusive == 1 && readers > 0) || leases > permits {
            let who: Vec<String> = held
                .iter()
                .map(|h| format!("task {} ({:?}) {}", h.task, h.role, h.node_path))
                .collect();
            violation = Some(format!(
                "step {}: {lock} held at once by {}",
                steps,
                who.join(", ")
            ));
        }
    }
    book.violations.extend(violation);
}

/// At quiescence, after step `steps`: no task left unfinished (`stuck` lists those that are),
/// no node left that no live call holds or waits for, no watch left.
pub(super) fn check_quiescence(shared: &Shared, book: &SharedBook, stuck: &[usize], steps: u64) {
    let world = shared.lock();
    let mut book = book.borrow_mut();
    if !stuck.is_empty() {
        book.violations.push(format!(
            "step {steps}: tasks {stuck:?} never ended after the faults stopped"
        ));
        drop(world);
        let outstanding = shared.lock().outstanding();
        let mut world = shared.lock();
        for line in outstanding {
            world.note(|| line);
        }
        return;
    }
    for (path, owner) in world.ephemerals() {
        if owner != OPERATOR {
            book.violations
                .push(format!("step {steps}: {path} of {owner:#x} left behind"));
        }
    }
    for (session, path) in world.live_watches() {
        book.violations.push(format!(
            "step {steps}: a watch of {session:#x} on {path} left registered"
        ));
    }
}

/// How long past its deadline (or its cancel) an acquisition may return: its withdrawals'
/// grace past the deadline (`PAST_DEADLINE_WITHDRAW_WAIT`) or after a cancel
/// (`CANCEL_WITHDRAW_WAIT`), a retry's pause, and a margin.
const PAST_DEADLINE: Duration = Duration::from_millis(250);

/// An acquisition of `task` that returned (acquired or not) waited at most [`PAST_DEADLINE`]
/// in all past `deadline` (on the virtual clock: its deadline, or its cancel if earlier): a
/// deadline is the caller's, also on a connection that has gone silent and still looks
/// connected. Counted are
/// its own waits (from a poll that left it pending to its next wake), not the scheduler's
/// delay in polling it once woken, nor a freeze of its process (its timers still fire).
pub(super) fn check_deadline(
    task: usize,
    session: &SimSession,
    book: &SharedBook,
    lock: &str,
    deadline: Duration,
) {
    let mut book = book.borrow_mut();
    let late: Duration = book
        .waits
        .remove(&task)
        .unwrap_or_default()
        .into_iter()
        .map(|(since, woken)| woken.saturating_sub(since.max(deadline)))
        .sum();
    if late > PAST_DEADLINE {
        let line = format!(
            "task {task}: an acquisition of {lock} waited {} ms past its deadline (or cancel)",
            late.as_millis()
        );
        session.world.lock().note(|| line.clone());
        book.violations.push(line);
    }
}
