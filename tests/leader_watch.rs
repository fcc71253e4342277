//! Following an election's leader (`LeaderElection::observe`, `LeaderWatch`) on a real server:
//! every way a leader goes (steps down, its process dies, an operator breaks its node) is seen
//! in order, while a participant queued throughout keeps its node; reconnects are survived;
//! a session's end ends the watch with an error; dropped calls leave no watch behind.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::time::{Duration, Instant};

use zklock::inspect::{Contender, LeaderChange};
use zklock::{CancelToken, Error, LeaderElection, Wait};

use common::proxy::Proxy;
use common::servers;

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
        "worker_participant",
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
        let waited = tokio::time::timeout(Duration::from_millis(300), leaders.next_async()).await;
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
    let change = futures::executor::block_on(leaders.next_with_async(Wait::timeout(CHANGE_WITHIN)))
        .unwrap()
        .expect("a change");
    assert_eq!(owner(&change), Some("one"));
    futures::executor::block_on(one.unlock_async()).unwrap();
    assert_eq!(seen_on_tokio(), None);
    let change = futures::executor::block_on(leaders.next_async()).unwrap();
    assert_eq!(change.leader, None);
    rt.block_on(follower).unwrap();
}
