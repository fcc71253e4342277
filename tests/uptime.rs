//! Issue 10: a client stays usable for as long as its process runs. Its chroot survives the
//! container sweep (and is recreated if deleted anyway); a write whose reply was lost is found
//! out, never guessed; parents created on the way let other identities share them; timed
//! all-or-nothing calls keep the caller's deadline during an outage; a forked child gets a
//! clear error. Real servers and real faults (the loopback proxy) only.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::proxy::{opcode, Proxy, Request};
use common::servers::PrivateServer;
use common::RawClient;
use zklock::acl::NodeAcl;
use zklock::{Client, DistributedMutex, Error, MultiLock, Semaphore};

/// A chroot no other test (or earlier run) uses.
fn fresh_chroot() -> String {
    format!("/zklock-uptime-{}", uuid::Uuid::new_v4().simple())
}

fn chrooted_client(hosts: &str, chroot: &str) -> Client {
    common::client_at(&format!("{hosts}{chroot}"), Duration::from_secs(10))
}

/// Deletes a node tree (on the shared server) when dropped, whatever the test's outcome.
struct DeleteTree<'a>(&'a RawClient, String);

impl Drop for DeleteTree<'_> {
    fn drop(&mut self) {
        self.0.delete_tree(&self.1);
    }
}

#[test]
fn chroot_survives_the_container_sweep() {
    // The container sweep runs every second (the default is a minute), so that an idle chroot
    // would be reaped within seconds.
    let server = PrivateServer::start("-Dznode.container.checkIntervalMs=1000");
    let raw = RawClient::connect(&server.connect_string());
    let chroot = fresh_chroot();
    let client = chrooted_client(&server.connect_string(), &chroot);
    let mutex = DistributedMutex::new(&client, "/app/lock").unwrap();
    mutex.lock().unwrap().unlock().unwrap();

    // Idle: the sweep removes the empty lock path, then one level more each second.
    let lock_path = format!("{chroot}/app/lock");
    assert!(
        common::eventually(Duration::from_secs(15), || raw.stat(&lock_path).is_none()),
        "the container sweep never removed {lock_path}: is checkIntervalMs applied?"
    );
    thread::sleep(Duration::from_secs(4));
    // A chroot zklock creates is persistent: the sweep can never take it. (Checked after the
    // calls below, which must succeed either way.)
    let chroot_kept = raw.stat(&chroot).is_some();

    let guard = mutex.lock().expect("lock() after the container sweep");
    assert!(guard.is_held());
    let other = DistributedMutex::new(&client, "/app/other").unwrap();
    let other_guard = other
        .try_lock()
        .expect("try_lock() after the container sweep")
        .expect("nobody else uses /app/other");
    client
        .set_data("/state/counter", b"42")
        .expect("set_data() after the container sweep");
    assert_eq!(
        client.get_data("/state/counter").unwrap().as_deref(),
        Some(&b"42"[..])
    );
    guard.unlock().unwrap();
    other_guard.unlock().unwrap();

    assert!(
        chroot_kept,
        "the container sweep removed the chroot {chroot}: it must be a persistent node"
    );
    drop(client);
    drop(raw);
    drop(server); // Stops the server and removes its data: the chroot with it.
}

#[test]
fn chroot_deleted_by_hand_is_recreated() {
    let raw = RawClient::connect(&common::connect_string());
    let chroot = fresh_chroot();
    let _cleanup = DeleteTree(&raw, chroot.clone());
    let client = chrooted_client(&common::connect_string(), &chroot);
    let mutex = DistributedMutex::new(&client, "/app/lock").unwrap();
    mutex.lock().unwrap().unlock().unwrap();

    // An operator (or a sweep) removes the chroot with everything below it.
    raw.delete_tree(&chroot);
    assert!(raw.stat(&chroot).is_none());
    let guard = mutex
        .lock()
        .expect("lock() after the chroot was deleted by hand");
    assert!(guard.is_held());
    assert!(
        raw.stat(&format!("{chroot}{}", guard.node_path()))
            .is_some(),
        "the lock node is not under the chroot"
    );
    guard.unlock().unwrap();

    raw.delete_tree(&chroot);
    client
        .set_data("/state", b"after")
        .expect("set_data() after the chroot was deleted by hand");
    assert_eq!(
        client.get_data("/state").unwrap().as_deref(),
        Some(&b"after"[..])
    );

    raw.delete_tree(&chroot);
    let guard = mutex
        .try_lock()
        .expect("try_lock() after the chroot was deleted by hand")
        .expect("nobody else uses the lock");
    guard.unlock().unwrap();
    assert!(raw.stat(&chroot).is_some());
    drop(client);
}

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
        after[..listing].iter().any(
            |r| r.opcode == opcode::SYNC && r.path.as_deref().is_some_and(|p| covers(p, &path))
        ),
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

