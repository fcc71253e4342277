//! The differential test: the same random request sequences sent to Apache ZooKeeper 3.9.5 and
//! to the embedded server (`zklock-server`), over raw connections encoded with zklock-proto's
//! records, and their replies and notifications compared field by field.
//!
//! Each sequence (`differential/gen.rs`, a pure function of its seed) uses up to three
//! sessions in a root path of its own on each server: creates of every mode (sequential,
//! ephemeral, container, TTL), deletes and setData with versions, exists/getData/getChildren/
//! getChildren2 with and without watches, persistent and persistent-recursive watches
//! (`addWatch`), removeWatches/checkWatches of every watcher type (also right after an
//! `addWatch` on the same path), deleteContainer, multis that fail part-way, multiRead, getACL/setACL
//! with creator-only and read-only ACLs, digest `addAuth`, sync, whoAmI, getEphemerals,
//! getAllChildrenNumber, closeSession and the other sessions' view after it. Every
//! notification is kept with the reply it arrived before. Zxids are replaced by their rank
//! among the zxids a transcript shows (stats, write replies, notifications), session ids by
//! the slot that opened them, times are dropped (`differential/run.rs`).
//!
//! The Apache side is a private 3.9.5 server of this test's own, started with TTL nodes
//! enabled and the container sweep out of the way (a sweep in mid-sequence would differ by
//! timing, not semantics), or `ZK_DIFF_APACHE=<host:port>`. The embedded side is
//! `ZK_EMBEDDED_CONNECT=<host:port>`, else a server started in this process.
//!
//! Environment: `ZK_DIFF_SEQUENCES` (how many; default 300, CI 10,000), `ZK_DIFF_BASE` (the
//! first seed; default random, printed), `ZK_DIFF_SEED` (replay this one seed and print both
//! transcripts), `ZK_DIFF_WORKERS` (sequences in flight, default 4).

mod common;
#[path = "differential/gen.rs"]
mod gen;
#[path = "differential/run.rs"]
mod run;
#[path = "differential/wire.rs"]
mod wire;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use common::servers::PrivateServer;

/// The parent of every sequence's root.
const PARENT: &str = "/zklock-diff";
/// How many differences are printed in full.
const SHOWN: usize = 5;

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .replace([',', '_'], "")
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

/// The Apache ZooKeeper 3.9.5 to compare with: `ZK_DIFF_APACHE`, else a private server with
/// TTL nodes on and no container sweep during the run.
fn apache() -> String {
    static SERVER: OnceLock<(String, Option<PrivateServer>)> = OnceLock::new();
    SERVER
        .get_or_init(|| match std::env::var("ZK_DIFF_APACHE") {
            Ok(addr) => (addr, None),
            Err(_) => {
                let server = PrivateServer::start_release_with(
                    "3.9.5",
                    "-Dzookeeper.extendedTypesEnabled=true \
                     -Dznode.container.checkIntervalMs=86400000",
                );
                (server.connect_string(), Some(server))
            }
        })
        .0
        .clone()
}

/// The embedded server to compare: `ZK_EMBEDDED_CONNECT`, else one in this process with the
/// Apache side's settings (TTL nodes on, no container sweep during the run).
fn embedded() -> String {
    static SERVER: OnceLock<(String, Option<zklock_server::Server>)> = OnceLock::new();
    SERVER
        .get_or_init(|| match std::env::var("ZK_EMBEDDED_CONNECT") {
            Ok(addr) => (addr, None),
            Err(_) => {
                let server = zklock_server::Server::start(zklock_server::Config {
                    extended_types: true,
                    container_check_interval: std::time::Duration::from_secs(86_400),
                    ..zklock_server::Config::default()
                })
                .expect("start the embedded server");
                (server.connect_string(), Some(server))
            }
        })
        .0
        .clone()
}

/// The first difference between two transcripts, with a little context, or `None`.
fn first_difference(a: &[String], b: &[String]) -> Option<String> {
    let at = (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i))?;
    let from = at.saturating_sub(3);
    let mut out = String::new();
    for line in &a[from..at] {
        out += &format!("    same     {line}\n");
    }
    out += &format!(
        "    apache   {}\n    embedded {}\n",
        a.get(at).map_or("(no more lines)", String::as_str),
        b.get(at).map_or("(no more lines)", String::as_str)
    );
    Some(out)
}

/// The steps of a sequence less the requests `ZK_DIFF_WITHOUT` names (`Check,WhoAmI`): for
/// looking past a known difference while it is being fixed. Never set in CI.
fn without(mut steps: Vec<gen::Step>) -> Vec<gen::Step> {
    static KINDS: OnceLock<Vec<String>> = OnceLock::new();
    let kinds = KINDS.get_or_init(|| {
        std::env::var("ZK_DIFF_WITHOUT")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(str::to_owned)
            .collect()
    });
    steps.retain(|step| match &step.action {
        gen::Action::Request(r) => {
            let name = format!("{r:?}");
            let name = name.split(['(', ' ']).next().unwrap_or_default();
            !kinds.iter().any(|k| k == name)
        }
        _ => true,
    });
    steps
}

