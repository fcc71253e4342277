//! Many waiters, watches and nodes on one session or one lock path: a busy session survives a
//! server restart, long queues are read whole, releases wake only the waiters that can proceed.
//!
//! Each test loads this machine with thousands of threads or tens of thousands of nodes, so they
//! run one at a time ([`one_at_a_time`]): none measures another's load.

mod common;

use std::sync::{Mutex, MutexGuard};

/// Taken by each test of this binary for its whole run, so that none measures another's load.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

mod busy_session_restart {
    //! A busy session survives a reconnect. A session with 10,000 data watches on
    //! 290-character paths keeps them across a short server restart (the old client crate dropped
    //! its connection at the second SetWatches reply, on every attempt, until the session expired);
    //! and a holder sharing its session with 2,000 waiters that all re-list after a reconnect reads
    //! `Held` throughout, as it does while they queue up (its keepalive must not wait behind their
    //! traffic).
    //!
    //! Each test loads this 2-core machine with thousands of threads: they run one at a time.

    use crate::common;
    use crate::one_at_a_time;
    use common::proxy::{opcode, Proxy, Request};
    use common::servers::{self, PrivateServer};
    use std::sync::{Arc, Mutex};
    use std::thread::{self, JoinHandle};
    use std::time::{Duration, Instant};
    use zklock::client::{SessionState, StateChange};
    use zklock::{Client, DistributedMutex, LockGuard, LockState};

    /// A waiter's stack: `lock()` needs little (64 KiB suffice in a debug build), and 10,000
    /// default 2 MiB stacks would be 20 GiB of address space.
    const WAITER_STACK: usize = 128 * 1024;

    /// The sequence number that ends a lock node's path.
    fn sequence(node_path: &str) -> i64 {
        node_path[node_path.len() - 10..]
            .parse()
            .unwrap_or_else(|_| panic!("no sequence number in {node_path}"))
    }

    /// Threads queued on locks of one session: each takes its lock, notes its node's sequence
    /// number while it holds it (so each lock's list is in the order of acquisition), and releases.
    struct Waiters {
        threads: Vec<JoinHandle<()>>,
        /// Per lock, the sequence numbers of its waiters in the order they acquired.
        acquired: Arc<Vec<Mutex<Vec<i64>>>>,
        /// What went wrong, one line per waiter.
        failures: Arc<Mutex<Vec<String>>>,
    }

    impl Waiters {
        fn spawn(mutexes: &[DistributedMutex], per_lock: usize) -> Waiters {
            let acquired: Arc<Vec<Mutex<Vec<i64>>>> =
                Arc::new(mutexes.iter().map(|_| Mutex::default()).collect());
            let failures = Arc::new(Mutex::new(Vec::new()));
            let mut threads = Vec::with_capacity(mutexes.len() * per_lock);
            for (i, mutex) in mutexes.iter().enumerate() {
                for _ in 0..per_lock {
                    let (mutex, acquired, failures) =
                        (mutex.clone(), acquired.clone(), failures.clone());
                    let thread = thread::Builder::new()
                        .stack_size(WAITER_STACK)
                        .spawn(move || match mutex.lock() {
                            Ok(guard) => {
                                acquired[i]
                                    .lock()
                                    .unwrap()
                                    .push(sequence(guard.node_path()));
                                if let Err(e) = guard.unlock() {
                                    failures.lock().unwrap().push(format!("unlock on {i}: {e}"));
                                }
                            }
                            Err(e) => failures.lock().unwrap().push(format!("lock {i}: {e}")),
                        })
                        .expect("a waiter thread");
                    threads.push(thread);
                }
            }
            Waiters {
                threads,
                acquired,
                failures,
            }
        }

        /// Waits (up to `limit`) for every waiter to finish, then checks that each one acquired,
        /// and that each lock's waiters acquired in queue order (by sequence number). On a
        /// timeout, says what the stuck queues look like.
        fn join_all_in_order(self, mutexes: &[DistributedMutex], per_lock: usize, limit: Duration) {
            let finished = poll(limit, Duration::from_millis(50), || {
                self.threads.iter().all(JoinHandle::is_finished)
            });
            if !finished {
                let stuck: Vec<String> = self
                    .acquired
                    .iter()
                    .zip(mutexes)
                    .filter(|(acquired, _)| acquired.lock().unwrap().len() < per_lock)
                    .take(3)
                    .map(|(acquired, mutex)| {
                        let queue: Vec<(i64, bool)> = mutex
                            .contenders()
                            .map(|c| c.iter().map(|c| (c.sequence, c.holds)).take(5).collect())
                            .unwrap_or_default();
                        let acquired = acquired.lock().unwrap();
                        format!(
                            "{}: {} acquired, last {:?}; queue now {queue:?}",
                            mutex.path(),
                            acquired.len(),
                            acquired.last()
                        )
                    })
                    .collect();
                panic!(
                    "{} of {} waiters still waiting after {limit:?}; failures {:?}; {stuck:#?}",
                    self.threads.iter().filter(|t| !t.is_finished()).count(),
                    self.threads.len(),
                    self.failures.lock().unwrap()
                );
            }
            for thread in self.threads {
                thread.join().expect("a waiter panicked");
            }
            let failures = self.failures.lock().unwrap();
            assert!(
                failures.is_empty(),
                "{} waiters failed, first: {:?}",
                failures.len(),
                &failures[..failures.len().min(5)]
            );
            for (i, acquired) in self.acquired.iter().enumerate() {
                let acquired = acquired.lock().unwrap();
                assert_eq!(
                    acquired.len(),
                    per_lock,
                    "lock {i}: not every waiter acquired"
                );
                assert!(
                    acquired.windows(2).all(|w| w[0] < w[1]),
                    "lock {i}: waiters acquired out of queue order: {acquired:?}"
                );
            }
        }
    }

    /// Waits until the client's state is `want`, for up to `limit`; returns it as last seen.
    fn wait_for_state(client: &Client, want: SessionState, limit: Duration) -> SessionState {
        let deadline = Instant::now() + limit;
        let mut seen = client.state();
        while seen != want && Instant::now() < deadline {
            seen = client.wait_state_change(seen, deadline - Instant::now());
        }
        seen
    }

    /// Polls `cond` every `every` for up to `limit`; true once it holds.
    fn poll(limit: Duration, every: Duration, mut cond: impl FnMut() -> bool) -> bool {
        let deadline = Instant::now() + limit;
        while !cond() {
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(every);
        }
        true
    }

