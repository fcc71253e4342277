//! `CancelToken::cancelled()`: a `Send` future that any executor can await, ready once the
//! token is cancelled (at once if it already is), woken promptly by a cancel from another
//! thread; and, on the test server through a silent connection, the one token that stops a
//! service's blocking calls also stops its async acquisition, leaving nothing behind.

mod common;

use std::future::Future;
use std::thread;
use std::time::{Duration, Instant};

use zklock::{CancelToken, DistributedMutex, Wait};

/// Compiles only if the future can move to another thread and outlive the token it came from.
fn assert_send_static<F: Future + Send + 'static>(future: F) -> F {
    future
}

#[test]
fn ready_at_once_when_already_cancelled_on_futures_executor() {
    let token = CancelToken::new();
    token.cancel();
    futures::executor::block_on(assert_send_static(token.cancelled()));
}

#[test]
fn a_cancel_from_another_thread_wakes_a_futures_executor_promptly() {
    let token = CancelToken::new();
    let waiting = assert_send_static(token.cancelled());
    let cancelled_at = thread::spawn({
        let token = token.clone();
        move || {
            thread::sleep(Duration::from_millis(100));
            let at = Instant::now();
            token.cancel();
            at
        }
    });
    futures::executor::block_on(waiting);
    let woke = Instant::now();
    let cancelled_at = cancelled_at.join().unwrap();
    assert!(woke >= cancelled_at, "ready before the cancel");
    // A correctness bound, not a speed figure: the wake is an event, not a poll.
    assert!(woke - cancelled_at < Duration::from_secs(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tokio_task_stops_on_the_token_a_blocking_thread_cancels() {
    let token = CancelToken::new();
    // The future owns its token clone: spawned, it outlives this scope's borrow.
    let task = tokio::spawn(token.cancelled());
    let worker = tokio::spawn({
        let token = token.clone();
        async move {
            tokio::select! {
                () = token.cancelled() => "stopped",
                () = tokio::time::sleep(Duration::from_secs(30)) => "ran on",
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!task.is_finished());
    let canceller = thread::spawn(move || token.cancel());
    let stopped = tokio::time::timeout(Duration::from_secs(5), worker).await;
    assert_eq!(stopped.expect("woken by the cancel").unwrap(), "stopped");
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("spawned future woken")
        .unwrap();
    canceller.join().unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn dropped_unpolled_or_pending_the_future_leaves_the_token_usable() {
    let token = CancelToken::new();
    for _ in 0..1_000 {
        drop(token.cancelled());
        // Polled once, then dropped pending.
        let polled = tokio::time::timeout(Duration::from_millis(0), token.cancelled()).await;
        assert!(polled.is_err());
    }
    token.cancel();
    tokio::time::timeout(Duration::from_secs(5), token.cancelled())
        .await
        .expect("ready once cancelled");
}

#[test]
fn an_async_acquisition_on_a_silent_connection_stops_on_the_token() {
    let path = common::lock_path("cancelled_on_a_silent_connection");
    // Someone else holds the lock, so the waiter queues; then its connection goes silent (no
    // FIN, no RST): only the token can end its wait before the session gives up.
    let other = common::client();
    let holder = DistributedMutex::new(&other, &path).unwrap();
    let guard = holder.lock().unwrap();
    let proxy = common::proxy::Proxy::start(&common::connect_string());
    let client = common::client_via(&proxy, Duration::from_secs(10));
    let mutex = DistributedMutex::new(&client, &path).unwrap();
    let token = CancelToken::new();
    let runtime = common::two_worker_runtime();
    let (outcome, woke, cancelled_at) = runtime.block_on(async {
        let waiting = tokio::spawn({
            let token = token.clone();
            async move {
                tokio::select! {
                    got = mutex.lock_async() => Some(got.map(drop)),
                    () = token.cancelled() => None,
                }
            }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        proxy.blackhole(true);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let cancelled_at = Instant::now();
        let canceller = thread::spawn(move || token.cancel());
        let outcome = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the token ends the wait")
            .unwrap();
        canceller.join().unwrap();
        (outcome, Instant::now(), cancelled_at)
    });
    assert!(outcome.is_none(), "the lock was busy: {outcome:?}");
    // A correctness bound, not a speed figure: the session would have taken seconds.
    assert!(
        woke - cancelled_at < Duration::from_secs(1),
        "{:?}",
        woke - cancelled_at
    );
    // Back on the wire, the dropped acquisition's node is withdrawn: the holder's alone is left.
    proxy.blackhole(false);
    assert!(
        common::eventually(Duration::from_secs(15), || common::children_count(
            &other, &path
        ) == 1),
        "the cancelled waiter's node is still there"
    );
    drop(guard);
    assert!(common::eventually(Duration::from_secs(15), || {
        common::children_count(&other, &path) == 0
    }));
}

/// `Wait::until`: one deadline shared by several calls. The first spends it waiting for a
/// busy lock; the next, given the same deadline, now passed, gives up at once.
#[test]
fn one_deadline_bounds_several_calls() {
    let path = common::lock_path("one_deadline_for_several_calls");
    let other = common::client();
    let holder = DistributedMutex::new(&other, &path).unwrap();
    let guard = holder.lock().unwrap();
    let client = common::client();
    let mutex = DistributedMutex::new(&client, &path).unwrap();
    let deadline = Instant::now() + Duration::from_millis(500);
    let budget = Wait::until(deadline);
    assert!(mutex.lock_with(budget.clone()).unwrap().is_none());
    let first = Instant::now();
    assert!(first >= deadline, "returned {:?} early", deadline - first);
    assert!(
        first - deadline < Duration::from_secs(2),
        "{:?} late",
        first - deadline
    );
    let runtime = common::two_worker_runtime();
    let again = runtime.block_on(mutex.lock_with_async(budget)).unwrap();
    assert!(again.is_none(), "the lock was busy");
    // A correctness bound, not a speed figure: the call only tries.
    assert!(
        first.elapsed() < Duration::from_secs(2),
        "{:?}",
        first.elapsed()
    );
    drop(guard);
    assert!(common::eventually(Duration::from_secs(15), || {
        common::children_count(&other, &path) == 0
    }));
}
