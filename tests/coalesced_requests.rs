//! Lock-node creates and deletes of our own nodes coalesced into one `multi` each on a
//! real server: many locks on one client stay exclusive with tokens in order and
//! leave nothing behind, a coalesced create's token is its node's own czxid (before 3.9 the
//! server does not answer a multi's create with a stat: zklock makes it from the reply), and
//! every fallback gives each caller the outcome its own request would have had.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::Duration;

use common::proxy::{opcode, Proxy, Request};
use common::RawClient;
use zklock::client::SessionState;
use zklock::{DistributedMutex, Error};

/// Paths of lock nodes (below `root`) still on the server.
fn left_below(raw: &RawClient, root: &str) -> Vec<String> {
    let mut left = Vec::new();
    for lock in raw.children(root) {
        for node in raw.children(&format!("{root}/{lock}")) {
            left.push(format!("{root}/{lock}/{node}"));
        }
    }
    left
}

fn multis(requests: &[Request]) -> usize {
    requests
        .iter()
        .filter(|r| r.opcode == opcode::MULTI)
        .count()
}

fn is_create(op: i32) -> bool {
    op == opcode::CREATE || op == opcode::CREATE2
}

/// The lock-node creates of a multi: its create members whose path is `lock_path/<name>`.
fn creates_in(multi: &Request) -> impl Iterator<Item = &str> {
    multi
        .members
        .iter()
        .filter(|(op, _)| is_create(*op))
        .map(|(_, path)| path.as_str())
}

/// How many lock-node creates went out in multis; panics if a multi had two under one lock
/// path (they would share a czxid, and so a fencing token).
fn coalesced_creates(sent: &[Request]) -> usize {
    let mut coalesced = 0;
    for multi in sent.iter().filter(|r| r.opcode == opcode::MULTI) {
        let mut parents: Vec<&str> = creates_in(multi).map(parent).collect();
        coalesced += parents.len();
        parents.sort_unstable();
        let n = parents.len();
        parents.dedup();
        assert_eq!(
            parents.len(),
            n,
            "two creates under one lock path: {multi:?}"
        );
    }
    coalesced
}

/// How many listings went out in multiReads; panics unless each is a getChildren followed by
/// a getData of the same lock path (the stat a getChildren2 answers with).
fn bundled_listings(sent: &[Request]) -> usize {
    let mut listings = 0;
    for batch in sent.iter().filter(|r| r.opcode == opcode::MULTI_READ) {
        let mut ops = batch.members.iter().peekable();
        while let Some((op, path)) = ops.next() {
            if *op == opcode::GET_CHILDREN {
                assert_eq!(
                    ops.next(),
                    Some(&(opcode::GET_DATA, path.clone())),
                    "{batch:?}"
                );
                listings += 1;
            }
        }
    }
    listings
}

/// The lock path of a lock node's path.
fn parent(node: &str) -> &str {
    &node[..node.rfind('/').unwrap_or(0)]
}

