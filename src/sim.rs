//! The seeded scheduler of the deterministic simulation: several simulated processes (one session each, several tasks per
//! session) run real acquisitions of the core (`contend`) against the simulated ZooKeeper,
//! while a seeded generator chooses, at every step, which task to poll, which request the
//! server processes, which reply or notification is delivered, when the clock moves and which
//! fault strikes. The invariants are checked after every step.
//!
//! A run is a function of its seed alone: no real time, no unseeded randomness, no iteration
//! over a hash map on the way.
//!
//! It sits above the recipes (it runs their kinds, from the catalogue); the simulated
//! ZooKeeper it runs them on is the core's (`core/sim`), which the core's unit tests use too.
//! What its tasks and its checks share (an acquisition, the book of holders and violations)
//! is in `book.rs`; local handoff's tasks and checks are in `local.rs`, which stands on
//! `book.rs` alone.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use parking_lot::Mutex;

use crate::core::contend::take;
use crate::core::hold::Hold;
use crate::core::kind::{Kind, Role};
use crate::core::ordered::take_in_order;
use crate::core::permits::take_permits;
use crate::core::seam::{NodeStore, ZkSession};
use crate::core::wait::Budget;
use crate::error::Error;
use crate::recipes::catalogue::{LATCH, MUTEX, READER, SEMAPHORE, WRITER};
use crate::rt::cancel::CancelToken;
use crate::session::Liveness;
use crate::wire as zk;

use crate::core::sim::client::{sleep_until, Shared, SimSession};
use crate::core::sim::held::SimHeld;
use crate::core::sim::world::{parent_of, Mode, Rng, World, OPERATOR};
use crate::core::sim::TIMEOUT;

mod book;
mod local;

use self::book::{
    reads_held, undocumented, Acquisition, DroppedAfter, Holder, SharedBook, Target, Wait, ONE_CALL,
};
use self::local::SharedLocalBook;

/// What one schedule found.
#[derive(Debug, Default)]
pub struct Report {
    /// The invariants broken, each with the step it was found at.
    pub violations: Vec<String>,
    /// Steps taken.
    pub steps: u64,
    /// Acquisitions that held the lock.
    pub acquired: u64,
    /// The run's step trace (when asked for).
    pub trace: Vec<String>,
    /// Acquisitions handed over locally, without the server (local handoff).
    pub local_handoffs: u64,
}

/// The recipes a schedule can exercise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Recipe {
    Mutex,
    RwLock,
    /// A leader election (Curator's `LeaderLatch`): exclusive leadership.
    Election,
    /// A semaphore with this many permits; a taker takes one lease or several.
    Semaphore(usize),
    /// Multi-locks over the lock paths (each path a mutex or a write lock), beside single
    /// acquisitions of those paths (a write lock's path read-locked too).
    Multi,
}

struct TaskWaker {
    id: usize,
    ready: Arc<Mutex<BTreeSet<usize>>>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.ready.lock().insert(self.id);
    }
}

struct Task {
    future: Pin<Box<dyn Future<Output = ()>>>,
    session: i64,
    waker: Waker,
}

/// The step budget of the fault phase, and its length on the virtual clock.
const FAULT_STEPS: u64 = 4_000;
const FAULT_TIME: Duration = Duration::from_secs(30);
/// After the faults stop, every acquisition must end within this (virtual) time.
const SETTLE_TIME: Duration = Duration::from_secs(600);
const SETTLE_STEPS: u64 = 200_000;
/// Runs the schedule of `seed`; `trace` keeps its step trace.
pub fn simulate(seed: u64, trace: bool) -> Report {
    Schedule::new(seed, trace).run()
}

