//! Local handoff in the simulation: in some schedules a process's tasks take the
//! mutex or the write lock through its local queue ([`Cohort`]), the very code the recipes
//! run, on the simulated session. Besides the schedule's invariants (no two holders reading
//! `Held` at once, tokens, now with their local number, strictly increasing; nothing left
//! behind), two are the handoff's own:
//! - a node is passed on only while its lease reads `Held` at that instant, by the rule every
//!   reader of a guard uses (the holder's own view: its session and its own node's watch);
//! - another contender waits at most `batch` local holds from its node's creation: when a
//!   hold of a node begins, no other node of its lock path was created before more than
//!   `batch` of that node's holds began (creation and holds ordered by the server's zxid,
//!   whenever any reply or notification was read);
//! - no hold of a node deleted by someone else (the operator's `break`) begins once its
//!   deletion could be known: once its session has read any answer given after the deletion
//!   (a watch on the node would have fired before it);
//! - a local caller whose session ended while it waited returns within the bound a caller
//!   waiting on the server has (`ENDED_BOUND` after its client learnt of the end), and never
//!   with a node of the ended session.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::core::cohort::{
    ended, wait_locally, Check, Checked, Checker, Claim, Cohort, Contention, LocalNode, Release,
};
use crate::core::contend::{contend, past_deadline_is_busy};
use crate::core::kind::{Kind, Role};
use crate::core::seam::{NodeStore, SessionFacts, ZkSession};
use crate::core::sim::TIMEOUT;
use crate::core::wait::Budget;
use crate::core::withdraw::{Withdrawals, Withdrawing};
use crate::session::{Liveness, NodeStat};
use crate::wire as zk;

use crate::core::sim::client::{sleep_until, SimSession};
use crate::core::sim::world::{Rng, World};

use super::book::{
    session_reads_held, undocumented, Acquisition, DroppedAfter, Holder, SharedBook, Wait, ONE_CALL,
};

/// What the checks follow of one node held through a local queue, shared by its local
/// holders one after the other.
#[derive(Default)]
pub(super) struct NodeRecord {
    batch: u32,
    /// The lock path, and our node's name in it.
    lock: String,
    name: String,
    /// The node's czxid, and its session.
    czxid: i64,
    session: i64,
    /// The server's latest zxid when each hold of the node began.
    holds: Vec<i64>,
    released: bool,
    violations: Vec<String>,
}

impl NodeRecord {
    /// A hold begins in `world`: checks the bound on every other node of the lock path.
    fn begins(&mut self, world: &World) {
        let now = world.zxid();
        // (The claim's hold is the core's: see the check of a claim in `worker.rs`.)
        let known = deletion_known(world, self.czxid, self.session);
        if let Some((deleted, seen)) = known.filter(|_| !self.holds.is_empty()) {
            let line = format!(
                "{}/{}: local hold {} began after its deletion at zxid {deleted} could be \
                 known (its session had read zxid {seen})",
                self.lock,
                self.name,
                self.holds.len()
            );
            self.violations.push(line);
        }
        self.holds.push(now);
        for (name, czxid) in world.children_created(&self.lock) {
            if name == self.name {
                continue;
            }
            // Holds begun since that node was created (at or after its zxid).
            let since = self.holds.iter().filter(|&&at| at >= czxid).count();
            if since > self.batch.max(1) as usize {
                let line = format!(
                    "{}/{}: {since} local holds began after {name} was created (batch {})",
                    self.lock, self.name, self.batch
                );
                self.violations.push(line);
            }
        }
    }
}

type Record = Arc<Mutex<NodeRecord>>;

/// The zxid that deleted the node `czxid` and the latest its session `id` read, if the
/// deletion could be known to the session: it read an answer given after it (a watch on the
/// node would have fired before).
fn deletion_known(world: &World, czxid: i64, id: i64) -> Option<(i64, i64)> {
    let deleted = *world.removed.get(&czxid)?;
    let seen = world.session(id).seen_zxid;
    (deleted <= seen).then_some((deleted, seen))
}

