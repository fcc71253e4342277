//! Observability against real servers: the session state read through
//! `Client::state`, waited for with `wait_state_change` and told to a listener, across a
//! blackhole, a server restart, an expiry and `close()`; connect errors that say what each host
//! did and how long connecting took; and the metrics, scraped over HTTP from the example's
//! Prometheus exporter and counted with a debugging recorder after known work.
//!
//! The metrics tests run their work in a child process (this test binary again, running an
//! `#[ignore]`d worker): a process has one global recorder, and the other tests of this binary
//! would add to its counts.

mod common;

use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::proxy::Proxy;
use zklock::client::{SessionState, StateChange};
use zklock::error::ConnectCause;
use zklock::{Client, DistributedMutex, Error};

/// A client through `proxy` whose state changes arrive on the returned channel.
fn observed_client(
    connect: &str,
    session_timeout: Duration,
) -> (Client, mpsc::Receiver<StateChange>) {
    common::init_logging();
    let (changes, received) = mpsc::channel();
    let client = Client::builder(connect)
        .session_timeout(session_timeout)
        .on_state_change(move |change| {
            let _ = changes.send(change.clone());
        })
        .connect()
        .unwrap();
    (client, received)
}

/// Waits (up to `limit`) until `client` leaves `from`, and returns where it went.
fn next_state(client: &Client, from: SessionState, limit: Duration) -> SessionState {
    let deadline = Instant::now() + limit;
    let mut now = client.wait_state_change(from, limit);
    // A change to a state we passed through on the way (e.g. Suspended on the way to Expired)
    // is a change too; the caller says what it expects.
    while now == from && Instant::now() < deadline {
        now = client.wait_state_change(from, deadline - Instant::now());
    }
    now
}

/// The next change told to the listener, within `limit`.
fn told(changes: &mpsc::Receiver<StateChange>, limit: Duration) -> StateChange {
    changes
        .recv_timeout(limit)
        .expect("the listener was told no change in time")
}

/// Changes told until one reaches `to` (skipping intermediate ones), within `limit`.
fn told_until(
    changes: &mpsc::Receiver<StateChange>,
    to: SessionState,
    limit: Duration,
) -> Vec<StateChange> {
    let deadline = Instant::now() + limit;
    let mut seen = Vec::new();
    while let Ok(change) = changes.recv_timeout(deadline.saturating_duration_since(Instant::now()))
    {
        let done = change.to == to;
        seen.push(change);
        if done {
            return seen;
        }
    }
    panic!("never told of a change to {to:?}; told {seen:?}");
}

#[test]
fn a_blackhole_suspends_the_session_and_its_end_brings_it_back() {
    let proxy = Proxy::start(&common::connect_string());
    let (client, changes) = observed_client(&proxy.connect_string(), Duration::from_secs(8));
    assert_eq!(client.state(), SessionState::Connected);
    let session = client.session_id();
    let mutex = DistributedMutex::new(&client, &common::lock_path("obs-blackhole")).unwrap();
    let guard = mutex.lock().unwrap();

    proxy.blackhole(true);
    let cut = Instant::now();
    assert_eq!(
        next_state(&client, SessionState::Connected, Duration::from_secs(20)),
        SessionState::Suspended
    );
    let noticed = cut.elapsed();
    assert_eq!(client.state(), SessionState::Suspended);
    assert!(!guard.is_held());
    let change = told(&changes, Duration::from_secs(10));
    assert_eq!(
        (change.from, change.to, change.session_id),
        (SessionState::Connected, SessionState::Suspended, session)
    );

    proxy.blackhole(false);
    assert_eq!(
        next_state(&client, SessionState::Suspended, Duration::from_secs(20)),
        SessionState::Connected,
        "suspended {noticed:?} after the cut, never back"
    );
    assert_eq!(client.session_id(), session, "the session survived");
    assert!(guard.is_held());
    let change = told(&changes, Duration::from_secs(10));
    assert_eq!(
        (change.from, change.to, change.session_id),
        (SessionState::Suspended, SessionState::Connected, session)
    );
    assert!(change.after > Duration::ZERO, "{change:?}");
    guard.unlock().unwrap();
}

