//! Faults between client and server: connections blackholed, severed or refused through the
//! loopback proxy (`tests/common/proxy.rs`), frozen (`SIGSTOP`) private servers, replies lost on
//! the way back. Holders learn of their loss before anyone else acquires, waiters survive,
//! deadlines hold, nothing is guessed and nothing is left behind.
//!
//! The ensemble's failover is in `faults_ensemble.rs`, the chaos run in `faults_chaos.rs`, a
//! session expiring between the steps of one acquisition in `faults_between_steps.rs`.

mod common;

mod connection_faults {
    //! Real faults between client and server, injected with the loopback proxy.

    use crate::common;
    use common::client_via;
    use common::proxy::Proxy;
    use common::servers::PrivateServer;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;
    use std::thread;
    use std::time::{Duration, Instant};
    use zklock::client::SessionState;
    use zklock::{CancelToken, DistributedMutex, Error, LockState, Wait};

    #[test]
    fn silenced_holder_knows_before_the_next_holder_acquires() {
        let proxy = Proxy::start(&common::connect_string());
        let path = common::lock_path("expiry");
        let a = client_via(&proxy, Duration::from_secs(2));
        let a_mutex = DistributedMutex::new(&a, &path).unwrap();
        let a_guard = a_mutex.lock().unwrap();
        let first_session = a_guard.session_id();

        let lost_at: Mutex<Option<Instant>> = Mutex::new(None);
        let blackholed: Mutex<Option<Instant>> = Mutex::new(None);
        let done = AtomicBool::new(false);
        let b = common::client();
        let b_mutex = DistributedMutex::new(&b, &path).unwrap();
        let (b_acquired_at, b_token) = thread::scope(|s| {
            s.spawn(|| {
                while !done.load(Ordering::SeqCst) {
                    if !a_guard.is_held() {
                        lost_at.lock().unwrap().get_or_insert_with(Instant::now);
                    }
                    thread::sleep(Duration::from_millis(2));
                }
            });
            proxy.blackhole(true);
            *blackholed.lock().unwrap() = Some(Instant::now());
            let guard = b_mutex.lock().unwrap();
            let at = Instant::now();
            done.store(true, Ordering::SeqCst);
            (at, guard)
        });
        let blackholed_at = blackholed.lock().unwrap().unwrap();
        let lost_at = lost_at.lock().unwrap().expect("old holder never noticed");
        eprintln!(
            "connection silenced: old holder not-held after {:?}, new holder acquired after {:?}",
            lost_at - blackholed_at,
            b_acquired_at - blackholed_at
        );
        assert!(
            lost_at < b_acquired_at,
            "old holder still believed it held the lock when the new one acquired"
        );
        assert!(b_token.fencing().zxid() > a_guard.fencing().zxid());

        proxy.blackhole(false);
        assert!(common::eventually(Duration::from_secs(10), || a_guard
            .state()
            == LockState::Lost));
        assert!(matches!(a_guard.unlock(), Err(Error::LockLost { .. })));
        drop(b_token);
        // The client recovers with a new session, and the mutex works again.
        let again = a_mutex
            .lock_timeout(Duration::from_secs(10))
            .unwrap()
            .expect("lock after recovery");
        assert_ne!(again.session_id(), first_session);
        assert!(again.is_held());
    }

    #[test]
    fn waiter_survives_severed_connections_and_acquires() {
        let proxy = Proxy::start(&common::connect_string());
        let path = common::lock_path("sever");
        let holder_client = common::client();
        let holder_mutex = DistributedMutex::new(&holder_client, &path).unwrap();
        let holder = holder_mutex.lock().unwrap();
        let waiter_client = client_via(&proxy, Duration::from_secs(4));
        thread::scope(|s| {
            let waiter = s.spawn(|| {
                let mutex = DistributedMutex::new(&waiter_client, &path).unwrap();
                let guard = mutex.lock().unwrap();
                guard.fencing().zxid()
            });
            assert!(common::wait_contenders(
                &holder_mutex,
                2,
                Duration::from_secs(10)
            ));
            for _ in 0..3 {
                proxy.sever();
                thread::sleep(Duration::from_millis(300));
            }
            assert_eq!(
                holder_mutex.contenders().unwrap().len(),
                2,
                "no duplicate or lost waiter node"
            );
            let holder_token = holder.fencing().zxid();
            drop(holder);
            assert!(waiter.join().unwrap() > holder_token);
        });
        assert!(common::wait_contenders(
            &holder_mutex,
            0,
            Duration::from_secs(5)
        ));
    }

