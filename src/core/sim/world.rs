//! The simulated ensemble and network: ZooKeeper's data tree (as `DataTree` keeps it), its
//! sessions and watches, each session's connection (requests on their way to the server,
//! replies and notifications on their way back), and the virtual clock.
//!
//! Everything lives behind one lock and is changed only by the scheduler's steps (process one
//! request, deliver one message, advance the clock, inject one fault) or by the simulated
//! clients' calls, which only enqueue. No step reads real time or an unseeded random number,
//! and every collection is ordered, so one seed gives one run.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use std::task::Waker;

use crate::session::lease::Lease;
use crate::session::{Liveness, NodeStat};
use crate::wire as zk;

/// A small, fast, seeded generator (splitmix64): the only source of choices in a run.
#[derive(Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// `true` with probability `percent` / 100.
    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// A znode's full stat, as the server keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    pub(crate) czxid: i64,
    pub(crate) mzxid: i64,
    pub(crate) pzxid: i64,
    pub(crate) ctime: i64,
    pub(crate) version: i32,
    pub(crate) cversion: i32,
    pub(crate) ephemeral_owner: i64,
}

impl Stat {
    pub(crate) fn node_stat(&self) -> NodeStat {
        NodeStat {
            czxid: self.czxid,
            ephemeral_owner: self.ephemeral_owner,
            ctime: self.ctime,
            version: self.version,
        }
    }
}

/// How a node is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Persistent,
    Ephemeral,
    Container,
}

struct ZNode {
    stat: Stat,
    container: bool,
    children: BTreeSet<String>,
}

/// A request, as the server receives it.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// `path` is the full name (the parent's path, `/`, the name or its prefix).
    Create {
        path: String,
        mode: Mode,
        sequential: bool,
    },
    Delete {
        path: String,
    },
    /// getChildren2, optionally watching the children.
    Children {
        path: String,
        watch: bool,
    },
    /// getData, optionally watching the node (no watch is left if it does not exist).
    GetData {
        path: String,
        watch: bool,
    },
    Sync,
    SetData {
        path: String,
    },
}

impl Op {
    /// Whether the leader processes it (a write or a sync), so that its answer renews the
    /// lease (see `session/lease.rs`).
    fn by_leader(&self) -> bool {
        matches!(
            self,
            Op::Create { .. } | Op::Delete { .. } | Op::Sync | Op::SetData { .. }
        )
    }

    fn label(&self) -> &'static str {
        match self {
            Op::Create { .. } => "create",
            Op::Delete { .. } => "delete",
            Op::Children { .. } => "children",
            Op::GetData { .. } => "get",
            Op::Sync => "sync",
            Op::SetData { .. } => "set",
        }
    }
}

/// ZooKeeper's error codes that the simulated calls can end with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ZkErr {
    NoNode,
    NodeExists,
    NotEmpty,
    /// No answer: the connection was lost with the request in flight (applied or not).
    ConnectionLoss,
    /// The session has ended.
    SessionExpired,
}

/// A server's answer.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    Created {
        path: String,
        stat: Stat,
    },
    Children {
        names: Vec<String>,
        stat: Stat,
        watch: Option<u64>,
    },
    Data {
        stat: Stat,
        watch: Option<u64>,
    },
    Done,
}

/// One request slot: the answer once in, the task waiting for it, and whether the caller gave
/// up on it (a create whose node appears later is then deleted in the background).
struct Slot {
    outcome: Option<Result<Reply, ZkErr>>,
    waker: Option<Waker>,
    abandoned: bool,
    /// What to do with the answer once in, whoever waits for it.
    background: Option<Background>,
    /// The session that sent it.
    session: i64,
    /// For a create: the parent and the name's prefix, to sweep if the caller gave up and
    /// the answer was lost.
    create: Option<(String, String)>,
    /// The zxid the server was at when it answered (0 for an answer the client made up).
    zxid: i64,
    /// What was asked.
    label: &'static str,
}

/// Work a session does in the background until it is settled or the session ends, as the
/// real session's background tasks (withdrawal, release, cleanup of a late create, sweep).
#[derive(Debug, Clone)]
pub(crate) enum Background {
    /// Delete `path` (any answer but a lost connection settles it).
    Delete { path: String, token: Option<u64> },
    /// Delete every child of `parent` named with `prefix` (a listing, then deletes).
    Sweep { parent: String, prefix: String },
}

struct Request {
    op: Op,
    slot: u64,
    /// When it was sent (for the lease).
    sent: Duration,
}

/// A message on its way from the server to a client.
enum Msg {
    Reply {
        slot: u64,
        outcome: Result<Reply, ZkErr>,
        zxid: i64,
        renew: Option<Duration>,
    },
    Event {
        watch: u64,
        event: zk::EventType,
    },
}

/// What kind of watch a registration is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WatchKind {
    Data,
    Child,
}

