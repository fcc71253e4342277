//! The async front-end against a real server: every acquisition as a future on the same core as
//! the blocking calls, on tokio (multi-thread and current-thread) and on other executors, and
//! cancel-safe: a future dropped at any await point, by a timeout or a `select!`, leaves no node
//! behind, and one dropped holding the lock releases it.

mod common;

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
async fn tasks_take_turns(mutex: &DistributedMutex, tasks: usize, rounds: usize) -> Arc<Exclusion> {
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
        let semaphore = Semaphore::new(&client, &common::lock_path("async-semaphore"), 2).unwrap();
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
        let election = LeaderElection::new(&client, &common::lock_path("async-leader")).unwrap();
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
