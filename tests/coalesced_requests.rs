//! Deletes of our own nodes coalesced into one `multi` (issue 35, item 2) on a real server:
//! many locks on one client stay exclusive with tokens in order and leave nothing behind, and
//! every fallback gives each release the outcome its own delete would have had.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::Duration;

use common::proxy::{opcode, Proxy, Request};
use common::RawClient;
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

/// 8 threads on one client cycle locks on 400 distinct paths, three passes, each path taken by
/// two threads in turn per pass: never two holders of one path, every path's fencing tokens
/// strictly increasing, nothing left, and the releases did go out coalesced.
#[test]
fn eight_threads_on_many_paths_stay_exclusive_with_tokens_in_order() {
    const PATHS: usize = 400;
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
                for pass in 0..3 {
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
        assert_eq!(seen.len(), 6, "{path}: 2 threads × 3 passes");
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
    client.close().unwrap();
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
    let proxy = Proxy::start(&common::connect_string());
    let client = common::builder(&proxy.connect_string(), common::SESSION_TIMEOUT)
        .coalesce_requests(coalesce)
        .connect()
        .unwrap();
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
                        // The kind of error: its paths differ from run to run.
                        g.unlock().map_err(|e| {
                            let e = format!("{e:?}");
                            e.split([' ', '{', '('])
                                .next()
                                .unwrap_or_default()
                                .to_owned()
                        })
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
        let fell_back = sent
            .iter()
            .position(|r| r.opcode == opcode::MULTI)
            .is_some_and(|at| {
                sent[at..]
                    .iter()
                    .any(|r| r.opcode == opcode::DELETE && r.path.as_deref() == Some(&spoiled))
            });
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
