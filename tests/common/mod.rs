//! Shared fixture: every test talks to the real ZooKeeper at `ZK_CONNECT` (`scripts/test.sh`
//! starts one on a free port and sets it; default `127.0.0.1:2181`, where `scripts/start-zk.sh`
//! starts one without settings) and works under a lock path of its own, so tests run in
//! parallel without seeing each other's nodes. Servers a test needs for itself (an ensemble,
//! private or secure servers) come from [`servers`] and [`ensemble`], on free ports.
#![allow(dead_code)]

pub mod ensemble;
pub mod proxy;
pub mod raw;
pub mod secure;
pub mod servers;
pub mod snapshot;

// Under their old names; each test binary uses some of them, so unused ones are no warning.
#[allow(unused_imports)]
pub use raw::{create_ephemeral, RawClient, RawEphemeral};

use std::time::Duration;

use zklock::acl::NodeAcl;
use zklock::Semaphore;
use zklock::{Client, ClientBuilder, DistributedMutex, DistributedRwLock, LeaderElection};

pub fn connect_string() -> String {
    std::env::var("ZK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".to_owned())
}

/// Where a test cannot run because a tool is missing here (`why` says which, and how to
/// install it): outside CI the test is skipped, saying so on stderr, and passes; under
/// `CI=true` it fails, because CI installs every tool the tests need (`scripts/test.sh`), so a
/// missing one is a broken set-up that a quietly passing test would hide. Call it, then
/// return from the test.
#[track_caller]
pub fn skip_unless_ci(test: &str, why: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{test}: {why}; under CI=true a missing tool fails the test instead of skipping it"
    );
    eprintln!("SKIPPED {test}: {why}");
}

/// The running test's name (libtest names each test's thread after it).
pub fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("this test")
        .to_owned()
}

pub fn init_logging() {
    let _ = env_logger::builder().is_test(true).try_init();
}

/// The session timeout of [`client`]: short, so tests about dead holders finish quickly.
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// A builder for `connect` with `session_timeout` (and test logging on).
pub fn builder(connect: &str, session_timeout: Duration) -> ClientBuilder {
    init_logging();
    Client::builder(connect).session_timeout(session_timeout)
}

/// A client of `connect` (hosts, optionally a chroot) with `session_timeout`.
pub fn client_at(connect: &str, session_timeout: Duration) -> Client {
    builder(connect, session_timeout)
        .connect()
        .unwrap_or_else(|e| {
            panic!(
                "cannot connect to {connect}: {e} (ZooKeeper must be running: scripts/start-zk.sh)"
            )
        })
}

/// A client of the test server with `session_timeout`.
pub fn client_with(session_timeout: Duration) -> Client {
    client_at(&connect_string(), session_timeout)
}

/// A client of the test server with a short session ([`SESSION_TIMEOUT`]).
pub fn client() -> Client {
    client_with(SESSION_TIMEOUT)
}

/// A client connected through `proxy` (see [`proxy::Proxy`]), with `session_timeout`.
pub fn client_via(proxy: &proxy::Proxy, session_timeout: Duration) -> Client {
    client_at(&proxy.connect_string(), session_timeout)
}

/// A client of the test server authenticated as digest user `user` (password
/// `<user>-password`) that creates its nodes with `acl`, with a short session.
pub fn client_as(user: &str, acl: NodeAcl) -> Client {
    // `/zklock-tests` is every test's parent: made by a restricted user first, it would carry
    // that user's ACL, and later tests of other users could not delete below it. A chroot is
    // made, open, when missing.
    static OPEN_PARENT: std::sync::Once = std::sync::Once::new();
    OPEN_PARENT.call_once(|| {
        let _ = client_at(
            &format!("{}/zklock-tests", connect_string()),
            SESSION_TIMEOUT,
        )
        .close();
    });
    builder(&connect_string(), SESSION_TIMEOUT)
        .auth_digest(user, &format!("{user}-password"))
        .acl(acl)
        .connect()
        .unwrap_or_else(|e| panic!("{user} cannot connect: {e}"))
}

/// A lock path no other test (or earlier run) uses.
pub fn lock_path(test: &str) -> String {
    format!("/zklock-tests/{test}-{}", uuid::Uuid::new_v4().simple())
}

/// Number of children under `path` as seen by a fresh session (0 if the path is absent).
pub fn children_count(client: &Client, path: &str) -> usize {
    zklock::DistributedMutex::new(client, path)
        .unwrap()
        .contenders()
        .unwrap()
        .len()
}

/// A queue whose length a test waits for: a lock's contenders, a semaphore's leases, an
/// election's participants.
pub trait Queue {
    fn queue_len(&self) -> zklock::Result<usize>;
}