struct Schedule {
    world: Shared,
    rng: Rng,
    tasks: Vec<Option<Task>>,
    ready: Arc<Mutex<BTreeSet<usize>>>,
    book: SharedBook,
    /// What local handoff's checks keep (see `local.rs`).
    local: SharedLocalBook,
    sessions: Vec<Arc<SimSession>>,
    locks: Vec<String>,
    /// Nodes the operator put in place of others (removed when the faults stop).
    replacements: Vec<String>,
    fault_percent: u64,
    steps: u64,
    /// The permits of each semaphore's path.
    limits: BTreeMap<String, usize>,
    /// Choices added after seeds were kept as regression tests, drawn apart so that those
    /// seeds keep their schedules as far as possible.
    extra: Rng,
    /// The same, for the choices added with the multi-lock and several leases per taker.
    more: Rng,
    /// For a multi-lock schedule, the kind of each lock path (a mutex or a write lock).
    kinds: BTreeMap<String, &'static Kind>,
    /// One lock path used and left empty again and again, its container swept often: made
    /// anew, it numbers its nodes from 0 again, below what the sessions learnt of the last
    /// one (`core/floors.rs` keys what it learns by the path's incarnation).
    reuse: bool,
    /// Revocation requests now and then to a holder (one seed in four; drawn apart, see
    /// `extra`).
    revocations: bool,
    revoke: Rng,
    /// Cancellations (drawn apart, see `extra`).
    cancels: Rng,
    /// Per ready task, when it was first woken since its last poll.
    woken: BTreeMap<usize, Duration>,
    /// Per pending task, when the poll that left it pending ran.
    pending_since: BTreeMap<usize, Duration>,
}

impl Schedule {
    fn new(seed: u64, trace: bool) -> Schedule {
        let mut rng = Rng::new(seed);
        let mut world = World::new(rng.next());
        world.tracing = trace;
        world.lose_watch_percent = [0, 10, 50][rng.below(3)];
        world.applied_percent = [0, 50, 100][rng.below(3)];
        let recipe = [Recipe::Mutex, Recipe::RwLock][rng.below(2)];
        let mut locks: Vec<String> = (0..1 + rng.below(2))
            .map(|i| format!("/locks/l{i}"))
            .collect();
        let mut extra = Rng::new(!seed);
        let mut more = Rng::new(seed ^ 0x6D75_6C74_6970_6C65);
        // Every fourth seed runs a recipe added later (drawn apart, see `extra`), and one in
        // eight of the others the multi-lock (see `more`).
        let recipe = match extra.below(8) {
            0 => Recipe::Election,
            1 => Recipe::Semaphore(1 + extra.below(3)),
            _ if more.below(6) == 0 => Recipe::Multi,
            _ => recipe,
        };
        // One in five of the seeds that queue on their lock paths reuse one path.
        let reuse = matches!(recipe, Recipe::Mutex | Recipe::RwLock | Recipe::Election)
            && more.below(5) == 0;
        if reuse {
            locks.truncate(1);
        }
        let mut revoke = Rng::new(seed ^ 0x7265_766F_6B65);
        let revocations = revoke.below(4) == 0;
        let mut kinds = BTreeMap::new();
        if recipe == Recipe::Multi {
            locks = (0..2 + more.below(2))
                .map(|i| format!("/locks/l{i}"))
                .collect();
            for lock in &locks {
                let kind: &'static Kind = [&MUTEX, &WRITER][more.below(2)];
                kinds.insert(lock.clone(), kind);
            }
        }
        world.sweep_every = [
            None,
            Some(Duration::from_secs(1)),
            Some(Duration::from_secs(5)),
        ][extra.below(3)];
        if reuse {
            world.sweep_every = Some(Duration::from_millis(100 + 100 * more.below(5) as u64));
        }
        let mut limits = BTreeMap::new();
        world.mkdirs("/locks", Mode::Persistent);
        for lock in &locks {
            if let Recipe::Semaphore(permits) = recipe {
                // Its gate and leases are made by the core, as containers, when first used.
                limits.insert(lock.clone(), permits);
                continue;
            }
            world.mkdirs(lock, Mode::Container);
            // Some lock paths are near the end of their sequence numbers.
            if rng.chance(10) {
                let left = rng.below(6) as i32;
                world.set_cversion(lock, i32::MAX - left);
            }
        }
        let world = Arc::new(Mutex::new(world));
        let book = SharedBook::default();
        let ready = Arc::new(Mutex::new(BTreeSet::new()));
        let mut schedule = Schedule {
            world: world.clone(),
            rng,
            tasks: Vec::new(),
            ready,
            book,
            local: SharedLocalBook::default(),
            sessions: Vec::new(),
            locks,
            replacements: Vec::new(),
            fault_percent: [0, 1, 3][seed as usize % 3],
            steps: 0,
            extra,
            more,
            kinds,
            reuse,
            revocations,
            revoke,
            cancels: Rng::new(seed ^ 0x6361_6E63_656C),
            limits,
            woken: BTreeMap::new(),
            pending_since: BTreeMap::new(),
        };
        let processes = 2 + schedule.rng.below(2);
        // Local handoff is drawn apart too, so that schedules without it keep theirs.
        let mut local_rng = Rng::new(seed.rotate_left(29) ^ 0x10ca1);
        let mut long_rng = Rng::new(seed.rotate_left(17) ^ 0x10_6e67);
        for _ in 0..processes {
            let id = world.lock().open_session(TIMEOUT);
            let session = Arc::new(SimSession::new(&world, id));
            schedule.sessions.push(session.clone());
            let batch = matches!(recipe, Recipe::Mutex | Recipe::RwLock)
                .then(|| local::batch(&mut local_rng))
                .flatten();
            // Several local callers per process with local handoff.
            let extra_tasks = if batch.is_some() { 2 } else { 0 };
            for _ in 0..1 + schedule.rng.below(3) + extra_tasks {
                let mut plan = schedule.plan(recipe);
                for acquisition in &mut plan {
                    acquisition.local = batch;
                    if batch.is_some() {
                        acquisition.hold = local::hold(&mut local_rng, &mut long_rng);
                    }
                }
                schedule.spawn(&session, plan);
            }
        }
        world.lock().note(|| {
            format!(
                "seed {seed}: {recipe:?} on {:?} (reuse: {reuse})",
                schedule.locks
            )
        });
        schedule
    }

