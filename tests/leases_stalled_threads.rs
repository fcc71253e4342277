//! A client whose network threads stall, as they would behind a blocking call: zklock's runtime
//! thread (`zklock-runtime`: keepalives, watches) and the session's I/O thread (`zklock-io`:
//! replies, pings) stop, while the caller's threads and the client's state thread run on. The
//! lease, judged on the caller's clock, must turn a held lock `Suspended` before the server can
//! give it away, and the state thread must say so without waiting for the stalled threads.
//!
//! The threads are stalled from outside, through the public API only: a signal sent to each of
//! them runs a handler, on that thread, that sleeps until the stall is over. (These tests were
//! unit tests driving a stall hook inside the crate; they need a real server, so they live
//! here.) The runtime thread is one per process: the tests of this file stall it one at a
//! time, and the next holder of the lock test runs in a process of its own.

mod common;

use std::io::{BufRead, BufReader, Lines};
use std::process::ChildStdout;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use zklock::client::SessionState;
use zklock::{Client, DistributedMutex, LockState};

/// The threads a stall holds up.
const NETWORK_THREADS: [&str; 2] = ["zklock-runtime", "zklock-io"];

/// The runtime thread is shared by every client of the process: one stall at a time.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static STALLS: Mutex<()> = Mutex::new(());
    STALLS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Stalls threads of this process by name, with a signal whose handler sleeps on them.
mod stall {
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::sync::Once;
    use std::time::Duration;

    /// Until when (CLOCK_MONOTONIC, ns) a signalled thread sleeps.
    static UNTIL_NS: AtomicI64 = AtomicI64::new(0);

    /// CLOCK_MONOTONIC in nanoseconds: comparable across processes on this machine, and
    /// async-signal-safe to read.
    pub fn monotonic_ns() -> i64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec for the call to fill.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        assert_eq!(rc, 0);
        ts.tv_sec * 1_000_000_000 + ts.tv_nsec
    }

    /// The handler: sleeps, on the signalled thread, until [`UNTIL_NS`]. Only
    /// async-signal-safe calls (clock_gettime, nanosleep).
    extern "C" fn hold(_: libc::c_int) {
        loop {
            let left = UNTIL_NS.load(Ordering::SeqCst) - monotonic_ns();
            if left <= 0 {
                return;
            }
            let nap = libc::timespec {
                tv_sec: left / 1_000_000_000,
                tv_nsec: left % 1_000_000_000,
            };
            // SAFETY: nanosleep with a valid request and no remainder wanted.
            unsafe { libc::nanosleep(&nap, std::ptr::null_mut()) };
        }
    }

    fn install() {
        static INSTALLED: Once = Once::new();
        INSTALLED.call_once(|| {
            // SAFETY: a zeroed sigaction with a handler of the right signature and an empty
            // mask is valid; SA_RESTART lets interrupted calls resume where the system allows.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = hold as extern "C" fn(libc::c_int) as usize;
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                assert_eq!(
                    libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()),
                    0
                );
            }
        });
    }

    /// The ids of this process's threads named one of `names`.
    pub fn threads_named(names: &[&str]) -> Vec<libc::pid_t> {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|task| {
                let task = task.ok()?;
                let comm = std::fs::read_to_string(task.path().join("comm")).ok()?;
                names
                    .contains(&comm.trim_end())
                    .then(|| task.file_name().to_str()?.parse().ok())?
            })
            .collect()
    }

    /// Holds up every thread of this process named one of `names` for `stall`, from now.
    /// Returns how many were stalled.
    pub fn threads(names: &[&str], stall: Duration) -> usize {
        install();
        UNTIL_NS.store(monotonic_ns() + stall.as_nanos() as i64, Ordering::SeqCst);
        let tids = threads_named(names);
        for &tid in &tids {
            // SAFETY: tgkill with this process's id and one of its thread ids.
            let rc = unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGUSR1) };
            assert_eq!(rc, 0, "tgkill {tid}");
        }
        tids.len()
    }
}

