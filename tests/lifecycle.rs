//! Lifecycle and lease edge cases an adversarial review found (each failed before its fix):
//! the lease behind a follower cut off from the leader, cancellation and close on a silent
//! connection, close in a forked child, concurrent closes, fenced writes' parents. Real server
//! at `ZK_CONNECT` (default 127.0.0.1:2181), real faults through the loopback proxy; one test
//! starts a private ensemble on free ports.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::proxy::Proxy;
use zklock::acl::NodeAcl;
use zklock::{CancelToken, Client, DistributedMutex, Error, MultiLock, Semaphore};

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
fn fenced_write_parents_let_other_identities_write_siblings() {
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
/// Silences the connection, cancels `token`, and returns what `waiter` returned and how long it
/// took after the cancel; the connection is back afterwards.
fn cancel_while_silent(
    proxy: &Proxy,
    token: &CancelToken,
    waiter: thread::JoinHandle<zklock::Result<()>>,
) -> (zklock::Result<()>, Duration) {
    proxy.blackhole(true);
    thread::sleep(Duration::from_millis(100));
    let cancelled_at = Instant::now();
    token.cancel();
    let outcome = waiter.join().unwrap();
    let took = cancelled_at.elapsed();
    proxy.blackhole(false);
    (outcome, took)
}

#[test]
fn a_cancelled_multi_lock_returns_promptly_on_a_silent_connection() {
    let root = common::lock_path("review-multi-cancel");
    let (a, b) = (format!("{root}/a"), format!("{root}/b"));
    let other = common::client();
    let other_b = DistributedMutex::new(&other, &b).unwrap();
    let _held_elsewhere = other_b.lock().unwrap();

    let proxy = Proxy::start(&common::connect_string());
    let client = common::client_via(&proxy, Duration::from_secs(10));
    let multi = MultiLock::new(&client)
        .mutex(&a)
        .unwrap()
        .mutex(&b)
        .unwrap();
    let token = CancelToken::new();
    let waiter = {
        let token = token.clone();
        thread::spawn(move || {
            multi
                .lock_with(zklock::Wait::forever().cancel_on(&token))
                .map(|g| g.expect("no timeout was given"))
                .map(drop)
        })
    };
    // Wait until we hold `a` and queue on `b`.
    assert!(common::eventually(Duration::from_secs(10), || {
        common::children_count(&other, &b) == 2
    }));
    thread::sleep(Duration::from_millis(100));

    let (outcome, took) = cancel_while_silent(&proxy, &token, waiter);
    assert!(matches!(outcome, Err(Error::Cancelled)), "{outcome:?}");
    assert!(
        took < Duration::from_secs(1),
        "a cancelled multi-lock returned only after {took:?}"
    );
}

/// The same through a semaphore: the gate node, held while the taker waits for a lease, is
/// released by `Partial::drop` with the full session timeout.
#[test]
fn a_cancelled_semaphore_taker_returns_promptly_on_a_silent_connection() {
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
        thread::spawn(move || {
            sem.acquire_with(zklock::Wait::forever().cancel_on(&token))
                .map(|g| g.expect("no timeout was given"))
                .map(drop)
        })
    };
    // The taker holds the gate and waits with its lease node queued.
    assert!(common::eventually(Duration::from_secs(10), || {
        other_sem.contenders().unwrap().len() == 2
    }));
    thread::sleep(Duration::from_millis(100));

    let (outcome, took) = cancel_while_silent(&proxy, &token, waiter);
    assert!(matches!(outcome, Err(Error::Cancelled)), "{outcome:?}");
    assert!(
        took < Duration::from_secs(1),
        "a cancelled semaphore taker returned only after {took:?}"
    );
}

