//! Jepsen-style fault test of zklock: the program behind `scripts/nemesis.sh`.
//!
//! `scripts/nemesis.sh` creates a private network namespace, starts a three-server ZooKeeper
//! ensemble in it (each server on its own loopback address) and runs `nemesis run` inside it.
//! The subcommands:
//!
//! ```text
//! nemesis run    --dir D --seed N --duration SECS [--clients N] [--session-timeout-ms MS]
//!                [--bound SECS]          orchestrate: servers, clients, the fault schedule, check
//! nemesis client --dir D --id I --seed N --session-timeout-ms MS --deadline-secs S
//!                                        one workload process: lock loops, raw facts to a log
//! nemesis check  --dir D [--connect HOSTS] [--bound SECS]
//!                                        the independent checker: logs + server state, then
//!                                        the history (history.jsonl) and its page (nemesis.html)
//! nemesis check  --history FILE          judge a history.jsonl again, offline
//! nemesis plot   --history FILE --out HTML
//!                                        draw a history.jsonl as a self-contained HTML page
//! nemesis delay  --queue Q --delay-ms MS --until-ms T
//!                                        hold every packet of NFQUEUE Q for MS (latency)
//! ```
//!
//! Everything uses only zklock's public API. Times in every log are CLOCK_MONOTONIC in
//! nanoseconds (`clock_gettime`), one clock for all processes of the machine, so the checker
//! can compare the stamps of different clients and of the fault schedule.
//!
//! See the guide page `zklock::guide::nemesis` (src/guide/nemesis.rs) for the design.

mod check;
mod client;
mod delay;
mod freeze;
mod orchestrate;
mod plot;

use std::collections::HashMap;
use std::time::Duration;

use anyhow::{bail, Context};

/// Where the ensemble lives inside the namespace: server `i` (1-based) on `127.0.0.1<i>:2181`.
pub const SERVERS: usize = 3;
pub const CLIENT_PORT: u16 = 2181;

/// A lock of the workload: its name in the logs, its path, and its permits (0: not a
/// semaphore).
#[derive(Clone, Copy, Debug)]
pub struct LockSpec {
    pub name: &'static str,
    pub path: &'static str,
    pub permits: usize,
}

/// The locks: a mutex (most of the traffic), a read/write lock, a 2-permit semaphore and a
/// 1-permit one (so that admitting one holder too many shows as an overlap whenever two
/// clients want it at once, which a 2-permit semaphore under this load rarely has).
pub const LOCKS: [LockSpec; 4] = [
    LockSpec {
        name: "mutex",
        path: "/nemesis/mutex",
        permits: 0,
    },
    LockSpec {
        name: "rw",
        path: "/nemesis/rw",
        permits: 0,
    },
    LockSpec {
        name: "sem",
        path: "/nemesis/sem",
        permits: 2,
    },
    LockSpec {
        name: "sem1",
        path: "/nemesis/sem1",
        permits: 1,
    },
];

pub fn lock_spec(name: &str) -> Option<LockSpec> {
    LOCKS.iter().copied().find(|l| l.name == name)
}

/// A register incremented under an exclusive lock. It holds `"<token>:<value>:<elements>"`:
/// the fencing token of its last writer, a counter, and the set of every increment's id
/// (`<client>.<hold>.<round>`, comma-separated), so that an increment overwritten by a write
/// built on an older read is missing from the final set: Jepsen's `lock-set`.
#[derive(Clone, Copy, Debug)]
pub struct RegisterSpec {
    pub path: &'static str,
    /// The lock it is written under.
    pub lock: &'static str,
    /// Written with `LockGuard::fenced_set_data`; the unfenced control with the plain
    /// `Client::set_data`, under the same lock, in the same holds.
    pub fenced: bool,
}

pub const REGISTERS: [RegisterSpec; 4] = [
    RegisterSpec {
        path: "/nemesis/reg/mutex",
        lock: "mutex",
        fenced: true,
    },
    RegisterSpec {
        path: "/nemesis/reg/rw",
        lock: "rw",
        fenced: true,
    },
    RegisterSpec {
        path: "/nemesis/unfenced/mutex",
        lock: "mutex",
        fenced: false,
    },
    RegisterSpec {
        path: "/nemesis/unfenced/rw",
        lock: "rw",
        fenced: false,
    },
];