    /// Locks with waiters queued behind a holder: each waiter watches the node just ahead of it.
    const QUEUES: usize = 100;

    const WAITERS_PER_QUEUE: usize = 100;

    /// Locks held without waiters, revocable: their holders watch their own nodes, and nothing but
    /// the SetWatches of a reconnect sets those watches again (waiters re-list and watch anew after
    /// a reconnect; a holder waits on the watch it has). Enough of them that every SetWatches
    /// request of the reconnect carries some (the registry's order is random).
    const SENTINELS: usize = 500;

    /// The length of every watched path.
    const WATCHED_PATH_LEN: usize = 290;

    /// A lock node's name: Curator's protected `_c_<uuid>-lock-<10 digits>`.
    const NODE_NAME_LEN: usize = 55;

    /// How long the server stays down (from the stop to the start, which takes longer: the JVM).
    const DOWN: Duration = Duration::from_secs(1);

    const RESTART_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

    /// A lock path whose nodes' paths are [`WATCHED_PATH_LEN`] long.
    fn long_lock_path(root: &str, name: &str) -> String {
        let head = format!("{root}/{name}-");
        let len = WATCHED_PATH_LEN - 1 - NODE_NAME_LEN;
        format!("{head}{}", "x".repeat(len - head.len()))
    }

    #[test]
    fn ten_thousand_watches_with_long_paths_survive_a_server_restart() {
        let _one = one_at_a_time();
        let server = PrivateServer::start("");
        let changes: Arc<Mutex<Vec<StateChange>>> = Arc::default();
        let told = changes.clone();
        let client = common::builder(&server.connect_string(), RESTART_SESSION_TIMEOUT)
            .on_state_change(move |change| {
                told.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(change.clone())
            })
            .connect()
            .expect("connect to the private server");
        let session = client.session_id();
        let root = format!("/restart-{}", uuid::Uuid::new_v4().simple());

        let started = Instant::now();
        let sentinel_locks: Vec<DistributedMutex> = (0..SENTINELS)
            .map(|i| {
                let path = long_lock_path(&root, &format!("s{i:03}"));
                DistributedMutex::new(&client, &path).unwrap().revocable()
            })
            .collect();
        let sentinels: Vec<LockGuard> = sentinel_locks.iter().map(|m| m.lock().unwrap()).collect();
        let queues: Vec<DistributedMutex> = (0..QUEUES)
            .map(|i| DistributedMutex::new(&client, &long_lock_path(&root, &format!("q{i:03}"))))
            .collect::<Result<_, _>>()
            .unwrap();
        let holders: Vec<LockGuard> = queues.iter().map(|m| m.lock().unwrap()).collect();
        for guard in sentinels.iter().chain(&holders) {
            assert_eq!(
                guard.node_path().len(),
                WATCHED_PATH_LEN,
                "{}",
                guard.node_path()
            );
        }
        let waiters = Waiters::spawn(&queues, WAITERS_PER_QUEUE);
        // One data watch per waiter (on the node ahead of it) and per sentinel (on its own node).
        let watches = QUEUES * WAITERS_PER_QUEUE + SENTINELS;
        let mut on_server = 0;
        assert!(
            poll(Duration::from_secs(90), Duration::from_millis(200), || {
                on_server = server.watches_of(session);
                on_server >= watches
            }),
            "only {on_server} of {watches} watches set"
        );
        assert_eq!(
            on_server, watches,
            "more watches than waiters and sentinels"
        );
        let queued = started.elapsed();

        // The restart, data kept.
        let stopped = Instant::now();
        server.stop_keeping_data();
        thread::sleep(DOWN);
        server.start_again();
        let down = stopped.elapsed();
        let serving = Instant::now();
        assert_eq!(
            wait_for_state(
                &client,
                SessionState::Connected,
                RESTART_SESSION_TIMEOUT * 2
            ),
            SessionState::Connected,
            "the session did not come back after the restart"
        );
        let reconnected = serving.elapsed();
        // The server lost its watches with its memory; the reconnect sets them again.
        let back = poll(
            RESTART_SESSION_TIMEOUT * 3,
            Duration::from_millis(100),
            || {
                on_server = server.watches_of(session);
                on_server >= watches || client.state() == SessionState::Expired
            },
        );
        let told = changes.lock().unwrap().clone();
        assert!(
            back && on_server >= watches,
            "only {on_server} of {watches} watches back {:.1?} after the restart; the client is \
         {:?}, it told {:?}",
            serving.elapsed(),
            client.state(),
            told
        );
        let rearmed = serving.elapsed();

        // Proof that the SetWatches themselves set the watches: a sentinel learns of a revocation
        // request only through the watch it had before the restart.
        let inspector = common::client_at(&server.connect_string(), RESTART_SESSION_TIMEOUT);
        let revoking = Instant::now();
        for mutex in &sentinel_locks {
            let theirs = DistributedMutex::new(&inspector, mutex.path()).unwrap();
            let holder = theirs.contenders().unwrap().into_iter().next().unwrap();
            assert!(theirs.request_revocation(&holder).unwrap());
        }
        for guard in &sentinels {
            assert!(
                guard.wait_revocation_timeout(Duration::from_secs(20)),
                "{}: revocation never seen: its watch was not set again",
                guard.node_path()
            );
            assert_eq!(guard.state(), LockState::Held, "{}", guard.node_path());
        }
        let revoked = revoking.elapsed();

        // The holders go; every waiter then takes its lock in turn, woken by its watch.
        let draining = Instant::now();
        for guard in holders {
            assert_eq!(guard.state(), LockState::Held, "{}", guard.node_path());
            guard.unlock().unwrap();
        }
        waiters.join_all_in_order(&queues, WAITERS_PER_QUEUE, Duration::from_secs(120));
        let drained = draining.elapsed();
        for guard in sentinels {
            guard.unlock().unwrap();
        }

        assert_eq!(client.session_id(), session, "a new session replaced ours");
        assert_eq!(client.state(), SessionState::Connected);
        let changes = changes.lock().unwrap();
        assert!(
            changes
                .iter()
                .all(|c| c.to != SessionState::Expired && c.session_id == session),
            "the session expired: {changes:?}"
        );
        println!(
        "{watches} watches of {WATCHED_PATH_LEN} characters: queued in {queued:.1?}; server down \
         {down:.1?}; reconnected {reconnected:.1?} after it served, every watch back on the \
         server after {rearmed:.1?}; {SENTINELS} revocations seen in {revoked:.1?}; \
         {} waiters drained in {drained:.1?}",
        QUEUES * WAITERS_PER_QUEUE
    );
        drop(inspector);
        drop(client);
    }