/// Client::close (docs: "Every thread blocked in a call on this client or any clone of it
/// returns promptly"): `LockGuard::wait_revocation_timeout` waits on the `NodeFlags` condvar
/// (src/session/own_node.rs `OwnNodeWatch::wait_revocation`), which nothing signals on close: the own-node
/// task is aborted by `Session::close`, the guard is already Lost, but the caller stays
/// blocked for its whole timeout.
#[test]
fn close_wakes_a_thread_waiting_for_revocation() {
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

/// A watchdog waiting on a held lock (state and revocation) ends when its token is cancelled,
/// and the lock is still held and released normally afterwards: the waits have no timeout, so
/// they would block for good if the cancel did not reach them.
#[test]
fn cancelling_ends_a_watchdogs_waits_on_a_held_lock() {
    let client = common::client();
    let path = common::lock_path("watchdog-cancel");
    let mutex = DistributedMutex::new(&client, &path).unwrap().revocable();
    let guard = mutex.lock().unwrap();
    let done = CancelToken::new();
    let (lost, revoked) = thread::scope(|s| {
        let lost = s.spawn(|| guard.wait_lost_with(zklock::Wait::forever().cancel_on(&done)));
        let revoked =
            s.spawn(|| guard.wait_revocation_with(zklock::Wait::forever().cancel_on(&done)));
        thread::sleep(Duration::from_millis(300));
        assert!(!lost.is_finished() && !revoked.is_finished());
        done.cancel();
        (lost.join().unwrap(), revoked.join().unwrap())
    });
    assert_eq!((lost, revoked), (None, false));
    assert!(guard.is_held());
    // An already cancelled token returns at once.
    assert_eq!(
        guard.wait_lost_with(zklock::Wait::forever().cancel_on(&done)),
        None
    );
    assert!(!guard.wait_revocation_with(zklock::Wait::forever().cancel_on(&done)));
    guard.unlock().unwrap();
    assert!(mutex.try_lock().unwrap().is_some());

    // A semaphore's permit, of one lease and of several.
    let semaphore = Semaphore::new(&client, &common::lock_path("watchdog-permit"), 3).unwrap();
    for count in [1, 2] {
        let permit = semaphore.acquire_many(count).unwrap();
        let done = CancelToken::new();
        let lost = thread::scope(|s| {
            let lost = s.spawn(|| permit.wait_lost_with(zklock::Wait::forever().cancel_on(&done)));
            thread::sleep(Duration::from_millis(300));
            assert!(!lost.is_finished(), "{count} leases");
            done.cancel();
            lost.join().unwrap()
        });
        assert_eq!(lost, None, "{count} leases");
        assert!(permit.is_held());
    }
}

/// A private three-member ensemble on free ports, in a work dir of its own, stopped (and
/// cleaned) on drop.
struct PrivateEnsemble {
    servers: common::servers::Servers,
    ports: Vec<(u16, u16, u16)>,
    workdir: String,
}

impl PrivateEnsemble {
    fn start() -> PrivateEnsemble {
        use common::servers::free_port;
        let ports: Vec<(u16, u16, u16)> = (0..3)
            .map(|_| (free_port(), free_port(), free_port()))
            .collect();
        let spec = ports
            .iter()
            .map(|(c, q, e)| format!("{c}:{q}:{e}"))
            .collect::<Vec<_>>()
            .join(",");
        let base = std::env::var("ZK_WORKDIR").unwrap_or_else(|_| "/tmp/zklock-zk".into());
        let workdir = format!("{base}/review-{}", ports[0].0);
        let servers = common::servers::Servers::start(
            &["--ensemble"],
            &[("ZK_ENSEMBLE_PORTS", spec), ("ZK_WORKDIR", workdir.clone())],
        );
        PrivateEnsemble {
            servers,
            ports,
            workdir,
        }
    }

    fn client_port(&self, id: usize) -> u16 {
        self.ports[id - 1].0
    }

    fn mode(&self, id: usize) -> Option<String> {
        common::servers::mode(&format!("127.0.0.1:{}", self.client_port(id)))
    }

    fn leader(&self) -> usize {
        (1..=3)
            .find(|&id| self.mode(id).as_deref() == Some("leader"))
            .expect("no leader")
    }

    /// Restarts follower `follower` so that it reaches the leader `leader`'s quorum port
    /// only through `proxy` (its own zoo.cfg names the proxy as the leader's address).
    fn route_through(&self, follower: usize, leader: usize, proxy: &Proxy) {
        let member = follower.to_string();
        self.servers
            .run("stop-zk.sh", &["--ensemble-member", &member]);
        let cfg = format!(
            "{}/ensemble-{}/{follower}/zoo.cfg",
            self.workdir, self.ports[0].0
        );
        let text = std::fs::read_to_string(&cfg).unwrap();
        let election = self.ports[leader - 1].2;
        let rewritten: String = text
            .lines()
            .map(|line| {
                if line.starts_with(&format!("server.{leader}=")) {
                    format!("server.{leader}={}:{election}\n", proxy.connect_string())
                } else {
                    format!("{line}\n")
                }
            })
            .collect();
        std::fs::write(&cfg, rewritten).unwrap();
        self.servers
            .run("start-zk.sh", &["--ensemble-member", &member]);
        assert!(
            common::eventually(Duration::from_secs(30), || self.mode(follower).as_deref()
                == Some("follower")),
            "member {follower} did not rejoin through the proxy"
        );
    }
}

/// The lease (src/lease.rs, `keep_alive` and `proves_alive` in src/session.rs) assumes that
/// any answer to a request sent at `t` proves the session alive until `t + timeout`. That
/// holds for the server that decides expiry (the leader), not for a follower: a follower
/// answers reads (the keepalive's `exists /`, every `retry` read) locally, and only relays the
/// session's liveness to the leader on the leader's pings. A follower cut off from the leader
/// keeps serving its clients until its own read timeout (syncLimit x tickTime, 2 s here, 10 s
/// with ZooKeeper's defaults, often longer than a session timeout), while the leader and the
/// rest of the quorum expire the session and give the lock to the next contender. The holder
/// connected to that follower keeps renewing its lease from the follower's answers and reads
/// `Held` although the session is already expired and another process holds the lock.
/// (A `sync`, which the follower must forward to the leader, would not be answered.)
#[test]
fn a_holder_behind_a_partitioned_follower_never_reads_held_after_the_quorum_expired_it() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;
    use zklock::LockState;

    common::init_logging();
    let ensemble = PrivateEnsemble::start();
    let leader = ensemble.leader();
    let follower = (1..=3).find(|&id| id != leader).unwrap();
    let quorum = format!("127.0.0.1:{}", ensemble.ports[leader - 1].1);
    let link = Proxy::start(&quorum);
    ensemble.route_through(follower, leader, &link);
    assert_eq!(ensemble.leader(), leader, "leadership moved");

    // A is connected to the follower only, with a short session; B to the leader only.
    let a = Client::builder(&format!("127.0.0.1:{}", ensemble.client_port(follower)))
        .session_timeout(Duration::from_millis(800))
        .connect()
        .unwrap();
    let b = Client::builder(&format!("127.0.0.1:{}", ensemble.client_port(leader)))
        .session_timeout(Duration::from_secs(10))
        .connect()
        .unwrap();
    let path = common::lock_path("review-follower-lease");
    let a_guard = DistributedMutex::new(&a, &path).unwrap().lock().unwrap();
    assert!(a_guard.is_held());
    let b_mutex = DistributedMutex::new(&b, &path).unwrap();

    let (done, samples) = (AtomicBool::new(false), Mutex::new(Vec::new()));
    let (cut_at, b_acquired) = thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::SeqCst) {
                let at = Instant::now(); // taken before the question
                samples.lock().unwrap().push((at, a_guard.state()));
                thread::sleep(Duration::from_millis(1));
            }
        });
        let waiter = s.spawn(|| {
            let guard = b_mutex.lock_timeout(Duration::from_secs(20)).unwrap();
            (Instant::now(), guard)
        });
        thread::sleep(Duration::from_millis(500));
        // Cut the follower off from the leader (the TCP connection stays open and silent).
        let cut_at = Instant::now();
        link.blackhole(true);
        let (b_acquired, b_guard) = waiter.join().unwrap();
        let b_guard = b_guard.expect("B acquired once A's session expired on the leader");
        assert!(b_guard.is_held());
        thread::sleep(Duration::from_millis(2500));
        done.store(true, Ordering::SeqCst);
        drop(b_guard);
        (cut_at, b_acquired)
    });
    let samples = samples.into_inner().unwrap();
    let held_after: Vec<Duration> = samples
        .iter()
        .filter(|(at, state)| *at >= b_acquired && *state == LockState::Held)
        .map(|(at, _)| *at - b_acquired)
        .collect();
    eprintln!(
        "B acquired {:?} after the cut; A read Held {} times after that, the last {:?} after",
        b_acquired - cut_at,
        held_after.len(),
        held_after.last()
    );
    assert!(
        held_after.is_empty(),
        "A read Held {} times (up to {:?}) after B acquired the lock: A's session had expired \
         on the quorum, but the cut-off follower kept answering A's keepalive",
        held_after.len(),
        held_after.last()
    );
}