/// A watch: who set it, on what, and its one-shot outcome.
pub(crate) struct WatchReg {
    session: i64,
    kind: WatchKind,
    path: String,
    /// Registered at the server (else waiting to be re-armed by a reconnect, or dead).
    armed: bool,
    /// The zxid the session had seen when the watch was set, for a re-arm's comparison.
    fired: Option<zk::EventType>,
    waker: Option<Waker>,
}

/// One session: the server's view (alive, last heard), the connection, and the client's view.
pub(crate) struct SessionRecord {
    pub(crate) timeout: Duration,
    /// The server has expired (or closed) it.
    server_ended: bool,
    last_heard: Duration,
    /// The connection is up: requests and messages can move.
    link_up: bool,
    /// The connection is up but carries nothing (a partition the client has yet to notice),
    /// until the client drops it at this instant.
    partitioned_until_noticed: Option<Duration>,
    /// The process is frozen (SIGSTOP, a long pause): none of its tasks run, nothing it sends
    /// or receives moves, and the server does not hear from it.
    pub(crate) frozen_until: Option<Duration>,
    /// What the client believes.
    pub(crate) liveness: Liveness,
    state_changes: u64,
    state_wakers: Vec<Waker>,
    outbox: VecDeque<Request>,
    inbox: VecDeque<Msg>,
    /// Requests issued while disconnected, sent once reconnected.
    parked: VecDeque<Request>,
    pub(crate) lease: Lease,
    /// The zxid of the latest reply this client received (its `lastZxidSeen`).
    pub(crate) seen_zxid: i64,
    /// Ops the server processed for it, by label.
    processed: BTreeMap<&'static str, usize>,
    /// The paths it watched with getData, in order.
    pub(crate) watched: Vec<String>,
    /// The API calls its seam received, in order (`create`, `sync`, `list`, ...).
    pub(crate) calls: Vec<&'static str>,
    /// Prefixes swept.
    pub(crate) swept: Vec<String>,
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

/// The whole simulated world.
pub(crate) struct World {
    pub(crate) origin: Instant,
    /// Virtual time since `origin`.
    pub(crate) now: Duration,
    zxid: i64,
    nodes: BTreeMap<String, ZNode>,
    pub(crate) sessions: BTreeMap<i64, SessionRecord>,
    next_session: i64,
    watches: BTreeMap<u64, WatchReg>,
    next_watch: u64,
    slots: BTreeMap<u64, Slot>,
    next_slot: u64,
    /// Timers: (when, sequence) → waker.
    timers: BTreeMap<(Duration, u64), Waker>,
    next_timer: u64,
    pub(crate) rng: Rng,
    /// Percent chance that a watch is lost across a reconnect (SetWatches missing a change).
    pub(crate) lose_watch_percent: u64,
    /// Percent chance that a request in flight when the connection drops was applied.
    pub(crate) applied_percent: u64,
    /// Shuffle listings (the server's order is a hash set's).
    pub(crate) shuffle: bool,
    /// For nodes removed: czxid → the zxid that removed them.
    pub(crate) removed: BTreeMap<i64, i64>,
    /// Scripted faults for the next creates of a session.
    pub(crate) create_faults: BTreeMap<i64, VecDeque<CreateFault>>,
    /// Paths the operator put a node of its own under, in place of another.
    pub(crate) replaced: BTreeSet<String>,
    /// The task being polled (set by the scheduler), and per task the zxid of the latest
    /// answer it read: a task that read an answer given after a node's deletion has seen it.
    pub(crate) polling: Option<usize>,
    pub(crate) task_seen: BTreeMap<usize, i64>,
    /// Per task, what the latest answer it read was to (`children`, `get`, ...).
    pub(crate) task_last: BTreeMap<usize, &'static str>,
    /// How often the server sweeps empty containers (never if `None`).
    pub(crate) sweep_every: Option<Duration>,
    /// Sessions whose next create is answered with another owner in its stat.
    pub(crate) stale_owner: BTreeSet<i64>,
    /// The czxids of nodes the operator deleted.
    pub(crate) operator_removed: BTreeSet<i64>,
    /// Watches never lost across a reconnect (see [`watch_now`](Self::watch_now)).
    robust: BTreeSet<u64>,
    /// Per session, the label of an op (`children`, `sync`, ...) whose next instance the server
    /// does not get to (the connection goes silent).
    pub(crate) stall: BTreeMap<i64, &'static str>,
    /// If set, creates report this owner in their reply's stat (a lying or stale reply).
    pub(crate) reported_owner: Option<i64>,
    /// Counter of ids handed out for protected names.
    pub(crate) ids: u64,
    /// Background work settled: tokens of background deletes that finished.
    pub(crate) settled: BTreeSet<u64>,
    next_token: u64,
    /// Droppable payloads of background work ("told when settled").
    pub(crate) payloads: BTreeMap<u64, Box<dyn std::any::Any + Send>>,
    /// One line per step, for a failing seed's trace.
    pub(crate) trace: Vec<String>,
    pub(crate) tracing: bool,
}

/// The id the operator's (and the tests' "other") changes are made under: a session that
/// never expires.
pub(crate) const OPERATOR: i64 = 0x0A;

impl World {
    pub(crate) fn new(seed: u64) -> World {
        let mut world = World {
            origin: Instant::now(),
            now: Duration::ZERO,
            zxid: 0,
            nodes: BTreeMap::new(),
            sessions: BTreeMap::new(),
            next_session: 0x100,
            watches: BTreeMap::new(),
            next_watch: 1,
            slots: BTreeMap::new(),
            next_slot: 1,
            timers: BTreeMap::new(),
            next_timer: 0,
            rng: Rng::new(seed),
            lose_watch_percent: 0,
            applied_percent: 50,
            shuffle: true,
            removed: BTreeMap::new(),
            create_faults: BTreeMap::new(),
            stall: BTreeMap::new(),
            robust: BTreeSet::new(),
            operator_removed: BTreeSet::new(),
            stale_owner: BTreeSet::new(),
            sweep_every: None,
            polling: None,
            replaced: BTreeSet::new(),
            task_seen: BTreeMap::new(),
            task_last: BTreeMap::new(),
            reported_owner: None,
            ids: 0,
            settled: BTreeSet::new(),
            next_token: 1,
            payloads: BTreeMap::new(),
            trace: Vec::new(),
            tracing: false,
        };
        world.nodes.insert(
            "/".to_owned(),
            ZNode {
                stat: world.fresh_stat(0),
                container: false,
                children: BTreeSet::new(),
            },
        );
        world.open_session_with_id(OPERATOR, Duration::from_secs(3600));
        world
    }