    fn plan(&mut self, recipe: Recipe) -> Vec<Acquisition> {
        let rng = &mut self.rng;
        let longer = match self.reuse {
            true => 2 + self.more.below(4),
            false => 0,
        };
        (0..1 + rng.below(3) + self.extra.below(3) + longer)
            .map(|_| {
                let more = &mut self.more;
                let target = match recipe {
                    Recipe::Mutex => Target::Lock(&MUTEX),
                    Recipe::RwLock if rng.chance(50) => Target::Lock(&READER),
                    Recipe::RwLock => Target::Lock(&WRITER),
                    Recipe::Election => Target::Lock(&LATCH),
                    Recipe::Semaphore(permits) => Target::Leases {
                        permits,
                        count: match more.chance(40) {
                            true => 1 + more.below(permits),
                            false => 1,
                        },
                    },
                    // (Chosen below, once the lock path is.)
                    Recipe::Multi => Target::Lock(&MUTEX),
                };
                let wait = match rng.below(10) {
                    0..=3 => Wait::Forever,
                    4..=5 => Wait::Try,
                    _ => Wait::Timeout(Duration::from_millis(50 + rng.below(3_000) as u64)),
                };
                let mut acquisition = Acquisition {
                    lock: self.locks[rng.below(self.locks.len())].clone(),
                    target,
                    wait,
                    drop_after: rng.chance(15).then(|| 1 + rng.below(6) as u32),
                    hold: Duration::from_millis(rng.below(2_000) as u64),
                    pause: Duration::ZERO,
                    revocable: false,
                    local: None,
                    cancel_after: None,
                };
                if !matches!(wait, Wait::Try) && self.cancels.chance(20) {
                    let after = Duration::from_millis(self.cancels.below(3_000) as u64);
                    acquisition.cancel_after = Some(after);
                }
                if self.revocations {
                    acquisition.revocable = self.revoke.chance(50);
                }
                if self.reuse {
                    acquisition.pause = Duration::from_millis(more.below(1_500) as u64);
                }
                if recipe == Recipe::Multi {
                    acquisition.target = multi_target(more, &self.kinds, &acquisition.lock);
                }
                acquisition
            })
            .collect()
    }

    fn spawn(&mut self, session: &Arc<SimSession>, plan: Vec<Acquisition>) {
        let id = self.tasks.len();
        let waker = Waker::from(Arc::new(TaskWaker {
            id,
            ready: self.ready.clone(),
        }));
        let (book, local) = (self.book.clone(), self.local.clone());
        let future = Box::pin(worker(id, session.clone(), book, local, plan));
        self.tasks.push(Some(Task {
            future,
            session: session.id,
            waker,
        }));
        self.ready.lock().insert(id);
    }

