//! Faults made by the embedded server (`zklock_server::Server`) at the test's command, rather
//! than faked between client and server: a session expired, a connection closed, reset or
//! silenced, the server silenced or slowed, an operator's delete, a restart. Each test starts
//! its own server on a free port (they run in parallel), and is the example a user's test can
//! copy. The Apache ZooKeeper versions of the same faults (a proxy, `SIGSTOP`, raw sessions)
//! stay in `faults.rs` and `exclusion.rs`.

use std::time::{Duration, Instant};

use zklock::{Client, DistributedMutex, Error, LockState};
use zklock_server::{Config, Server};

/// A server with a short tick (sessions from 1 s to 10 s), so that expiries come quickly.
fn server() -> Server {
    Server::start(Config {
        tick_time: Duration::from_millis(500),
        ..Config::default()
    })
    .expect("starting the embedded server")
}

fn client(server: &Server, session_timeout: Duration) -> Client {
    Client::builder(&server.connect_string())
        .session_timeout(session_timeout)
        .release_timeout(Duration::from_millis(200))
        .connect()
        .expect("connecting to the embedded server")
}

/// Waits until `guard` reads lost: `wait_lost` returns at the first change, which is
/// `Suspended` while the client reconnects, before the server tells it the session expired.
fn reads_lost(guard: &zklock::LockGuard) -> bool {
    let _ = guard.wait_lost_timeout(Duration::from_secs(10));
    eventually(Duration::from_secs(10), || guard.state() == LockState::Lost)
}

/// The id of the connection carrying `client`'s session.
fn connection_of(server: &Server, client: &Client) -> u64 {
    let session = client.session_id();
    server
        .connections()
        .into_iter()
        .find(|c| c.session_id == session)
        .map(|c| c.id)
        .expect("the client's connection is listed")
}

/// A `lock_timeout(700 ms)` returns by then: its deadline, plus the 100 ms a timed call may
/// wait past it for its node's withdrawal to be confirmed (none comes from a silent server:
/// the delete goes on in the background), plus slack.
const BY_DEADLINE: Duration = Duration::from_millis(700 + 100 + 300);

fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

#[test]
fn an_expired_session_reads_lost_and_its_fenced_write_is_refused() {
    let zk = server();
    let client = client(&zk, Duration::from_secs(4));
    let mutex = DistributedMutex::new(&client, "/app/lock").unwrap();
    let guard = mutex.lock().unwrap();
    guard.fenced_set_data("/app/data", b"before").unwrap();

    assert!(zk.expire_session(client.session_id()));

    assert!(reads_lost(&guard));
    assert_eq!(guard.state(), LockState::Lost);
    assert!(!guard.is_held());
    let refused = guard.fenced_set_data("/app/data", b"after");
    assert!(
        matches!(refused, Err(Error::LockLost { .. })),
        "{refused:?}"
    );
    // The lock node went with the session: another client takes the lock at once.
    let other = self::client(&zk, Duration::from_secs(4));
    let next = DistributedMutex::new(&other, "/app/lock")
        .unwrap()
        .try_lock()
        .unwrap();
    assert!(next.is_some());
    assert_eq!(
        other.get_data("/app/data").unwrap().as_deref(),
        Some(&b"before"[..])
    );
}

#[test]
fn expiring_every_session_loses_every_guard() {
    let zk = server();
    let (a, b) = (
        client(&zk, Duration::from_secs(4)),
        client(&zk, Duration::from_secs(4)),
    );
    let ga = DistributedMutex::new(&a, "/a").unwrap().lock().unwrap();
    let gb = DistributedMutex::new(&b, "/b").unwrap().lock().unwrap();
    assert_eq!(zk.expire_all_sessions(), 2);
    for g in [&ga, &gb] {
        assert!(reads_lost(g));
    }
}

/// The embedded form of `faults.rs`' `timeouts_are_honoured_while_no_server_answers` (a
/// blackholing proxy there): a timed lock on a silent connection returns by its deadline, and
/// the lock is taken once the connection speaks again.
#[test]
fn a_timed_lock_on_a_silent_connection_returns_by_its_deadline() {
    let zk = server();
    let client = client(&zk, Duration::from_secs(6));
    let mutex = DistributedMutex::new(&client, "/silent").unwrap();
    drop(mutex.lock().unwrap()); // the path exists, the session is warm
    assert!(!zk.set_session_silent(client.session_id(), true));

    let started = Instant::now();
    let outcome = mutex.lock_timeout(Duration::from_millis(700));
    let took = started.elapsed();
    assert!(
        matches!(outcome, Err(Error::ConnectionLoss { .. }) | Ok(None)),
        "a free lock was not taken over a silent connection: {outcome:?}"
    );
    assert!(took < BY_DEADLINE, "lock_timeout(700ms) took {took:?}");

    assert!(zk.set_session_silent(client.session_id(), false));
    let guard = mutex.lock_timeout(Duration::from_secs(10)).unwrap();
    assert!(
        guard.is_some(),
        "the lock is taken once the connection speaks"
    );
}

