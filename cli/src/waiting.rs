//! While `run` or `leader` waits (`-v`): who holds the lock, and when that changes.
//!
//! The library has no watch on a lock's queue in its public API, so the queue is read with
//! the same inspection calls as `zklock status`, once per [`POLL`], on zklock's own session.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::Duration;

use log::{debug, info};
use zklock::inspect::Contender;
use zklock::{Client, DistributedMutex, DistributedRwLock, LeaderElection, Semaphore};

use crate::inspect::age;
use crate::supervise::Queue;
use crate::text::{format_duration, printable, session_hex};

/// How often the queue is read while waiting: one listing and a read per node ahead of us.
const POLL: Duration = Duration::from_secs(1);
/// How many looks the holder's report waits for our own node to show up in the queue.
const PATIENCE: u32 = 3;

/// Runs `wait` (a blocking acquisition), reporting the holder meanwhile if `-v` asked for
/// lock events.
pub fn reporting_holders<T>(
    client: &Client,
    path: &str,
    queue: Queue,
    wait: impl FnOnce() -> T,
) -> T {
    if !log::log_enabled!(log::Level::Info) {
        return wait();
    }
    let (stop, stopped) = mpsc::channel::<()>();
    thread::scope(|s| {
        s.spawn(move || {
            let mut reported: Option<String> = None;
            for polls in 1.. {
                match contenders(client, path, queue) {
                    // Our node may not be queued yet at the first look; say where we stand
                    // once it is (or after a few looks without it).
                    Ok(contenders) => report(
                        client,
                        path,
                        queue,
                        &contenders,
                        polls > PATIENCE,
                        &mut reported,
                    ),
                    Err(err) => debug!("reading the queue of {path}: {err}"),
                }
                match stopped.recv_timeout(POLL) {
                    Err(RecvTimeoutError::Timeout) => {}
                    _ => return,
                }
            }
        });
        let waited = wait();
        drop(stop);
        waited
    })
}

fn contenders(client: &Client, path: &str, queue: Queue) -> zklock::Result<Vec<Contender>> {
    match queue {
        Queue::Lock => DistributedMutex::new(client, path)?.contenders(),
        Queue::ReadWrite => DistributedRwLock::new(client, path)?.contenders(),
        Queue::Semaphore(permits) => Semaphore::new(client, path, permits)?.contenders(),
        Queue::Election => LeaderElection::new(client, path)?.contenders(),
    }
}

/// Logs the holder if it is not the one last reported (and not us).
fn report(
    client: &Client,
    path: &str,
    queue: Queue,
    contenders: &[Contender],
    without_us: bool,
    reported: &mut Option<String>,
) {
    let ours = client.session_id();
    let Some(holder) = contenders.first() else {
        return;
    };
    if holder.session_id == ours || reported.as_deref() == Some(holder.node_name.as_str()) {
        return;
    }
    let owner = match holder.owner.as_str() {
        "" => "unknown".to_owned(),
        owner => printable(owner),
    };
    let ahead = match contenders.iter().position(|c| c.session_id == ours) {
        Some(1) => "; we are next".to_owned(),
        Some(n) => format!("; {} waiting ahead of us", n - 1),
        None if without_us => String::new(),
        None => return,
    };
    let verb = match queue {
        Queue::Lock | Queue::ReadWrite | Queue::Semaphore(_) => "held",
        Queue::Election => "led",
    };
    info!(
        "waiting for {path}, {}{verb} by {owner} (session {}, node {}, in the queue for {}){ahead}",
        if reported.is_some() { "now " } else { "" },
        session_hex(holder.session_id),
        holder.node_name,
        format_duration(age(holder)),
    );
    *reported = Some(holder.node_name.clone());
}
