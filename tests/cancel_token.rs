//! `CancelToken::cancelled()`: a `Send` future that any executor can await, ready once the
//! token is cancelled (at once if it already is), woken promptly by a cancel from another
//! thread; on the test server through a silent connection, the one token that stops a
//! service's blocking calls also stops its async acquisition, leaving nothing behind; one
//! deadline (`Wait::until`) shared by several calls; and the waits other than acquisitions
//! (`unlock_with`, `Client::close_with`, `Client::wait_state_change_with` and their async
//! forms), which stop waiting on a cancel or a deadline while the release or the close they
//! wait for goes on.

mod common;

use std::future::Future;
use std::thread;
use std::time::{Duration, Instant};

use zklock::client::SessionState;
use zklock::{CancelToken, DistributedMutex, Error, Wait};

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

/// Compiles only if the future can move to another thread.
fn assert_send<F: Future + Send>(_: &F) {}

/// A correctness bound, not a speed figure: the call returned after its cancel, and within a
/// second of it where the wait it cut short would have taken the session timeout.
fn returned_promptly(returned: Instant, cancelled_at: Instant) {
    assert!(returned >= cancelled_at, "returned before the cancel");
    assert!(
        returned - cancelled_at < Duration::from_secs(1),
        "{:?}",
        returned - cancelled_at
    );
}

/// Cancels `token` from another thread after `after`; joined, it tells when.
fn cancel_after(token: &CancelToken, after: Duration) -> thread::JoinHandle<Instant> {
    let token = token.clone();
    thread::spawn(move || {
        thread::sleep(after);
        let at = Instant::now();
        token.cancel();
        at
    })
}

/// `unlock_with` on a connection whose requests the server does not hear yet: the cancel ends
/// the wait at once with `Cancelled`, and the release goes on in the background (the node goes
/// once the requests pass, long before the session could expire and take it).
#[test]
fn a_cancelled_unlock_returns_at_once_and_the_release_goes_on() {
    let path = common::lock_path("unlock_cancelled");
    let observer = common::client();
    let proxy = common::proxy::Proxy::start(&common::connect_string());
    let client = common::client_via(&proxy, Duration::from_secs(10));
    let guard = DistributedMutex::new(&client, &path)
        .unwrap()
        .lock()
        .unwrap();
    // Watches our node: the release first stops that watch, a request more to cut short.
    assert!(guard.is_held());
    let session = client.session_id();
    proxy.hold_requests(true);
    let token = CancelToken::new();
    let canceller = cancel_after(&token, Duration::from_millis(300));
    let outcome = guard.unlock_with(Wait::forever().cancel_on(&token));
    let returned = Instant::now();
    let cancelled_at = canceller.join().unwrap();
    assert!(matches!(outcome, Err(Error::Cancelled)), "{outcome:?}");
    returned_promptly(returned, cancelled_at);
    // Nothing reached the server yet: the node is there until the requests pass.
    assert_eq!(common::children_count(&observer, &path), 1);
    proxy.hold_requests(false);
    assert!(
        common::eventually(Duration::from_secs(5), || common::children_count(
            &observer, &path
        ) == 0),
        "the node of a cancelled unlock is still there"
    );
    // Released, not expired: the session lives on.
    assert_eq!(client.session_id(), session);
    assert_eq!(client.state(), SessionState::Connected);
    let again = DistributedMutex::new(&observer, &path).unwrap();
    assert!(again.try_lock().unwrap().is_some(), "the lock is free");
}

/// `unlock_with_async` given a deadline, on the same held connection: `OutcomeUnknown` at
/// the deadline, as `unlock_timeout`, and the release goes on.
#[test]
fn an_async_unlock_past_its_deadline_reports_the_outcome_unknown_and_releases() {
    let path = common::lock_path("unlock_async_deadline");
    let observer = common::client();
    let proxy = common::proxy::Proxy::start(&common::connect_string());
    let client = common::client_via(&proxy, Duration::from_secs(10));
    let guard = DistributedMutex::new(&client, &path)
        .unwrap()
        .lock()
        .unwrap();
    proxy.hold_requests(true);
    let deadline = Instant::now() + Duration::from_millis(300);
    let runtime = common::two_worker_runtime();
    let unlocking = assert_send_static(guard.unlock_with_async(Wait::until(deadline)));
    let outcome = runtime.block_on(unlocking);
    let returned = Instant::now();
    assert!(
        matches!(outcome, Err(Error::OutcomeUnknown { .. })),
        "{outcome:?}"
    );
    assert!(
        returned >= deadline,
        "returned {:?} early",
        deadline - returned
    );
    assert!(
        returned - deadline < Duration::from_secs(1),
        "{:?} late",
        returned - deadline
    );
    proxy.hold_requests(false);
    assert!(
        common::eventually(Duration::from_secs(5), || common::children_count(
            &observer, &path
        ) == 0),
        "the node of an unlock past its deadline is still there"
    );
    assert_eq!(client.state(), SessionState::Connected);
}