/// The same behind another holder, the whole server silent: the waiter's deadline holds.
#[test]
fn a_timed_lock_behind_a_holder_on_a_silent_server_returns_by_its_deadline() {
    let zk = server();
    let (holder, waiter) = (
        client(&zk, Duration::from_secs(6)),
        client(&zk, Duration::from_secs(6)),
    );
    let held = DistributedMutex::new(&holder, "/silent-server")
        .unwrap()
        .lock()
        .unwrap();
    let mutex = DistributedMutex::new(&waiter, "/silent-server").unwrap();
    zk.set_silent(true);
    // The holder lets go while the server is silent: its delete waits unprocessed.
    let releasing = std::thread::spawn(move || held.unlock());
    let started = Instant::now();
    let outcome = mutex.lock_timeout(Duration::from_millis(700));
    let took = started.elapsed();
    assert!(
        matches!(outcome, Err(Error::ConnectionLoss { .. }) | Ok(None)),
        "{outcome:?}"
    );
    assert!(took < BY_DEADLINE, "lock_timeout(700ms) took {took:?}");
    zk.set_silent(false);
    let _ = releasing.join().unwrap();
    assert!(mutex
        .lock_timeout(Duration::from_secs(10))
        .unwrap()
        .is_some());
}

/// The embedded form of `faults.rs`' `wait_lost_reports_expiry_to_the_holder` (a blackholing
/// proxy there): the holder's connection silent, the holder reads suspended; the server expires
/// its session and hands the lock on; spoken to again, the holder reads lost.
#[test]
fn a_silent_holder_is_expired_and_reads_lost() {
    let zk = server();
    let client = client(&zk, Duration::from_secs(2));
    let guard = DistributedMutex::new(&client, "/partitioned")
        .unwrap()
        .lock()
        .unwrap();
    assert!(!zk.set_session_silent(client.session_id(), true));
    assert_eq!(
        guard.wait_lost_timeout(Duration::from_secs(10)),
        Some(LockState::Suspended)
    );
    let other = self::client(&zk, Duration::from_secs(4));
    let next = DistributedMutex::new(&other, "/partitioned")
        .unwrap()
        .lock_timeout(Duration::from_secs(20))
        .unwrap();
    assert!(next.is_some(), "the server expired the silent session");
    assert!(eventually(Duration::from_secs(10), || guard.state() == LockState::Lost));
}

/// The embedded form of `faults.rs`' `unlock_on_a_frozen_server_reports_an_unknown_outcome`
/// (`SIGSTOP` of a private Apache server there).
#[test]
fn unlock_on_a_silent_server_reports_an_unknown_outcome() {
    let zk = server();
    let client = client(&zk, Duration::from_secs(3));
    let mutex = DistributedMutex::new(&client, "/frozen").unwrap();
    let guard = mutex.lock().unwrap();
    let node = guard.node_path().to_owned();
    zk.set_silent(true);
    let started = Instant::now();
    let outcome = guard.unlock();
    let took = started.elapsed();
    zk.set_silent(false);
    assert_eq!(outcome, Err(Error::OutcomeUnknown { path: node }));
    assert!(took < Duration::from_secs(4), "unlock blocked {took:?}");
    // Speaking again, the server processes the delete (or the background retry does).
    let observer = self::client(&zk, Duration::from_secs(4));
    let lock = DistributedMutex::new(&observer, "/frozen").unwrap();
    assert!(eventually(Duration::from_secs(10), || lock
        .contenders()
        .unwrap()
        .is_empty()));
}

/// The embedded form of `exclusion.rs`' `holder_node_deleted` test (a raw session's delete
/// there): an operator deletes the holder's node; the holder reads lost and `unlock()` says so.
#[test]
fn an_operator_s_delete_of_the_held_node_makes_unlock_report_lock_lost() {
    let zk = server();
    let client = client(&zk, Duration::from_secs(4));
    let guard = DistributedMutex::new(&client, "/ops/lock")
        .unwrap()
        .lock()
        .unwrap();
    zk.delete_node(guard.node_path()).unwrap();
    assert!(reads_lost(&guard));
    assert!(!guard.is_held());
    let outcome = guard.unlock();
    assert!(
        matches!(outcome, Err(Error::LockLost { .. })),
        "{outcome:?}"
    );
    // What an operator cannot delete.
    assert_eq!(
        zk.delete_node("/ops"),
        Err(zklock_server::DeleteError::NotEmpty)
    );
    assert_eq!(
        zk.delete_node("/ops/none"),
        Err(zklock_server::DeleteError::NoNode)
    );
    assert_eq!(
        zk.delete_node("/zookeeper"),
        Err(zklock_server::DeleteError::BadPath)
    );
}