    fn run(mut self) -> Report {
        let mut faults = true;
        let mut settle_until = None;
        loop {
            self.steps += 1;
            let now = self.world.lock().now;
            if faults && (self.steps > FAULT_STEPS || now > FAULT_TIME) {
                faults = false;
                self.heal();
                settle_until = Some((now + SETTLE_TIME, self.steps + SETTLE_STEPS));
            }
            if !self.step(faults) {
                // Nothing can move, not even the clock.
                if !faults {
                    break;
                }
                faults = false;
                self.heal();
                settle_until = Some((now + SETTLE_TIME, self.steps + SETTLE_STEPS));
                continue;
            }
            self.note_wakes();
            self.check_holders();
            if !self.book.borrow().violations.is_empty() {
                break;
            }
            if let Some((time, steps)) = settle_until {
                let now = self.world.lock().now;
                let quiet = {
                    let world = self.world.lock();
                    // A frozen process's inbox does not count as movable, but it acts on it
                    // when it resumes (the 10,000,000-seed sweep's seed 8496650: a read lock's
                    // create answered while the process was stopped looked left behind).
                    world.background_pending() == 0
                        && world.movable().is_empty()
                        && !world.any_frozen()
                };
                if self.all_done() && quiet {
                    break;
                }
                if now > time || self.steps > steps {
                    break;
                }
            }
        }
        if self.book.borrow().violations.is_empty() {
            self.check_quiescence();
        }
        let world = self.world.lock();
        let book = self.book.borrow();
        Report {
            violations: book.violations.clone(),
            steps: self.steps,
            acquired: book.acquired,
            trace: world.trace.clone(),
            local_handoffs: self.local.borrow().handoffs,
        }
    }

    /// Notes when each task now ready was woken (a step's wakes happen at its end's time: a
    /// clock step fires its timers at the time it moves to).
    fn note_wakes(&mut self) {
        let now = self.world.lock().now;
        for id in self.ready.lock().iter() {
            self.woken.entry(*id).or_insert(now);
        }
    }

    fn all_done(&self) -> bool {
        self.tasks.iter().all(Option::is_none)
    }

    /// One step: `false` if nothing at all can happen.
    fn step(&mut self, faults: bool) -> bool {
        if faults && self.rng.chance(self.fault_percent) {
            self.fault();
            return true;
        }
        if self.revocations && self.revoke.chance(2) && self.request_revocation() {
            return true;
        }
        let ready: Vec<usize> = {
            let world = self.world.lock();
            let ready = self.ready.lock();
            ready
                .iter()
                .copied()
                .filter(|t| {
                    self.tasks[*t]
                        .as_ref()
                        .is_some_and(|task| !world.frozen(task.session))
                })
                .collect()
        };
        let (movable, reconnectable) = {
            let world = self.world.lock();
            let reconnectable: Vec<i64> = self
                .sessions
                .iter()
                .map(|s| s.id)
                .filter(|id| {
                    let s = world.session(*id);
                    s.liveness == Liveness::Disconnected && !world.frozen(*id)
                })
                .collect();
            (world.movable(), reconnectable)
        };
        let choices = ready.len() + 2 * movable.len() + reconnectable.len();
        // Now and then the clock moves while work is in flight.
        if choices == 0 || self.rng.chance(3) {
            let next = self.world.lock().next_due();
            let Some(next) = next else {
                return choices > 0 && self.poll_or_move(&ready, &movable, &reconnectable);
            };
            let mut world = self.world.lock();
            let to = if choices > 0 {
                let step = Duration::from_millis(1 + self.rng.below(500) as u64);
                next.min(world.now + step)
            } else {
                next
            };
            world.note(|| format!("clock → {:.3}s", to.as_secs_f64()));
            world.advance(to);
            return true;
        }
        self.poll_or_move(&ready, &movable, &reconnectable)
    }

    fn poll_or_move(&mut self, ready: &[usize], movable: &[i64], reconnectable: &[i64]) -> bool {
        let choices = ready.len() + 2 * movable.len() + reconnectable.len();
        if choices == 0 {
            return false;
        }
        let pick = self.rng.below(choices);
        if pick < ready.len() {
            self.poll(ready[pick]);
        } else if pick < ready.len() + 2 * movable.len() {
            let i = pick - ready.len();
            let id = movable[i / 2];
            let mut world = self.world.lock();
            // A reply or notification to the client, or a request to the server: whichever
            // the seed picks, the other if that one has nothing.
            let delivered_first = i % 2 == 0;
            let moved = (delivered_first && world.deliver(id))
                || world.process(id)
                || (!delivered_first && world.deliver(id));
            debug_assert!(moved);
        } else {
            let id = reconnectable[pick - ready.len() - 2 * movable.len()];
            self.world.lock().reconnect(id);
        }
        true
    }

