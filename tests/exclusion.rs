//! Exclusion: at most one holder of a lock at a time, in queue order, and nothing left behind,
//! against the real ZooKeeper at `ZK_CONNECT` (see `tests/common/mod.rs`).
//!
//! - [`basics`]: lock, `try_lock`, `lock_timeout` and release leave no node; locking again while
//!   holding waits, like `std::sync::Mutex`.
//! - [`mutex`]: threads and processes never overlap, FIFO order, timeouts leave no node, a killed
//!   holder is replaced after its session, breaking a stale holder, bad paths, connect strings
//!   and chroots.
//! - [`one_session_many_waiters`]: what the waiters of one session learn of a queue and share
//!   never lets two hold at once nor strands a waiter.
//! - [`used_up_sequence_numbers`]: a lock path whose sequence counter is used up queues no one.

mod common;

mod basics {
    use crate::common;
    use std::time::{Duration, Instant};
    use zklock::{DistributedMutex, LockState};

    #[test]
    fn lock_try_lock_timeout_and_release_leave_nothing() {
        let client = common::client();
        let path = common::lock_path("smoke");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let guard = mutex.lock().unwrap();
        assert!(guard.is_held());
        assert_eq!(guard.state(), LockState::Held);
        assert!(guard.node_path().starts_with(&format!("{path}/_c_")));
        assert_eq!(guard.session_id(), client.session_id());

        let other_client = common::client();
        let other = DistributedMutex::new(&other_client, &path).unwrap();
        assert!(other.try_lock().unwrap().is_none());
        let started = Instant::now();
        assert!(other
            .lock_timeout(Duration::from_millis(300))
            .unwrap()
            .is_none());
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert_eq!(
            common::children_count(&other_client, &path),
            1,
            "waiters left nodes"
        );

        let first_token = guard.fencing().zxid();
        guard.unlock().unwrap();
        let next = other.try_lock().unwrap().expect("free after unlock");
        assert!(next.fencing().zxid() > first_token);
        drop(next);
        assert_eq!(common::children_count(&client, &path), 0);
    }

    #[test]
    fn locking_again_while_holding_waits_like_std_mutex() {
        let client = common::client();
        let mutex = DistributedMutex::new(&client, &common::lock_path("reentry")).unwrap();
        let guard = mutex.lock().unwrap();
        // Not reentrant, and no false error either: the second attempt is simply busy.
        assert!(mutex.try_lock().unwrap().is_none());
        assert!(mutex
            .lock_timeout(Duration::from_millis(200))
            .unwrap()
            .is_none());
        drop(guard);
        assert!(mutex.try_lock().unwrap().is_some());
    }
}

mod mutex {
    //! Behaviour of `DistributedMutex` against a real ZooKeeper server.

