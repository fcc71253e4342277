//! Read/write lock, semaphore, multi-lock, revocation and leader election against a real
//! server.

mod common;

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use zklock::inspect::Role;
use zklock::{
    CancelToken, Client, DistributedMutex, DistributedRwLock, Error, LeaderElection, LockState,
    MultiLock, Semaphore,
};

fn append(log: &str, line: String) {
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .open(log)
        .unwrap();
    file.write_all(format!("{line}\n").as_bytes()).unwrap();
}

/// Reader/writer cycles that log `R+`/`R-`/`W+`/`W-` lines.
fn rw_cycles(client: &Client, path: &str, log: &str, threads: usize, tag: &str) {
    let lock = DistributedRwLock::new(client, path).unwrap();
    thread::scope(|s| {
        for t in 0..threads {
            let (lock, who) = (&lock, format!("{tag}-{t}"));
            s.spawn(move || {
                for i in 0..8 {
                    if (i + t) % 3 == 0 {
                        let guard = lock.write().unwrap();
                        append(log, format!("W+ {who}"));
                        thread::sleep(Duration::from_millis(2));
                        append(log, format!("W- {who}"));
                        guard.unlock().unwrap();
                    } else {
                        let guard = lock.read().unwrap();
                        append(log, format!("R+ {who}"));
                        thread::sleep(Duration::from_millis(2));
                        append(log, format!("R- {who}"));
                        guard.unlock().unwrap();
                    }
                }
            });
        }
    });
}

#[test]
#[ignore = "run as a child process by other tests"]
fn worker_rw() {
    let var = |k: &str| std::env::var(k).unwrap();
    rw_cycles(
        &common::client(),
        &var("LOCK"),
        &var("LOG"),
        3,
        &format!("p{}", std::process::id()),
    );
}

#[test]
fn rwlock_excludes_writers_across_processes_and_shares_reads() {
    let path = common::lock_path("rw");
    let log = std::env::temp_dir().join(format!("zklock-rw-{}.log", uuid::Uuid::new_v4().simple()));
    let log = log.to_str().unwrap().to_owned();
    let worker = common::spawn_worker("worker_rw", &[("LOCK", path.clone()), ("LOG", log.clone())]);
    let client = common::client();
    rw_cycles(&client, &path, &log, 4, "here");
    assert!(worker.wait_with_output().unwrap().status.success());
    let (mut readers, mut writer, mut max_readers) = (0usize, false, 0usize);
    for line in std::fs::read_to_string(&log).unwrap().lines() {
        match &line[..2] {
            "R+" => {
                assert!(!writer, "reader entered while a writer held the lock");
                readers += 1;
                max_readers = max_readers.max(readers);
            }
            "R-" => readers -= 1,
            "W+" => {
                assert!(
                    !writer && readers == 0,
                    "writer entered while the lock was held"
                );
                writer = true;
            }
            _ => writer = false,
        }
    }
    assert!(max_readers > 1, "readers never shared the lock");
    assert!(DistributedRwLock::new(&client, &path)
        .unwrap()
        .contenders()
        .unwrap()
        .is_empty());
    let _ = std::fs::remove_file(&log);
}

#[test]
fn queued_writer_holds_back_later_readers() {
    let (a, b, c) = (common::client(), common::client(), common::client());
    let path = common::lock_path("rw-fair");
    let first = DistributedRwLock::new(&a, &path).unwrap();
    let reading = first.read().unwrap();
    let writer_lock = DistributedRwLock::new(&b, &path).unwrap();
    let late = DistributedRwLock::new(&c, &path).unwrap();
    assert!(
        late.try_read().unwrap().is_some(),
        "readers share while no writer waits"
    );
    thread::scope(|s| {
        let writer = s.spawn(|| writer_lock.write().unwrap().unlock().unwrap());
        assert!(common::wait_contenders(&first, 2, Duration::from_secs(5)));
        let queue = first.contenders().unwrap();
        assert_eq!((queue[0].role, queue[1].role), (Role::Read, Role::Write));
        assert!(
            late.try_read().unwrap().is_none(),
            "a reader jumped a queued writer"
        );
        assert!(late
            .read_timeout(Duration::from_millis(200))
            .unwrap()
            .is_none());
        drop(reading);
        writer.join().unwrap();
    });
    assert!(late.try_read().unwrap().is_some());
}

