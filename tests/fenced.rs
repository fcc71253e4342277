//! Fenced writes (`LockGuard::fenced_set_data`, `fenced_delete`, `transaction`) against a real
//! server: applied atomically while the lock node exists, refused by the server once it is gone,
//! including for a holder frozen (SIGSTOP) past its session and resumed.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::Child;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use zklock::{DistributedMutex, Error};

/// A lock path and, next to it, a place for the data it protects.
fn paths(test: &str) -> (String, String) {
    let root = common::lock_path(test);
    (format!("{root}/lock"), format!("{root}/data"))
}

#[test]
fn set_data_creates_missing_node_and_parents_then_updates() {
    let client = common::client();
    let (lock, data) = paths("fenced-create");
    let mutex = DistributedMutex::new(&client, &lock).unwrap();
    let guard = mutex.lock().unwrap();
    let nested = format!("{data}/a/b");
    guard.fenced_set_data(&nested, b"one").unwrap();
    assert_eq!(
        client.get_data(&nested).unwrap().as_deref(),
        Some(&b"one"[..])
    );
    assert_eq!(client.get_data(&data).unwrap().as_deref(), Some(&b""[..]));
    guard.fenced_set_data(&nested, b"two").unwrap();
    assert_eq!(
        client.get_data(&nested).unwrap().as_deref(),
        Some(&b"two"[..])
    );
    // An existing node with a missing child: only the child is created.
    guard.fenced_set_data(&format!("{data}/a/c"), b"").unwrap();

    for node in [format!("{data}/a/c"), nested, format!("{data}/a"), data] {
        assert!(guard.fenced_delete(&node).unwrap(), "{node}");
    }
}

#[test]
fn fenced_delete_reports_absent_nodes() {
    let client = common::client();
    let (lock, data) = paths("fenced-delete");
    let guard_mutex = DistributedMutex::new(&client, &lock).unwrap();
    let guard = guard_mutex.lock().unwrap();
    guard.fenced_set_data(&data, b"x").unwrap();
    assert!(guard.fenced_delete(&data).unwrap());
    assert_eq!(client.get_data(&data).unwrap(), None);
    assert!(!guard.fenced_delete(&data).unwrap(), "already gone");
    // A node with children is refused, and stays.
    guard
        .fenced_set_data(&format!("{data}/child"), b"")
        .unwrap();
    assert!(matches!(
        guard.fenced_delete(&data),
        Err(Error::NotEmpty { .. })
    ));
    assert!(guard.fenced_delete(&format!("{data}/child")).unwrap());
    assert!(guard.fenced_delete(&data).unwrap());
}

#[test]
fn transaction_applies_all_operations_in_order() {
    let client = common::client();
    let (lock, data) = paths("fenced-txn");
    let mutex = DistributedMutex::new(&client, &lock).unwrap();
    let guard = mutex.lock().unwrap();
    guard.fenced_set_data(&data, b"").unwrap();
    let (a, b, c) = (
        format!("{data}/a"),
        format!("{data}/b"),
        format!("{data}/c"),
    );
    guard.fenced_set_data(&c, b"doomed").unwrap();
    let txn = guard
        .transaction()
        .create(&a, b"created")
        .set_data(&a, b"updated") // sees the create before it
        .create(&b, b"b")
        .delete(&c);
    assert_eq!(txn.len(), 4);
    txn.commit().unwrap();
    assert_eq!(
        client.get_data(&a).unwrap().as_deref(),
        Some(&b"updated"[..])
    );
    assert_eq!(client.get_data(&b).unwrap().as_deref(), Some(&b"b"[..]));
    assert_eq!(client.get_data(&c).unwrap(), None);
    // An empty transaction only asks the server whether the lock is still ours.
    guard.transaction().commit().unwrap();

    guard
        .transaction()
        .delete(&a)
        .delete(&b)
        .delete(&data)
        .commit()
        .unwrap();
    assert_eq!(client.get_data(&data).unwrap(), None);
}

