//! An async service on tokio that shares one ZooKeeper lock among many tasks.
//!
//! Each task takes the lock with `lock_with_async(Wait::timeout(..))` (giving up after a while; `tokio::time::timeout` would do too), does its work
//! while watching for the lock's loss with `wait_lost_async`, and releases it with
//! `unlock_async`. A `select!` stops everything on Ctrl-C (or after `--seconds N`), and the
//! client is closed without blocking a worker.
//!
//! ```text
//! scripts/start-zk.sh
//! cargo run --example async_service -- --tasks 200 --seconds 5
//! ```
//!
//! Environment: `ZK_CONNECT` (default `127.0.0.1:2181`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use zklock::{Client, DistributedMutex, LockGuard};

#[derive(Default)]
struct Tally {
    done: AtomicUsize,
    timed_out: AtomicUsize,
    lost: AtomicUsize,
}

/// One unit of work under the lock: stops early if the lock is lost meanwhile.
async fn work(guard: &LockGuard, tally: &Tally) {
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_millis(2)) => {
            tally.done.fetch_add(1, Ordering::Relaxed);
        }
        state = guard.wait_lost_async() => {
            eprintln!("lock lost ({state:?}) during the work; abandoning it");
            tally.lost.fetch_add(1, Ordering::Relaxed);
        }
    }
}

async fn task(mutex: DistributedMutex, tally: Arc<Tally>) -> zklock::Result<()> {
    loop {
        match mutex
            .lock_with_async(zklock::Wait::timeout(Duration::from_secs(5)))
            .await?
        {
            Some(guard) => {
                work(&guard, &tally).await;
                guard.unlock_async().await?;
            }
            None => {
                tally.timed_out.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    env_logger::init();
    let mut args = std::env::args().skip(1);
    let (mut tasks, mut seconds) = (100usize, None::<u64>);
    while let Some(arg) = args.next() {
        let value = args.next().context("every flag takes a value")?;
        match arg.as_str() {
            "--tasks" => tasks = value.parse()?,
            "--seconds" => seconds = Some(value.parse()?),
            other => anyhow::bail!("unknown flag {other}"),
        }
    }
    let connect = std::env::var("ZK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());
    let client = Client::builder(&connect)
        .connect_async()
        .await
        .with_context(|| format!("connecting to {connect} (start it: scripts/start-zk.sh)"))?;
    let mutex = DistributedMutex::new(&client, "/zklock-examples/async-service")?;
    let tally = Arc::new(Tally::default());
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..tasks {
        workers.spawn(task(mutex.clone(), tally.clone()));
    }
    let stop = async {
        match seconds {
            Some(s) => tokio::time::sleep(Duration::from_secs(s)).await,
            None => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    };
    tokio::select! {
        _ = stop => println!("stopping"),
        Some(ended) = workers.join_next() => {
            // A task ends only on an error (the session expired, say).
            ended?.context("a task failed")?;
        }
    }
    // Dropping the tasks' futures withdraws their queued nodes and releases a held lock in
    // the background; closing the client then ends the session and everything with it.
    workers.shutdown().await;
    client.close_async().await?;
    println!(
        "{} tasks: {} units of work done, {} timed out, {} abandoned on a lost lock",
        tasks,
        tally.done.load(Ordering::Relaxed),
        tally.timed_out.load(Ordering::Relaxed),
        tally.lost.load(Ordering::Relaxed)
    );
    Ok(())
}