/// Stalls zklock's network threads for `stall`; they must exist (one runtime thread and at
/// least one session's I/O thread).
fn stall_network(stall: Duration) {
    // Each must be there and named before it is signalled: a thread of a client that was just
    // made (or of the shared runtime, restarted when another test dropped the last client)
    // may not be yet.
    let missing = || -> Vec<&str> {
        NETWORK_THREADS
            .iter()
            .copied()
            .filter(|name| stall::threads_named(&[name]).is_empty())
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !missing().is_empty() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    assert!(
        missing().is_empty(),
        "no zklock thread named {:?}",
        missing()
    );
    let stalled = stall::threads(&NETWORK_THREADS, stall);
    assert!(stalled >= 2, "only {stalled} zklock network threads found");
}

fn connect(timeout: Duration) -> Client {
    common::client_with(timeout)
}

/// The next holder of `LOCK`, in a process of its own (this one's runtime thread is about to
/// stall): connects with a 10 s session, says so, queues, and prints the CLOCK_MONOTONIC time
/// it acquired at; holds until killed.
#[test]
#[ignore = "run by a_holder_whose_runtime_thread_stalls_knows_before_the_next_holder_acquires"]
fn worker_next_holder() {
    let path = std::env::var("LOCK").unwrap();
    let client = connect(Duration::from_secs(10));
    let mutex = DistributedMutex::new(&client, &path).unwrap();
    println!("connected");
    let guard = mutex.lock().unwrap();
    println!("acquired {}", stall::monotonic_ns());
    thread::sleep(Duration::from_secs(60));
    drop(guard);
}

/// What follows `marker` in the next line of `lines` that has it (the harness prints lines of
/// its own, and the start of the first line the worker prints).
fn after(lines: &mut Lines<BufReader<ChildStdout>>, marker: &str) -> String {
    lines
        .map_while(Result::ok)
        .find_map(|l| Some(l[l.find(marker)? + marker.len()..].to_owned()))
        .unwrap_or_else(|| panic!("the worker never printed {marker:?}"))
}

#[test]
fn a_holder_whose_runtime_thread_stalls_knows_before_the_next_holder_acquires() {
    let _one = one_at_a_time();
    let path = common::lock_path("stall");
    let a = connect(Duration::from_secs(2));
    let a_mutex = DistributedMutex::new(&a, &path).unwrap();
    let a_guard = a_mutex.lock().unwrap();
    assert!(a_guard.is_held()); // Also sets the own-node watch before anything stalls.

    let mut b = common::spawn_worker("worker_next_holder", &[("LOCK", path.clone())]);
    let mut lines = BufReader::new(b.stdout.take().unwrap()).lines();
    after(&mut lines, "connected");
    assert!(
        common::eventually(Duration::from_secs(10), || a_mutex
            .contenders()
            .is_ok_and(|queue| queue.len() == 2)),
        "the next holder never queued"
    );

    let stall = Duration::from_secs(8);
    let (done, samples) = (AtomicBool::new(false), Mutex::new(Vec::new()));
    let (stalled_at, b_acquired) = thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                // The time is taken before the question, so a late answer cannot hide.
                let at = stall::monotonic_ns();
                samples.lock().unwrap().push((at, a_guard.state()));
                thread::sleep(Duration::from_millis(2));
            }
        });
        let stalled_at = stall::monotonic_ns();
        stall_network(stall);
        let acquired: i64 = after(&mut lines, "acquired ").trim().parse().unwrap();
        // Keep asking the stalled holder for a while after the hand-over.
        thread::sleep(Duration::from_millis(500));
        done.store(true, Ordering::SeqCst);
        (stalled_at, acquired)
    });
    b.kill().unwrap();
    b.wait().unwrap();
    assert!(
        b_acquired < stalled_at + stall.as_nanos() as i64,
        "the next holder only acquired after the stall ended: nothing was tested"
    );
    let samples = samples.into_inner().unwrap();
    let held_late = samples
        .iter()
        .filter(|(at, state)| *at >= b_acquired && *state == LockState::Held)
        .count();
    let first_not_held = samples
        .iter()
        .find(|(_, state)| *state != LockState::Held)
        .map(|(at, _)| *at);
    assert_eq!(
        held_late, 0,
        "the stalled holder still read Held after the next holder acquired"
    );
    assert!(
        first_not_held.is_some_and(|at| at < b_acquired),
        "the stalled holder never noticed before the next holder acquired"
    );
}

#[test]
fn a_stalled_runtime_thread_reads_suspended_on_the_callers_clock_and_is_told() {
    let _one = one_at_a_time();
    common::init_logging();
    let (changes, told) = mpsc::channel();
    let client = Client::builder(&common::connect_string())
        .session_timeout(Duration::from_secs(4))
        .on_state_change(move |change| {
            let _ = changes.send((Instant::now(), change.clone()));
        })
        .connect()
        .expect("ZooKeeper must be running: scripts/start-zk.sh");
    // Longer than the lease can run (2/3 of 4 s), shorter than the server's patience.
    let stall = Duration::from_secs(3);
    let stalled = Instant::now();
    stall_network(stall);
    let state = client.wait_state_change(SessionState::Connected, Duration::from_secs(20));
    let woke = stalled.elapsed();
    assert_eq!(state, SessionState::Suspended);
    assert!(
        woke < stall,
        "woke after {woke:?}, when the runtime ran again"
    );
    assert_eq!(client.state(), SessionState::Suspended);
    let (at, change) = told.recv_timeout(Duration::from_secs(20)).unwrap();
    assert_eq!(change.to, SessionState::Suspended);
    assert!(
        at < stalled + stall,
        "told only when the runtime thread ran again"
    );
    // Once it runs again, the session answers (or, on a very slow machine, has expired).
    let after = client.wait_state_change(SessionState::Suspended, Duration::from_secs(20));
    assert!(
        matches!(after, SessionState::Connected | SessionState::Expired),
        "{after:?}"
    );
}

/// A lease running out under a held lock is counted once, as `lease` (with a recorder of the
/// test thread's own: `state()` records on the caller's thread).
#[cfg(feature = "metrics")]
#[test]
fn a_lease_run_out_under_a_held_lock_is_one_loss_by_lease() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    let _one = one_at_a_time();
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let client = connect(Duration::from_secs(4));
        let path = common::lock_path("lease-loss");
        let guard = DistributedMutex::new(&client, &path)
            .unwrap()
            .lock()
            .unwrap();
        assert!(guard.is_held()); // Sets the own-node watch before anything stalls.
        stall_network(Duration::from_secs(3));
        let deadline = Instant::now() + Duration::from_secs(10);
        while guard.state() == LockState::Held && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        for _ in 0..10 {
            let _ = guard.state();
        }
    });
    let lost: Vec<_> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| key.key().name() == zklock::metrics::LOCKS_LOST)
        .map(|(key, _, _, value)| {
            (
                key.key()
                    .labels()
                    .map(|l| l.value().to_owned())
                    .collect::<Vec<_>>(),
                value,
            )
        })
        .collect();
    assert_eq!(
        lost,
        vec![(vec!["lease".to_owned()], DebugValue::Counter(1))]
    );
}