impl Queue for DistributedMutex {
    fn queue_len(&self) -> zklock::Result<usize> {
        self.contenders().map(|c| c.len())
    }
}

impl Queue for DistributedRwLock {
    fn queue_len(&self) -> zklock::Result<usize> {
        self.contenders().map(|c| c.len())
    }
}

impl Queue for Semaphore {
    fn queue_len(&self) -> zklock::Result<usize> {
        self.contenders().map(|c| c.len())
    }
}

impl Queue for LeaderElection {
    fn queue_len(&self) -> zklock::Result<usize> {
        self.contenders().map(|c| c.len())
    }
}

/// Polls until exactly `n` are queued on `queue` (0: until it is empty), for up to `limit`;
/// true once they are. Panics if the queue cannot be listed.
pub fn wait_contenders(queue: &impl Queue, n: usize, limit: Duration) -> bool {
    let mut seen = 0;
    let reached = eventually(limit, || {
        seen = queue.queue_len().expect("listing the queue");
        seen == n
    });
    if !reached {
        eprintln!("wait_contenders: {seen} queued after {limit:?}, not {n}");
    }
    reached
}

/// Sums the watch-notification counters (`mntr`) of the server at `addr`.
pub fn watch_notifications_at(addr: &str) -> u64 {
    let mntr = servers::mntr(addr);
    [
        "zk_sum_node_deleted_watch_count",
        "zk_sum_node_children_watch_count",
        "zk_sum_node_created_watch_count",
        "zk_sum_node_changed_watch_count",
    ]
    .iter()
    .map(|k| mntr.get(*k).copied().unwrap_or(0))
    .sum()
}

/// Polls `cond` every 10 ms for up to `limit`; true once it holds.
pub fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    cond()
}

/// Spawns this test binary again to run the `#[ignore]`d test `entry` as a separate process,
/// with `vars` in its environment and stdout piped.
pub fn spawn_worker(entry: &str, vars: &[(&str, String)]) -> std::process::Child {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([
        entry,
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("ZK_CONNECT", connect_string())
    .stdout(std::process::Stdio::piped());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// A tokio runtime with two worker threads, as the async tests' services run on.
pub fn two_worker_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Counts who is inside a critical section, and how often two were.
#[derive(Default)]
pub struct Exclusion {
    inside: std::sync::atomic::AtomicUsize,
    pub entered: std::sync::atomic::AtomicUsize,
    pub overlaps: std::sync::atomic::AtomicUsize,
}

impl Exclusion {
    pub fn enter(&self) {
        use std::sync::atomic::Ordering::SeqCst;
        self.entered.fetch_add(1, SeqCst);
        if self.inside.fetch_add(1, SeqCst) != 0 {
            self.overlaps.fetch_add(1, SeqCst);
        }
    }

    pub fn leave(&self) {
        self.inside
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A `cargo` command for a test to build with, in the environment the test suite was started
/// from: without the variables cargo sets for a running test. Build scripts watch some of them
/// (ring's reruns on `CARGO_MANIFEST_DIR`), so a build that saw them would rebuild ring,
/// rustls and every test binary of the next `cargo test`, and that one would rebuild them
/// again for the next test that builds.
pub fn cargo() -> std::process::Command {
    let mut cargo =
        std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    for (name, _) in std::env::vars_os() {
        let set_for_tests = name.to_str().is_some_and(|name| {
            name.starts_with("CARGO_PKG_")
                || matches!(
                    name,
                    "CARGO_MANIFEST_DIR"
                        | "CARGO_MANIFEST_PATH"
                        | "CARGO_CRATE_NAME"
                        | "CARGO_BIN_NAME"
                        | "CARGO_PRIMARY_PACKAGE"
                        | "CARGO_TARGET_TMPDIR"
                        | "OUT_DIR"
                )
        });
        if set_for_tests {
            cargo.env_remove(name);
        }
    }
    cargo
}

/// The `zklock` binary of the workspace's CLI crate, built first if needed (tests of the
/// library that run the CLI, such as tests/security.rs, cannot name it with
/// `CARGO_BIN_EXE_zklock`, which only the CLI crate's own tests have). For the library's tests:
/// the target dir is the one beside the library's manifest, unless `CARGO_TARGET_DIR` says.
pub fn zklock_binary() -> std::path::PathBuf {
    static BUILT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let status = cargo()
                .args(["build", "--quiet", "-p", "zklock-cli", "--bin", "zklock"])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .expect("cargo runs");
            assert!(status.success(), "building the zklock binary failed");
            let target = std::env::var_os("CARGO_TARGET_DIR")
                .map(std::path::PathBuf::from)
                .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
            target.join("debug").join("zklock")
        })
        .clone()
}