    /// Waiters queued behind one holder on its own session: after a reconnect each looks at the
    /// queue again (a listing of them all, shared by those that wake together) and watches its
    /// predecessor anew.
    const RELISTING_WAITERS: usize = 2_000;

    /// Short, so that the holder's lease (2/3 of it) is short too: a keepalive that waited behind
    /// the waiters' traffic would let it run out.
    const RELIST_SESSION_TIMEOUT: Duration = Duration::from_secs(3);

    /// How often the holder looks at its state.
    const SAMPLE_EVERY: Duration = Duration::from_millis(2);

    #[test]
    fn a_holder_reads_held_while_its_sessions_waiters_relist_after_a_reconnect() {
        let _one = one_at_a_time();
        let proxy = Proxy::start(&common::connect_string());
        let client = common::client_via(&proxy, RELIST_SESSION_TIMEOUT);
        let session = client.session_id();
        // Short, so that the 2,001 watched paths fit in one SetWatches request of the old client
        // crate (128 KiB): this test is about the traffic after a reconnect, not about the re-arm.
        let path = format!("/r{}", &uuid::Uuid::new_v4().simple().to_string()[..6]);
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let guard = mutex.lock().unwrap();
        assert_eq!(guard.state(), LockState::Held);
        let waiters = Waiters::spawn(std::slice::from_ref(&mutex), RELISTING_WAITERS);
        // Queued and watching: one watch per waiter, and the holder's on its own node (which the
        // first waiter watches too).
        let mut on_server = 0;
        assert!(
            poll(Duration::from_secs(60), Duration::from_millis(100), || {
                on_server = servers::watches_of(&common::connect_string(), session);
                on_server >= RELISTING_WAITERS
            }),
            "only {on_server} of {RELISTING_WAITERS} waiters watching"
        );
        // The server has set every watch; the client has read every answer once a read sent now
        // is answered (in order), and the waiters are back to waiting a moment later. A waiter
        // still catching up at the cut might see no reconnect at all, and not re-list.
        client.get_data(&path).unwrap();
        thread::sleep(Duration::from_millis(500));

        proxy.record_requests(true);
        proxy.sever();
        // The client reconnects within milliseconds, too soon to be sure to see it `Suspended`:
        // its new connection's first request (SetWatches) says it is back.
        assert!(
            poll(Duration::from_secs(10), Duration::from_millis(2), || {
                proxy.requests().iter().any(|r| r.conn > 0)
            }),
            "no reconnect after the cut"
        );
        assert_eq!(
            wait_for_state(&client, SessionState::Connected, RELIST_SESSION_TIMEOUT),
            SessionState::Connected,
            "not connected again after the cut"
        );
        let back = Instant::now();

        // A second thread marks when the re-list is over: once every waiter has sent its new
        // watch, a read sent after them is answered after theirs (the server answers one
        // session's requests in order).
        let rewatches = |requests: &[Request]| {
            requests
                .iter()
                .filter(|r| r.conn > 0 && r.opcode == opcode::GET_DATA)
                .filter(|r| r.path.as_deref().is_some_and(|p| p.starts_with(&path)))
                .count()
        };
        let (samples, not_held, relist) = thread::scope(|s| {
            let relisted = s.spawn(|| {
                let sent = poll(
                    RELIST_SESSION_TIMEOUT * 3,
                    Duration::from_millis(20),
                    || rewatches(&proxy.requests()) >= RELISTING_WAITERS,
                );
                client.get_data(&path).ok()?;
                sent.then(|| back.elapsed())
            });
            let mut samples = 0;
            let mut not_held = Vec::new();
            while back.elapsed() < RELIST_SESSION_TIMEOUT * 2 || !relisted.is_finished() {
                let state = guard.state();
                samples += 1;
                if state != LockState::Held {
                    not_held.push((back.elapsed(), state));
                }
                thread::sleep(SAMPLE_EVERY);
            }
            (samples, not_held, relisted.join().unwrap())
        });
        let requests = proxy.requests();
        let listings = requests
            .iter()
            .filter(|r| r.conn > 0)
            .filter(|r| [opcode::GET_CHILDREN, opcode::GET_CHILDREN2].contains(&r.opcode))
            .filter(|r| r.path.as_deref() == Some(path.as_str()))
            .count();
        let watches = rewatches(&requests);
        println!(
        "{RELISTING_WAITERS} waiters re-listed ({listings} listings, {watches} watches) in {relist:.1?} \
         after the reconnect; the holder read {samples} samples: {} not Held",
        not_held.len()
    );
        assert!(
            not_held.is_empty(),
            "the holder read {} of {samples} samples other than Held after the reconnect; first \
         {:?}, last {:?}",
            not_held.len(),
            not_held.first(),
            not_held.last()
        );
        assert!(
            listings >= 1 && watches >= RELISTING_WAITERS,
            "the waiters did not re-list: {listings} listings, {watches} watches"
        );
        assert!(
            relist.is_some(),
            "the re-list did not end within {:?}",
            RELIST_SESSION_TIMEOUT * 3
        );
        assert_eq!(client.session_id(), session);

        guard.unlock().unwrap();
        waiters.join_all_in_order(
            std::slice::from_ref(&mutex),
            RELISTING_WAITERS,
            Duration::from_secs(60),
        );
    }

    /// The wire's evidence for [`a_holder_reads_held_while_2000_waiters_of_its_session_queue_up`],
    /// from the proxy's record of the holder's session: requests as the client sent them,
    /// replies as the client got them, each with the proxy's instant.
    struct Wire {
        /// The keepalive's syncs (the waiters send none), by send instant, with their answer's
        /// if one came that proves the session alive.
        syncs: Vec<(Instant, Option<Instant>)>,
        /// The session's handshakes (a reconnect's proves the session alive), likewise.
        handshakes: Vec<(Instant, Option<Instant>)>,
        /// Per sync: how many requests the client had queued before it went out after it
        /// (lower xids on its connection, later on the wire).
        overtaken: Vec<usize>,
    }

    impl Wire {
        /// Error codes that prove the session alive (as the library counts them): done, or a
        /// refusal about the node, not about the session.
        const PROOF: [i32; 8] = [0, -101, -102, -103, -108, -110, -111, -114];

