//! Herd-free wake-ups, measured by the server's own watch-notification counters. The counters
//! are server-wide, so this test runs against a private server of its own (started with
//! `scripts/start-zk.sh` on a free port, stopped at the end) that nothing else uses. The
//! listings after a reconnect are counted by the loopback proxy the waiters' client uses.

mod common;

use std::thread;
use std::time::Duration;

use std::sync::mpsc;

use common::proxy::Proxy;
use common::servers::PrivateServer;
use zklock::{Client, DistributedMutex, DistributedRwLock};

fn mntr_value(server: &str, key: &str) -> u64 {
    common::servers::mntr(server).get(key).copied().unwrap_or(0)
}

#[test]
fn releases_wake_only_the_waiters_that_can_proceed() {
    let server = PrivateServer::start("");
    let connect = server.connect_string();
    let clients: Vec<Client> = (0..6)
        .map(|_| common::client_at(&connect, Duration::from_secs(4)))
        .collect();
    mutex_handoffs_notify_one_waiter_each(&connect, &clients);
    writer_release_wakes_the_readers_and_only_the_last_reader_wakes_the_writer(&connect, &clients);
    a_holder_watching_its_node_releases_without_a_notification(&connect, &clients[0]);
    drop(clients);
    drop(server);
}

fn mutex_handoffs_notify_one_waiter_each(server: &str, clients: &[Client]) {
    const WAITERS: usize = 24;
    let path = common::lock_path("herd");
    let holder_mutex = DistributedMutex::new(&clients[0], &path).unwrap();
    let holder = holder_mutex.lock().unwrap();
    let watches_before = mntr_value(server, "zk_watch_count");
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
                && mntr_value(server, "zk_watch_count") >= watches_before + WAITERS as u64
        }));
        assert_eq!(
            mntr_value(server, "zk_watch_count"),
            watches_before + WAITERS as u64,
            "a waiter watches more than its predecessor"
        );
        notifications_before = common::watch_notifications_at(server);
        drop(holder);
        // The scope joins every waiter: each acquired and released once.
    });
    let notifications = common::watch_notifications_at(server) - notifications_before;
    assert_eq!(
        notifications, WAITERS as u64,
        "one notification per release"
    );
    assert_eq!(holder_mutex.contenders().unwrap().len(), 0);
}

/// Queue: writer W0 (holding), readers R1..R5, writer W1. W0's release must wake exactly the
/// five readers (they can all proceed) and not W1; R1..R4 leaving wakes nobody; R5 leaving
/// wakes W1.
fn writer_release_wakes_the_readers_and_only_the_last_reader_wakes_the_writer(
    server: &str,
    clients: &[Client],
) {
    const READERS: usize = 5;
    let path = common::lock_path("herd-rw");
    let lock = DistributedRwLock::new(&clients[0], &path).unwrap();
    let first_writer = lock.write().unwrap();
    let queued = |n: usize| common::wait_contenders(&lock, n, Duration::from_secs(10));
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
        let before = common::watch_notifications_at(server);
        drop(first_writer);
        for _ in 0..READERS {
            holding_rx
                .recv_timeout(Duration::from_secs(10))
                .expect("a reader never got the lock");
        }
        assert_eq!(
            common::watch_notifications_at(server) - before,
            READERS as u64,
            "writer release woke someone who cannot proceed"
        );
        for (r, tx) in release.iter().enumerate().take(READERS - 1) {
            tx.send(()).unwrap();
            assert!(queued(READERS - r), "reader {r} did not leave");
        }
        assert_eq!(
            common::watch_notifications_at(server) - before,
            READERS as u64,
            "a reader's release woke the writer early"
        );
        release[READERS - 1].send(()).unwrap();
        writer.join().unwrap();
        assert_eq!(
            common::watch_notifications_at(server) - before,
            READERS as u64 + 1
        );
    });
    assert!(lock.contenders().unwrap().is_empty());
}

/// Asking a guard for its state watches the holder's node (to see it deleted by someone
/// else); the release removes that watch before deleting, so it notifies nobody.
fn a_holder_watching_its_node_releases_without_a_notification(server: &str, client: &Client) {
    let mutex = DistributedMutex::new(client, &common::lock_path("own-watch")).unwrap();
    let watches_before = mntr_value(server, "zk_watch_count");
    let guard = mutex.lock().unwrap();
    assert!(guard.is_held());
    assert!(
        common::eventually(Duration::from_secs(5), || mntr_value(
            server,
            "zk_watch_count"
        ) > watches_before),
        "the holder's node is not watched"
    );
    let fired = common::watch_notifications_at(server);
    guard.unlock().unwrap();
    assert_eq!(common::watch_notifications_at(server), fired);
    let unwatched = || {
        common::eventually(Duration::from_secs(5), || {
            mntr_value(server, "zk_watch_count") == watches_before
        })
    };
    assert!(unwatched());
    // Also when the release follows at once, with the request setting the watch still on its
    // way (the release lets it come back, then removes the watch, then deletes).
    for _ in 0..20 {
        let guard = mutex.lock().unwrap();
        assert!(guard.is_held());
        guard.unlock().unwrap();
    }
    assert_eq!(common::watch_notifications_at(server), fired);
    assert!(unwatched());
}

/// Issue 21, smaller item: after a reconnect every waiter on a session looks at the queue
/// again. Waiters on one session and one lock path share one listing instead of each listing
/// the whole queue (O(waiters²) bytes). Counted as the getChildren requests the waiters'
/// client sends through the proxy in the two seconds after its connection is cut.
#[test]
fn waiters_on_one_session_share_one_listing_after_a_reconnect() {
    const WAITERS: usize = 40;
    let proxy = Proxy::start(&common::connect_string());
    let path = common::lock_path("relist");
    let holder_client = common::client();
    let holder_mutex = DistributedMutex::new(&holder_client, &path).unwrap();
    let holder = holder_mutex.lock().unwrap();
    let waiters = common::client_via(&proxy, Duration::from_secs(10));
    let listings = thread::scope(|s| {
        for _ in 0..WAITERS {
            let (client, path) = (&waiters, &path);
            s.spawn(move || {
                let mutex = DistributedMutex::new(client, path).unwrap();
                mutex.lock().unwrap().unlock().unwrap();
            });
        }
        let queued = common::wait_contenders(&holder_mutex, WAITERS + 1, Duration::from_secs(20));
        thread::sleep(Duration::from_millis(300)); // the last watches go up
        proxy.record_requests(true);
        proxy.sever();
        thread::sleep(Duration::from_secs(2));
        proxy.record_requests(false);
        drop(holder); // the waiters then take the lock in turn and the scope joins them
        assert!(queued, "the waiters did not queue");
        proxy
            .requests()
            .iter()
            // getChildren, getChildren2
            .filter(|r| matches!(r.opcode, 8 | 12) && r.path.as_deref() == Some(path.as_str()))
            .count()
    });
    eprintln!("{listings} listings of the queue after the reconnect, {WAITERS} waiters");
    assert!(
        listings >= 1,
        "nobody looked at the queue again after the reconnect"
    );
    assert!(
        listings <= WAITERS / 8,
        "{listings} listings of the queue for {WAITERS} waiters on one session"
    );
}
