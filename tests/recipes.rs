//! The recipes other than the mutex, against a real server: read/write lock, semaphore,
//! multi-lock, revocation, leader election and following its leader, and one recipe per lock
//! path.

mod common;

mod read_write_lock {
    //! Read/write lock: writers exclude everyone across processes, readers share, a queued writer
    //! holds back later readers.

    use crate::common;
    use std::fs::OpenOptions;
    use std::io::Write;
    use std::thread;
    use std::time::Duration;
    use zklock::inspect::Role;
    use zklock::{Client, DistributedRwLock};

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
        let log =
            std::env::temp_dir().join(format!("zklock-rw-{}.log", uuid::Uuid::new_v4().simple()));
        let log = log.to_str().unwrap().to_owned();
        let worker = common::spawn_worker(
            "read_write_lock::worker_rw",
            &[("LOCK", path.clone()), ("LOG", log.clone())],
        );
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
}

mod semaphore {
    //! Semaphore: at most its permits, timeouts and bad counts, a killed lease holder's lease freed,
    //! two takers of all permits, timeouts around a release never errors on a healthy connection.

    use crate::common;
    use std::io::{BufRead, BufReader, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::thread;
    use std::time::Duration;
    use zklock::inspect::Role;
    use zklock::{Client, Error, Semaphore};

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
        let mut child =
            common::spawn_worker("semaphore::worker_hold_lease", &[("LOCK", path.clone())]);
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

    /// A permit released right around a waiter's deadline. The waiter's re-list
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
}

mod multi_lock {
    //! Multi-lock: opposite orders never deadlock, all or nothing, an empty multi-lock refused.

    use crate::common;
    use std::thread;
    use std::time::Duration;
    use zklock::{DistributedMutex, DistributedRwLock, Error, MultiLock};

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
}

mod guards {
    //! A permit's and a multi-lock guard's state, lease, loss of one node, tokens and release: the
    //! calls every guard offers.

    use crate::common;
    use std::time::Duration;
    use zklock::{CancelToken, DistributedMutex, Error, LockState, MultiLock, Semaphore};

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
}

mod revocation {
    //! Revocation requests reach revocable holders; a broken node is seen at once; an ignored
    //! request still lets a later break mark the lock lost.

    use crate::common;
    use std::thread;
    use std::time::Duration;
    use zklock::{DistributedMutex, DistributedRwLock, Error};

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
}

mod election {
    //! Leader election hands over in order; a broken leader and a broken lease are noticed and freed.

    use crate::common;
    use std::thread;
    use std::time::Duration;
    use zklock::{Error, LeaderElection, Semaphore};

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
}

mod following_the_leader {
    //! Following an election's leader (`LeaderElection::observe`, `LeaderWatch`) on a real server:
    //! every way a leader goes (steps down, its process dies, an operator breaks its node) is seen
    //! in order, while a participant queued throughout keeps its node; reconnects are survived;
    //! a session's end ends the watch with an error; dropped calls leave no watch behind.

    use crate::common;
    use common::proxy::Proxy;
    use common::servers;
    use std::io::{BufRead, BufReader, Write};
    use std::time::{Duration, Instant};
    use zklock::inspect::{Contender, LeaderChange};
    use zklock::{CancelToken, Error, LeaderElection, Wait};

    /// Long enough for any change in these tests to be seen (a killed process's session expires
    /// after 2 s).
    const CHANGE_WITHIN: Duration = Duration::from_secs(20);

    /// The owner of the leader a change names (`None` for no leader).
    fn owner(change: &LeaderChange) -> Option<&str> {
        change.leader.as_ref().map(|l| l.owner.as_str())
    }

