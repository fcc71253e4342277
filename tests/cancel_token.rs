//! `CancelToken::cancelled()`: a `Send` future that any executor can await, ready once the
//! token is cancelled (at once if it already is), woken promptly by a cancel from another
//! thread. No server needed.

use std::future::Future;
use std::thread;
use std::time::{Duration, Instant};

use zklock::CancelToken;

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