#[test]
fn creator_only_parents_let_other_identities_lock_siblings() {
    let root = common::lock_path("acl-scope");
    // The root exists and is open, as a shared root would be: otherwise alice, creating it,
    // would decide the ACL of /zklock-tests for every other test on this server.
    RawClient::connect(&common::connect_string()).mkdir_open(&root);
    let (alice, bob) = (
        common::client_as("alice", NodeAcl::CreatorOnly),
        common::client_as("bob", NodeAcl::CreatorOnly),
    );
    let (a, b) = (format!("{root}/shared/a"), format!("{root}/shared/b"));

    // alice creates <root>/shared on the way to her lock...
    let alice_a = DistributedMutex::new(&alice, &a).unwrap();
    let alice_guard = alice_a.lock().unwrap();
    // ...which must not keep bob from a lock next to hers.
    let bob_b = DistributedMutex::new(&bob, &b).unwrap();
    let bob_guard = bob_b
        .lock()
        .expect("bob locks a sibling of alice's lock under a parent alice created");
    assert!(bob_guard.is_held());

    // The lock paths and their nodes stay creator-only.
    let bob_a = DistributedMutex::new(&bob, &a).unwrap();
    let refused = bob_a.try_lock().map(|g| g.is_some());
    assert!(matches!(refused, Err(Error::NoAuth { .. })), "{refused:?}");
    let refused = bob_a.lock().map(|_| ());
    assert!(matches!(refused, Err(Error::NoAuth { .. })), "{refused:?}");
    let alice_b = DistributedMutex::new(&alice, &b).unwrap();
    let refused = alice_b.try_lock().map(|g| g.is_some());
    assert!(matches!(refused, Err(Error::NoAuth { .. })), "{refused:?}");
    assert!(alice_guard.is_held());
    assert_eq!(alice_a.contenders().unwrap().len(), 1, "node left behind");
    assert_eq!(bob_b.contenders().unwrap().len(), 1, "node left behind");
    alice_guard.unlock().unwrap();
    bob_guard.unlock().unwrap();
}

/// What a forked child reports, on fd 1 without taking Rust's stdout lock (another thread of
/// the parent may have held it at the fork). The leading newline ends the test harness's
/// unfinished "test worker_fork ... " line.
fn child_say(line: &str) {
    let line = format!("\n{line}\n");
    // SAFETY: writes a buffer we own to fd 1.
    unsafe { libc::write(1, line.as_ptr().cast(), line.len()) };
}

/// How long a call in a forked child may take: well under the session timeout (4 s) that a
/// call waiting for a dead runtime thread would take.
const PROMPT: Duration = Duration::from_secs(2);

/// Ends a forked child without running the parent's exit handlers or destructors.
fn child_exit(ok: bool) -> ! {
    // SAFETY: `_exit` is async-signal-safe and never returns.
    unsafe { libc::_exit(if ok { 0 } else { 1 }) }
}

/// In a forked child: dropping the client (and a mutex holding a clone of it) must return at
/// once without panicking.
fn child_drop_is_prompt(who: &str, client: Client, mutex: DistributedMutex) -> bool {
    let started = Instant::now();
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
        drop(mutex);
        drop(client);
    }));
    let took = started.elapsed();
    let ok = dropped.is_ok() && took < PROMPT;
    let shown = if dropped.is_ok() {
        "returned"
    } else {
        "panicked"
    };
    let flag = if ok {
        ""
    } else {
        "  <-- expected to return at once"
    };
    child_say(&format!("child[{who}] drop: {shown} after {took:?}{flag}"));
    ok
}

/// The forked child that calls: every call must fail with `Error::Forked` at once; then the
/// client is dropped.
fn child_calls(client: Client, mutex: DistributedMutex, path: &str) -> ! {
    let mut all_ok = true;
    let mut check = |what: &str, call: &mut dyn FnMut() -> Result<String, Error>| {
        let started = Instant::now();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(call));
        let took = started.elapsed();
        let ok = matches!(outcome, Ok(Err(Error::Forked))) && took < PROMPT;
        all_ok &= ok;
        let shown = match outcome {
            Ok(result) => format!("{result:?}"),
            Err(_) => "panicked".to_owned(),
        };
        let flag = if ok {
            ""
        } else {
            "  <-- expected Err(Forked) at once"
        };
        child_say(&format!(
            "child[calls] {what}: {shown} after {took:?}{flag}"
        ));
    };
    let data_path = format!("{path}-data");
    check("try_lock", &mut || {
        mutex.try_lock().map(|g| format!("{:?}", g.is_some()))
    });
    check("set_data", &mut || {
        client.set_data(&data_path, b"child").map(|()| "()".into())
    });
    check("get_data", &mut || {
        client.get_data(&data_path).map(|d| format!("{d:?}"))
    });
    check("lock", &mut || mutex.lock().map(|_| "guard".into()));
    // A client of the child's own works: it starts its own threads.
    let started = Instant::now();
    let fresh = std::panic::catch_unwind(|| {
        let fresh = Client::connect(&common::connect_string())?;
        let guard = DistributedMutex::new(&fresh, path)?.try_lock()?;
        let held = guard.as_ref().is_some_and(|g| g.is_held());
        if let Some(guard) = guard {
            guard.unlock()?;
        }
        fresh.close()?;
        Ok::<bool, Error>(held)
    });
    let took = started.elapsed();
    let fresh_ok = matches!(fresh, Ok(Ok(true)));
    child_say(&format!(
        "child[calls] a new client locks: {fresh:?} after {took:?}{}",
        if fresh_ok {
            ""
        } else {
            "  <-- expected Ok(true)"
        }
    ));
    let dropped = child_drop_is_prompt("calls", client, mutex);
    child_exit(all_ok && fresh_ok && dropped)
}