    /// A participant in another process, with a 2 s session: it joins the election at `LOCK`
    /// as `ID`, prints `LEADING` once it leads, and then leads until killed.
    #[test]
    #[ignore]
    fn worker_participant() {
        let client = common::client_with(Duration::from_secs(2));
        let var = |k: &str| std::env::var(k).unwrap();
        let election = LeaderElection::new(&client, &var("LOCK"))
            .unwrap()
            .participant_id(&var("ID"));
        let _leadership = election.participate().unwrap();
        println!("LEADING");
        std::io::stdout().flush().unwrap();
        std::thread::sleep(Duration::from_secs(120));
    }

    #[test]
    fn an_observer_sees_three_leader_changes_in_order_while_a_participant_keeps_its_place() {
        let path = common::lock_path("observe-three");
        let (a_client, c_client, operator) = (common::client(), common::client(), common::client());
        // The queued participant and the observer share one client, on two threads.
        let shared = common::client();
        let election = |client: &zklock::Client, id: &str| {
            LeaderElection::new(client, &path)
                .unwrap()
                .participant_id(id)
        };

        // A leads; the worker process, C and P queue behind it, in that order.
        let a = election(&a_client, "A")
            .try_participate()
            .unwrap()
            .expect("A leads");
        let mut worker = common::spawn_worker(
            "following_the_leader::worker_participant",
            &[("LOCK", path.clone()), ("ID", "W".into())],
        );
        let watched = election(&operator, "operator");
        assert!(common::wait_contenders(
            &watched,
            2,
            Duration::from_secs(20)
        ));
        let c_election = election(&c_client, "C");
        let c = std::thread::spawn(move || c_election.participate());
        assert!(common::wait_contenders(
            &watched,
            3,
            Duration::from_secs(10)
        ));
        let p_election = election(&shared, "P");
        let p = std::thread::spawn(move || p_election.participate());
        assert!(common::wait_contenders(
            &watched,
            4,
            Duration::from_secs(10)
        ));
        let p_node = |contenders: &[Contender]| {
            contenders
                .iter()
                .find(|c| c.owner == "P")
                .map(|c| (c.node_name.clone(), c.sequence))
        };
        let p_place = p_node(&watched.contenders().unwrap()).expect("P is queued");

        let mut leaders = election(&shared, "observer").observe();
        let first = leaders.next().unwrap();
        assert_eq!(owner(&first), Some("A"));
        assert!(first.leader.as_ref().unwrap().holds);
        let mut seen = vec!["A".to_owned()];
        let mut next = |seen: &mut Vec<String>| {
            let started = Instant::now();
            let change = leaders
                .next_timeout(CHANGE_WITHIN)
                .unwrap()
                .unwrap_or_else(|| panic!("no change within {CHANGE_WITHIN:?} after {seen:?}"));
            seen.push(owner(&change).unwrap_or("nobody").to_owned());
            (change, started.elapsed())
        };

        // 1. The leader steps down.
        a.unlock().unwrap();
        let (change, _) = next(&mut seen);
        assert_eq!(owner(&change), Some("W"), "{seen:?}");
        let mut out = BufReader::new(worker.stdout.take().unwrap());
        let mut line = String::new();
        while !line.contains("LEADING") {
            line.clear();
            assert!(out.read_line(&mut line).unwrap() > 0, "the worker ended");
        }
        assert_eq!(
            p_node(&watched.contenders().unwrap()),
            Some(p_place.clone())
        );

        // 2. The leader's process dies: its session expires on the server, its node goes.
        worker.kill().unwrap();
        worker.wait().unwrap();
        let (change, took) = next(&mut seen);
        assert_eq!(owner(&change), Some("C"), "{seen:?}");
        eprintln!("a killed leader's successor was seen after {took:?}");
        assert_eq!(
            p_node(&watched.contenders().unwrap()),
            Some(p_place.clone())
        );

        // 3. An operator breaks the leader's node.
        let c_leader = change.leader.clone().unwrap();
        assert!(watched.break_contender(&c_leader).unwrap());
        let (change, _) = next(&mut seen);
        assert_eq!(owner(&change), Some("P"), "{seen:?}");
        assert_eq!(seen, ["A", "W", "C", "P"]);

        // P waited in participate() all along, on the observer's client, and leads on the very
        // node it queued first.
        let p_leadership = p.join().unwrap().unwrap();
        assert!(
            p_leadership.node_path().ends_with(&p_place.0),
            "{} is not P's first node {}",
            p_leadership.node_path(),
            p_place.0
        );
        assert_eq!(change.leader.as_ref().unwrap().node_name, p_place.0);
        // C led until its node was broken.
        let c_leadership = c.join().unwrap().unwrap();
        assert!(common::eventually(Duration::from_secs(5), || {
            c_leadership.state() == zklock::LockState::Lost
        }));
        drop(c_leadership);

        // P steps down: nobody leads.
        p_leadership.unlock().unwrap();
        let (change, _) = next(&mut seen);
        assert_eq!(change.leader, None, "{seen:?}");
    }

