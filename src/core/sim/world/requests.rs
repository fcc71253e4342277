//! Requests and replies on each session's connection: a request's slot, the server
//! processing requests in order (with the unit tests' scripted faults), replies and
//! notifications delivered in order, callers giving up, and background work retried until
//! settled.

use std::collections::VecDeque;
use std::task::Waker;
use std::time::Duration;

use super::{parent_of, Op, Reply, World, ZkErr};
use crate::session::Liveness;
use crate::wire as zk;

/// One request slot: the answer once in, the task waiting for it, and whether the caller gave
/// up on it (a create whose node appears later is then deleted in the background).
pub(crate) struct Slot {
    pub(super) outcome: Option<Result<Reply, ZkErr>>,
    pub(super) waker: Option<Waker>,
    pub(super) abandoned: bool,
    /// What to do with the answer once in, whoever waits for it.
    pub(super) background: Option<Background>,
    /// The session that sent it.
    pub(super) session: i64,
    /// For a create: the parent and the name's prefix, to sweep if the caller gave up and
    /// the answer was lost.
    pub(super) create: Option<(String, String)>,
    /// The zxid the server was at when it answered (0 for an answer the client made up).
    pub(super) zxid: i64,
    /// What was asked.
    pub(super) label: &'static str,
}

/// Work a session does in the background until it is settled or the session ends, as the
/// real session's background tasks (withdrawal, release, cleanup of a late create, sweep).
#[derive(Debug, Clone)]
pub(crate) enum Background {
    /// Delete `path` (any answer but a lost connection settles it).
    Delete { path: String, ticket: Option<u64> },
    /// Delete every child of `parent` named with `prefix` (a listing, then deletes).
    Sweep { parent: String, prefix: String },
}

pub(super) struct Request {
    pub(super) op: Op,
    pub(super) slot: u64,
    /// When it was sent (for the lease).
    pub(super) sent: Duration,
}

/// A message on its way from the server to a client.
pub(super) enum Msg {
    Reply {
        slot: u64,
        outcome: Result<Reply, ZkErr>,
        zxid: i64,
        renew: Option<Duration>,
    },
    Event {
        path: String,
        event: zk::EventType,
    },
}

/// Faults scripted by unit tests: what happens to our next create.
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CreateFault {
    /// None: the create goes through.
    Apply,
    /// The server does not get to it (a silent connection) before the caller's deadline.
    Stall,
    /// Applied, and the connection drops before the reply (the session reconnects).
    ApplyLost,
    /// The connection drops before the server sees it (the session reconnects).
    Lost,
    /// The lock path is deleted just before the create reaches the server.
    ParentGone,
}

impl World {
    /// Sends `op` on `id`'s connection (or parks it until reconnected); the answer comes into
    /// the returned slot.
    pub(crate) fn send(&mut self, id: i64, op: Op) -> u64 {
        self.send_with(id, op, None)
    }

    pub(super) fn send_with(&mut self, id: i64, op: Op, background: Option<Background>) -> u64 {
        let slot = self.next_slot;
        self.next_slot += 1;
        let create = match &op {
            Op::Create { path, .. } => Some((
                parent_of(path).to_owned(),
                path[parent_of(path).len()..]
                    .trim_start_matches('/')
                    .to_owned(),
            )),
            _ => None,
        };
        self.slots.insert(
            slot,
            Slot {
                outcome: None,
                waker: None,
                abandoned: false,
                background,
                session: id,
                create,
                zxid: 0,
                label: op.label(),
            },
        );
        self.enqueue(id, op, slot);
        slot
    }

    pub(super) fn enqueue(&mut self, id: i64, op: Op, slot: u64) {
        let request = Request {
            op,
            slot,
            sent: self.now,
        };
        let s = self.session_mut(id);
        match s.liveness {
            Liveness::Ended => self.fill(slot, Err(ZkErr::SessionExpired)),
            _ if s.link_up => s.outbox.push_back(request),
            _ => s.parked.push_back(request),
        }
    }

    /// Starts background work on `id` (reusing `slot` for a retry).
    pub(crate) fn background(&mut self, id: i64, work: Background, retry: Option<u64>) {
        let op = match &work {
            Background::Delete { path, .. } => Op::Delete { path: path.clone() },
            Background::Sweep { parent, .. } => Op::Children {
                path: parent.clone(),
                watch: false,
            },
        };
        if let Some(slot) = retry {
            if let Some(s) = self.slots.get_mut(&slot) {
                s.outcome = None;
                self.enqueue(id, op, slot);
                return;
            }
        }
        self.send_with(id, op, Some(work));
    }