    #[test]
    fn holder_suspended_during_outage_keeps_lock_after_reconnect() {
        let proxy = Proxy::start(&common::connect_string());
        let path = common::lock_path("suspend");
        let client = client_via(&proxy, Duration::from_secs(6));
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let guard = mutex.lock().unwrap();
        proxy.blackhole(true);
        assert!(common::eventually(Duration::from_secs(5), || guard.state()
            == LockState::Suspended));
        proxy.blackhole(false);
        proxy.sever();
        assert!(common::eventually(Duration::from_secs(5), || guard.state() == LockState::Held));
        guard.unlock().unwrap();
        assert_eq!(common::children_count(&common::client(), &path), 0);
    }

    /// An outage at a call's deadline says where and for how long: the lock path or the node
    /// written, the server the session was last connected to, and the call's timeout.
    #[test]
    fn an_outage_at_the_deadline_names_the_path_the_server_and_the_timeout() {
        let proxy = Proxy::start(&common::connect_string());
        let server = proxy.connect_string();
        let path = common::lock_path("outage-named");
        // A short session: the fenced write waits for the connection up to one session timeout,
        // which must end before the client gives the session up (7/5 of it).
        let client = client_via(&proxy, Duration::from_secs(2));
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let guard = mutex.lock().unwrap();
        let other = DistributedMutex::new(&client, &format!("{path}-other")).unwrap();
        drop(other.lock().unwrap()); // Its lock path exists: the acquisition's first step is a create.

        proxy.refuse(true);
        proxy.sever();
        assert!(common::eventually(Duration::from_secs(2), || {
            client.state() == SessionState::Suspended
        }));
        let outcome = other.lock_timeout(Duration::from_millis(300));
        let Err(
            err @ Error::ConnectionLoss {
                path: Some(lock_path),
                server: Some(last_server),
                timeout,
                ..
            },
        ) = &outcome
        else {
            panic!("expected a ConnectionLoss naming path and server, got {outcome:?}");
        };
        assert_eq!(lock_path, other.path());
        assert_eq!(last_server, &server);
        assert_eq!(*timeout, Some(Duration::from_millis(300)));
        assert_eq!(
            err.to_string(),
            format!(
                "connection to ZooKeeper lost (last server {server}) and not restored within \
             300ms (call on {})",
                other.path()
            )
        );

        let data_path = format!("{path}-data");
        let written = guard.fenced_set_data(&data_path, b"x");
        assert!(
            matches!(
                &written,
                Err(Error::ConnectionLoss { path: Some(p), server: Some(s), timeout: Some(t), .. })
                    if *p == data_path && *s == server && *t == Duration::from_secs(2)
            ),
            "{written:?}"
        );

        // (The session may not outlive this outage: the guard's state is not this test's point.)
        proxy.refuse(false);
        drop(guard);
        // The abandoned acquisition left nothing behind.
        let observer = common::client();
        assert!(common::wait_contenders(
            &DistributedMutex::new(&observer, other.path()).unwrap(),
            0,
            Duration::from_secs(5)
        ));
    }

    #[test]
    fn timeouts_are_honoured_while_no_server_answers() {
        let proxy = Proxy::start(&common::connect_string());
        let path = common::lock_path("outage");
        let client = client_via(&proxy, Duration::from_secs(6));
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        drop(mutex.lock().unwrap()); // path exists, session warm
        proxy.blackhole(true);
        let started = Instant::now();
        let outcome = mutex.lock_timeout(Duration::from_millis(500));
        let took = started.elapsed();
        assert!(
            matches!(outcome, Err(Error::ConnectionLoss { .. }) | Ok(None)),
            "{outcome:?}"
        );
        assert!(
            took < Duration::from_secs(2),
            "lock_timeout(500ms) took {took:?}"
        );
        proxy.blackhole(false);
        proxy.sever();
        // Whatever the abandoned attempt created is removed once the connection is back.
        let observer = common::client();
        assert!(common::wait_contenders(
            &DistributedMutex::new(&observer, &path).unwrap(),
            0,
            Duration::from_secs(10)
        ));
        assert!(mutex
            .lock_timeout(Duration::from_secs(10))
            .unwrap()
            .is_some());
    }