/// The register of `lock` that is written fenced (or not).
pub fn register_of(lock: &str, fenced: bool) -> &'static str {
    REGISTERS
        .iter()
        .find(|r| r.lock == lock && r.fenced == fenced)
        .map(|r| r.path)
        .expect("every exclusive lock has a fenced and an unfenced register")
}

/// A register's content: `(token, value, elements)`. The elements are kept as written.
pub fn parse_register(text: &str) -> Option<(i64, u64, &str)> {
    let mut f = text.splitn(3, ':');
    let token = f.next()?.parse().ok()?;
    let value = f.next()?.parse().ok()?;
    Some((token, value, f.next().unwrap_or("")))
}

/// Loopback address of server `i` (1-based).
pub fn server_addr(i: usize) -> String {
    format!("127.0.0.{}", 10 + i)
}

/// Loopback address of client `i` (1-based): its connections are rewritten (SNAT) to it.
pub fn client_addr(i: usize) -> String {
    format!("127.0.0.{}", 20 + i)
}

/// The uid the processes of server `i` run as; the namespace's nftables rewrite the source of
/// their connections to `server_addr(i)` by this uid.
pub fn server_uid(i: usize) -> u32 {
    61010 + i as u32
}

/// The uid of client `i` (see [`server_uid`]).
pub fn client_uid(i: usize) -> u32 {
    61020 + i as u32
}

pub fn connect_string() -> String {
    (1..=SERVERS)
        .map(|i| format!("{}:{CLIENT_PORT}", server_addr(i)))
        .collect::<Vec<_>>()
        .join(",")
}

/// CLOCK_MONOTONIC in nanoseconds: the stamp of every logged fact.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC) failed");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A small seeded generator (splitmix64): every random choice of a run follows from its seed.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `lo..=hi` milliseconds.
    pub fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi - lo + 1))
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i as u64 + 1) as usize;
            items.swap(i, j);
        }
    }
}

/// `--flag value` pairs.
pub struct Args(HashMap<String, String>);

impl Args {
    fn parse(args: impl Iterator<Item = String>) -> anyhow::Result<Args> {
        let mut map = HashMap::new();
        let mut args = args.peekable();
        while let Some(flag) = args.next() {
            let Some(name) = flag.strip_prefix("--") else {
                bail!("unexpected argument {flag:?}");
            };
            let value = args
                .next()
                .with_context(|| format!("{flag} needs a value"))?;
            map.insert(name.to_owned(), value);
        }
        Ok(Args(map))
    }

    pub fn get(&self, name: &str) -> anyhow::Result<&str> {
        self.0
            .get(name)
            .map(String::as_str)
            .with_context(|| format!("--{name} is required"))
    }

    pub fn get_or<'a>(&'a self, name: &str, default: &'a str) -> &'a str {
        self.0.get(name).map_or(default, String::as_str)
    }

    pub fn num<T: std::str::FromStr>(&self, name: &str, default: Option<T>) -> anyhow::Result<T>
    where
        T::Err: std::fmt::Display,
    {
        match (self.0.get(name), default) {
            (Some(v), _) => v
                .parse()
                .map_err(|e| anyhow::anyhow!("--{name} {v:?}: {e}")),
            (None, Some(d)) => Ok(d),
            (None, None) => bail!("--{name} is required"),
        }
    }
}

fn main() -> anyhow::Result<()> {
    let mut argv = std::env::args().skip(1);
    let command = argv.next().unwrap_or_default();
    let args = Args::parse(argv)?;
    match command.as_str() {
        "run" => orchestrate::run(&args),
        "client" => client::run(&args),
        "check" => {
            let clean = check::run(&args)?;
            std::process::exit(if clean { 0 } else { 1 });
        }
        "delay" => delay::run(&args),
        "plot" => plot::run(&args),
        other => bail!("unknown subcommand {other:?}: run, client, check, plot or delay (see examples/nemesis/main.rs)"),
    }
}
