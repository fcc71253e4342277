//! The deterministic simulation: several simulated processes (one session each, several tasks
//! per session) run real acquisitions of the core (`contend`) against the simulated ZooKeeper,
//! while a seeded generator chooses, at every step, which task to poll, which request the
//! server processes, which reply or notification is delivered, when the clock moves and which
//! fault strikes. The invariants are checked after every step.
//!
//! A run is a function of its seed alone: no real time, no unseeded randomness, no iteration
//! over a hash map on the way.
//!
//! It sits above the recipes (it runs their kinds, from the catalogue); the simulated
//! ZooKeeper it runs them on is the core's (`core/sim`), which the core's unit tests use too.
//! Its files, one concept each:
//! - `plan.rs`: what a seed draws before the run (the recipe, the lock paths, the world's
//!   settings, each task's acquisitions);
//! - `schedule.rs`: the scheduler, which runs the schedule step by step, with its faults;
//! - `worker.rs`: one task, its acquisitions one after the other;
//! - `checks.rs`: the invariants, checked after every step, at quiescence and per acquisition;
//! - `book.rs`: what the tasks and the checks share (an acquisition, the book of holders and
//!   violations);
//! - `local.rs`: local handoff's tasks and checks, on `book.rs` alone.

mod book;
mod checks;
mod local;
mod plan;
mod schedule;
mod worker;

pub use self::schedule::{simulate, Report};

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