/// 8 threads on one client cycle locks on 10,000 distinct paths (the per-entity
/// workload), each path taken by two threads in turn: never two holders of one path, every
/// path's fencing tokens strictly increasing, nothing left, and the releases did go out
/// coalesced.
#[test]
fn eight_threads_on_many_paths_stay_exclusive_with_tokens_in_order() {
    const PATHS: usize = 10_000;
    const PASSES: usize = 1;
    const THREADS: usize = 8;
    let proxy = Proxy::start(&common::connect_string());
    proxy.record_requests(true);
    let client = common::client_via(&proxy, common::SESSION_TIMEOUT);
    let root = common::lock_path("coalesced-many");
    let paths: Vec<String> = (0..PATHS).map(|i| format!("{root}/l{i}")).collect();
    let holders: Vec<AtomicUsize> = (0..PATHS).map(|_| AtomicUsize::new(0)).collect();
    let overlaps = AtomicUsize::new(0);
    let tokens: Mutex<HashMap<usize, Vec<(u64, zklock::FencingToken)>>> = Mutex::default();
    let clock = AtomicUsize::new(0);
    thread::scope(|s| {
        for t in 0..THREADS {
            let (client, paths, holders, overlaps, tokens, clock) =
                (&client, &paths, &holders, &overlaps, &tokens, &clock);
            s.spawn(move || {
                for pass in 0..PASSES {
                    // Threads t and t+4 share every path they touch: each path is contended.
                    for i in ((t % 4)..PATHS).step_by(4) {
                        let _ = pass;
                        let mutex = DistributedMutex::new(client, &paths[i]).unwrap();
                        let guard = mutex.lock().unwrap();
                        if holders[i].fetch_add(1, Ordering::SeqCst) != 0 {
                            overlaps.fetch_add(1, Ordering::SeqCst);
                        }
                        let at = clock.fetch_add(1, Ordering::SeqCst) as u64;
                        tokens
                            .lock()
                            .unwrap()
                            .entry(i)
                            .or_default()
                            .push((at, guard.fencing()));
                        holders[i].fetch_sub(1, Ordering::SeqCst);
                        guard.unlock().unwrap();
                    }
                }
            });
        }
    });
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "two holders of one path"
    );
    for (path, mut seen) in tokens.into_inner().unwrap() {
        assert_eq!(seen.len(), 2 * PASSES, "{path}: 2 threads a pass");
        seen.sort_by_key(|(at, _)| *at);
        for pair in seen.windows(2) {
            assert!(
                pair[0].1 < pair[1].1,
                "path {path}: token {:?} then {:?}",
                pair[0].1,
                pair[1].1
            );
        }
    }
    let raw = RawClient::connect(&common::connect_string());
    assert_eq!(left_below(&raw, &root), Vec::<String>::new(), "nodes left");
    let sent = proxy.requests();
    assert!(
        multis(&sent) > 0,
        "no release went out in a multi: {} deletes alone",
        sent.iter().filter(|r| r.opcode == opcode::DELETE).count()
    );
    coalesced_creates(&sent);
    assert!(
        bundled_listings(&sent) > 0,
        "no listing went out in a multiRead"
    );
    client.close().unwrap();
}

/// A client through a new proxy, coalescing its requests or not.
fn client_via_proxy(coalesce: bool) -> (Proxy, zklock::Client) {
    let proxy = Proxy::start(&common::connect_string());
    let client = common::builder(&proxy.connect_string(), common::SESSION_TIMEOUT)
        .coalesce_requests(coalesce)
        .connect()
        .unwrap();
    (proxy, client)
}

