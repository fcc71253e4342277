//! A lock path whose child counter (`cversion`) has reached 2^31, on a real server: ZooKeeper
//! 3.8 stops numbering new nodes in order there (every one is `2147483647`, or negative when
//! creates are pipelined), so zklock must refuse to queue rather than let a contender think it
//! is first while another holds. Getting there through the API takes about a billion creates,
//! so the test edits the counter into a stopped server's snapshot (`common::snapshot`).

mod common;

use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::servers::PrivateServer;
use common::{Exclusion, RawClient};
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