#[test]
fn a_failing_operation_leaves_nothing_applied() {
    let client = common::client();
    let (lock, data) = paths("fenced-atomic");
    let mutex = DistributedMutex::new(&client, &lock).unwrap();
    let guard = mutex.lock().unwrap();
    guard.fenced_set_data(&data, b"before").unwrap();
    let fresh = format!("{data}/fresh");
    let missing = format!("{data}/missing");

    // The last operation fails (no such node): the first two must not be applied.
    let outcome = guard
        .transaction()
        .set_data(&data, b"after")
        .create(&fresh, b"x")
        .set_data(&missing, b"x")
        .commit();
    assert_eq!(outcome, Err(Error::NoNode { path: missing }));
    assert_eq!(
        client.get_data(&data).unwrap().as_deref(),
        Some(&b"before"[..])
    );
    assert_eq!(client.get_data(&fresh).unwrap(), None);

    // Creating a node that exists fails the same way.
    let outcome = guard
        .transaction()
        .create(&fresh, b"x")
        .create(&data, b"again")
        .commit();
    assert!(
        matches!(&outcome, Err(Error::NodeExists { path }) if *path == data),
        "{outcome:?}"
    );
    assert_eq!(client.get_data(&fresh).unwrap(), None);

    assert!(guard.fenced_delete(&data).unwrap());
}