#[test]
fn a_closed_or_reset_connection_resumes_its_session_and_keeps_the_lock() {
    let zk = server();
    let client = client(&zk, Duration::from_secs(6));
    let session = client.session_id();
    let guard = DistributedMutex::new(&client, "/reconnect")
        .unwrap()
        .lock()
        .unwrap();
    for (reset, all) in [(false, false), (true, false), (false, true), (true, true)] {
        let conn = connection_of(&zk, &client);
        match (reset, all) {
            (false, false) => assert!(zk.close_connection(conn)),
            (true, false) => assert!(zk.reset_connection(conn)),
            (false, true) => assert_eq!(zk.close_all_connections(), 1),
            (true, true) => assert_eq!(zk.reset_all_connections(), 1),
        }
        assert!(
            eventually(Duration::from_secs(10), || zk
                .connections()
                .iter()
                .any(|c| c.session_id == session && c.id != conn)),
            "the client reconnected (reset: {reset}, all: {all})"
        );
        assert_eq!(client.session_id(), session);
        assert!(eventually(Duration::from_secs(10), || guard.is_held()));
    }
    guard.unlock().unwrap();
}

#[test]
fn delayed_replies_arrive_late_and_in_order() {
    let zk = server();
    let client = client(&zk, Duration::from_secs(6));
    client.set_data("/slow", b"1").unwrap();
    zk.set_reply_delay(Duration::from_millis(400));
    let started = Instant::now();
    client.set_data("/slow", b"2").unwrap();
    assert_eq!(
        client.get_data("/slow").unwrap().as_deref(),
        Some(&b"2"[..])
    );
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(800),
        "two calls answered in {took:?}"
    );
    zk.set_reply_delay(Duration::ZERO);
    assert_eq!(
        client.get_data("/slow").unwrap().as_deref(),
        Some(&b"2"[..])
    );
}

#[test]
fn a_restart_keeping_sessions_keeps_the_guard_held() {
    let zk = server();
    let client = client(&zk, Duration::from_secs(4));
    let session = client.session_id();
    let guard = DistributedMutex::new(&client, "/restart")
        .unwrap()
        .lock()
        .unwrap();
    let before = connection_of(&zk, &client);
    zk.restart(true);
    assert!(
        eventually(Duration::from_secs(10), || zk
            .connections()
            .iter()
            .any(|c| c.session_id == session && c.id != before)),
        "the client reconnected after the restart"
    );
    assert_eq!(client.session_id(), session);
    assert_eq!(guard.state(), LockState::Held);
    let other = self::client(&zk, Duration::from_secs(4));
    let mutex = DistributedMutex::new(&other, "/restart").unwrap();
    assert!(mutex.try_lock().unwrap().is_none(), "still held");
    guard.unlock().unwrap();
    assert!(mutex.try_lock().unwrap().is_some());
}

#[test]
fn a_wiping_restart_expires_every_session() {
    let zk = server();
    let client = client(&zk, Duration::from_secs(4));
    let guard = DistributedMutex::new(&client, "/wiped")
        .unwrap()
        .lock()
        .unwrap();
    zk.restart(false);
    assert!(reads_lost(&guard));
    assert!(zk.sessions().iter().all(|s| *s != guard.session_id()));
}

#[tokio::test]
async fn from_an_async_test_an_expired_session_reads_lost() {
    let zk = server();
    let client = Client::builder(&zk.connect_string())
        .session_timeout(Duration::from_secs(4))
        .connect_async()
        .await
        .unwrap();
    let guard = DistributedMutex::new(&client, "/async")
        .unwrap()
        .lock_async()
        .await
        .unwrap();
    assert!(zk.expire_session(client.session_id()));
    let changed = tokio::time::timeout(Duration::from_secs(10), guard.wait_lost_async()).await;
    assert!(
        matches!(changed, Ok(state) if state != LockState::Held),
        "{changed:?}"
    );
    assert!(eventually(Duration::from_secs(10), || guard.state() == LockState::Lost));
    assert!(matches!(
        guard.unlock_async().await,
        Err(Error::LockLost { .. })
    ));
}
