//! Restricted ACLs on every ZooKeeper release CI covers: each scenario runs against a server of
//! 3.9.5 and one of Debian's 3.8.0, started here (`scripts/start-zk.sh --version`) whatever
//! release the run's main server is.
//!
//! The releases differ: from 3.9 on, `exists` on a node whose ACL denies READ answers NoAuth
//! where 3.8 answers with its stat. Every zklock call below must give the same answer on both,
//! or a typed [`Error::NoAuth`] naming the permission: never "free" for a held lock, never a
//! hang, never a node left behind.

mod common;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::raw::RawClient;
use common::servers::{self, free_port, Servers};
use zklock::acl::{NodeAcl, Permission};
use zklock::{Client, DistributedMutex, DistributedRwLock, Error, LeaderElection, Semaphore};

/// Every refused call must come back well within this: a refusal is one round trip.
const PROMPT: Duration = Duration::from_secs(3);

/// The connect string of this binary's server of `release` (started on first use, stopped
/// when the binary exits).
fn server(release: &'static str) -> String {
    static SERVERS: [OnceLock<String>; 2] = [OnceLock::new(), OnceLock::new()];
    let slot = match release {
        "3.9.5" => &SERVERS[0],
        "debian" => &SERVERS[1],
        other => panic!("no server slot for {other}"),
    };
    slot.get_or_init(|| {
        let port = free_port();
        let servers = Servers::start(
            &[],
            &[
                ("ZK_PORT", port.to_string()),
                ("ZK_VERSION", release.to_owned()),
                ("ZK_HEAP", "128m".to_owned()),
            ],
        )
        .keep_until_exit();
        let connect = servers.connect_string();
        let want = if release == "debian" {
            "3.8.0"
        } else {
            release
        };
        assert_eq!(servers::version(&connect).as_deref(), Some(want));
        // Every test's parent, open, so that any identity may create below it.
        let _ = Client::builder(&format!("{connect}/zklock-tests"))
            .connect()
            .expect("connect")
            .close();
        connect
    })
    .clone()
}

/// A client of `zk` authenticated as digest user `user`, creating its nodes with `acl`.
fn as_user(zk: &str, user: &str, acl: NodeAcl) -> Client {
    common::builder(zk, common::SESSION_TIMEOUT)
        .auth_digest(user, &format!("{user}-password"))
        .acl(acl)
        .connect()
        .unwrap_or_else(|e| panic!("{user} cannot connect to {zk}: {e}"))
}

fn anonymous(zk: &str) -> Client {
    common::client_at(zk, common::SESSION_TIMEOUT)
}

/// Asserts `result` is a NoAuth for `permission`, and that it came within [`PROMPT`].
#[track_caller]
fn refused<T: std::fmt::Debug>(
    started: Instant,
    result: zklock::Result<T>,
    permission: Permission,
) {
    assert!(started.elapsed() < PROMPT, "took {:?}", started.elapsed());
    match result {
        Err(Error::NoAuth { permission: p, .. }) => assert_eq!(p, Some(permission)),
        other => panic!("expected NoAuth for {permission:?}, got {other:?}"),
    }
}

/// Runs a scenario once per release, as two tests.
macro_rules! on_each_release {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn zookeeper_3_9_5() {
                super::$name(&super::server("3.9.5"));
            }
            #[test]
            fn zookeeper_3_8_0() {
                super::$name(&super::server("debian"));
            }
        }
    )*};
}

on_each_release!(
    require_chroot_through_a_chroot_that_denies_read,
    fenced_set_data_creates_below_a_parent_that_denies_read,
    creator_only_lock_refuses_strangers_on_every_call,
    creator_only_anyone_read_shows_the_holder,
    semaphore_rwlock_and_election_refuse_strangers,
    cli_status_and_break_on_a_foreign_creator_only_lock,
);

/// `require_chroot(true)` checks that the chroot exists. On 3.9.5 a stat of a chroot that
/// denies READ is NoAuth, which also proves it exists: the client connects and locks inside
/// on both releases, as it does without `require_chroot`.
fn require_chroot_through_a_chroot_that_denies_read(zk: &str) {
    let chroot = common::lock_path("chroot-cdw");
    let raw = RawClient::connect(zk);
    // world:anyone WRITE | CREATE | DELETE: anyone may lock inside, nobody may list it.
    raw.create_persistent_for_anyone(&chroot, 2 | 4 | 8);
    let client = common::builder(&format!("{zk}{chroot}"), common::SESSION_TIMEOUT)
        .require_chroot(true)
        .connect()
        .unwrap_or_else(|e| panic!("require_chroot through {chroot} (no READ): {e}"));
    let lock = DistributedMutex::new(&client, "/inside").unwrap();
    let guard = lock
        .try_lock()
        .unwrap()
        .expect("a free lock inside the chroot");
    assert!(guard.is_held());
    guard.unlock().unwrap();
    // A chroot that is not there is still told apart.
    let missing = format!("{zk}{chroot}/missing");
    let err = common::builder(&missing, common::SESSION_TIMEOUT)
        .require_chroot(true)
        .connect()
        .unwrap_err();
    assert!(matches!(err, Error::NoChroot { .. }), "{err:?}");
}