/// A standalone server of this binary's own on `port`, in `/tmp/zk-obs` (the scripts'
/// `ZK_WORKDIR`), stopped and removed when dropped.
struct OwnServer {
    port: u16,
}

impl OwnServer {
    fn start(port: u16) -> OwnServer {
        let server = OwnServer { port };
        server.script("stop-zk.sh", &["--clean"]);
        server.script("start-zk.sh", &[]);
        server
    }

    fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn script(&self, name: &str, args: &[&str]) {
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scripts")
            .join(name);
        let status = Command::new("bash")
            .arg(script)
            .args(args)
            .env("ZK_PORT", self.port.to_string())
            .env("ZK_WORKDIR", "/tmp/zk-obs")
            .env("ZK_HEAP", "128m")
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "{name} {args:?} on {} failed", self.port);
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        self.script("stop-zk.sh", &["--clean"]);
    }
}

#[test]
fn a_server_restart_suspends_the_session_and_the_same_session_comes_back() {
    let server = OwnServer::start(2431);
    // Long enough to outlast the restart (a JVM start on a busy machine).
    let (client, changes) = observed_client(&server.connect_string(), Duration::from_secs(30));
    let session = client.session_id();
    server.script("stop-zk.sh", &[]);
    assert_eq!(
        next_state(&client, SessionState::Connected, Duration::from_secs(30)),
        SessionState::Suspended
    );
    let change = told(&changes, Duration::from_secs(10));
    assert_eq!(change.to, SessionState::Suspended, "{change:?}");

    server.script("start-zk.sh", &[]);
    assert_eq!(
        next_state(&client, SessionState::Suspended, Duration::from_secs(30)),
        SessionState::Connected
    );
    assert_eq!(client.session_id(), session);
    let change = told(&changes, Duration::from_secs(10));
    assert_eq!(
        (change.from, change.to, change.session_id),
        (SessionState::Suspended, SessionState::Connected, session)
    );
    // The client works on.
    let path = common::lock_path("obs-restart");
    assert!(DistributedMutex::new(&client, &path)
        .unwrap()
        .try_lock()
        .unwrap()
        .is_some());
}

#[test]
fn an_expiry_is_told_and_the_next_call_opens_a_new_session() {
    let proxy = Proxy::start(&common::connect_string());
    let (client, changes) = observed_client(&proxy.connect_string(), Duration::from_secs(2));
    let old = client.session_id();
    let mutex = DistributedMutex::new(&client, &common::lock_path("obs-expiry")).unwrap();
    let guard = mutex.lock().unwrap();

    proxy.blackhole(true);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut state = client.state();
    while state != SessionState::Expired && Instant::now() < deadline {
        state = client.wait_state_change(state, deadline - Instant::now());
    }
    assert_eq!(state, SessionState::Expired);
    assert_eq!(guard.state(), zklock::LockState::Lost);
    let seen = told_until(&changes, SessionState::Expired, Duration::from_secs(10));
    assert_eq!(seen[0].from, SessionState::Connected, "{seen:?}");
    assert!(seen.iter().all(|c| c.session_id == old), "{seen:?}");

    // Expired stays so until a call opens a new session: waiting does not open one.
    assert_eq!(
        client.wait_state_change(SessionState::Expired, Duration::from_millis(300)),
        SessionState::Expired
    );
    proxy.blackhole(false);
    let other = DistributedMutex::new(&client, &common::lock_path("obs-expiry-after")).unwrap();
    assert!(other.try_lock().unwrap().is_some());
    assert_eq!(client.state(), SessionState::Connected);
    assert_ne!(client.session_id(), old);
    let change = told(&changes, Duration::from_secs(10));
    assert_eq!(
        (change.from, change.to, change.session_id),
        (
            SessionState::Expired,
            SessionState::Connected,
            client.session_id()
        )
    );
    drop(guard);
}

