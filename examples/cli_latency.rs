//! How long `zklock run LOCKPATH -- true` takes, end to end, next to `flock FILE true`: the
//! figure a cron job or a shell loop pays per call. Prints figures; asserts nothing (the tests
//! assert behaviour, not speed). The target is a median under 50 ms against a local server.
//!
//! ```sh
//! cargo build --release -p zklock-cli
//! ZKLOCK_CONNECT=127.0.0.1:2181 cargo run --release --example cli_latency [-- RUNS]
//! ```
//!
//! `$ZKLOCK_BIN` names the binary (default `target/release/zklock`, else `target/debug/zklock`).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .map_or(20, |n| n.parse().expect("RUNS is a number"));
    let zklock = std::env::var_os("ZKLOCK_BIN")
        .map(PathBuf::from)
        .or_else(|| {
            ["target/release/zklock", "target/debug/zklock"]
                .into_iter()
                .map(PathBuf::from)
                .find(|p| p.exists())
        })
        .expect("build zklock first (cargo build --release -p zklock-cli) or set ZKLOCK_BIN");
    let path = format!("/zklock-bench/cli-latency-{}", std::process::id());
    let zk = time(runs, || {
        Command::new(&zklock)
            .args(["run", &path, "--", "true"])
            .stdin(Stdio::null())
            .status()
            .map(|s| s.success())
    });
    report(&format!("{} run {path} -- true", zklock.display()), &zk);

    let file = std::env::temp_dir().join(format!("cli-latency-{}.lock", std::process::id()));
    let flock = time(runs, || {
        Command::new("flock")
            .arg(&file)
            .arg("true")
            .status()
            .map(|s| s.success())
    });
    report("flock FILE true", &flock);
    let _ = std::fs::remove_file(file);
}

/// Each run's duration, or an empty list if the command cannot run or fails.
fn time(runs: usize, mut once: impl FnMut() -> std::io::Result<bool>) -> Vec<Duration> {
    let mut taken = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        match once() {
            Ok(true) => taken.push(started.elapsed()),
            Ok(false) | Err(_) => return Vec::new(),
        }
    }
    taken.sort();
    taken
}

fn report(what: &str, taken: &[Duration]) {
    if taken.is_empty() {
        println!("{what}: did not run (or failed)");
        return;
    }
    println!(
        "{what}: {} runs, min {:?}, median {:?}, max {:?}",
        taken.len(),
        taken[0],
        taken[taken.len() / 2],
        taken[taken.len() - 1]
    );
}