    #[test]
    fn the_first_call_reports_the_current_leader_and_a_data_change_is_no_change() {
        let path = common::lock_path("observe-first");
        let client = common::client();
        let election = LeaderElection::new(&client, &path).unwrap();
        let mut leaders = election.observe();
        // Nobody yet (the path does not even exist).
        assert_eq!(leaders.next().unwrap().leader, None);
        let waiting = std::thread::spawn({
            let election = election.clone();
            move || {
                let mut leaders = election.observe();
                leaders.next().unwrap(); // nobody
                leaders.next_timeout(CHANGE_WITHIN).unwrap()
            }
        });
        std::thread::sleep(Duration::from_millis(300));
        let leader = LeaderElection::new(&common::client(), &path)
            .unwrap()
            .participant_id("first")
            .participate()
            .unwrap();
        let change = waiting
            .join()
            .unwrap()
            .expect("the path's creation is seen");
        assert_eq!(owner(&change), Some("first"));
        assert_eq!(owner(&leaders.next().unwrap()), Some("first"));
        // A revocation request changes the leader's data, not the leader.
        let current = election.current_leader().unwrap().unwrap();
        assert!(election.contenders().unwrap()[0].holds);
        // (A request_revocation through a mutex's view of the path: it writes the node's data.)
        let writer = zklock::DistributedMutex::new(&client, &path).unwrap();
        assert!(writer.request_revocation(&current).unwrap());
        assert!(leaders
            .next_timeout(Duration::from_millis(700))
            .unwrap()
            .is_none());
        drop(leader);
        assert_eq!(
            leaders.next_timeout(CHANGE_WITHIN).unwrap().unwrap().leader,
            None
        );
    }