    #[test]
    fn wait_lost_reports_expiry_to_the_holder() {
        let proxy = Proxy::start(&common::connect_string());
        let path = common::lock_path("wait-lost");
        let client = client_via(&proxy, Duration::from_secs(2));
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let guard = mutex.lock().unwrap();
        proxy.blackhole(true);
        assert_eq!(guard.wait_lost(), LockState::Suspended);
        // Still silent past the session timeout: the server expires the session.
        let other = common::client();
        let other_mutex = DistributedMutex::new(&other, &path).unwrap();
        let next = other_mutex.lock_timeout(Duration::from_secs(20)).unwrap();
        assert!(
            next.is_some(),
            "server expired the silent session and handed the lock on"
        );
        proxy.blackhole(false);
        proxy.sever();
        assert!(common::eventually(Duration::from_secs(10), || guard
            .state()
            == LockState::Lost));
        assert_eq!(
            guard.wait_lost_timeout(Duration::from_secs(1)),
            Some(LockState::Lost)
        );
    }

    #[test]
    fn waiter_reconnecting_after_its_predecessor_left_does_not_jump_the_holder() {
        // Queue: holder, middle, waiter. The waiter loses its connection; the middle contender
        // gives up meanwhile; the waiter reconnects and must go on waiting for the holder.
        for _ in 0..3 {
            let proxy = Proxy::start(&common::connect_string());
            let path = common::lock_path("stale-wake");
            let (holder_client, middle_client) = (common::client(), common::client());
            let waiter_client = client_via(&proxy, Duration::from_secs(6));
            let holder_mutex = DistributedMutex::new(&holder_client, &path).unwrap();
            let holder = holder_mutex.lock().unwrap();
            let acquired = AtomicBool::new(false);
            thread::scope(|s| {
                let middle = s.spawn(|| {
                    let mutex = DistributedMutex::new(&middle_client, &path).unwrap();
                    mutex
                        .lock_timeout(Duration::from_millis(1500))
                        .unwrap()
                        .is_none()
                });
                assert!(common::wait_contenders(
                    &holder_mutex,
                    2,
                    Duration::from_secs(5)
                ));
                let waiter = s.spawn(|| {
                    let mutex = DistributedMutex::new(&waiter_client, &path).unwrap();
                    let guard = mutex.lock().unwrap();
                    acquired.store(true, Ordering::SeqCst);
                    guard.unlock().unwrap();
                });
                assert!(common::wait_contenders(
                    &holder_mutex,
                    3,
                    Duration::from_secs(5)
                ));
                proxy.refuse(true);
                proxy.sever();
                assert!(
                    middle.join().unwrap(),
                    "middle contender gave up during the outage"
                );
                proxy.refuse(false);
                thread::sleep(Duration::from_millis(1500));
                assert!(
                    !acquired.load(Ordering::SeqCst),
                    "waiter acquired while the holder held the lock"
                );
                assert!(holder.is_held());
                drop(holder);
                waiter.join().unwrap();
                assert!(acquired.load(Ordering::SeqCst));
            });
        }
    }

    #[test]
    fn release_during_an_outage_is_retried_until_the_node_is_gone() {
        let proxy = Proxy::start(&common::connect_string());
        let path = common::lock_path("release-retry");
        let client = client_via(&proxy, Duration::from_secs(8));
        let session = client.session_id();
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let guard = mutex.lock().unwrap();
        proxy.blackhole(true);
        assert_eq!(
            guard.wait_lost_timeout(Duration::from_secs(6)),
            Some(LockState::Suspended)
        );
        // The delete cannot be confirmed: reported as such, and handed to the background.
        assert!(matches!(guard.unlock(), Err(Error::OutcomeUnknown { .. })));
        let observer = common::client();
        assert_eq!(
            common::children_count(&observer, &path),
            1,
            "released before the connection came back?"
        );
        proxy.blackhole(false);
        proxy.sever();
        // Gone well before the 8 s session could expire, and by the same session: the retry did it.
        assert!(common::wait_contenders(
            &DistributedMutex::new(&observer, &path).unwrap(),
            0,
            Duration::from_secs(3)
        ));
        assert_eq!(client.session_id(), session);
        assert!(mutex.try_lock().unwrap().is_some());
    }