    use crate::common;
    use std::fs::OpenOptions;
    use std::io::{BufRead, BufReader, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::thread;
    use std::time::Duration;
    use zklock::{Client, DistributedMutex, Error, LockGuard, LockState};

    const CYCLES: usize = 10;

    /// One critical section: record entry, read-modify-write a counter znode, record exit.
    fn critical_section(
        client: &Client,
        counter: &str,
        log: &str,
        who: &str,
        inside: &AtomicUsize,
    ) {
        assert_eq!(
            inside.fetch_add(1, Ordering::SeqCst),
            0,
            "two holders in one process"
        );
        let mut file = OpenOptions::new()
            .append(true)
            .create(true)
            .open(log)
            .unwrap();
        file.write_all(format!("enter {who}\n").as_bytes()).unwrap();
        let value: u64 = client
            .get_data(counter)
            .unwrap()
            .map_or(0, |d| String::from_utf8(d).unwrap().parse().unwrap());
        thread::sleep(Duration::from_millis(1));
        client
            .set_data(counter, (value + 1).to_string().as_bytes())
            .unwrap();
        file.write_all(format!("exit {who}\n").as_bytes()).unwrap();
        inside.fetch_sub(1, Ordering::SeqCst);
    }

    fn contend(client: &Client, path: &str, counter: &str, log: &str, threads: usize, tag: &str) {
        let mutex = DistributedMutex::new(client, path).unwrap();
        let inside = AtomicUsize::new(0);
        thread::scope(|s| {
            for t in 0..threads {
                let (mutex, inside) = (&mutex, &inside);
                s.spawn(move || {
                    for _ in 0..CYCLES {
                        let guard = mutex.lock().unwrap();
                        critical_section(client, counter, log, &format!("{tag}-{t}"), inside);
                        assert!(guard.is_held());
                        guard.unlock().unwrap();
                    }
                });
            }
        });
    }

    /// Helper process for `mutual_exclusion_across_threads_and_processes`.
    #[test]
    #[ignore = "run as a child process by other tests"]
    fn worker_contend() {
        let var = |k: &str| std::env::var(k).unwrap();
        let client = common::client();
        contend(
            &client,
            &var("LOCK"),
            &var("COUNTER"),
            &var("LOG"),
            4,
            &format!("p{}", std::process::id()),
        );
    }

    #[test]
    fn mutual_exclusion_across_threads_and_processes() {
        let path = common::lock_path("exclusion");
        let counter = format!("{path}-counter");
        let log = std::env::temp_dir().join(format!(
            "zklock-exclusion-{}.log",
            uuid::Uuid::new_v4().simple()
        ));
        let log = log.to_str().unwrap().to_owned();
        let vars = [
            ("LOCK", path.clone()),
            ("COUNTER", counter.clone()),
            ("LOG", log.clone()),
        ];
        let children: Vec<_> = (0..3)
            .map(|_| common::spawn_worker("mutex::worker_contend", &vars))
            .collect();

        // 16 threads here, over two sessions.
        let (a, b) = (common::client(), common::client());
        thread::scope(|s| {
            s.spawn(|| contend(&a, &path, &counter, &log, 8, "a"));
            s.spawn(|| contend(&b, &path, &counter, &log, 8, "b"));
        });
        for mut child in children {
            assert!(child.wait().unwrap().success(), "worker process failed");
        }

        let total = (16 + 3 * 4) * CYCLES;
        let value = a.get_data(&counter).unwrap().unwrap();
        assert_eq!(String::from_utf8(value).unwrap(), total.to_string());
        // The log must alternate enter/exit of the same holder: no overlap across processes.
        let lines: Vec<String> = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(str::to_owned)
            .collect();
        assert_eq!(lines.len(), 2 * total);
        for pair in lines.chunks(2) {
            let enter = pair[0]
                .strip_prefix("enter ")
                .expect("overlap: two enters in a row");
            let exit = pair[1]
                .strip_prefix("exit ")
                .expect("overlap: enter not followed by exit");
            assert_eq!(enter, exit, "overlapping holders");
        }
        assert_eq!(common::children_count(&a, &path), 0);
        let _ = std::fs::remove_file(&log);
    }

    #[test]
    fn waiters_acquire_in_queue_order() {
        let client = common::client();
        let path = common::lock_path("fifo");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let holder = mutex.lock().unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut handles = Vec::new();
        for i in 0..6 {
            let (path, order) = (path.clone(), order.clone());
            let client = client.clone();
            handles.push(thread::spawn(move || {
                let mutex = DistributedMutex::new(&client, &path).unwrap();
                let guard = mutex.lock().unwrap();
                order.lock().unwrap().push(i);
                thread::sleep(Duration::from_millis(5));
                drop(guard);
            }));
            // Queue them one at a time so the creation order is known.
            assert!(common::wait_contenders(
                &mutex,
                i + 2,
                Duration::from_secs(10)
            ));
        }
        let queue = mutex.contenders().unwrap();
        assert!(queue.windows(2).all(|w| w[0].sequence < w[1].sequence));
        assert!(queue[0]
            .owner
            .contains(&format!("pid={}", std::process::id())));
        drop(holder);
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), (0..6).collect::<Vec<_>>());
    }

    #[test]
    fn timeouts_and_try_lock_leave_no_node_under_contention() {
        let client = common::client();
        let path = common::lock_path("no-orphans");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let guard = mutex.lock().unwrap();
        thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    let c = common::client();
                    let m = DistributedMutex::new(&c, &path).unwrap();
                    for _ in 0..3 {
                        assert!(m.try_lock().unwrap().is_none());
                        assert!(m.lock_timeout(Duration::from_millis(50)).unwrap().is_none());
                    }
                });
            }
        });
        assert_eq!(common::children_count(&client, &path), 1);
        drop(guard);
        assert_eq!(common::children_count(&client, &path), 0);
    }

    #[test]
    fn guard_is_send_and_released_from_another_thread() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Client>();
        assert_send_sync::<DistributedMutex>();
        assert_send_sync::<LockGuard>();

        let client = common::client();
        let path = common::lock_path("cross-thread");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let guard = mutex.lock().unwrap();
        thread::scope(|s| {
            s.spawn(move || guard.unlock().unwrap());
        });
        // Released, and this thread may lock again.
        let again = mutex.try_lock().unwrap();
        assert!(again.is_some());
    }

    /// Helper process for `killed_holder_is_replaced_after_session_timeout`.
    #[test]
    #[ignore = "run as a child process by other tests"]
    fn worker_hold_forever() {
        let client = common::client_with(Duration::from_secs(2));
        let mutex = DistributedMutex::new(&client, &std::env::var("LOCK").unwrap()).unwrap();
        let guard = mutex.lock().unwrap();
        println!("LOCKED {}", guard.fencing().zxid());
        std::io::stdout().flush().unwrap();
        thread::sleep(Duration::from_secs(120));
    }

    #[test]
    fn killed_holder_is_replaced_after_session_timeout() {
        let path = common::lock_path("sigkill");
        let mut child =
            common::spawn_worker("mutex::worker_hold_forever", &[("LOCK", path.clone())]);
        let mut line = String::new();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        // libtest may print "test name ... " on the same line first.
        while !line.contains("LOCKED ") {
            line.clear();
            assert!(
                out.read_line(&mut line).unwrap() > 0,
                "worker exited before locking"
            );
        }
        let their_token: i64 = line[line.find("LOCKED ").unwrap() + 7..]
            .trim()
            .parse()
            .unwrap();
        let client = common::client();
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        assert!(
            mutex.try_lock().unwrap().is_none(),
            "lock must be held by the worker"
        );
        child.kill().unwrap(); // SIGKILL: no release, the session must time out
        child.wait().unwrap();
        let guard = mutex
            .lock_timeout(Duration::from_secs(30))
            .unwrap()
            .expect("lock freed after the session timeout");
        assert!(guard.fencing().zxid() > their_token);
    }

    #[test]
    fn bad_paths_are_typed_errors() {
        let client = common::client();
        for bad in [
            "",
            "relative",
            "/trailing/",
            "/double//slash",
            "/ctl\u{1}char",
            "/",
            "/a/../b",
        ] {
            assert!(
                matches!(
                    DistributedMutex::new(&client, bad),
                    Err(Error::InvalidPath { .. })
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn unreachable_or_malformed_connect_strings_fail_clearly() {
        // Port 1 on loopback: nothing listens there.
        let started = std::time::Instant::now();
        let err = Client::builder("127.0.0.1:1")
            .connect_timeout(Duration::from_millis(800))
            .connect()
            .unwrap_err();
        assert!(matches!(err, Error::Connect { .. }), "{err:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
        for bad in [
            "",
            "127.0.0.1:2181,,",
            "127.0.0.1:notaport",
            "127.0.0.1:2181/bad//chroot",
        ] {
            let err = Client::builder(bad)
                .connect_timeout(Duration::from_millis(800))
                .connect()
                .unwrap_err();
            assert!(
                matches!(
                    err,
                    Error::InvalidConnectString { .. } | Error::Connect { .. }
                ),
                "{bad:?}: {err:?}"
            );
        }
    }

    #[test]
    fn lock_under_an_ephemeral_node_is_refused_and_leaves_nothing() {
        let base = common::lock_path("ephemeral-parent");
        let eph = format!("{base}/eph");
        let _raw = common::create_ephemeral(&eph);
        let client = common::client();
        let mutex = DistributedMutex::new(&client, &format!("{eph}/lock")).unwrap();
        assert!(matches!(mutex.lock(), Err(Error::EphemeralParent { .. })));
        assert!(matches!(
            mutex.try_lock(),
            Err(Error::EphemeralParent { .. })
        ));
        let direct = DistributedMutex::new(&client, &eph).unwrap();
        // The ephemeral node itself is no lock node: it has no children and lists as empty.
        assert_eq!(direct.contenders().unwrap().len(), 0);
    }

    #[test]
    fn chroot_is_created_and_isolates_paths() {
        let root = common::lock_path("chroot");
        let chrooted = Client::connect(&format!("{}{root}", common::connect_string())).unwrap();
        let plain = common::client();
        let mutex = DistributedMutex::new(&chrooted, "/locks/a").unwrap();
        let guard = mutex.lock().unwrap();
        assert_eq!(guard.node_path().split('/').nth(2), Some("a"));
        assert_eq!(
            common::children_count(&plain, &format!("{root}/locks/a")),
            1
        );
    }

    #[test]
    fn a_required_chroot_that_is_missing_fails_the_connect_and_is_not_created() {
        let root = common::lock_path("required-chroot");
        let connect = format!("{}{root}", common::connect_string());
        let err = common::builder(&connect, common::SESSION_TIMEOUT)
            .require_chroot(true)
            .connect()
            .unwrap_err();
        assert_eq!(
            err,
            Error::NoChroot {
                chroot: root.clone()
            }
        );
        let raw = common::RawClient::connect(&common::connect_string());
        assert!(raw.stat(&root).is_none(), "{root} was created");

        // Once it exists, the same builder connects and locks inside it.
        raw.mkdir_open(&root);
        let chrooted = common::builder(&connect, common::SESSION_TIMEOUT)
            .require_chroot(true)
            .connect()
            .unwrap();
        let guard = DistributedMutex::new(&chrooted, "/a")
            .unwrap()
            .lock()
            .unwrap();
        assert!(guard.is_held());
    }

    #[test]
    fn break_contender_frees_a_stale_holder_and_refuses_changed_nodes() {
        let (stale_client, operator) = (common::client(), common::client());
        let path = common::lock_path("break");
        let stale = DistributedMutex::new(&stale_client, &path).unwrap();
        let guard = stale.lock().unwrap();
        let mutex = DistributedMutex::new(&operator, &path).unwrap();
        let holder = mutex.contenders().unwrap().remove(0);
        assert!(holder
            .owner
            .contains(&format!("pid={}", std::process::id())));
        // A node that changed since it was shown is not deleted.
        let mut outdated = holder.clone();
        outdated.version += 1;
        assert!(matches!(
            mutex.break_contender(&outdated),
            Err(Error::NodeChanged { .. })
        ));
        assert!(mutex.break_contender(&holder).unwrap());
        assert!(!mutex.break_contender(&holder).unwrap(), "already gone");
        let next = mutex.try_lock().unwrap().expect("free after break");
        assert!(
            matches!(guard.unlock(), Err(Error::LockLost { .. })),
            "the stale holder learns it lost the lock"
        );
        drop(next);
    }

    #[test]
    fn a_waiter_whose_node_was_broken_never_becomes_a_holder() {
        // Queue: holder A, waiter B (next in line), waiter C. An operator breaks B's node while it
        // waits; when A releases, B must fail instead of claiming, and C alone holds.
        let (a, b, c) = (common::client(), common::client(), common::client());
        let path = common::lock_path("broken-waiter");
        let a_mutex = DistributedMutex::new(&a, &path).unwrap();
        let held = a_mutex.lock().unwrap();
        thread::scope(|s| {
            let b_waiter = s.spawn(|| {
                DistributedMutex::new(&b, &path)
                    .unwrap()
                    .lock()
                    .map(|g| g.fencing().zxid())
            });
            assert!(common::wait_contenders(&a_mutex, 2, Duration::from_secs(5)));
            let c_waiter = s.spawn(|| {
                let mutex = DistributedMutex::new(&c, &path).unwrap();
                let guard = mutex.lock().unwrap();
                let alone = mutex.contenders().unwrap().len() == 1;
                guard.unlock().unwrap();
                alone
            });
            assert!(common::wait_contenders(&a_mutex, 3, Duration::from_secs(5)));
            let b_node = a_mutex.contenders().unwrap().remove(1);
            assert!(a_mutex.break_contender(&b_node).unwrap());
            thread::sleep(Duration::from_millis(200));
            drop(held);
            assert!(
                matches!(b_waiter.join().unwrap(), Err(Error::LockLost { .. })),
                "a broken waiter claimed the lock"
            );
            assert!(c_waiter.join().unwrap(), "C was not the only holder");
        });
    }

    #[test]
    fn a_waiter_whose_node_goes_just_before_its_predecessor_never_claims() {
        // The next waiter in line learns of its predecessor's deletion with no other node ahead,
        // the one handoff where it does not list the queue: it must still notice that its own node
        // went first, in the same burst or in the same transaction, in either order.
        let raw = common::RawClient::connect(&common::connect_string());
        type Delete = fn(&common::RawClient, &str, &str);
        let ways: [(&str, Delete); 4] = [
            ("two deletes, ours first", |raw, ours, holder| {
                raw.delete_back_to_back(&[ours, holder])
            }),
            ("two deletes, the holder's first", |raw, ours, holder| {
                raw.delete_back_to_back(&[holder, ours])
            }),
            ("one multi, ours first", |raw, ours, holder| {
                raw.delete_in_one_multi(&[ours, holder])
            }),
            ("one multi, the holder's first", |raw, ours, holder| {
                raw.delete_in_one_multi(&[holder, ours])
            }),
        ];
        for (round, (how, delete)) in ways.into_iter().enumerate() {
            let (a, b) = (common::client(), common::client());
            let path = common::lock_path(&format!("own-node-first-{round}"));
            let a_mutex = DistributedMutex::new(&a, &path).unwrap();
            let held = a_mutex.lock().unwrap();
            thread::scope(|s| {
                let b_waiter = s.spawn(|| {
                    let mutex = DistributedMutex::new(&b, &path).unwrap();
                    // A waiter that claimed in between (its node outlived the holder's) must
                    // then report the lock lost.
                    mutex
                        .lock_timeout(Duration::from_secs(10))
                        .map(|g| g.map(|g| g.wait_lost_timeout(Duration::from_secs(5))))
                });
                assert!(common::wait_contenders(&a_mutex, 2, Duration::from_secs(5)));
                // Let the waiter's watch reach the server.
                thread::sleep(Duration::from_millis(200));
                let nodes = a_mutex.contenders().unwrap();
                let (holder, ours) = (
                    format!("{path}/{}", nodes[0].node_name),
                    format!("{path}/{}", nodes[1].node_name),
                );
                delete(&raw, &ours, &holder);
                let outcome = b_waiter.join().unwrap();
                let ours_went_first = !how.contains("holder's first");
                let atomic = how.contains("multi");
                match outcome {
                    Err(Error::LockLost { .. }) => {}
                    Ok(Some(Some(LockState::Lost))) if !ours_went_first && !atomic => {}
                    other => panic!("{how}: the waiter whose node was deleted got {other:?}"),
                }
            });
            assert!(matches!(held.unlock(), Err(Error::LockLost { .. })));
            assert!(raw.children(&path).is_empty(), "{how}: nodes left behind");
        }
    }

    #[test]
    fn a_holder_whose_node_is_deleted_reports_lost() {
        // (`scale.rs`, `herd`, checks that the watch this sets is removed before a normal release.)
        let raw = common::RawClient::connect(&common::connect_string());
        let client = common::client();
        let path = common::lock_path("holder-node-deleted");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let guard = mutex.lock().unwrap();
        assert_eq!(guard.state(), LockState::Held);
        // Watching its node does not make a lock that is not revocable listen for revocation.
        let asked = std::time::Instant::now();
        assert!(!guard.wait_revocation_timeout(Duration::from_secs(2)));
        assert!(asked.elapsed() < Duration::from_millis(500));
        assert!(!guard.revocation_requested());
        let node = format!("{path}/{}", mutex.contenders().unwrap()[0].node_name);
        raw.delete_back_to_back(&[&node]);
        assert_eq!(
            guard.wait_lost_timeout(Duration::from_secs(5)),
            Some(LockState::Lost)
        );
        assert_eq!(guard.state(), LockState::Lost);
        assert!(!guard.is_held());
        assert!(matches!(guard.unlock(), Err(Error::LockLost { .. })));
    }
}

mod one_session_many_waiters {
    //! What the waiters of one session learn of a queue and share (`session/floors.rs`): a listing
    //! whose lowest lock node is `n`, or a holder with nothing ahead, proves every node below gone;
    //! a waiter whose predecessor goes claims without listing when the next node in its way is
    //! known gone. These tests try to make that knowledge wrong against a real server: one
    //! session's many waiters mixed with other sessions' in one queue while nodes ahead of them
    //! withdraw, a lock path swept and re-created (numbers from 0 again), a waiter's own node
    //! deleted behind its back, reconnects; on a mutex, a read/write lock, an election and a
    //! semaphore's gate. Each checks that no two ever hold at once and that nobody who should get
    //! the lock is left waiting.

    use crate::common;
    use common::proxy::Proxy;
    use common::servers::PrivateServer;
    use common::{Exclusion, RawClient};
    use std::sync::atomic::Ordering::SeqCst;
    use std::sync::atomic::{AtomicBool, AtomicUsize};
    use std::sync::Arc;
    use std::thread;
    use std::time::{Duration, Instant};
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
                        (true, false) => {
                            Some(lock.write_timeout(PATIENCE).unwrap().expect("stuck"))
                        }
                        (false, false) => {
                            Some(lock.read_timeout(PATIENCE).unwrap().expect("stuck"))
                        }
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
                    let limit =
                        Duration::from_millis(if gives_up { 300 + 97 * i as u64 } else { 0 });
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
}

mod used_up_sequence_numbers {
    //! A lock path whose child counter (`cversion`) has reached 2^31, on a real server: ZooKeeper
    //! 3.8 stops numbering new nodes in order there (every one is `2147483647`, or negative when
    //! creates are pipelined), so zklock must refuse to queue rather than let a contender think it
    //! is first while another holds. Getting there through the API takes about a billion creates,
    //! so the test edits the counter into a stopped server's snapshot (`common::snapshot`).

    use crate::common;
    use common::servers::PrivateServer;
    use common::{Exclusion, RawClient};
    use std::sync::atomic::Ordering::SeqCst;
    use std::sync::{Arc, Barrier};
    use std::time::{Duration, Instant};
    use zklock::{DistributedMutex, Error};

    /// The counter written into the snapshot: the holder's node is numbered with it, and every
    /// node after that would be numbered `i32::MAX` or negative.
    const LAST_ORDERABLE: i32 = i32::MAX - 1;

    const CLIENTS: usize = 2;

    const CONTENDERS_PER_CLIENT: usize = 5;

    /// The sequence number at the end of a node's path (`%010d`, so also `-000000001`).
    fn sequence(node_path: &str) -> i64 {
        let digits = &node_path[node_path.len() - 10..];
        digits
            .parse()
            .unwrap_or_else(|e| panic!("{node_path}: {e}"))
    }

    #[test]
    fn a_lock_path_with_used_up_sequence_numbers_queues_no_one() {
        let started = Instant::now();
        // The zxid digest would disagree with the edited counter: not checked, and not written.
        let server = PrivateServer::start("-Dzookeeper.digest.enabled=false");
        let connect = server.connect_string();
        // Persistent, not a container: the server's sweep must not remove it while it is empty.
        let path = format!("/seq-exhausted-{}", uuid::Uuid::new_v4().simple());
        {
            let raw = RawClient::connect(&connect);
            raw.create_persistent(&path);
        }
        // ZooKeeper 3.8 writes a snapshot of what it loaded when it starts: after this restart the
        // newest snapshot holds the lock path (`set_cversion` fails if it does not), and nothing
        // was logged after it.
        server.stop_keeping_data();
        server.start_again();
        server.stop_keeping_data();
        let file = common::snapshot::newest(&server.snapshot_dir());
        let old = common::snapshot::set_cversion(&file, &path, LAST_ORDERABLE);
        assert_eq!(old, 0, "{path} had children before the edit");
        eprintln!(
            "{}: cversion of {path} set to {LAST_ORDERABLE}",
            file.display()
        );
        server.start_again();

        let holder_client = common::client_at(&connect, common::SESSION_TIMEOUT);
        let holder_mutex = DistributedMutex::new(&holder_client, &path).unwrap();
        let guard = holder_mutex.lock().expect("the holder locks");
        assert_eq!(
            sequence(guard.node_path()),
            i64::from(LAST_ORDERABLE),
            "the snapshot's counter did not apply: {}",
            guard.node_path()
        );
        let exclusion = Arc::new(Exclusion::default());
        exclusion.enter();

        // Every contender's node is numbered past the holder's counter: each must be refused,
        // none may get the lock, and none may wait.
        let clients: Vec<_> = (0..CLIENTS)
            .map(|_| common::client_at(&connect, common::SESSION_TIMEOUT))
            .collect();
        let barrier = Arc::new(Barrier::new(CLIENTS * CONTENDERS_PER_CLIENT));
        let threads: Vec<_> = (0..CLIENTS * CONTENDERS_PER_CLIENT)
            .map(|i| {
                let mutex = DistributedMutex::new(&clients[i % CLIENTS], &path).unwrap();
                let (barrier, exclusion) = (barrier.clone(), exclusion.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    let begun = Instant::now();
                    let (how, result) = if i % 2 == 0 {
                        (
                            "lock_timeout(2 s)",
                            mutex.lock_timeout(Duration::from_secs(2)),
                        )
                    } else {
                        ("try_lock", mutex.try_lock())
                    };
                    let took = begun.elapsed();
                    match result {
                        Err(Error::SequenceExhausted { path }) => Ok((path, took)),
                        Ok(Some(guard)) => {
                            exclusion.enter();
                            let node = guard.node_path().to_owned();
                            std::thread::sleep(Duration::from_millis(100));
                            exclusion.leave();
                            drop(guard);
                            Err(format!("contender {i} ({how}) got the lock as {node}"))
                        }
                        Ok(None) => Err(format!("contender {i} ({how}): no lock, after {took:?}")),
                        Err(e) => Err(format!("contender {i} ({how}): {e:?}")),
                    }
                })
            })
            .collect();
        let outcomes: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let overlaps = exclusion.overlaps.load(SeqCst);
        let failures: Vec<&String> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
        assert_eq!(
            overlaps, 0,
            "the lock was held twice at once: {failures:#?}"
        );
        assert!(failures.is_empty(), "not refused: {failures:#?}");
        for (said, took) in outcomes.iter().flatten() {
            assert_eq!(said, &path, "SequenceExhausted names another path");
            assert!(
                *took < Duration::from_secs(2),
                "refused only after {took:?}"
            );
        }

        // Nothing left behind: only the holder's node is queued (withdrawals may finish in the
        // background).
        let mut queued = Vec::new();
        let alone = common::eventually(Duration::from_secs(5), || {
            queued = holder_mutex.contenders().expect("listing the queue");
            queued.len() == 1
        });
        let names: Vec<_> = queued.iter().map(|c| c.node_name.as_str()).collect();
        assert!(alone, "left behind: {names:?}");
        assert!(
            guard.node_path().ends_with(&format!("/{}", names[0])),
            "{} is not the one queued: {names:?}",
            guard.node_path()
        );

        exclusion.leave();
        drop(guard);
        for client in clients {
            client.close().unwrap();
        }
        holder_client.close().unwrap();
        eprintln!("took {:?}", started.elapsed());
    }
}