#[test]
fn semaphore_admits_at_most_its_permits() {
    let path = common::lock_path("sem");
    let clients: Vec<Client> = (0..3).map(|_| common::client()).collect();
    let (inside, peak) = (AtomicUsize::new(0), AtomicUsize::new(0));
    thread::scope(|s| {
        for t in 0..8 {
            let (client, path, inside, peak) = (&clients[t % 3], &path, &inside, &peak);
            s.spawn(move || {
                let semaphore = Semaphore::new(client, path, 3).unwrap();
                for _ in 0..5 {
                    let permit = semaphore.acquire().unwrap();
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    assert!(now <= 3, "{now} holders of a 3-permit semaphore");
                    thread::sleep(Duration::from_millis(10));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    permit.unlock().unwrap();
                }
            });
        }
    });
    assert_eq!(peak.load(Ordering::SeqCst), 3);
    assert!(Semaphore::new(&clients[0], &path, 3)
        .unwrap()
        .contenders()
        .unwrap()
        .is_empty());
}

#[test]
fn semaphore_many_timeouts_and_bad_counts() {
    let (a, b) = (common::client(), common::client());
    let path = common::lock_path("sem-many");
    let mine = Semaphore::new(&a, &path, 3).unwrap();
    let theirs = Semaphore::new(&b, &path, 3).unwrap();
    let two = mine.acquire_many(2).unwrap();
    assert_eq!(two.count(), 2);
    assert!(two.is_held());
    // Only one lease left: asking for two times out, all or nothing, leaving nothing behind.
    assert!(theirs
        .acquire_many_timeout(2, Duration::from_millis(300))
        .unwrap()
        .is_none());
    assert_eq!(mine.contenders().unwrap().len(), 2);
    let one = theirs.try_acquire().unwrap().expect("one lease free");
    assert!(theirs.try_acquire().unwrap().is_none());
    assert!(theirs
        .acquire_timeout(Duration::from_millis(200))
        .unwrap()
        .is_none());
    assert_eq!(
        mine.contenders()
            .unwrap()
            .iter()
            .filter(|l| l.role == Role::Lease)
            .count(),
        3
    );
    drop((two, one));
    assert!(mine.contenders().unwrap().is_empty());
    assert!(matches!(
        Semaphore::new(&a, &path, 0),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        mine.acquire_many(4),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
#[ignore = "run as a child process by other tests"]
fn worker_hold_lease() {
    let client = common::client_with(Duration::from_secs(2));
    let semaphore = Semaphore::new(&client, &std::env::var("LOCK").unwrap(), 1).unwrap();
    let _permit = semaphore.acquire().unwrap();
    println!("LEASED");
    std::io::stdout().flush().unwrap();
    thread::sleep(Duration::from_secs(120));
}

#[test]
fn killed_lease_holder_frees_its_lease() {
    let path = common::lock_path("sem-kill");
    let mut child = common::spawn_worker("worker_hold_lease", &[("LOCK", path.clone())]);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("LEASED") {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "worker exited before leasing"
        );
    }
    let client = common::client();
    let semaphore = Semaphore::new(&client, &path, 1).unwrap();
    assert!(semaphore.try_acquire().unwrap().is_none());
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(semaphore
        .acquire_timeout(Duration::from_secs(30))
        .unwrap()
        .is_some());
}

#[test]
fn multilock_in_opposite_orders_never_deadlocks_and_is_all_or_nothing() {
    let (a, b) = (common::client(), common::client());
    let base = common::lock_path("multi");
    let (x, y) = (format!("{base}/x"), format!("{base}/y"));
    thread::scope(|s| {
        // The same locks (a mutex at x, a write lock at y: one recipe per path), given in
        // opposite orders.
        for (client, mutex_first) in [(&a, true), (&b, false)] {
            let (x, y) = (&x, &y);
            s.spawn(move || {
                let both = if mutex_first {
                    MultiLock::new(client).mutex(x).unwrap().write_lock(y)
                } else {
                    MultiLock::new(client).write_lock(y).unwrap().mutex(x)
                }
                .unwrap();
                for _ in 0..15 {
                    let guard = both.lock().unwrap();
                    assert!(guard.is_held());
                    guard.unlock().unwrap();
                }
            });
        }
    });
    // y busy elsewhere: taking both times out and leaves x free.
    let y_holder = DistributedRwLock::new(&b, &y).unwrap();
    let held_y = y_holder.write().unwrap();
    let both = MultiLock::new(&a)
        .mutex(&x)
        .unwrap()
        .write_lock(&y)
        .unwrap();
    assert_eq!(both.paths(), vec![x.as_str(), y.as_str()]);
    assert!(both
        .lock_timeout(Duration::from_millis(300))
        .unwrap()
        .is_none());
    assert!(
        DistributedMutex::new(&b, &x)
            .unwrap()
            .try_lock()
            .unwrap()
            .is_some(),
        "x left held"
    );
    drop(held_y);
    assert!(matches!(
        MultiLock::new(&a).mutex(&x).unwrap().mutex(&x),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn an_empty_multi_lock_is_refused() {
    let client = common::client();
    let empty = MultiLock::new(&client);
    assert!(matches!(empty.lock(), Err(Error::InvalidArgument(_))));
    assert!(matches!(empty.try_lock(), Err(Error::InvalidArgument(_))));
    let wait = zklock::Wait::timeout(Duration::from_secs(1));
    assert!(matches!(
        empty.lock_with(wait),
        Err(Error::InvalidArgument(_))
    ));
}

/// A permit of several leases and a multi-lock's guard answer the calls a lock guard does:
/// state, lease, loss of any one node, fencing tokens, release.
#[test]
fn permits_and_multi_guards_offer_the_lock_guard_calls() {
    let (a, b) = (common::client(), common::client());
    let path = common::lock_path("guard-calls-semaphore");
    let semaphore = Semaphore::new(&a, &path, 3).unwrap();
    let permit = semaphore
        .try_acquire_many(2)
        .unwrap()
        .expect("a free semaphore");
    assert_eq!(permit.count(), 2);
    assert!(permit.is_held());
    let lease = permit.lease_remaining().expect("held, so a lease");
    assert!(
        lease > Duration::ZERO && lease < a.session_timeout(),
        "{lease:?}"
    );
    let tokens = permit.tokens();
    assert_eq!(tokens.len(), 2);
    assert_eq!(permit.fencing(), tokens[0]);
    assert!(tokens[0] < tokens[1], "{tokens:?}");
    assert_eq!(permit.session_id(), a.session_id());

    // Two more leases do not fit: `try_acquire_many` says so at once and leaves nothing.
    let other = Semaphore::new(&b, &path, 3).unwrap();
    assert!(other.try_acquire_many(2).unwrap().is_none());
    assert_eq!(other.contenders().unwrap().len(), 2);
    assert!(matches!(
        other.try_acquire_many(4),
        Err(Error::InvalidArgument(_))
    ));

    // The watchdog's waits end on a timeout or a token while every lease is held.
    let wait = zklock::Wait::timeout(Duration::from_millis(100));
    assert_eq!(permit.wait_lost_with(wait), None);
    let stop = CancelToken::new();
    stop.cancel();
    assert_eq!(
        permit.wait_lost_with(zklock::Wait::forever().cancel_on(&stop)),
        None
    );
    // Losing one lease (broken by an operator) loses the permit.
    let second = permit.node_paths()[1].to_owned();
    let broken = other
        .contenders()
        .unwrap()
        .into_iter()
        .find(|c| second.ends_with(&c.node_name))
        .expect("our second lease is listed");
    assert!(other.break_contender(&broken).unwrap());
    assert_eq!(
        permit.wait_lost_timeout(Duration::from_secs(5)),
        Some(LockState::Lost)
    );
    assert!(permit.lease_remaining().is_none());
    assert!(matches!(permit.unlock(), Err(Error::LockLost { .. })));
    assert!(other.contenders().unwrap().is_empty(), "a lease was left");

    let (x, y) = (
        common::lock_path("guard-calls-x"),
        common::lock_path("guard-calls-y"),
    );
    let multi = MultiLock::new(&a).mutex(&x).unwrap().mutex(&y).unwrap();
    let both = multi.lock().unwrap();
    assert!(both.is_held());
    assert!(both.lease_remaining().is_some());
    let tokens = both.tokens();
    let each: Vec<_> = both.guards().iter().map(|g| g.fencing()).collect();
    assert_eq!(tokens, each);
    assert_eq!(both.fencing(), tokens[0]);
    assert_eq!(both.session_id(), a.session_id());
    let y_mutex = DistributedMutex::new(&b, &y).unwrap();
    let holder = y_mutex.contenders().unwrap().remove(0);
    assert!(y_mutex.break_contender(&holder).unwrap());
    assert_eq!(
        both.wait_lost_timeout(Duration::from_secs(5)),
        Some(LockState::Lost)
    );
    assert!(matches!(
        both.unlock_timeout(Duration::from_secs(5)),
        Err(Error::LockLost { .. })
    ));
    // The other lock was released all the same.
    let x_mutex = DistributedMutex::new(&b, &x).unwrap();
    assert!(x_mutex.try_lock().unwrap().is_some(), "x left held");
}

#[test]
fn revocation_request_reaches_a_revocable_holder() {
    let (a, b) = (common::client(), common::client());
    let path = common::lock_path("revoke");
    let holder_mutex = DistributedMutex::new(&a, &path).unwrap().revocable();
    let guard = holder_mutex.lock().unwrap();
    assert!(!guard.wait_revocation_timeout(Duration::from_millis(100)));
    let other = DistributedMutex::new(&b, &path).unwrap();
    let holder = other.contenders().unwrap().remove(0);
    assert!(other.request_revocation(&holder).unwrap());
    assert!(
        guard.wait_revocation_timeout(Duration::from_secs(5)),
        "holder never heard"
    );
    assert!(guard.revocation_requested());
    assert!(
        guard.is_held(),
        "revocation is a request; the holder decides"
    );
    drop(guard);
    assert!(other.try_lock().unwrap().is_some());
}

#[test]
fn leader_election_hands_over_in_order() {
    let (a, b) = (common::client(), common::client());
    let path = common::lock_path("election");
    let first = LeaderElection::new(&a, &path)
        .unwrap()
        .participant_id("node-a");
    let second = LeaderElection::new(&b, &path)
        .unwrap()
        .participant_id("node-b");
    let leading = first.participate().unwrap();
    assert_eq!(second.current_leader().unwrap().unwrap().owner, "node-a");
    thread::scope(|s| {
        let next = s.spawn(|| {
            let leadership = second.participate().unwrap();
            assert!(leadership.is_held());
            leadership.fencing().zxid()
        });
        assert!(common::wait_contenders(&first, 2, Duration::from_secs(5)));
        let ids: Vec<String> = first
            .contenders()
            .unwrap()
            .into_iter()
            .map(|p| p.owner)
            .collect();
        assert_eq!(ids, vec!["node-a", "node-b"]);
        let token = leading.fencing().zxid();
        drop(leading);
        assert!(next.join().unwrap() > token);
    });
    assert!(first.current_leader().unwrap().is_none());
}

#[test]
fn revocable_holder_sees_its_node_broken_at_once() {
    let (a, b) = (common::client(), common::client());
    let path = common::lock_path("broken");
    let holder_mutex = DistributedMutex::new(&a, &path).unwrap().revocable();
    let guard = holder_mutex.lock().unwrap();
    let operator = DistributedMutex::new(&b, &path).unwrap();
    thread::scope(|s| {
        let watcher = s.spawn(|| guard.wait_lost());
        let holder = operator.contenders().unwrap().remove(0);
        assert!(operator.break_contender(&holder).unwrap());
        assert_eq!(watcher.join().unwrap(), zklock::LockState::Lost);
    });
    assert!(!guard.is_held());
    assert!(matches!(guard.unlock(), Err(Error::LockLost { .. })));
}

#[test]
fn ignored_revocation_still_lets_a_later_break_mark_the_lock_lost() {
    let (a, b) = (common::client(), common::client());
    let path = common::lock_path("revoke-then-break");
    let rw = DistributedRwLock::new(&a, &path).unwrap().revocable();
    let guard = rw.write().unwrap();
    let operator = DistributedRwLock::new(&b, &path).unwrap();
    let holder = operator.contenders().unwrap().remove(0);
    assert!(operator.request_revocation(&holder).unwrap());
    assert!(guard.wait_revocation_timeout(Duration::from_secs(5)));
    // The holder ignores the request; an operator then breaks the lock.
    let holder = operator.contenders().unwrap().remove(0);
    assert!(operator.break_contender(&holder).unwrap());
    assert_eq!(
        guard.wait_lost_timeout(Duration::from_secs(5)),
        Some(zklock::LockState::Lost)
    );
}

#[test]
fn broken_leader_and_lease_are_noticed_and_freed() {
    let (a, b) = (common::client(), common::client());
    let path = common::lock_path("break-leader");
    let election = LeaderElection::new(&a, &path).unwrap();
    let leading = election.participate().unwrap();
    let observer = LeaderElection::new(&b, &path).unwrap();
    let leader = observer.current_leader().unwrap().unwrap();
    assert!(observer.break_contender(&leader).unwrap());
    assert_eq!(
        leading.wait_lost_timeout(Duration::from_secs(5)),
        Some(zklock::LockState::Lost)
    );
    drop(leading);

    let sem_path = common::lock_path("break-lease");
    let semaphore = Semaphore::new(&a, &sem_path, 1).unwrap();
    let permit = semaphore.acquire().unwrap();
    let other = Semaphore::new(&b, &sem_path, 1).unwrap();
    assert!(other.try_acquire().unwrap().is_none());
    let lease = other.contenders().unwrap().remove(0);
    assert!(other.break_contender(&lease).unwrap());
    assert!(other.try_acquire().unwrap().is_some());
    assert!(matches!(permit.unlock(), Err(Error::LockLost { .. })));
}

#[test]
fn two_takers_of_all_permits_do_not_deadlock() {
    // Each asks for both permits at once: taking them one at a time through the gate would let
    // each hold one and wait for the other's for ever.
    let path = common::lock_path("sem-all");
    let (a, b) = (common::client(), common::client());
    for _ in 0..3 {
        thread::scope(|s| {
            let takers: Vec<_> = [&a, &b]
                .into_iter()
                .map(|client| {
                    let path = &path;
                    s.spawn(move || {
                        let semaphore = Semaphore::new(client, path, 2).unwrap();
                        let permit = semaphore
                            .acquire_many_timeout(2, Duration::from_secs(10))
                            .unwrap();
                        permit.map(|p| {
                            thread::sleep(Duration::from_millis(20));
                            p.unlock().unwrap();
                        })
                    })
                })
                .collect();
            for taker in takers {
                assert!(
                    taker.join().unwrap().is_some(),
                    "a taker of all permits timed out"
                );
            }
        });
    }
}

/// Issue 21, item 1: a permit released right around a waiter's deadline. The waiter's re-list
/// after the children watch fires can run into its deadline; on a healthy connection that is
/// a timeout (`Ok(None)`) or the permit, never `Err(ConnectionLoss)`.
#[test]
fn semaphore_timeouts_around_a_release_are_never_errors_on_a_healthy_connection() {
    let path = common::lock_path("sem-deadline-race");
    let (a, b) = (common::client(), common::client());
    let holder = Semaphore::new(&a, &path, 1).unwrap();
    let waiter = Semaphore::new(&b, &path, 1).unwrap();
    let timeout = Duration::from_millis(30);
    let (mut errors, mut taken, mut timed_out) = (Vec::new(), 0, 0);
    for round in 0..300u32 {
        let permit = holder.acquire().unwrap();
        // Releases spread from a little before the deadline to a little after it, so that
        // some land while the waiter's re-list is on its way.
        let delay = Duration::from_micros(22_000 + u64::from(round * 37 % 120) * 100);
        let start = std::sync::Barrier::new(2);
        let outcome = thread::scope(|s| {
            s.spawn(|| {
                start.wait();
                thread::sleep(delay);
                drop(permit);
            });
            start.wait();
            waiter.acquire_timeout(timeout)
        });
        match outcome {
            Ok(Some(permit)) => {
                taken += 1;
                drop(permit);
            }
            Ok(None) => timed_out += 1,
            Err(err) => errors.push((round, err, b.state())),
        }
    }
    eprintln!(
        "{taken} taken, {timed_out} timed out, {} errors",
        errors.len()
    );
    let while_connected: Vec<_> = errors
        .iter()
        .filter(|(_, _, state)| *state == zklock::client::SessionState::Connected)
        .collect();
    assert!(
        while_connected.is_empty(),
        "errors on a healthy connection: {while_connected:?}"
    );
}