/// The local queues and node records of a schedule.
#[derive(Default)]
pub(super) struct LocalBook {
    cohorts: std::collections::BTreeMap<(i64, String), Arc<Cohort<SimHold>>>,
    records: Vec<Record>,
    /// Local handoffs and releases through the server, for the report.
    pub(super) handoffs: u64,
}

/// The [`LocalBook`] the scheduler and its tasks share.
pub(super) type SharedLocalBook = Rc<RefCell<LocalBook>>;

/// Whether local handoff applies to `kind` (as `recipes/queue.rs` decides).
pub(super) fn applies(kind: &Kind) -> bool {
    matches!(kind.names[kind.ours].1, Role::Exclusive | Role::Write)
}

/// The batch of a process with local handoff, or `None`: drawn from a generator of its own,
/// so that schedules without local handoff keep their draws.
pub(super) fn batch(rng: &mut Rng) -> Option<u32> {
    rng.chance(50).then(|| 1 + rng.below(4) as u32)
}

/// After every step: collects the records' violations into `violations`, and forgets
/// released nodes.
pub(super) fn observe(book: &mut LocalBook, violations: &mut Vec<String>) {
    let records = &mut book.records;
    for record in records.iter() {
        violations.append(&mut record.lock().violations);
    }
    records.retain(|r| !r.lock().released);
}

/// A node held through a local queue, as a guard holds it: released (passed on, or deleted
/// in the background) when dropped.
pub(super) struct SimHold {
    session: Arc<SimSession>,
    node_path: String,
    stat: NodeStat,
    local: u16,
    /// The holder's watch on its own node (the guard's), passed along; 0 until set.
    own: u64,
    record: Record,
    cohort: Option<Arc<Cohort<SimHold>>>,
    spent: bool,
    /// Told when its release through the server is settled.
    done: Option<Withdrawing>,
}

impl SimHold {
    /// Reads `Held` now, by the holder's own view (its session, its own node's watch).
    fn reads_held(&self, world: &World, now: Instant) -> bool {
        // The guard's watch reads the node again after a change (a revocation request) and
        // watches it anew, where the simulation's one-shot watch has fired: it learns of a
        // deletion as soon as that could be known.
        let changed = world.watch_event(self.own) == Some(zk::EventType::NodeDataChanged);
        if changed && deletion_known(world, self.stat.czxid, self.session.id).is_some() {
            return false;
        }
        session_reads_held(world, self.session.id, self.own, now)
    }
}

impl LocalNode for SimHold {
    fn may_hand_on(&self) -> bool {
        let world = self.session.world.lock();
        self.reads_held(&world, world.instant())
    }

    fn local(&self) -> u16 {
        self.local
    }

    fn hand_on(&mut self) -> SimHold {
        {
            let world = self.session.world.lock();
            if !self.reads_held(&world, world.instant()) {
                let line = format!(
                    "{} handed on (local {}) while its lease did not read Held",
                    self.node_path, self.local
                );
                self.record.lock().violations.push(line);
            }
        }
        self.spent = true;
        SimHold {
            session: self.session.clone(),
            node_path: self.node_path.clone(),
            stat: self.stat,
            local: self.local + 1,
            own: self.own,
            record: self.record.clone(),
            cohort: self.cohort.take(),
            spent: false,
            done: None,
        }
    }

    fn join(&mut self, cohort: Arc<Cohort<SimHold>>) {
        self.cohort = Some(cohort);
    }

    fn leave(&mut self) {
        self.cohort = None;
    }

    fn begins(&mut self) {
        let world = self.session.world.lock();
        self.record.lock().begins(&world);
    }

    fn claimed(&mut self) {
        // The guard's own-node watch, set at the claim; a node gone already fails its read.
        let mut world = self.session.world.lock();
        if self.own == 0 {
            self.own = world.watch_now(self.session.id, &self.node_path);
        }
        if world.removed.contains_key(&self.stat.czxid) {
            world.fire(self.own, zk::EventType::NodeDeleted);
        }
    }