    /// A client of `server` with a 10 s session (its connection is declared dead only after 4 s
    /// of silence), holding the lock at a fresh path, and that lock's node.
    fn hold_on(server: &PrivateServer) -> (zklock::Client, String, zklock::LockGuard) {
        let path = common::lock_path("frozen");
        let client = common::client_at(&server.connect_string(), Duration::from_secs(10));
        let guard = DistributedMutex::new(&client, &path)
            .unwrap()
            .lock()
            .unwrap();
        (client, path, guard)
    }

    /// Dropping a guard while the server is frozen (SIGSTOP) blocks about a
    /// second at most, not until the connection is declared dead (2/5 of the session timeout) or
    /// the whole session timeout; the background retry deletes the node once the server runs
    /// again, on the same session (well before the session could expire).
    #[test]
    fn dropping_a_guard_on_a_frozen_server_returns_within_the_release_bound() {
        let server = PrivateServer::start("");
        let (client, path, guard) = hold_on(&server);
        let session = client.session_id();
        server.freeze();
        let dropping = Instant::now();
        drop(guard);
        let took = dropping.elapsed();
        server.thaw();
        eprintln!("the drop took {took:?}");
        assert!(
            took < Duration::from_secs(2),
            "dropping the guard blocked {took:?} on a frozen server"
        );
        let observer = common::client_at(&server.connect_string(), Duration::from_secs(10));
        let mutex = DistributedMutex::new(&observer, &path).unwrap();
        assert!(
            common::wait_contenders(&mutex, 0, Duration::from_secs(5)),
            "the node outlived the thaw"
        );
        assert_eq!(client.session_id(), session, "the node went with an expiry");

        // The bound is the client's to set.
        let quick = common::builder(&server.connect_string(), Duration::from_secs(10))
            .release_timeout(Duration::from_millis(200))
            .connect()
            .unwrap();
        let guard = DistributedMutex::new(&quick, &path)
            .unwrap()
            .lock()
            .unwrap();
        server.freeze();
        let dropping = Instant::now();
        drop(guard);
        let took = dropping.elapsed();
        server.thaw();
        eprintln!("with a 200 ms release timeout, the drop took {took:?}");
        assert!(took < Duration::from_secs(1), "the drop blocked {took:?}");
        assert!(common::wait_contenders(&mutex, 0, Duration::from_secs(5)));
    }

    /// `unlock()` on a frozen server may wait longer than a drop, but when the
    /// delete is not confirmed it says that the outcome is unknown; the background retry then
    /// deletes the node once the server runs again.
    #[test]
    fn unlock_on_a_frozen_server_reports_an_unknown_outcome() {
        let server = PrivateServer::start("");
        let (client, path, guard) = hold_on(&server);
        let node = guard.node_path().to_owned();
        server.freeze();
        let unlocking = Instant::now();
        let outcome = guard.unlock();
        let took = unlocking.elapsed();
        server.thaw();
        eprintln!("unlock: {outcome:?} after {took:?}");
        assert_eq!(outcome, Err(Error::OutcomeUnknown { path: node }));
        // Bounded by the session timeout.
        assert!(took < Duration::from_secs(11), "unlock blocked {took:?}");
        let observer = common::client_at(&server.connect_string(), Duration::from_secs(10));
        let mutex = DistributedMutex::new(&observer, &path).unwrap();
        assert!(common::wait_contenders(&mutex, 0, Duration::from_secs(5)));
        drop(client);
    }

