mod common;

use std::time::{Duration, Instant};

use zklock::{DistributedMutex, Error, LockState};

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

    let first_token = guard.fencing_token();
    guard.unlock().unwrap();
    let next = other.try_lock().unwrap().expect("free after unlock");
    assert!(next.fencing_token() > first_token);
    drop(next);
    assert_eq!(common::children_count(&client, &path), 0);
}

#[test]
fn reentry_is_an_error_not_a_deadlock() {
    let client = common::client();
    let mutex = DistributedMutex::new(&client, &common::lock_path("reentry")).unwrap();
    let _guard = mutex.lock().unwrap();
    assert!(matches!(mutex.lock(), Err(Error::WouldDeadlock { .. })));
    assert!(matches!(mutex.try_lock(), Err(Error::WouldDeadlock { .. })));
}
