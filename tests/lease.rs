//! The holder's lease, judged at call time: a process frozen past its session never reads
//! "held" after another process acquired, a healthy holder never flaps, and the time left is
//! reported. Real server, real SIGSTOP/SIGCONT, real blackholes through the loopback proxy.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::proxy::Proxy;
use zklock::{DistributedMutex, LockState};

/// CLOCK_MONOTONIC in nanoseconds: comparable across processes on this machine, and it keeps
/// running while a process is stopped.
fn monotonic_ns() -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0);
    i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec)
}

fn signal(child: &Child, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {sig}");
}

/// Holds `LOCK` with a 2 s session and prints `<monotonic ns> <is_held>` every millisecond,
/// the time taken *before* asking, until killed.
#[test]
#[ignore = "run by frozen_holder tests as a separate process"]
fn worker_report_is_held() {
    let path = std::env::var("LOCK").unwrap();
    let client = common::client_with(Duration::from_secs(2));
    let mutex = DistributedMutex::new(&client, &path).unwrap();
    let guard = mutex.lock().unwrap();
    println!("acquired");
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let at = monotonic_ns();
        println!("{at} {}", guard.is_held());
        thread::sleep(Duration::from_millis(1));
    }
}

/// Freezes a holder past its session, lets another process acquire, resumes the holder, and
/// checks that none of its `is_held()` answers stamped after the other acquisition was true.
fn frozen_holder_never_reads_held_after_the_next_holder_acquired(via: Option<&Proxy>) {
    let path = common::lock_path("frozen");
    let mut vars = vec![("LOCK", path.clone())];
    if let Some(proxy) = via {
        vars.push(("ZK_CONNECT", proxy.connect_string()));
    }
    let mut child = common::spawn_worker("worker_report_is_held", &vars);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // The test harness prints its own lines first.
    assert!(
        lines
            .by_ref()
            .map_while(Result::ok)
            .any(|l| l.ends_with("acquired")),
        "the holder never acquired"
    );
    let answers = Arc::new(Mutex::new(Vec::<(i128, bool)>::new()));
    let reader = {
        let answers = answers.clone();
        thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if let Some((Ok(at), held)) = line.split_once(' ').map(|(a, h)| (a.parse(), h)) {
                    answers.lock().unwrap().push((at, held == "true"));
                }
            }
        })
    };
    thread::sleep(Duration::from_millis(200));
    signal(&child, "-STOP");

    let other = common::client();
    let other_mutex = DistributedMutex::new(&other, &path).unwrap();
    let guard = other_mutex.lock().unwrap();
    let acquired_at = monotonic_ns();
    thread::sleep(Duration::from_millis(300));
    signal(&child, "-CONT");
    thread::sleep(Duration::from_millis(1500));
    child.kill().unwrap();
    child.wait().unwrap();
    reader.join().unwrap();
    drop(guard);

    let answers = answers.lock().unwrap();
    let after: Vec<_> = answers.iter().filter(|(at, _)| *at > acquired_at).collect();
    assert!(
        after.len() > 100,
        "the resumed holder answered only {} times after the hand-over",
        after.len()
    );
    let stale = after.iter().filter(|(_, held)| *held).count();
    assert_eq!(
        stale,
        0,
        "the resumed holder read is_held() == true {stale} times after another process \
         acquired (first at +{} µs)",
        after
            .iter()
            .find(|(_, held)| *held)
            .map_or(0, |(at, _)| (at - acquired_at) / 1000)
    );
}

#[test]
fn frozen_holder_never_reads_held_after_the_next_holder_acquired_directly() {
    frozen_holder_never_reads_held_after_the_next_holder_acquired(None);
}

#[test]
fn frozen_holder_never_reads_held_after_the_next_holder_acquired_through_a_proxy() {
    let proxy = Proxy::start(&common::connect_string());
    frozen_holder_never_reads_held_after_the_next_holder_acquired(Some(&proxy));
}

#[test]
fn lease_remaining_shrinks_while_blackholed_and_comes_back_with_the_server() {
    let proxy = Proxy::start(&common::connect_string());
    let timeout = Duration::from_secs(4);
    let client = common::client_via(&proxy, timeout);
    let mutex = DistributedMutex::new(&client, &common::lock_path("lease-left")).unwrap();
    let guard = mutex.lock().unwrap();
    let fresh = guard.lease_remaining().expect("a fresh hold has a lease");
    assert!(
        !fresh.is_zero() && fresh < client.session_timeout(),
        "{fresh:?}"
    );

    proxy.blackhole(true);
    let blackholed = Instant::now();
    thread::sleep(Duration::from_millis(500));
    let later = guard.lease_remaining();
    assert!(
        later.is_none_or(|left| left < fresh),
        "the lease did not shrink: {fresh:?} then {later:?}"
    );
    assert!(
        common::eventually(timeout, || guard.lease_remaining().is_none()),
        "the lease never ran out while blackholed"
    );
    assert_ne!(guard.state(), LockState::Held);
    // The session itself outlives the lease: heal before it expires, and an answer from the
    // server brings the lock back.
    assert!(blackholed.elapsed() < Duration::from_secs(3));
    proxy.blackhole(false);
    assert!(
        common::eventually(Duration::from_secs(10), || guard
            .lease_remaining()
            .is_some()),
        "the lease never came back after the connection did"
    );
    assert!(guard.is_held());
    guard.unlock().unwrap();
}

#[test]
fn a_healthy_loaded_holder_never_reads_suspended() {
    let client = common::client();
    let mutex = DistributedMutex::new(&client, &common::lock_path("healthy")).unwrap();
    let guard = mutex.lock().unwrap();
    let stop = AtomicBool::new(false);
    let (mut samples, mut suspended) = (0u64, Vec::new());
    thread::scope(|s| {
        // Load on the same session: other locks taken and released as fast as they go.
        for _ in 0..3 {
            s.spawn(|| {
                let other = DistributedMutex::new(&client, &common::lock_path("load")).unwrap();
                while !stop.load(Ordering::SeqCst) {
                    drop(other.lock().unwrap());
                }
            });
        }
        let end = Instant::now() + Duration::from_secs(20);
        while Instant::now() < end {
            let state = guard.state();
            samples += 1;
            if state != LockState::Held {
                suspended.push(state);
            }
            thread::sleep(Duration::from_millis(5));
        }
        stop.store(true, Ordering::SeqCst);
    });
    assert!(samples > 1000, "only {samples} samples");
    assert!(
        suspended.is_empty(),
        "a healthy holder read {} non-Held states in {samples} samples: {:?}",
        suspended.len(),
        &suspended[..suspended.len().min(5)]
    );
    guard.unlock().unwrap();
}