#[test]
fn bad_input_is_refused_before_anything_is_sent() {
    let client = common::client();
    let (lock, data) = paths("fenced-input");
    let mutex = DistributedMutex::new(&client, &lock).unwrap();
    let guard = mutex.lock().unwrap();
    let huge = vec![0u8; 1_000_001];
    assert!(matches!(
        guard.fenced_set_data("relative", b""),
        Err(Error::InvalidPath { .. })
    ));
    assert!(matches!(
        guard.fenced_set_data(&data, &huge),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        guard.fenced_delete("/a//b"),
        Err(Error::InvalidPath { .. })
    ));
    // The builder keeps the first bad input for `commit`, and sends nothing.
    let outcome = guard
        .transaction()
        .create(&data, b"x")
        .set_data("/trailing/", b"x")
        .delete("")
        .commit();
    assert!(matches!(outcome, Err(Error::InvalidPath { ref path, .. }) if path == "/trailing/"));
    assert!(matches!(
        guard.transaction().create(&data, &huge).commit(),
        Err(Error::InvalidArgument(_))
    ));
    let near_limit = vec![0u8; 600_000];
    assert!(matches!(
        guard
            .transaction()
            .create(&data, &near_limit)
            .set_data(&data, &near_limit)
            .commit(),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(client.get_data(&data).unwrap(), None);
}

#[test]
fn a_broken_holder_is_refused_and_writes_nothing() {
    let (holder_client, operator) = (common::client(), common::client());
    let (lock, data) = paths("fenced-broken");
    let mutex = DistributedMutex::new(&holder_client, &lock).unwrap();
    let guard = mutex.lock().unwrap();
    guard.fenced_set_data(&data, b"mine").unwrap();

    let ops = DistributedMutex::new(&operator, &lock).unwrap();
    let holder = ops.contenders().unwrap().remove(0);
    assert!(ops.break_contender(&holder).unwrap());

    let lost = Err(Error::LockLost { path: lock.clone() });
    assert_eq!(guard.fenced_set_data(&data, b"stale"), lost);
    let elsewhere = format!("{data}-new/child");
    assert_eq!(guard.fenced_set_data(&elsewhere, b"stale"), lost);
    assert_eq!(guard.fenced_delete(&data).map(|_| ()), lost);
    assert_eq!(
        guard
            .transaction()
            .set_data(&data, b"stale")
            .create(&format!("{data}/x"), b"")
            .commit(),
        lost
    );
    assert_eq!(guard.transaction().commit(), lost);
    assert_eq!(
        operator.get_data(&data).unwrap().as_deref(),
        Some(&b"mine"[..])
    );
    assert_eq!(operator.get_data(&format!("{data}-new")).unwrap(), None);
    assert_eq!(operator.get_data(&format!("{data}/x")).unwrap(), None);

    // The next holder writes as usual.
    let next = ops.try_lock().unwrap().expect("free after the break");
    next.fenced_set_data(&data, b"next").unwrap();
    assert!(next.fenced_delete(&data).unwrap());
}

#[test]
fn a_revocation_request_does_not_break_fenced_writes() {
    let (holder_client, operator) = (common::client(), common::client());
    let (lock, data) = paths("fenced-revoke");
    let mutex = DistributedMutex::new(&holder_client, &lock)
        .unwrap()
        .revocable();
    let guard = mutex.lock().unwrap();
    let ops = DistributedMutex::new(&operator, &lock).unwrap();
    let holder = ops.contenders().unwrap().remove(0);
    // Curator's revocation marker, written into our node: it bumps the node's data version.
    assert!(ops.request_revocation(&holder).unwrap());
    assert!(guard.wait_revocation_timeout(Duration::from_secs(10)));
    assert!(ops.contenders().unwrap()[0].version > holder.version);

    guard.fenced_set_data(&data, b"still mine").unwrap();
    assert_eq!(
        operator.get_data(&data).unwrap().as_deref(),
        Some(&b"still mine"[..])
    );
    guard
        .transaction()
        .set_data(&data, b"again")
        .commit()
        .unwrap();
    assert!(guard.fenced_delete(&data).unwrap());
}

#[test]
fn a_lost_reply_is_outcome_unknown_and_never_resent() {
    let proxy = common::proxy::Proxy::start(&common::connect_string());
    let client = common::client_via(&proxy, Duration::from_secs(4));
    let observer = common::client();
    let (lock, data) = paths("fenced-lost-reply");
    let mutex = DistributedMutex::new(&client, &lock).unwrap();
    let guard = mutex.lock().unwrap();
    guard.fenced_set_data(&data, b"before").unwrap();

    // The server executes what it receives, but its replies never arrive.
    proxy.drop_replies(true);
    let once = format!("{data}/once");
    let outcome = guard.transaction().create(&once, b"once").commit();
    proxy.drop_replies(false);
    proxy.sever();
    // Unknown to the caller; applied once by the server. Resending it after the reconnect
    // would have failed (the node exists) instead of reporting the unknown outcome.
    assert_eq!(outcome, Err(Error::OutcomeUnknown { path: once.clone() }));
    assert_eq!(
        observer.get_data(&once).unwrap().as_deref(),
        Some(&b"once"[..])
    );

    // Reconnected (a read waits for that), then the same for a fenced update.
    assert!(client.get_data(&once).unwrap().is_some());
    proxy.drop_replies(true);
    let outcome = guard.fenced_set_data(&data, b"after");
    proxy.drop_replies(false);
    proxy.sever();
    assert_eq!(outcome, Err(Error::OutcomeUnknown { path: data.clone() }));
    assert_eq!(
        observer.get_data(&data).unwrap().as_deref(),
        Some(&b"after"[..])
    );

    // The session survived: the lock is still ours and fenced writes work again.
    assert!(client.get_data(&data).unwrap().is_some());
    guard
        .transaction()
        .delete(&once)
        .delete(&data)
        .commit()
        .unwrap();
}

// ---- A holder frozen past its session (SIGSTOP), in a child process ----

/// The child process holding the lock: `LOCK`, `DATA` (the node it writes), `SIGNAL` (a file
/// whose appearance tells it to try its stale write) and `MODE` (`direct`: write at once;
/// `reopen`: first make an unrelated call until the client runs on a new session).
#[test]
#[ignore = "run as a child process by other tests"]
fn worker_frozen_holder() {
    let var = |name| std::env::var(name).unwrap();
    let (lock, data, signal, mode) = (var("LOCK"), var("DATA"), var("SIGNAL"), var("MODE"));
    let client = common::client_with(Duration::from_secs(2));
    let mutex = DistributedMutex::new(&client, &lock).unwrap();
    let guard = mutex.lock().unwrap();
    guard.fenced_set_data(&data, b"child").unwrap();
    say(&format!("LOCKED {}", guard.session_id()));

    while !std::path::Path::new(&signal).exists() {
        thread::sleep(Duration::from_millis(10));
    }
    if mode == "reopen" {
        // Any call through the client replaces its expired session; repeat until one did.
        let reopened = common::eventually(Duration::from_secs(20), || {
            client.get_data("/zklock-tests").is_ok() && client.session_id() != guard.session_id()
        });
        assert!(reopened, "the client never opened a new session");
        say(&format!(
            "REOPENED {} {}",
            guard.session_id(),
            client.session_id()
        ));
    }
    let outcome = match guard.fenced_set_data(&data, b"stale") {
        Ok(()) => "written".to_owned(),
        Err(Error::LockLost { .. }) => "LockLost".to_owned(),
        Err(Error::OutcomeUnknown { .. }) => "OutcomeUnknown".to_owned(),
        Err(other) => format!("other {other:?}"),
    };
    say(&format!("RESULT {outcome}"));
}

fn say(line: &str) {
    // libtest may have printed "test name ... " on the same line: start a fresh one.
    println!("\n{line}");
    std::io::stdout().flush().unwrap();
}

/// A worker process, resumed and killed if the test ends early.
struct Worker {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Worker {
    fn spawn(vars: &[(&str, String)]) -> Worker {
        let mut child = common::spawn_worker("worker_frozen_holder", vars);
        let out = BufReader::new(child.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Worker { child, lines }
    }

    /// The rest of the first line starting with `prefix`; panics if none comes in `limit`.
    fn expect(&self, prefix: &str, limit: Duration) -> String {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix(prefix) {
                        return rest.trim().to_owned();
                    }
                }
                Err(_) => panic!("the worker printed no {prefix:?} line within {limit:?}"),
            }
        }
    }

    fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill {signal}");
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-CONT", &self.child.id().to_string()])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Freezes a holder, lets its session expire and another client take the lock and write
/// `fresh`, then resumes the holder and lets it try its write. Returns what the holder saw.
fn frozen_holder_tries_a_stale_write(mode: &str) -> String {
    let (lock, data) = paths(&format!("fenced-frozen-{mode}"));
    let signal: PathBuf = std::env::temp_dir().join(format!(
        "zklock-fenced-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    let worker = Worker::spawn(&[
        ("LOCK", lock.clone()),
        ("DATA", data.clone()),
        ("SIGNAL", signal.to_str().unwrap().to_owned()),
        ("MODE", mode.to_owned()),
    ]);
    worker.expect("LOCKED ", Duration::from_secs(30));

    let client = common::client();
    let mutex = DistributedMutex::new(&client, &lock).unwrap();
    assert!(mutex.try_lock().unwrap().is_none(), "the worker holds it");
    assert_eq!(
        client.get_data(&data).unwrap().as_deref(),
        Some(&b"child"[..])
    );

    worker.signal("-STOP");
    let guard = mutex
        .lock_timeout(Duration::from_secs(30))
        .unwrap()
        .expect("the frozen holder's session expires and frees the lock");
    guard.fenced_set_data(&data, b"fresh").unwrap();

    worker.signal("-CONT");
    std::fs::write(&signal, b"go").unwrap();
    if mode == "reopen" {
        let sessions = worker.expect("REOPENED ", Duration::from_secs(30));
        let ids: Vec<&str> = sessions.split(' ').collect();
        assert_ne!(ids[0], ids[1], "the worker's client runs on a new session");
    }
    let outcome = worker.expect("RESULT ", Duration::from_secs(30));
    let _ = std::fs::remove_file(&signal);
    eprintln!("frozen holder ({mode}): its stale write returned {outcome}");

    assert_eq!(
        client.get_data(&data).unwrap().as_deref(),
        Some(&b"fresh"[..]),
        "the stale holder's write ({outcome}) must not reach the data"
    );
    assert!(guard.is_held());
    assert!(guard.fenced_delete(&data).unwrap());
    outcome
}

#[test]
fn a_frozen_holder_is_refused_after_resuming() {
    let outcome = frozen_holder_tries_a_stale_write("direct");
    // The resumed client may still send through its dead connection (the reply is lost:
    // outcome unknown) or already know its session expired; either way nothing was written,
    // as the data check above proved.
    assert!(
        outcome == "LockLost" || outcome == "OutcomeUnknown",
        "stale write: {outcome}"
    );
}

#[test]
fn a_frozen_holder_is_refused_through_its_clients_new_session() {
    // The worker's client has replaced its expired session before the stale write: the write
    // goes through the new session and the server's check of the old node refuses it.
    let outcome = frozen_holder_tries_a_stale_write("reopen");
    assert_eq!(outcome, "LockLost");
}

/// Tokens from one lock path keep increasing when the ensemble is
/// re-created from scratch (data and logs wiped), though its zxids begin again.
#[test]
fn fencing_tokens_increase_across_a_wiped_ensemble() {
    let server = common::servers::PrivateServer::start("");
    let path = "/fencing/wiped/lock";
    let first = {
        let client = common::client_at(&server.connect_string(), Duration::from_secs(4));
        // Transactions enough that the zxids after the wipe start well below ours.
        for i in 0..40 {
            client.set_data("/fencing/filler", &[i]).unwrap();
        }
        let mutex = DistributedMutex::new(&client, path).unwrap();
        let guard = mutex.lock().unwrap();
        let token = guard.fencing();
        assert_eq!(token.zxid(), guard.fencing().zxid());
        guard.unlock().unwrap();
        token
    };
    server.wipe_and_restart();
    let client = common::client_at(&server.connect_string(), Duration::from_secs(4));
    let mutex = DistributedMutex::new(&client, path).unwrap();
    let second = mutex.lock().unwrap().fencing();
    eprintln!("before the wipe {first:?}, after {second:?}");
    assert!(
        second.zxid() < first.zxid(),
        "the zxids did not begin again: was the data wiped?"
    );
    assert!(
        second > first,
        "the token went backwards: {first:?}, then {second:?}"
    );
    // Every form a store may keep sorts the same way.
    assert!(second.to_u128() > first.to_u128());
    assert!(second.to_string() > first.to_string());
    // Within the generation, the next holder's token is higher again.
    let third = mutex.lock().unwrap().fencing();
    assert_eq!(third.generation(), second.generation());
    assert!(third > second);
}

// ---- Bounded fenced writes (`_timeout`, `_with(Wait)`) on a silent or a refused connection ----

/// Runs `call`, and how long it took.
fn timed<T>(call: impl FnOnce() -> T) -> (Duration, T) {
    let start = std::time::Instant::now();
    let outcome = call();
    (start.elapsed(), outcome)
}

/// What a bounded call may take past its deadline on a loaded machine: a correctness bound.
const SLACK: Duration = Duration::from_millis(500);

#[test]
fn bounded_writes_on_a_silent_connection_return_by_their_deadline_as_unknown() {
    use zklock::{CancelToken, Wait};
    let proxy = common::proxy::Proxy::start(&common::connect_string());
    // Long enough that the silence is not yet taken for a lost connection (about 40% of it)
    // while the bounded calls below run.
    let client = common::client_via(&proxy, Duration::from_secs(10));
    let (lock, data) = paths("fenced-bounded-silent");
    let mutex = DistributedMutex::new(&client, &lock).unwrap();
    let guard = mutex.lock().unwrap();
    guard.fenced_set_data(&data, b"before").unwrap();
    let limit = Duration::from_millis(300);
    let unknown = Err(Error::OutcomeUnknown { path: data.clone() });

    // The connection goes silent: requests leave, nothing comes back, and it looks alive.
    proxy.blackhole(true);
    thread::scope(|s| {
        // For contrast, the plain form: it waits for the reply up to the session timeout.
        let plain = s.spawn(|| timed(|| guard.fenced_set_data(&data, b"plain")));

        let (took, outcome) = timed(|| guard.fenced_set_data_timeout(&data, b"one", limit));
        assert_eq!(outcome, unknown, "sent, unanswered");
        assert!(
            took < limit + SLACK,
            "fenced_set_data_timeout took {took:?}"
        );

        let (took, outcome) = timed(|| guard.fenced_delete_with(&data, Wait::timeout(limit)));
        assert_eq!(outcome.map(|_| ()), unknown);
        assert!(took < limit + SLACK, "fenced_delete_with took {took:?}");

        let (took, outcome) = timed(|| {
            let commit = guard.transaction().set_data(&data, b"two");
            commit.commit_with(Wait::timeout(limit))
        });
        assert_eq!(outcome, unknown);
        assert!(took < limit + SLACK, "commit_with took {took:?}");

        // A cancel from another thread, once the write is out: unknown too, never "not
        // applied".
        let token = CancelToken::new();
        let canceller = s.spawn({
            let token = token.clone();
            move || {
                thread::sleep(Duration::from_millis(200));
                token.cancel();
            }
        });
        let wait = Wait::forever().cancel_on(&token);
        let (took, outcome) = timed(|| guard.fenced_set_data_with(&data, b"three", wait));
        canceller.join().unwrap();
        assert_eq!(outcome, unknown);
        assert!(
            took < Duration::from_millis(200) + SLACK,
            "cancel took {took:?}"
        );

        // A token cancelled before the call: nothing is sent at all.
        let (took, outcome) = timed(|| {
            let wait = Wait::forever().cancel_on(&token);
            guard.fenced_set_data_with(&data, b"four", wait)
        });
        assert_eq!(outcome, Err(Error::Cancelled));
        assert!(took < SLACK);

        let (took, outcome) = plain.join().unwrap();
        assert!(
            outcome.is_err(),
            "answered through a blackhole: {outcome:?}"
        );
        assert!(
            took > Duration::from_millis(1500),
            "the plain form returned in {took:?}: the contrast shows nothing"
        );
    });
    proxy.blackhole(false);
}

#[test]
fn bounded_writes_on_a_refused_connection_send_nothing_and_say_so() {
    use zklock::{CancelToken, Wait};
    let proxy = common::proxy::Proxy::start(&common::connect_string());
    let client = common::client_via(&proxy, Duration::from_secs(6));
    let observer = common::client();
    let (lock, data) = paths("fenced-bounded-down");
    let mutex = DistributedMutex::new(&client, &lock).unwrap();
    let guard = mutex.lock().unwrap();
    guard.fenced_set_data(&data, b"before").unwrap();
    let limit = Duration::from_millis(300);

    // Down, and known to be: the connection cut and every reconnect refused.
    proxy.refuse(true);
    proxy.sever();
    assert!(common::eventually(Duration::from_secs(5), || {
        client.state() != zklock::client::SessionState::Connected
    }));

    let (took, outcome) = timed(|| guard.fenced_set_data_timeout(&data, b"one", limit));
    assert!(
        matches!(outcome, Err(Error::ConnectionLoss { timeout: Some(t), .. }) if t == limit),
        "{outcome:?}"
    );
    assert!(took >= limit && took < limit + SLACK, "took {took:?}");

    let (took, outcome) = timed(|| guard.fenced_delete_timeout(&data, limit));
    assert!(
        matches!(outcome, Err(Error::ConnectionLoss { .. })),
        "{outcome:?}"
    );
    assert!(took < limit + SLACK, "took {took:?}");

    let (took, outcome) = timed(|| guard.transaction().delete(&data).commit_timeout(limit));
    assert!(
        matches!(outcome, Err(Error::ConnectionLoss { .. })),
        "{outcome:?}"
    );
    assert!(took < limit + SLACK, "took {took:?}");

    // Stopped by a cancel from another thread while waiting for the connection: nothing sent.
    let token = CancelToken::new();
    let (took, outcome) = thread::scope(|s| {
        s.spawn(|| {
            thread::sleep(Duration::from_millis(200));
            token.cancel();
        });
        timed(|| guard.fenced_set_data_with(&data, b"two", Wait::forever().cancel_on(&token)))
    });
    assert_eq!(outcome, Err(Error::Cancelled));
    assert!(took < Duration::from_millis(200) + SLACK, "took {took:?}");

    // Nothing of it reached the server.
    proxy.refuse(false);
    assert_eq!(
        observer.get_data(&data).unwrap().as_deref(),
        Some(&b"before"[..])
    );
    if guard.state() != zklock::LockState::Lost {
        let _ = guard.fenced_delete_timeout(&data, Duration::from_secs(5));
    }
}