/// `close_with` given a deadline that has passed: it returns at once, the client closed, and
/// the server ends the session all the same (its node goes long before the session timeout).
#[test]
fn a_close_with_a_past_deadline_returns_and_closes_all_the_same() {
    let path = common::lock_path("close_past_deadline");
    let observer = common::client();
    let client = common::client_with(Duration::from_secs(10));
    let guard = DistributedMutex::new(&client, &path)
        .unwrap()
        .lock()
        .unwrap();
    let past = Instant::now();
    thread::sleep(Duration::from_millis(5));
    let started = Instant::now();
    let outcome = client.close_with(Wait::until(past));
    // A correctness bound, not a speed figure: nothing is waited for.
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert!(
        matches!(outcome, Ok(()) | Err(Error::ConnectionLoss { .. })),
        "{outcome:?}"
    );
    assert!(client.is_closed());
    assert!(matches!(client.session_timeout(), d if d.is_zero()));
    assert!(
        common::eventually(Duration::from_secs(5), || common::children_count(
            &observer, &path
        ) == 0),
        "the closed session's node is still there"
    );
    drop(guard);
}

/// `close_with` cancelled while the server does not hear the close yet: `Cancelled` at once,
/// the client closed; the close goes on in the background, and a later `close` reports its
/// outcome.
#[test]
fn a_cancelled_close_returns_at_once_and_the_close_goes_on() {
    let path = common::lock_path("close_cancelled");
    let observer = common::client();
    let proxy = common::proxy::Proxy::start(&common::connect_string());
    let client = common::client_via(&proxy, Duration::from_secs(10));
    let _guard = DistributedMutex::new(&client, &path)
        .unwrap()
        .lock()
        .unwrap();
    proxy.hold_requests(true);
    let token = CancelToken::new();
    let canceller = cancel_after(&token, Duration::from_millis(200));
    let outcome = client.close_with(Wait::forever().cancel_on(&token));
    let returned = Instant::now();
    let cancelled_at = canceller.join().unwrap();
    assert!(matches!(outcome, Err(Error::Cancelled)), "{outcome:?}");
    returned_promptly(returned, cancelled_at);
    assert!(client.is_closed());
    assert_eq!(common::children_count(&observer, &path), 1);
    proxy.hold_requests(false);
    assert!(
        common::eventually(Duration::from_secs(5), || common::children_count(
            &observer, &path
        ) == 0),
        "the node of a client whose close was cancelled is still there"
    );
    // The close confirmed in the background: that is what a later close reports.
    assert!(client.close().is_ok());
}

/// `wait_state_change_with` and its async form, on a session that does not change: they
/// return the state unchanged at the deadline, or at once after a cancel, and still report a
/// change (the close).
#[test]
fn a_state_change_wait_ends_at_its_deadline_or_its_cancel() {
    let client = common::client();
    let seen = client.state();
    assert_eq!(seen, SessionState::Connected);

    let deadline = Instant::now() + Duration::from_millis(300);
    assert_eq!(
        client.wait_state_change_with(seen, Wait::until(deadline)),
        seen
    );
    let returned = Instant::now();
    assert!(
        returned >= deadline,
        "returned {:?} early",
        deadline - returned
    );
    assert!(
        returned - deadline < Duration::from_secs(1),
        "{:?} late",
        returned - deadline
    );

    let token = CancelToken::new();
    let canceller = cancel_after(&token, Duration::from_millis(200));
    let now = client.wait_state_change_with(seen, Wait::forever().cancel_on(&token));
    let returned = Instant::now();
    let cancelled_at = canceller.join().unwrap();
    assert_eq!(now, seen);
    returned_promptly(returned, cancelled_at);

    // Async: a cancelled token ends it at once; a deadline on zklock's own timer.
    let cancelled = Wait::forever().cancel_on(&token);
    let now = futures::executor::block_on(client.wait_state_change_with_async(seen, cancelled));
    assert_eq!(now, seen);
    let deadline = Instant::now() + Duration::from_millis(300);
    let waiting = client.wait_state_change_with_async(seen, Wait::until(deadline));
    assert_eq!(futures::executor::block_on(waiting), seen);
    let returned = Instant::now();
    assert!(
        returned >= deadline,
        "returned {:?} early",
        deadline - returned
    );
    assert!(
        returned - deadline < Duration::from_secs(1),
        "{:?} late",
        returned - deadline
    );

    // Both async forms of the client's waits can move to another thread.
    assert_send(&client.wait_state_change_with_async(seen, Wait::forever()));
    assert_send(&client.close_with_async(Wait::forever()));

    // A change still ends a wait whose token is never cancelled.
    let closer = thread::spawn({
        let client = client.clone();
        move || {
            thread::sleep(Duration::from_millis(200));
            client.close()
        }
    });
    let live = CancelToken::new();
    let limit = Wait::timeout(Duration::from_secs(10)).cancel_on(&live);
    assert_eq!(
        client.wait_state_change_with(seen, limit),
        SessionState::Closed
    );
    closer.join().unwrap().unwrap();
}
