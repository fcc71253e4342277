//! What the waiters of one session learn of a queue and share (`session/floors.rs`): a listing
//! whose lowest lock node is `n`, or a holder with nothing ahead, proves every node below gone;
//! a waiter whose predecessor goes claims without listing when the next node in its way is
//! known gone. These tests try to make that knowledge wrong against a real server: one
//! session's many waiters mixed with other sessions' in one queue while nodes ahead of them
//! withdraw, a lock path swept and re-created (numbers from 0 again), a waiter's own node
//! deleted behind its back, reconnects; on a mutex, a read/write lock, an election and a
//! semaphore's gate. Each checks that no two ever hold at once and that nobody who should get
//! the lock is left waiting.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::proxy::Proxy;
use common::servers::PrivateServer;
use common::{Exclusion, RawClient};
use zklock::{
    CancelToken, Client, DistributedMutex, DistributedRwLock, Error, LeaderElection, Semaphore,
};

/// How long a patient contender waits before the test calls it stuck.
const PATIENCE: Duration = Duration::from_secs(15);

/// How a contender behaves once it asked for the lock.
#[derive(Clone, Copy, Debug)]
enum Plan {
    /// Waits until it holds.
    Patient,
    /// Gives up after this long (its node is withdrawn).
    GivesUpAfter(Duration),
    /// Is cancelled after this long.
    CancelledAfter(Duration),
}

/// The plan of the `i`th contender of a queue: every fifth gives up, every seventh is
/// cancelled, at times that spread over the wait for the first holder and the drain after it.
fn plan(i: usize) -> Plan {
    let ms = |base: u64| Duration::from_millis(base + 53 * i as u64 % 900);
    match (i % 5, i % 7) {
        (1, _) => Plan::GivesUpAfter(ms(250)),
        (_, 3) => Plan::CancelledAfter(ms(300)),
        _ => Plan::Patient,
    }
}

/// Holds the section a moment, checking that it is alone in it.
fn hold(exclusion: &Exclusion, for_: Duration) {
    exclusion.enter();
    thread::sleep(for_);
    exclusion.leave();
}

/// One contender on `mutex` following `plan`; true if it held the lock.
fn contend_with_plan(mutex: &DistributedMutex, plan: Plan, exclusion: &Exclusion) -> bool {
    let guard = match plan {
        Plan::Patient => Some(
            mutex
                .lock_timeout(PATIENCE)
                .unwrap()
                .expect("a patient waiter was left waiting"),
        ),
        Plan::GivesUpAfter(after) => mutex.lock_timeout(after).unwrap(),
        Plan::CancelledAfter(after) => {
            let token = CancelToken::new();
            let canceller = token.clone();
            let cancel = thread::spawn(move || {
                thread::sleep(after);
                canceller.cancel();
            });
            let outcome = mutex
                .lock_with(zklock::Wait::forever().cancel_on(&token))
                .map(|g| g.expect("no timeout was given"));
            cancel.join().unwrap();
            match outcome {
                Ok(guard) => Some(guard),
                Err(Error::Cancelled) => None,
                Err(err) => panic!("a cancelled waiter got {err}"),
            }
        }
    };
    let Some(guard) = guard else {
        return false;
    };
    hold(exclusion, Duration::from_millis(15));
    guard.unlock().unwrap();
    true
}

/// `n` contenders queue behind a holder of another session: two thirds are waiters of
/// `ours`, which learn from each other, the rest belong to `others`. Nodes withdraw (see
/// [`plan`]) ahead of waiters of every session, while the first holder still holds and during
/// the drain. No two may hold at once, and every patient one must get the lock.
fn mixed_queue(ours: &Client, others: [&Client; 2], path: &str, n: usize) {
    let first = DistributedMutex::new(others[0], path).unwrap();
    let exclusion = Exclusion::default();
    let held = first.lock().unwrap();
    exclusion.enter();
    let patient = (0..n).filter(|&i| matches!(plan(i), Plan::Patient)).count();
    let acquired = AtomicUsize::new(0);
    thread::scope(|s| {
        for i in 0..n {
            let client = if i % 3 == 2 { others[i / 3 % 2] } else { ours };
            let mutex = DistributedMutex::new(client, path).unwrap();
            let (exclusion, acquired) = (&exclusion, &acquired);
            s.spawn(move || {
                if contend_with_plan(&mutex, plan(i), exclusion) {
                    acquired.fetch_add(1, SeqCst);
                }
            });
            // In this order in the queue, mostly.
            thread::sleep(Duration::from_millis(25));
        }
        // Some give up while the first holder holds.
        thread::sleep(Duration::from_millis(500));
        exclusion.leave();
        held.unlock().unwrap();
    });
    assert_eq!(exclusion.overlaps.load(SeqCst), 0, "two held at once");
    assert!(acquired.load(SeqCst) >= patient);
    assert!(nothing_left(ours, path), "nodes left behind");
}

