//! A leader election: this process joins, waits to become leader, leads until Ctrl-C (or
//! `--for SECONDS`), and steps down. Start it in several terminals: one leads, the others
//! queue, and the next takes over when the leader stops or dies. The nodes are Curator
//! `LeaderLatch` nodes, so Java services can take part too.
//!
//! ```text
//! cargo run --example leader -- --for 10
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zklock::{Client, LeaderElection, LockState};

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
    let id = format!("example-leader-{}", std::process::id());
    let election = LeaderElection::new(&client, "/zklock-examples/leader")?.participant_id(&id);
    println!(
        "pid {}: waiting to become leader (Ctrl-C to stop)",
        std::process::id()
    );
    let leadership = loop {
        // Wait in slices so that Ctrl-C while queued also ends the process cleanly.
        if let Some(leadership) = election.participate_timeout(Duration::from_millis(500))? {
            break leadership;
        }
        if let Some(leader) = election.current_leader()? {
            log::debug!("{} leads", leader.owner);
        }
        if stop.load(Ordering::SeqCst) {
            println!("stopped before becoming leader");
            return Ok(());
        }
    };
    println!(
        "pid {}: I am the leader (fencing token {})",
        std::process::id(),
        leadership.fencing()
    );
    let started = Instant::now();
    while !stop.load(Ordering::SeqCst) && lead_for.is_none_or(|d| started.elapsed() < d) {
        match leadership.state() {
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
    leadership.unlock()?;
    println!("pid {}: stepped down", std::process::id());
    Ok(())
}