    pub(crate) fn instant(&self) -> Instant {
        self.origin + self.now
    }

    pub(crate) fn note(&mut self, line: impl FnOnce() -> String) {
        if self.tracing {
            let line = format!("{:>8.3}s {}", self.now.as_secs_f64(), line());
            self.trace.push(line);
        }
    }

    fn fresh_stat(&self, owner: i64) -> Stat {
        Stat {
            czxid: self.zxid,
            mzxid: self.zxid,
            pzxid: self.zxid,
            ctime: i64::try_from(self.now.as_millis()).unwrap_or(i64::MAX),
            version: 0,
            cversion: 0,
            ephemeral_owner: owner,
        }
    }

    // ---- sessions ----

    pub(crate) fn open_session(&mut self, timeout: Duration) -> i64 {
        let id = self.next_session;
        self.next_session += 1;
        self.open_session_with_id(id, timeout);
        id
    }

    fn open_session_with_id(&mut self, id: i64, timeout: Duration) {
        let lease = Lease::new(self.instant(), timeout);
        self.sessions.insert(
            id,
            SessionRecord {
                timeout,
                server_ended: false,
                last_heard: self.now,
                link_up: true,
                partitioned_until_noticed: None,
                frozen_until: None,
                liveness: Liveness::Connected,
                state_changes: 0,
                state_wakers: Vec::new(),
                outbox: VecDeque::new(),
                inbox: VecDeque::new(),
                parked: VecDeque::new(),
                lease,
                seen_zxid: 0,
                processed: BTreeMap::new(),
                watched: Vec::new(),
                calls: Vec::new(),
                swept: Vec::new(),
            },
        );
    }

    pub(crate) fn session(&self, id: i64) -> &SessionRecord {
        &self.sessions[&id]
    }

    fn session_mut(&mut self, id: i64) -> &mut SessionRecord {
        self.sessions.get_mut(&id).expect("a simulated session")
    }

    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn processed(&self, id: i64, label: &str) -> usize {
        self.session(id).processed.get(label).copied().unwrap_or(0)
    }

    pub(crate) fn state_changes(&self, id: i64) -> u64 {
        self.session(id).state_changes
    }

    pub(crate) fn wait_state_change(&mut self, id: i64, waker: &Waker) {
        self.session_mut(id).state_wakers.push(waker.clone());
    }

    fn set_liveness(&mut self, id: i64, liveness: Liveness) {
        let s = self.session_mut(id);
        if s.liveness == liveness {
            return;
        }
        s.liveness = liveness;
        s.state_changes += 1;
        for waker in std::mem::take(&mut s.state_wakers) {
            waker.wake();
        }
        self.note(|| format!("session {id:#x} client sees {liveness:?}"));
    }

