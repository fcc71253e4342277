//! The simulated ensemble and network: ZooKeeper itself is zklock-server's model (the one
//! copy of its semantics: the data tree, sessions and their expiry, watches), driven here on
//! the virtual clock; around it, each session's connection (requests on their way to the
//! server, replies and notifications on their way back), the client's side of each session
//! (its watch registrations, what it believes), the faults, and the virtual clock.
//!
//! Everything lives behind one lock and is changed only by the scheduler's steps (process one
//! request, deliver one message, advance the clock, inject one fault) or by the simulated
//! clients' calls, which only enqueue. No step reads real time or an unseeded random number,
//! and every collection is ordered, so one seed gives one run.
//!
//! By concept: [`server`] (the requests, as the model answers them), [`watches`] (the
//! client's registrations), [`sessions`] (connections and their faults), [`requests`] (slots,
//! the server's queue, background work), [`operator`] (direct changes), [`clock`].

mod clock;
mod operator;
mod requests;
mod server;
mod sessions;
mod watches;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::task::Waker;
use std::time::{Duration, Instant};

use zklock_server::model::{ConnId, Model, ModelConfig, Now};

pub(crate) use requests::{Background, CreateFault, Slot};
pub(crate) use server::{Mode, Op, Reply, ZkErr};
pub(crate) use sessions::SessionRecord;
pub(crate) use watches::{WatchKind, WatchReg};

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

/// The whole simulated world.
pub(crate) struct World {
    pub(crate) origin: Instant,
    /// Virtual time since `origin`.
    pub(crate) now: Duration,
    /// ZooKeeper: the tree, the server's sessions and its watch table.
    model: Model,
    /// The connections open at the model, each with its session.
    conns: BTreeMap<ConnId, i64>,
    next_conn: ConnId,
    /// The operator's connection, which also follows every change of the tree (a persistent
    /// recursive watch on `/`): each node's czxid, and which zxid removed it.
    operator_conn: ConnId,
    live: BTreeMap<String, i64>,
    next_xid: i32,
    pub(crate) sessions: BTreeMap<i64, SessionRecord>,
    /// The clients' watch registrations, by id.
    watches: BTreeMap<u64, WatchReg>,
    next_watch: u64,
    slots: BTreeMap<u64, Slot>,
    next_slot: u64,
    /// Timers: (when, sequence) → waker.
    timers: BTreeMap<(Duration, u64), Waker>,
    next_timer: u64,
    pub(crate) rng: Rng,
    /// Percent chance that a client leaves a watch out of its SetWatches on a reconnect (it
    /// never fires then).
    pub(crate) lose_watch_percent: u64,
    /// Percent chance that a request in flight when the connection drops was applied.
    pub(crate) applied_percent: u64,
    /// Shuffle listings (clients must not rely on the server's order).
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
    /// Watches never left out of a reconnect's SetWatches (see [`watch_now`](Self::watch_now)).
    robust: BTreeSet<u64>,
    /// Per session, the label of an op (`children`, `sync`, ...) whose next instance the server
    /// does not get to (the connection goes silent).
    pub(crate) stall: BTreeMap<i64, &'static str>,
    /// If set, creates report this owner in their reply's stat (a lying or stale reply).
    pub(crate) reported_owner: Option<i64>,
    /// Counter of ids handed out for protected names.
    pub(crate) ids: u64,
    /// Background work settled: tickets of background deletes that finished.
    pub(crate) settled: BTreeSet<u64>,
    next_ticket: u64,
    /// Droppable payloads of background work ("told when settled").
    pub(crate) payloads: BTreeMap<u64, Box<dyn std::any::Any + Send>>,
    /// One line per step, for a failing seed's trace.
    pub(crate) trace: Vec<String>,
    pub(crate) tracing: bool,
    /// The zxid of the answer taken last (by any task).
    pub(crate) last_taken: i64,
}

/// The id the operator's (and the tests' "other") changes are made under: a session that
/// never expires.
pub(crate) const OPERATOR: i64 = 0x0A;

/// The first id of the simulated sessions (after the operator's).
const FIRST_SESSION: i64 = 0x100;

impl World {
    pub(crate) fn new(seed: u64) -> World {
        let config = ModelConfig {
            // Sessions expire on the millisecond their timeout ends (the tick rounds up).
            tick_ms: 1,
            min_session_timeout_ms: 1,
            max_session_timeout_ms: i32::MAX,
            extended_types: false,
            super_digest: None,
            container_max_never_used_ms: 0,
        };
        let now = Duration::ZERO;
        let mut world = World {
            origin: Instant::now(),
            now,
            model: Model::new(config, at(now)),
            conns: BTreeMap::new(),
            next_conn: 1,
            operator_conn: 0,
            live: BTreeMap::new(),
            next_xid: 1,
            sessions: BTreeMap::new(),
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
            next_ticket: 1,
            payloads: BTreeMap::new(),
            trace: Vec::new(),
            tracing: false,
            last_taken: 0,
        };
        world.open_operator(FIRST_SESSION);
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
}

/// The model's moment for virtual time `now` (its wall clock starts at 0 too).
fn at(now: Duration) -> Now {
    let ms = u64::try_from(now.as_millis()).unwrap_or(u64::MAX);
    Now {
        mono_ms: ms,
        wall_ms: i64::try_from(ms).unwrap_or(i64::MAX),
    }
}

pub(crate) fn parent_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => "/",
    }
}
