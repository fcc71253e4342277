//! Local handoff in the simulation (issue 36): in some schedules a process's tasks take the
//! mutex or the write lock through its local queue ([`Cohort`]), the very code the recipes
//! run, on the simulated session. Besides the schedule's invariants (no two holders reading
//! `Held` at once, tokens, now with their local number, strictly increasing; nothing left
//! behind), two are the handoff's own:
//! - a node is passed on only while its lease reads `Held` at that instant, by the rule every
//!   reader of a guard uses (the holder's own view: its session and its own node's watch);
//! - another contender waits at most `batch` local holds from its node's creation: when a
//!   hold of a node begins, no other node of its lock path was created before more than
//!   `batch` of that node's holds began (creation and holds ordered by the server's zxid,
//!   whenever any reply or notification was read).

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::core::cohort::{
    wait_locally, Check, Checker, Claim, Cohort, Contention, LocalNode, Release,
};
use crate::core::contend::{contend, gave_up, past_deadline_is_busy};
use crate::core::kind::{Kind, Role};
use crate::core::seam::{NodeStore, ZkSession};
use crate::core::wait::Attempt;
use crate::session::NodeStat;

use crate::core::sim::client::{sleep_until, SimSession};
use crate::core::sim::world::{Rng, World};

use super::{session_reads_held, undocumented, Acquisition, Holder, SharedBook, Wait, ONE_CALL};

/// What the checks follow of one node held through a local queue, shared by its local
/// holders one after the other.
#[derive(Default)]
pub(super) struct NodeRecord {
    batch: u32,
    /// The lock path, and our node's name in it.
    lock: String,
    name: String,
    /// The server's latest zxid when each hold of the node began.
    holds: Vec<i64>,
    released: bool,
    violations: Vec<String>,
}

impl NodeRecord {
    /// A hold begins in `world`: checks the bound on every other node of the lock path.
    fn begins(&mut self, world: &World) {
        let now = world.zxid();
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

/// The local queues and node records of a schedule.
#[derive(Default)]
pub(super) struct LocalBook {
    cohorts: std::collections::BTreeMap<(i64, String), Arc<Cohort<SimHold>>>,
    records: Vec<Record>,
    /// Local handoffs and releases through the server, for the report.
    pub(super) handoffs: u64,
}

/// Whether local handoff applies to `kind` (as `recipes/queue.rs` decides).
pub(super) fn applies(kind: &Kind) -> bool {
    matches!(kind.names[kind.ours].1, Role::Exclusive | Role::Write)
}

/// The batch of a process with local handoff, or `None`: drawn from a generator of its own,
/// so that schedules without local handoff keep their draws.
pub(super) fn batch(rng: &mut Rng) -> Option<u32> {
    rng.chance(50).then(|| 1 + rng.below(4) as u32)
}

/// After every step: collects the records' violations, and forgets released nodes.
pub(super) fn observe(book: &mut super::Book) {
    let records = &mut book.local.records;
    for record in records.iter() {
        book.violations.append(&mut record.lock().violations);
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
    /// The holder's watch on its own node (the guard's), passed along.
    own: u64,
    record: Record,
    cohort: Option<Arc<Cohort<SimHold>>>,
    spent: bool,
}

impl SimHold {
    /// Reads `Held` now, by the holder's own view (its session, its own node's watch).
    fn reads_held(&self, world: &World, now: Instant) -> bool {
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
        self.session.withdraw_in_background(&self.node_path, ());
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
                (Attempt::dont_wait(), Some(session.now() + ONE_CALL))
            } else {
                (Attempt::forever(), None)
            };
            let contended = contend(&session, &lock, kind, &attempt, deadline, b"").await;
            let Some(claimed) = past_deadline_is_busy(session.as_ref(), deadline, contended)?
            else {
                return Ok(None);
            };
            let own = session
                .world
                .lock()
                .watch_now(session.id, &claimed.node_path);
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
                ..NodeRecord::default()
            }));
            let hold = SimHold {
                session: session.clone(),
                node_path: claimed.node_path.clone(),
                stat: claimed.stat,
                local: 0,
                own,
                record,
                cohort: None,
                spent: false,
            };
            let checks: Checker = Box::new(move || -> Check {
                let (session, lock, ours) = (session.clone(), lock.clone(), name.clone());
                Box::pin(async move {
                    let deadline = Some(session.now() + ONE_CALL);
                    matches!(session.list(&lock, deadline).await, Ok(names) if names == [ours])
                })
            });
            Ok(Some(Claim { node: hold, checks }))
        })
    }
}

/// One acquisition of `kind` through the process's local queue, held for a while and
/// released, as a task of the schedule makes it; `false` once the session has expired.
pub(super) async fn turn(
    task: usize,
    session: &Arc<SimSession>,
    book: &SharedBook,
    acquisition: &Acquisition,
    kind: &'static Kind,
    batch: u32,
) -> bool {
    let lock = acquisition.lock.as_str();
    let cohort = book
        .borrow_mut()
        .local
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
        .unwrap_or_else(|| gave_up(session.as_ref()))
    };
    let outcome = match acquisition.drop_after {
        Some(polls) => {
            super::Budget {
                inner: Some(Box::pin(waiting)),
                polls,
            }
            .await
        }
        None => Some(waiting.await),
    };
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
        if hold.local == 0 {
            book.local.records.push(hold.record.clone());
        } else {
            book.local.handoffs += 1;
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

/// The hold of a local acquisition (kept short: local holders take turns).
pub(super) fn hold(rng: &mut Rng) -> Duration {
    Duration::from_millis(rng.below(300) as u64)
}