        fn read(proxy: &Proxy) -> Wire {
            let (requests, replies) = (proxy.requests(), proxy.replies());
            let answered = |conn: u64, xid: i32| {
                replies
                    .iter()
                    .find(|r| r.conn == conn && r.xid == xid)
                    .filter(|r| Self::PROOF.contains(&r.err))
                    .map(|r| r.at)
            };
            let handshakes: Vec<(Instant, Option<Instant>)> = proxy
                .handshakes()
                .iter()
                .map(|h| {
                    let answer = h.answered.filter(|(_, timeout)| *timeout > 0);
                    (h.sent, answer.map(|(at, _)| at))
                })
                .collect();
            let syncs: Vec<&Request> = requests
                .iter()
                .filter(|r| r.opcode == opcode::SYNC)
                .collect();
            let overtaken = syncs
                .iter()
                .map(|sync| {
                    requests
                        .iter()
                        .filter(|r| r.conn == sync.conn && r.at > sync.at && r.xid > 0)
                        .filter(|r| r.xid < sync.xid)
                        .count()
                })
                .collect();
            Wire {
                syncs: syncs
                    .iter()
                    .map(|r| (r.at, answered(r.conn, r.xid)))
                    .collect(),
                handshakes,
                overtaken,
            }
        }

        /// The keepalive's worst lateness, judged against the holder's own lease as sampled
        /// (`samples`: instant, lease remaining). The lease counts from the send instant of
        /// the latest answer the client took (`acked`, read back from the remaining time), and
        /// the keepalive is due a third of the session timeout after it, or when the client
        /// learnt that answer if later: by then a sync (or a reconnect's handshake) sent after
        /// `acked` must be on the wire, other than one the server had answered before the client
        /// learnt `acked` (the one that set it). Returns the worst lateness (how long after its
        /// due moment such a sync went out) and that moment; a sync still missing when the
        /// next answer was learnt, or at the last sample, counts as sent then.
        fn keepalive_lateness(
            &self,
            samples: &[(Instant, Option<Duration>)],
            timeout: Duration,
        ) -> (Duration, Option<Instant>) {
            let lease = timeout * 2 / 3;
            let renewing: Vec<(Instant, Option<Instant>)> =
                self.syncs.iter().chain(&self.handshakes).copied().collect();
            let Some(&(last, _)) = samples.last() else {
                return (Duration::ZERO, None);
            };
            let mut worst = (Duration::ZERO, None);
            // Each `acked` with the instant the client learnt it (the estimate trails the true
            // instant by the time the call took: only a jump is a new answer).
            let mut epochs: Vec<(Instant, Instant)> = Vec::new();
            for &(at, remaining) in samples {
                let Some(acked) = remaining.and_then(|r| (at + r).checked_sub(lease)) else {
                    continue;
                };
                if epochs
                    .last()
                    .is_none_or(|(seen, _)| acked > *seen + Duration::from_millis(5))
                {
                    epochs.push((acked, at));
                }
            }
            for (i, &(acked, learnt)) in epochs.iter().enumerate() {
                let due = (acked + timeout / 3).max(learnt);
                let until = epochs.get(i + 1).map_or(last, |(_, next)| *next);
                if due >= until {
                    continue;
                }
                let sent = renewing
                    .iter()
                    .filter(|(sent, answer)| *sent > acked && answer.is_none_or(|a| a > learnt))
                    .map(|(sent, _)| *sent)
                    .min()
                    .unwrap_or(until)
                    .min(until);
                let late = sent.saturating_duration_since(due);
                if late > worst.0 {
                    worst = (late, Some(due));
                }
            }
            worst
        }

        /// Whether the server had, by `t` less [`ANSWER_GRACE`], answered a keepalive sync or a
        /// handshake sent within the lease before `t` (less [`SEND_GRACE`]): then the holder
        /// must read `Held` at `t`. The syncs and handshakes only: the client counts a write
        /// from when it queued it, which can be long before the wire saw it, but it queues
        /// a sync ahead of everything and sends it at once.
        fn proves_alive_at(&self, t: Instant, timeout: Duration) -> Option<(Instant, Instant)> {
            let lease = timeout * 2 / 3;
            self.syncs
                .iter()
                .chain(&self.handshakes)
                .filter_map(|(sent, answer)| answer.map(|a| (*sent, a)))
                .filter(|(sent, answer)| {
                    *answer + ANSWER_GRACE <= t && *sent + lease > t + SEND_GRACE
                })
                .max_by_key(|(sent, _)| *sent)
        }
    }

    /// The holder's session timeout: the lease is 4 s, the keepalive due 2 s after the latest
    /// answer. Longer than the re-list test's, so that the client process, whose 2,000 waiters
    /// wake together once the paced replies flow again, has a third of it (2 s) to send its
    /// keepalive and to take its answer: its runtime thread was seen to wake the keepalive
    /// 1.3 s late on this 2-core machine under a load average of 20 (seen with a 3 s timeout,
    /// which left 1 s: the old test's failures, and expiries, came from there too).
    const QUEUE_UP_SESSION_TIMEOUT: Duration = Duration::from_secs(6);

    /// How long after the proxy handed an answer to the client the holder may still not know
    /// it: a third of the session timeout, the time the keepalive has to go out once due (the
    /// same runtime thread renews the lease when the answer is read). A holder that never takes
    /// the answer stays `Suspended` much longer than that.
    const ANSWER_GRACE: Duration = Duration::from_secs(2);

    /// How much earlier than the proxy saw it the client may have stamped a sync as sent
    /// (its lease counts from just before it queues the request).
    const SEND_GRACE: Duration = Duration::from_millis(100);

    /// While the waiters queue up, the proxy forwards the server's replies one per [`PACE`],
    /// from [`PACED_FROM`] to [`PACED_UNTIL`] into the queue-up: a server far behind the
    /// session's traffic, as a loaded machine makes it at random, made sure. The client hears
    /// something every few milliseconds (it does not take the server for dead), but its
    /// requests in flight stay unanswered, so the waiters' traffic waits in its outbox; a
    /// keepalive due meanwhile must go out ahead of it, at once.
    const PACE: Duration = Duration::from_millis(20);

    const PACED_FROM: Duration = Duration::from_millis(300);

    /// A session timeout after [`PACED_FROM`]: the keepalive falls due (a third of it after an
    /// answer sent before the pacing) well before the pacing ends, and one that waited for the
    /// outbox would go out more than a third of the timeout late.
    const PACED_UNTIL: Duration = Duration::from_millis(6_300);

