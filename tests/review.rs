//! Review of today's changes (everything after 9e04064): each test demonstrates one problem
//! and FAILS on the code under review. Real server at `ZK_CONNECT` (default 127.0.0.1:2181),
//! real faults through the loopback proxy; one test starts a private ensemble (ports
//! 2440-2442 / 2540-2542 / 2640-2642, ZK_WORKDIR=/tmp/zk-review).

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::proxy::Proxy;
use zklock::{CancelToken, Client, DistributedMutex, Error, MultiLock, NodeAcl, Semaphore};

fn client_as(user: &str) -> Client {
    common::init_logging();
    Client::builder(&common::connect_string())
        .session_timeout(Duration::from_secs(4))
        .auth_digest(user, "pw")
        .acl(NodeAcl::CreatorOnly)
        .connect()
        .unwrap()
}

/// ParentAcl / issue 10: parents created on the way must let other identities create
/// siblings. `Client::set_data` (Session::put) creates missing parents with the parent ACL
/// (world READ|CREATE), but a fenced write creates them inside its transaction as
/// `TxnOp::Create`, which always uses the *lock* ACL (src/session.rs `Session::multi`,
/// src/fence.rs `Fence::set_data`): with `NodeAcl::CreatorOnly`, alice's fenced write to
/// `<root>/shared/a` makes `<root>/shared` creator-only, and bob can no longer write (or lock)
/// anything next to it.
#[test]
fn fenced_write_parents_are_creator_only_and_lock_out_other_identities() {
    let root = common::lock_path("review-fence-acl");
    common::RawClient::connect(&common::connect_string()).mkdir_open(&root);
    let (alice, bob) = (client_as("alice"), client_as("bob"));

    // Control: parents made by an ordinary write are shared.
    alice
        .set_data(&format!("{root}/plain/a"), b"alice")
        .unwrap();
    bob.set_data(&format!("{root}/plain/b"), b"bob")
        .expect("bob writes next to a parent alice created with set_data");

    // The same through a fenced write.
    let lock = DistributedMutex::new(&alice, &format!("{root}/lock")).unwrap();
    let guard = lock.lock().unwrap();
    guard
        .fenced_set_data(&format!("{root}/fenced/a"), b"alice")
        .unwrap();
    let outcome = bob.set_data(&format!("{root}/fenced/b"), b"bob");
    assert!(
        outcome.is_ok(),
        "bob cannot write next to a parent alice created with a fenced write: {outcome:?}"
    );
}

/// Cancellation (src/recipe.rs `Partial::drop`): a cancelled multi-lock must return
/// `Cancelled` promptly (the docs: "promptly ... during an outage it returns at once"). The
/// member already taken is released by `Partial::drop` with `wait` = the whole session timeout
/// when the attempt has no deadline, and the release runs `shielded`, so the cancellation
/// does not shorten it (unlike `OurNode::drop`, which uses CANCEL_WITHDRAW_WAIT = 200 ms). On a
/// connection that went silent (blackhole: the client crate still says SyncConnected for 2/5
/// of the session timeout), the cancelled caller is held until the crate gives up on the
/// connection: seconds, not milliseconds.
#[test]
fn cancelled_multi_lock_during_a_silent_connection_is_not_prompt() {
    let root = common::lock_path("review-multi-cancel");
    let (a, b) = (format!("{root}/a"), format!("{root}/b"));
    let other = common::client();
    let other_b = DistributedMutex::new(&other, &b).unwrap();
    let _held_elsewhere = other_b.lock().unwrap();

    let proxy = Proxy::start(&common::connect_string());
    let client = common::client_via(&proxy, Duration::from_secs(10));
    let multi = MultiLock::new(&client).mutex(&a).unwrap().mutex(&b).unwrap();
    let token = CancelToken::new();
    let waiter = {
        let token = token.clone();
        thread::spawn(move || multi.lock_cancellable(&token).map(drop))
    };
    // Wait until we hold `a` and queue on `b`.
    assert!(common::eventually(Duration::from_secs(10), || {
        common::children_count(&other, &b) == 2
    }));
    thread::sleep(Duration::from_millis(100));

    proxy.blackhole(true);
    thread::sleep(Duration::from_millis(100));
    let cancelled_at = Instant::now();
    token.cancel();
    let outcome = waiter.join().unwrap();
    let took = cancelled_at.elapsed();
    proxy.blackhole(false);
    assert!(matches!(outcome, Err(Error::Cancelled)), "{outcome:?}");
    assert!(
        took < Duration::from_secs(1),
        "a cancelled multi-lock returned only after {took:?}"
    );
}

/// The same through a semaphore: the gate node, held while the taker waits for a lease, is
/// released by `Partial::drop` with the full session timeout.
#[test]
fn cancelled_semaphore_taker_during_a_silent_connection_is_not_prompt() {
    let root = common::lock_path("review-sem-cancel");
    let other = common::client();
    let other_sem = Semaphore::new(&other, &root, 1).unwrap();
    let _permit = other_sem.acquire().unwrap();

    let proxy = Proxy::start(&common::connect_string());
    let client = common::client_via(&proxy, Duration::from_secs(10));
    let sem = Semaphore::new(&client, &root, 1).unwrap();
    let token = CancelToken::new();
    let waiter = {
        let token = token.clone();
        thread::spawn(move || sem.acquire_cancellable(&token).map(drop))
    };
    // The taker holds the gate and waits with its lease node queued.
    assert!(common::eventually(Duration::from_secs(10), || {
        other_sem.leases().unwrap().len() == 2
    }));
    thread::sleep(Duration::from_millis(100));

    proxy.blackhole(true);
    thread::sleep(Duration::from_millis(100));
    let cancelled_at = Instant::now();
    token.cancel();
    let outcome = waiter.join().unwrap();
    let took = cancelled_at.elapsed();
    proxy.blackhole(false);
    assert!(matches!(outcome, Err(Error::Cancelled)), "{outcome:?}");
    assert!(
        took < Duration::from_secs(1),
        "a cancelled semaphore taker returned only after {took:?}"
    );
}

/// Client::close (docs: "Every thread blocked in a call on this client or any clone of it
/// returns promptly"): `LockGuard::wait_revocation_timeout` waits on the `NodeFlags` condvar
/// (src/watch.rs `OwnNodeWatch::wait_revocation`), which nothing signals on close: the own-node
/// task is aborted by `Session::close`, the guard is already Lost, but the caller stays
/// blocked for its whole timeout.
#[test]
fn close_does_not_wake_a_thread_waiting_for_revocation() {
    let client = common::client();
    let mutex = DistributedMutex::new(&client, &common::lock_path("review-revoke-close"))
        .unwrap()
        .revocable();
    let guard = mutex.lock().unwrap();
    let started = Instant::now();
    let closed_at = thread::scope(|s| {
        let waiting = s.spawn(|| guard.wait_revocation_timeout(Duration::from_secs(8)));
        thread::sleep(Duration::from_millis(300));
        let closed_at = Instant::now();
        client.close().unwrap();
        assert!(!waiting.join().unwrap());
        closed_at
    });
    assert_eq!(guard.state(), zklock::LockState::Lost);
    let after_close = closed_at.elapsed();
    assert!(
        after_close < Duration::from_secs(3),
        "wait_revocation_timeout returned {after_close:?} after close (started {:?} ago)",
        started.elapsed()
    );
}
