//! Herd-free wake-ups, measured by the server's own watch-notification counters. The counters
//! are server-wide, so this test runs against a private server of its own (port 2189, started
//! with `scripts/start-zk.sh` and stopped at the end) that nothing else uses.

mod common;

use std::thread;
use std::time::Duration;

use zklock::DistributedMutex;

const PRIVATE: &str = "127.0.0.1:2189";

fn zk_script(name: &str) {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(name);
    let status = std::process::Command::new("bash")
        .arg(script)
        .env("ZK_PORT", "2189")
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "{name} failed");
}

fn mntr_value(key: &str) -> u64 {
    common::four_letter_at(PRIVATE, "mntr")
        .lines()
        .find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix('\t')))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .unwrap_or(0.0) as u64
}

#[test]
fn each_release_notifies_exactly_one_waiter() {
    const WAITERS: usize = 24;
    let path = common::lock_path("herd");
    zk_script("start-zk.sh");
    let clients: Vec<_> = (0..4)
        .map(|_| {
            zklock::Client::builder(PRIVATE)
                .session_timeout(Duration::from_secs(4))
                .connect()
                .unwrap()
        })
        .collect();
    let holder_mutex = DistributedMutex::new(&clients[0], &path).unwrap();
    let holder = holder_mutex.lock().unwrap();
    let watches_before = mntr_value("zk_watch_count");
    let mut notifications_before = 0;
    thread::scope(|s| {
        for i in 0..WAITERS {
            let (client, path) = (&clients[i % clients.len()], &path);
            s.spawn(move || {
                let mutex = DistributedMutex::new(client, path).unwrap();
                // Releases as soon as it holds, handing over to the next waiter.
                mutex.lock().unwrap().unlock().unwrap();
            });
        }
        // Every waiter queued and watching (one watch each, on its predecessor only).
        assert!(common::eventually(Duration::from_secs(20), || {
            holder_mutex.contenders().unwrap().len() == WAITERS + 1
                && mntr_value("zk_watch_count") >= watches_before + WAITERS as u64
        }));
        assert_eq!(
            mntr_value("zk_watch_count"),
            watches_before + WAITERS as u64,
            "a waiter watches more than its predecessor"
        );
        notifications_before = common::watch_notifications_at(PRIVATE);
        drop(holder);
        // The scope joins every waiter: each acquired and released once.
    });
    let notifications = common::watch_notifications_at(PRIVATE) - notifications_before;
    assert_eq!(
        notifications, WAITERS as u64,
        "one notification per release"
    );
    assert_eq!(holder_mutex.contenders().unwrap().len(), 0);
    drop((holder_mutex, clients));
    zk_script("stop-zk.sh");
}