    #[test]
    fn a_cancel_token_and_a_timeout_stop_a_wait_and_the_client_closing_ends_it() {
        let path = common::lock_path("observe-stop");
        let client = common::client();
        let mut leaders = LeaderElection::new(&client, &path).unwrap().observe();
        leaders.next().unwrap();
        let started = Instant::now();
        assert!(leaders
            .next_timeout(Duration::from_millis(300))
            .unwrap()
            .is_none());
        assert!(started.elapsed() >= Duration::from_millis(300));
        let token = CancelToken::new();
        let cancel = token.clone();
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            cancel.cancel();
        });
        let stopped = leaders.next_with(Wait::forever().cancel_on(&token));
        assert!(matches!(stopped, Err(Error::Cancelled)), "{stopped:?}");
        canceller.join().unwrap();
        assert!(matches!(
            leaders.next_with(Wait::forever().cancel_on(&token)),
            Err(Error::Cancelled)
        ));
        let closer = std::thread::spawn({
            let client = client.clone();
            move || {
                std::thread::sleep(Duration::from_millis(200));
                client.close().unwrap();
            }
        });
        let started = Instant::now();
        let ended = leaders.next();
        assert!(matches!(ended, Err(Error::Closed)), "{ended:?}");
        assert!(started.elapsed() < Duration::from_secs(2));
        closer.join().unwrap();
    }

    #[test]
    fn a_watch_survives_a_reconnect_and_ends_with_its_session() {
        let proxy = Proxy::start(&common::connect_string());
        let client = common::client_via(&proxy, Duration::from_secs(4));
        let path = common::lock_path("observe-reconnect");
        let mut leaders = LeaderElection::new(&client, &path).unwrap().observe();
        let other = common::client();
        let leader = LeaderElection::new(&other, &path)
            .unwrap()
            .participant_id("one")
            .participate()
            .unwrap();
        assert_eq!(owner(&leaders.next().unwrap()), Some("one"));
        let next_leader = LeaderElection::new(&common::client(), &path)
            .unwrap()
            .participant_id("two");
        let two = std::thread::spawn(move || next_leader.participate().unwrap());
        let observed = std::thread::scope(|s| {
            let waiting = s.spawn(|| leaders.next_timeout(CHANGE_WITHIN));
            std::thread::sleep(Duration::from_millis(300));
            // The change happens while the observer's connection is down: the event is missed,
            // and must be learnt after the reconnect.
            proxy.refuse(true);
            proxy.sever();
            std::thread::sleep(Duration::from_millis(300));
            drop(leader);
            std::thread::sleep(Duration::from_millis(500));
            proxy.refuse(false);
            waiting.join().unwrap()
        });
        let change = observed
            .unwrap()
            .expect("the change during the outage is seen");
        assert_eq!(owner(&change), Some("two"));
        let two = two.join().unwrap();

        // The session ends (a partition longer than its timeout) while a call waits: the watch
        // ends with an error, and so does every later call.
        let ended = std::thread::scope(|s| {
            let waiting = s.spawn(|| leaders.next_timeout(Duration::from_secs(60)));
            std::thread::sleep(Duration::from_millis(200));
            proxy.blackhole(true);
            std::thread::sleep(Duration::from_secs(7));
            proxy.blackhole(false);
            proxy.sever();
            waiting.join().unwrap()
        });
        assert!(matches!(ended, Err(Error::SessionExpired)), "{ended:?}");
        let again = leaders.next_timeout(Duration::from_secs(1));
        assert!(matches!(again, Err(Error::SessionExpired)), "{again:?}");
        drop(two);
    }

    /// How many watches the test server holds for `client`'s session.
    fn watches(client: &zklock::Client) -> usize {
        servers::watches_of(&common::connect_string(), client.session_id())
    }

    #[test]
    fn dropped_and_finished_observations_leave_no_watch_and_no_node() {
        let path = common::lock_path("observe-drop");
        let client = common::client();
        let other = common::client();
        let election = LeaderElection::new(&client, &path).unwrap();
        let leader = LeaderElection::new(&other, &path)
            .unwrap()
            .participate()
            .unwrap();
        let mut leaders = election.observe();
        leaders.next().unwrap();
        // Its watch is removed as the call returns (the removal is on its way, not awaited).
        assert!(
            common::eventually(Duration::from_secs(2), || watches(&client) == 0),
            "a returned call keeps no watch"
        );

        // Blocking, timed out: its watch goes with it.
        assert!(leaders
            .next_timeout(Duration::from_millis(200))
            .unwrap()
            .is_none());
        assert!(common::eventually(Duration::from_secs(2), || watches(
            &client
        ) == 0));

        // Async, dropped while waiting, on tokio and on futures' executor.
        let rt = common::two_worker_runtime();
        rt.block_on(async {
            let waited =
                tokio::time::timeout(Duration::from_millis(300), leaders.next_async()).await;
            assert!(waited.is_err(), "no change: still waiting");
        });
        assert!(common::eventually(Duration::from_secs(2), || watches(
            &client
        ) == 0));
        {
            use std::future::Future;
            let mut future = Box::pin(leaders.next_async());
            let waker = futures::task::noop_waker();
            let mut cx = std::task::Context::from_waker(&waker);
            for _ in 0..5 {
                assert!(future.as_mut().poll(&mut cx).is_pending());
                std::thread::sleep(Duration::from_millis(50));
            }
            assert!(common::eventually(Duration::from_secs(2), || watches(
                &client
            ) == 1));
        }
        assert!(common::eventually(Duration::from_secs(2), || watches(
            &client
        ) == 0));
        // Nothing was created by observing: the leader's node alone is there.
        assert_eq!(other.children(&path).unwrap().map(|c| c.len()), Some(1));
        drop(leader);
        let change = futures::executor::block_on(leaders.next_async()).unwrap();
        assert_eq!(change.leader, None);
        assert!(common::eventually(Duration::from_secs(2), || watches(
            &client
        ) == 0));
    }

    #[test]
    fn next_async_follows_the_leader_on_tokio_and_on_futures_executor() {
        let path = common::lock_path("observe-async");
        let client = common::client();
        let election = LeaderElection::new(&client, &path).unwrap();
        let rt = common::two_worker_runtime();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let follower = rt.spawn({
            let mut leaders = election.observe();
            async move {
                for _ in 0..3 {
                    let change = leaders.next_async().await.unwrap();
                    tx.send(change.leader.map(|l| l.owner)).unwrap();
                }
            }
        });
        let mut seen_on_tokio = || {
            rt.block_on(async { tokio::time::timeout(CHANGE_WITHIN, rx.recv()).await })
                .expect("a change within the limit")
                .expect("the follower runs")
        };
        assert_eq!(seen_on_tokio(), None);
        let mut leaders = election.observe();
        let first = futures::executor::block_on(leaders.next_async()).unwrap();
        assert_eq!(first.leader, None);

        let other = common::client();
        let one = futures::executor::block_on(
            LeaderElection::new(&other, &path)
                .unwrap()
                .participant_id("one")
                .participate_async(),
        )
        .unwrap();
        assert_eq!(seen_on_tokio().as_deref(), Some("one"));
        let change =
            futures::executor::block_on(leaders.next_with_async(Wait::timeout(CHANGE_WITHIN)))
                .unwrap()
                .expect("a change");
        assert_eq!(owner(&change), Some("one"));
        futures::executor::block_on(one.unlock_async()).unwrap();
        assert_eq!(seen_on_tokio(), None);
        let change = futures::executor::block_on(leaders.next_async()).unwrap();
        assert_eq!(change.leader, None);
        rt.block_on(follower).unwrap();
    }
}