    fn poll(&mut self, id: usize) {
        self.ready.lock().remove(&id);
        let Some(task) = self.tasks[id].as_mut() else {
            return;
        };
        {
            let mut world = self.world.lock();
            world.note(|| format!("poll task {id}"));
            world.polling = Some(id);
        }
        let now = self.world.lock().now;
        let woken = self.woken.remove(&id).unwrap_or(now);
        if let Some(since) = self.pending_since.remove(&id) {
            let mut book = self.book.borrow_mut();
            book.waits.entry(id).or_default().push((since, woken));
        }
        let waker = task.waker.clone();
        let mut cx = Context::from_waker(&waker);
        let ready = task.future.as_mut().poll(&mut cx).is_ready();
        self.world.lock().polling = None;
        if !ready {
            self.pending_since.insert(id, now);
        }
        if ready {
            self.tasks[id] = None;
            self.book.borrow_mut().finished.insert(id);
        }
    }

    /// One fault, chosen by the seed.
    fn fault(&mut self) {
        let session = self.sessions[self.rng.below(self.sessions.len())].id;
        let mut world = self.world.lock();
        match self.rng.below(8) {
            0 | 1 => world.drop_link(session),
            2 => {
                let notice = TIMEOUT * 2 / 5 * self.rng.below(101) as u32 / 100;
                world.partition(session, notice);
            }
            3 => {
                let length = TIMEOUT * self.rng.below(201) as u32 / 100;
                world.freeze(session, length);
            }
            4 | 5 => {
                // The operator deletes a lock node.
                let lock = &self.locks[self.rng.below(self.locks.len())];
                let children = world.children(lock);
                if children.is_empty() {
                    return;
                }
                let path = format!("{lock}/{}", children[self.rng.below(children.len())]);
                // (A holder's node, not a semaphore's `locks` or `leases` parent: ZooKeeper
                // refuses children under an ephemeral node put in its place.)
                let ephemeral = world.stat(&path).is_some_and(|s| s.ephemeral_owner != 0);
                world.delete_now(&path);
                // Sometimes with one of its own in its place, same name.
                if self.rng.chance(30)
                    && ephemeral
                    && world.create_now(OPERATOR, &path, false).is_some()
                {
                    world.replaced.insert(path.clone());
                    self.replacements.push(path);
                }
            }
            6 if self.rng.chance(50) => world.sweep_containers(),
            6 => {
                // The operator writes a lock node (a revocation request does).
                let lock = &self.locks[self.rng.below(self.locks.len())];
                let children = world.children(lock);
                if !children.is_empty() {
                    let path = format!("{lock}/{}", children[self.rng.below(children.len())]);
                    world.set_data_now(&path);
                }
            }
            _ if self.extra.chance(20) => {
                world.note(|| format!("the next create of {session:#x} gets a stale reply"));
                world.stale_owner.insert(session);
            }
            _ => {
                let length = Duration::from_millis(self.rng.below(2_000) as u64);
                world.note(|| format!("a burst of {length:?} on {session:#x}"));
                world.partition(session, length);
            }
        }
    }

    /// A revocation request to one of the holders (`request_revocation`: a write to its node);
    /// `false` if no one holds.
    fn request_revocation(&mut self) -> bool {
        let book = self.book.borrow();
        if book.holders.is_empty() {
            return false;
        }
        let holder = &book.holders[self.revoke.below(book.holders.len())];
        let path = holder.node_path.clone();
        drop(book);
        let mut world = self.world.lock();
        world.note(|| format!("revocation requested of {path}"));
        world.set_data_now(&path);
        true
    }

    /// The faults stop: frozen processes resume once their time is up, silent connections
    /// are noticed and dropped, the operator removes its replacements.
    fn heal(&mut self) {
        let mut world = self.world.lock();
        world.note(|| "faults stop".to_owned());
        for path in std::mem::take(&mut self.replacements) {
            world.delete_now(&path);
        }
    }

