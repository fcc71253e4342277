//! The holder of a lock is the leader: this process waits to become leader, leads until
//! Ctrl-C (or `--for SECONDS`), and steps down by releasing the lock. Start it in several
//! terminals: one leads, the others queue, and the next takes over when the leader stops or
//! dies.
//!
//! ```text
//! cargo run --example leader -- --for 10
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zklock::{Client, DistributedMutex, LockState};

fn main() -> anyhow::Result<()> {
    env_logger::init();
    let args: Vec<String> = std::env::args().collect();
    let lead_for = args
        .iter()
        .position(|a| a == "--for")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.parse())
        .transpose()?
        .map(Duration::from_secs);
    let connect = std::env::var("ZK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());

    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    // Ctrl-C asks the leader to step down cleanly (release the lock) instead of dying with it:
    // a killed leader's lock would only pass on after its session timeout.
    ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst))?;

    let client = Client::connect(&connect)?;
    let mutex = DistributedMutex::new(&client, "/zklock-examples/leader")?;
    println!(
        "pid {}: waiting to become leader (Ctrl-C to stop)",
        std::process::id()
    );
    let guard = loop {
        // Wait in slices so that Ctrl-C while queued also ends the process cleanly.
        if let Some(guard) = mutex.lock_timeout(Duration::from_millis(500))? {
            break guard;
        }
        if stop.load(Ordering::SeqCst) {
            println!("stopped before becoming leader");
            return Ok(());
        }
    };
    println!(
        "pid {}: I am the leader (fencing token {})",
        std::process::id(),
        guard.fencing_token()
    );
    let started = Instant::now();
    while !stop.load(Ordering::SeqCst) && lead_for.is_none_or(|d| started.elapsed() < d) {
        match guard.state() {
            LockState::Held => {}
            LockState::Suspended => {
                println!("connection trouble: pausing leader work until it clears")
            }
            _ => {
                println!("leadership lost (session expired)");
                return Ok(());
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    guard.unlock()?;
    println!("pid {}: stepped down", std::process::id());
    Ok(())
}