/// What a forked child reports, on fd 1 without Rust's stdout lock.
fn child_say(line: &str) {
    let line = format!("\n{line}\n");
    // SAFETY: writes a buffer we own to fd 1.
    unsafe { libc::write(1, line.as_ptr().cast(), line.len()) };
}

/// Forks a child of a process holding a connected client; the child calls `close()`.
#[test]
#[ignore = "run as a child process by close_in_a_forked_child_is_forked_at_once"]
fn worker_fork_close() {
    let client = Client::builder(&common::connect_string())
        .session_timeout(Duration::from_secs(4))
        .connect()
        .unwrap();
    let session = client.session_id();
    // SAFETY: the child only calls into zklock, writes to fd 1 and `_exit`s.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let started = Instant::now();
        let outcome = client.close();
        child_say(&format!(
            "child close: {outcome:?} after {:?}",
            started.elapsed()
        ));
        let ok =
            matches!(outcome, Err(Error::Forked)) && started.elapsed() < Duration::from_millis(500);
        // SAFETY: async-signal-safe, never returns.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) }
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    println!("worker: child exit status {}", libc::WEXITSTATUS(status));
    assert_eq!(client.session_id(), session);
    assert!(!client.is_closed());
}

/// Fork detection (Session::check_process): every call in a forked child fails at once with
/// `Error::Forked`, except `Client::close` (src/client.rs `close`), which checks nothing: it
/// aborts the session's tasks and drops its handles through the parent's tokio runtime
/// structures (no runtime thread in the child), then waits the full CLOSE_WAIT (2 s) for a
/// state change that cannot come, and reports `ConnectionLoss` ("the server could not be
/// told") instead of `Forked`.
#[test]
fn close_in_a_forked_child_is_forked_at_once() {
    let worker = common::spawn_worker("worker_fork_close", &[]);
    let output = worker.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("child ") || l.starts_with("worker: "))
        .collect();
    let report = report.join("\n");
    eprintln!("{report}");
    assert!(
        report.contains("worker: child exit status 0"),
        "close() in a forked child did not return Err(Forked) at once:\n{report}"
    );
}