/// `fenced_set_data` on a missing node creates it in the fence's transaction, after finding
/// which ancestors are missing. A parent that lets anyone create but not read must count as
/// present on 3.9.5 (its stat is NoAuth there), as `Client::set_data` already does.
fn fenced_set_data_creates_below_a_parent_that_denies_read(zk: &str) {
    let base = common::lock_path("fence-cdw");
    let raw = RawClient::connect(zk);
    raw.create_persistent_for_anyone(&base, 31);
    let drop_box = format!("{base}/drop");
    raw.create_persistent_for_anyone(&drop_box, 2 | 4 | 8);
    let client = anonymous(zk);
    let guard = DistributedMutex::new(&client, &format!("{base}/lock"))
        .unwrap()
        .lock()
        .unwrap();
    let value = format!("{drop_box}/value");
    guard
        .fenced_set_data(&value, b"one")
        .unwrap_or_else(|e| panic!("fenced create below {drop_box} (no READ): {e}"));
    // Written, and once there, updated.
    guard.fenced_set_data(&value, b"two").unwrap();
    assert_eq!(raw.stat(&value).map(|s| s.data_length), Some(3));
    // A missing parent below the unreadable one is created with the node.
    let deeper = format!("{drop_box}/a/b");
    guard.fenced_set_data(&deeper, b"x").unwrap();
    assert!(raw.exists(&deeper));
    drop(guard);
}

/// A creator-only lock held by alice: bob and an anonymous session get NoAuth from every call,
/// promptly, and leave nothing behind; alice's hold is untouched.
fn creator_only_lock_refuses_strangers_on_every_call(zk: &str) {
    let path = common::lock_path("acl-rel-creator");
    let alice = as_user(zk, "alice", NodeAcl::CreatorOnly);
    let alice_lock = DistributedMutex::new(&alice, &path).unwrap();
    let guard = alice_lock.lock().unwrap();
    let holder = alice_lock.contenders().unwrap().remove(0);

    for (who, client) in [
        ("bob", as_user(zk, "bob", NodeAcl::CreatorOnly)),
        ("anonymous", anonymous(zk)),
    ] {
        let lock = DistributedMutex::new(&client, &path).unwrap();
        let t = Instant::now();
        // Queueing creates first: CREATE is what is refused, on both releases.
        refused(t, lock.try_lock(), Permission::Create);
        let t = Instant::now();
        refused(
            t,
            lock.lock_timeout(Duration::from_secs(10)),
            Permission::Create,
        );
        let t = Instant::now();
        refused(t, lock.contenders(), Permission::Read);
        let t = Instant::now();
        refused(t, client.inspect(&path, None), Permission::Read);
        let t = Instant::now();
        refused(t, lock.break_contender(&holder), Permission::Delete);
        let t = Instant::now();
        refused(t, lock.request_revocation(&holder), Permission::Write);
        assert!(guard.is_held(), "{who} disturbed alice's hold");
        assert_eq!(
            alice_lock.contenders().unwrap().len(),
            1,
            "{who} left a node"
        );
    }
    guard.unlock().unwrap();
}

/// With READ for everyone, strangers see the holder (never "free") and still cannot queue,
/// break or revoke.
fn creator_only_anyone_read_shows_the_holder(zk: &str) {
    let path = common::lock_path("acl-rel-read");
    let alice = as_user(zk, "alice", NodeAcl::CreatorOnlyAnyoneRead);
    let alice_lock = DistributedMutex::new(&alice, &path).unwrap();
    let guard = alice_lock.lock().unwrap();

    let bob = as_user(zk, "bob", NodeAcl::CreatorOnlyAnyoneRead);
    let lock = DistributedMutex::new(&bob, &path).unwrap();
    let seen = bob.inspect(&path, None).unwrap();
    assert_eq!(seen.nodes.len(), 1);
    assert_eq!(
        seen.nodes[0].holds,
        Some(true),
        "inspection must show alice holding"
    );
    let holder = lock.contenders().unwrap().remove(0);
    let t = Instant::now();
    refused(t, lock.try_lock(), Permission::Create);
    let t = Instant::now();
    refused(
        t,
        lock.lock_timeout(Duration::from_secs(10)),
        Permission::Create,
    );
    let t = Instant::now();
    refused(t, lock.break_contender(&holder), Permission::Delete);
    let t = Instant::now();
    refused(t, lock.request_revocation(&holder), Permission::Write);
    assert!(guard.is_held());
    assert_eq!(alice_lock.contenders().unwrap().len(), 1, "bob left a node");
    guard.unlock().unwrap();
}

