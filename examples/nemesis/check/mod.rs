//! `nemesis check`: the independent checker. It reads the clients' raw facts
//! (`<dir>/c<i>/client.log`), the fault schedule and the servers' health (`<dir>/nemesis.log`),
//! the servers' logs and, once every client has exited, the servers' state; it writes the whole
//! as a history (`<dir>/history.jsonl`, see history.rs), judges it (judge.rs, live.rs) and draws
//! it (`<dir>/nemesis.html`, see plot.rs). Nothing the clients concluded is taken on trust.
//!
//! `nemesis check --history FILE` judges a saved history again, offline.
//!
//! Exit status: 0 when there is no client violation. Server data loss (ZooKeeper's, named
//! with its evidence) is printed loudly and counted on the summary line, but does not fail the
//! run: it is not the clients' doing.

mod history;
mod judge;
mod live;
#[cfg(test)]
mod tests;

use std::path::Path;
use std::thread::sleep;
use std::time::Duration;

pub use history::History;
pub use judge::{judge, Report};

use zklock::Client;

use crate::orchestrate::{four, lock_nodes};
use crate::{connect_string, mono_ns, Args, REGISTERS, SERVERS};

pub fn run(args: &Args) -> anyhow::Result<bool> {
    if let Ok(file) = args.get("history") {
        let h = History::from_jsonl(&std::fs::read_to_string(file)?)?;
        let report = judge(&h);
        print(&h, &report);
        return Ok(report.ok());
    }
    let dir = Path::new(args.get("dir")?);
    let connect = match args.get_or("connect", "") {
        "" => connect_string(),
        other => other.to_owned(),
    };
    let mut h = History::from_dir(dir)?;
    if let Ok(bound) = args.num::<u64>("bound", None) {
        h.bound_ns = bound * 1_000_000_000;
    }
    gather(&mut h, dir, &connect)?;
    let report = judge(&h);
    print(&h, &report);
    let summary = report.summary(&h);
    h.summary = Some(summary.clone());
    let jsonl = h.to_jsonl();
    std::fs::write(dir.join("history.jsonl"), &jsonl)?;
    // The page is drawn from the JSON Lines just written, as `nemesis plot` would.
    let page = crate::plot::page(&History::from_jsonl(&jsonl)?);
    std::fs::write(dir.join("nemesis.html"), page)?;
    std::fs::write(dir.join("summary"), format!("{summary}\n"))?;
    Ok(report.ok())
}

fn print(h: &History, report: &Report) {
    for line in &report.lines {
        println!("{line}");
    }
    let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for v in &report.violations {
        *counts.entry(v.class.name()).or_default() += 1;
    }
    let counts: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
    for f in &report.registers {
        println!(
            "register {} ({}): final value {}, {} of {} acked increments lost",
            f.path,
            if f.fenced {
                "fenced"
            } else {
                "unfenced control"
            },
            f.final_value,
            f.lost + f.lost_server,
            f.acked
        );
    }
    let mut first: Vec<&judge::Violation> = Vec::new();
    for v in &report.violations {
        if !first.iter().any(|x| x.class == v.class) {
            first.push(v);
        }
    }
    for v in first {
        let line = v.text.lines().next().unwrap_or("");
        println!("first {}: {line}", v.class.name());
    }
    if !report.server_loss.is_empty() {
        println!(
            "!!! SERVER DATA LOSS: ZooKeeper lost committed writes {} time(s) in this run (evidence above); not a client violation, and not hidden",
            report.server_loss.len()
        );
    }
    println!(
        "check: {}: {}",
        if report.ok() { "PASS" } else { "FAIL" },
        if counts.is_empty() {
            "no client violation".to_owned()
        } else {
            counts.join(", ")
        }
    );
    println!("{}", report.summary(h));
}

/// The servers' state once every client has exited: the registers, lock nodes and watches
/// left; and what the orchestrator recorded while the clients idled.
fn gather(h: &mut History, dir: &Path, connect: &str) -> anyhow::Result<()> {
    use history::Leftover;
    if let Ok(idle) = std::fs::read_to_string(dir.join("idle-watches")) {
        let paths = idle
            .lines()
            .filter(|l| l.trim_start().starts_with('/'))
            .count();
        if paths > 0 {
            h.leftovers.push(Leftover {
                kind: "idle-watch".into(),
                count: paths,
                detail: idle.trim().to_owned(),
            });
        }
    }
    if let Ok(idle) = std::fs::read_to_string(dir.join("idle-nodes")) {
        let nodes: Vec<&str> = idle.lines().filter(|l| !l.is_empty()).collect();
        if !nodes.is_empty() {
            h.leftovers.push(Leftover {
                kind: "idle-node".into(),
                count: nodes.len(),
                detail: nodes.join("\n"),
            });
        }
    }
    let observer = connect_observer(connect)?;
    for register in REGISTERS {
        let data = observer.get_data(register.path)?.unwrap_or_default();
        h.registers.insert(
            register.path.to_owned(),
            String::from_utf8_lossy(&data).into_owned(),
        );
    }
    let nodes = leftover_nodes(&observer, h.session_ms)?;
    if !nodes.is_empty() {
        h.leftovers.push(Leftover {
            kind: "node".into(),
            count: nodes.len(),
            detail: nodes.join("\n"),
        });
    }
    // Our own session must be gone before the watches are counted.
    drop(observer);
    sleep(Duration::from_millis(500));
    for i in 1..=SERVERS {
        let wchs = four(i, "wchs");
        let watches = wchs
            .lines()
            .find_map(|l| l.strip_prefix("Total watches:"))
            .and_then(|n| n.trim().parse::<usize>().ok());
        match watches {
            Some(0) => {}
            Some(n) => h.leftovers.push(Leftover {
                kind: "watch".into(),
                count: n,
                detail: format!("server {i}: {}", four(i, "wchc").replace('\n', " | ")),
            }),
            None => h.leftovers.push(Leftover {
                kind: "no-wchs".into(),
                count: 1,
                detail: format!("server {i}"),
            }),
        }
    }
    Ok(())
}

fn connect_observer(connect: &str) -> anyhow::Result<Client> {
    let deadline = mono_ns() + 60_000_000_000;
    loop {
        match Client::builder(connect)
            .session_timeout(Duration::from_secs(10))
            .connect()
        {
            Ok(c) => return Ok(c),
            Err(err) if mono_ns() < deadline => {
                eprintln!("check: connect: {err}; retrying");
                sleep(Duration::from_secs(1));
            }
            Err(err) => return Err(err.into()),
        }
    }
}

/// Lock nodes still present, waiting (bounded) for sessions that are still closing or expiring.
fn leftover_nodes(observer: &Client, session_ms: u64) -> anyhow::Result<Vec<String>> {
    let deadline = mono_ns() + (3 * session_ms + 10_000) * 1_000_000;
    loop {
        let left: Vec<String> = lock_nodes(observer)?
            .into_iter()
            .map(|(path, c)| {
                format!(
                    "{path}/{} (session {:#x}, owner {})",
                    c.node_name, c.session_id, c.owner
                )
            })
            .collect();
        if left.is_empty() || mono_ns() > deadline {
            return Ok(left);
        }
        sleep(Duration::from_millis(500));
    }
}