    /// A ticket for background work whose settlement someone waits for.
    pub(crate) fn ticket(&mut self, payload: Option<Box<dyn std::any::Any + Send>>) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        if let Some(payload) = payload {
            self.payloads.insert(ticket, payload);
        }
        ticket
    }

    /// The answer in `slot`, if in (the slot is then gone); registers `waker` otherwise.
    pub(crate) fn take(&mut self, slot: u64, waker: &Waker) -> Option<Result<Reply, ZkErr>> {
        let s = self.slots.get_mut(&slot)?;
        match s.outcome.take() {
            Some(outcome) => {
                let (answered_at, label) = (s.zxid, s.label);
                self.slots.remove(&slot);
                self.last_taken = answered_at;
                self.read_by_task(answered_at, label);
                Some(outcome)
            }
            None => {
                s.waker = Some(waker.clone());
                None
            }
        }
    }

    /// The task being polled read an answer to `label` given at `zxid` (its own, or one that
    /// another task of its session asked for and shares).
    pub(crate) fn read_by_task(&mut self, zxid: i64, label: &'static str) {
        if let Some(task) = self.polling {
            let seen = self.task_seen.entry(task).or_default();
            *seen = (*seen).max(zxid);
            self.task_last.insert(task, label);
        }
    }

    /// The caller gave up on `slot` (its deadline, or its future dropped): a node its create
    /// makes is deleted in the background.
    pub(crate) fn abandon(&mut self, id: i64, slot: u64) {
        let Some(s) = self.slots.get_mut(&slot) else {
            return;
        };
        s.abandoned = true;
        s.waker = None;
        if let Some(outcome) = s.outcome.take() {
            self.slots.remove(&slot);
            self.abandoned_answer(id, outcome);
        }
    }

    /// An answer no one will read: a watch it set is removed (the client never learnt of it).
    pub(super) fn discard(&mut self, outcome: &Result<Reply, ZkErr>) {
        if let Ok(Reply::Children { watch: Some(w), .. } | Reply::Data { watch: Some(w), .. }) =
            outcome
        {
            self.unwatch(*w);
        }
    }

    pub(super) fn abandoned_answer(&mut self, id: i64, outcome: Result<Reply, ZkErr>) {
        self.discard(&outcome);
        if let Ok(Reply::Created { path, .. }) = outcome {
            self.background(id, Background::Delete { path, ticket: None }, None);
        }
    }

    pub(super) fn fill(&mut self, slot: u64, outcome: Result<Reply, ZkErr>) {
        let Some(s) = self.slots.get_mut(&slot) else {
            return;
        };
        if let Some(work) = s.background.clone() {
            self.slots.remove(&slot);
            return self.background_answer(work, outcome);
        }
        if s.abandoned {
            let s = self.slots.remove(&slot).expect("present");
            if let (Err(ZkErr::ConnectionLoss), Some((parent, prefix))) = (&outcome, s.create) {
                // A create given up on, whose answer is lost: its node may exist.
                self.background(s.session, Background::Sweep { parent, prefix }, None);
            }
            return self.discard(&outcome);
        }
        if let Ok(Reply::Children { watch: Some(w), .. } | Reply::Data { watch: Some(w), .. }) =
            &outcome
        {
            // The client learns of the watch with the reply.
            self.activate(*w);
        }
        let Some(s) = self.slots.get_mut(&slot) else {
            return;
        };
        s.outcome = Some(outcome);
        if let Some(waker) = s.waker.take() {
            waker.wake();
        }
    }

    pub(super) fn background_answer(&mut self, work: Background, outcome: Result<Reply, ZkErr>) {
        match work {
            Background::Delete { ticket, .. } => {
                if let Some(ticket) = ticket {
                    self.settled.insert(ticket);
                    self.payloads.remove(&ticket);
                }
            }
            Background::Sweep { .. } => {}
        }
        let _ = outcome;
    }

    /// Processes the next request on `id`'s connection; `false` if none could move.
    pub(crate) fn process(&mut self, id: i64) -> bool {
        if !self.flows(id) {
            return false;
        }
        if self.server_ended(id) {
            // The server closes an expired session's connection, saying why.
            self.end_client(id);
            return true;
        }
        let Some(request) = self.session_mut(id).outbox.pop_front() else {
            return false;
        };
        // Scripted faults of unit tests, for the creates of lock nodes.
        if matches!(
            request.op,
            Op::Create {
                sequential: true,
                ..
            }
        ) {
            let fault = self
                .create_faults
                .get_mut(&id)
                .and_then(VecDeque::pop_front);
            match fault {
                Some(fault @ (CreateFault::ApplyLost | CreateFault::Lost)) => {
                    // Applied or not, the reply is lost with the connection.
                    if matches!(fault, CreateFault::ApplyLost) {
                        let _ = self.apply(id, &request.op);
                    }
                    self.session_mut(id).outbox.push_front(request);
                    let saved = self.applied_percent;
                    self.applied_percent = 0;
                    self.drop_link(id);
                    self.applied_percent = saved;
                    self.reconnect(id);
                    return true;
                }
                Some(CreateFault::ParentGone) => {
                    if let Op::Create { path, .. } = &request.op {
                        let parent = parent_of(path).to_owned();
                        self.operator_delete_tree(&parent);
                    }
                }
                Some(CreateFault::Stall) => {
                    self.session_mut(id).outbox.push_front(request);
                    self.partition(id, Duration::from_secs(3600));
                    return true;
                }
                Some(CreateFault::Apply) | None => {}
            }
        }
        if self.stall.get(&id) == Some(&request.op.label()) {
            self.stall.remove(&id);
            self.session_mut(id).outbox.push_front(request);
            self.partition(id, Duration::from_secs(3600));
            return true;
        }
        let outcome = self.apply(id, &request.op);
        let renew = request.op.by_leader().then_some(request.sent);
        let zxid = self.model.last_zxid();
        let label = request.op.label();
        *self.session_mut(id).processed.entry(label).or_default() += 1;
        self.note(|| format!("server: {id:#x} {:?} -> {outcome:?}", request.op));
        self.session_mut(id).inbox.push_back(Msg::Reply {
            slot: request.slot,
            outcome,
            zxid,
            renew,
        });
        true
    }

    /// Delivers the next message on `id`'s connection; `false` if none could move.
    pub(crate) fn deliver(&mut self, id: i64) -> bool {
        if !self.flows(id) {
            return false;
        }
        let Some(msg) = self.session_mut(id).inbox.pop_front() else {
            return false;
        };
        match msg {
            Msg::Reply {
                slot,
                outcome,
                zxid,
                renew,
            } => {
                let instant = self.origin;
                let s = self.session_mut(id);
                s.seen_zxid = s.seen_zxid.max(zxid);
                if let Some(sent) = renew {
                    if !matches!(outcome, Err(ZkErr::ConnectionLoss | ZkErr::SessionExpired)) {
                        s.lease.renew(instant + sent);
                    }
                }
                let background = self.slots.get(&slot).and_then(|s| s.background.clone());
                match (background, &outcome) {
                    (
                        Some(Background::Sweep { parent, prefix }),
                        Ok(Reply::Children { names, .. }),
                    ) => {
                        self.slots.remove(&slot);
                        for name in names.iter().filter(|n| n.starts_with(&prefix)) {
                            let path = format!("{parent}/{name}");
                            self.background(id, Background::Delete { path, ticket: None }, None);
                        }
                    }
                    _ => {
                        let abandoned = self.slots.get(&slot).is_some_and(|s| s.abandoned);
                        if let Some(s) = self.slots.get_mut(&slot) {
                            s.zxid = zxid;
                        }
                        if abandoned {
                            self.slots.remove(&slot);
                            self.abandoned_answer(id, outcome);
                        } else {
                            self.fill(slot, outcome);
                        }
                    }
                }
            }
            Msg::Event { path, event } => self.notified(id, &path, event),
        }
        true
    }

    /// Whether anything can move without the clock: a request or a message on a connection.
    pub(crate) fn movable(&self) -> Vec<i64> {
        self.sessions
            .iter()
            .filter(|(id, s)| self.flows(**id) && (!s.outbox.is_empty() || !s.inbox.is_empty()))
            .map(|(id, _)| *id)
            .collect()
    }

    /// What is outstanding (requests, watches, timers), for a stuck run's trace.
    pub(crate) fn outstanding(&self) -> Vec<String> {
        let slots = self.slots.iter().map(|(k, s)| {
            format!(
                "slot {k} of {:#x}: answered {}, waited for {}, abandoned {}, background {:?}",
                s.session,
                s.outcome.is_some(),
                s.waker.is_some(),
                s.abandoned,
                s.background
            )
        });
        let watches = self.watches.iter().map(|(k, w)| {
            format!(
                "watch {k} of {:#x} on {} ({:?}): active {}, fired {:?}",
                w.session, w.path, w.kind, w.active, w.fired
            )
        });
        let sessions = self.sessions.iter().map(|(id, s)| {
            format!(
                "session {id:#x}: {:?}, link {}, server ended {}, outbox {}, inbox {}, parked {}",
                s.liveness,
                s.link_up,
                self.server_ended(*id),
                s.outbox.len(),
                s.inbox.len(),
                s.parked.len()
            )
        });
        let timers = self.timers.keys().map(|(at, _)| format!("timer at {at:?}"));
        slots.chain(watches).chain(sessions).chain(timers).collect()
    }

    /// Background work outstanding on `id` (queued, parked, or awaiting its answer).
    pub(crate) fn background_pending(&self) -> usize {
        self.slots
            .values()
            .filter(|s| s.background.is_some())
            .count()
    }
}