    /// A blocking call that finds its session expired opens a new one within the call: it ends
    /// at its timeout however long the connect would take, a cancel stops it at once even while a
    /// server swallows the handshake (a blocking socket call nothing interrupts: the connect runs
    /// on a thread of its own), and once a server answers the lock is taken on a new session.
    #[test]
    fn renewing_an_expired_session_ends_at_the_timeout_and_at_once_on_cancel() {
        let proxy = Proxy::start(&common::connect_string());
        let path = common::lock_path("renewal");
        let client = client_via(&proxy, Duration::from_secs(2));
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let first_session = client.session_id();
        drop(mutex.lock().unwrap());
        proxy.blackhole(true);
        assert!(common::eventually(Duration::from_secs(20), || client
            .state()
            == SessionState::Expired));
        // New connections are refused: the renewal's connect goes on until the call's timeout.
        proxy.refuse(true);
        proxy.blackhole(false);
        proxy.sever();
        let started = Instant::now();
        let outcome = mutex.lock_timeout(Duration::from_millis(1500));
        let took = started.elapsed();
        assert!(
            matches!(outcome, Err(Error::ConnectionLoss { .. })),
            "{outcome:?}"
        );
        assert!(took < Duration::from_secs(4), "took {took:?}");
        // A server that accepts and never answers: the handshake hangs for its share of the
        // session timeout, and no timeout is given; the cancel ends the call all the same.
        proxy.refuse(false);
        proxy.blackhole(true);
        let token = CancelToken::new();
        let (outcome, took) = thread::scope(|s| {
            s.spawn(|| {
                thread::sleep(Duration::from_millis(500));
                token.cancel();
            });
            let started = Instant::now();
            let outcome = mutex.lock_with(Wait::forever().cancel_on(&token));
            (outcome, started.elapsed())
        });
        assert!(matches!(outcome, Err(Error::Cancelled)), "{outcome:?}");
        assert!(
            took < Duration::from_millis(1000),
            "cancelled after {took:?}"
        );
        proxy.blackhole(false);
        let guard = mutex
            .lock_timeout(Duration::from_secs(10))
            .unwrap()
            .expect("lock on a new session");
        assert_ne!(guard.session_id(), first_session);
    }
}

mod lost_replies {
    //! A write whose reply was lost is found out, never guessed: a lost create reply is looked up
    //! after a `sync` and the node found adopted, never duplicated; a break whose delete reply was
    //! lost reports the delete, not "already gone". Real server, replies swallowed by the proxy.

    use crate::common;
    use common::proxy::{opcode, Proxy, Request};
    use std::thread;
    use std::time::Duration;
    use zklock::DistributedMutex;

    /// `ancestor` is `path` or one of its ancestors.
    fn covers(ancestor: &str, path: &str) -> bool {
        ancestor == "/" || ancestor == path || path.starts_with(&format!("{ancestor}/"))
    }

    fn summary(requests: &[&Request]) -> String {
        requests
            .iter()
            .map(|r| format!("conn {} op {} {:?}", r.conn, r.opcode, r.path))
            .collect::<Vec<_>>()
            .join("\n  ")
    }

    /// A lost create: the server executes a create whose reply never arrives. After the reconnect
    /// the client adopts the node it had created rather than creating a second one, and looks for
    /// it only after a sync, so that a lagging follower cannot hide it.
    #[test]
    fn lost_create_reply_is_looked_up_after_a_sync() {
        let proxy = Proxy::start(&common::connect_string());
        let path = common::lock_path("sync-before-find");
        let client = common::client_via(&proxy, Duration::from_secs(6));
        let observer = common::client();
        let observed = DistributedMutex::new(&observer, &path).unwrap();
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        // The lock path exists, so the next create is the one that matters.
        drop(mutex.lock().unwrap());
        proxy.record_requests(true);
        thread::scope(|s| {
            proxy.drop_replies(true);
            let contender = s.spawn(|| {
                let guard = mutex.lock().unwrap();
                (
                    guard.node_path().to_owned(),
                    mutex.contenders().unwrap().len(),
                )
            });
            // The server executed the create; its reply went nowhere.
            assert!(common::wait_contenders(
                &observed,
                1,
                Duration::from_secs(5)
            ));
            let created = observed.contenders().unwrap()[0].node_name.clone();
            // The observer saw the node: give the proxy time to swallow the reply on its way.
            thread::sleep(Duration::from_millis(200));
            proxy.drop_replies(false);
            proxy.sever();
            let (held_node, nodes_seen) = contender.join().unwrap();
            assert_eq!(
                held_node,
                format!("{path}/{created}"),
                "adopted the node it had created"
            );
            assert_eq!(nodes_seen, 1, "created a second node");
        });
        proxy.record_requests(false);

        let requests = proxy.requests();
        let ours = |r: &&Request| r.path.as_deref().is_some_and(|p| covers(&path, p));
        let create = requests
            .iter()
            .find(|r| matches!(r.opcode, opcode::CREATE | opcode::CREATE2) && ours(r))
            .expect("the lost create was recorded");
        // Everything sent on the connections opened after the one that lost the reply.
        let after: Vec<&Request> = requests.iter().filter(|r| r.conn > create.conn).collect();
        let listing = after
            .iter()
            .position(|r| {
                matches!(r.opcode, opcode::GET_CHILDREN | opcode::GET_CHILDREN2)
                    && r.path.as_deref() == Some(path.as_str())
            })
            .unwrap_or_else(|| {
                panic!(
                    "no listing of {path} after the reconnect:\n  {}",
                    summary(&after)
                )
            });
        assert!(
            after[..listing]
                .iter()
                .any(|r| r.opcode == opcode::SYNC
                    && r.path.as_deref().is_some_and(|p| covers(p, &path))),
            "after the reconnect, {path} was listed to find our node without a sync first \
         (a lagging follower could hide the node); requests after the reconnect:\n  {}",
            summary(&after)
        );
        assert!(common::wait_contenders(
            &observed,
            0,
            Duration::from_secs(5)
        ));
    }