#[test]
fn close_wakes_a_waiter_tells_the_listener_and_ends_its_thread() {
    let (client, changes) = observed_client(&common::connect_string(), Duration::from_secs(4));
    let waiter = {
        let client = client.clone();
        std::thread::spawn(move || {
            let start = Instant::now();
            let state = client.wait_state_change(SessionState::Connected, Duration::from_secs(60));
            (state, start.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    client.close().unwrap();
    let (state, waited) = waiter.join().unwrap();
    assert_eq!(state, SessionState::Closed);
    assert!(waited < Duration::from_secs(10), "waited {waited:?}");
    assert_eq!(client.state(), SessionState::Closed);
    let change = told(&changes, Duration::from_secs(10));
    assert_eq!(
        (change.from, change.to),
        (SessionState::Connected, SessionState::Closed)
    );
    drop(client);
    // The listener (and with it the channel's sender) goes with its thread.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match changes.recv_timeout(Duration::from_millis(100)) {
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Ok(change) => panic!("told {change:?} after Closed"),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                assert!(Instant::now() < deadline, "the listener thread never ended")
            }
        }
    }
}

/// A loopback port where nothing listens (bound, then released).
fn dead_port() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    drop(listener);
    addr
}

#[test]
fn a_dead_port_is_named_refused_and_tried_for_the_connect_timeout_not_the_session_timeout() {
    let addr = dead_port();
    // The client crate's own connect gives up after the session timeout (1 s here); the
    // connect timeout (3 s) is what the caller asked for.
    let started = Instant::now();
    let err = Client::builder(&addr)
        .session_timeout(Duration::from_secs(1))
        .connect_timeout(Duration::from_secs(3))
        .connect()
        .unwrap_err();
    let took = started.elapsed();
    let Error::Connect {
        ref waited,
        ref hosts,
        ref timeout,
        ..
    } = err
    else {
        panic!("{err:?}");
    };
    assert_eq!(*timeout, Duration::from_secs(3));
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(8),
        "took {took:?}: {err}"
    );
    // What the message says agrees with what the caller saw.
    assert!(
        took.abs_diff(*waited) < Duration::from_millis(500),
        "took {took:?}, says {waited:?}"
    );
    assert!(err.to_string().contains(&format!("{waited:?}")), "{err}");
    assert_eq!(hosts.len(), 1);
    assert_eq!(hosts[0].host, addr);
    assert_eq!(hosts[0].cause, ConnectCause::Refused);
    assert!(err.to_string().contains("refused"), "{err}");
}

#[test]
fn failing_fast_when_every_host_refuses() {
    let (a, b) = (dead_port(), dead_port());
    let started = Instant::now();
    let err = Client::builder(&format!("{a},{b}"))
        .connect_timeout(Duration::from_secs(30))
        .fail_fast_if_refused(true)
        .connect()
        .unwrap_err();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "took {took:?}: {err}");
    let Error::Connect { ref hosts, .. } = err else {
        panic!("{err:?}");
    };
    assert_eq!(hosts.len(), 2, "{err}");
    assert!(
        hosts.iter().all(|h| h.cause == ConnectCause::Refused),
        "{err}"
    );
    assert!(err.to_string().contains("failing fast"), "{err}");

    // One host that answers keeps it trying, and connecting then works.
    let client = Client::builder(&format!("{a},{}", common::connect_string()))
        .connect_timeout(Duration::from_secs(30))
        .fail_fast_if_refused(true)
        .connect()
        .unwrap();
    assert_eq!(client.state(), SessionState::Connected);
}

#[test]
fn a_host_that_does_not_resolve_is_named_a_dns_failure() {
    let err = Client::builder("no-such-host.invalid:2181")
        .connect_timeout(Duration::from_secs(1))
        .connect()
        .unwrap_err();
    let Error::Connect { ref hosts, .. } = err else {
        panic!("{err:?}");
    };
    assert!(matches!(hosts[0].cause, ConnectCause::Dns(_)), "{err}");
    assert!(err.to_string().contains("DNS"), "{err}");
}

/// The example's code, run by the scrape test's child process.
#[cfg(feature = "metrics")]
#[path = "../examples/metrics.rs"]
#[allow(dead_code)]
mod example;

/// The metrics, from a child process each (see the module docs).
#[cfg(feature = "metrics")]
mod metrics {
    use super::*;
    use std::collections::HashMap;
    use std::io::{BufRead, BufReader, Read, Write};

    use super::example;

