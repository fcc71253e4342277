mod common;

use std::time::{Duration, Instant};

use zklock::{DistributedMutex, LockState};

#[test]
fn lock_try_lock_timeout_and_release_leave_nothing() {
    let client = common::client();
    let path = common::lock_path("smoke");
    let mutex = DistributedMutex::new(&client, &path).unwrap();
    let guard = mutex.lock().unwrap();
    assert!(guard.is_held());
    assert_eq!(guard.state(), LockState::Held);
    assert!(guard.node_path().starts_with(&format!("{path}/_c_")));
    assert_eq!(guard.session_id(), client.session_id());

    let other_client = common::client();
    let other = DistributedMutex::new(&other_client, &path).unwrap();
    assert!(other.try_lock().unwrap().is_none());
    let started = Instant::now();
    assert!(other
        .lock_timeout(Duration::from_millis(300))
        .unwrap()
        .is_none());
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(
        common::children_count(&other_client, &path),
        1,
        "waiters left nodes"
    );

    let first_token = guard.fencing().zxid();
    guard.unlock().unwrap();
    let next = other.try_lock().unwrap().expect("free after unlock");
    assert!(next.fencing().zxid() > first_token);
    drop(next);
    assert_eq!(common::children_count(&client, &path), 0);
}

#[test]
fn locking_again_while_holding_waits_like_std_mutex() {
    let client = common::client();
    let mutex = DistributedMutex::new(&client, &common::lock_path("reentry")).unwrap();
    let guard = mutex.lock().unwrap();
    // Not reentrant, and no false error either: the second attempt is simply busy.
    assert!(mutex.try_lock().unwrap().is_none());
    assert!(mutex
        .lock_timeout(Duration::from_millis(200))
        .unwrap()
        .is_none());
    drop(guard);
    assert!(mutex.try_lock().unwrap().is_some());
}