    #[test]
    fn break_whose_delete_reply_was_lost_reports_the_delete() {
        let proxy = Proxy::start(&common::connect_string());
        let path = common::lock_path("break-lost-reply");
        let holder_client = common::client();
        let holder_mutex = DistributedMutex::new(&holder_client, &path).unwrap();
        let guard = holder_mutex.lock().unwrap();
        let breaker = common::client_via(&proxy, Duration::from_secs(6));
        let mutex = DistributedMutex::new(&breaker, &path).unwrap();
        let victim = mutex.contenders().unwrap().remove(0);

        let outcome = thread::scope(|s| {
            proxy.drop_replies(true);
            let breaking = s.spawn(|| mutex.break_contender(&victim));
            // The server executed the delete; its reply went nowhere.
            assert!(
                common::wait_contenders(&holder_mutex, 0, Duration::from_secs(5)),
                "the delete never reached the server"
            );
            // The observer saw the node gone: give the proxy time to swallow the reply.
            thread::sleep(Duration::from_millis(200));
            proxy.drop_replies(false);
            proxy.sever();
            breaking.join().unwrap()
        });
        assert_eq!(
            outcome,
            Ok(true),
            "our delete removed the node, but its reply was lost: not \"already gone\""
        );
        assert!(holder_mutex.contenders().unwrap().is_empty());
        // A node that was gone before we asked is "already gone".
        assert_eq!(mutex.break_contender(&victim), Ok(false));
        drop(guard); // Lost: its release finds the node gone.
    }
}

mod deadlines_in_outages {
    //! Timed all-or-nothing calls (a semaphore's `acquire_many`, a multi-lock) keep the caller's
    //! deadline while the connection is blackholed.

    use crate::common;
    use common::proxy::Proxy;
    use std::thread;
    use std::time::{Duration, Instant};
    use zklock::{DistributedMutex, Error, MultiLock, Semaphore};

    /// Our call's time budget, and how far past it a call may still return: the withdrawal of a
    /// queued node is waited for at most 100 ms past the deadline (see
    /// `DistributedMutex::lock_timeout`), plus slack for a slow machine. Releasing what was
    /// already taken must add neither a release timeout nor a session timeout (every recipe,
    /// fault and form: `faults_deadlines.rs`).
    const TIMED_CALL: Duration = Duration::from_millis(1500);

    const RETURN_WITHIN: Duration = Duration::from_millis(1800);

    /// Runs `call` on a thread; once `waiting` holds (our call took its first part and waits for
    /// the rest) and 500 ms have passed since the call began, blackholes `proxy`. Returns the
    /// call's outcome and how long it took.
    fn blackholed_while_waiting<T: Send>(
        proxy: &Proxy,
        call: impl FnOnce() -> T + Send,
        mut waiting: impl FnMut() -> bool,
    ) -> (T, Duration) {
        thread::scope(|s| {
            let started = Instant::now();
            let call = s.spawn(move || {
                let outcome = call();
                (outcome, started.elapsed())
            });
            assert!(
                common::eventually(Duration::from_millis(1200), &mut waiting),
                "the call never got to wait for its second part"
            );
            if let Some(rest) = Duration::from_millis(500).checked_sub(started.elapsed()) {
                thread::sleep(rest);
            }
            proxy.blackhole(true);
            call.join().unwrap()
        })
    }