    /// 2,000 waiters queue up on the holder's session: each creates its node and reads a listing
    /// of the queue (up to 2,000 names; the library shares one listing among the waiters that
    /// created together), while the proxy paces the server's replies ([`PACE`]): the server is
    /// behind for longer than the lease. Whether the server keeps up is not the client's to
    /// decide, so what is checked is what the client controls, on the wire: its keepalive goes
    /// out when due (at most a third of the timeout later, before the lease runs out) and ahead
    /// of the requests queued before it, and whenever the server had answered a keepalive sent
    /// within the lease, the holder read `Held`; a `Suspended` sample is accepted only while the
    /// proxy's timestamps show no such answer. Queued up: all 2,001 nodes exist (seen on a
    /// session of its own) and a read queued behind every waiter's requests is answered.
    #[test]
    fn a_holder_reads_held_while_2000_waiters_of_its_session_queue_up() {
        let _one = one_at_a_time();
        let proxy = Proxy::start(&common::connect_string());
        let client = common::client_via(&proxy, QUEUE_UP_SESSION_TIMEOUT);
        let path = common::lock_path("queue-up");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let guard = mutex.lock().unwrap();
        assert_eq!(guard.state(), LockState::Held);
        // Counts the nodes on a session of its own, straight to the server.
        let counter = common::RawClient::connect(&common::connect_string());
        proxy.record_requests(true);
        let started = Instant::now();
        let since = |t: Instant| t.saturating_duration_since(started);
        let waiters = Waiters::spawn(std::slice::from_ref(&mutex), RELISTING_WAITERS);
        let (samples, not_held, queued) = thread::scope(|s| {
            let queued = s.spawn(|| {
                let created = poll(Duration::from_secs(60), Duration::from_millis(100), || {
                    counter
                        .stat(&path)
                        .is_some_and(|stat| stat.num_children as usize > RELISTING_WAITERS)
                });
                // Each waiter queued its listing right behind its create: a read queued now
                // is answered after every one of them.
                (created && client.get_data(&path).is_ok()).then(|| started.elapsed())
            });
            let mut samples = Vec::new();
            let mut not_held = Vec::new();
            let mut pacing = None;
            while started.elapsed() < PACED_UNTIL + QUEUE_UP_SESSION_TIMEOUT
                || !queued.is_finished()
            {
                let at = Instant::now();
                let paced = (PACED_FROM..PACED_UNTIL).contains(&since(at));
                if pacing != Some(paced) {
                    proxy.pace_replies(paced.then_some(PACE));
                    pacing = Some(paced);
                }
                let state = guard.state();
                samples.push((at, guard.lease_remaining()));
                if state != LockState::Held {
                    not_held.push((at, state));
                }
                thread::sleep(SAMPLE_EVERY);
            }
            (samples, not_held, queued.join().unwrap())
        });
        let ended = Instant::now();
        proxy.record_requests(false);
        let wire = Wire::read(&proxy);
        let listings = proxy
            .requests()
            .iter()
            .filter(|r| [opcode::GET_CHILDREN, opcode::GET_CHILDREN2].contains(&r.opcode))
            .filter(|r| r.path.as_deref() == Some(path.as_str()))
            .count();
        let (late, due) = wire.keepalive_lateness(&samples, client.session_timeout());
        let samples = samples.len();
        let unanswered = |limit: Duration| {
            wire.syncs
                .iter()
                .filter(|(sent, answer)| {
                    answer.unwrap_or(ended).saturating_duration_since(*sent) > limit
                })
                .count()
        };
        let misread: Vec<(Duration, LockState, Duration, Duration)> = not_held
            .iter()
            .filter_map(|&(at, state)| {
                wire.proves_alive_at(at, client.session_timeout())
                    .map(|(sent, answer)| (since(at), state, since(sent), since(answer)))
            })
            .collect();
        println!(
            "{RELISTING_WAITERS} waiters queued up in {queued:.1?} ({listings} listings); {} \
             keepalive syncs, {} of \
             them answered after more than the lease, {} ahead of queued requests (most \
             overtaken {}); keepalive at worst {late:.0?} after due (at {:.1?}); the holder read \
             {samples} samples: {} not Held, {} of them while the proxy had a keepalive's \
             answer within the lease",
            wire.syncs.len(),
            unanswered(client.session_timeout() * 2 / 3),
            wire.overtaken.iter().filter(|n| **n > 0).count(),
            wire.overtaken.iter().max().unwrap_or(&0),
            due.map(since),
            not_held.len(),
            misread.len(),
        );
        assert!(
            // A third of the session timeout after it was due, the lease runs out: a
            // keepalive later than that leaves the holder `Suspended` by the client's own doing.
            late <= client.session_timeout() / 3,
            "the keepalive went on the wire {late:?} after it was due (at {:.1?} into the \
             queue-up): it waited behind the waiters' traffic, or never went out",
            due.map(since)
        );
        // The replies were paced while the waiters' requests waited in the outbox: a keepalive
        // that fell due then went out ahead of them.
        assert!(
            wire.overtaken.iter().any(|n| *n > 0),
            "no keepalive sync went out ahead of the requests queued before it (overtaken: {:?})",
            wire.overtaken
        );
        assert!(
            misread.is_empty(),
            "the holder read {} samples other than Held while the server had answered a \
             keepalive sent within the lease; first (sample, state, sync sent, answered): {:?}, \
             last {:?}",
            misread.len(),
            misread.first(),
            misread.last()
        );
        assert!(
            queued.is_some(),
            "the waiters did not all queue up: {:?} nodes under {path} after 60 s",
            counter.stat(&path).map(|stat| stat.num_children)
        );
        guard.unlock().unwrap();
        waiters.join_all_in_order(
            std::slice::from_ref(&mutex),
            RELISTING_WAITERS,
            Duration::from_secs(60),
        );
    }
}

mod long_queues {
    //! Long queues: a lock path with tens of thousands of queued nodes has a
    //! listing larger than ZooKeeper's default `jute.maxbuffer` (20,000 Curator-named nodes: a
    //! 1,180,088-byte reply). The server sends it all the same; zklock must read it, or, over the
    //! client's own limit, fail that one call with `Error::ReplyTooLarge`, and never drop the
    //! connection that every other lock of the client shares.
    //!
    //! The queues are made by a raw session (pipelined ephemeral sequential creates, with
    //! Curator's node names), so they go at once when it is dropped.

    use crate::common;
    use crate::one_at_a_time;
    use common::RawClient;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::{Duration, Instant};
    use zklock::{DistributedMutex, LockGuard, LockState};

