//! Shared fixture: every test talks to the real ZooKeeper started by `scripts/start-zk.sh`
//! (`ZK_CONNECT`, default `127.0.0.1:2181`) and works under a lock path of its own, so tests run
//! in parallel without seeing each other's nodes.
#![allow(dead_code)]

pub mod ensemble;
pub mod proxy;

use std::time::Duration;

use zklock::Client;

pub fn connect_string() -> String {
    std::env::var("ZK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".to_owned())
}

pub fn init_logging() {
    let _ = env_logger::builder().is_test(true).try_init();
}

/// A client with a short session, so tests about dead holders finish quickly.
pub fn client() -> Client {
    init_logging();
    Client::builder(&connect_string())
        .session_timeout(Duration::from_secs(4))
        .connect()
        .expect("ZooKeeper must be running: scripts/start-zk.sh")
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

/// Sums the watch-notification counters (`mntr`) of the server at `addr`.
pub fn watch_notifications_at(addr: &str) -> u64 {
    let mntr = four_letter_at(addr, "mntr");
    mntr.lines()
        .filter_map(|line| line.split_once('\t'))
        .filter(|(k, _)| {
            matches!(
                *k,
                "zk_sum_node_deleted_watch_count"
                    | "zk_sum_node_children_watch_count"
                    | "zk_sum_node_created_watch_count"
                    | "zk_sum_node_changed_watch_count"
            )
        })
        .map(|(_, v)| v.trim().parse::<f64>().unwrap_or(0.0) as u64)
        .sum()
}

/// Sends a four-letter command to the server at `addr` (`host:port`).
pub fn four_letter_at(addr: &str, cmd: &str) -> String {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.write_all(cmd.as_bytes()).unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    out
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