/// Client::close (docs: every blocked thread returns promptly, "guards dropped afterwards do
/// nothing and never block"): a thread already inside `unlock()` (or a guard's drop) when the
/// connection went silent is not woken by close. `Held::release` runs outside any `Call`, so
/// it watches no close token, and its in-flight delete future keeps a handle on the session:
/// it stays blocked until the client crate declares the connection dead (2/5 of the session
/// timeout), seconds after close() returned.
#[test]
fn close_wakes_a_thread_blocked_in_unlock_on_a_silent_connection() {
    let proxy = Proxy::start(&common::connect_string());
    let client = common::client_via(&proxy, Duration::from_secs(10));
    let mutex = DistributedMutex::new(&client, &common::lock_path("review-unlock-close")).unwrap();
    let guard = mutex.lock().unwrap();
    proxy.blackhole(true);
    let unlocking = thread::spawn(move || guard.unlock());
    thread::sleep(Duration::from_millis(300));
    let closing = Instant::now();
    let _ = client.close(); // ConnectionLoss: the server cannot be told
    let closed_at = Instant::now();
    let outcome = unlocking.join().unwrap();
    let took = closed_at.elapsed();
    proxy.blackhole(false);
    eprintln!(
        "close took {:?}; unlock: {outcome:?}, {took:?} after close returned",
        closed_at - closing
    );
    assert!(
        took < Duration::from_millis(500),
        "unlock() was still blocked {took:?} after close() returned"
    );
}

/// Client::close's result (docs: `Err(ConnectionLoss)` if the server could not be told; the
/// session then ends only after its timeout): a second, concurrent `close()` on a clone finds
/// the session slot already empty and returns `Ok(())` at once (src/client.rs `close`:
/// "Closed already"), while the first close is still waiting and will report
/// `ConnectionLoss`. A shutdown path that calls close() on its own clone is told the ephemeral
/// nodes are gone when they are not.
#[test]
fn a_concurrent_close_reports_the_first_closes_outcome() {
    let proxy = Proxy::start(&common::connect_string());
    let client = common::client_via(&proxy, Duration::from_secs(10));
    let path = common::lock_path("review-close-twice");
    let _guard = DistributedMutex::new(&client, &path)
        .unwrap()
        .lock()
        .unwrap();
    proxy.blackhole(true);
    let first = {
        let client = client.clone();
        thread::spawn(move || client.close())
    };
    thread::sleep(Duration::from_millis(200));
    let second = client.clone().close();
    let first = first.join().unwrap();
    proxy.blackhole(false);
    eprintln!("first close: {first:?}; second close: {second:?}");
    assert!(
        matches!(first, Err(Error::ConnectionLoss { .. })),
        "{first:?}"
    );
    assert!(
        second.is_err(),
        "the second close() said Ok although the session was not closed on the server"
    );
}

/// The threads of this process (one entry per thread in /proc/self/task).
fn thread_count() -> usize {
    std::fs::read_dir("/proc/self/task").unwrap().count()
}

