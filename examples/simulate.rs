//! Runs seeded schedules of the deterministic simulation of zklock's protocol core:
//! several simulated processes acquire locks through the real waiting core against a
//! simulated ZooKeeper, with faults, the invariants checked after every step.
//!
//! ```text
//! cargo run --profile sim --example simulate -- --seeds 100000 [--from 0] [--threads 2]
//! cargo run --profile sim --example simulate -- --trace 1234      # one seed's full step trace
//! ```
//!
//! Prints one line per failing seed (its replay command and the last steps before the
//! violation) and ends with `simulate: N schedules, V violations`; exits 1 if V > 0.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use zklock::__simulation::{simulate, Report};

/// Local handoffs over every schedule run.
static LOCAL_HANDOFFS: AtomicU64 = AtomicU64::new(0);

/// How many trace lines a failing seed shows.
const TAIL: usize = 30;

fn main() -> ExitCode {
    let mut seeds: u64 = 1_000;
    let mut from: u64 = 0;
    let mut threads: u64 = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
    let mut trace: Option<u64> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || -> u64 {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| usage(&arg))
        };
        match arg.as_str() {
            "--seeds" => seeds = value(),
            "--from" => from = value(),
            "--threads" => threads = value().max(1),
            "--trace" => trace = Some(value()),
            _ => usage(&arg),
        }
    }
    if let Some(seed) = trace {
        let report = simulate(seed, true);
        for line in &report.trace {
            println!("{line}");
        }
        for violation in &report.violations {
            println!("VIOLATION {violation}");
        }
        return if report.violations.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        };
    }
    let start = Instant::now();
    let failures: Vec<(u64, Vec<String>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                scope.spawn(move || {
                    let mut failed = Vec::new();
                    let mut seed = from + t;
                    while seed < from + seeds {
                        let report: Report = simulate(seed, false);
                        LOCAL_HANDOFFS.fetch_add(report.local_handoffs, Ordering::Relaxed);
                        if !report.violations.is_empty() {
                            failed.push((seed, report.violations));
                        }
                        seed += threads;
                    }
                    failed
                })
            })
            .collect();
        let mut all: Vec<_> = workers
            .into_iter()
            .flat_map(|w| w.join().expect("a simulation thread panicked"))
            .collect();
        all.sort_by_key(|(seed, _)| *seed);
        all
    });
    let elapsed = start.elapsed();
    for (seed, violations) in &failures {
        // Replay with the trace for the steps that led there.
        let report = simulate(*seed, true);
        println!(
            "seed {seed}: {} (replay: cargo run --profile sim --example simulate -- --trace {seed})",
            violations.join("; ")
        );
        let tail = report.trace.len().saturating_sub(TAIL);
        for line in &report.trace[tail..] {
            println!("    {line}");
        }
    }
    eprintln!(
        "{seeds} schedules in {:.1} s: {:.0} schedules/s on {threads} thread(s)",
        elapsed.as_secs_f64(),
        seeds as f64 / elapsed.as_secs_f64()
    );
    eprintln!(
        "{} acquisitions handed over locally (local handoff)",
        LOCAL_HANDOFFS.load(Ordering::Relaxed)
    );
    println!("simulate: {seeds} schedules, {} violations", failures.len());
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn usage(arg: &str) -> ! {
    eprintln!("simulate: bad argument {arg:?}");
    eprintln!("usage: simulate [--seeds N] [--from S] [--threads T] | --trace SEED");
    std::process::exit(2)
}
