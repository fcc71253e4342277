//! The `_async` forms of the calls that are not acquisitions, on a real server: inspection
//! (`contenders_async` on every recipe, `current_leader_async`, `Client::inspect_async`), data
//! (`Client::get_data_async`, `set_data_async`, `children_async`), breaking
//! (`break_contender_async`), revocation (`request_revocation_async`,
//! `LockGuard::wait_revocation_async`) and the session's state (`wait_state_change_async`).
//! Each runs on tokio and on `futures::executor`, returns a `Send` future, gives what its
//! blocking twin gives, and leaves nothing behind when dropped half-way.

mod common;

use std::future::Future;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use zklock::client::SessionState;
use zklock::inspect::LockKind;
use zklock::{
    Client, DistributedMutex, DistributedRwLock, Error, LeaderElection, LockState, Semaphore,
};

use common::proxy::Proxy;
use common::servers;

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
        let gone = futures::executor::block_on(mutex.request_revocation_async(&holder)).unwrap();
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
    let _: &Client = &client;
}
