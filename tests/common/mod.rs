//! Shared fixture: every test talks to the real ZooKeeper at `ZK_CONNECT` (`scripts/test.sh`
//! starts one on a free port and sets it; default `127.0.0.1:2181`, where `scripts/start-zk.sh`
//! starts one without settings) and works under a lock path of its own, so tests run in
//! parallel without seeing each other's nodes. Servers a test needs for itself (an ensemble,
//! private or secure servers) come from [`servers`] and [`ensemble`], on free ports.
#![allow(dead_code)]

pub mod ensemble;
pub mod proxy;
pub mod servers;

use std::time::Duration;

use zklock::{Client, ClientBuilder, DistributedMutex, DistributedRwLock, LeaderElection};
use zklock::{NodeAcl, Semaphore};

pub fn connect_string() -> String {
    std::env::var("ZK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".to_owned())
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
        self.leases().map(|c| c.len())
    }
}

impl Queue for LeaderElection {
    fn queue_len(&self) -> zklock::Result<usize> {
        self.participants().map(|c| c.len())
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

/// A raw ephemeral node owned by a session of its own (for "parent is ephemeral" tests).
pub struct RawEphemeral {
    _client: zookeeper_client::Client,
    _runtime: tokio::runtime::Runtime,
}

pub fn create_ephemeral(path: &str) -> RawEphemeral {
    use zookeeper_client as zk;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let client = runtime.block_on(async {
        let client = zk::Client::connect(&connect_string()).await.unwrap();
        let parent = &path[..path.rfind('/').unwrap()];
        client
            .mkdir(
                parent,
                &zk::CreateMode::Container.with_acls(zk::Acls::anyone_all()),
            )
            .await
            .unwrap();
        client
            .create(
                path,
                b"",
                &zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all()),
            )
            .await
            .unwrap();
        client
    });
    RawEphemeral {
        _client: client,
        _runtime: runtime,
    }
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

/// A bare `zookeeper-client` session (no zklock in between), for looking at and changing nodes
/// behind zklock's back: raw stats, recursive deletes. Its runtime runs on a thread of its own,
/// so the session keeps pinging between calls.
pub struct RawClient {
    client: Option<zookeeper_client::Client>,
    handle: tokio::runtime::Handle,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RawClient {
    /// Connects to `connect_string` (hosts only, no chroot).
    pub fn connect(connect_string: &str) -> RawClient {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let _ = runtime.block_on(stopped);
        });
        let connect_string = connect_string.to_owned();
        let client = handle
            .block_on(handle.spawn(async move {
                zookeeper_client::Client::connector()
                    .with_session_timeout(Duration::from_secs(10))
                    .connect(&connect_string)
                    .await
            }))
            .unwrap()
            .expect("raw ZooKeeper session");
        RawClient {
            client: Some(client),
            handle,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    fn zk(&self) -> zookeeper_client::Client {
        self.client.clone().unwrap()
    }

    /// The node's stat, `None` if there is no node at `path`. (A stat does not tell container
    /// from persistent nodes: the server shows both with `ephemeral_owner` 0.)
    pub fn stat(&self, path: &str) -> Option<zookeeper_client::Stat> {
        let zk = self.zk();
        self.handle
            .block_on(async move { zk.check_stat(path).await })
            .unwrap()
    }

    /// The children of `path` (empty if it does not exist).
    pub fn children(&self, path: &str) -> Vec<String> {
        let zk = self.zk();
        match self
            .handle
            .block_on(async move { zk.list_children(path).await })
        {
            Ok(children) => children,
            Err(zookeeper_client::Error::NoNode) => Vec::new(),
            Err(err) => panic!("listing {path}: {err}"),
        }
    }

    /// Creates `path` and its missing ancestors as container nodes anyone may use.
    pub fn mkdir_open(&self, path: &str) {
        use zookeeper_client as zk;
        let client = self.zk();
        self.handle
            .block_on(async move {
                client
                    .mkdir(
                        path,
                        &zk::CreateMode::Container.with_acls(zk::Acls::anyone_all()),
                    )
                    .await
            })
            .unwrap();
    }

    /// Deletes `paths` (which must exist) back to back: every request is sent before the
    /// first reply is awaited, so the server applies them as one burst, in this order.
    pub fn delete_back_to_back(&self, paths: &[&str]) {
        let zk = self.zk();
        let sent: Vec<_> = paths.iter().map(|p| zk.delete(p, None)).collect();
        for (deleted, path) in sent.into_iter().zip(paths) {
            self.handle
                .block_on(deleted)
                .unwrap_or_else(|e| panic!("deleting {path}: {e}"));
        }
    }

    /// Deletes `paths` (which must exist) in one transaction, in this order.
    pub fn delete_in_one_multi(&self, paths: &[&str]) {
        let zk = self.zk();
        let paths: Vec<String> = paths.iter().map(|p| (*p).to_owned()).collect();
        self.handle
            .block_on(async move {
                let mut multi = zk.new_multi_writer();
                for path in &paths {
                    multi.add_delete(path, None).unwrap();
                }
                multi.commit().await.map(|_| ())
            })
            .unwrap_or_else(|e| panic!("multi delete: {e}"));
    }

    /// Deletes `path` and everything below it; nothing happens if it does not exist.
    pub fn delete_tree(&self, path: &str) {
        for child in self.children(path) {
            self.delete_tree(&format!("{path}/{child}"));
        }
        let zk = self.zk();
        match self
            .handle
            .block_on(async move { zk.delete(path, None).await })
        {
            Ok(()) | Err(zookeeper_client::Error::NoNode) => {}
            Err(err) => panic!("deleting {path}: {err}"),
        }
    }
}

impl Drop for RawClient {
    fn drop(&mut self) {
        {
            // The client crate's objects must be dropped inside the runtime context.
            let _context = self.handle.enter();
            drop(self.client.take());
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
