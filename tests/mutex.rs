//! Behaviour of `DistributedMutex` against a real ZooKeeper server.

mod common;

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use zklock::{Client, DistributedMutex, Error, LockGuard, LockState};

const CYCLES: usize = 10;

/// One critical section: record entry, read-modify-write a counter znode, record exit.
fn critical_section(client: &Client, counter: &str, log: &str, who: &str, inside: &AtomicUsize) {
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
        .map(|_| common::spawn_worker("worker_contend", &vars))
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
    let mut child = common::spawn_worker("worker_hold_forever", &[("LOCK", path.clone())]);
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
    // (tests/herd.rs checks that the watch this sets is removed before a normal release.)
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