    #[test]
    fn semaphore_timed_acquire_many_keeps_its_deadline_in_an_outage() {
        let proxy = Proxy::start(&common::connect_string());
        let path = common::lock_path("sem-deadline");
        let other = common::client();
        let other_sem = Semaphore::new(&other, &path, 2).unwrap();
        let other_permit = other_sem.acquire().unwrap();
        let ours = common::client_via(&proxy, Duration::from_secs(10));
        let session = ours.session_id();
        let sem = Semaphore::new(&ours, &path, 2).unwrap();

        let (outcome, took) = blackholed_while_waiting(
            &proxy,
            || {
                sem.acquire_many_timeout(2, TIMED_CALL)
                    .map(|p| p.map(|p| p.count()))
            },
            // Our first lease and the one queued for the second, next to the other's lease.
            || other_sem.contenders().unwrap().len() == 3,
        );
        eprintln!("acquire_many_timeout(2, {TIMED_CALL:?}): {outcome:?} after {took:?}");
        assert!(
            matches!(outcome, Ok(None) | Err(Error::ConnectionLoss { .. })),
            "{outcome:?}"
        );
        assert!(
            took < RETURN_WITHIN,
            "acquire_many_timeout(2, {TIMED_CALL:?}) took {took:?}"
        );

        proxy.blackhole(false);
        proxy.sever();
        // Our leases and our pass through the gate are removed in the background, by our session
        // (well before it could expire).
        assert!(
            common::eventually(Duration::from_secs(5), || {
                other_sem.contenders().unwrap().len() == 1
                    && common::children_count(&other, &format!("{path}/locks")) == 0
            }),
            "left behind: {:?}",
            other_sem.contenders().unwrap()
        );
        assert_eq!(ours.session_id(), session, "our session expired meanwhile");
        assert!(other_permit.is_held());
    }

    #[test]
    fn multilock_timed_lock_keeps_its_deadline_in_an_outage() {
        let proxy = Proxy::start(&common::connect_string());
        let root = common::lock_path("multi-deadline");
        let (first, second) = (format!("{root}/a"), format!("{root}/b"));
        let other = common::client();
        let other_second = DistributedMutex::new(&other, &second).unwrap();
        let other_guard = other_second.lock().unwrap();
        let ours = common::client_via(&proxy, Duration::from_secs(10));
        let session = ours.session_id();
        let both = MultiLock::new(&ours)
            .mutex(&first)
            .unwrap()
            .mutex(&second)
            .unwrap();
        let observed_first = DistributedMutex::new(&other, &first).unwrap();

        let (outcome, took) = blackholed_while_waiting(
            &proxy,
            || both.lock_timeout(TIMED_CALL).map(|g| g.is_some()),
            // The first lock taken, queued on the second.
            || {
                observed_first.contenders().unwrap().len() == 1
                    && other_second.contenders().unwrap().len() == 2
            },
        );
        eprintln!("MultiLock::lock_timeout({TIMED_CALL:?}): {outcome:?} after {took:?}");
        assert!(
            matches!(outcome, Ok(false) | Err(Error::ConnectionLoss { .. })),
            "{outcome:?}"
        );
        assert!(
            took < RETURN_WITHIN,
            "MultiLock::lock_timeout({TIMED_CALL:?}) took {took:?}"
        );

        proxy.blackhole(false);
        proxy.sever();
        assert!(
            common::eventually(Duration::from_secs(5), || {
                observed_first.contenders().unwrap().is_empty()
                    && other_second.contenders().unwrap().len() == 1
            }),
            "left behind: {:?} {:?}",
            observed_first.contenders().unwrap(),
            other_second.contenders().unwrap()
        );
        assert_eq!(ours.session_id(), session, "our session expired meanwhile");
        assert!(other_guard.is_held());
    }
}
