//! `Client::close_on_signals` (feature `signals`): a holder stopped by SIGTERM hands its lock
//! over at once, not after its session timeout. The holder is a separate process (this test
//! binary again, running an ignored worker test).
#![cfg(feature = "signals")]

mod common;

use std::io::{BufRead as _, BufReader};
use std::os::unix::process::ExitStatusExt as _;
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use zklock::DistributedMutex;

/// Holds `ZKLOCK_TEST_PATH` (session timeout 4 s), with the helper if `ZKLOCK_TEST_HELPER` is
/// set, says "held", and waits to be killed.
#[test]
#[ignore = "worker process of the tests below"]
fn worker_hold_until_signalled() {
    let client = common::client();
    let _shutdown =
        std::env::var_os("ZKLOCK_TEST_HELPER").map(|_| client.close_on_signals().unwrap());
    let path = std::env::var("ZKLOCK_TEST_PATH").unwrap();
    let _guard = DistributedMutex::new(&client, &path)
        .unwrap()
        .lock()
        .unwrap();
    println!("held");
    std::thread::sleep(Duration::from_secs(60));
}

/// Starts a holder of `path`, waits until it holds, SIGTERMs it; returns whether the lock
/// could be taken within one second of the signal, and the holder's exit status.
fn sigterm_holder(path: &str, helper: bool) -> (bool, std::process::ExitStatus) {
    let mut vars = vec![("ZKLOCK_TEST_PATH", path.to_owned())];
    if helper {
        vars.push(("ZKLOCK_TEST_HELPER", "1".to_owned()));
    }
    let mut holder = common::spawn_worker("worker_hold_until_signalled", &vars);
    // The test harness writes to stdout too: look for the worker's own line.
    let mut lines = BufReader::new(holder.stdout.take().unwrap()).lines();
    assert!(
        lines.any(|line| line.is_ok_and(|l| l.ends_with("held"))),
        "the holder never held"
    );
    let client = common::client();
    let mutex = DistributedMutex::new(&client, path).unwrap();
    kill(Pid::from_raw(holder.id() as i32), Signal::SIGTERM).unwrap();
    let acquired = mutex
        .lock_timeout(Duration::from_secs(1))
        .unwrap()
        .is_some();
    // The holder may still be finishing its close (the session's threads end after the
    // server confirmed it): give it a moment to end by its signal before killing it.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while holder.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = holder.kill();
    (acquired, holder.wait().unwrap())
}

#[test]
fn sigterm_with_close_on_signals_hands_the_lock_over_at_once() {
    let (acquired, status) = sigterm_holder(&common::lock_path("sigterm-helper"), true);
    assert!(acquired, "the next holder waited more than 1 s");
    // Ended by the signal, as without the helper.
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
}

#[test]
fn sigterm_without_the_helper_leaves_the_lock_to_the_session_timeout() {
    // What the helper changes: without it, the node outlives the process until the server
    // expires the session (4 s here).
    let (acquired, status) = sigterm_holder(&common::lock_path("sigterm-plain"), false);
    assert!(!acquired, "released within 1 s without the helper");
    assert_eq!(status.signal(), Some(libc::SIGTERM), "{status:?}");
}
