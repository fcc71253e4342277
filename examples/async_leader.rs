//! A leader election in an async service (tokio): the process joins the election once and
//! waits in the queue, follows who leads meanwhile, leads when its turn comes, and steps down
//! cleanly on SIGTERM (or Ctrl-C), so that the next in line takes over at once instead of
//! after a session timeout.
//!
//! ```text
//! scripts/start-zk.sh
//! cargo run --example async_leader &    # leads
//! cargo run --example async_leader &    # follows, and takes over when the first stops
//! kill -TERM %1
//! ```
//!
//! What it shows:
//! - `participate_async()` raced against the shutdown signal in a `select!`: while queued,
//!   the signal drops the future, which withdraws our node (no timeout loop that leaves and
//!   re-joins the queue, so the place in line is kept);
//! - `observe()` and `LeaderWatch::next_async()` in a task of their own: each change of
//!   leader, driven by a ZooKeeper watch, without polling and without joining the queue;
//! - while leading, `wait_lost_async()` raced against the signal: the work stops if the
//!   leadership is lost, and on the signal the leader steps down with `unlock_async()`;
//! - `close_async()` at the end, which never blocks a worker.
//!
//! Environment: `ZK_CONNECT` (default `127.0.0.1:2181`), `LEADER_PATH` (default
//! `/zklock-examples/async-leader`).

use anyhow::Context;
use tokio::signal::unix::{signal, SignalKind};
use zklock::{Client, LeaderElection};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    env_logger::init();
    let connect = std::env::var("ZK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());
    let path =
        std::env::var("LEADER_PATH").unwrap_or_else(|_| "/zklock-examples/async-leader".into());
    let pid = std::process::id();
    let mut term = signal(SignalKind::terminate()).context("SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("SIGINT handler")?;

    let client = Client::builder(&connect).connect_async().await?;
    let election =
        LeaderElection::new(&client, &path)?.participant_id(&format!("async-leader-{pid}"));

    // Follow the leader while we wait (and while we lead: we see ourselves).
    let follower = tokio::spawn({
        let mut leaders = election.observe();
        async move {
            loop {
                match leaders.next_async().await {
                    Ok(change) => match change.leader {
                        Some(leader) => println!("pid {pid}: leader is now {}", leader.owner),
                        None => println!("pid {pid}: nobody leads"),
                    },
                    Err(err) => {
                        println!("pid {pid}: stopped following the leader: {err}");
                        return;
                    }
                }
            }
        }
    });

    println!("pid {pid}: waiting to become leader");
    let leadership = tokio::select! {
        leadership = election.participate_async() => leadership?,
        _ = term.recv() => {
            println!("pid {pid}: SIGTERM while queued: left the election");
            return shut_down(client, follower).await;
        }
        _ = int.recv() => {
            println!("pid {pid}: SIGINT while queued: left the election");
            return shut_down(client, follower).await;
        }
    };
    println!(
        "pid {pid}: leading (fencing token {})",
        leadership.fencing()
    );

    // The leader's work would run here, stopped at once if the leadership is lost.
    tokio::select! {
        state = leadership.wait_lost_async() => {
            println!("pid {pid}: leadership {state:?}: stopping leader work");
            return shut_down(client, follower).await;
        }
        _ = term.recv() => println!("pid {pid}: SIGTERM: stepping down"),
        _ = int.recv() => println!("pid {pid}: SIGINT: stepping down"),
    }
    leadership.unlock_async().await?;
    println!("pid {pid}: stepped down");
    shut_down(client, follower).await
}

/// Stops following and closes the session (which removes any node left) without blocking a
/// worker thread.
async fn shut_down(client: Client, follower: tokio::task::JoinHandle<()>) -> anyhow::Result<()> {
    follower.abort();
    let _ = follower.await;
    client.close_async().await?;
    Ok(())
}