    /// Runs the `#[ignore]`d test `entry` of this binary as a child process with `vars`.
    fn worker(entry: &str, vars: &[(&str, String)]) -> std::process::Child {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command
            .args([
                entry,
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("ZK_CONNECT", common::connect_string())
            .stdout(Stdio::piped());
        for (k, v) in vars {
            command.env(k, v);
        }
        command.spawn().unwrap()
    }

    struct Killed(std::process::Child);

    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    #[ignore = "run by the_example_serves_prometheus_text_with_the_counts as a child process"]
    fn worker_metrics_example() {
        let path = std::env::var("LOCK").unwrap();
        let rounds = std::env::var("ROUNDS").unwrap().parse().unwrap();
        example::run(&common::connect_string(), rounds, &path, 0).unwrap();
    }

    /// The value of the sample of `name` carrying every label of `labels`.
    fn sample(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
        text.lines()
            .filter(|line| !line.starts_with('#'))
            .filter_map(|line| line.rsplit_once(' '))
            .find(|(series, _)| {
                let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
                metric == name && labels.iter().all(|l| rest.contains(l))
            })
            .map(|(_, value)| value.parse().unwrap())
    }

    #[test]
    fn the_example_serves_prometheus_text_with_the_counts() {
        let path = common::lock_path("obs-scrape");
        let rounds = 4;
        let mut child = worker(
            "metrics::worker_metrics_example",
            &[("LOCK", path.clone()), ("ROUNDS", rounds.to_string())],
        );
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // Killed however this test ends: it serves until then.
        let child = Killed(child);
        let mut address = None;
        for line in lines.by_ref().map_while(Result::ok) {
            // The test harness starts the line with the test's name.
            if let Some((_, at)) = line.split_once("metrics at http://") {
                address = at.strip_suffix("/metrics").map(str::to_owned);
            }
            if line.contains("serving") {
                break;
            }
        }
        let address = address.expect("the example printed no address");
        let mut stream = std::net::TcpStream::connect(&address).unwrap();
        write!(stream, "GET /metrics HTTP/1.1\r\nHost: {address}\r\n\r\n").unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        drop(child);
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        let text = &response;
        let path_label = format!("path=\"{path}\"");
        let mutex = [r#"recipe="mutex""#, path_label.as_str()];
        let acquired = [&mutex[..], &[r#"outcome="acquired""#]].concat();
        let busy = [&mutex[..], &[r#"outcome="busy""#]].concat();
        let expected = (rounds + 1) as f64;
        assert_eq!(
            sample(text, "zklock_acquisitions_total", &acquired),
            Some(expected),
            "{text}"
        );
        assert_eq!(
            sample(text, "zklock_acquisitions_total", &busy),
            Some(1.0),
            "{text}"
        );
        assert_eq!(
            sample(text, "zklock_acquire_wait_seconds_count", &acquired),
            Some(expected),
            "{text}"
        );
        assert!(
            sample(text, "zklock_acquire_wait_seconds_bucket", &acquired).is_some(),
            "a histogram, not a summary: {text}"
        );
        assert_eq!(
            sample(text, "zklock_hold_seconds_count", &mutex),
            Some(expected),
            "{text}"
        );
        // Held for 20 ms each at least.
        assert!(
            sample(text, "zklock_hold_seconds_sum", &mutex).unwrap() >= 0.02 * rounds as f64,
            "{text}"
        );
        assert_eq!(
            sample(text, "zklock_session_state", &[]),
            Some(1.0),
            "{text}"
        );
        // Present from the start, at zero, like every counter without a path.
        for cause in ["expired", "deleted", "lease", "closed"] {
            let cause = format!("cause=\"{cause}\"");
            assert_eq!(
                sample(text, "zklock_locks_lost_total", &[&cause]),
                Some(0.0),
                "{text}"
            );
        }
        // Present from the start, at zero, so that rates can be taken before the first one.
        assert_eq!(
            sample(text, "zklock_reconnects_total", &[]),
            Some(0.0),
            "{text}"
        );
        assert_eq!(
            sample(text, "zklock_session_expirations_total", &[]),
            Some(0.0),
            "{text}"
        );
        assert_eq!(
            sample(text, "zklock_background_releases", &[]),
            Some(0.0),
            "{text}"
        );
    }

    #[test]
    #[ignore = "run by held_waiting_and_oldest_hold_gauges_follow_the_locks as a child process"]
    fn worker_gauges() {
        let metrics = example::install().unwrap();
        let client = Client::connect(&common::connect_string()).unwrap();
        let value = |name: &str, labels: &[&str]| sample(&metrics.render(), name, labels);
        // Every series exists at zero once a client is connected (registered by its state
        // thread as it starts).
        let version = format!("version=\"{}\"", env!("CARGO_PKG_VERSION"));
        assert!(common::eventually(Duration::from_secs(10), || {
            value("zklock_info", &[&version]) == Some(1.0)
        }));
        let text = metrics.render();
        let recipes = [
            "mutex",
            "rwlock_read",
            "rwlock_write",
            "semaphore",
            "multi",
            "election",
        ];
        for recipe in recipes {
            let recipe = format!("recipe=\"{recipe}\"");
            for outcome in ["acquired", "busy", "timeout", "cancelled", "error"] {
                let outcome = format!("outcome=\"{outcome}\"");
                let labels = [recipe.as_str(), &outcome];
                assert_eq!(
                    sample(&text, "zklock_acquisitions_total", &labels),
                    Some(0.0),
                    "{text}"
                );
            }
            for gauge in [
                "zklock_locks_held",
                "zklock_waiting",
                "zklock_oldest_hold_seconds",
            ] {
                assert_eq!(
                    sample(&text, gauge, &[&recipe]),
                    Some(0.0),
                    "{gauge}: {text}"
                );
            }
        }

        let mutex = DistributedMutex::new(&client, &common::lock_path("obs-gauges")).unwrap();
        let on_mutex = [r#"recipe="mutex""#];
        let guard = mutex.lock().unwrap();
        assert_eq!(value("zklock_locks_held", &on_mutex), Some(1.0));
        std::thread::scope(|s| {
            let waiter = s.spawn(|| mutex.lock().unwrap().unlock().unwrap());
            assert!(common::eventually(Duration::from_secs(10), || {
                value("zklock_waiting", &on_mutex) == Some(1.0)
            }));
            // The age of the hold grows while it lasts, without any acquisition or release.
            assert!(common::eventually(Duration::from_secs(10), || {
                value("zklock_oldest_hold_seconds", &on_mutex).unwrap() >= 1.5
            }));
            guard.unlock().unwrap();
            waiter.join().unwrap();
        });
        assert_eq!(value("zklock_locks_held", &on_mutex), Some(0.0));
        assert_eq!(value("zklock_waiting", &on_mutex), Some(0.0));
        assert_eq!(value("zklock_oldest_hold_seconds", &on_mutex), Some(0.0));
        assert_eq!(
            value(
                "zklock_acquisitions_total",
                &[r#"recipe="mutex""#, r#"outcome="acquired""#]
            ),
            Some(2.0)
        );
        println!("GAUGES OK");
    }

    #[test]
    fn held_waiting_and_oldest_hold_gauges_follow_the_locks() {
        let child = worker("metrics::worker_gauges", &[]);
        let output = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains("GAUGES OK"),
            "the worker failed: {stdout}"
        );
    }

    /// Every metric recorded, summed over snapshots (the debugging recorder's snapshot resets
    /// what it reports; increments and decrements add up the same either way), keyed by name
    /// and sorted `label=value` pairs. Histograms count their samples.
    #[derive(Default)]
    struct Totals(HashMap<(String, Vec<String>), f64>);

    impl Totals {
        fn add(&mut self, snapshotter: &metrics_util::debugging::Snapshotter) {
            use metrics_util::debugging::DebugValue;
            for (key, _, _, value) in snapshotter.snapshot().into_vec() {
                let key = key.key();
                let mut labels: Vec<String> = key
                    .labels()
                    .map(|l| format!("{}={}", l.key(), l.value()))
                    .collect();
                labels.sort();
                let value = match value {
                    DebugValue::Counter(n) => n as f64,
                    DebugValue::Gauge(g) => g.into_inner(),
                    DebugValue::Histogram(samples) => samples.len() as f64,
                };
                *self.0.entry((key.name().to_owned(), labels)).or_default() += value;
            }
        }

        /// The total of `name` over every series carrying all of `labels` (`key=value`).
        fn get(&self, name: &str, labels: &[&str]) -> f64 {
            self.0
                .iter()
                .filter(|((n, ls), _)| {
                    n == name && labels.iter().all(|l| ls.iter().any(|x| x == l))
                })
                .map(|(_, v)| v)
                .sum()
        }
    }

    #[test]
    #[ignore = "run by a_recorder_counts_known_work as a child process"]
    fn worker_count_known_work() {
        use zklock::{
            CancelToken, DistributedRwLock, LeaderElection, LockState, MultiLock, Semaphore,
        };
        let recorder = metrics_util::debugging::DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder.install().unwrap();
        let mut totals = Totals::default();
        common::init_logging();
        let connect = common::connect_string();
        let labelled = |timeout| {
            Client::builder(&connect)
                .session_timeout(timeout)
                .metrics_path_label(true)
                .connect()
                .unwrap()
        };
        let a = labelled(Duration::from_secs(10));
        let b = labelled(Duration::from_secs(10));
        let path = common::lock_path("obs-count");
        let (ma, mb) = (
            DistributedMutex::new(&a, &path).unwrap(),
            DistributedMutex::new(&b, &path).unwrap(),
        );
        for _ in 0..3 {
            ma.lock().unwrap().unlock().unwrap();
        }
        let held = ma.lock().unwrap();
        assert!(mb.try_lock().unwrap().is_none());
        assert!(mb
            .lock_timeout(Duration::from_millis(200))
            .unwrap()
            .is_none());
        let cancelled = CancelToken::new();
        cancelled.cancel();
        assert!(matches!(
            mb.lock_with(zklock::Wait::forever().cancel_on(&cancelled))
                .map(|g| g.expect("no timeout was given")),
            Err(Error::Cancelled)
        ));
        // A lock below our own (ephemeral) lock node cannot be created: an error.
        let below = DistributedMutex::new(&b, &format!("{}/below", held.node_path())).unwrap();
        assert!(below.try_lock().is_err());
        drop(held);

        let rw = DistributedRwLock::new(&a, &common::lock_path("obs-count-rw")).unwrap();
        drop(rw.read().unwrap());
        drop(rw.write().unwrap());
        let semaphore = Semaphore::new(&a, &common::lock_path("obs-count-sem"), 3).unwrap();
        drop(semaphore.acquire_many(2).unwrap());
        let multi = MultiLock::new(&a)
            .mutex(&common::lock_path("obs-count-m1"))
            .unwrap()
            .mutex(&common::lock_path("obs-count-m2"))
            .unwrap();
        drop(multi.lock().unwrap());
        let election = LeaderElection::new(&a, &common::lock_path("obs-count-el")).unwrap();
        drop(election.participate().unwrap());

        // Lost, deleted: someone breaks our (watched) node; looked at many times, counted once.
        let revocable = DistributedMutex::new(&a, &common::lock_path("obs-count-del"))
            .unwrap()
            .revocable();
        let guard = revocable.lock().unwrap();
        let broken = DistributedMutex::new(&b, revocable.path()).unwrap();
        assert!(broken
            .break_contender(&broken.contenders().unwrap()[0])
            .unwrap());
        assert!(common::eventually(Duration::from_secs(10), || {
            guard.state() == LockState::Lost
        }));
        for _ in 0..10 {
            assert_eq!(guard.state(), LockState::Lost);
        }
        assert!(matches!(guard.unlock(), Err(Error::LockLost { .. })));

        // Lost, closed: the client closes under a held lock.
        let c = labelled(Duration::from_secs(10));
        let guard = DistributedMutex::new(&c, &common::lock_path("obs-count-closed"))
            .unwrap()
            .lock()
            .unwrap();
        c.close().unwrap();
        assert_eq!(guard.state(), LockState::Lost);
        drop(guard);

        // Lost, expired, and a new session: through a proxy that goes silent.
        let proxy = Proxy::start(&connect);
        let d = Client::builder(&proxy.connect_string())
            .session_timeout(Duration::from_secs(2))
            .connect()
            .unwrap();
        let guard = DistributedMutex::new(&d, &common::lock_path("obs-count-exp"))
            .unwrap()
            .lock()
            .unwrap();
        proxy.blackhole(true);
        assert!(common::eventually(Duration::from_secs(30), || {
            d.state() == SessionState::Expired
        }));
        assert_eq!(guard.state(), LockState::Lost);
        proxy.blackhole(false);
        drop(guard);
        let after = DistributedMutex::new(&d, &common::lock_path("obs-count-exp2")).unwrap();
        drop(after.try_lock().unwrap().unwrap());
        // Let the state threads publish what they have seen.
        assert!(common::eventually(Duration::from_secs(10), || {
            totals.add(&snapshotter);
            totals.get("zklock_reconnects_total", &[]) >= 1.0
                && totals.get("zklock_session_state", &[]) == 3.0
        }));
        std::thread::sleep(Duration::from_millis(300));
        totals.add(&snapshotter);

        let count = |name: &str, labels: &[&str]| totals.get(name, labels);
        let acquisitions = |recipe: &str, outcome: &str| {
            let (r, o) = (format!("recipe={recipe}"), format!("outcome={outcome}"));
            let n = count("zklock_acquisitions_total", &[&r, &o]);
            let waits = count("zklock_acquire_wait_seconds", &[&r, &o]);
            assert_eq!(n, waits, "{recipe} {outcome}: one wait per acquisition");
            n
        };
        let on_path = format!("path={path}");
        let mutex_on_path = |outcome: &str| {
            let o = format!("outcome={outcome}");
            count("zklock_acquisitions_total", &["recipe=mutex", &o, &on_path])
        };
        let report = format!("{:#?}", totals.0);
        assert_eq!(mutex_on_path("acquired"), 4.0, "{report}");
        assert_eq!(mutex_on_path("busy"), 1.0, "{report}");
        assert_eq!(mutex_on_path("timeout"), 1.0, "{report}");
        assert_eq!(mutex_on_path("cancelled"), 1.0, "{report}");
        assert_eq!(acquisitions("mutex", "error"), 1.0, "{report}");
        assert_eq!(acquisitions("rwlock_read", "acquired"), 1.0, "{report}");
        assert_eq!(acquisitions("rwlock_write", "acquired"), 1.0, "{report}");
        assert_eq!(acquisitions("semaphore", "acquired"), 1.0, "{report}");
        assert_eq!(acquisitions("multi", "acquired"), 1.0, "{report}");
        assert_eq!(acquisitions("election", "acquired"), 1.0, "{report}");
        // 4 + deleted + closed + expired + the last one on d, which has no path label.
        assert_eq!(acquisitions("mutex", "acquired"), 8.0, "{report}");
        // One hold per acquisition that was released: a multi-lock of two is one hold.
        assert_eq!(
            count("zklock_hold_seconds", &["recipe=mutex", &on_path]),
            4.0,
            "{report}"
        );
        assert_eq!(
            count("zklock_hold_seconds", &["recipe=multi"]),
            1.0,
            "{report}"
        );
        assert_eq!(
            count("zklock_hold_seconds", &["recipe=semaphore"]),
            1.0,
            "{report}"
        );
        assert_eq!(
            count("zklock_locks_lost_total", &["cause=deleted"]),
            1.0,
            "{report}"
        );
        assert_eq!(
            count("zklock_locks_lost_total", &["cause=closed"]),
            1.0,
            "{report}"
        );
        assert_eq!(
            count("zklock_locks_lost_total", &["cause=expired"]),
            1.0,
            "{report}"
        );
        assert_eq!(
            count("zklock_locks_lost_total", &["cause=lease"]),
            0.0,
            "{report}"
        );
        assert_eq!(
            count("zklock_session_expirations_total", &[]),
            1.0,
            "{report}"
        );
        assert!(count("zklock_reconnects_total", &[]) >= 1.0, "{report}");
        // a, b and d are connected; c is closed.
        assert_eq!(count("zklock_session_state", &[]), 3.0, "{report}");
        assert_eq!(count("zklock_background_releases", &[]), 0.0, "{report}");
        println!("COUNTED");
    }

    #[test]
    fn a_recorder_counts_known_work() {
        let child = worker("metrics::worker_count_known_work", &[]);
        let output = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains("COUNTED"),
            "the worker failed: {stdout}"
        );
    }
}