/// Whether `path` is empty within a few seconds (a waiter that gave up may withdraw its node
/// in the background).
fn nothing_left(client: &Client, path: &str) -> bool {
    common::eventually(Duration::from_secs(5), || {
        common::children_count(client, path) == 0
    })
}

#[test]
fn one_sessions_waiters_among_others_keep_exclusion_while_nodes_ahead_withdraw() {
    let ours = common::client();
    let others = [common::client(), common::client()];
    let path = common::lock_path("floors-threads");
    mixed_queue(&ours, [&others[0], &others[1]], &path, 30);
}

/// Takes the lock with `lock_async` and holds it across an await; true if it held it.
async fn take_turn(mutex: DistributedMutex, exclusion: Arc<Exclusion>) -> bool {
    let guard = mutex.lock_async().await.expect("lock_async");
    // Left when dropped: a task aborted or timed out while it holds leaves too (and its guard,
    // dropped after, releases the lock in the background).
    struct Inside(Arc<Exclusion>);
    impl Drop for Inside {
        fn drop(&mut self) {
            self.0.leave();
        }
    }
    exclusion.enter();
    let inside = Inside(exclusion);
    tokio::time::sleep(Duration::from_millis(2)).await;
    drop(inside);
    guard.unlock_async().await.expect("unlock_async");
    true
}