/// The kind of an error, its variant's name: its paths differ from run to run.
fn kind(e: &Error) -> String {
    let e = format!("{e:?}");
    e.split([' ', '{', '('])
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// Whether a request one by one (`alone`) followed the first multi `in_multi` picks out: the
/// multi failed and fell back.
fn fell_back(
    sent: &[Request],
    in_multi: impl Fn(&Request) -> bool,
    alone: impl Fn(&Request) -> bool,
) -> bool {
    sent.iter()
        .position(in_multi)
        .is_some_and(|at| sent[at..].iter().any(alone))
}

/// How holder 0's release is spoiled, on the lock path `lock` of a round (holder 0's node is
/// `node` once it holds it).
#[derive(Clone, Copy)]
enum Spoil {
    /// An operator deletes holder 0's node before the releases.
    Deleted,
    /// Holder 0's lock path allows creating children but not deleting them.
    NoDelete,
}

/// What each of `n` holders' concurrent `unlock` gives when holder 0's delete is spoiled; and
/// whether the proxy saw a multi fail over to deletes one by one. Each round uses lock paths
/// of its own, until one put holder 0's delete in a multi (with `coalesce`).
fn release_spoiled(spoil: Spoil, coalesce: bool, n: usize) -> (Vec<Result<(), String>>, bool) {
    let (proxy, client) = client_via_proxy(coalesce);
    let root = common::lock_path("coalesced-spoiled");
    let raw = RawClient::connect(&common::connect_string());
    for round in 0..10 {
        let dir = format!("{root}/r{round}");
        raw.mkdir_open(&dir);
        if let Spoil::NoDelete = spoil {
            // READ | CREATE: the lock node can be made, not deleted.
            raw.create_persistent_for_anyone(&format!("{dir}/l0"), 1 | 4);
        }
        let guards: Vec<_> = (0..n)
            .map(|i| {
                DistributedMutex::new(&client, &format!("{dir}/l{i}"))
                    .unwrap()
                    .lock()
                    .unwrap()
            })
            .collect();
        let spoiled = guards[0].node_path().to_owned();
        if let Spoil::Deleted = spoil {
            raw.delete_back_to_back(&[spoiled.as_str()]);
        }
        proxy.clear_requests();
        proxy.record_requests(true);
        let start = Barrier::new(n);
        let outcomes: Vec<Result<(), String>> = thread::scope(|s| {
            let handles: Vec<_> = guards
                .into_iter()
                .map(|g| {
                    let start = &start;
                    s.spawn(move || {
                        start.wait();
                        g.unlock().map_err(|e| kind(&e))
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        proxy.record_requests(false);
        let mut left = left_below(&raw, &dir);
        left.retain(|node| *node != spoiled);
        assert_eq!(left, Vec::<String>::new(), "nodes left");
        let sent = proxy.requests();
        // A multi that failed is followed by the deletes of its members, one by one.
        let fell_back = fell_back(
            &sent,
            |r| r.opcode == opcode::MULTI,
            |r| r.opcode == opcode::DELETE && r.path.as_deref() == Some(&spoiled),
        );
        if fell_back || !coalesce {
            client.close().unwrap();
            return (outcomes, fell_back);
        }
    }
    panic!("no round put the spoiled release in a multi");
}

/// A node deleted by an operator before our coalesced delete: the multi fails as a whole, its
/// deletes go out again one by one, the operator's victim gets what its own delete gives
/// without coalescing, and every other release succeeds.
#[test]
fn a_node_deleted_by_an_operator_fails_only_its_own_release() {
    let (alone, _) = release_spoiled(Spoil::Deleted, false, 1);
    let (outcomes, fell_back) = release_spoiled(Spoil::Deleted, true, 12);
    assert!(fell_back);
    assert_eq!(outcomes[0], alone[0], "the victim's outcome");
    for (i, outcome) in outcomes.iter().enumerate().skip(1) {
        assert_eq!(outcome, &Ok(()), "release {i}");
    }
}

/// An ACL refusal in a batch: only the refused release reports it, as it would alone; the
/// others' nodes are gone.
#[test]
fn an_acl_refusal_in_a_batch_is_reported_to_its_caller_only() {
    let (alone, _) = release_spoiled(Spoil::NoDelete, false, 1);
    assert!(alone[0].is_err(), "{alone:?}");
    let (outcomes, fell_back) = release_spoiled(Spoil::NoDelete, true, 12);
    assert!(fell_back);
    assert_eq!(outcomes[0], alone[0], "the refused release's outcome");
    for (i, outcome) in outcomes.iter().enumerate().skip(1) {
        assert_eq!(outcome, &Ok(()), "release {i}");
    }
}

/// The connection cut while releases are in flight (coalesced or waiting to be): every node is
/// gone once the client reconnects, none twice deleted in error, the client goes on.
#[test]
fn releases_cut_off_in_flight_leave_nothing_behind() {
    let proxy = Proxy::start(&common::connect_string());
    proxy.record_requests(true);
    let client = common::client_via(&proxy, Duration::from_secs(6));
    let root = common::lock_path("coalesced-cut");
    let raw = RawClient::connect(&common::connect_string());
    for round in 0..5 {
        let guards: Vec<_> = (0..16)
            .map(|i| {
                DistributedMutex::new(&client, &format!("{root}/l{i}"))
                    .unwrap()
                    .lock()
                    .unwrap()
            })
            .collect();
        let start = Barrier::new(17);
        thread::scope(|s| {
            for g in guards {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    // Connection loss: OutcomeUnknown, then retried in the background.
                    match g.unlock() {
                        Ok(()) | Err(Error::OutcomeUnknown { .. }) => {}
                        Err(other) => panic!("round {round}: {other:?}"),
                    }
                });
            }
            start.wait();
            thread::sleep(Duration::from_micros(300 * round));
            proxy.sever();
        });
        assert!(
            common::eventually(Duration::from_secs(10), || left_below(&raw, &root)
                .is_empty()),
            "round {round}: left {:?}",
            left_below(&raw, &root)
        );
    }
    assert!(multis(&proxy.requests()) > 0, "no multi was ever sent");
    // The client still works.
    DistributedMutex::new(&client, &format!("{root}/after"))
        .unwrap()
        .lock()
        .unwrap()
        .unlock()
        .unwrap();
    client.close().unwrap();
}

/// A server restart while releases wait and go out coalesced: the session survives, every
/// release ends with the node gone (confirmed, or retried in the background), and nothing is
/// left.
#[test]
fn a_server_restart_mid_batch_leaves_nothing_behind() {
    let server = common::servers::PrivateServer::start("");
    let client = common::client_at(&server.connect_string(), Duration::from_secs(30));
    let root = common::lock_path("coalesced-restart");
    let guards: Vec<_> = (0..24)
        .map(|i| {
            DistributedMutex::new(&client, &format!("{root}/l{i}"))
                .unwrap()
                .lock()
                .unwrap()
        })
        .collect();
    let session = client.session_id();
    let start = Barrier::new(25);
    thread::scope(|s| {
        for g in guards {
            let start = &start;
            s.spawn(move || {
                start.wait();
                match g.unlock() {
                    Ok(()) | Err(Error::OutcomeUnknown { .. }) => {}
                    Err(other) => panic!("{other:?}"),
                }
            });
        }
        start.wait();
        server.stop_keeping_data();
    });
    server.start_again();
    let raw = RawClient::connect(&server.connect_string());
    assert!(
        common::eventually(Duration::from_secs(30), || left_below(&raw, &root)
            .is_empty()),
        "left {:?}",
        left_below(&raw, &root)
    );
    assert!(
        common::eventually(Duration::from_secs(30), || client.state()
            == zklock::client::SessionState::Connected),
        "the client did not reconnect: {:?}",
        client.state()
    );
    assert_eq!(client.session_id(), session, "the session survived");
    DistributedMutex::new(&client, &format!("{root}/after"))
        .unwrap()
        .lock()
        .unwrap()
        .unlock()
        .unwrap();
    client.close().unwrap();
}

/// Locks and releases every path once, one at a time, so the client has seen them all exist.
fn warm(client: &zklock::Client, paths: &[String]) {
    for path in paths {
        DistributedMutex::new(client, path)
            .unwrap()
            .lock()
            .unwrap()
            .unlock()
            .unwrap();
    }
}

/// 8 threads on one client lock 200 paths that exist: the creates go out in multis, never two
/// under one lock path in one multi, and each holder's fencing token is its node's own
/// creation zxid and its lock path's creation time, as the server shows them.
#[test]
fn coalesced_creates_give_each_holder_its_own_nodes_token() {
    const PATHS: usize = 200;
    const THREADS: usize = 8;
    let proxy = Proxy::start(&common::connect_string());
    let client = common::client_via(&proxy, common::SESSION_TIMEOUT);
    let root = common::lock_path("coalesced-creates");
    let paths: Vec<String> = (0..PATHS).map(|i| format!("{root}/l{i}")).collect();
    warm(&client, &paths);
    let raw = RawClient::connect(&common::connect_string());
    proxy.record_requests(true);
    let mismatches: Mutex<Vec<String>> = Mutex::default();
    let checked = AtomicUsize::new(0);
    thread::scope(|s| {
        for t in 0..THREADS {
            let (client, paths, raw, mismatches, checked) =
                (&client, &paths, &raw, &mismatches, &checked);
            s.spawn(move || {
                for _pass in 0..3 {
                    for path in paths.iter().skip(t).step_by(THREADS) {
                        let guard = DistributedMutex::new(client, path).unwrap().lock().unwrap();
                        let token = guard.fencing();
                        let node = raw.stat(guard.node_path()).expect("our node");
                        let lock_path = raw.stat(path).expect("the lock path");
                        if (token.zxid(), token.generation()) != (node.czxid, lock_path.ctime) {
                            mismatches.lock().unwrap().push(format!(
                                "{}: token {token:?}, node czxid {}, lock path ctime {}",
                                guard.node_path(),
                                node.czxid,
                                lock_path.ctime
                            ));
                        }
                        checked.fetch_add(1, Ordering::SeqCst);
                        guard.unlock().unwrap();
                    }
                }
            });
        }
    });
    proxy.record_requests(false);
    assert_eq!(checked.load(Ordering::SeqCst), PATHS * 3);
    assert_eq!(mismatches.into_inner().unwrap(), Vec::<String>::new());
    let sent = proxy.requests();
    assert!(
        coalesced_creates(&sent) > 0,
        "no create went out in a multi ({} multis)",
        multis(&sent)
    );
    // The lock path's stat, hence the token's generation, then came from the getData that
    // follows each listing in the multiRead.
    assert!(
        bundled_listings(&sent) > 0,
        "no listing went out in a multiRead"
    );
    assert_eq!(left_below(&raw, &root), Vec::<String>::new(), "nodes left");
    client.close().unwrap();
}

/// How holder 0's create is spoiled on its lock path `l0`, which the client has seen exist.
#[derive(Clone, Copy)]
enum SpoilCreate {
    /// An operator deletes the lock path before the creates.
    PathDeleted,
    /// The lock path allows reading and deleting children, not creating them.
    NoCreate,
}

/// What each of `n` concurrent `lock` calls on paths `l0..ln` gives when holder 0's create is
/// spoiled (the kind of error, or `Ok` once it held), and whether the proxy saw a multi with
/// that create fail over to requests one by one. Each round uses lock paths of its own, until
/// one put holder 0's create in a multi (with `coalesce`).
fn lock_spoiled(spoil: SpoilCreate, coalesce: bool, n: usize) -> (Vec<Result<(), String>>, bool) {
    let (proxy, client) = client_via_proxy(coalesce);
    let root = common::lock_path("coalesced-spoiled-create");
    let raw = RawClient::connect(&common::connect_string());
    for round in 0..10 {
        let dir = format!("{root}/r{round}");
        raw.mkdir_open(&dir);
        let paths: Vec<String> = (0..n).map(|i| format!("{dir}/l{i}")).collect();
        // Persistent, so that no container sweep takes a lock path away meanwhile.
        for path in &paths {
            raw.create_persistent(path);
        }
        warm(&client, &paths);
        match spoil {
            SpoilCreate::PathDeleted => raw.delete_tree(&paths[0]),
            SpoilCreate::NoCreate => raw.set_acl_for_anyone(&paths[0], 1 | 8), // READ | DELETE
        }
        proxy.clear_requests();
        proxy.record_requests(true);
        let start = Barrier::new(n);
        let all_done = Barrier::new(n);
        let outcomes: Vec<Result<(), String>> = thread::scope(|s| {
            let all_done = &all_done;
            let handles: Vec<_> = paths
                .iter()
                .map(|path| {
                    let (start, client) = (&start, &client);
                    s.spawn(move || {
                        let mutex = DistributedMutex::new(client, path).unwrap();
                        start.wait();
                        let outcome = match mutex.lock_timeout(Duration::from_secs(20)) {
                            Ok(Some(guard)) => Ok(guard),
                            Ok(None) => Err("Timeout".to_owned()),
                            Err(e) => Err(kind(&e)),
                        };
                        // All hold at once (or failed) before any release.
                        all_done.wait();
                        outcome.map(|guard| guard.unlock().unwrap())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        proxy.record_requests(false);
        assert_eq!(left_below(&raw, &dir), Vec::<String>::new(), "nodes left");
        let sent = proxy.requests();
        let victim = format!("{}/", paths[0]);
        // A multi with holder 0's create in it, then that create again on its own.
        let fell_back = fell_back(
            &sent,
            |r| creates_in(r).any(|p| p.starts_with(&victim)),
            |r| is_create(r.opcode) && r.path.as_deref().is_some_and(|p| p.starts_with(&victim)),
        );
        if fell_back || !coalesce {
            client.close().unwrap();
            return (outcomes, fell_back);
        }
    }
    panic!("no round put the spoiled create in a multi");
}

/// A lock path deleted by an operator between two cycles, while the client knew it existed:
/// the multi with its create fails as a whole, its creates go out again one by one, the
/// missing lock path is made again, and every caller holds.
#[test]
fn a_lock_path_deleted_between_cycles_is_made_again_and_every_caller_holds() {
    let (outcomes, fell_back) = lock_spoiled(SpoilCreate::PathDeleted, true, 12);
    assert!(fell_back);
    for (i, outcome) in outcomes.iter().enumerate() {
        assert_eq!(outcome, &Ok(()), "lock {i}");
    }
}

/// An ACL refusal of one create in a batch: only its caller gets the refusal, as it would
/// alone; every other caller holds.
#[test]
fn an_acl_refusal_of_a_create_in_a_batch_is_reported_to_its_caller_only() {
    let (alone, _) = lock_spoiled(SpoilCreate::NoCreate, false, 1);
    assert_eq!(alone[0], Err("NoAuth".to_owned()), "{alone:?}");
    let (outcomes, fell_back) = lock_spoiled(SpoilCreate::NoCreate, true, 12);
    assert!(fell_back);
    assert_eq!(outcomes[0], alone[0], "the refused create's outcome");
    for (i, outcome) in outcomes.iter().enumerate().skip(1) {
        assert_eq!(outcome, &Ok(()), "lock {i}");
    }
}

/// The connection cut while creates are in flight (coalesced or waiting to be): every caller
/// holds once the client reconnects, with one node each (a lost create is found again, never
/// made twice), and nothing is left after the releases.
#[test]
fn creates_cut_off_in_flight_are_never_made_twice() {
    const N: usize = 16;
    let proxy = Proxy::start(&common::connect_string());
    let client = common::client_via(&proxy, Duration::from_secs(6));
    let root = common::lock_path("coalesced-cut-create");
    let paths: Vec<String> = (0..N).map(|i| format!("{root}/l{i}")).collect();
    let raw = RawClient::connect(&common::connect_string());
    for path in &paths {
        raw.mkdir_open(path);
    }
    warm(&client, &paths);
    proxy.record_requests(true);
    for round in 0..5u64 {
        let start = Barrier::new(N + 1);
        let holding = Barrier::new(N + 1);
        let checked = Barrier::new(N + 1);
        thread::scope(|s| {
            for path in &paths {
                let (start, holding, checked, client) = (&start, &holding, &checked, &client);
                s.spawn(move || {
                    let mutex = DistributedMutex::new(client, path).unwrap();
                    start.wait();
                    let guard = mutex.lock_timeout(Duration::from_secs(20));
                    holding.wait();
                    checked.wait();
                    match guard {
                        Ok(Some(guard)) => guard.unlock().unwrap(),
                        other => panic!("round {round}: {path}: {other:?}"),
                    }
                });
            }
            start.wait();
            thread::sleep(Duration::from_micros(200 * round));
            proxy.sever();
            holding.wait();
            // Not asserted here: the holders wait for this thread at `checked`.
            let doubles: Vec<Vec<String>> = paths
                .iter()
                .map(|path| raw.children(path))
                .filter(|nodes| nodes.len() != 1)
                .collect();
            // Cut after every create was answered (a slow scheduler can delay this thread
            // that long), the holders would unlock while the client reconnects, and `unlock`
            // reports OutcomeUnknown at once when the connection is known to be down.
            let back = common::eventually(Duration::from_secs(10), || {
                client.state() == SessionState::Connected
            });
            checked.wait();
            assert!(back, "round {round}: not reconnected: {:?}", client.state());
            assert_eq!(doubles, Vec::<Vec<String>>::new(), "round {round}");
        });
        assert!(
            common::eventually(Duration::from_secs(10), || left_below(&raw, &root)
                .is_empty()),
            "round {round}: left {:?}",
            left_below(&raw, &root)
        );
    }
    let sent = proxy.requests();
    assert!(
        sent.iter().any(|r| creates_in(r).count() > 1),
        "no creates were ever coalesced"
    );
    client.close().unwrap();
}

/// 16 threads of one client lock one path at once, ten rounds: their creates wait together for
/// the connection, yet never two go out in one multi (they would share a czxid), and the
/// holders' fencing tokens strictly increase in the order they held.
#[test]
fn creates_on_one_lock_path_never_share_a_multi() {
    const THREADS: usize = 16;
    let proxy = Proxy::start(&common::connect_string());
    let client = common::client_via(&proxy, common::SESSION_TIMEOUT);
    let path = common::lock_path("coalesced-one-path");
    warm(&client, std::slice::from_ref(&path));
    proxy.record_requests(true);
    let held: Mutex<Vec<zklock::FencingToken>> = Mutex::default();
    for _round in 0..10 {
        let start = Barrier::new(THREADS);
        thread::scope(|s| {
            for _ in 0..THREADS {
                let (start, client, path, held) = (&start, &client, &path, &held);
                s.spawn(move || {
                    let mutex = DistributedMutex::new(client, path).unwrap();
                    start.wait();
                    let guard = mutex.lock().unwrap();
                    held.lock().unwrap().push(guard.fencing());
                    guard.unlock().unwrap();
                });
            }
        });
    }
    proxy.record_requests(false);
    let held = held.into_inner().unwrap();
    assert_eq!(held.len(), THREADS * 10);
    for pair in held.windows(2) {
        assert!(pair[0] < pair[1], "token {:?} then {:?}", pair[0], pair[1]);
    }
    coalesced_creates(&proxy.requests());
    let raw = RawClient::connect(&common::connect_string());
    assert_eq!(raw.children(&path), Vec::<String>::new(), "nodes left");
    client.close().unwrap();
}
