//! Leader failover on SIGTERM, with and without `Client::close_on_signals`: a figure, not a
//! test. A leader process (this program again, with `--lead`) joins an election on the default
//! 10 s session and leads; a second participant here waits; the leader gets SIGTERM (what
//! systemd and Kubernetes send), and the time until the waiter leads is printed.
//!
//! ```text
//! scripts/start-zk.sh
//! cargo run --release --features signals --example failover -- [--rounds N]
//! ```
//!
//! Environment: `ZK_CONNECT` (default `127.0.0.1:2181`).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use zklock::{Client, LeaderElection};

fn connect_string() -> String {
    std::env::var("ZK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into())
}

/// The leader process: leads `path` until killed, with the helper if `helper`.
fn lead(path: &str, helper: bool) -> anyhow::Result<()> {
    let client = Client::connect(&connect_string())?;
    let _shutdown = helper.then(|| client.close_on_signals()).transpose()?;
    let _leadership = LeaderElection::new(&client, path)?.participate()?;
    println!("leading");
    std::thread::sleep(Duration::from_secs(3600));
    Ok(())
}

/// One failover: the time from the leader's SIGTERM until this process leads.
fn failover(path: &str, helper: bool) -> anyhow::Result<Duration> {
    let mut args = vec!["--lead".to_owned(), path.to_owned()];
    if helper {
        args.push("--helper".to_owned());
    }
    let mut leader = Command::new(std::env::current_exe()?)
        .args(&args)
        .stdout(Stdio::piped())
        .spawn()?;
    let mut lines = BufReader::new(leader.stdout.take().context("stdout")?).lines();
    anyhow::ensure!(
        lines.any(|l| l.is_ok_and(|l| l == "leading")),
        "the leader never led"
    );
    let client = Client::connect(&connect_string())?;
    let election = LeaderElection::new(&client, path)?;
    let waiter = std::thread::spawn(move || election.participate().map(|l| (Instant::now(), l)));
    // The waiter queues behind the leader before the signal.
    while LeaderElection::new(&client, path)?.contenders()?.len() < 2 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let signalled = Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &leader.id().to_string()])
        .status()?;
    anyhow::ensure!(status.success(), "kill failed");
    let (led, leadership) = waiter.join().expect("waiter")?;
    drop(leadership);
    let _ = leader.wait();
    Ok(led - signalled)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--lead") {
        let path = args.get(1).context("--lead PATH")?;
        return lead(path, args.iter().any(|a| a == "--helper"));
    }
    let rounds: usize = match args.iter().position(|a| a == "--rounds") {
        Some(i) => args.get(i + 1).context("--rounds N")?.parse()?,
        None => 3,
    };
    for helper in [false, true] {
        let mut took = Vec::new();
        for round in 0..rounds {
            let path = format!(
                "/zklock-bench/failover-{}-{helper}-{round}",
                std::process::id()
            );
            took.push(failover(&path, helper)?);
        }
        took.sort();
        let label = if helper {
            "with_helper"
        } else {
            "without_helper"
        };
        println!(
            "failover_{label}_ms: median {} (min {}, max {}; {rounds} rounds, 10 s session)",
            took[rounds / 2].as_millis(),
            took[0].as_millis(),
            took[rounds - 1].as_millis()
        );
    }
    Ok(())
}