#[test]
fn one_sessions_tasks_keep_exclusion_while_tasks_ahead_are_dropped() {
    // 150 tasks queue on one session, 50 of another session's among them; a sixth of them
    // give up by `tokio::time::timeout`, a sixth are aborted, at times spread over the first
    // holder's hold and the drain. The others must all take their turn, one at a time.
    let (ours, other) = (common::client(), common::client());
    let path = common::lock_path("floors-tasks");
    let mutex = DistributedMutex::new(&ours, &path).unwrap();
    let other_mutex = DistributedMutex::new(&other, &path).unwrap();
    let exclusion = Arc::new(Exclusion::default());
    let took = two_worker_runtime_block_on(async {
        let held = other_mutex.lock_async().await.unwrap();
        exclusion.enter();
        let (mut patient, mut abortable) = (Vec::new(), Vec::new());
        for i in 0..200usize {
            let mutex = if i % 4 == 3 { &other_mutex } else { &mutex };
            let turn = take_turn(mutex.clone(), exclusion.clone());
            match i % 6 {
                1 => {
                    let limit = Duration::from_millis(100 + 37 * i as u64 % 1200);
                    tokio::spawn(tokio::time::timeout(limit, turn));
                }
                4 => abortable.push(tokio::spawn(turn)),
                _ => patient.push(tokio::spawn(turn)),
            }
            if i % 10 == 9 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        // Half of the abortable ones go while the first holder holds, the rest in the drain.
        let late = abortable.split_off(abortable.len() / 2);
        tokio::time::sleep(Duration::from_millis(300)).await;
        for task in &abortable {
            task.abort();
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        exclusion.leave();
        held.unlock_async().await.unwrap();
        for (n, task) in late.iter().enumerate() {
            tokio::time::sleep(Duration::from_millis(n as u64 % 3 * 7)).await;
            task.abort();
        }
        let all = futures::future::join_all(patient);
        let outcomes = tokio::time::timeout(PATIENCE, all)
            .await
            .expect("a patient task was left waiting");
        outcomes.into_iter().map(Result::unwrap).count()
    });
    assert_eq!(took, (0..200).filter(|i| i % 6 != 1 && i % 6 != 4).count());
    assert_eq!(exclusion.overlaps.load(SeqCst), 0, "two held at once");
    assert!(nothing_left(&ours, &path), "nodes left behind");
}

fn two_worker_runtime_block_on<T>(future: impl std::future::Future<Output = T>) -> T {
    common::two_worker_runtime().block_on(future)
}

/// Who is inside a read/write lock, and how often the rule was broken.
#[derive(Default)]
struct Sides {
    readers: AtomicUsize,
    writers: AtomicUsize,
    broken: AtomicUsize,
    entered: AtomicUsize,
}

impl Sides {
    fn read(&self, for_: Duration) {
        self.entered.fetch_add(1, SeqCst);
        self.readers.fetch_add(1, SeqCst);
        if self.writers.load(SeqCst) != 0 {
            self.broken.fetch_add(1, SeqCst);
        }
        thread::sleep(for_);
        self.readers.fetch_sub(1, SeqCst);
    }

    fn write(&self, for_: Duration) {
        self.entered.fetch_add(1, SeqCst);
        if self.writers.fetch_add(1, SeqCst) != 0 || self.readers.load(SeqCst) != 0 {
            self.broken.fetch_add(1, SeqCst);
        }
        thread::sleep(for_);
        if self.readers.load(SeqCst) != 0 {
            self.broken.fetch_add(1, SeqCst);
        }
        self.writers.fetch_sub(1, SeqCst);
    }
}

#[test]
fn one_sessions_readers_and_writers_keep_the_rule_while_writers_give_up() {
    // Readers wait for the nearest writer before them only: a reader behind a writer that
    // gives up, itself behind another writer, must go on waiting for that one.
    let ours = common::client();
    let other = common::client();
    let path = common::lock_path("floors-rwlock");
    let first = DistributedRwLock::new(&other, &path).unwrap();
    let sides = Sides::default();
    let held = first.write().unwrap();
    sides.writers.fetch_add(1, SeqCst);
    let (patient, acquired) = (AtomicUsize::new(0), AtomicUsize::new(0));
    thread::scope(|s| {
        for i in 0..30usize {
            let client = if i % 4 == 3 { &other } else { &ours };
            let lock = DistributedRwLock::new(client, &path).unwrap();
            // Writers every third, every other one of them giving up (and a few readers),
            // at times spread over the first writer's hold and the drain.
            let writer = i % 3 == 0;
            let gives_up = (writer && i % 2 == 1) || i % 11 == 5;
            let limit = Duration::from_millis(200 + 61 * i as u64 % 1000);
            if !gives_up {
                patient.fetch_add(1, SeqCst);
            }
            let (sides, acquired) = (&sides, &acquired);
            s.spawn(move || {
                let guard = match (writer, gives_up) {
                    (true, false) => Some(lock.write_timeout(PATIENCE).unwrap().expect("stuck")),
                    (false, false) => Some(lock.read_timeout(PATIENCE).unwrap().expect("stuck")),
                    (true, true) => lock.write_timeout(limit).unwrap(),
                    (false, true) => lock.read_timeout(limit).unwrap(),
                };
                let Some(guard) = guard else { return };
                if writer {
                    sides.write(Duration::from_millis(15));
                } else {
                    sides.read(Duration::from_millis(15));
                }
                acquired.fetch_add(1, SeqCst);
                guard.unlock().unwrap();
            });
            thread::sleep(Duration::from_millis(25));
        }
        thread::sleep(Duration::from_millis(500));
        sides.writers.fetch_sub(1, SeqCst);
        held.unlock().unwrap();
    });
    assert_eq!(
        sides.broken.load(SeqCst),
        0,
        "a reader met a writer, or two writers met"
    );
    assert!(acquired.load(SeqCst) >= patient.load(SeqCst));
    assert!(nothing_left(&ours, &path), "nodes left behind");
}

#[test]
fn a_reader_let_pass_is_not_taken_for_gone() {
    // Queue: W1 writes; R1 (another session) and R2 (ours) wait to read, then W2 (ours) to
    // write. When W1 goes both read; R2 has nothing in its way, but R1 is still there ahead of
    // it, so R2 holding proves nothing of R1. When R2 is done, W2 must go on waiting for R1.
    let (ours, other) = (common::client(), common::client());
    let path = common::lock_path("floors-reader-let-pass");
    let first = DistributedRwLock::new(&other, &path).unwrap();
    let lock = DistributedRwLock::new(&ours, &path).unwrap();
    let sides = Sides::default();
    let w1 = first.write().unwrap();
    sides.writers.fetch_add(1, SeqCst);
    let [r1_reads, r1_may_go, r2_done, w2_writes] = [(); 4].map(|()| AtomicBool::new(false));
    let w2_early = thread::scope(|s| {
        s.spawn(|| {
            let guard = first.read_timeout(PATIENCE).unwrap().expect("R1 stuck");
            sides.readers.fetch_add(1, SeqCst);
            r1_reads.store(true, SeqCst);
            // (Bounded: a failing test must not hang.)
            common::eventually(PATIENCE, || r1_may_go.load(SeqCst));
            sides.readers.fetch_sub(1, SeqCst);
            guard.unlock().unwrap();
        });
        assert!(common::wait_contenders(&first, 2, PATIENCE));
        s.spawn(|| {
            let guard = lock.read_timeout(PATIENCE).unwrap().expect("R2 stuck");
            sides.read(Duration::from_millis(20));
            guard.unlock().unwrap();
            r2_done.store(true, SeqCst);
        });
        assert!(common::wait_contenders(&first, 3, PATIENCE));
        s.spawn(|| {
            let guard = lock.write_timeout(PATIENCE).unwrap().expect("W2 stuck");
            w2_writes.store(true, SeqCst);
            sides.write(Duration::from_millis(20));
            guard.unlock().unwrap();
        });
        assert!(common::wait_contenders(&first, 4, PATIENCE));
        sides.writers.fetch_sub(1, SeqCst);
        w1.unlock().unwrap();
        assert!(common::eventually(PATIENCE, || {
            r1_reads.load(SeqCst) && r2_done.load(SeqCst)
        }));
        thread::sleep(Duration::from_millis(500));
        let early = w2_writes.load(SeqCst);
        r1_may_go.store(true, SeqCst);
        early
    });
    assert!(!w2_early, "W2 wrote while R1 read");
    assert!(w2_writes.load(SeqCst));
    assert_eq!(sides.broken.load(SeqCst), 0);
}

/// The lock nodes under `path` by sequence number, in order.
fn sequences(raw: &RawClient, path: &str) -> Vec<i64> {
    let mut seqs: Vec<i64> = raw
        .children(path)
        .iter()
        .map(|name| name.rsplit("lock-").next().unwrap().parse().unwrap())
        .collect();
    seqs.sort_unstable();
    seqs
}

/// Another session holds the lock; a waiter of a third session queued just before `ours`'s
/// gives up (cancelled: its node goes while the holder still holds), which wakes ours: ours
/// must go on waiting for the holder, and get the lock once the holder lets go. `check_queue`
/// looks at the three nodes' numbers.
fn withdrawal_ahead_while_held(
    connect: &str,
    [ours, other, third]: [&Client; 3],
    path: &str,
    check_queue: impl Fn(&[i64]),
) {
    let raw = RawClient::connect(connect);
    let exclusion = Exclusion::default();
    let holder_mutex = DistributedMutex::new(other, path).unwrap();
    let held = holder_mutex.lock().unwrap();
    exclusion.enter();
    let acquired = AtomicBool::new(false);
    let token = CancelToken::new();
    thread::scope(|s| {
        // Should an assertion fail, the withdrawing waiter must not wait for ever.
        struct CancelOnDrop<'a>(&'a CancelToken);
        impl Drop for CancelOnDrop<'_> {
            fn drop(&mut self) {
                self.0.cancel();
            }
        }
        let _cancel = CancelOnDrop(&token);
        let withdrawing = s.spawn(|| {
            let mutex = DistributedMutex::new(third, path).unwrap();
            mutex
                .lock_with(zklock::Wait::forever().cancel_on(&token))
                .map(|g| g.expect("no timeout was given"))
                .map(|_| ())
        });
        assert!(common::wait_contenders(&holder_mutex, 2, PATIENCE));
        let waiter = s.spawn(|| {
            let mutex = DistributedMutex::new(ours, path).unwrap();
            let guard = mutex.lock_timeout(PATIENCE).unwrap();
            acquired.store(true, SeqCst);
            let guard = guard.expect("ours was left waiting");
            hold(&exclusion, Duration::from_millis(20));
            guard.unlock().unwrap();
        });
        assert!(common::wait_contenders(&holder_mutex, 3, PATIENCE));
        check_queue(&sequences(&raw, path));
        // Let ours set its watch on the node before it, then take that node away.
        thread::sleep(Duration::from_millis(200));
        token.cancel();
        assert!(matches!(withdrawing.join().unwrap(), Err(Error::Cancelled)));
        // Ours was woken by that node going, and must be waiting again.
        thread::sleep(Duration::from_millis(500));
        assert!(
            !acquired.load(SeqCst),
            "ours took the lock while {} held it",
            held.node_path()
        );
        exclusion.leave();
        held.unlock().unwrap();
        waiter.join().unwrap();
    });
    assert_eq!(exclusion.overlaps.load(SeqCst), 0);
    assert_eq!(exclusion.entered.load(SeqCst), 2);
}