    /// The server expires `id`: its ephemerals go (firing the watches of others), its watches
    /// with them; the client learns it when it next reaches the server.
    pub(crate) fn expire(&mut self, id: i64) {
        if self.session(id).server_ended {
            return;
        }
        self.note(|| format!("server expires session {id:#x}"));
        self.session_mut(id).server_ended = true;
        let ids: Vec<u64> = self
            .watches
            .iter()
            .filter(|(_, w)| w.session == id)
            .map(|(k, _)| *k)
            .collect();
        for w in ids {
            self.watches.get_mut(&w).expect("listed").armed = false;
        }
        let owned: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.stat.ephemeral_owner == id)
            .map(|(p, _)| p.clone())
            .collect();
        for path in owned {
            self.zxid += 1;
            let _ = self.delete_node(&path);
        }
        // A connection still up is closed by the server.
        if self.session(id).link_up && self.session(id).frozen_until.is_none() {
            self.drop_link(id);
        }
    }

    /// The connection drops: requests in flight are applied or not (the client cannot tell),
    /// replies and notifications on their way are lost, and the server forgets the session's
    /// watches until a reconnect re-arms them.
    pub(crate) fn drop_link(&mut self, id: i64) {
        if !self.session(id).link_up {
            return;
        }
        self.note(|| format!("connection of {id:#x} drops"));
        let s = self.session_mut(id);
        s.link_up = false;
        s.partitioned_until_noticed = None;
        let outbox = std::mem::take(&mut s.outbox);
        let inbox = std::mem::take(&mut s.inbox);
        for request in outbox {
            if !self.session(id).server_ended && self.rng.chance(self.applied_percent) {
                let applied = self.apply(id, &request.op);
                self.discard(&applied);
            }
            self.fail_request(id, request);
        }
        for msg in inbox {
            if let Msg::Reply { slot, outcome, .. } = msg {
                self.discard(&outcome);
                self.fail_slot(id, slot);
            }
        }
        for w in self.watches.values_mut() {
            if w.session == id {
                w.armed = false;
            }
        }
        self.set_liveness(id, Liveness::Disconnected);
    }

    /// A request lost with the connection: background work waits to be sent again, anything
    /// else fails with a connection loss.
    fn fail_request(&mut self, id: i64, request: Request) {
        let background = self
            .slots
            .get(&request.slot)
            .is_some_and(|s| s.background.is_some());
        if background {
            self.session_mut(id).parked.push_back(request);
        } else {
            self.fill(request.slot, Err(ZkErr::ConnectionLoss));
        }
    }

    fn fail_slot(&mut self, id: i64, slot: u64) {
        let background = self.slots.get(&slot).and_then(|s| s.background.clone());
        match background {
            // Its answer was lost: send it again (a delete answered NoNode then settles it).
            Some(work) => self.background(id, work, Some(slot)),
            None => self.fill(slot, Err(ZkErr::ConnectionLoss)),
        }
    }

    /// A partition the client notices only `notice` later (when it then drops the link).
    pub(crate) fn partition(&mut self, id: i64, notice: Duration) {
        let now = self.now;
        let s = self.session_mut(id);
        if s.link_up && s.partitioned_until_noticed.is_none() {
            s.partitioned_until_noticed = Some(now + notice);
            self.note(|| format!("connection of {id:#x} goes silent"));
        }
    }

    pub(crate) fn freeze(&mut self, id: i64, length: Duration) {
        let until = self.now + length;
        self.session_mut(id).frozen_until = Some(until);
        self.note(|| format!("process of {id:#x} frozen for {length:?}"));
    }

    pub(crate) fn frozen(&self, id: i64) -> bool {
        self.session(id).frozen_until.is_some()
    }

    /// Whether messages move on `id`'s connection.
    fn flows(&self, id: i64) -> bool {
        let s = self.session(id);
        s.link_up && s.partitioned_until_noticed.is_none() && s.frozen_until.is_none()
    }

    /// The client reconnects: to its session if the server still has it (its watches are
    /// re-armed, each possibly missing a change), else it learns that the session ended.
    pub(crate) fn reconnect(&mut self, id: i64) {
        let s = self.session(id);
        if s.link_up || s.liveness == Liveness::Ended || s.frozen_until.is_some() {
            return;
        }
        if s.server_ended {
            self.end_client(id);
            return;
        }
        self.note(|| format!("session {id:#x} reconnects"));
        let now = self.now;
        let instant = self.instant();
        let s = self.session_mut(id);
        s.link_up = true;
        s.last_heard = now;
        s.lease.renew(instant);
        let seen = s.seen_zxid;
        let parked = std::mem::take(&mut s.parked);
        s.outbox.extend(parked);
        // SetWatches: each watch the client still holds is re-armed, or fires at once if what
        // it watches changed after the client's last seen zxid; some changes are missed.
        let ids: Vec<u64> = self
            .watches
            .iter()
            .filter(|(_, w)| w.session == id && !w.armed && w.fired.is_none())
            .map(|(k, _)| *k)
            .collect();
        for w in ids {
            if !self.robust.contains(&w) && self.rng.chance(self.lose_watch_percent) {
                self.note(|| format!("watch {w} of {id:#x} lost across the reconnect"));
                continue;
            }
            let (kind, path) = {
                let reg = &self.watches[&w];
                (reg.kind, reg.path.clone())
            };
            let event = match (kind, self.nodes.get(&path)) {
                (_, None) => Some(zk::EventType::NodeDeleted),
                (WatchKind::Data, Some(n)) if n.stat.mzxid > seen => {
                    Some(zk::EventType::NodeDataChanged)
                }
                (WatchKind::Child, Some(n)) if n.stat.pzxid > seen => {
                    Some(zk::EventType::NodeChildrenChanged)
                }
                _ => None,
            };
            match event {
                Some(event) => {
                    let zxid = self.zxid;
                    self.session_mut(id)
                        .inbox
                        .push_back(Msg::Event { watch: w, event });
                    let _ = zxid;
                }
                None => self.watches.get_mut(&w).expect("listed").armed = true,
            }
        }
        self.set_liveness(id, Liveness::Connected);
    }