/// Set when the value that owns it is dropped: tells whether a listener closure was freed.
struct DropFlag(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Issue 21, item 4, in a process of its own (so that no other test's threads are counted):
/// three clients whose listeners block for a while on every change, each dropped; then three
/// whose listener captures its own client and blocks in a call on it, each closed and dropped.
/// Prints the thread count after each, and whether each listener was freed.
#[test]
#[ignore = "run as a child process by listener_threads_end_with_their_clients"]
fn worker_listener_threads() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, OnceLock};
    let connect = common::connect_string();
    // Keeps the process's shared threads (runtime, reactor, log relay) up throughout.
    let _keep = common::client_at(&connect, Duration::from_secs(4));
    thread::sleep(Duration::from_millis(300));
    let baseline = thread_count();
    for i in 0..3 {
        let client = common::builder(&connect, Duration::from_secs(4))
            .on_state_change(|_| thread::sleep(Duration::from_millis(600)))
            .connect()
            .unwrap();
        thread::sleep(Duration::from_millis(50));
        drop(client);
        println!(
            "worker: slow listener {i}: {} threads, baseline {baseline}",
            thread_count()
        );
    }
    for i in 0..3 {
        let own: Arc<OnceLock<Client>> = Arc::new(OnceLock::new());
        let freed = Arc::new(AtomicBool::new(false));
        let (slot, flag) = (own.clone(), DropFlag(freed.clone()));
        let client = common::builder(&connect, Duration::from_secs(4))
            .on_state_change(move |change| {
                let _flag = &flag;
                if let Some(client) = slot.get() {
                    // Blocks in a call on its own client (returns at once once closed).
                    client.wait_state_change(change.to, Duration::from_millis(300));
                }
            })
            .connect()
            .unwrap();
        own.set(client.clone()).ok().unwrap();
        drop(own);
        thread::sleep(Duration::from_millis(50));
        let _ = client.close();
        drop(client);
        println!(
            "worker: listener holding its client {i}: {} threads, baseline {baseline}, freed {}",
            thread_count(),
            freed.load(Ordering::SeqCst)
        );
    }
    // The documented way: a listener holding a weak handle, whose client is simply dropped.
    let own: Arc<OnceLock<zklock::client::WeakClient>> = Arc::new(OnceLock::new());
    let freed = Arc::new(AtomicBool::new(false));
    let (slot, flag) = (own.clone(), DropFlag(freed.clone()));
    let client = common::builder(&connect, Duration::from_secs(4))
        .on_state_change(move |change| {
            let _flag = &flag;
            if let Some(client) = slot.get().and_then(zklock::client::WeakClient::upgrade) {
                client.wait_state_change(change.to, Duration::from_millis(300));
            }
        })
        .connect()
        .unwrap();
    own.set(client.downgrade()).unwrap();
    drop(own);
    thread::sleep(Duration::from_millis(50));
    drop(client);
    println!(
        "worker: listener holding a weak handle: {} threads, baseline {baseline}, freed {}",
        thread_count(),
        freed.load(Ordering::SeqCst)
    );
    // A listener that does not return in time is waited for with a bound, then left running.
    let client = common::builder(&connect, Duration::from_secs(4))
        .on_state_change(|_| thread::sleep(Duration::from_secs(5)))
        .connect()
        .unwrap();
    let dropping = Instant::now();
    drop(client);
    println!(
        "worker: stuck listener dropped in {} ms",
        dropping.elapsed().as_millis()
    );
}

/// Issue 21, item 4: a listener's thread ends with its client. Dropping a client (or closing
/// it) waits, with a bound, for a listener busy with the last change; a listener that holds its
/// own client is freed once the client is closed, instead of keeping it for ever.
#[test]
fn listener_threads_end_with_their_clients() {
    let worker = common::spawn_worker("worker_listener_threads", &[]);
    let output = worker.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    // (libtest may print its own text before a line of ours.)
    let report: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.find("worker: ").map(|at| &l[at..]))
        .collect();
    eprintln!("{}", report.join("\n"));
    assert_eq!(report.len(), 8, "the worker did not finish:\n{stdout}");
    let (stuck, report) = report.split_last().unwrap();
    let waited: u64 = stuck
        .strip_prefix("worker: stuck listener dropped in ")
        .and_then(|l| l.strip_suffix(" ms"))
        .unwrap()
        .parse()
        .unwrap();
    // The bound is a second; the drop also closes the session.
    assert!(waited < 4_000, "a stuck listener held up the drop: {stuck}");
    for line in report {
        let (threads, rest) = line
            .split_once(": ")
            .and_then(|(_, l)| l.split_once(": "))
            .map(|(_, l)| l.split_once(" threads, baseline ").unwrap())
            .unwrap();
        let baseline = rest.split(',').next().unwrap();
        assert_eq!(threads, baseline, "threads left behind: {line}");
        assert!(
            !line.contains("freed false"),
            "listener never freed: {line}"
        );
    }
}