#[test]
fn what_was_learnt_of_a_swept_lock_path_does_not_apply_to_the_next_one() {
    // A lock path the server swept (an empty container) and that is made again numbers its
    // nodes from 0: below what the session learnt of the old one, yet not gone.
    let server = PrivateServer::start("-Dznode.container.checkIntervalMs=1000");
    let connect = server.connect_string();
    let clients = [(); 3].map(|()| common::client_at(&connect, common::SESSION_TIMEOUT));
    let [ours, other, third] = &clients;
    let path = "/swept/lock";
    let raw = RawClient::connect(&connect);
    let mutex = DistributedMutex::new(ours, path).unwrap();
    // Ours holds with nothing ahead, numbered up to 13 by the end: every node below is gone,
    // it learns of this incarnation.
    for _ in 0..12 {
        mutex.lock().unwrap().unlock().unwrap();
    }
    // With a waiter behind a holder of its own session too.
    let held = mutex.lock().unwrap();
    thread::scope(|s| {
        let waiter = s.spawn(|| mutex.lock().unwrap().unlock().unwrap());
        assert!(common::wait_contenders(&mutex, 2, Duration::from_secs(5)));
        held.unlock().unwrap();
        waiter.join().unwrap();
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while raw.exists(path) {
        assert!(Instant::now() < deadline, "the server did not sweep {path}");
        thread::sleep(Duration::from_millis(50));
    }
    withdrawal_ahead_while_held(&connect, [ours, other, third], path, |queue| {
        assert_eq!(queue, [0, 1, 2], "not a new incarnation numbering from 0");
    });
    // And a longer queue, mixed and withdrawing, on the incarnation after that one.
    let deadline = Instant::now() + Duration::from_secs(10);
    while raw.exists(path) {
        assert!(Instant::now() < deadline, "the server did not sweep {path}");
        thread::sleep(Duration::from_millis(50));
    }
    mixed_queue(ours, [other, third], path, 15);
}

#[test]
fn a_waiter_whose_node_is_deleted_while_its_way_is_known_clear_never_holds() {
    // Queue: A (another session) holds, then B and C of one session wait. When A goes, B holds
    // with nothing ahead and the session learns that A is gone: C, waiting for B, then needs
    // no listing when B goes. An operator deletes C's node first (and, in the second round,
    // puts a node of the same name in its place): C must fail, never hold, and D, another
    // session's waiter behind C, must get the lock after B.
    for round in ["deleted", "replaced"] {
        let raw = RawClient::connect(&common::connect_string());
        let clients = [(); 3].map(|()| common::client());
        let [a, ours, d] = &clients;
        let path = common::lock_path(&format!("floors-own-node-{round}"));
        let a_mutex = DistributedMutex::new(a, &path).unwrap();
        let held_a = a_mutex.lock().unwrap();
        let exclusion = Exclusion::default();
        let mutex = DistributedMutex::new(ours, &path).unwrap();
        let (b_holds, b_may_go) = (AtomicBool::new(false), AtomicBool::new(false));
        thread::scope(|s| {
            let b = s.spawn(|| {
                let guard = mutex.lock_timeout(PATIENCE).unwrap().expect("B stuck");
                exclusion.enter();
                b_holds.store(true, SeqCst);
                // (Bounded: a failing test must not hang.)
                common::eventually(PATIENCE, || b_may_go.load(SeqCst));
                exclusion.leave();
                guard.unlock().unwrap();
            });
            assert!(common::wait_contenders(&a_mutex, 2, PATIENCE));
            let c = s.spawn(|| {
                let outcome = mutex.lock_timeout(PATIENCE);
                if let Ok(Some(_)) = &outcome {
                    // Whatever the library believes, count it as a holder.
                    exclusion.enter();
                    thread::sleep(Duration::from_millis(200));
                    exclusion.leave();
                }
                outcome.map(|g| g.is_some())
            });
            assert!(common::wait_contenders(&a_mutex, 3, PATIENCE));
            let d_waiter = s.spawn(|| {
                let guard = DistributedMutex::new(d, &path)
                    .unwrap()
                    .lock_timeout(PATIENCE)
                    .unwrap()
                    .expect("D stuck");
                hold(&exclusion, Duration::from_millis(50));
                guard.unlock().unwrap();
            });
            assert!(common::wait_contenders(&a_mutex, 4, PATIENCE));
            let c_node = format!("{path}/{}", a_mutex.contenders().unwrap()[2].node_name);
            held_a.unlock().unwrap();
            assert!(common::eventually(PATIENCE, || b_holds.load(SeqCst)));
            // Let C's watch on B's node settle, then take C's node away.
            thread::sleep(Duration::from_millis(200));
            raw.delete_back_to_back(&[&c_node]);
            let impostor = (round == "replaced").then(|| common::create_ephemeral(&c_node));
            thread::sleep(Duration::from_millis(100));
            b_may_go.store(true, SeqCst);
            b.join().unwrap();
            match c.join().unwrap() {
                Err(Error::LockLost { .. }) => {}
                other => panic!("{round}: C, whose node went, got {other:?}"),
            }
            // (D waits for the node in C's place.)
            drop(impostor);
            d_waiter.join().unwrap();
        });
        assert_eq!(
            exclusion.overlaps.load(SeqCst),
            0,
            "{round}: two held at once"
        );
        assert_eq!(exclusion.entered.load(SeqCst), 2, "{round}: B and D, not C");
    }
}

#[test]
fn reconnects_during_a_drain_of_one_sessions_waiters_keep_exclusion() {
    // One session, through a proxy that keeps cutting its connection, queues most of the
    // waiters; another session's are among them, some of both give up. A reconnect wakes
    // every waiter, between what the session learnt and the handoffs it spares.
    let proxy = Proxy::start(&common::connect_string());
    let ours = common::client_via(&proxy, Duration::from_secs(10));
    let other = common::client();
    let path = common::lock_path("floors-reconnects");
    let first = DistributedMutex::new(&other, &path).unwrap();
    let exclusion = Exclusion::default();
    let held = first.lock().unwrap();
    exclusion.enter();
    let done = AtomicBool::new(false);
    let (patient, acquired) = (AtomicUsize::new(0), AtomicUsize::new(0));
    thread::scope(|s| {
        let mut waiters = Vec::new();
        for i in 0..24usize {
            let client = if i % 3 == 1 { &other } else { &ours };
            let mutex = DistributedMutex::new(client, &path).unwrap();
            let gives_up = i % 5 == 2;
            if !gives_up {
                patient.fetch_add(1, SeqCst);
            }
            let (exclusion, acquired) = (&exclusion, &acquired);
            waiters.push(s.spawn(move || {
                let limit = Duration::from_millis(if gives_up { 300 + 97 * i as u64 } else { 0 });
                let guard = if gives_up {
                    // A reconnect can make the attempt end undecided: that is giving up too.
                    match mutex.lock_timeout(limit) {
                        Ok(guard) => guard,
                        Err(Error::ConnectionLoss { .. }) => None,
                        Err(err) => panic!("{err}"),
                    }
                } else {
                    Some(mutex.lock_timeout(PATIENCE).unwrap().expect("stuck"))
                };
                let Some(guard) = guard else { return };
                hold(exclusion, Duration::from_millis(20));
                acquired.fetch_add(1, SeqCst);
                // A cut connection may fail the release; the node goes in the background.
                let _ = guard.unlock();
            }));
            thread::sleep(Duration::from_millis(20));
        }
        let cutter = s.spawn(|| {
            while !done.load(SeqCst) {
                thread::sleep(Duration::from_millis(250));
                proxy.sever();
            }
        });
        thread::sleep(Duration::from_millis(400));
        exclusion.leave();
        held.unlock().unwrap();
        for waiter in waiters {
            waiter.join().unwrap();
        }
        done.store(true, SeqCst);
        cutter.join().unwrap();
    });
    assert_eq!(exclusion.overlaps.load(SeqCst), 0, "two held at once");
    assert!(acquired.load(SeqCst) >= patient.load(SeqCst));
}

#[test]
fn an_outage_between_learning_and_the_handoff_neither_strands_nor_doubles() {
    // Queue: A (another session) holds, B and C of one session (through a proxy) wait, then D
    // of another session. A goes: B holds with nothing ahead, and the session learns A gone,
    // which spares C a listing at B's release. Then the session loses its connection for a
    // while; in the second round an operator deletes C's node meanwhile. After the reconnect,
    // B lets go: C must hold (first round) or fail (second), and D must hold after them.
    let proxy = Proxy::start(&common::connect_string());
    let ours = common::client_via(&proxy, Duration::from_secs(10));
    let other = common::client();
    let raw = RawClient::connect(&common::connect_string());
    for c_node_deleted in [false, true] {
        let path = common::lock_path("floors-outage");
        let a_mutex = DistributedMutex::new(&other, &path).unwrap();
        let mutex = DistributedMutex::new(&ours, &path).unwrap();
        let held_a = a_mutex.lock().unwrap();
        let exclusion = Exclusion::default();
        let (b_holds, b_may_go) = (AtomicBool::new(false), AtomicBool::new(false));
        thread::scope(|s| {
            let b = s.spawn(|| {
                let guard = mutex.lock_timeout(PATIENCE).unwrap().expect("B stuck");
                exclusion.enter();
                b_holds.store(true, SeqCst);
                common::eventually(PATIENCE, || b_may_go.load(SeqCst));
                exclusion.leave();
                guard.unlock()
            });
            assert!(common::wait_contenders(&a_mutex, 2, PATIENCE));
            let c = s.spawn(|| {
                let guard = mutex.lock_timeout(PATIENCE)?;
                if guard.is_some() {
                    hold(&exclusion, Duration::from_millis(50));
                }
                Ok::<_, Error>(guard.map(|g| g.unlock()))
            });
            assert!(common::wait_contenders(&a_mutex, 3, PATIENCE));
            let d = s.spawn(|| {
                let guard = a_mutex.lock_timeout(PATIENCE).unwrap().expect("D stuck");
                hold(&exclusion, Duration::from_millis(20));
                guard.unlock().unwrap();
            });
            assert!(common::wait_contenders(&a_mutex, 4, PATIENCE));
            let c_node = format!("{path}/{}", a_mutex.contenders().unwrap()[2].node_name);
            held_a.unlock().unwrap();
            assert!(common::eventually(PATIENCE, || b_holds.load(SeqCst)));
            proxy.refuse(true);
            proxy.sever();
            thread::sleep(Duration::from_millis(300));
            if c_node_deleted {
                raw.delete_back_to_back(&[&c_node]);
            }
            thread::sleep(Duration::from_millis(300));
            proxy.refuse(false);
            // Once the session is back, B lets go.
            assert!(common::eventually(PATIENCE, || mutex.contenders().is_ok()));
            b_may_go.store(true, SeqCst);
            b.join().unwrap().unwrap();
            match (c_node_deleted, c.join().unwrap()) {
                (false, Ok(Some(released))) => released.unwrap(),
                (true, Err(Error::LockLost { .. })) => {}
                (_, outcome) => panic!("C (node deleted: {c_node_deleted}) got {outcome:?}"),
            }
            d.join().unwrap();
        });
        assert_eq!(exclusion.overlaps.load(SeqCst), 0, "two held at once");
        let holders = if c_node_deleted { 2 } else { 3 };
        assert_eq!(exclusion.entered.load(SeqCst), holders);
    }
}

#[test]
fn one_sessions_participants_never_lead_together() {
    // An election on one session (and another's participants among them), participants
    // leaving the queue before their turn while a leader leads.
    let ours = common::client();
    let other = common::client();
    let path = common::lock_path("floors-election");
    let first = LeaderElection::new(&other, &path).unwrap();
    let exclusion = Exclusion::default();
    let leading = first.participate().unwrap();
    exclusion.enter();
    let (patient, led) = (AtomicUsize::new(0), AtomicUsize::new(0));
    thread::scope(|s| {
        for i in 0..20usize {
            let client = if i % 4 == 2 { &other } else { &ours };
            let election = LeaderElection::new(client, &path).unwrap();
            let leaves = i % 3 == 1;
            if !leaves {
                patient.fetch_add(1, SeqCst);
            }
            let (exclusion, led) = (&exclusion, &led);
            s.spawn(move || {
                let limit = if leaves {
                    Duration::from_millis(200 + 71 * i as u64 % 700)
                } else {
                    PATIENCE
                };
                let Some(leadership) = election.participate_timeout(limit).unwrap() else {
                    assert!(leaves, "a patient participant never led");
                    return;
                };
                hold(exclusion, Duration::from_millis(15));
                led.fetch_add(1, SeqCst);
                leadership.unlock().unwrap();
            });
            thread::sleep(Duration::from_millis(25));
        }
        thread::sleep(Duration::from_millis(400));
        exclusion.leave();
        leading.unlock().unwrap();
    });
    assert_eq!(exclusion.overlaps.load(SeqCst), 0, "two leaders at once");
    assert!(led.load(SeqCst) >= patient.load(SeqCst));
}

#[test]
fn one_sessions_semaphore_takers_stay_within_the_permits() {
    // The gate in front of a semaphore's leases is a mutex on the same wait loop: takers of
    // one session queue at it with another's, some giving up.
    let ours = common::client();
    let other = common::client();
    let path = common::lock_path("floors-semaphore");
    let permits = 2;
    let inside = AtomicUsize::new(0);
    let (most, over) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let first = Semaphore::new(&other, &path, permits).unwrap();
    let held = [first.acquire().unwrap(), first.acquire().unwrap()];
    inside.store(permits, SeqCst);
    let (patient, took) = (AtomicUsize::new(0), AtomicUsize::new(0));
    thread::scope(|s| {
        for i in 0..20usize {
            let client = if i % 4 == 2 { &other } else { &ours };
            let semaphore = Semaphore::new(client, &path, permits).unwrap();
            let gives_up = i % 4 == 1;
            if !gives_up {
                patient.fetch_add(1, SeqCst);
            }
            let (inside, most, over, took) = (&inside, &most, &over, &took);
            s.spawn(move || {
                let limit = if gives_up {
                    Duration::from_millis(200 + 83 * i as u64 % 900)
                } else {
                    PATIENCE
                };
                let Some(permit) = semaphore.acquire_timeout(limit).unwrap() else {
                    assert!(gives_up, "a patient taker was left waiting");
                    return;
                };
                let now = inside.fetch_add(1, SeqCst) + 1;
                most.fetch_max(now, SeqCst);
                if now > permits {
                    over.fetch_add(1, SeqCst);
                }
                thread::sleep(Duration::from_millis(20));
                inside.fetch_sub(1, SeqCst);
                took.fetch_add(1, SeqCst);
                permit.unlock().unwrap();
            });
            thread::sleep(Duration::from_millis(25));
        }
        thread::sleep(Duration::from_millis(400));
        for permit in held {
            inside.fetch_sub(1, SeqCst);
            permit.unlock().unwrap();
        }
    });
    assert_eq!(over.load(SeqCst), 0, "more than {permits} held at once");
    assert!(most.load(SeqCst) <= permits);
    assert!(took.load(SeqCst) >= patient.load(SeqCst));
}
