//! What a schedule is made of, drawn from its seed before it runs: the recipe, the lock paths
//! and the simulated ZooKeeper's settings ([`draw`]), and each task's acquisitions ([`plan`]).
//! The seed's random streams ([`Streams`]) go on to the scheduler, which draws its steps and
//! faults from them.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::core::kind::Kind;
use crate::recipes::catalogue::{LATCH, MUTEX, READER, WRITER};

use crate::core::sim::world::{Mode, Rng, World};

use super::book::{Acquisition, Target, Wait};

/// The recipes a schedule can exercise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Recipe {
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

/// A schedule's random streams, each seeded from its seed alone.
pub(super) struct Streams {
    /// The first: the world's settings, the plans, the steps and the faults.
    pub(super) rng: Rng,
    /// Choices added after seeds were kept as regression tests, drawn apart so that those
    /// seeds keep their schedules as far as possible.
    pub(super) extra: Rng,
    /// The same, for the choices added with the multi-lock and several leases per taker.
    pub(super) more: Rng,
    /// Revocation requests (drawn apart, see `extra`).
    pub(super) revoke: Rng,
    /// Cancellations (drawn apart, see `extra`).
    pub(super) cancels: Rng,
}

/// What the seed drew for the whole schedule.
pub(super) struct Setup {
    pub(super) recipe: Recipe,
    pub(super) locks: Vec<String>,
    /// For a multi-lock schedule, the kind of each lock path (a mutex or a write lock).
    pub(super) kinds: BTreeMap<String, &'static Kind>,
    /// The permits of each semaphore's path.
    pub(super) limits: BTreeMap<String, usize>,
    /// One lock path used and left empty again and again, its container swept often: made
    /// anew, it numbers its nodes from 0 again, below what the sessions learnt of the last
    /// one (`core/floors.rs` keys what it learns by the path's incarnation).
    pub(super) reuse: bool,
    /// Revocation requests now and then to a holder (one seed in four).
    pub(super) revocations: bool,
    /// The chance of a fault at each step of the fault phase, in percent.
    pub(super) fault_percent: u64,
}

/// The schedule of `seed`: its simulated ZooKeeper (tracing if `trace`), with the lock paths
/// made, what it runs, and its random streams.
pub(super) fn draw(seed: u64, trace: bool) -> (World, Setup, Streams) {
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
    let reuse =
        matches!(recipe, Recipe::Mutex | Recipe::RwLock | Recipe::Election) && more.below(5) == 0;
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
    let setup = Setup {
        recipe,
        locks,
        kinds,
        limits,
        reuse,
        revocations,
        fault_percent: [0, 1, 3][seed as usize % 3],
    };
    let streams = Streams {
        rng,
        extra,
        more,
        revoke,
        cancels: Rng::new(seed ^ 0x6361_6E63_656C),
    };
    (world, setup, streams)
}

/// One task's acquisitions, drawn from `streams` for the schedule `setup` describes.
pub(super) fn plan(setup: &Setup, streams: &mut Streams) -> Vec<Acquisition> {
    let recipe = setup.recipe;
    let rng = &mut streams.rng;
    let longer = match setup.reuse {
        true => 2 + streams.more.below(4),
        false => 0,
    };
    (0..1 + rng.below(3) + streams.extra.below(3) + longer)
        .map(|_| {
            let more = &mut streams.more;
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
                lock: setup.locks[rng.below(setup.locks.len())].clone(),
                target,
                wait,
                drop_after: rng.chance(15).then(|| 1 + rng.below(6) as u32),
                hold: Duration::from_millis(rng.below(2_000) as u64),
                pause: Duration::ZERO,
                revocable: false,
                local: None,
                cancel_after: None,
            };
            if !matches!(wait, Wait::Try) && streams.cancels.chance(20) {
                let after = Duration::from_millis(streams.cancels.below(3_000) as u64);
                acquisition.cancel_after = Some(after);
            }
            if setup.revocations {
                acquisition.revocable = streams.revoke.chance(50);
            }
            if setup.reuse {
                acquisition.pause = Duration::from_millis(more.below(1_500) as u64);
            }
            if recipe == Recipe::Multi {
                acquisition.target = multi_target(more, &setup.kinds, &acquisition.lock);
            }
            acquisition
        })
        .collect()
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