mod one_recipe_per_path {
    //! One recipe per lock path: a contender refuses to queue where another recipe's nodes are
    //! (`Error::RecipeConflict`, naming both), for every pair of recipes, blocking and async,
    //! leaving nothing behind; inspection reports every recipe it finds at a path.
    //!
    //! Before 0.2 a `DistributedRwLock::try_write` and a `LeaderElection::try_participate` on a
    //! path that a `DistributedMutex` held both succeeded: three holders of one path.

    use crate::common;
    use std::any::Any;
    use std::collections::BTreeSet;
    use std::time::Duration;
    use zklock::inspect::LockKind;
    use zklock::{
        Client, DistributedMutex, DistributedRwLock, Error, LeaderElection, MultiLock, Semaphore,
    };
    use Recipe::*;

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Recipe {
        Mutex,
        Read,
        Write,
        Election,
        Semaphore,
        /// A multi-lock whose member at the path is a mutex.
        MultiMutex,
        /// A multi-lock whose member at the path is a write lock.
        MultiWrite,
    }

    impl Recipe {
        /// The recipe's name in `Error::RecipeConflict`.
        fn name(self) -> &'static str {
            match self {
                Mutex | MultiMutex => "mutex",
                Read | Write | MultiWrite => "rwlock",
                Election => "election",
                Semaphore => "semaphore",
            }
        }
    }

    type Guard = Box<dyn Any + Send>;

    fn boxed<G: Any + Send>(guard: zklock::Result<Option<G>>) -> zklock::Result<Option<Guard>> {
        guard.map(|g| g.map(|g| Box::new(g) as Guard))
    }

    /// `try_*` of `recipe` on `path`, blocking or async (on futures' own executor).
    fn try_take(
        client: &Client,
        recipe: Recipe,
        path: &str,
        async_: bool,
    ) -> zklock::Result<Option<Guard>> {
        // The path's other member of a multi-lock: a path of its own.
        let other = format!("{path}-other");
        macro_rules! take {
            ($lock:expr, $try:ident, $try_async:ident) => {{
                let lock = $lock;
                if async_ {
                    boxed(futures::executor::block_on(lock.$try_async()))
                } else {
                    boxed(lock.$try())
                }
            }};
        }
        match recipe {
            Mutex => take!(
                DistributedMutex::new(client, path)?,
                try_lock,
                try_lock_async
            ),
            Read => take!(
                DistributedRwLock::new(client, path)?,
                try_read,
                try_read_async
            ),
            Write => take!(
                DistributedRwLock::new(client, path)?,
                try_write,
                try_write_async
            ),
            Election => take!(
                LeaderElection::new(client, path)?,
                try_participate,
                try_participate_async
            ),
            Semaphore => take!(
                Semaphore::new(client, path, 2)?,
                try_acquire,
                try_acquire_async
            ),
            MultiMutex => take!(
                MultiLock::new(client).mutex(path)?.mutex(&other)?,
                try_lock,
                try_lock_async
            ),
            MultiWrite => take!(
                MultiLock::new(client).write_lock(path)?.mutex(&other)?,
                try_lock,
                try_lock_async
            ),
        }
    }

    /// The nodes under `path` and, for a semaphore's `leases` and `locks`, under those. (Those two
    /// are containers: a refused semaphore may leave its empty gate, which keeps no one out and
    /// which the server sweeps like any empty lock path.)
    fn tree(client: &Client, path: &str) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for child in client.children(path).unwrap().unwrap_or_default() {
            if child == "leases" || child == "locks" {
                let below = client.children(&format!("{path}/{child}")).unwrap();
                for name in below.unwrap_or_default() {
                    names.insert(format!("{child}/{name}"));
                }
            } else {
                names.insert(child);
            }
        }
        names
    }

    fn same_recipe(a: Recipe, b: Recipe) -> bool {
        a.name() == b.name()
    }

    #[test]
    fn every_pair_of_recipes_on_one_path_is_refused_by_name_and_leaves_nothing() {
        let holders = [Mutex, Read, Write, Election, Semaphore];
        let takers = [
            Mutex, Read, Write, Election, Semaphore, MultiMutex, MultiWrite,
        ];
        let client = common::client();
        let mut pairs = 0;
        for holder in holders {
            let path = common::lock_path(&format!("mixed-{}", holder.name()));
            let _held = try_take(&client, holder, &path, false)
                .unwrap()
                .expect("a free path");
            let before = tree(&client, &path);
            for taker in takers.into_iter().filter(|&t| !same_recipe(holder, t)) {
                for async_ in [false, true] {
                    // Another session, as another process would be.
                    let other = common::client();
                    match try_take(&other, taker, &path, async_) {
                        Err(Error::RecipeConflict {
                            path: p,
                            ours,
                            theirs,
                        }) => {
                            assert_eq!(p, path, "{taker:?} after {holder:?}");
                            assert_eq!(ours, taker.name(), "{taker:?} after {holder:?}");
                            assert_eq!(theirs, holder.name(), "{taker:?} after {holder:?}");
                        }
                        Ok(Some(_)) => {
                            panic!("{taker:?} (async: {async_}) took {path}, held by a {holder:?}")
                        }
                        other => panic!("{taker:?} (async: {async_}) after {holder:?}: {other:?}"),
                    }
                    // Nothing of the refused contender's is left (its node goes with the call or,
                    // at the latest, with its session).
                    assert!(
                        common::eventually(Duration::from_secs(5), || tree(&client, &path)
                            == before),
                        "{taker:?} (async: {async_}) after {holder:?} left {:?}, before {before:?}",
                        tree(&client, &path)
                    );
                    other.close().unwrap();
                    pairs += 1;
                }
            }
        }
        assert_eq!(pairs, 2 * (5 + 4 + 4 + 6 + 6));
    }

    #[test]
    fn a_refused_recipe_leaves_the_holder_holding_and_the_same_recipe_still_queues() {
        let client = common::client();
        let path = common::lock_path("mixed-holder");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let held = mutex.lock().unwrap();
        let other = common::client();
        let write = DistributedRwLock::new(&other, &path).unwrap();
        assert!(matches!(
            write.try_write(),
            Err(Error::RecipeConflict {
                theirs: "mutex",
                ours: "rwlock",
                ..
            })
        ));
        assert!(held.is_held());
        // A mutex on another session queues behind the holder as always.
        let second = DistributedMutex::new(&other, &path).unwrap();
        assert!(second.try_lock().unwrap().is_none());
        held.unlock().unwrap();
        let g = second.try_lock().unwrap().expect("free after the unlock");
        g.unlock().unwrap();
        // Once the mutex's nodes are gone, the path is free for another recipe.
        let w = write.try_write().unwrap().expect("no mutex node left");
        w.unlock().unwrap();
    }

    #[test]
    fn inspection_reports_every_recipe_at_a_path() {
        let client = common::client();
        let path = common::lock_path("mixed-inspect");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let _held = mutex.lock().unwrap();
        // A writer's node as another client (or zklock before 0.2) could have left it.
        let writer = format!("{path}/_c_00000000-0000-4000-8000-000000000000-__WRIT__0000000009");
        let _raw = common::raw::create_ephemeral(&writer);
        let found = client.inspect(&path, None).unwrap();
        assert_eq!(found.kinds, [LockKind::Mutex, LockKind::RwLock]);
        assert_eq!(found.kind, Some(LockKind::Mutex));
        let kinds: Vec<LockKind> = found.nodes.iter().map(|n| n.kind).collect();
        assert_eq!(kinds, [LockKind::Mutex, LockKind::RwLock]);
        // Neither recipe queues more beside the other.
        let other = common::client();
        assert!(matches!(
            DistributedMutex::new(&other, &path).unwrap().try_lock(),
            Err(Error::RecipeConflict {
                theirs: "rwlock",
                ..
            })
        ));
        assert!(matches!(
            DistributedRwLock::new(&other, &path).unwrap().try_read(),
            Err(Error::RecipeConflict {
                theirs: "mutex",
                ..
            })
        ));
    }

    #[test]
    fn a_semaphores_empty_nodes_keep_no_other_recipe_out() {
        let client = common::client();
        let path = common::lock_path("mixed-empty-semaphore");
        let semaphore = Semaphore::new(&client, &path, 1).unwrap();
        semaphore.acquire().unwrap().unlock().unwrap();
        // `leases` (and maybe `locks`) stay until the server sweeps them; nobody holds.
        assert!(client
            .children(&path)
            .unwrap()
            .unwrap()
            .contains(&"leases".to_owned()));
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let g = mutex
            .try_lock()
            .unwrap()
            .expect("no semaphore holds the path");
        // While the mutex holds, the semaphore is refused in its turn, and takes no lease.
        assert!(matches!(
            semaphore.try_acquire(),
            Err(Error::RecipeConflict {
                ours: "semaphore",
                theirs: "mutex",
                ..
            })
        ));
        assert!(semaphore.contenders().unwrap().is_empty());
        g.unlock().unwrap();
    }
}
