//! The async front-end against a real server: every acquisition as a future on the same core as
//! the blocking calls, the other calls' `_async` forms, and both under real faults.
//!
//! A blocking call on an async worker thread is in `async_blocking_calls.rs` (one process per
//! case).

mod common;

mod acquisitions {
    //! The async front-end against a real server: every acquisition as a future on the same core as
    //! the blocking calls, on tokio (multi-thread and current-thread) and on other executors, and
    //! cancel-safe: a future dropped at any await point, by a timeout or a `select!`, leaves no node
    //! behind, and one dropped holding the lock releases it.

    use crate::common;
    use common::{two_worker_runtime, Exclusion};
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};
    use std::time::{Duration, Instant};
    use zklock::{
        CancelToken, Client, DistributedMutex, DistributedRwLock, Error, LeaderElection, LockState,
        MultiLock, Semaphore, Wait,
    };

    fn current_thread() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// `tasks` tasks each lock `mutex` `rounds` times with `lock_async`, holding it across an await.
    async fn tasks_take_turns(
        mutex: &DistributedMutex,
        tasks: usize,
        rounds: usize,
    ) -> Arc<Exclusion> {
        let exclusion = Arc::new(Exclusion::default());
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                let (mutex, exclusion) = (mutex.clone(), exclusion.clone());
                tokio::spawn(async move {
                    for _ in 0..rounds {
                        let guard = mutex.lock_async().await.expect("lock_async");
                        exclusion.enter();
                        tokio::task::yield_now().await;
                        assert!(guard.is_held());
                        exclusion.leave();
                        guard.unlock_async().await.expect("unlock_async");
                    }
                })
            })
            .collect();
        for handle in handles {
            handle.await.unwrap();
        }
        exclusion
    }

    #[test]
    fn many_tasks_on_two_workers_take_turns() {
        let client = common::client();
        let mutex = DistributedMutex::new(&client, &common::lock_path("async-many")).unwrap();
        // With blocking calls in the tasks, three tasks on two workers already deadlock.
        let exclusion = two_worker_runtime().block_on(tasks_take_turns(&mutex, 300, 2));
        assert_eq!(exclusion.entered.load(Ordering::SeqCst), 600);
        assert_eq!(exclusion.overlaps.load(Ordering::SeqCst), 0);
        assert_eq!(common::children_count(&client, mutex.path()), 0);
    }

    #[test]
    fn tasks_on_a_current_thread_runtime_take_turns() {
        let client = common::client();
        let mutex = DistributedMutex::new(&client, &common::lock_path("async-current")).unwrap();
        let exclusion = current_thread().block_on(tasks_take_turns(&mutex, 50, 2));
        assert_eq!(exclusion.entered.load(Ordering::SeqCst), 100);
        assert_eq!(exclusion.overlaps.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn other_executors_drive_the_futures() {
        let client = common::client();
        let mutex = DistributedMutex::new(&client, &common::lock_path("async-other")).unwrap();

        // futures' own executor, on this thread.
        let guard = futures::executor::block_on(mutex.lock_async()).unwrap();
        assert!(guard.is_held());
        futures::executor::block_on(guard.unlock_async()).unwrap();

        // smol's executor (async-executor) with several tasks on it.
        let executor = async_executor::Executor::new();
        let exclusion = Arc::new(Exclusion::default());
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let (mutex, exclusion) = (mutex.clone(), exclusion.clone());
                executor.spawn(async move {
                    let guard = mutex.lock_async().await.unwrap();
                    exclusion.enter();
                    futures_lite::future::yield_now().await;
                    exclusion.leave();
                    guard.unlock_async().await.unwrap();
                })
            })
            .collect();
        futures_lite::future::block_on(executor.run(async {
            for task in tasks {
                task.await;
            }
        }));
        assert_eq!(exclusion.entered.load(Ordering::SeqCst), 20);
        assert_eq!(exclusion.overlaps.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn blocking_and_async_callers_share_one_lock() {
        let path = common::lock_path("async-mixed");
        let exclusion = Arc::new(Exclusion::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (path, exclusion) = (path.clone(), exclusion.clone());
                std::thread::spawn(move || {
                    let client = common::client();
                    let mutex = DistributedMutex::new(&client, &path).unwrap();
                    for _ in 0..10 {
                        let guard = mutex.lock().unwrap();
                        exclusion.enter();
                        std::thread::sleep(Duration::from_millis(1));
                        exclusion.leave();
                        drop(guard);
                    }
                })
            })
            .collect();
        let client = common::client();
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let runtime = two_worker_runtime();
        runtime.block_on(async {
            let tasks: Vec<_> = (0..20)
                .map(|_| {
                    let (mutex, exclusion) = (mutex.clone(), exclusion.clone());
                    tokio::spawn(async move {
                        for _ in 0..5 {
                            let guard = mutex.lock_async().await.unwrap();
                            exclusion.enter();
                            tokio::time::sleep(Duration::from_millis(1)).await;
                            exclusion.leave();
                            drop(guard);
                        }
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
        });
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(exclusion.entered.load(Ordering::SeqCst), 140);
        assert_eq!(exclusion.overlaps.load(Ordering::SeqCst), 0);
        assert!(common::eventually(Duration::from_secs(5), || {
            common::children_count(&client, &path) == 0
        }));
    }

    #[test]
    fn a_timeout_withdraws_the_waiter() {
        let client = common::client();
        let path = common::lock_path("async-timeout");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let holder = mutex.lock().unwrap();
        two_worker_runtime().block_on(async {
            // The runtime's timeout drops the future: its queued node goes in the background.
            let waited = tokio::time::timeout(Duration::from_millis(300), mutex.lock_async()).await;
            assert!(waited.is_err(), "timed out");
            // zklock's own timeout returns once the node is withdrawn.
            let started = Instant::now();
            let none = mutex
                .lock_with_async(zklock::Wait::timeout(Duration::from_millis(300)))
                .await;
            assert!(none.unwrap().is_none());
            assert!(started.elapsed() < Duration::from_secs(2));
        });
        assert!(
            common::eventually(Duration::from_secs(2), || {
                common::children_count(&client, &path) == 1
            }),
            "only the holder is left"
        );
        drop(holder);
        // No abandoned waiter acquires the lock for nobody: it is free at once.
        let next = mutex.try_lock().unwrap().expect("free");
        assert_eq!(common::children_count(&client, &path), 1);
        drop(next);
    }

    #[test]
    fn select_with_a_shutdown_leaves_no_node() {
        let client = common::client();
        let path = common::lock_path("async-select");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let holder = mutex.lock().unwrap();
        two_worker_runtime().block_on(async {
            let shutdown = Arc::new(tokio::sync::Notify::new());
            let trigger = shutdown.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                trigger.notify_one();
            });
            tokio::select! {
                _ = mutex.lock_async() => panic!("the lock is held"),
                _ = shutdown.notified() => {}
            }
        });
        assert!(common::eventually(Duration::from_secs(2), || {
            common::children_count(&client, &path) == 1
        }));
        drop(holder);
    }

    #[test]
    fn a_cancelled_token_stops_an_async_acquisition() {
        let client = common::client();
        let path = common::lock_path("async-token");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let holder = mutex.lock().unwrap();
        let token = CancelToken::new();
        two_worker_runtime().block_on(async {
            let cancel = token.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                cancel.cancel();
            });
            let stopped = mutex
                .lock_with_async(zklock::Wait::forever().cancel_on(&token))
                .await;
            assert!(matches!(stopped, Err(Error::Cancelled)), "{stopped:?}");
            let wait = Wait::timeout(Duration::from_secs(60)).cancel_on(&token);
            assert!(matches!(
                mutex.lock_with_async(wait).await,
                Err(Error::Cancelled)
            ));
        });
        assert!(common::eventually(Duration::from_secs(2), || {
            common::children_count(&client, &path) == 1
        }));
        drop(holder);
    }

    /// A waker that counts its wakes, so a test can poll a future exactly when it asks to be.
    #[derive(Default)]
    struct Counted(AtomicUsize);

    impl Wake for Counted {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Polls `future` up to `polls` times, each time once it asked to be woken (or after 2 s);
    /// `Some(output)` if it completed within them.
    fn poll_times<F: Future + Unpin>(future: &mut F, polls: usize) -> Option<F::Output> {
        let counted = Arc::new(Counted::default());
        let waker = Waker::from(counted.clone());
        let mut cx = Context::from_waker(&waker);
        for _ in 0..polls {
            let woken = counted.0.load(Ordering::SeqCst);
            if let Poll::Ready(output) = Pin::new(&mut *future).poll(&mut cx) {
                return Some(output);
            }
            let deadline = Instant::now() + Duration::from_secs(2);
            while counted.0.load(Ordering::SeqCst) == woken && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        None
    }

    #[test]
    fn a_future_dropped_at_any_await_point_leaves_nothing_behind() {
        let client = common::client();
        let observer = common::client();

        // Uncontended: every await point on the way to holding the lock, until it completes.
        let path = common::lock_path("async-drop-free");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let mut points = 0;
        for polls in 1.. {
            let mut future = Box::pin(mutex.lock_async());
            if let Some(guard) = poll_times(&mut future, polls) {
                // Completed: dropping the guard releases it.
                drop(guard.unwrap());
                break;
            }
            points += 1;
            drop(future);
            let free = DistributedMutex::new(&observer, &path).unwrap();
            assert!(
                common::eventually(Duration::from_secs(2), || {
                    common::children_count(&observer, &path) == 0
                }),
                "a node is left after a drop at await point {points}"
            );
            let taken = free.try_lock().unwrap().expect("nobody holds it");
            drop(taken);
            assert!(polls < 50, "the acquisition never completes");
        }
        assert!(points >= 1, "the acquisition awaits at least once");

        // Contended: every await point of the wait behind a holder.
        let path = common::lock_path("async-drop-held");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let holder = DistributedMutex::new(&observer, &path)
            .unwrap()
            .lock()
            .unwrap();
        for polls in 1..=(points + 3) {
            let mut future = Box::pin(mutex.lock_async());
            assert!(poll_times(&mut future, polls).is_none(), "held by another");
            drop(future);
            assert!(
                common::eventually(Duration::from_secs(2), || {
                    common::children_count(&observer, &path) == 1
                }),
                "a waiter's node is left after a drop at await point {polls}"
            );
        }
        // The holder goes while a waiter is queued; the waiter is dropped right after it was
        // woken: whether or not it had claimed the lock, the lock is free again.
        let mut future = Box::pin(mutex.lock_async());
        assert!(poll_times(&mut future, 3).is_none());
        holder.unlock().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        drop(future);
        assert!(common::eventually(Duration::from_secs(2), || {
            common::children_count(&observer, &path) == 0
        }));
    }

    #[test]
    fn guards_move_between_tasks_and_threads() {
        let client = common::client();
        let path = common::lock_path("async-move");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let runtime = two_worker_runtime();
        runtime.block_on(async {
            let (send, receive) = tokio::sync::oneshot::channel();
            let m = mutex.clone();
            tokio::spawn(async move { send.send(m.lock_async().await.unwrap()).unwrap() });
            let guard = tokio::spawn(async move { receive.await.unwrap() })
                .await
                .unwrap();
            assert!(guard.is_held());
            // To a plain thread, released there by drop (in the background: it was taken by an
            // async call, and may be dropped on a runtime's worker).
            std::thread::spawn(move || drop(guard)).join().unwrap();
            let again = mutex
                .lock_with_async(zklock::Wait::timeout(Duration::from_secs(5)))
                .await;
            let again = again.unwrap().expect("released");
            again.unlock_async().await.unwrap();
        });
    }

    #[test]
    fn wait_lost_async_tells_a_holder_its_node_was_broken() {
        let client = common::client();
        let path = common::lock_path("async-lost");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        two_worker_runtime().block_on(async {
            let guard = mutex.lock_async().await.unwrap();
            let not_yet = tokio::time::timeout(Duration::from_millis(200), guard.wait_lost_async());
            assert!(not_yet.await.is_err(), "still held");
            let operator = common::client();
            let queue = DistributedMutex::new(&operator, &path).unwrap();
            let contender = queue.contenders().unwrap().remove(0);
            assert!(queue.break_contender(&contender).unwrap());
            let lost = tokio::time::timeout(Duration::from_secs(5), guard.wait_lost_async()).await;
            assert_eq!(lost.expect("loss seen"), LockState::Lost);
            assert!(matches!(
                guard
                    .fenced_set_data_async(&format!("{path}-data"), b"x")
                    .await,
                Err(Error::LockLost { .. })
            ));
        });
    }

    /// The `_with_async` forms of a guard's waits and fenced writes: a timeout or a deadline
    /// ends them on zklock's own timer, a cancelled token at once, as their blocking forms.
    #[test]
    fn a_guards_waits_and_writes_take_a_wait_as_futures() {
        let client = common::client();
        let path = common::lock_path("async-with-forms");
        let data = format!("{path}-data");
        let mutex = DistributedMutex::new(&client, &path).unwrap().revocable();
        let cancelled = CancelToken::new();
        cancelled.cancel();
        two_worker_runtime().block_on(async {
            let guard = mutex.lock_async().await.unwrap();
            let started = Instant::now();
            let lost = guard
                .wait_lost_with_async(Wait::timeout(Duration::from_millis(200)))
                .await;
            assert_eq!(lost, None, "still held");
            assert!(started.elapsed() >= Duration::from_millis(200));
            let started = Instant::now();
            let deadline = Wait::until(Instant::now() + Duration::from_millis(200));
            assert!(!guard.wait_revocation_with_async(deadline).await);
            assert!(started.elapsed() >= Duration::from_millis(200));
            let stopped = Wait::forever().cancel_on(&cancelled);
            assert_eq!(guard.wait_lost_with_async(stopped.clone()).await, None);
            assert!(!guard.wait_revocation_with_async(stopped.clone()).await);
            // A correctness bound, not a speed figure: a cancelled token ends them at once.
            assert!(started.elapsed() < Duration::from_secs(2));

            let budget = Wait::timeout(Duration::from_secs(10));
            guard
                .fenced_set_data_with_async(&data, b"one", budget.clone())
                .await
                .unwrap();
            assert!(matches!(
                guard
                    .fenced_set_data_with_async(&data, b"two", stopped.clone())
                    .await,
                Err(Error::Cancelled)
            ));
            assert_eq!(client.get_data(&data).unwrap().unwrap(), b"one");
            let extra = format!("{data}-extra");
            let transaction = guard.transaction().create(&extra, b"x");
            transaction.commit_with_async(budget.clone()).await.unwrap();
            let transaction = guard.transaction().set_data(&data, b"three");
            let refused = transaction.commit_with_async(stopped.clone()).await;
            assert!(matches!(refused, Err(Error::Cancelled)), "{refused:?}");
            assert_eq!(client.get_data(&data).unwrap().unwrap(), b"one");
            assert!(matches!(
                guard.fenced_delete_with_async(&extra, stopped).await,
                Err(Error::Cancelled)
            ));
            assert!(guard
                .fenced_delete_with_async(&extra, budget.clone())
                .await
                .unwrap());
            assert!(guard.fenced_delete_with_async(&data, budget).await.unwrap());

            let operator = common::client();
            let queue = DistributedMutex::new(&operator, &path).unwrap();
            let contender = queue.contenders().unwrap().remove(0);
            assert!(queue.break_contender(&contender).unwrap());
            let lost = guard
                .wait_lost_with_async(Wait::timeout(Duration::from_secs(5)))
                .await;
            assert_eq!(lost, Some(LockState::Lost));
        });
    }

    #[test]
    fn fenced_writes_and_transactions_await() {
        let client = common::client();
        let path = common::lock_path("async-fenced");
        let data = format!("{path}-data");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        current_thread().block_on(async {
            let guard = mutex.lock_async().await.unwrap();
            guard.fenced_set_data_async(&data, b"one").await.unwrap();
            assert_eq!(client.get_data(&data).unwrap().unwrap(), b"one");
            guard
                .transaction()
                .set_data(&data, b"two")
                .create(&format!("{data}-extra"), b"x")
                .commit_async()
                .await
                .unwrap();
            assert_eq!(client.get_data(&data).unwrap().unwrap(), b"two");
            assert!(guard
                .fenced_delete_async(&format!("{data}-extra"))
                .await
                .unwrap());
            assert!(!guard
                .fenced_delete_async(&format!("{data}-extra"))
                .await
                .unwrap());
            guard.unlock_async().await.unwrap();
        });
    }

    #[test]
    fn every_recipe_has_async_acquisitions() {
        let client = common::client();
        two_worker_runtime().block_on(async {
            // Readers ignore readers; a writer waits for them.
            let rw = DistributedRwLock::new(&client, &common::lock_path("async-rw")).unwrap();
            let first = rw.read_async().await.unwrap();
            let second = rw.try_read_async().await.unwrap().expect("readers share");
            assert!(rw.try_write_async().await.unwrap().is_none());
            let writer = {
                let rw = rw.clone();
                tokio::spawn(async move {
                    rw.write_with_async(zklock::Wait::timeout(Duration::from_secs(10)))
                        .await
                })
            };
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert!(!writer.is_finished(), "the writer waits for the readers");
            drop((first, second));
            let write = writer.await.unwrap().unwrap().expect("written");
            assert!(write.is_held());
            write.unlock_async().await.unwrap();

            // A semaphore of two permits.
            let semaphore =
                Semaphore::new(&client, &common::lock_path("async-semaphore"), 2).unwrap();
            let one = semaphore.acquire_async().await.unwrap();
            let two = semaphore
                .try_acquire_async()
                .await
                .unwrap()
                .expect("a second");
            assert!(semaphore
                .acquire_with_async(zklock::Wait::timeout(Duration::from_millis(200)))
                .await
                .unwrap()
                .is_none());
            drop(one);
            two.unlock_async().await.unwrap();
            let both = semaphore.acquire_many_async(2).await.unwrap();
            assert_eq!(both.count(), 2);
            assert!(semaphore.try_acquire_async().await.unwrap().is_none());
            both.unlock_async().await.unwrap();

            // Several locks as one.
            let multi = MultiLock::new(&client)
                .mutex(&common::lock_path("async-multi-a"))
                .unwrap()
                .write_lock(&common::lock_path("async-multi-b"))
                .unwrap();
            let all = multi.lock_async().await.unwrap();
            assert!(all.is_held());
            assert!(multi.try_lock_async().await.unwrap().is_none());
            all.unlock_async().await.unwrap();

            // Leadership.
            let election =
                LeaderElection::new(&client, &common::lock_path("async-leader")).unwrap();
            let leader = election.participate_async().await.unwrap();
            assert!(election.try_participate_async().await.unwrap().is_none());
            leader.unlock_async().await.unwrap();
        });
    }

    #[test]
    fn a_client_connects_and_closes_without_blocking_a_worker() {
        let path = common::lock_path("async-client");
        let observer = common::client();
        current_thread().block_on(async {
            // The only worker of a current-thread runtime keeps running other tasks meanwhile.
            let ticking = Arc::new(AtomicBool::new(false));
            let ticker = {
                let ticking = ticking.clone();
                tokio::spawn(async move {
                    loop {
                        ticking.store(true, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                })
            };
            let client = Client::builder(&common::connect_string())
                .session_timeout(common::SESSION_TIMEOUT)
                .connect_async()
                .await
                .unwrap();
            let mutex = DistributedMutex::new(&client, &path).unwrap();
            let _guard = mutex.lock_async().await.unwrap();
            assert_eq!(common::children_count(&observer, &path), 1);
            client.close_async().await.unwrap();
            assert!(client.is_closed());
            assert!(ticking.load(Ordering::SeqCst));
            ticker.abort();
        });
        // Closing ended the session, and with it the node.
        assert_eq!(common::children_count(&observer, &path), 0);
    }

    #[test]
    fn async_calls_return_send_futures() {
        fn send<T: Send>(_: &T) {}
        let client = common::client();
        let mutex = DistributedMutex::new(&client, &common::lock_path("async-send")).unwrap();
        send(&mutex.lock_async());
        send(&mutex.try_lock_async());
        send(&mutex.lock_with_async(zklock::Wait::timeout(Duration::from_secs(1))));
        let semaphore = Semaphore::new(&client, &common::lock_path("async-send-s"), 1).unwrap();
        send(&semaphore.acquire_many_async(1));
        let multi = MultiLock::new(&client)
            .mutex(&common::lock_path("async-send-m"))
            .unwrap();
        send(&multi.lock_async());
        send(&client.close_async());
        send(&Client::builder("127.0.0.1:1").connect_async());
    }
}

mod other_calls {
    //! The `_async` forms of the calls that are not acquisitions, on a real server: inspection
    //! (`contenders_async` on every recipe, `current_leader_async`, `Client::inspect_async`), data
    //! (`Client::get_data_async`, `set_data_async`, `children_async`), breaking
    //! (`break_contender_async`), revocation (`request_revocation_async`,
    //! `LockGuard::wait_revocation_async`) and the session's state (`wait_state_change_async`).
    //! Each runs on tokio and on `futures::executor`, returns a `Send` future, gives what its
    //! blocking twin gives, and leaves nothing behind when dropped half-way.

    use crate::common;
    use common::proxy::Proxy;
    use common::servers;
    use std::future::Future;
    use std::task::{Context, Poll};
    use std::time::{Duration, Instant};
    use zklock::client::SessionState;
    use zklock::inspect::LockKind;
    use zklock::{
        Client, DistributedMutex, DistributedRwLock, Error, LeaderElection, LockState, Semaphore,
    };

    /// Runs `make()`'s future once on a tokio runtime (2 workers) and once on
    /// `futures::executor`, and returns both outputs.
    fn on_both<F: Future + Send + 'static>(make: impl Fn() -> F) -> [F::Output; 2]
    where
        F::Output: Send,
    {
        let rt = common::two_worker_runtime();
        let on_tokio = rt.block_on(async { rt.spawn(make()).await.unwrap() });
        let on_futures = futures::executor::block_on(make());
        [on_tokio, on_futures]
    }

    #[test]
    fn data_calls_await_on_both_executors() {
        let client = common::client();
        let path = common::lock_path("async-data");
        let key = format!("{path}/state/counter");
        let [a, b] = on_both(|| {
            let (client, key) = (client.clone(), key.clone());
            async move { client.get_data_async(&key).await }
        });
        assert_eq!((a.unwrap(), b.unwrap()), (None, None));
        let [a, b] = on_both(|| {
            let (client, key) = (client.clone(), key.clone());
            async move {
                client.set_data_async(&key, b"7").await?;
                client.get_data_async(&key).await
            }
        });
        assert_eq!(a.unwrap().as_deref(), Some(&b"7"[..]));
        assert_eq!(b.unwrap().as_deref(), Some(&b"7"[..]));
        // The blocking twins see the same.
        assert_eq!(client.get_data(&key).unwrap().as_deref(), Some(&b"7"[..]));
        let [a, b] = on_both(|| {
            let (client, path) = (client.clone(), format!("{path}/state"));
            async move { client.children_async(&path).await }
        });
        assert_eq!(a.unwrap(), Some(vec!["counter".to_owned()]));
        assert_eq!(b.unwrap(), Some(vec!["counter".to_owned()]));
        let missing = futures::executor::block_on(client.children_async(&format!("{path}/none")));
        assert_eq!(missing.unwrap(), None);
        // A bad path is a typed error, before anything is sent.
        let bad = futures::executor::block_on(client.get_data_async("no-slash"));
        assert!(matches!(bad, Err(Error::InvalidPath { .. })), "{bad:?}");
        let big = vec![0u8; 2 << 20];
        let refused = futures::executor::block_on(client.set_data_async(&key, &big));
        assert!(refused.is_err(), "an oversized write is refused");
        assert_eq!(client.get_data(&key).unwrap().as_deref(), Some(&b"7"[..]));
    }

    #[test]
    fn contenders_of_every_recipe_and_the_leader_await_on_both_executors() {
        let client = common::client();
        let holder = common::client();
        let mutex_path = common::lock_path("async-insp-m");
        let rw_path = common::lock_path("async-insp-rw");
        let sem_path = common::lock_path("async-insp-s");
        let el_path = common::lock_path("async-insp-e");
        let _m = DistributedMutex::new(&holder, &mutex_path)
            .unwrap()
            .lock()
            .unwrap();
        let _r = DistributedRwLock::new(&holder, &rw_path)
            .unwrap()
            .read()
            .unwrap();
        let _s = Semaphore::new(&holder, &sem_path, 2)
            .unwrap()
            .acquire()
            .unwrap();
        let _e = LeaderElection::new(&holder, &el_path)
            .unwrap()
            .participant_id("leader-1")
            .participate()
            .unwrap();
        let outputs = on_both(|| {
            let mutex = DistributedMutex::new(&client, &mutex_path).unwrap();
            let rw = DistributedRwLock::new(&client, &rw_path).unwrap();
            let sem = Semaphore::new(&client, &sem_path, 2).unwrap();
            let election = LeaderElection::new(&client, &el_path).unwrap();
            let client = client.clone();
            let (mutex_path, sem_path) = (mutex_path.clone(), sem_path.clone());
            async move {
                let counts = [
                    mutex.contenders_async().await?.len(),
                    rw.contenders_async().await?.len(),
                    sem.contenders_async().await?.len(),
                    election.contenders_async().await?.len(),
                ];
                let leader = election.current_leader_async().await?.map(|l| l.owner);
                let inspected = client.inspect_async(&mutex_path, None).await?;
                let semaphore = client.inspect_async(&sem_path, Some(2)).await?;
                Ok::<_, Error>((counts, leader, inspected, semaphore))
            }
        });
        for output in outputs {
            let (counts, leader, inspected, semaphore) = output.unwrap();
            assert_eq!(counts, [1, 1, 1, 1]);
            assert_eq!(leader.as_deref(), Some("leader-1"));
            assert_eq!(inspected.kind, Some(LockKind::Mutex));
            assert_eq!(inspected.nodes.len(), 1);
            assert_eq!(inspected.nodes[0].holds, Some(true));
            assert_eq!(semaphore.kind, Some(LockKind::Semaphore));
            assert_eq!(semaphore.nodes[0].holds, Some(true));
        }
        // The blocking twins agree.
        let inspected = client.inspect(&mutex_path, None).unwrap();
        assert_eq!(inspected.nodes.len(), 1);
        let zero = futures::executor::block_on(client.inspect_async(&sem_path, Some(0)));
        assert!(matches!(zero, Err(Error::InvalidArgument(_))), "{zero:?}");
    }

    #[test]
    fn break_contender_async_breaks_each_recipes_node_on_both_executors() {
        let client = common::client();
        let holder = common::client();
        for executor in 0..2 {
            let mutex_path = common::lock_path("async-break-m");
            let rw_path = common::lock_path("async-break-rw");
            let sem_path = common::lock_path("async-break-s");
            let el_path = common::lock_path("async-break-e");
            let m = DistributedMutex::new(&holder, &mutex_path)
                .unwrap()
                .lock()
                .unwrap();
            let w = DistributedRwLock::new(&holder, &rw_path)
                .unwrap()
                .write()
                .unwrap();
            let s = Semaphore::new(&holder, &sem_path, 1)
                .unwrap()
                .acquire()
                .unwrap();
            let e = LeaderElection::new(&holder, &el_path)
                .unwrap()
                .participate()
                .unwrap();
            let mutex = DistributedMutex::new(&client, &mutex_path).unwrap();
            let rw = DistributedRwLock::new(&client, &rw_path).unwrap();
            let sem = Semaphore::new(&client, &sem_path, 1).unwrap();
            let election = LeaderElection::new(&client, &el_path).unwrap();
            let work = async {
                let c = mutex.contenders_async().await?.remove(0);
                let broke_m = mutex.break_contender_async(&c).await?;
                let again = mutex.break_contender_async(&c).await?;
                let c = rw.contenders_async().await?.remove(0);
                let broke_w = rw.break_contender_async(&c).await?;
                let c = sem.contenders_async().await?.remove(0);
                let broke_s = sem.break_contender_async(&c).await?;
                let c = election.contenders_async().await?.remove(0);
                let broke_e = election.break_contender_async(&c).await?;
                Ok::<_, Error>([broke_m, !again, broke_w, broke_s, broke_e])
            };
            let broke = if executor == 0 {
                common::two_worker_runtime().block_on(work)
            } else {
                futures::executor::block_on(work)
            };
            assert_eq!(broke.unwrap(), [true; 5]);
            // The holders learn it: an election watches its node from the start, a lock's guard
            // from its first look at its state.
            assert!(common::eventually(Duration::from_secs(5), || {
                m.state() == LockState::Lost && w.state() == LockState::Lost
            }));
            assert!(common::eventually(Duration::from_secs(5), || {
                e.state() == LockState::Lost
            }));
            assert!(mutex.try_lock().unwrap().is_some());
            assert!(sem.try_acquire().unwrap().is_some());
            drop(s);
        }
    }

    #[test]
    fn a_revocation_request_awaits_and_wakes_an_async_holder_on_both_executors() {
        let client = common::client();
        let asker = common::client();
        for executor in 0..2 {
            let path = common::lock_path("async-revoke");
            let mutex = DistributedMutex::new(&client, &path).unwrap().revocable();
            let guard = mutex.lock().unwrap();
            assert!(!guard.revocation_requested());
            let other = DistributedRwLock::new(&asker, &path).unwrap();
            let work = async {
                let holder = mutex.contenders_async().await?.remove(0);
                let waiting = guard.wait_revocation_async();
                let ask = async {
                    let asked = DistributedMutex::new(&asker, &path)
                        .unwrap()
                        .request_revocation_async(&holder)
                        .await;
                    // Asking twice asks the same.
                    let again = other.request_revocation_async(&holder).await;
                    (asked, again)
                };
                let (woke, (asked, again)) = futures::future::join(waiting, ask).await;
                Ok::<_, Error>((woke, asked?, again?))
            };
            let outcome = if executor == 0 {
                common::two_worker_runtime().block_on(work)
            } else {
                futures::executor::block_on(work)
            };
            assert_eq!(outcome.unwrap(), (true, true, true));
            assert!(guard.revocation_requested());
            assert!(guard.wait_revocation(), "the blocking wait sees it too");
            let holder = mutex.contenders().unwrap().remove(0);
            guard.unlock().unwrap();
            // A gone node: `false`, no error.
            let gone =
                futures::executor::block_on(mutex.request_revocation_async(&holder)).unwrap();
            assert!(!gone);
        }
        // Not revocable: the wait answers `false` at once.
        let path = common::lock_path("async-revoke-not");
        let guard = DistributedMutex::new(&client, &path)
            .unwrap()
            .lock()
            .unwrap();
        let started = Instant::now();
        assert!(!futures::executor::block_on(guard.wait_revocation_async()));
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn wait_state_change_async_sees_a_lost_connection_and_the_close() {
        let proxy = Proxy::start(&common::connect_string());
        let client = common::client_via(&proxy, Duration::from_secs(6));
        let rt = common::two_worker_runtime();
        let seen = client.state();
        assert_eq!(seen, SessionState::Connected);
        let waiting = rt.spawn({
            let client = client.clone();
            async move { client.wait_state_change_async(seen).await }
        });
        std::thread::sleep(Duration::from_millis(200));
        assert!(!waiting.is_finished(), "nothing changed yet");
        proxy.blackhole(true);
        let changed = rt
            .block_on(async { tokio::time::timeout(Duration::from_secs(10), waiting).await })
            .expect("a change within 10 s")
            .unwrap();
        assert_eq!(changed, SessionState::Suspended);
        proxy.blackhole(false);
        proxy.sever();
        let back = futures::executor::block_on(client.wait_state_change_async(changed));
        assert_eq!(back, SessionState::Connected);
        // Closing wakes a waiter at once, on either executor.
        let waiting = rt.spawn({
            let client = client.clone();
            async move {
                client
                    .wait_state_change_async(SessionState::Connected)
                    .await
            }
        });
        std::thread::sleep(Duration::from_millis(100));
        let started = Instant::now();
        client.close().unwrap();
        let closed = rt.block_on(waiting).unwrap();
        assert_eq!(closed, SessionState::Closed);
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(
            futures::executor::block_on(client.wait_state_change_async(SessionState::Connected)),
            SessionState::Closed
        );
    }

    #[test]
    fn calls_on_a_closed_client_say_closed() {
        let client = common::client();
        let path = common::lock_path("async-closed");
        client.close().unwrap();
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let outcomes = futures::executor::block_on(async {
            [
                client.get_data_async(&path).await.map(drop),
                client.children_async(&path).await.map(drop),
                client.set_data_async(&path, b"x").await,
                client.inspect_async(&path, None).await.map(drop),
                mutex.contenders_async().await.map(drop),
            ]
        });
        for outcome in outcomes {
            assert!(matches!(outcome, Err(Error::Closed)), "{outcome:?}");
        }
    }

    /// A waker that does nothing: the tests below poll by hand.
    fn poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
        let waker = futures::task::noop_waker();
        std::pin::Pin::new(future).poll(&mut Context::from_waker(&waker))
    }

    #[test]
    fn futures_dropped_half_way_leave_no_watch_and_no_node() {
        let client = common::client();
        let holder = common::client();
        let path = common::lock_path("async-calls-drop");
        let guard = DistributedMutex::new(&holder, &path)
            .unwrap()
            .revocable()
            .lock()
            .unwrap();
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let contender = mutex.contenders().unwrap().remove(0);
        let election = LeaderElection::new(&client, &path).unwrap();
        // Each is polled once (its first request sent), then dropped.
        let mut futures: Vec<std::pin::Pin<Box<dyn Future<Output = ()> + Send + '_>>> = vec![
            Box::pin(async { drop(mutex.contenders_async().await) }),
            Box::pin(async { drop(client.inspect_async(&path, None).await) }),
            Box::pin(async { drop(client.children_async(&path).await) }),
            Box::pin(async { drop(election.current_leader_async().await) }),
            Box::pin(async {
                let _ = client
                    .wait_state_change_async(SessionState::Connected)
                    .await;
            }),
            Box::pin(async {
                let _ = guard.wait_revocation_async().await;
            }),
        ];
        for future in &mut futures {
            let _ = poll_once(future);
        }
        drop(futures);
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(
            servers::watches_of(&common::connect_string(), client.session_id()),
            0
        );
        assert_eq!(mutex.contenders().unwrap().len(), 1);
        // A break dropped after its first poll: done or not, the lock is in one piece.
        let mut breaking = Box::pin(mutex.break_contender_async(&contender));
        let _ = poll_once(&mut breaking);
        drop(breaking);
        assert!(common::eventually(Duration::from_secs(2), || {
            let left = mutex.contenders().unwrap().len();
            left == 0 || (left == 1 && guard.is_held())
        }));
        drop(guard);
    }

    #[test]
    fn the_new_async_calls_return_send_futures() {
        fn send<T: Send>(_: &T) {}
        let client = common::client();
        let path = common::lock_path("async-calls-send");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let rw = DistributedRwLock::new(&client, &path).unwrap();
        let semaphore = Semaphore::new(&client, &path, 1).unwrap();
        let election = LeaderElection::new(&client, &path).unwrap();
        let guard = mutex.lock().unwrap();
        let contender = mutex.contenders().unwrap().remove(0);
        send(&client.get_data_async(&path));
        send(&client.set_data_async(&path, b""));
        send(&client.children_async(&path));
        send(&client.inspect_async(&path, None));
        send(&client.wait_state_change_async(SessionState::Connected));
        send(&mutex.contenders_async());
        send(&mutex.break_contender_async(&contender));
        send(&mutex.request_revocation_async(&contender));
        send(&rw.contenders_async());
        send(&rw.break_contender_async(&contender));
        send(&rw.request_revocation_async(&contender));
        send(&semaphore.contenders_async());
        send(&semaphore.break_contender_async(&contender));
        send(&election.contenders_async());
        send(&election.current_leader_async());
        send(&election.break_contender_async(&contender));
        let mut leaders = election.observe();
        send(&leaders.next_async());
        send(&leaders.next_with_async(zklock::Wait::forever()));
        send(&guard.wait_revocation_async());
        send(&guard.wait_revocation_with_async(zklock::Wait::forever()));
        send(&guard.wait_lost_with_async(zklock::Wait::forever()));
        send(&guard.fenced_set_data_with_async(&path, b"", zklock::Wait::forever()));
        send(&guard.fenced_delete_with_async(&path, zklock::Wait::forever()));
        send(
            &guard
                .transaction()
                .commit_with_async(zklock::Wait::forever()),
        );
        let _: &Client = &client;
    }
}

mod under_faults {
    //! The async front-end under real faults: futures dropped while the connection is blackholed,
    //! severed or its replies lost, or while the server restarts; thousands of async waiters across
    //! a restart; session expiry and `close_async` under async waiters and holders; timeouts during
    //! an outage; all-or-nothing acquisitions dropped half-way; releases cut short by a timeout; a
    //! process holding an async lock frozen past its session. After each fault: no node of ours is
    //! left, the lock can be taken, and no future hangs.

    use crate::common;
    use common::proxy::Proxy;
    use common::servers::PrivateServer;
    use common::{two_worker_runtime, Exclusion};
    use std::future::Future;
    use std::io::{BufRead, BufReader};
    use std::pin::Pin;
    use std::process::Command;
    use std::sync::atomic::Ordering;
    use std::sync::{Arc, Mutex};
    use std::task::{Context, Poll};
    use std::time::{Duration, Instant};
    use zklock::{DistributedMutex, Error, LockState, MultiLock, Semaphore};

    /// Polls `future` once with a waker that does nothing; `Some(output)` if it completed.
    fn poll_once<F: Future + Unpin>(future: &mut F) -> Option<F::Output> {
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        match Pin::new(future).poll(&mut cx) {
            Poll::Ready(output) => Some(output),
            Poll::Pending => None,
        }
    }

    /// Waits up to `limit` for exactly `n` contenders on `path` (seen by `observer`); says what it
    /// saw last if they never were.
    fn settles_at(observer: &zklock::Client, path: &str, n: usize, limit: Duration) -> usize {
        let mut seen = usize::MAX;
        common::eventually(limit, || {
            seen = common::children_count(observer, path);
            seen == n
        });
        seen
    }

    /// Spawns `n` tasks waiting in `lock_async` on `mutex`; each keeps a guard it gets (for ever).
    fn spawn_waiters(mutex: &DistributedMutex, n: usize) -> Vec<tokio::task::JoinHandle<()>> {
        (0..n)
            .map(|_| {
                let mutex = mutex.clone();
                tokio::spawn(async move {
                    let guard = mutex.lock_async().await;
                    std::future::pending::<()>().await;
                    drop(guard);
                })
            })
            .collect()
    }

    /// Aborts `tasks` and waits until each has ended (its future dropped).
    async fn abort_all(tasks: Vec<tokio::task::JoinHandle<()>>) {
        for task in &tasks {
            task.abort();
        }
        for task in tasks {
            let _ = task.await;
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Releases cut short.

    /// A control for the next test: `unlock_async` polled once and dropped, on a guard whose own
    /// node nobody watches, still releases (the delete goes on in the background).
    #[test]
    fn an_unlock_async_dropped_after_one_poll_still_releases() {
        let client = common::client();
        let observer = common::client();
        let path = common::lock_path("afault-unlock-drop");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let guard = futures::executor::block_on(mutex.lock_async()).unwrap();
        let mut unlock = Box::pin(guard.unlock_async());
        let done = poll_once(&mut unlock);
        drop(unlock);
        eprintln!("unlock_async after one poll: {done:?}");
        assert_eq!(
            settles_at(&observer, &path, 0, Duration::from_secs(5)),
            0,
            "the lock node is left after a dropped unlock_async"
        );
    }

    /// `is_held()` starts a watch on the guard's own node; `unlock_async` first stops that watch
    /// (an await), and only then sends the delete. Dropped during that first await, the release
    /// is lost: `release_within_async` marked the hold released before awaiting, so the guard's
    /// drop (which runs when the dropped future drops the guard it owns) does nothing.
    #[test]
    fn an_unlock_async_dropped_while_stopping_the_own_node_watch_still_releases() {
        let client = common::client();
        let observer = common::client();
        let path = common::lock_path("afault-unlock-watch");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let guard = futures::executor::block_on(mutex.lock_async()).unwrap();
        assert!(guard.is_held()); // Sets the watch on our node.
        let mut unlock = Box::pin(guard.unlock_async());
        // Usually pending here (stopping the watch); on a loaded machine the connection may have
        // dropped meanwhile and the release gone to the background at once. The node must go
        // either way.
        let _ = poll_once(&mut unlock);
        drop(unlock);
        let left = settles_at(&observer, &path, 0, Duration::from_secs(5));
        // The client is alive and connected: the node should be gone long before 5 s.
        assert_eq!(
        left,
        0,
        "{left} node(s) left 5 s after a dropped unlock_async (client connected, session {:#x})",
        client.session_id()
    );
        // And the lock is free for another session.
        let other = DistributedMutex::new(&observer, &path).unwrap();
        assert!(other.try_lock().unwrap().is_some(), "the lock is free");
    }

    /// The same bug without any `is_held()`: a revocable lock watches its node from the claim on,
    /// and a semaphore permit's lease once its state was asked; `select!`/`timeout` around their
    /// async releases leaks the nodes.
    #[test]
    fn async_releases_of_watched_nodes_dropped_early_still_release() {
        let client = common::client();
        let observer = common::client();
        let path = common::lock_path("afault-unlock-revocable");
        let mutex = DistributedMutex::new(&client, &path).unwrap().revocable();
        let guard = futures::executor::block_on(mutex.lock_async()).unwrap();
        let mut unlock = Box::pin(guard.unlock_async());
        // Usually pending (see above); the nodes must go either way.
        let _ = poll_once(&mut unlock);
        drop(unlock);
        let sem_path = common::lock_path("afault-release-permit");
        let semaphore = Semaphore::new(&client, &sem_path, 2).unwrap();
        let permit = futures::executor::block_on(semaphore.acquire_async()).unwrap();
        assert!(permit.is_held());
        let mut release = Box::pin(permit.unlock_async());
        let _ = poll_once(&mut release);
        drop(release);
        let observed = Semaphore::new(&observer, &sem_path, 2).unwrap();
        let mut leases = usize::MAX;
        common::eventually(Duration::from_secs(5), || {
            leases = observed.contenders().unwrap().len();
            leases == 0
        });
        let left = (
            settles_at(&observer, &path, 0, Duration::from_secs(1)),
            leases,
        );
        assert_eq!(left, (0, 0), "(lock nodes, lease nodes) left");
    }

    /// The realistic form of the bug above: `timeout(50 ms, guard.unlock_async())` just as the
    /// connection goes silent, after the holder looked at `is_held()` (the watch's request in
    /// flight makes stopping it wait up to 100 ms). Once the connection returns
    /// (the session lives on), the node must go.
    #[test]
    fn an_unlock_async_cut_short_by_a_timeout_while_blackholed_releases_after_recovery() {
        let proxy = Proxy::start(&common::connect_string());
        let client = common::client_via(&proxy, Duration::from_secs(8));
        let observer = common::client();
        let path = common::lock_path("afault-unlock-timeout");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let session = client.session_id();
        two_worker_runtime().block_on(async {
            let guard = mutex.lock_async().await.unwrap();
            proxy.blackhole(true);
            // The holder looks at its lock as the network goes silent: that sets the watch on its
            // node, whose request is now in flight (swallowed).
            assert!(guard.is_held());
            tokio::time::sleep(Duration::from_millis(50)).await; // The watch's request goes out.
            let cut = tokio::time::timeout(Duration::from_millis(50), guard.unlock_async()).await;
            eprintln!("unlock_async under a blackhole: {cut:?}");
            assert!(cut.is_err(), "cut short");
            tokio::time::sleep(Duration::from_millis(200)).await;
            proxy.blackhole(false);
            proxy.sever();
        });
        let left = settles_at(&observer, &path, 0, Duration::from_secs(10));
        assert_eq!(client.session_id(), session, "the session survived");
        assert_eq!(
            left, 0,
            "{left} node(s) left 10 s after the connection came back"
        );
    }

    /// A guard from `lock_async` dropped while the connection is silent: released in the
    /// background once the connection returns, on the same session.
    #[test]
    fn an_async_guard_dropped_while_blackholed_is_released_after_recovery() {
        let proxy = Proxy::start(&common::connect_string());
        let client = common::client_via(&proxy, Duration::from_secs(8));
        let observer = common::client();
        let path = common::lock_path("afault-guard-blackhole");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let session = client.session_id();
        let guard = two_worker_runtime().block_on(mutex.lock_async()).unwrap();
        proxy.blackhole(true);
        let started = Instant::now();
        drop(guard);
        assert!(
            started.elapsed() < Duration::from_millis(100),
            "an async guard's drop waited {:?}",
            started.elapsed()
        );
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(common::children_count(&observer, &path), 1, "not yet");
        proxy.blackhole(false);
        proxy.sever();
        assert_eq!(settles_at(&observer, &path, 0, Duration::from_secs(10)), 0);
        assert_eq!(client.session_id(), session);
        assert!(mutex.try_lock().unwrap().is_some());
    }

    /// Fenced writes cut short by a timeout while blackholed leave the guard usable: after the
    /// connection returns it still holds, fences a write, and releases.
    #[test]
    fn fenced_writes_cut_short_by_a_timeout_leave_the_guard_usable() {
        let proxy = Proxy::start(&common::connect_string());
        let client = common::client_via(&proxy, Duration::from_secs(8));
        let observer = common::client();
        let path = common::lock_path("afault-fenced");
        let data = format!("{path}-data");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        two_worker_runtime().block_on(async {
            let guard = mutex.lock_async().await.unwrap();
            guard.fenced_set_data_async(&data, b"one").await.unwrap();
            proxy.blackhole(true);
            let cut = tokio::time::timeout(
                Duration::from_millis(200),
                guard.fenced_set_data_async(&data, b"two"),
            )
            .await;
            assert!(cut.is_err(), "a write through a blackhole: {cut:?}");
            let cut = tokio::time::timeout(
                Duration::from_millis(200),
                guard.transaction().set_data(&data, b"three").commit_async(),
            )
            .await;
            assert!(cut.is_err(), "a transaction through a blackhole: {cut:?}");
            proxy.blackhole(false);
            proxy.sever();
            let back = tokio::time::timeout(Duration::from_secs(10), async {
                while !guard.is_held() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
            .await;
            assert!(
                back.is_ok(),
                "held again after recovery: {:?}",
                guard.state()
            );
            match guard.fenced_set_data_async(&data, b"four").await {
                Ok(()) => {}
                // Held again can be read off the old connection just before the client notices
                // the proxy cut it: a write sent then has an unknown outcome, as documented. Look,
                // and write again only if it was not applied.
                Err(Error::OutcomeUnknown { .. }) => {
                    if observer.get_data(&data).unwrap().as_deref() != Some(&b"four"[..]) {
                        guard.fenced_set_data_async(&data, b"four").await.unwrap();
                    }
                }
                Err(err) => panic!("fenced write after recovery: {err}"),
            }
            assert_eq!(observer.get_data(&data).unwrap().unwrap(), b"four");
            guard.unlock_async().await.unwrap();
        });
        assert_eq!(common::children_count(&observer, &path), 0);
    }

    // ---------------------------------------------------------------------------------------------
    // Waiters dropped during faults.

    /// Queued `lock_async` futures dropped while the connection is blackholed, then while it is
    /// severed: once it returns, none of their nodes is left and the lock can be taken.
    #[test]
    fn queued_futures_dropped_during_blackhole_and_sever_leave_nothing() {
        let proxy = Proxy::start(&common::connect_string());
        let client = common::client_via(&proxy, Duration::from_secs(8));
        let observer = common::client();
        let path = common::lock_path("afault-drop-outage");
        let holder = DistributedMutex::new(&observer, &path)
            .unwrap()
            .lock()
            .unwrap();
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let rt = two_worker_runtime();
        rt.block_on(async {
            // Blackholed.
            let waiters = spawn_waiters(&mutex, 40);
            assert!(common::wait_contenders(&mutex, 41, Duration::from_secs(10)));
            proxy.blackhole(true);
            tokio::time::sleep(Duration::from_millis(300)).await;
            abort_all(waiters).await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            proxy.blackhole(false);
            proxy.sever();
        });
        assert_eq!(
            settles_at(&observer, &path, 1, Duration::from_secs(10)),
            1,
            "waiters' nodes left after a blackhole"
        );
        rt.block_on(async {
            // Severed, repeatedly, while they are dropped.
            let waiters = spawn_waiters(&mutex, 40);
            assert!(common::wait_contenders(&mutex, 41, Duration::from_secs(10)));
            proxy.refuse(true);
            proxy.sever();
            abort_all(waiters).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
            proxy.refuse(false);
        });
        assert_eq!(
            settles_at(&observer, &path, 1, Duration::from_secs(10)),
            1,
            "waiters' nodes left after a sever"
        );
        drop(holder);
        let taken = mutex.lock_timeout(Duration::from_secs(5)).unwrap();
        assert!(taken.is_some(), "the lock can be taken");
    }

    /// Futures dropped while their creates execute on the server but the replies are lost: the
    /// nodes the server made must be found and deleted once the connection is back.
    #[test]
    fn futures_dropped_while_create_replies_are_lost_leave_nothing() {
        let proxy = Proxy::start(&common::connect_string());
        let client = common::client_via(&proxy, Duration::from_secs(8));
        let observer = common::client();
        let path = common::lock_path("afault-lost-creates");
        let holder = DistributedMutex::new(&observer, &path)
            .unwrap()
            .lock()
            .unwrap();
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        drop(mutex.try_lock().unwrap()); // The session is warm.
        two_worker_runtime().block_on(async {
            proxy.drop_replies(true);
            let waiters = spawn_waiters(&mutex, 30);
            // The creates reach the server (all but the last, which waits in the client for
            // the answer to those before it, to go out coalesced with what comes next).
            let created = common::eventually(Duration::from_secs(5), || {
                common::children_count(&observer, &path) >= 30
            });
            assert!(created, "the creates executed");
            tokio::time::sleep(Duration::from_millis(200)).await;
            abort_all(waiters).await;
            proxy.drop_replies(false);
            proxy.sever();
        });
        let left = settles_at(&observer, &path, 1, Duration::from_secs(10));
        assert_eq!(left, 1, "nodes of dropped futures left: {}", left - 1);
        drop(holder);
        assert!(mutex.try_lock().unwrap().is_some());
    }

    /// Queued futures dropped while the server is down (restarted with its data, within the
    /// session timeout): none of their nodes is left once it is back.
    #[test]
    fn queued_futures_dropped_during_a_server_restart_leave_nothing() {
        let server = PrivateServer::start("");
        let connect = server.connect_string();
        let client = common::client_at(&connect, Duration::from_secs(15));
        let observer = common::client_at(&connect, Duration::from_secs(15));
        let path = common::lock_path("afault-drop-restart");
        let holder = DistributedMutex::new(&observer, &path)
            .unwrap()
            .lock()
            .unwrap();
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let rt = two_worker_runtime();
        rt.block_on(async {
            let waiters = spawn_waiters(&mutex, 50);
            assert!(common::wait_contenders(&mutex, 51, Duration::from_secs(10)));
            server.stop_keeping_data();
            abort_all(waiters).await;
            // And some that start while the server is down, dropped before it returns.
            let late = spawn_waiters(&mutex, 20);
            tokio::time::sleep(Duration::from_millis(300)).await;
            abort_all(late).await;
            server.start_again();
        });
        assert_eq!(settles_at(&observer, &path, 1, Duration::from_secs(15)), 1);
        drop(holder);
        let taken = mutex.lock_timeout(Duration::from_secs(5)).unwrap();
        assert!(taken.is_some(), "the lock can be taken");
    }

    /// 2,000 async waiters on a 2-worker runtime, the server restarted (data kept) while they
    /// queue, within the session timeout: every one acquires, never two at once, nothing left.
    #[test]
    fn two_thousand_async_waiters_survive_a_server_restart() {
        const TASKS: usize = 2000;
        let server = PrivateServer::start("");
        let connect = server.connect_string();
        let client = common::client_at(&connect, Duration::from_secs(20));
        let path = common::lock_path("afault-restart-2000");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let exclusion = Arc::new(Exclusion::default());
        let failures = Arc::new(Mutex::new(Vec::<String>::new()));
        let started = Instant::now();
        two_worker_runtime().block_on(async {
            let tasks: Vec<_> = (0..TASKS)
                .map(|_| {
                    let (mutex, exclusion, failures) =
                        (mutex.clone(), exclusion.clone(), failures.clone());
                    tokio::spawn(async move {
                        match mutex.lock_async().await {
                            Ok(guard) => {
                                exclusion.enter();
                                tokio::task::yield_now().await;
                                exclusion.leave();
                                match guard.unlock_async().await {
                                    // A release in flight when the server went down: documented,
                                    // and finished in the background.
                                    Ok(()) | Err(Error::OutcomeUnknown { .. }) => {}
                                    Err(e) => failures.lock().unwrap().push(format!("unlock: {e}")),
                                }
                            }
                            Err(e) => failures.lock().unwrap().push(format!("lock: {e}")),
                        }
                    })
                })
                .collect();
            // Restart once a few have gone through, with most still queued.
            let deadline = Instant::now() + Duration::from_secs(20);
            while exclusion.entered.load(Ordering::SeqCst) < 50 && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let at = exclusion.entered.load(Ordering::SeqCst);
            server.stop_keeping_data();
            tokio::time::sleep(Duration::from_millis(500)).await;
            server.start_again();
            eprintln!("restarted with {at} of {TASKS} through");
            let all = tokio::time::timeout(Duration::from_secs(45), async {
                for task in tasks {
                    task.await.unwrap();
                }
            })
            .await;
            assert!(
                all.is_ok(),
                "{} of {TASKS} acquired after 45 s; failures {:?}",
                exclusion.entered.load(Ordering::SeqCst),
                failures.lock().unwrap()
            );
        });
        eprintln!("2000 waiters drained in {:?}", started.elapsed());
        let failures = failures.lock().unwrap();
        assert!(
            failures.is_empty(),
            "{} failed: {failures:?}",
            failures.len()
        );
        assert_eq!(exclusion.entered.load(Ordering::SeqCst), TASKS);
        assert_eq!(exclusion.overlaps.load(Ordering::SeqCst), 0);
        assert_eq!(common::children_count(&client, &path), 0);
    }

    // ---------------------------------------------------------------------------------------------
    // Session expiry, close, outages.

    /// The session expires (connection silent past its timeout) while an async holder holds and
    /// async waiters of the same session queue: the holder's `wait_lost_async` resolves and it ends
    /// `Lost`; every waiter ends (session expired, or acquired on the new session) and none hangs;
    /// no two ever hold at once.
    #[test]
    fn session_expiry_under_async_waiters_and_holder_ends_every_future() {
        let proxy = Proxy::start(&common::connect_string());
        let client = common::client_via(&proxy, Duration::from_secs(2));
        let observer = common::client();
        let path = common::lock_path("afault-expiry");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let first_session = client.session_id();
        let exclusion = Arc::new(Exclusion::default());
        let outcomes = Arc::new(Mutex::new(Vec::<String>::new()));
        two_worker_runtime().block_on(async {
            let guard = mutex.lock_async().await.unwrap();
            exclusion.enter();
            let waiters: Vec<_> = (0..30)
                .map(|_| {
                    let (mutex, exclusion, outcomes) =
                        (mutex.clone(), exclusion.clone(), outcomes.clone());
                    tokio::spawn(async move {
                        let outcome = match mutex.lock_async().await {
                            Ok(guard) => {
                                exclusion.enter();
                                tokio::time::sleep(Duration::from_millis(1)).await;
                                exclusion.leave();
                                assert_ne!(guard.session_id(), first_session);
                                let _ = guard.unlock_async().await;
                                "acquired".to_owned()
                            }
                            Err(e) => format!("{e:?}"),
                        };
                        outcomes.lock().unwrap().push(outcome);
                    })
                })
                .collect();
            assert!(common::wait_contenders(&mutex, 31, Duration::from_secs(10)));
            proxy.blackhole(true);
            let not_held =
                tokio::time::timeout(Duration::from_secs(5), guard.wait_lost_async()).await;
            eprintln!("holder while silent: {not_held:?}");
            assert!(not_held.is_ok(), "wait_lost_async never resolved");
            assert!(!guard.is_held());
            exclusion.leave();
            // Past the session timeout: the server expires the session.
            assert_eq!(
                settles_at(&observer, &path, 0, Duration::from_secs(10)),
                0,
                "the server expired the session"
            );
            proxy.blackhole(false);
            proxy.sever();
            let lost = tokio::time::timeout(Duration::from_secs(10), async {
                while guard.state() != LockState::Lost {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                guard.wait_lost_async().await
            })
            .await;
            assert_eq!(lost, Ok(LockState::Lost), "the holder learns it lost");
            assert!(matches!(
                guard.unlock_async().await,
                Err(Error::LockLost { .. })
            ));
            let ended = tokio::time::timeout(Duration::from_secs(15), async {
                for waiter in waiters {
                    waiter.await.unwrap();
                }
            })
            .await;
            assert!(
                ended.is_ok(),
                "waiters still waiting 15 s after the expiry: {} ended: {:?}",
                outcomes.lock().unwrap().len(),
                outcomes.lock().unwrap()
            );
        });
        let outcomes = outcomes.lock().unwrap();
        eprintln!("waiters after the expiry: {outcomes:?}");
        assert!(
            outcomes
                .iter()
                .all(|o| o == "acquired" || o == "SessionExpired"),
            "{outcomes:?}"
        );
        assert_eq!(exclusion.overlaps.load(Ordering::SeqCst), 0);
        assert_eq!(settles_at(&observer, &path, 0, Duration::from_secs(5)), 0);
        assert!(mutex
            .lock_timeout(Duration::from_secs(5))
            .unwrap()
            .is_some());
    }

    /// `close_async` with async holders and many async waiters on several locks, some of them
    /// through a silent connection: every future ends promptly with `Error::Closed`, every
    /// holder's `wait_lost_async` resolves `Lost`, and no node is left.
    #[test]
    fn close_async_ends_every_async_waiter_and_holder_promptly() {
        let client = common::client();
        let observer = common::client();
        let paths: Vec<String> = (0..3)
            .map(|i| common::lock_path(&format!("afault-close-{i}")))
            .collect();
        let mutexes: Vec<DistributedMutex> = paths
            .iter()
            .map(|p| DistributedMutex::new(&client, p).unwrap())
            .collect();
        let semaphore = Semaphore::new(&client, &common::lock_path("afault-close-sem"), 1).unwrap();
        two_worker_runtime().block_on(async {
            let mut holders = Vec::new();
            for mutex in &mutexes {
                holders.push(mutex.lock_async().await.unwrap());
            }
            let permit = semaphore.acquire_async().await.unwrap();
            let results = Arc::new(Mutex::new(Vec::<String>::new()));
            let mut waiters = Vec::new();
            for mutex in &mutexes {
                for i in 0..100 {
                    let (mutex, results) = (mutex.clone(), results.clone());
                    waiters.push(tokio::spawn(async move {
                        let outcome = if i % 2 == 0 {
                            mutex.lock_async().await.map(drop)
                        } else {
                            mutex
                                .lock_with_async(zklock::Wait::timeout(Duration::from_secs(60)))
                                .await
                                .map(drop)
                        };
                        results.lock().unwrap().push(format!("{outcome:?}"));
                    }));
                }
            }
            for _ in 0..10 {
                let (semaphore, results) = (semaphore.clone(), results.clone());
                waiters.push(tokio::spawn(async move {
                    let outcome = semaphore.acquire_async().await.map(drop);
                    results.lock().unwrap().push(format!("{outcome:?}"));
                }));
            }
            for mutex in &mutexes {
                assert!(common::wait_contenders(mutex, 101, Duration::from_secs(10)));
            }
            let started = Instant::now();
            let closed = client.close_async().await;
            eprintln!("close_async: {closed:?} after {:?}", started.elapsed());
            let all = tokio::time::timeout(Duration::from_secs(3), async {
                for waiter in waiters {
                    waiter.await.unwrap();
                }
            })
            .await;
            let results = results.lock().unwrap().clone();
            assert!(all.is_ok(), "{} of 310 ended", results.len());
            eprintln!("every waiter ended {:?} after the close", started.elapsed());
            assert!(
                results.iter().all(|r| r == "Err(Closed)"),
                "{:?}",
                results.iter().find(|r| *r != "Err(Closed)")
            );
            for holder in &holders {
                let lost =
                    tokio::time::timeout(Duration::from_secs(1), holder.wait_lost_async()).await;
                assert_eq!(lost, Ok(LockState::Lost));
            }
            assert_eq!(
                tokio::time::timeout(Duration::from_secs(1), permit.wait_lost_async()).await,
                Ok(LockState::Lost)
            );
            let later = mutexes[0].lock_async().await;
            assert!(matches!(later, Err(Error::Closed)), "{later:?}");
            // Guards dropped after the close do nothing and never block.
            let started = Instant::now();
            drop(holders);
            drop(permit);
            assert!(started.elapsed() < Duration::from_millis(100));
        });
        for path in &paths {
            assert_eq!(common::children_count(&observer, path), 0);
        }
    }

    /// `lock_with_async(Wait::timeout(..))` while no server answers, fresh and already queued behind a holder:
    /// returns within its timeout (plus a small grace), never hangs; nothing is left once the
    /// connection returns.
    #[test]
    fn lock_with_async_timeout_is_honoured_during_an_outage() {
        let proxy = Proxy::start(&common::connect_string());
        let client = common::client_via(&proxy, Duration::from_secs(8));
        let observer = common::client();
        let path = common::lock_path("afault-timeout-outage");
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        drop(mutex.try_lock().unwrap()); // The path exists, the session is warm.
        let holder = DistributedMutex::new(&observer, &path)
            .unwrap()
            .lock()
            .unwrap();
        two_worker_runtime().block_on(async {
            // Queued before the outage, with 1.5 s to go.
            let queued: Vec<_> = (0..10)
                .map(|_| {
                    let mutex = mutex.clone();
                    tokio::spawn(async move {
                        let started = Instant::now();
                        let outcome = mutex
                            .lock_with_async(zklock::Wait::timeout(Duration::from_millis(1500)))
                            .await;
                        (started.elapsed(), outcome.map(|g| g.is_some()))
                    })
                })
                .collect();
            assert!(common::wait_contenders(&mutex, 11, Duration::from_secs(5)));
            proxy.blackhole(true);
            // Fresh ones during the outage.
            let fresh: Vec<_> = (0..10)
                .map(|_| {
                    let mutex = mutex.clone();
                    tokio::spawn(async move {
                        let started = Instant::now();
                        let outcome = mutex
                            .lock_with_async(zklock::Wait::timeout(Duration::from_millis(500)))
                            .await;
                        (started.elapsed(), outcome.map(|g| g.is_some()))
                    })
                })
                .collect();
            for (tasks, limit) in [(fresh, 500), (queued, 1500)] {
                for task in tasks {
                    let ended = tokio::time::timeout(Duration::from_secs(5), task).await;
                    let (took, outcome) = ended.expect("lock_with_async hangs").unwrap();
                    assert!(
                        matches!(outcome, Ok(false) | Err(Error::ConnectionLoss { .. })),
                        "{outcome:?}"
                    );
                    assert!(
                        // Documented: up to one second more to withdraw the node, which cannot
                        // be confirmed during the outage.
                        took < Duration::from_millis(limit + 1500),
                        "lock_with_async({limit} ms) took {took:?}"
                    );
                }
            }
            proxy.blackhole(false);
            proxy.sever();
        });
        assert_eq!(settles_at(&observer, &path, 1, Duration::from_secs(10)), 1);
        drop(holder);
        assert!(mutex
            .lock_timeout(Duration::from_secs(5))
            .unwrap()
            .is_some());
    }

    // ---------------------------------------------------------------------------------------------
    // All-or-nothing acquisitions dropped half-way.

    /// A semaphore acquisition of two leases dropped after the gate and one lease are taken, while
    /// it waits for the second; and a multi-lock dropped holding its first member while it waits
    /// for the second: nothing of theirs is left, and the others' holds are untouched.
    #[test]
    fn semaphore_and_multi_futures_dropped_half_way_leave_nothing() {
        let client = common::client();
        let observer = common::client();
        let sem_path = common::lock_path("afault-sem-half");
        let semaphore = Semaphore::new(&client, &sem_path, 3).unwrap();
        let (a, b) = (
            common::lock_path("afault-multi-a"),
            common::lock_path("afault-multi-b"),
        );
        let multi = MultiLock::new(&client)
            .mutex(&a)
            .unwrap()
            .mutex(&b)
            .unwrap();
        let others = Semaphore::new(&observer, &sem_path, 3)
            .unwrap()
            .acquire_many(2)
            .unwrap();
        let b_holder = DistributedMutex::new(&observer, &b)
            .unwrap()
            .lock()
            .unwrap();
        let observed = Semaphore::new(&observer, &sem_path, 3).unwrap();
        let gate = format!("{sem_path}/locks");
        two_worker_runtime().block_on(async {
            for round in 0..3 {
                let taking = tokio::spawn({
                    let semaphore = semaphore.clone();
                    async move { semaphore.acquire_many_async(2).await.map(drop) }
                });
                // Gate and one lease taken, the second lease queued: 4 leases, the gate held.
                let half = common::eventually(Duration::from_secs(5), || {
                    observed.contenders().unwrap().len() == 4
                });
                assert!(half, "round {round}: the taker never got half-way");
                assert_eq!(common::children_count(&observer, &gate), 1);
                taking.abort();
                assert!(taking.await.unwrap_err().is_cancelled());

                let locking = tokio::spawn({
                    let multi = multi.clone();
                    async move { multi.lock_async().await.map(drop) }
                });
                let half = common::eventually(Duration::from_secs(5), || {
                    common::children_count(&observer, &b) == 2
                });
                assert!(half, "round {round}: the multi-lock never got half-way");
                assert_eq!(common::children_count(&observer, &a), 1);
                locking.abort();
                assert!(locking.await.unwrap_err().is_cancelled());

                let leases = common::eventually(Duration::from_secs(5), || {
                    observed.contenders().unwrap().len() == 2
                });
                assert!(
                    leases,
                    "round {round}: leases left {:?}",
                    observed.contenders()
                );
                assert_eq!(settles_at(&observer, &gate, 0, Duration::from_secs(5)), 0);
                assert_eq!(settles_at(&observer, &a, 0, Duration::from_secs(5)), 0);
                assert_eq!(settles_at(&observer, &b, 1, Duration::from_secs(5)), 1);
            }
        });
        assert!(others.is_held() && b_holder.is_held());
        // One more permit is free, and the first member.
        assert!(semaphore.try_acquire().unwrap().is_some());
        assert!(DistributedMutex::new(&client, &a)
            .unwrap()
            .try_lock()
            .unwrap()
            .is_some());
    }

    // ---------------------------------------------------------------------------------------------
    // A frozen process.

    /// Holds `LOCK` through `lock_async` on a tokio runtime with a 2 s session, prints `acquired`,
    /// then waits in `wait_lost_async` and prints `lost <state> <is_held>` when it resolves.
    #[test]
    #[ignore = "run as a child process by a_frozen_async_holder_learns_it_lost_after_thawing"]
    fn worker_async_holder() {
        let path = std::env::var("LOCK").unwrap();
        let client = common::client_with(Duration::from_secs(2));
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        two_worker_runtime().block_on(async {
            let guard = mutex.lock_async().await.unwrap();
            println!("acquired {}", guard.is_held());
            let state =
                tokio::time::timeout(Duration::from_secs(30), guard.wait_lost_async()).await;
            let held = guard.is_held();
            println!("lost {state:?} {held}");
            // Until told `Lost` (the expiry seen after the reconnect), or 10 s.
            let lost = tokio::time::timeout(Duration::from_secs(10), async {
                while guard.state() != LockState::Lost {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
            .await;
            println!("final {:?} {}", lost.is_ok(), guard.is_held());
        });
    }

    /// A process holding an async lock is frozen (SIGSTOP) past its session; another process
    /// acquires; after SIGCONT the frozen one's `wait_lost_async` resolves at once, `is_held()` is
    /// false, and it learns `Lost`.
    #[test]
    fn a_frozen_async_holder_learns_it_lost_after_thawing() {
        let path = common::lock_path("afault-frozen");
        let mut child = common::spawn_worker(
            "under_faults::worker_async_holder",
            &[("LOCK", path.clone())],
        );
        let mut lines = BufReader::new(child.stdout.take().unwrap())
            .lines()
            .map_while(Result::ok);
        // The test harness prints its own lines first, and `test <name> ... ` before ours.
        let acquired = lines.by_ref().find(|l| l.contains("acquired"));
        assert!(
            acquired
                .as_deref()
                .is_some_and(|l| l.ends_with("acquired true")),
            "the holder never acquired: {acquired:?}"
        );
        let kill = |sig: &str| {
            let ok = Command::new("kill")
                .args([sig, &child.id().to_string()])
                .status()
                .unwrap();
            assert!(ok.success());
        };
        kill("-STOP");
        let other = common::client();
        let next = DistributedMutex::new(&other, &path)
            .unwrap()
            .lock_timeout(Duration::from_secs(15))
            .unwrap()
            .expect("the frozen holder's session expired");
        kill("-CONT");
        let thawed = Instant::now();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in lines {
                let _ = tx.send(line);
            }
        });
        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline && !seen.iter().any(|l: &String| l.starts_with("final")) {
            if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
                if line.starts_with("lost") {
                    eprintln!(
                        "wait_lost_async resolved {:?} after SIGCONT",
                        thawed.elapsed()
                    );
                }
                seen.push(line);
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        let lost = seen.iter().find(|l| l.starts_with("lost"));
        let lost = lost.unwrap_or_else(|| panic!("wait_lost_async never resolved: {seen:?}"));
        assert!(
            lost.starts_with("lost Ok(") && lost.ends_with(" false"),
            "{lost}"
        );
        let last = seen.iter().find(|l| l.starts_with("final"));
        assert_eq!(
            last.map(String::as_str),
            Some("final true false"),
            "{seen:?}"
        );
        assert!(next.is_held());
    }
}