/// What one comparison found.
struct Finding {
    seed: u64,
    what: String,
}

impl Finding {
    /// The kind of request whose answer differed first (`Check`, `Multi`, `closeSession`
    /// ...), to count the findings by.
    fn kind(&self) -> String {
        let line = self
            .what
            .lines()
            .find_map(|l| l.trim_start().strip_prefix("apache"))
            .unwrap_or("could not run");
        // "#12 s0 Multi([...]) => ..." -> "Multi"
        line.split_whitespace()
            .nth(2)
            .map(|w| w.split(['(', ' ']).next().unwrap_or(w).to_owned())
            .unwrap_or_else(|| "could not run".to_owned())
    }
}

/// Runs the sequences of `seeds` on `left` and `right`, `workers` at a time; returns the
/// findings (differences, and sequences that could not run).
fn compare(
    left: &str,
    right: &str,
    seeds: &[u64],
    workers: usize,
    print_all: bool,
) -> Vec<Finding> {
    let run_id = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
    for addr in [left, right] {
        run::ensure_node(addr, PARENT).unwrap_or_else(|e| panic!("{addr}: {e}"));
    }
    let next = AtomicUsize::new(0);
    let (requests, events) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let findings = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&seed) = seeds.get(i) else { return };
                let steps = without(gen::sequence(seed));
                let outcome = (|| {
                    let l = run::run(left, &format!("{PARENT}/{run_id}-{seed}-l"), &steps)?;
                    let r = run::run(right, &format!("{PARENT}/{run_id}-{seed}-r"), &steps)?;
                    if print_all {
                        eprintln!("---- seed {seed}: apache ({left})");
                        l.iter().for_each(|line| eprintln!("{line}"));
                        eprintln!("---- seed {seed}: embedded ({right})");
                        r.iter().for_each(|line| eprintln!("{line}"));
                    }
                    requests.fetch_add(l.len(), Ordering::Relaxed);
                    let notified: usize = l.iter().map(|line| line.matches("event(").count()).sum();
                    events.fetch_add(notified, Ordering::Relaxed);
                    Ok::<_, String>(first_difference(&l, &r))
                })();
                let what = match outcome {
                    Ok(None) => continue,
                    Ok(Some(diff)) => diff,
                    Err(e) => format!("    could not run: {e}\n"),
                };
                findings.lock().unwrap().push(Finding { seed, what });
            });
        }
    });
    let mut findings = findings.into_inner().unwrap();
    findings.sort_by_key(|f| f.seed);
    eprintln!(
        "differential: {} replies and {} notifications of the first server compared",
        requests.into_inner(),
        events.into_inner()
    );
    findings
}

/// The seeds of this run: `ZK_DIFF_SEED` alone, else `count` from `ZK_DIFF_BASE` (random
/// unless set).
fn seeds(count: u64) -> (Vec<u64>, bool) {
    if let Ok(seed) = std::env::var("ZK_DIFF_SEED") {
        let seed = seed.parse().expect("ZK_DIFF_SEED is a number");
        return (vec![seed], true);
    }
    let base = match std::env::var("ZK_DIFF_BASE") {
        Ok(_) => env_number("ZK_DIFF_BASE", 0),
        Err(_) => (uuid::Uuid::new_v4().as_u128() as u64) >> 16,
    };
    eprintln!(
        "differential: seeds {base}..{} (ZK_DIFF_BASE={base})",
        base + count
    );
    ((base..base + count).collect(), false)
}

/// Runs the comparison and fails with every finding (the first few in full) and how to
/// replay each.
fn check(test: &str, left: &str, right: &str, count: u64) {
    let (seeds, replay) = seeds(count);
    let workers = env_number("ZK_DIFF_WORKERS", 4).max(1) as usize;
    let started = Instant::now();
    let findings = compare(left, right, &seeds, workers, replay);
    eprintln!(
        "differential {test}: {} sequences, {} with a difference, in {:.1} s ({workers} workers)",
        seeds.len(),
        findings.len(),
        started.elapsed().as_secs_f64()
    );
    if findings.is_empty() {
        return;
    }
    let mut kinds = std::collections::BTreeMap::new();
    for f in &findings {
        *kinds.entry(f.kind()).or_insert(0) += 1;
    }
    let mut report = format!("first differing request, by kind: {kinds:?}\n");
    for f in findings.iter().take(SHOWN) {
        report += &format!(
            "seed {} (replay: ZK_DIFF_SEED={} cargo test --test differential {test}):\n{}",
            f.seed, f.seed, f.what
        );
    }
    let seeds: Vec<u64> = findings.iter().map(|f| f.seed).take(20).collect();
    panic!(
        "{} of {} sequences differ between {left} and {right}; seeds {seeds:?} ...\n{report}",
        findings.len(),
        if replay { 1 } else { count as usize }
    );
}