    /// A call that once ran into its deadline (or never returned) on a long queue: far more than
    /// it needs here (milliseconds), far less than the failures seen (5-10 s, or never).
    const PROMPT: Duration = Duration::from_secs(3);

    /// Queues `count` Curator-named nodes (`_c_<uuid>-lock-<sequence>`) under `path` in a raw
    /// session of their own; they go when the returned client is dropped.
    fn long_queue(path: &str, count: usize) -> RawClient {
        let raw = RawClient::connect(&common::connect_string());
        raw.mkdir_open(path);
        let started = Instant::now();
        let prefix = format!("{path}/_c_{}-lock-", uuid::Uuid::new_v4());
        assert_eq!(raw.create_sequential_burst(&prefix, count), count);
        eprintln!("{count} nodes queued in {:?}", started.elapsed());
        raw
    }

    /// Runs `calls` while a thread samples `guard` every 2 ms; returns how many samples were
    /// taken and how many of them did not read `Held`.
    fn sampling_while<T>(guard: &LockGuard, calls: impl FnOnce() -> T) -> (T, usize, usize) {
        let stop = AtomicBool::new(false);
        let (samples, not_held) = (AtomicUsize::new(0), AtomicUsize::new(0));
        /// Stops the sampler however `calls` ends: a failed assertion in it must fail the test,
        /// not leave the scope waiting for the sampler for ever.
        struct StopOnDrop<'a>(&'a AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let out = std::thread::scope(|scope| {
            scope.spawn(|| {
                while !stop.load(Ordering::SeqCst) {
                    samples.fetch_add(1, Ordering::SeqCst);
                    if guard.state() != LockState::Held {
                        not_held.fetch_add(1, Ordering::SeqCst);
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
            });
            let _stop = StopOnDrop(&stop);
            // The calls can be over in milliseconds: let the sampler take its first sample before
            // they start, however late a loaded machine schedules it.
            while samples.load(Ordering::SeqCst) == 0 {
                std::thread::yield_now();
            }
            calls()
        });
        (out, samples.into_inner(), not_held.into_inner())
    }

    /// Times `call`, printing the figure, and checks it came back within `bound`.
    fn timed<T>(what: &str, bound: Duration, call: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let out = call();
        let took = started.elapsed();
        eprintln!("{what}: {took:?}");
        assert!(took < bound, "{what} took {took:?}");
        out
    }

    /// `contenders()` reads every node's data besides the listing, in batches of a thousand reads
    /// per request (a fraction of a second here; seconds when it took a request per node): its
    /// figure is printed; the bound only catches a hang.
    const READS_EVERY_NODE: Duration = Duration::from_secs(60);

    /// Waits until the lock path has exactly `count` children, as a raw session lists them.
    fn wait_children(raw: &RawClient, path: &str, count: usize) {
        let mut seen = 0;
        let reached = common::eventually(Duration::from_secs(10), || {
            seen = raw.children(path).len();
            seen == count
        });
        assert!(
            reached,
            "{seen} nodes under {path}, not {count}: a node was left"
        );
    }

    /// The session timeout of the clients that read long queues: `contenders()` is one call,
    /// allowed one session timeout, and reads every node's data (50,000 reads took 4 s on a loaded
    /// machine, past the 4 s of the tests' usual sessions).
    const LONG_SESSION: Duration = Duration::from_secs(15);

    fn accepts_a_long_queue(count: usize) {
        let client = common::client_with(LONG_SESSION);
        let other = DistributedMutex::new(&client, &common::lock_path("long-queue-other")).unwrap();
        let guard = other.lock().unwrap();
        let path = common::lock_path("long-queue");
        let raw = long_queue(&path, count);
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let (_, samples, not_held) = sampling_while(&guard, || {
            let busy = timed(&format!("try_lock on {count}"), PROMPT, || mutex.try_lock());
            assert!(matches!(busy, Ok(None)), "try_lock: {busy:?}");
            let busy = timed(&format!("lock_timeout(300 ms) on {count}"), PROMPT, || {
                mutex.lock_timeout(Duration::from_millis(300))
            });
            assert!(matches!(busy, Ok(None)), "lock_timeout: {busy:?}");
            // Our own nodes are withdrawn: the queue is the raw session's again.
            wait_children(&raw, &path, count);
            let contenders = timed(
                &format!("contenders() on {count}"),
                READS_EVERY_NODE,
                || mutex.contenders(),
            );
            assert_eq!(contenders.map(|c| c.len()), Ok(count));
            // What `zklock status` shows: the same reads, by the catalogue's layouts.
            let seen = timed(&format!("inspect() on {count}"), READS_EVERY_NODE, || {
                client.inspect(&path, None)
            })
            .expect("inspect");
            assert_eq!(seen.nodes.len(), count);
            assert_eq!(
                seen.nodes.iter().filter(|n| n.holds == Some(true)).count(),
                1
            );
        });
        eprintln!("other lock: {samples} samples, {not_held} not held");
        assert!(samples > 0);
        assert_eq!(not_held, 0, "the other lock read not-held");
        guard.unlock().expect("the other lock's release");
        drop(raw);
        wait_children(&RawClient::connect(&common::connect_string()), &path, 0);
        client.close().unwrap();
    }

    #[test]
    fn a_queue_of_20_000_is_read_and_leaves_other_locks_held() {
        let _one = one_at_a_time();
        accepts_a_long_queue(20_000);
    }

    #[test]
    fn a_queue_of_50_000_is_read_and_leaves_other_locks_held() {
        let _one = one_at_a_time();
        accepts_a_long_queue(50_000);
    }

    /// The listing of `count` nodes named as [`long_queue`] names them: reply header, child count,
    /// each name with its length, the parent's stat.
    fn listing_size(count: usize) -> usize {
        16 + 4 + count * (4 + "_c_".len() + 36 + "-lock-".len() + 10) + 68
    }

    /// Checks that `err` is `ReplyTooLarge` for `path` over `limit`, of at least `size` bytes,
    /// saying so in its message; returns the size it reports.
    fn too_large(what: &str, err: zklock::Error, path: &str, size: usize, limit: usize) -> usize {
        let message = err.to_string();
        eprintln!("{what}: {message}");
        let zklock::Error::ReplyTooLarge {
            path: refused,
            size: got,
            limit: over,
        } = err
        else {
            panic!("{what}: not ReplyTooLarge: {err:?}");
        };
        assert_eq!((refused.as_str(), over), (path, limit), "{what}");
        assert!(got >= size, "{what}: {got} bytes, expected {size} at least");
        assert!(
            message.contains(path) && message.contains(&got.to_string()),
            "{message}"
        );
        got
    }

    #[test]
    fn over_the_limit_each_call_fails_alone_at_once_and_leaves_nothing() {
        let _one = one_at_a_time();
        let count = 20_000;
        let limit = 512 * 1024;
        let client = common::builder(&common::connect_string(), common::SESSION_TIMEOUT)
            .max_reply_size(limit)
            .connect()
            .unwrap();
        let other = DistributedMutex::new(&client, &common::lock_path("long-queue-other")).unwrap();
        let guard = other.lock().unwrap();
        let path = common::lock_path("long-queue-limit");
        let raw = long_queue(&path, count);
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let expected = listing_size(count);
        assert_eq!(
            expected, 1_180_088,
            "the listing of 20,000 such nodes is 1,180,088 bytes"
        );
        let (_, samples, not_held) = sampling_while(&guard, || {
            // Each acquisition's listing shows its own node too.
            let err = timed("try_lock over the limit", PROMPT, || mutex.try_lock()).unwrap_err();
            too_large("try_lock", err, &path, expected, limit);
            let err = timed("lock_timeout(30 s) over the limit", PROMPT, || {
                mutex.lock_timeout(Duration::from_secs(30))
            })
            .unwrap_err();
            too_large("lock_timeout", err, &path, expected, limit);
            let err = timed("lock() over the limit", PROMPT, || mutex.lock()).unwrap_err();
            too_large("lock", err, &path, expected, limit);
            // Every acquisition withdrew its node.
            wait_children(&raw, &path, count);
            let err =
                timed("contenders() over the limit", PROMPT, || mutex.contenders()).unwrap_err();
            assert_eq!(
                too_large("contenders", err, &path, expected, limit),
                expected
            );
            // Meanwhile the session serves every other call.
            let short =
                DistributedMutex::new(&client, &common::lock_path("long-queue-short")).unwrap();
            let held = short.try_lock().unwrap().expect("a free lock");
            held.unlock().unwrap();
        });
        eprintln!("other lock: {samples} samples, {not_held} not held");
        assert!(samples > 0);
        assert_eq!(not_held, 0, "the other lock read not-held");
        guard.unlock().expect("the other lock's release");
        drop(raw);
        wait_children(&RawClient::connect(&common::connect_string()), &path, 0);
        client.close().unwrap();
    }

    /// Nodes whose data is large (another client's, 100 KB each): read together, their batch's
    /// reply is over the client's limit; `contenders()` reads them one by one instead and sees
    /// every node whole, and the other lock of the client stays held.
    #[test]
    fn nodes_with_large_data_are_read_one_by_one_under_the_limit() {
        let _one = one_at_a_time();
        let limit = 300 * 1024;
        let client = common::builder(&common::connect_string(), common::SESSION_TIMEOUT)
            .max_reply_size(limit)
            .connect()
            .unwrap();
        let other = DistributedMutex::new(&client, &common::lock_path("large-data-other")).unwrap();
        let guard = other.lock().unwrap();
        let path = common::lock_path("large-data");
        let raw = long_queue(&path, 6);
        let writer = common::client();
        let large = vec![b'x'; 100 * 1024];
        for name in raw.children(&path) {
            writer.set_data(&format!("{path}/{name}"), &large).unwrap();
        }
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let contenders = mutex.contenders().expect("contenders");
        assert_eq!(contenders.len(), 6);
        assert!(contenders.iter().all(|c| c.owner.len() == large.len()));
        assert!(contenders[0].holds && contenders[1..].iter().all(|c| !c.holds));
        assert_eq!(guard.state(), LockState::Held);
        guard.unlock().unwrap();
        writer.close().unwrap();
        client.close().unwrap();
    }
}

mod herd {
    //! Herd-free wake-ups, measured by the server's own watch-notification counters. The counters
    //! are server-wide, so this test runs against a private server of its own (started with
    //! `scripts/start-zk.sh` on a free port, stopped at the end) that nothing else uses. The
    //! listings after a reconnect are counted by the loopback proxy the waiters' client uses.

    use crate::common;
    use crate::one_at_a_time;
    use common::proxy::Proxy;
    use common::servers::PrivateServer;
    use std::sync::mpsc;
    use std::thread;
    use std::time::Duration;
    use zklock::{Client, DistributedMutex, DistributedRwLock};

    fn mntr_value(server: &str, key: &str) -> u64 {
        common::servers::mntr(server).get(key).copied().unwrap_or(0)
    }

    #[test]
    fn releases_wake_only_the_waiters_that_can_proceed() {
        let _one = one_at_a_time();
        let server = PrivateServer::start("");
        let connect = server.connect_string();
        let clients: Vec<Client> = (0..6)
            .map(|_| common::client_at(&connect, Duration::from_secs(4)))
            .collect();
        mutex_handoffs_notify_one_waiter_each(&connect, &clients);
        writer_release_wakes_the_readers_and_only_the_last_reader_wakes_the_writer(
            &connect, &clients,
        );
        a_holder_watching_its_node_releases_without_a_notification(&connect, &clients[0]);
        drop(clients);
        drop(server);
    }

    fn mutex_handoffs_notify_one_waiter_each(server: &str, clients: &[Client]) {
        const WAITERS: usize = 24;
        let path = common::lock_path("herd");
        let holder_mutex = DistributedMutex::new(&clients[0], &path).unwrap();
        let holder = holder_mutex.lock().unwrap();
        let watches_before = mntr_value(server, "zk_watch_count");
        let mut notifications_before = 0;
        thread::scope(|s| {
            for i in 0..WAITERS {
                let (client, path) = (&clients[i % clients.len()], &path);
                s.spawn(move || {
                    let mutex = DistributedMutex::new(client, path).unwrap();
                    // Releases as soon as it holds, handing over to the next waiter.
                    mutex.lock().unwrap().unlock().unwrap();
                });
            }
            // Every waiter queued and watching (one watch each, on its predecessor only).
            assert!(common::eventually(Duration::from_secs(20), || {
                holder_mutex.contenders().unwrap().len() == WAITERS + 1
                    && mntr_value(server, "zk_watch_count") >= watches_before + WAITERS as u64
            }));
            assert_eq!(
                mntr_value(server, "zk_watch_count"),
                watches_before + WAITERS as u64,
                "a waiter watches more than its predecessor"
            );
            notifications_before = common::watch_notifications_at(server);
            drop(holder);
            // The scope joins every waiter: each acquired and released once.
        });
        let notifications = common::watch_notifications_at(server) - notifications_before;
        assert_eq!(
            notifications, WAITERS as u64,
            "one notification per release"
        );
        assert_eq!(holder_mutex.contenders().unwrap().len(), 0);
    }

    /// Queue: writer W0 (holding), readers R1..R5, writer W1. W0's release must wake exactly the
    /// five readers (they can all proceed) and not W1; R1..R4 leaving wakes nobody; R5 leaving
    /// wakes W1.
    fn writer_release_wakes_the_readers_and_only_the_last_reader_wakes_the_writer(
        server: &str,
        clients: &[Client],
    ) {
        const READERS: usize = 5;
        let path = common::lock_path("herd-rw");
        let lock = DistributedRwLock::new(&clients[0], &path).unwrap();
        let first_writer = lock.write().unwrap();
        let queued = |n: usize| common::wait_contenders(&lock, n, Duration::from_secs(10));
        thread::scope(|s| {
            // Inside the scope: if an assertion fails, dropping these ends the reader threads.
            let (holding_tx, holding_rx) = mpsc::channel();
            let mut release = Vec::new();
            for r in 0..READERS {
                // Each reader on a session of its own: the server keeps one watch per session and
                // path, so readers sharing a session would share one notification.
                let (client, path, holding) = (&clients[r + 1], &path, holding_tx.clone());
                let (tx, rx) = mpsc::channel::<()>();
                release.push(tx);
                s.spawn(move || {
                    let reader = DistributedRwLock::new(client, path).unwrap();
                    let guard = reader.read().unwrap();
                    holding.send(r).unwrap();
                    rx.recv().unwrap();
                    guard.unlock().unwrap();
                });
                assert!(queued(r + 2), "reader {r} did not queue");
            }
            let writer = s.spawn(|| {
                DistributedRwLock::new(&clients[1], &path)
                    .unwrap()
                    .write()
                    .unwrap()
                    .unlock()
                    .unwrap()
            });
            assert!(queued(READERS + 2));
            thread::sleep(Duration::from_millis(300)); // the last watches go up
            let before = common::watch_notifications_at(server);
            drop(first_writer);
            for _ in 0..READERS {
                holding_rx
                    .recv_timeout(Duration::from_secs(10))
                    .expect("a reader never got the lock");
            }
            assert_eq!(
                common::watch_notifications_at(server) - before,
                READERS as u64,
                "writer release woke someone who cannot proceed"
            );
            for (r, tx) in release.iter().enumerate().take(READERS - 1) {
                tx.send(()).unwrap();
                assert!(queued(READERS - r), "reader {r} did not leave");
            }
            assert_eq!(
                common::watch_notifications_at(server) - before,
                READERS as u64,
                "a reader's release woke the writer early"
            );
            release[READERS - 1].send(()).unwrap();
            writer.join().unwrap();
            assert_eq!(
                common::watch_notifications_at(server) - before,
                READERS as u64 + 1
            );
        });
        assert!(lock.contenders().unwrap().is_empty());
    }

    /// Asking a guard for its state watches the holder's node (to see it deleted by someone
    /// else); the release removes that watch before deleting, so it notifies nobody.
    fn a_holder_watching_its_node_releases_without_a_notification(server: &str, client: &Client) {
        let mutex = DistributedMutex::new(client, &common::lock_path("own-watch")).unwrap();
        let watches_before = mntr_value(server, "zk_watch_count");
        let guard = mutex.lock().unwrap();
        assert!(guard.is_held());
        assert!(
            common::eventually(Duration::from_secs(5), || mntr_value(
                server,
                "zk_watch_count"
            ) > watches_before),
            "the holder's node is not watched"
        );
        let fired = common::watch_notifications_at(server);
        guard.unlock().unwrap();
        assert_eq!(common::watch_notifications_at(server), fired);
        let unwatched = || {
            common::eventually(Duration::from_secs(5), || {
                mntr_value(server, "zk_watch_count") == watches_before
            })
        };
        assert!(unwatched());
        // Also when the release follows at once, with the request setting the watch still on its
        // way (the release lets it come back, then removes the watch, then deletes).
        for _ in 0..20 {
            let guard = mutex.lock().unwrap();
            assert!(guard.is_held());
            guard.unlock().unwrap();
        }
        assert_eq!(common::watch_notifications_at(server), fired);
        assert!(unwatched());
    }

    /// After a reconnect every waiter on a session looks at the queue
    /// again. Waiters on one session and one lock path share one listing instead of each listing
    /// the whole queue (O(waiters²) bytes). Counted as the getChildren requests the waiters'
    /// client sends through the proxy in the two seconds after its connection is cut.
    #[test]
    fn waiters_on_one_session_share_one_listing_after_a_reconnect() {
        let _one = one_at_a_time();
        const WAITERS: usize = 40;
        let proxy = Proxy::start(&common::connect_string());
        let path = common::lock_path("relist");
        let holder_client = common::client();
        let holder_mutex = DistributedMutex::new(&holder_client, &path).unwrap();
        let holder = holder_mutex.lock().unwrap();
        let waiters = common::client_via(&proxy, Duration::from_secs(10));
        let listings = thread::scope(|s| {
            for _ in 0..WAITERS {
                let (client, path) = (&waiters, &path);
                s.spawn(move || {
                    let mutex = DistributedMutex::new(client, path).unwrap();
                    mutex.lock().unwrap().unlock().unwrap();
                });
            }
            let queued =
                common::wait_contenders(&holder_mutex, WAITERS + 1, Duration::from_secs(20));
            thread::sleep(Duration::from_millis(300)); // the last watches go up
            proxy.record_requests(true);
            proxy.sever();
            thread::sleep(Duration::from_secs(2));
            proxy.record_requests(false);
            drop(holder); // the waiters then take the lock in turn and the scope joins them
            assert!(queued, "the waiters did not queue");
            proxy
                .requests()
                .iter()
                // getChildren, getChildren2
                .filter(|r| matches!(r.opcode, 8 | 12) && r.path.as_deref() == Some(path.as_str()))
                .count()
        });
        eprintln!("{listings} listings of the queue after the reconnect, {WAITERS} waiters");
        assert!(
            listings >= 1,
            "nobody looked at the queue again after the reconnect"
        );
        assert!(
            listings <= WAITERS / 8,
            "{listings} listings of the queue for {WAITERS} waiters on one session"
        );
    }
}
