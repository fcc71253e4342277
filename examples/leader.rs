//! A leader election: this process joins, waits to become leader, leads until Ctrl-C (or
//! `--for SECONDS`), and steps down. Start it in several terminals: one leads, the others
//! queue, and the next takes over when the leader stops or dies. The nodes are Curator
//! `LeaderLatch` nodes, so Java services can take part too.
//!
//! ```text
//! cargo run --example leader -- --for 10
//! ```
//!
//! The pattern it teaches: join **once** and wait as long as it takes, stopped by a
//! [`CancelToken`] that the shutdown path cancels (`participate_with(Wait::forever()
//! .cancel_on(&token))`). A loop of `participate_timeout(d)` would leave the election at every
//! timeout and join again at the back of the queue, with a new node each round: the FIFO
//! order is lost, and every round costs a create and a delete. To show who leads while it
//! waits, another thread follows the leader with `LeaderElection::observe`, which joins no
//! queue.
//!
//! `ZK_CONNECT` names the server (default `127.0.0.1:2181`), `LEADER_PATH` the election
//! (default `/zklock-examples/leader`).

use std::time::Duration;

use zklock::{CancelToken, Client, Error, LeaderElection, Wait};

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
    let path = std::env::var("LEADER_PATH").unwrap_or_else(|_| "/zklock-examples/leader".into());
    let pid = std::process::id();

    // Ctrl-C (SIGINT) cancels the token: a queued participant leaves the queue, a leader
    // steps down cleanly (releases its node) instead of dying with it, which would pass
    // leadership on only after its session timeout.
    let shutdown = CancelToken::new();
    let cancel = shutdown.clone();
    ctrlc::set_handler(move || cancel.cancel())?;

    let client = Client::connect(&connect)?;
    let id = format!("example-leader-{pid}");
    let election = LeaderElection::new(&client, &path)?.participant_id(&id);

    // Who leads, as it changes, printed from a thread of its own while we wait in the queue.
    // It stops with the same token.
    let follower = std::thread::spawn({
        let mut leaders = election.observe();
        let shutdown = shutdown.clone();
        move || loop {
            match leaders.next_with(Wait::forever().cancel_on(&shutdown)) {
                Ok(Some(change)) => match change.leader {
                    Some(leader) => println!("pid {pid}: leader is now {}", leader.owner),
                    None => println!("pid {pid}: nobody leads"),
                },
                Ok(None) => {}
                Err(Error::Cancelled) => return,
                Err(err) => {
                    eprintln!("pid {pid}: cannot follow the leader: {err}");
                    return;
                }
            }
        }
    });

    println!("pid {pid}: waiting to become leader (Ctrl-C to stop)");
    let leadership = match election.participate_with(Wait::forever().cancel_on(&shutdown)) {
        Ok(Some(leadership)) => leadership,
        Ok(None) => unreachable!("Wait::forever() has no timeout"),
        Err(Error::Cancelled) => {
            println!("pid {pid}: stopped before becoming leader (our node is withdrawn)");
            follower.join().expect("follower thread");
            return Ok(());
        }
        Err(err) => return Err(err.into()),
    };
    println!(
        "pid {pid}: I am the leader (node {}, fencing token {})",
        leadership.node_path(),
        leadership.fencing()
    );

    // Lead until shut down (or for the time given), watching for a lost leadership without
    // polling: `wait_lost_with` returns at once when the token is cancelled.
    let wait = match lead_for {
        Some(d) => Wait::timeout(d).cancel_on(&shutdown),
        None => Wait::forever().cancel_on(&shutdown),
    };
    if let Some(state) = leadership.wait_lost_with(wait) {
        // Suspended or lost: either way this process can no longer be sure it leads, and
        // the leader's work must stop (Curator's rule for a suspended connection too).
        println!("pid {pid}: leadership {state:?}: stopping leader work");
        shutdown.cancel();
        follower.join().expect("follower thread");
        return Ok(());
    }
    leadership.unlock()?;
    println!("pid {pid}: stepped down");
    shutdown.cancel();
    follower.join().expect("follower thread");
    client.close()?;
    Ok(())
}