    fn path(&self) -> &str {
        &self.node_path
    }

    fn withdraw(mut self, withdrawals: &Withdrawals) {
        let connected = self.session.liveness() == Liveness::Connected;
        self.done = connected.then(|| withdrawals.begin());
    }

    fn session_ended(&self) -> Option<crate::error::Error> {
        (self.session.liveness() == Liveness::Ended).then(|| self.session.ended_error())
    }
}

impl Drop for SimHold {
    fn drop(&mut self) {
        if self.spent {
            return;
        }
        if let Some(Release::Handed) = self.cohort.take().map(|c| c.release(self)) {
            return;
        }
        self.record.lock().released = true;
        self.session.world.lock().unwatch(self.own);
        // The guard's release: deleted in the background until gone or the session has
        // ended.
        self.session
            .withdraw_in_background(&self.node_path, self.done.take());
    }
}

/// The contentions of one process's local queue on `lock`: the core's acquisition, and the
/// checks of the bound on the node claimed (listings, as the recipes send them).
fn start(
    session: &Arc<SimSession>,
    lock: &str,
    kind: &'static Kind,
    batch: u32,
) -> impl FnMut(bool) -> Contention<SimHold> + Unpin {
    let (session, lock) = (session.clone(), lock.to_owned());
    move |try_only| {
        let (session, lock) = (session.clone(), lock.clone());
        Box::pin(async move {
            let (attempt, deadline) = if try_only {
                (Budget::dont_wait(), Some(session.now() + ONE_CALL))
            } else {
                (Budget::forever(), None)
            };
            let contended = contend(&session, &lock, kind, &attempt, deadline, b"").await;
            let Some(claimed) = past_deadline_is_busy(session.as_ref(), deadline, contended)?
            else {
                return Ok(None);
            };
            let name = claimed
                .node_path
                .rsplit('/')
                .next()
                .unwrap_or("")
                .to_owned();
            let record = Arc::new(Mutex::new(NodeRecord {
                batch,
                lock: lock.clone(),
                name: name.clone(),
                czxid: claimed.stat.czxid,
                session: session.id,
                ..NodeRecord::default()
            }));
            let hold = SimHold {
                session: session.clone(),
                node_path: claimed.node_path.clone(),
                stat: claimed.stat,
                local: 0,
                own: 0,
                record,
                cohort: None,
                spent: false,
                done: None,
            };
            let ended = ended(session.clone());
            let checks: Checker = Box::new(move || -> Check {
                let (session, lock, ours) = (session.clone(), lock.clone(), name.clone());
                Box::pin(async move {
                    let deadline = Some(session.now() + ONE_CALL);
                    match session.list(&lock, deadline).await {
                        Ok(names) => Checked::of(&names, &ours),
                        Err(_) => Checked::Others,
                    }
                })
            });
            Ok(Some(Claim {
                node: hold,
                checks,
                ended,
            }))
        })
    }
}