    /// The client learns that its session has ended: its calls fail, its watches report the
    /// session's end.
    fn end_client(&mut self, id: i64) {
        self.note(|| format!("session {id:#x} learns it has ended"));
        let s = self.session_mut(id);
        s.link_up = false;
        let requests: Vec<Request> = s.parked.drain(..).chain(s.outbox.drain(..)).collect();
        let replies: Vec<u64> = s
            .inbox
            .drain(..)
            .filter_map(|m| match m {
                Msg::Reply { slot, .. } => Some(slot),
                Msg::Event { .. } => None,
            })
            .collect();
        // (Watches their replies set are reported ended below, with the others.)
        for slot in requests.into_iter().map(|r| r.slot).chain(replies) {
            self.fill(slot, Err(ZkErr::SessionExpired));
        }
        let ids: Vec<u64> = self
            .watches
            .iter()
            .filter(|(_, w)| w.session == id)
            .map(|(k, _)| *k)
            .collect();
        for w in ids {
            self.fire(w, zk::EventType::Session);
        }
        self.set_liveness(id, Liveness::Ended);
    }

    // ---- requests ----

    /// Sends `op` on `id`'s connection (or parks it until reconnected); the answer comes into
    /// the returned slot.
    pub(crate) fn send(&mut self, id: i64, op: Op) -> u64 {
        self.send_with(id, op, None)
    }