/// How the child `pid` ended, waiting until `deadline` (then it is killed as hung).
fn wait_child(pid: libc::pid_t, deadline: Instant) -> String {
    let mut status = 0;
    loop {
        // SAFETY: waits for our own child.
        let waited = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        assert!(waited >= 0, "waitpid failed");
        if waited == pid {
            break;
        }
        if Instant::now() >= deadline {
            // SAFETY: signals and reaps our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return "hung: killed".to_owned();
        }
        thread::sleep(Duration::from_millis(20));
    }
    if libc::WIFEXITED(status) {
        format!("exited with status {}", libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        format!("killed by signal {}", libc::WTERMSIG(status))
    } else {
        format!("ended with wait status {status:#x}")
    }
}

/// Forks two children of a process holding a connected client: one calls (then drops), the
/// other only drops the client. This process has no other test threads (see `spawn_worker`).
#[test]
#[ignore = "run as a child process by forked_child_gets_a_clear_error"]
fn worker_fork() {
    let path = std::env::var("LOCK").unwrap();
    let client = common::client();
    let mutex = DistributedMutex::new(&client, &path).unwrap();
    mutex.lock().unwrap().unlock().unwrap();
    let session = client.session_id();
    // SAFETY (both forks): the children only call into zklock (whose fork detection is under
    // test), write to fd 1 and `_exit`.
    let calls = unsafe { libc::fork() };
    assert!(calls >= 0, "fork failed");
    if calls == 0 {
        child_calls(client, mutex, &path);
    }
    let drops = unsafe { libc::fork() };
    assert!(drops >= 0, "fork failed");
    if drops == 0 {
        let dropped = child_drop_is_prompt("drop", client, mutex);
        child_exit(dropped);
    }
    // Calls that each wait for a session timeout (4 s) would still end before this.
    let deadline = Instant::now() + Duration::from_secs(15);
    println!("worker: calls child {}", wait_child(calls, deadline));
    println!("worker: drop child {}", wait_child(drops, deadline));
    // Whatever the children did, the parent's session is untouched.
    assert_eq!(client.session_id(), session, "parent's session replaced");
    let guard = mutex
        .try_lock()
        .unwrap()
        .expect("the parent can still lock");
    guard.unlock().unwrap();
    println!("worker: parent ok");
}

#[test]
fn forked_child_gets_a_clear_error() {
    let path = common::lock_path("fork");
    let worker = common::spawn_worker("worker_fork", &[("LOCK", path.clone())]);
    let output = worker.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("child[") || l.starts_with("worker: "))
        .collect();
    let report = report.join("\n");
    eprintln!("{report}");
    assert!(
        report.contains("worker: calls child exited with status 0"),
        "the forked child did not get Err(Forked) at once from every inherited call, or could not lock with a client of its own:\n{report}"
    );
    assert!(
        report.contains("worker: drop child exited with status 0"),
        "dropping the client in a forked child did not return at once:\n{report}"
    );
    assert!(
        output.status.success() && report.contains("worker: parent ok"),
        "the parent process suffered from its children:\n{report}"
    );
    let observer = common::client();
    assert_eq!(common::children_count(&observer, &path), 0);
    // Only a child whose set_data wrongly went through would have made this node.
    RawClient::connect(&common::connect_string()).delete_tree(&format!("{path}-data"));
}

/// Our call's time budget, and how far past it a call may still return: the withdrawal of a
/// queued node may take up to one second (see `DistributedMutex::lock_timeout`), plus slack
/// for a slow machine. Releasing what was already taken must not add a session timeout.
const TIMED_CALL: Duration = Duration::from_millis(1500);
const RETURN_WITHIN: Duration = Duration::from_millis(3500);

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