/// The other recipes on alice's creator-only nodes: refusals, not "free", nothing left.
fn semaphore_rwlock_and_election_refuse_strangers(zk: &str) {
    let alice = as_user(zk, "alice", NodeAcl::CreatorOnly);
    let bob = as_user(zk, "bob", NodeAcl::CreatorOnly);

    let path = common::lock_path("acl-rel-sem");
    let sem = Semaphore::new(&alice, &path, 1).unwrap();
    let permit = sem.acquire().unwrap();
    let theirs = Semaphore::new(&bob, &path, 1).unwrap();
    let t = Instant::now();
    let got = theirs.try_acquire();
    assert!(matches!(got, Err(Error::NoAuth { .. })), "{got:?}");
    assert!(t.elapsed() < PROMPT);
    assert!(matches!(theirs.contenders(), Err(Error::NoAuth { .. })));
    assert!(permit.is_held());
    assert_eq!(sem.contenders().unwrap().len(), 1, "bob left a lease");
    drop(permit);

    let path = common::lock_path("acl-rel-rw");
    let rw = DistributedRwLock::new(&alice, &path).unwrap();
    let write = rw.write().unwrap();
    let theirs = DistributedRwLock::new(&bob, &path).unwrap();
    let t = Instant::now();
    refused(t, theirs.try_read(), Permission::Create);
    let t = Instant::now();
    refused(t, theirs.try_write(), Permission::Create);
    assert!(write.is_held());
    assert_eq!(rw.contenders().unwrap().len(), 1, "bob left a node");
    drop(write);

    let path = common::lock_path("acl-rel-elect");
    let election = LeaderElection::new(&alice, &path).unwrap();
    let leading = election.participate().unwrap();
    let theirs = LeaderElection::new(&bob, &path).unwrap();
    let t = Instant::now();
    refused(t, theirs.try_participate(), Permission::Create);
    let t = Instant::now();
    refused(t, theirs.current_leader(), Permission::Read);
    assert!(leading.is_held());
    assert_eq!(election.contenders().unwrap().len(), 1, "bob left a node");
    drop(leading);
}

/// The CLI on alice's creator-only lock: `status` as another identity fails with exit 125 and
/// names READ (never "free"), `break` names the refusal and deletes nothing; with READ for
/// everyone, `status` shows the holder.
fn cli_status_and_break_on_a_foreign_creator_only_lock(zk: &str) {
    use std::process::{Command, Stdio};
    let zklock = |args: &[&str]| {
        let out = Command::new(common::zklock_binary())
            .env("ZKLOCK_CONNECT", zk)
            .env("ZKLOCK_PASSWORD", "bob-password")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .args(["--auth-digest", "bob"])
            .args(args)
            .output()
            .expect("zklock runs");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), text)
    };
    let alice = as_user(zk, "alice", NodeAcl::CreatorOnly);
    let path = common::lock_path("acl-rel-cli");
    let alice_lock = DistributedMutex::new(&alice, &path).unwrap();
    let guard = alice_lock.lock().unwrap();
    let (code, text) = zklock(&["status", &path]);
    assert_eq!(code, Some(125), "{text}");
    assert!(text.contains("READ") && !text.contains("free"), "{text}");
    let (code, text) = zklock(&["break", "--yes", &path]);
    assert_eq!(code, Some(125), "{text}");
    assert!(!text.contains("free"), "{text}");
    assert!(guard.is_held());
    assert_eq!(alice_lock.contenders().unwrap().len(), 1);
    guard.unlock().unwrap();

    let readable = as_user(zk, "alice", NodeAcl::CreatorOnlyAnyoneRead);
    let path = common::lock_path("acl-rel-cli-read");
    let guard = DistributedMutex::new(&readable, &path)
        .unwrap()
        .lock()
        .unwrap();
    let (code, text) = zklock(&["status", &path]);
    assert_eq!(code, Some(0), "{text}");
    assert!(!text.contains("free"), "{text}");
    let (code, text) = zklock(&["break", "--yes", &path]);
    assert_eq!(code, Some(125), "{text}");
    assert!(text.contains("not allowed to delete"), "{text}");
    assert!(guard.is_held());
    guard.unlock().unwrap();
}