/// One acquisition of `kind` through the process's local queue, held for a while and
/// released, as a task of the schedule makes it; `false` once the session has expired.
pub(super) async fn turn(
    task: usize,
    session: &Arc<SimSession>,
    (book, local): (&SharedBook, &SharedLocalBook),
    acquisition: &Acquisition,
    kind: &'static Kind,
    batch: u32,
) -> bool {
    let lock = acquisition.lock.as_str();
    let cohort = local
        .borrow_mut()
        .cohorts
        .entry((session.id, lock.to_owned()))
        .or_insert_with(|| Arc::new(Cohort::new(batch, kind.metric)))
        .clone();
    let now = session.now();
    let (try_only, deadline) = match acquisition.wait {
        Wait::Forever => (false, None),
        Wait::Try => (true, None),
        Wait::Timeout(timeout) => (false, Some(now + timeout)),
    };
    let waiting = async {
        wait_locally(
            session.as_ref(),
            &cohort,
            try_only,
            deadline,
            start(session, lock, kind, batch),
        )
        .await
        .unwrap_or_else(|elapsed| elapsed.outcome(session.liveness()))
    };
    let outcome = match acquisition.drop_after {
        Some(polls) => {
            DroppedAfter {
                inner: Some(Box::pin(waiting)),
                polls,
            }
            .await
        }
        None => Some(waiting.await),
    };
    if let Some(outcome) = &outcome {
        let world = session.world.lock();
        if let Some(line) = outlived(&world, session.id, now, outcome) {
            book.borrow_mut()
                .violations
                .push(format!("task {task}: {line}"));
        }
    }
    let Some(outcome) = outcome else {
        let mut world = session.world.lock();
        world.note(|| format!("task {task} dropped its local acquisition of {lock}"));
        return true;
    };
    let hold = match outcome {
        Ok(Some(hold)) => hold,
        Ok(None) => return true,
        Err(err) => {
            if let Some(wrong) = undocumented(&err, acquisition) {
                let line = format!("task {task}: {wrong}");
                book.borrow_mut().violations.push(line);
            }
            return !matches!(err, crate::error::Error::SessionExpired);
        }
    };
    if hold.stat.ephemeral_owner != session.id {
        let line = format!(
            "task {task} holds {}, a node of {:#x}, not of its session",
            hold.node_path, hold.stat.ephemeral_owner
        );
        book.borrow_mut().violations.push(line);
    }
    session.world.lock().note(|| {
        format!(
            "task {task} holds {} (local {})",
            hold.node_path, hold.local
        )
    });
    {
        let mut book = book.borrow_mut();
        book.acquired += 1;
        let mut local = local.borrow_mut();
        if hold.local == 0 {
            local.records.push(hold.record.clone());
        } else {
            local.handoffs += 1;
        }
        book.holders.push(Holder {
            czxid: hold.stat.czxid,
            local: hold.local,
            fenced: false,
            task,
            lock: lock.to_owned(),
            role: kind.names[kind.ours].1,
            session: session.id,
            node_path: hold.node_path.clone(),
            watch: hold.own,
        });
    }
    let until = session.world.lock().now + acquisition.hold;
    sleep_until(&session.world, until).await;
    book.borrow_mut().holders.retain(|h| h.task != task);
    drop(hold);
    true
}

/// How long after its client learnt that its session ended a local caller waiting then may
/// still wait: a caller waiting on the server is woken at once, and is polled within a few
/// steps unless its process is frozen again (at most twice the session timeout).
const ENDED_BOUND: Duration = Duration::from_secs(3 * TIMEOUT.as_secs());

/// Why a local caller that began waiting at `since` and returned `outcome` now waited past
/// the end of its session `id` (see the module docs); `None` if it did not.
fn outlived(
    world: &World,
    id: i64,
    since: Instant,
    outcome: &crate::error::Result<Option<SimHold>>,
) -> Option<String> {
    let ended_at = world.session(id).ended_at?;
    let ended = world.origin + ended_at;
    if ended < since {
        return None;
    }
    // (A claim's node is the core's, given as without local handoff.)
    if let Ok(Some(hold)) = outcome {
        if hold.local == 0 {
            return None;
        }
        return Some(format!(
            "a local caller got {} (local {}) after its session ended",
            hold.node_path, hold.local
        ));
    }
    let waited = world.instant().saturating_duration_since(ended);
    (waited > ENDED_BOUND).then(|| {
        format!("a local caller returned {waited:?} after its session ended, waiting since then")
    })
}

/// The hold of a local acquisition: kept short (local holders take turns), but one in twenty
/// long, past a session's expiry (`long` is drawn apart, so the short ones keep their
/// draws).
pub(super) fn hold(rng: &mut Rng, long: &mut Rng) -> Duration {
    let short = Duration::from_millis(rng.below(300) as u64);
    if long.chance(5) {
        return 10 * TIMEOUT;
    }
    short
}
