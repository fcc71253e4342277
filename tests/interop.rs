//! Cross-library interop: zklock against the real Apache Curator on the same lock paths.
//!
//! Each Curator side is a separate JVM running `tests/interop/CuratorPeer.java` (compiled here
//! with `javac`, once per test binary and Curator version), driven line by line: it prints
//! `ACQUIRED <node>` (or `LEADER`, `TIMEOUT`, ...) and holds until it reads `RELEASE`.
//!
//! Which Curator: `ZK_CURATOR` (5.9.0, 5.4.0 or 2.13.0), else the one that goes with the
//! server release `ZK_VERSION` (3.9.5: 5.9.0, the default; 3.8.0/debian: 5.4.0; 3.6.3: 2.13.0).
//! `scripts/zk-jars.sh --curator V` names the jars: Debian's packages (`libcurator-recipes-java`
//! and friends, in `/usr/share/java`) for 5.4.0, Apache's jars out of the pinned `pyspark`
//! sdists for the others. Without `java` or `javac` the tests print why and pass without
//! checking anything (they fail under `CI=true`).

mod common;

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use zklock::inspect::Role;
use zklock::{Client, DistributedMutex, DistributedRwLock, LeaderElection, Semaphore};

/// Jars of the Debian packages the peer needs with Curator 5.4.0, in `/usr/share/java`.
const DEBIAN_JARS: &[&str] = &[
    "curator-recipes",
    "curator-framework",
    "curator-client",
    "guava",
    "zookeeper",
    "zookeeper-jute",
    "slf4j-api",
    "slf4j-nop",
];
const DEBIAN_JAR_DIR: &str = "/usr/share/java";
const PEER_SOURCE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/interop/CuratorPeer.java"
);

/// How long a peer may take to start a JVM, connect and answer.
const PEER_WAIT: Duration = Duration::from_secs(30);
/// How long zklock waits where it must not get anything.
const SHORT: Duration = Duration::from_millis(300);
/// How long a waiter that must stay blocked is watched.
const QUIET: Duration = Duration::from_millis(500);
/// Upper bound for anything that must happen.
const LONG: Duration = Duration::from_secs(20);

/// The classpath to run the compiled peer with.
struct Java {
    classpath: String,
}

/// The Curator version of this run: `ZK_CURATOR`, else the one of `ZK_VERSION`'s jars.
fn curator_version() -> String {
    if let Ok(v) = std::env::var("ZK_CURATOR") {
        return v;
    }
    match std::env::var("ZK_VERSION").as_deref() {
        Ok("3.6.3") => "2.13.0",
        Ok("debian" | "3.8.0") => "5.4.0",
        _ => "5.9.0",
    }
    .to_owned()
}

/// The jars of Curator `version` and its ZooKeeper client, as class path entries, from
/// `scripts/zk-jars.sh` (which fetches them once). Each must be there: a missing one is a
/// broken set-up, not a reason to skip.
fn curator_jars(version: &str) -> Vec<PathBuf> {
    let out = Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/zk-jars.sh"))
        .args(["--curator", version])
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/zk-jars.sh");
    assert!(
        out.status.success(),
        "scripts/zk-jars.sh --curator {version} failed"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let dir = PathBuf::from(stdout.lines().next().expect("a jar dir").trim());
    let names: Vec<String> = if dir == Path::new(DEBIAN_JAR_DIR) {
        DEBIAN_JARS.iter().map(|j| format!("{j}.jar")).collect()
    } else {
        // Apache's jars carry their versions; slf4j binds to the log4j 2 that comes with them.
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".jar"))
            .collect();
        names.sort();
        names
    };
    let recipes = if dir == Path::new(DEBIAN_JAR_DIR) {
        "curator-recipes.jar".to_owned()
    } else {
        format!("curator-recipes-{version}.jar")
    };
    assert!(
        names.contains(&recipes),
        "{} holds no {recipes}: not Curator {version}",
        dir.display()
    );
    names.into_iter().map(|n| dir.join(n)).collect()
}

/// Compiles the peer once per test binary; `Err` (the reason to skip) only if Java is missing.
/// Missing jars or a peer that does not compile are failures, not skips.
fn java() -> Result<&'static Java, &'static str> {
    static JAVA: OnceLock<Result<Java, String>> = OnceLock::new();
    JAVA.get_or_init(setup_java)
        .as_ref()
        .map_err(String::as_str)
}