/// The normalisation holds the comparison to semantics: the same sequences on one Apache
/// server twice (other roots, sessions, zxids and times) must compare equal. A failure here
/// is a bug of this test, not of a server.
#[test]
fn apache_against_itself_shows_no_difference() {
    let apache = apache();
    let count = env_number("ZK_DIFF_SELF_SEQUENCES", 100);
    check("apache_against_itself", &apache, &apache, count);
}

/// The embedded server answers every sequence as Apache ZooKeeper 3.9.5 does: every reply
/// and every notification, field by field after normalisation.
#[test]
fn embedded_server_answers_as_apache_does() {
    let (apache, embedded) = (apache(), embedded());
    let count = env_number("ZK_DIFF_SEQUENCES", 300);
    check(
        "embedded_server_answers_as_apache_does",
        &apache,
        &embedded,
        count,
    );
}

/// Runs one hand-written sequence on both servers and fails on the first difference.
fn scripted(name: &str, steps: &[gen::Step]) {
    let (apache, embedded) = (apache(), embedded());
    let run_id = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
    for addr in [&apache, &embedded] {
        run::ensure_node(addr, PARENT).unwrap_or_else(|e| panic!("{addr}: {e}"));
    }
    let left = run::run(&apache, &format!("{PARENT}/{run_id}-{name}-l"), steps).unwrap();
    let right = run::run(&embedded, &format!("{PARENT}/{run_id}-{name}-r"), steps).unwrap();
    if let Some(diff) = first_difference(&left, &right) {
        panic!("{name}: the embedded server answers otherwise than 3.9.5:\n{diff}");
    }
}

fn on(slot: usize, request: zklock_proto::Request) -> gen::Step {
    gen::Step {
        slot,
        action: gen::Action::Request(request),
    }
}

fn create(path: &str, flags: i32) -> zklock_proto::CreateRequest {
    zklock_proto::CreateRequest {
        path: path.to_owned(),
        data: b"x".to_vec(),
        acl: zklock_proto::Acl::open(),
        flags,
    }
}

/// A `create` op with the container flag inside a `multi`: ZooKeeper turns it into a
/// createContainer, whose result is a create2's (type 15, path and stat).
#[test]
fn a_container_created_by_a_create_op_in_a_multi_answers_with_its_stat() {
    use zklock_proto::{create_mode, MultiOp, Request};
    scripted(
        "multi-container",
        &[on(
            0,
            Request::Multi(vec![
                MultiOp::Create(create("a", create_mode::CONTAINER)),
                MultiOp::Create(create("a/b", create_mode::PERSISTENT)),
            ]),
        )],
    );
}

/// A `check` outside a `multi`: 3.9.5 answers Unimplemented and closes the connection.
#[test]
fn a_check_outside_a_multi_is_unimplemented_and_closes_the_connection() {
    use zklock_proto::{CheckVersionRequest, Request};
    scripted(
        "lone-check",
        &[
            on(0, Request::Create(create("a", 0))),
            on(
                0,
                Request::Check(CheckVersionRequest {
                    path: "a".to_owned(),
                    version: 0,
                }),
            ),
            on(
                0,
                Request::Exists(zklock_proto::PathWatchRequest {
                    path: "a".to_owned(),
                    watch: false,
                }),
            ),
        ],
    );
}

/// A closed session's ephemerals go in one transaction: another session watching them and
/// their parent hears of each, and its next listing shows none.
#[test]
fn a_closed_sessions_ephemerals_go_and_their_watchers_hear_of_it() {
    use zklock_proto::{add_watch_mode, create_mode, AddWatchRequest, PathWatchRequest, Request};
    let watch = |path: &str| PathWatchRequest {
        path: path.to_owned(),
        watch: true,
    };
    scripted(
        "close-session",
        &[
            on(0, Request::Create(create("p", 0))),
            on(0, Request::Create(create("p/e1", create_mode::EPHEMERAL))),
            on(
                0,
                Request::Create(create("p/e", create_mode::EPHEMERAL_SEQUENTIAL)),
            ),
            on(1, Request::GetChildren2(watch("p"))),
            on(1, Request::Exists(watch("p/e1"))),
            on(
                2,
                Request::AddWatch(AddWatchRequest {
                    path: "p".to_owned(),
                    mode: add_watch_mode::PERSISTENT_RECURSIVE,
                }),
            ),
            gen::Step {
                slot: 0,
                action: gen::Action::Close,
            },
            on(1, Request::GetChildren2(watch("p"))),
            on(2, Request::GetChildren(watch("p"))),
        ],
    );
}
