//! The election examples, run as their users would run them, against the test server: two
//! instances of `examples/leader.rs` (blocking, Ctrl-C) and two of `examples/async_leader.rs`
//! (tokio, SIGTERM). One leads, the other waits in the queue on the node it created first and
//! follows the leader; the leader is signalled, steps down, and the other takes over; a
//! queued instance signalled leaves the queue. Each step is bounded in time and checked from
//! the examples' output and the election's nodes.
//!
//! The test brings the examples' binaries up to date itself (`cargo build --example ..`, a
//! no-op after `cargo test` has built them), so it also runs alone
//! (`scripts/test.sh --test examples_run`).

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use zklock::inspect::Contender;
use zklock::LeaderElection;

/// How long any one step may take (a take-over after a clean step-down is immediate; the
/// bound covers a slow machine, not a session timeout).
const STEP: Duration = Duration::from_secs(30);

/// The examples this test runs.
const EXAMPLES: [&str; 2] = ["leader", "async_leader"];

/// The example `name`'s binary, brought up to date first by cargo (with this test's
/// features), once per run: a binary left by an earlier build would test old code.
fn example(name: &str) -> PathBuf {
    static BUILT: std::sync::Once = std::sync::Once::new();
    BUILT.call_once(|| {
        let features: Vec<&str> = [
            (cfg!(feature = "tls"), "tls"),
            (cfg!(feature = "sasl"), "sasl"),
            (cfg!(feature = "signals"), "signals"),
            (cfg!(feature = "tokio"), "tokio"),
            (cfg!(feature = "metrics"), "metrics"),
        ]
        .into_iter()
        .filter_map(|(on, feature)| on.then_some(feature))
        .collect();
        let mut build = common::cargo();
        build.args(["build", "--features", &features.join(",")]);
        for example in EXAMPLES {
            build.args(["--example", example]);
        }
        let status = build
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("cargo runs");
        assert!(status.success(), "cargo build of the examples failed");
    });
    assert!(EXAMPLES.contains(&name));
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/<this test> -> target/<profile>/examples/<name>
    exe.parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join(name)
}

/// A running example: its output, line by line, and its process (killed when dropped).
struct Running {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
    name: String,
}

impl Running {
    fn start(name: &str, election: &str) -> Running {
        let mut child = Command::new(example(name))
            .env("ZK_CONNECT", common::connect_string())
            .env("LEADER_PATH", election)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let out = BufReader::new(child.stdout.take().unwrap());
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Running {
            child,
            lines,
            seen: Vec::new(),
            name: name.to_owned(),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits (at most [`STEP`]) for a line containing `text`; returns it.
    fn expect(&mut self, text: &str) -> String {
        let deadline = Instant::now() + STEP;
        if let Some(line) = self.seen.iter().find(|l| l.contains(text)) {
            return line.clone();
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.contains(text) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "{} (pid {}) did not print {text:?} within {STEP:?}; it printed {:#?}",
                    self.name,
                    self.pid(),
                    self.seen
                ),
            }
        }
    }

    fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        let rc = unsafe { libc::kill(self.pid() as libc::pid_t, signal) };
        assert_eq!(rc, 0);
    }

    /// Waits (at most [`STEP`]) for the process to exit, and checks that it succeeded.
    fn exits_cleanly(mut self) {
        let deadline = Instant::now() + STEP;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // Collect what it printed last, for the message.
                while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(100)) {
                    self.seen.push(line);
                }
                assert!(
                    status.success(),
                    "{} exited with {status}: {:#?}",
                    self.name,
                    self.seen
                );
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{} did not exit within {STEP:?}: {:#?}",
                self.name,
                self.seen
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The node of the participant whose id ends in `pid`, as the election shows it.
fn node_of(election: &LeaderElection, pid: u32) -> Option<Contender> {
    let suffix = format!("-{pid}");
    election
        .contenders()
        .unwrap()
        .into_iter()
        .find(|c| c.owner.ends_with(&suffix))
}

/// Runs the scenario with example `name`, signalling with `signal`, and the texts it prints.
fn two_instances_hand_over(name: &str, signal: libc::c_int, leading: &str, queued_stop: &str) {
    let path = common::lock_path(&format!("example-{name}"));
    let client = common::client();
    let election = LeaderElection::new(&client, &path).unwrap();

    let mut first = Running::start(name, &path);
    first.expect(leading);
    let mut second = Running::start(name, &path);
    second.expect("waiting to become leader");
    // The second follows the leader: it names the first.
    second.expect(&format!("leader is now {}", owner_of(name, first.pid())));
    assert!(common::wait_contenders(&election, 2, STEP));
    let queued = node_of(&election, second.pid()).expect("the second is queued");
    // It waits on that node, and only that one: no leaving and joining again.
    std::thread::sleep(Duration::from_millis(1500));
    let still = node_of(&election, second.pid()).expect("still queued");
    assert_eq!(
        (still.node_name.as_str(), still.sequence),
        (queued.node_name.as_str(), queued.sequence),
        "the waiting instance's node changed: it left the queue and joined again"
    );

    // The leader is signalled: it steps down, exits 0, and the second leads on its first node.
    first.signal(signal);
    first.expect("stepped down");
    first.exits_cleanly();
    second.expect(leading);
    let leader = election.current_leader().unwrap().expect("a leader");
    assert_eq!(leader.node_name, queued.node_name);
    second.expect(&format!("leader is now {}", owner_of(name, second.pid())));

    // A third queues behind it, and leaves the queue when signalled while waiting.
    let mut third = Running::start(name, &path);
    third.expect("waiting to become leader");
    assert!(common::wait_contenders(&election, 2, STEP));
    third.signal(signal);
    third.expect(queued_stop);
    third.exits_cleanly();
    assert!(
        common::wait_contenders(&election, 1, STEP),
        "the third's node is left"
    );

    second.signal(signal);
    second.expect("stepped down");
    second.exits_cleanly();
    assert!(common::wait_contenders(&election, 0, STEP));
}

/// The participant id the example `name` gives process `pid`.
fn owner_of(name: &str, pid: u32) -> String {
    match name {
        "leader" => format!("example-leader-{pid}"),
        _ => format!("async-leader-{pid}"),
    }
}

#[test]
fn the_blocking_leader_example_keeps_its_place_and_hands_over_on_ctrl_c() {
    two_instances_hand_over(
        "leader",
        libc::SIGINT,
        "I am the leader",
        "stopped before becoming leader",
    );
}

#[test]
fn the_async_leader_example_follows_and_hands_over_on_sigterm() {
    two_instances_hand_over(
        "async_leader",
        libc::SIGTERM,
        "leading (fencing token",
        "SIGTERM while queued: left the election",
    );
}
