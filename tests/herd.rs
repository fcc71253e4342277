//! Herd-free wake-ups, measured by the server's own watch-notification counters. The counters
//! are server-wide, so this test runs against a private server of its own (port 2189, started
//! with `scripts/start-zk.sh` and stopped at the end) that nothing else uses.

mod common;

use std::thread;
use std::time::Duration;

use std::sync::mpsc;

use zklock::{Client, DistributedMutex, DistributedRwLock};

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
fn releases_wake_only_the_waiters_that_can_proceed() {
    zk_script("start-zk.sh");
    let clients: Vec<Client> = (0..6)
        .map(|_| {
            Client::builder(PRIVATE)
                .session_timeout(Duration::from_secs(4))
                .connect()
                .unwrap()
        })
        .collect();
    mutex_handoffs_notify_one_waiter_each(&clients);
    writer_release_wakes_the_readers_and_only_the_last_reader_wakes_the_writer(&clients);
    drop(clients);
    zk_script("stop-zk.sh");
}

fn mutex_handoffs_notify_one_waiter_each(clients: &[Client]) {
    const WAITERS: usize = 24;
    let path = common::lock_path("herd");
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
}

/// Queue: writer W0 (holding), readers R1..R5, writer W1. W0's release must wake exactly the
/// five readers (they can all proceed) and not W1; R1..R4 leaving wakes nobody; R5 leaving
/// wakes W1.
fn writer_release_wakes_the_readers_and_only_the_last_reader_wakes_the_writer(clients: &[Client]) {
    const READERS: usize = 5;
    let path = common::lock_path("herd-rw");
    let lock = DistributedRwLock::new(&clients[0], &path).unwrap();
    let first_writer = lock.write().unwrap();
    let queued = |n: usize| {
        common::eventually(Duration::from_secs(10), || {
            lock.contenders().unwrap().len() == n
        })
    };
    thread::scope(|s| {
        // Inside the scope: if an assertion fails, dropping these ends the reader threads.
        let (holding_tx, holding_rx) = mpsc::channel();
        let mut release = Vec::new();
        for r in 0..READERS {
            // Each reader on a session of its own: the server keeps one watch per session and
            // path, so readers sharing a session would share one notification.
            let (client, path, holding) = (&clients[r + 1], &path, holding_tx.clone());
            let (tx, rx) = mpsc::channel::<()>();
            release.push(tx);
            s.spawn(move || {
                let reader = DistributedRwLock::new(client, path).unwrap();
                let guard = reader.read().unwrap();
                holding.send(r).unwrap();
                rx.recv().unwrap();
                guard.unlock().unwrap();
            });
            assert!(queued(r + 2), "reader {r} did not queue");
        }
        let writer = s.spawn(|| {
            DistributedRwLock::new(&clients[1], &path)
                .unwrap()
                .write()
                .unwrap()
                .unlock()
                .unwrap()
        });
        assert!(queued(READERS + 2));
        thread::sleep(Duration::from_millis(300)); // the last watches go up
        let before = common::watch_notifications_at(PRIVATE);
        drop(first_writer);
        for _ in 0..READERS {
            holding_rx
                .recv_timeout(Duration::from_secs(10))
                .expect("a reader never got the lock");
        }
        assert_eq!(
            common::watch_notifications_at(PRIVATE) - before,
            READERS as u64,
            "writer release woke someone who cannot proceed"
        );
        for (r, tx) in release.iter().enumerate().take(READERS - 1) {
            tx.send(()).unwrap();
            assert!(queued(READERS - r), "reader {r} did not leave");
        }
        assert_eq!(
            common::watch_notifications_at(PRIVATE) - before,
            READERS as u64,
            "a reader's release woke the writer early"
        );
        release[READERS - 1].send(()).unwrap();
        writer.join().unwrap();
        assert_eq!(
            common::watch_notifications_at(PRIVATE) - before,
            READERS as u64 + 1
        );
    });
    assert!(lock.contenders().unwrap().is_empty());
}