    fn send_with(&mut self, id: i64, op: Op, background: Option<Background>) -> u64 {
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

    fn enqueue(&mut self, id: i64, op: Op, slot: u64) {
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

    /// A token for background work whose settlement someone waits for.
    pub(crate) fn token(&mut self, payload: Option<Box<dyn std::any::Any + Send>>) -> u64 {
        let token = self.next_token;
        self.next_token += 1;
        if let Some(payload) = payload {
            self.payloads.insert(token, payload);
        }
        token
    }

    /// The answer in `slot`, if in (the slot is then gone); registers `waker` otherwise.
    pub(crate) fn take(&mut self, slot: u64, waker: &Waker) -> Option<Result<Reply, ZkErr>> {
        let s = self.slots.get_mut(&slot)?;
        match s.outcome.take() {
            Some(outcome) => {
                let (answered_at, label) = (s.zxid, s.label);
                self.slots.remove(&slot);
                if let Some(task) = self.polling {
                    let seen = self.task_seen.entry(task).or_default();
                    *seen = (*seen).max(answered_at);
                    self.task_last.insert(task, label);
                }
                Some(outcome)
            }
            None => {
                s.waker = Some(waker.clone());
                None
            }
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
    fn discard(&mut self, outcome: &Result<Reply, ZkErr>) {
        if let Ok(Reply::Children { watch: Some(w), .. } | Reply::Data { watch: Some(w), .. }) =
            outcome
        {
            self.watches.remove(w);
        }
    }

    fn abandoned_answer(&mut self, id: i64, outcome: Result<Reply, ZkErr>) {
        self.discard(&outcome);
        if let Ok(Reply::Created { path, .. }) = outcome {
            self.background(id, Background::Delete { path, token: None }, None);
        }
    }

    fn fill(&mut self, slot: u64, outcome: Result<Reply, ZkErr>) {
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
        s.outcome = Some(outcome);
        if let Some(waker) = s.waker.take() {
            waker.wake();
        }
    }

    fn background_answer(&mut self, work: Background, outcome: Result<Reply, ZkErr>) {
        match work {
            Background::Delete { token, .. } => {
                if let Some(token) = token {
                    self.settled.insert(token);
                    self.payloads.remove(&token);
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
        if self.session(id).server_ended {
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
        let now = self.now;
        self.session_mut(id).last_heard = now;
        let outcome = self.apply(id, &request.op);
        let renew = request.op.by_leader().then_some(request.sent);
        let zxid = self.zxid;
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
                            self.background(id, Background::Delete { path, token: None }, None);
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
            Msg::Event { watch, event } => self.fire(watch, event),
        }
        true
    }

    // ---- the data tree ----

    /// Applies `op` for session `id`, as the server would.
    fn apply(&mut self, id: i64, op: &Op) -> Result<Reply, ZkErr> {
        if self.session(id).server_ended {
            return Err(ZkErr::SessionExpired);
        }
        match op {
            Op::Create {
                path,
                mode,
                sequential,
            } => {
                let parent_path = parent_of(path).to_owned();
                let Some(parent) = self.nodes.get(&parent_path) else {
                    return Err(ZkErr::NoNode);
                };
                let cversion = parent.stat.cversion;
                let path = if *sequential {
                    format!("{path}{cversion:010}")
                } else {
                    path.clone()
                };
                if self.nodes.contains_key(&path) {
                    return Err(ZkErr::NodeExists);
                }
                self.zxid += 1;
                let owner = match mode {
                    Mode::Ephemeral => id,
                    _ => 0,
                };
                let stat = self.fresh_stat(owner);
                let name = path[parent_path.len()..].trim_start_matches('/').to_owned();
                let zxid = self.zxid;
                let parent = self.nodes.get_mut(&parent_path).expect("checked");
                parent.children.insert(name);
                bump_cversion(&mut parent.stat, zxid);
                self.nodes.insert(
                    path.clone(),
                    ZNode {
                        stat,
                        container: *mode == Mode::Container,
                        children: BTreeSet::new(),
                    },
                );
                self.trigger_data(&path, zk::EventType::NodeCreated);
                self.trigger_child(&parent_path, zk::EventType::NodeChildrenChanged);
                let mut stat = stat;
                if let Some(owner) = self.reported_owner {
                    stat.ephemeral_owner = owner;
                }
                if self.stale_owner.remove(&id) {
                    // A stale reply (a lagging follower's view of another node by that name).
                    stat.ephemeral_owner = OPERATOR;
                }
                Ok(Reply::Created { path, stat })
            }
            Op::Delete { path } => {
                match self.nodes.get(path) {
                    None => return Err(ZkErr::NoNode),
                    Some(n) if !n.children.is_empty() => return Err(ZkErr::NotEmpty),
                    Some(_) => {}
                }
                self.zxid += 1;
                self.delete_node(path)?;
                Ok(Reply::Done)
            }
            Op::Children { path, watch } => {
                let node = self.nodes.get(path).ok_or(ZkErr::NoNode)?;
                let mut names: Vec<String> = node.children.iter().cloned().collect();
                let stat = node.stat;
                if self.shuffle {
                    for i in (1..names.len()).rev() {
                        let j = self.rng.below(i + 1);
                        names.swap(i, j);
                    }
                }
                let watch = watch.then(|| self.register(id, WatchKind::Child, path));
                Ok(Reply::Children { names, stat, watch })
            }
            Op::GetData { path, watch } => {
                let stat = self.nodes.get(path).ok_or(ZkErr::NoNode)?.stat;
                if *watch {
                    self.session_mut(id).watched.push(path.clone());
                }
                let watch = watch.then(|| self.register(id, WatchKind::Data, path));
                Ok(Reply::Data { stat, watch })
            }
            Op::Sync => Ok(Reply::Done),
            Op::SetData { path } => {
                let zxid = self.zxid + 1;
                let node = self.nodes.get_mut(path).ok_or(ZkErr::NoNode)?;
                self.zxid = zxid;
                node.stat.mzxid = zxid;
                node.stat.version += 1;
                let stat = node.stat;
                self.trigger_data(path, zk::EventType::NodeDataChanged);
                Ok(Reply::Data { stat, watch: None })
            }
        }
    }

    /// Removes `path` (zxid already taken), firing the watches a delete fires.
    fn delete_node(&mut self, path: &str) -> Result<(), ZkErr> {
        let node = self.nodes.remove(path).ok_or(ZkErr::NoNode)?;
        self.removed.insert(node.stat.czxid, self.zxid);
        let parent_path = parent_of(path).to_owned();
        let zxid = self.zxid;
        if let Some(parent) = self.nodes.get_mut(&parent_path) {
            let name = path[parent_path.len()..].trim_start_matches('/');
            parent.children.remove(name);
            bump_cversion(&mut parent.stat, zxid);
        }
        self.trigger_data(path, zk::EventType::NodeDeleted);
        self.trigger_child(path, zk::EventType::NodeDeleted);
        self.trigger_child(&parent_path, zk::EventType::NodeChildrenChanged);
        Ok(())
    }

    fn register(&mut self, id: i64, kind: WatchKind, path: &str) -> u64 {
        let w = self.next_watch;
        self.next_watch += 1;
        self.watches.insert(
            w,
            WatchReg {
                session: id,
                kind,
                path: path.to_owned(),
                armed: true,
                fired: None,
                waker: None,
            },
        );
        w
    }

    /// The watches a change to `path` of `kind` fires: one-shot, each sent on its session's
    /// connection (in order with its replies).
    fn trigger(&mut self, path: &str, kind: WatchKind, event: zk::EventType) {
        let fired: Vec<(u64, i64)> = self
            .watches
            .iter()
            .filter(|(_, w)| w.armed && w.kind == kind && w.path == path)
            .map(|(k, w)| (*k, w.session))
            .collect();
        for (w, session) in fired {
            self.watches.get_mut(&w).expect("listed").armed = false;
            self.session_mut(session)
                .inbox
                .push_back(Msg::Event { watch: w, event });
        }
    }

    fn trigger_data(&mut self, path: &str, event: zk::EventType) {
        self.trigger(path, WatchKind::Data, event);
    }

    fn trigger_child(&mut self, path: &str, event: zk::EventType) {
        self.trigger(path, WatchKind::Child, event);
    }

    fn fire(&mut self, w: u64, event: zk::EventType) {
        if let Some(reg) = self.watches.get_mut(&w) {
            if reg.fired.is_none() {
                reg.fired = Some(event);
                reg.armed = false;
                if let Some(waker) = reg.waker.take() {
                    waker.wake();
                }
            }
        }
    }

    /// The watch's event if it fired (registering `waker` if not); `None` if it is gone.
    pub(crate) fn watch_fired(&mut self, w: u64, waker: &Waker) -> Option<Option<zk::EventType>> {
        let reg = self.watches.get_mut(&w)?;
        if reg.fired.is_none() {
            reg.waker = Some(waker.clone());
        }
        Some(reg.fired)
    }

    pub(crate) fn session_mut_calls(&mut self, id: i64, call: &'static str) {
        self.session_mut(id).calls.push(call);
    }

    pub(crate) fn session_swept(&mut self, id: i64, prefix: &str) {
        self.session_mut(id).swept.push(prefix.to_owned());
    }

    /// Sets a data watch for `id` on `path` at once (no request): how the simulation follows
    /// a holder's own node, as the guard's own-node watch does. Never lost across a reconnect.
    pub(crate) fn watch_now(&mut self, id: i64, path: &str) -> u64 {
        let w = self.register(id, WatchKind::Data, path);
        self.robust.insert(w);
        w
    }

    /// What the watch `w` reported, if it fired (and was delivered).
    pub(crate) fn watch_event(&self, w: u64) -> Option<zk::EventType> {
        self.watches.get(&w).and_then(|reg| reg.fired)
    }

    /// The client dropped its watcher: unfired, it is removed from the server (RemoveWatches).
    pub(crate) fn unwatch(&mut self, w: u64) {
        self.watches.remove(&w);
        self.robust.remove(&w);
    }

    /// The watches still registered: (session, path).
    pub(crate) fn live_watches(&self) -> Vec<(i64, String)> {
        self.watches
            .values()
            .map(|w| (w.session, w.path.clone()))
            .collect()
    }

    // ---- the operator, and the tests' direct changes ----

    /// Creates `path` (and its missing ancestors as persistent nodes) as the operator.
    pub(crate) fn mkdirs(&mut self, path: &str, mode: Mode) {
        let mut at = String::new();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            at.push('/');
            at.push_str(part);
            if !self.nodes.contains_key(&at) {
                let m = if at == path { mode } else { Mode::Persistent };
                let op = Op::Create {
                    path: at.clone(),
                    mode: m,
                    sequential: false,
                };
                let _ = self.apply(OPERATOR, &op);
            }
        }
    }

    /// Creates a node as session `id`, at once; its path.
    pub(crate) fn create_now(&mut self, id: i64, path: &str, sequential: bool) -> Option<String> {
        let op = Op::Create {
            path: path.to_owned(),
            mode: Mode::Ephemeral,
            sequential,
        };
        let saved = self.reported_owner.take();
        let created = self.apply(id, &op);
        self.reported_owner = saved;
        match created {
            Ok(Reply::Created { path, .. }) => Some(path),
            _ => None,
        }
    }

    /// Deletes `path` at once (as the operator); `false` if it did not exist or has children.
    pub(crate) fn delete_now(&mut self, path: &str) -> bool {
        self.note(|| format!("operator deletes {path}"));
        if let Some(node) = self.nodes.get(path) {
            self.operator_removed.insert(node.stat.czxid);
        }
        self.apply(
            OPERATOR,
            &Op::Delete {
                path: path.to_owned(),
            },
        )
        .is_ok()
    }

    /// Deletes `path` and everything below it, as the operator.
    pub(crate) fn operator_delete_tree(&mut self, path: &str) {
        let below: Vec<String> = self
            .nodes
            .range(path.to_owned()..)
            .take_while(|(p, _)| p.starts_with(path))
            .filter(|(p, _)| *p == path || p[path.len()..].starts_with('/'))
            .map(|(p, _)| p.clone())
            .collect();
        for p in below.iter().rev() {
            self.delete_now(p);
        }
    }

    /// Sets `path`'s child counter (its cversion).
    pub(crate) fn set_cversion(&mut self, path: &str, cversion: i32) {
        if let Some(node) = self.nodes.get_mut(path) {
            node.stat.cversion = cversion;
        }
    }

    /// The operator writes `path`'s data (as a revocation request does); `false` if missing.
    pub(crate) fn set_data_now(&mut self, path: &str) -> bool {
        self.note(|| format!("operator writes {path}"));
        self.apply(
            OPERATOR,
            &Op::SetData {
                path: path.to_owned(),
            },
        )
        .is_ok()
    }

    pub(crate) fn children(&self, path: &str) -> Vec<String> {
        self.nodes
            .get(path)
            .map(|n| n.children.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Every ephemeral node: (path, owner).
    pub(crate) fn ephemerals(&self) -> Vec<(String, i64)> {
        self.nodes
            .iter()
            .filter(|(_, n)| n.stat.ephemeral_owner != 0)
            .map(|(p, n)| (p.clone(), n.stat.ephemeral_owner))
            .collect()
    }

    /// The server's container sweep: empty containers that once had children go, one level
    /// per sweep.
    pub(crate) fn sweep_containers(&mut self) {
        let empty: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.container && n.children.is_empty() && n.stat.cversion > 0)
            .map(|(p, _)| p.clone())
            .collect();
        for path in empty {
            self.note(|| format!("container sweep deletes {path}"));
            let _ = self.apply(OPERATOR, &Op::Delete { path });
        }
    }

    // ---- the clock ----

    pub(crate) fn add_timer(&mut self, at: Duration, waker: &Waker) {
        self.next_timer += 1;
        self.timers.insert((at, self.next_timer), waker.clone());
    }

    /// The next instant anything is due: a timer, a frozen process waking, a partition
    /// noticed, a session expiring at the server.
    pub(crate) fn next_due(&self) -> Option<Duration> {
        let timers = self.timers.keys().next().map(|(at, _)| *at);
        let sessions = self
            .sessions
            .iter()
            .filter(|(id, _)| **id != OPERATOR)
            .flat_map(|(_, s)| {
                let expiry = (!s.server_ended).then(|| s.last_heard + s.timeout);
                [s.frozen_until, s.partitioned_until_noticed, expiry]
            });
        timers
            .into_iter()
            .chain(sessions.flatten())
            .filter(|at| *at > self.now)
            .min()
    }

    /// Moves the clock to `to`: sessions whose connection carries traffic are heard from (the
    /// keepalive renews their lease), the rest may expire; frozen processes wake, partitions
    /// are noticed, timers fire.
    pub(crate) fn advance(&mut self, to: Duration) {
        if to <= self.now {
            return;
        }
        if let Some(every) = self.sweep_every {
            // The server's ContainerManager (`znode.container.checkIntervalMs`).
            let ticks = |t: Duration| t.as_nanos() / every.as_nanos().max(1);
            if ticks(to) > ticks(self.now) {
                self.sweep_containers();
            }
        }
        self.now = to;
        let instant = self.instant();
        let ids: Vec<i64> = self.sessions.keys().copied().collect();
        for id in ids {
            if id == OPERATOR {
                continue;
            }
            if self.session(id).frozen_until.is_some_and(|t| t <= to) {
                self.session_mut(id).frozen_until = None;
                self.note(|| format!("process of {id:#x} resumes"));
                if self.session(id).server_ended && self.session(id).link_up {
                    // The server closed the connection meanwhile.
                    self.drop_link(id);
                }
            }
            if self
                .session(id)
                .partitioned_until_noticed
                .is_some_and(|t| t <= to)
            {
                self.drop_link(id);
            }
            let s = self.session(id);
            if s.server_ended {
                continue;
            }
            if self.flows(id) && s.liveness == Liveness::Connected {
                // The keepalive (a sync every third of the timeout) is answered.
                let s = self.session_mut(id);
                s.last_heard = to;
                s.lease.renew(instant);
            } else if to >= s.last_heard + s.timeout {
                self.expire(id);
            }
        }
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > to {
                break;
            }
            entry.remove().wake();
        }
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
                "watch {k} of {:#x} on {} ({:?}): armed {}, fired {:?}",
                w.session, w.path, w.kind, w.armed, w.fired
            )
        });
        let sessions = self.sessions.iter().map(|(id, s)| {
            format!(
                "session {id:#x}: {:?}, link {}, server ended {}, outbox {}, inbox {}, parked {}",
                s.liveness,
                s.link_up,
                s.server_ended,
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

/// ZooKeeper's rule for a parent's child counter: it only ever rises, so once at `i32::MAX`
/// it stays there (3.8's DataTree sets it only to a larger value).
fn bump_cversion(stat: &mut Stat, zxid: i64) {
    let next = stat.cversion.wrapping_add(1);
    if next > stat.cversion {
        stat.cversion = next;
    }
    stat.pzxid = zxid;
}

pub(crate) fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => "/",
    }
}