fn tool_works(tool: &str) -> bool {
    Command::new(tool)
        .arg("-version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn setup_java() -> Result<Java, String> {
    let missing: Vec<String> = ["java", "javac"]
        .into_iter()
        .filter(|tool| !tool_works(tool))
        .map(|tool| format!("`{tool}` (openjdk-17-jdk-headless)"))
        .collect();
    if !missing.is_empty() {
        return Err(format!("missing {}", missing.join(", ")));
    }
    let version = curator_version();
    let jars = curator_jars(&version);
    eprintln!("interop: Curator {version}");
    // With Java present, missing Curator jars are a broken set-up, not a reason to skip.
    let absent: Vec<String> = jars
        .iter()
        .filter(|j| !j.is_file())
        .map(|j| j.display().to_string())
        .collect();
    assert!(
        absent.is_empty(),
        "Java is installed but Curator's jars are not: {} (Debian: libcurator-recipes-java \
         libzookeeper-java libguava-java libslf4j-java; .ci/run installs them)",
        absent.join(", ")
    );
    let jar_cp = jars
        .iter()
        .map(|j| j.display().to_string())
        .collect::<Vec<_>>()
        .join(":");

    // Build into a directory named after the source, so runs share one build and a changed
    // peer gets a fresh one; a rename makes concurrent builds harmless.
    let source = std::fs::read_to_string(PEER_SOURCE).expect("read CuratorPeer.java");
    let mut hasher = DefaultHasher::new();
    (&source, &jar_cp).hash(&mut hasher);
    let build = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("curator-peer-{:016x}", hasher.finish()));
    if !build.join("CuratorPeer.class").is_file() {
        let scratch = build.with_extension(format!("tmp{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&scratch);
        std::fs::create_dir_all(&scratch).unwrap();
        let out = Command::new("javac")
            .args(["-Xlint:all,-path", "-Werror", "-d"])
            .arg(&scratch)
            .args(["-cp", &jar_cp, PEER_SOURCE])
            .output()
            .expect("run javac");
        assert!(
            out.status.success(),
            "javac CuratorPeer.java failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if std::fs::rename(&scratch, &build).is_err() {
            // Another test binary finished the same build first.
            let _ = std::fs::remove_dir_all(&scratch);
        }
    }
    Ok(Java {
        classpath: format!("{jar_cp}:{}", build.display()),
    })
}

/// The peer's classpath, or return from the test with a message saying why it is skipped
/// (a failure under `CI=true`: see [`common::skip_unless_ci`]).
macro_rules! java_or_skip {
    () => {
        match java() {
            Ok(java) => java,
            Err(why) => {
                common::skip_unless_ci(
                    &common::test_name(),
                    &format!(
                        "Curator interop needs Java: {why} (Debian: openjdk-17-jdk-headless \
                         libcurator-recipes-java libzookeeper-java libslf4j-java)"
                    ),
                );
                return;
            }
        }
    };
}

/// One running `CuratorPeer`. Dropping it closes its stdin (a peer that holds releases and
/// exits, one that waits leaves within 3 s), then kills and reaps it if it is still there.
struct Peer {
    what: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
}

impl Peer {
    fn start(java: &Java, command: &str, path: &str, args: &[&str]) -> Peer {
        let connect = common::connect_string();
        let what = format!("CuratorPeer {command} {path} {}", args.join(" "));
        let mut child = Command::new("java")
            .args([
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                "-cp",
                &java.classpath,
                "CuratorPeer",
                command,
                &connect,
                path,
            ])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {what}: {e}"));
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let (mut err, sink) = (child.stderr.take().unwrap(), stderr.clone());
        thread::spawn(move || {
            let mut buf = [0; 4096];
            while let Ok(n @ 1..) = err.read(&mut buf) {
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Peer {
            what,
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits for the next line, which must be `word` (optionally followed by a space and more):
    /// returns the rest.
    fn expect(&self, word: &str) -> String {
        self.expect_within(word, PEER_WAIT)
    }

    fn expect_within(&self, word: &str, limit: Duration) -> String {
        match self.lines.recv_timeout(limit) {
            Ok(line) if line == word => String::new(),
            Ok(line) => match line.strip_prefix(word).and_then(|r| r.strip_prefix(' ')) {
                Some(rest) => rest.to_owned(),
                None => panic!(
                    "{}: expected {word}, got {line:?}; stderr:\n{}",
                    self.what,
                    self.stderr()
                ),
            },
            Err(err) => panic!(
                "{}: no {word} within {limit:?} ({err}); stderr:\n{}",
                self.what,
                self.stderr()
            ),
        }
    }

    /// Asserts that the peer says nothing for `period` (it is still blocked).
    fn stays_quiet(&self, period: Duration) {
        match self.lines.recv_timeout(period) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(line) => panic!("{}: expected to stay blocked, said {line:?}", self.what),
            Err(RecvTimeoutError::Disconnected) => {
                panic!("{}: exited early; stderr:\n{}", self.what, self.stderr())
            }
        }
    }

    /// Sends RELEASE, waits for RELEASED and a clean exit.
    fn release(&mut self) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(b"RELEASE\n").unwrap();
        stdin.flush().unwrap();
        self.expect("RELEASED");
        self.exits_cleanly();
    }

    /// Waits for the peer to exit 0 on its own.
    fn exits_cleanly(&mut self) {
        let deadline = Instant::now() + PEER_WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(
                    status.success(),
                    "{}: {status}; stderr:\n{}",
                    self.what,
                    self.stderr()
                );
                return;
            }
            assert!(Instant::now() < deadline, "{}: did not exit", self.what);
            thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The last segment of a node path.
fn name_of(node: &str) -> &str {
    node.rsplit('/').next().unwrap()
}

/// A second zklock session, as another process would have.
fn other_client() -> Client {
    common::client()
}

/// Runs `hold` on a thread of `scope`: it takes something that blocks, reports on the returned
/// channel once it holds (with the fencing token) and holds until `go` says so.
fn waiter<'scope, F>(
    scope: &'scope thread::Scope<'scope, '_>,
    acquire: F,
) -> (Receiver<i64>, mpsc::Sender<()>)
where
    F: FnOnce(&mpsc::Sender<i64>, &Receiver<()>) + Send + 'scope,
{
    let (held_tx, held_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel();
    scope.spawn(move || acquire(&held_tx, &go_rx));
    (held_rx, go_tx)
}

#[test]
fn mutex_excludes_curator_both_ways() {
    let java = java_or_skip!();
    let client = common::client();
    let path = common::lock_path("interop-mutex");
    let mutex = DistributedMutex::new(&client, &path).unwrap();

    // Curator holds: zklock can neither take nor wait its way in.
    let mut curator = Peer::start(java, "mutex", &path, &[]);
    let node = curator.expect("ACQUIRED");
    assert!(node.starts_with(&format!("{path}/_c_")), "{node}");
    assert!(name_of(&node).contains("-lock-"), "{node}");
    let queue = mutex.contenders().unwrap();
    assert_eq!(queue.len(), 1, "{queue:?}");
    assert_eq!(queue[0].node_name, name_of(&node));
    assert_eq!(queue[0].role, Role::Exclusive);
    let curator_token = queue[0].zxid;
    assert!(mutex.try_lock().unwrap().is_none());
    assert!(mutex.lock_timeout(SHORT).unwrap().is_none());
    assert_eq!(mutex.contenders().unwrap().len(), 1, "zklock left a node");

    // Curator releases: zklock gets it.
    curator.release();
    let guard = mutex
        .lock_timeout(LONG)
        .unwrap()
        .expect("free after Curator");
    assert!(guard.fencing().zxid() > curator_token);

    // zklock holds: Curator's timed acquire fails and leaves nothing behind.
    let mut timed = Peer::start(java, "mutex", &path, &["300"]);
    timed.expect("TIMEOUT");
    timed.exits_cleanly();
    assert_eq!(mutex.contenders().unwrap().len(), 1, "Curator left a node");

    // A blocking Curator waiter gets the lock once zklock releases.
    let mut waiter = Peer::start(java, "mutex", &path, &[]);
    assert!(common::wait_contenders(&mutex, 2, LONG));
    waiter.stays_quiet(QUIET);
    let zklock_token = guard.fencing().zxid();
    guard.unlock().unwrap();
    let node = waiter.expect("ACQUIRED");
    let queue = mutex.contenders().unwrap();
    assert_eq!(queue.len(), 1);
    assert_eq!(queue[0].node_name, name_of(&node));
    assert!(queue[0].zxid > zklock_token);
    assert!(mutex.try_lock().unwrap().is_none());
    waiter.release();
    assert!(mutex.try_lock().unwrap().is_some());
}

#[test]
fn mutex_queue_order_spans_both_libraries() {
    let java = java_or_skip!();
    let (a, b) = (common::client(), other_client());
    let path = common::lock_path("interop-fifo");
    let (mutex_a, mutex_b) = (
        DistributedMutex::new(&a, &path).unwrap(),
        DistributedMutex::new(&b, &path).unwrap(),
    );
    let count = || mutex_a.contenders().unwrap().len();
    let queued = |n| common::wait_contenders(&mutex_a, n, LONG);

    // zklock holder, Curator waiter, zklock waiter: handed on in queue order.
    let holder = mutex_a.lock().unwrap();
    let mut curator = Peer::start(java, "mutex", &path, &[]);
    assert!(queued(2));
    thread::scope(|s| {
        let (held, go) = waiter(s, |held, go| {
            let guard = mutex_b.lock_timeout(LONG).unwrap().expect("zklock waiter");
            held.send(guard.fencing().zxid()).unwrap();
            let _ = go.recv();
            guard.unlock().unwrap();
        });
        assert!(queued(3));
        let queue = mutex_a.contenders().unwrap();
        assert_eq!(queue[0].node_name, name_of(holder.node_path()));
        drop(holder);
        let node = curator.expect("ACQUIRED");
        assert_eq!(name_of(&node), queue[1].node_name, "Curator is second");
        assert_eq!(
            held.recv_timeout(QUIET),
            Err(RecvTimeoutError::Timeout),
            "the zklock waiter queued behind Curator got in while Curator held"
        );
        curator.release();
        let token = held
            .recv_timeout(LONG)
            .expect("zklock waiter after Curator");
        assert_eq!(token, queue[2].zxid);
        go.send(()).unwrap();
    });

    // Curator holder, zklock waiter, Curator waiter: the same the other way round.
    let mut first = Peer::start(java, "mutex", &path, &[]);
    first.expect("ACQUIRED");
    thread::scope(|s| {
        let (held, go) = waiter(s, |held, go| {
            let guard = mutex_b.lock_timeout(LONG).unwrap().expect("zklock waiter");
            held.send(guard.fencing().zxid()).unwrap();
            let _ = go.recv();
            guard.unlock().unwrap();
        });
        assert!(queued(2));
        let mut last = Peer::start(java, "mutex", &path, &[]);
        assert!(queued(3));
        first.release();
        held.recv_timeout(LONG)
            .expect("zklock waiter after Curator");
        last.stays_quiet(QUIET);
        go.send(()).unwrap();
        last.expect("ACQUIRED");
        last.release();
    });
    assert_eq!(count(), 0);
}

#[test]
fn rwlock_shares_and_excludes_with_curator() {
    let java = java_or_skip!();
    let (a, b) = (common::client(), other_client());
    let path = common::lock_path("interop-rwlock");
    let (lock_a, lock_b) = (
        DistributedRwLock::new(&a, &path).unwrap(),
        DistributedRwLock::new(&b, &path).unwrap(),
    );
    let count = || lock_a.contenders().unwrap().len();
    let queued = |n| common::wait_contenders(&lock_a, n, LONG);

    // A Curator reader and a zklock reader hold together.
    let mut reader = Peer::start(java, "read", &path, &[]);
    let node = reader.expect("ACQUIRED");
    assert!(name_of(&node).contains("-__READ__"), "{node}");
    let zk_reader = lock_a.try_read().unwrap().expect("readers share");
    let roles: Vec<Role> = lock_a
        .contenders()
        .unwrap()
        .iter()
        .map(|c| c.role)
        .collect();
    assert_eq!(roles, [Role::Read, Role::Read]);
    assert!(lock_b.try_write().unwrap().is_none());

    thread::scope(|s| {
        // A zklock writer waits for both readers, the Curator one included.
        let (held, go) = waiter(s, |held, go| {
            let guard = lock_b.write_timeout(LONG).unwrap().expect("zklock writer");
            held.send(guard.fencing().zxid()).unwrap();
            let _ = go.recv();
            guard.unlock().unwrap();
        });
        assert!(queued(3));
        // Curator sees the queued zklock writer: a new Curator reader must not pass it.
        let mut late = Peer::start(java, "read", &path, &["300"]);
        late.expect("TIMEOUT");
        late.exits_cleanly();
        drop(zk_reader);
        assert_eq!(
            held.recv_timeout(QUIET),
            Err(RecvTimeoutError::Timeout),
            "zklock writer got in while a Curator reader held"
        );
        reader.release();
        held.recv_timeout(LONG)
            .expect("zklock writer after the readers");

        // zklock writes: Curator's writer and reader time out.
        for side in ["write", "read"] {
            let mut timed = Peer::start(java, side, &path, &["300"]);
            timed.expect("TIMEOUT");
            timed.exits_cleanly();
        }
        assert_eq!(count(), 1, "Curator left a node");
        go.send(()).unwrap();
    });

    // A Curator writer blocks zklock readers and writers.
    let mut writer = Peer::start(java, "write", &path, &[]);
    let node = writer.expect("ACQUIRED");
    assert!(name_of(&node).contains("-__WRIT__"), "{node}");
    assert_eq!(lock_a.contenders().unwrap()[0].role, Role::Write);
    assert!(lock_a.try_read().unwrap().is_none());
    assert!(lock_a.read_timeout(SHORT).unwrap().is_none());
    assert!(lock_a.try_write().unwrap().is_none());
    assert!(lock_a.write_timeout(SHORT).unwrap().is_none());
    assert_eq!(count(), 1, "zklock left a node");
    thread::scope(|s| {
        let (held, go) = waiter(s, |held, go| {
            let guard = lock_b.read_timeout(LONG).unwrap().expect("zklock reader");
            held.send(guard.fencing().zxid()).unwrap();
            let _ = go.recv();
            guard.unlock().unwrap();
        });
        assert!(queued(2));
        let mut curator_reader = Peer::start(java, "read", &path, &[]);
        assert!(queued(3));
        assert_eq!(
            held.recv_timeout(QUIET),
            Err(RecvTimeoutError::Timeout),
            "zklock reader got in while a Curator writer held"
        );
        curator_reader.stays_quiet(Duration::ZERO);
        writer.release();
        // Both readers now hold together.
        held.recv_timeout(LONG)
            .expect("zklock reader after the writer");
        curator_reader.expect("ACQUIRED");
        curator_reader.release();
        go.send(()).unwrap();
    });
    assert_eq!(count(), 0);
}

#[test]
fn semaphore_shares_permits_with_curator() {
    let java = java_or_skip!();
    let client = common::client();
    let path = common::lock_path("interop-semaphore");
    let semaphore = Semaphore::new(&client, &path, 2).unwrap();

    let mut lease = Peer::start(java, "lease", &path, &["2"]);
    let node = lease.expect("ACQUIRED");
    assert!(node.starts_with(&format!("{path}/leases/_c_")), "{node}");
    assert!(name_of(&node).contains("-lease-"), "{node}");
    let first = semaphore.try_acquire().unwrap().expect("second permit");
    let leases = semaphore.contenders().unwrap();
    assert_eq!(leases.len(), 2, "{leases:?}");
    assert_eq!(leases[0].node_name, name_of(&node));
    assert!(leases.iter().all(|l| l.role == Role::Lease));

    // Both permits are taken, one by each library.
    assert!(semaphore.try_acquire().unwrap().is_none());
    assert!(semaphore.acquire_timeout(SHORT).unwrap().is_none());
    let mut timed = Peer::start(java, "lease", &path, &["2", "300"]);
    timed.expect("TIMEOUT");
    timed.exits_cleanly();
    assert_eq!(
        semaphore.contenders().unwrap().len(),
        2,
        "a lease was left behind"
    );

    // Curator returns its lease: zklock takes it.
    lease.release();
    let second = semaphore.try_acquire().unwrap().expect("Curator's permit");

    // zklock holds both: a waiting Curator lease gets one when zklock returns it.
    let mut waiter = Peer::start(java, "lease", &path, &["2"]);
    // Queued at the semaphore's gate.
    let gate = DistributedMutex::new(&client, &format!("{path}/locks")).unwrap();
    assert!(common::wait_contenders(&gate, 1, LONG));
    waiter.stays_quiet(QUIET);
    drop(first);
    waiter.expect("ACQUIRED");
    assert!(semaphore.try_acquire().unwrap().is_none());
    waiter.release();
    drop(second);
    assert!(semaphore.contenders().unwrap().is_empty());
}

#[test]
fn leader_election_runs_with_curator_leader_latch() {
    let java = java_or_skip!();
    let (a, b) = (common::client(), other_client());
    let path = common::lock_path("interop-leader");
    let election_a = LeaderElection::new(&a, &path)
        .unwrap()
        .participant_id("zklock-a");
    let election_b = LeaderElection::new(&b, &path)
        .unwrap()
        .participant_id("zklock-b");

    // Curator leads: zklock does not, and sees who does.
    let mut latch = Peer::start(java, "latch", &path, &["curator-1"]);
    latch.expect("LEADER");
    assert!(election_a.participate_timeout(SHORT).unwrap().is_none());
    let leader = election_a.current_leader().unwrap().expect("a leader");
    assert_eq!(leader.owner, "curator-1");
    assert!(leader.node_name.contains("-latch-"), "{leader:?}");
    assert_eq!(leader.role, Role::Participant);
    assert_eq!(
        election_a.contenders().unwrap().len(),
        1,
        "zklock left a node"
    );

    // Curator closes its latch: the waiting zklock participant takes over.
    thread::scope(|s| {
        let (led, go) = waiter(s, |led, go| {
            let leadership = election_b
                .participate_timeout(LONG)
                .unwrap()
                .expect("zklock leads");
            led.send(leadership.fencing().zxid()).unwrap();
            let _ = go.recv();
            drop(leadership);
        });
        assert!(common::wait_contenders(&election_a, 2, LONG));
        assert_eq!(led.recv_timeout(QUIET), Err(RecvTimeoutError::Timeout));
        latch.release();
        led.recv_timeout(LONG).expect("zklock leads after Curator");
        let leader = election_a.current_leader().unwrap().expect("a leader");
        assert_eq!(leader.owner, "zklock-b");

        // zklock leads: Curator's latch does not, until zklock steps down.
        let mut follower = Peer::start(java, "latch", &path, &["curator-2", "300"]);
        // Curator reads the zklock leader's participant id as its own kind.
        assert_eq!(follower.expect("NOT-LEADER"), "zklock-b");
        let ids: Vec<String> = election_a
            .contenders()
            .unwrap()
            .into_iter()
            .map(|p| p.owner)
            .collect();
        assert_eq!(ids, ["zklock-b", "curator-2"]);
        follower.stays_quiet(QUIET);
        go.send(()).unwrap();
        follower.expect("LEADER");
        let leader = election_a.current_leader().unwrap().expect("a leader");
        assert_eq!(leader.owner, "curator-2");
        follower.release();
    });
    assert!(election_a.contenders().unwrap().is_empty());
}

#[test]
fn revocation_requests_cross_libraries() {
    let java = java_or_skip!();
    let client = common::client();

    // zklock asks a revocable Curator holder to release.
    let path = common::lock_path("interop-revoke-curator");
    let mutex = DistributedMutex::new(&client, &path).unwrap();
    let mut holder = Peer::start(java, "revocable", &path, &[]);
    let node = holder.expect("ACQUIRED");
    let queue = mutex.contenders().unwrap();
    assert_eq!(queue[0].node_name, name_of(&node));
    holder.stays_quiet(Duration::ZERO);
    assert!(mutex.request_revocation(&queue[0]).unwrap());
    holder.expect("REVOKE-REQUESTED");
    holder.release();

    // Curator's Revoker asks a revocable zklock holder to release.
    let path = common::lock_path("interop-revoke-zklock");
    let mutex = DistributedMutex::new(&client, &path).unwrap().revocable();
    let guard = mutex.lock().unwrap();
    assert!(!guard.revocation_requested());
    assert!(!guard.wait_revocation_timeout(Duration::from_millis(100)));
    let mut revoker = Peer::start(java, "revoke", guard.node_path(), &[]);
    revoker.expect("REVOKED");
    revoker.exits_cleanly();
    assert!(guard.wait_revocation_timeout(LONG));
    assert!(guard.revocation_requested());
    // The holder decides: the lock is still held until it lets go.
    assert!(guard.is_held());
    assert!(DistributedMutex::new(&other_client(), &path)
        .unwrap()
        .try_lock()
        .unwrap()
        .is_none());
    guard.unlock().unwrap();
}