    /// No two holders that both read `Held` now, nor a writer and a reader.
    fn check_holders(&mut self) {
        let world = self.world.lock();
        let mut book = self.book.borrow_mut();
        let now = world.instant();
        let mut violation = None;
        // Fencing tokens, in the order their holders first read `Held` (a holder that never
        // does, e.g. one frozen past its session, never uses its token).
        let book = &mut *book;
        local::observe(&mut self.local.borrow_mut(), &mut book.violations);
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
                    self.steps, holder.lock, holder.task
                ));
            }
        }
        for lock in &self.locks {
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
            let permits = self.limits.get(lock).copied().unwrap_or(0);
            if exclusive > 1 || (exclusive == 1 && readers > 0) || leases > permits {
                let who: Vec<String> = held
                    .iter()
                    .map(|h| format!("task {} ({:?}) {}", h.task, h.role, h.node_path))
                    .collect();
                violation = Some(format!(
                    "step {}: {lock} held at once by {}",
                    self.steps,
                    who.join(", ")
                ));
            }
        }
        book.violations.extend(violation);
    }

    /// At quiescence: no node left that no live call holds or waits for, no watch left.
    fn check_quiescence(&mut self) {
        let world = self.world.lock();
        let mut book = self.book.borrow_mut();
        let steps = self.steps;
        if !self.tasks.iter().all(Option::is_none) {
            let stuck: Vec<usize> = (0..self.tasks.len())
                .filter(|t| self.tasks[*t].is_some())
                .collect();
            book.violations.push(format!(
                "step {steps}: tasks {stuck:?} never ended after the faults stopped"
            ));
            drop(world);
            let outstanding = self.world.lock().outstanding();
            let mut world = self.world.lock();
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
}

/// A multi-lock schedule's acquisition: most often several of its paths (at least two, in a
/// random order: the core must order them), else `lock` alone, read-locked now and then if it
/// is a write lock's.
fn multi_target(more: &mut Rng, kinds: &BTreeMap<String, &'static Kind>, lock: &str) -> Target {
    if more.chance(60) {
        let mut members: Vec<(String, &'static Kind)> = kinds
            .iter()
            .filter(|(path, _)| *path == lock || more.chance(60))
            .map(|(path, kind)| (path.clone(), *kind))
            .collect();
        if members.len() < 2 {
            let (path, kind) = kinds.iter().find(|(p, _)| *p != lock).expect("two paths");
            members.push((path.clone(), *kind));
        }
        for i in (1..members.len()).rev() {
            members.swap(i, more.below(i + 1));
        }
        return Target::Multi(members);
    }
    let kind = kinds[lock];
    if kind.recipe == WRITER.recipe && more.chance(30) {
        Target::Lock(&READER)
    } else {
        Target::Lock(kind)
    }
}

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
async fn worker(
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
fn check_deadline(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_replays_byte_for_byte() {
        for seed in [1, 2, 3, 42] {
            let a = simulate(seed, true);
            let b = simulate(seed, true);
            assert_eq!(a.trace, b.trace);
            assert_eq!(a.steps, b.steps);
        }
    }

    /// Regression (found by the simulation, as seed 1385 of its first version): a waiter
    /// whose connection dropped and came back between the reply that set its watch and the
    /// start of its wait missed the reconnect; the watch, lost across the reconnect, never
    /// fired, and the waiter waited for ever. Seed 274 runs into it today.
    #[test]
    fn seed_274_a_reconnect_right_after_the_watch_is_set_is_not_missed() {
        let report = simulate(274, false);
        assert_eq!(report.violations, Vec::<String>::new());
    }

    /// A timed acquisition whose connection went silent (still connected) at 0.225 s: it
    /// waited 943 ms past its deadline for a delete no one would answer, before that wait was
    /// bounded by the deadline.
    #[test]
    fn seed_13_a_timed_acquisition_on_a_silent_connection_keeps_its_deadline() {
        let report = simulate(13, false);
        assert_eq!(report.violations, Vec::<String>::new());
    }

    /// Regressions of the simulation itself, found by the 2,000,000-seed sweep: four claims
    /// decided on a listing another task of the session had asked for (the checks did not
    /// count it as read by the claimer, so a node the operator had replaced under the same
    /// name looked claimed after its deletion was seen), and a process frozen for no time at
    /// all, which the clock never thawed (seed 1558670). And one of the 10,000,000-seed
    /// sweep's: a run declared quiet while a process was frozen with an answer in its inbox, so
    /// the node it deletes when it resumes looked left behind (seed 8496650).
    #[test]
    fn the_seeds_the_long_sweep_failed_hold() {
        for seed in [
            162_302, 1_040_435, 1_208_639, 1_315_175, 1_558_670, 8_496_650,
        ] {
            let report = simulate(seed, false);
            assert_eq!(report.violations, Vec::<String>::new(), "seed {seed}");
        }
    }

    #[test]
    fn a_few_hundred_schedules_hold_every_invariant() {
        let mut acquired = 0;
        for seed in 0..300 {
            let report = simulate(seed, false);
            assert!(
                report.violations.is_empty(),
                "seed {seed}: {:?}",
                report.violations
            );
            acquired += report.acquired;
        }
        assert!(acquired > 300, "the schedules acquire ({acquired})");
    }
}
