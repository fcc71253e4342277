//! The scheduler: runs one schedule of the simulation step by step. At every step its seeded
//! streams choose which task to poll, which request the server processes, which reply or
//! notification is delivered, when the clock moves and which fault strikes; the invariants
//! (`checks.rs`) are checked after every step and once the run is quiet.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Wake, Waker};
use std::time::Duration;

use parking_lot::Mutex;

use crate::session::Liveness;

use crate::core::sim::client::{Shared, SimSession};
use crate::core::sim::world::{Rng, OPERATOR};
use crate::core::sim::TIMEOUT;

use super::book::{Acquisition, SharedBook};
use super::checks::{check_holders, check_quiescence};
use super::local::{self, SharedLocalBook};
use super::plan::{draw, plan, Recipe, Setup, Streams};
use super::worker::worker;

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
    /// What the seed drew for the whole schedule.
    setup: Setup,
    /// The seed's random streams.
    streams: Streams,
    tasks: Vec<Option<Task>>,
    ready: Arc<Mutex<BTreeSet<usize>>>,
    book: SharedBook,
    /// What local handoff's checks keep (see `local.rs`).
    local: SharedLocalBook,
    sessions: Vec<Arc<SimSession>>,
    /// Nodes the operator put in place of others (removed when the faults stop).
    replacements: Vec<String>,
    steps: u64,
    /// Per ready task, when it was first woken since its last poll.
    woken: BTreeMap<usize, Duration>,
    /// Per pending task, when the poll that left it pending ran.
    pending_since: BTreeMap<usize, Duration>,
}

impl Schedule {
    fn new(seed: u64, trace: bool) -> Schedule {
        let (world, setup, streams) = draw(seed, trace);
        let world = Arc::new(Mutex::new(world));
        let book = SharedBook::default();
        let ready = Arc::new(Mutex::new(BTreeSet::new()));
        let (recipe, reuse) = (setup.recipe, setup.reuse);
        let mut schedule = Schedule {
            world: world.clone(),
            setup,
            streams,
            tasks: Vec::new(),
            ready,
            book,
            local: SharedLocalBook::default(),
            sessions: Vec::new(),
            replacements: Vec::new(),
            steps: 0,
            woken: BTreeMap::new(),
            pending_since: BTreeMap::new(),
        };
        let processes = 2 + schedule.streams.rng.below(2);
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
            for _ in 0..1 + schedule.streams.rng.below(3) + extra_tasks {
                let mut plan = plan(&schedule.setup, &mut schedule.streams);
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
                schedule.setup.locks
            )
        });
        schedule
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
            check_holders(
                &self.world,
                &self.book,
                &self.local,
                &self.setup.locks,
                &self.setup.limits,
                self.steps,
            );
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
            let stuck: Vec<usize> = (0..self.tasks.len())
                .filter(|t| self.tasks[*t].is_some())
                .collect();
            check_quiescence(&self.world, &self.book, &stuck, self.steps);
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
        if faults && self.streams.rng.chance(self.setup.fault_percent) {
            self.fault();
            return true;
        }
        if self.setup.revocations && self.streams.revoke.chance(2) && self.request_revocation() {
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
        if choices == 0 || self.streams.rng.chance(3) {
            let next = self.world.lock().next_due();
            let Some(next) = next else {
                return choices > 0 && self.poll_or_move(&ready, &movable, &reconnectable);
            };
            let mut world = self.world.lock();
            let to = if choices > 0 {
                let step = Duration::from_millis(1 + self.streams.rng.below(500) as u64);
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
        let pick = self.streams.rng.below(choices);
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
        let session = self.sessions[self.streams.rng.below(self.sessions.len())].id;
        let mut world = self.world.lock();
        match self.streams.rng.below(8) {
            0 | 1 => world.drop_link(session),
            2 => {
                let notice = TIMEOUT * 2 / 5 * self.streams.rng.below(101) as u32 / 100;
                world.partition(session, notice);
            }
            3 => {
                let length = TIMEOUT * self.streams.rng.below(201) as u32 / 100;
                world.freeze(session, length);
            }
            4 | 5 => {
                // The operator deletes a lock node.
                let lock = &self.setup.locks[self.streams.rng.below(self.setup.locks.len())];
                let children = world.children(lock);
                if children.is_empty() {
                    return;
                }
                let path = format!(
                    "{lock}/{}",
                    children[self.streams.rng.below(children.len())]
                );
                // (A holder's node, not a semaphore's `locks` or `leases` parent: ZooKeeper
                // refuses children under an ephemeral node put in its place.)
                let ephemeral = world.stat(&path).is_some_and(|s| s.ephemeral_owner != 0);
                world.delete_now(&path);
                // Sometimes with one of its own in its place, same name.
                if self.streams.rng.chance(30)
                    && ephemeral
                    && world.create_now(OPERATOR, &path, false).is_some()
                {
                    world.replaced.insert(path.clone());
                    self.replacements.push(path);
                }
            }
            6 if self.streams.rng.chance(50) => world.sweep_containers(),
            6 => {
                // The operator writes a lock node (a revocation request does).
                let lock = &self.setup.locks[self.streams.rng.below(self.setup.locks.len())];
                let children = world.children(lock);
                if !children.is_empty() {
                    let path = format!(
                        "{lock}/{}",
                        children[self.streams.rng.below(children.len())]
                    );
                    world.set_data_now(&path);
                }
            }
            _ if self.streams.extra.chance(20) => {
                world.note(|| format!("the next create of {session:#x} gets a stale reply"));
                world.stale_owner.insert(session);
            }
            _ => {
                let length = Duration::from_millis(self.streams.rng.below(2_000) as u64);
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
        let holder = &book.holders[self.streams.revoke.below(book.holders.len())];
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
}
