//! Authentication, ACLs and secure transports against real servers: creator-only ACLs keep other
//! identities out, refusals name what was refused, restricted ACLs give the same answers on every
//! ZooKeeper release CI covers, parents created on the way are shared, and SASL and TLS servers.

mod common;

mod acls {
    //! Authentication and ACLs on the nodes zklock creates, against a real server (digest scheme:
    //! built into every ZooKeeper server, no server configuration needed).

    use crate::common;
    use common::client_as;
    use zklock::acl::{NodeAcl, Permission};
    use zklock::{Client, DistributedMutex, Error};

    #[test]
    fn creator_only_lock_cannot_be_broken_or_joined_by_another_identity() {
        let path = common::lock_path("acl-creator");
        let alice = client_as("alice", NodeAcl::CreatorOnlyAnyoneRead);
        let bob = client_as("bob", NodeAcl::CreatorOnlyAnyoneRead);
        let alice_lock = DistributedMutex::new(&alice, &path).unwrap();
        let guard = alice_lock.lock().unwrap();

        let bob_lock = DistributedMutex::new(&bob, &path).unwrap();
        // READ for everyone: bob can inspect...
        let holder = bob_lock.contenders().unwrap().remove(0);
        assert!(holder.owner.contains("pid="));
        // ...but neither delete nor overwrite alice's node, nor queue on her lock.
        assert!(matches!(
            bob_lock.break_contender(&holder),
            Err(Error::NoAuth { .. })
        ));
        assert!(matches!(
            bob_lock.request_revocation(&holder),
            Err(Error::NoAuth { .. })
        ));
        assert!(matches!(bob_lock.try_lock(), Err(Error::NoAuth { .. })));
        assert!(guard.is_held());
        assert_eq!(
            alice_lock.contenders().unwrap().len(),
            1,
            "bob left a node behind"
        );

        // Another session of the same identity shares the lock normally.
        let alice2 = client_as("alice", NodeAcl::CreatorOnly);
        let same = DistributedMutex::new(&alice2, &path).unwrap();
        assert!(same.try_lock().unwrap().is_none());
        drop(guard);
        assert!(same.try_lock().unwrap().is_some());
    }

    /// What an operator needs from a refusal: who was refused, which permission, on which node.
    #[test]
    fn refusals_name_the_identity_the_permission_and_the_node() {
        let path = common::lock_path("acl-named");
        let alice = client_as("alice", NodeAcl::CreatorOnlyAnyoneRead);
        let alice_lock = DistributedMutex::new(&alice, &path).unwrap();
        let _guard = alice_lock.lock().unwrap();
        let bob = client_as("bob", NodeAcl::CreatorOnlyAnyoneRead);
        let bob_lock = DistributedMutex::new(&bob, &path).unwrap();
        let holder = bob_lock.contenders().unwrap().remove(0);
        let node = format!("{path}/{}", holder.node_name);

        // Queueing creates a node in the lock path: CREATE on it.
        let refused = bob_lock.lock_timeout(std::time::Duration::from_secs(5));
        let Err(Error::NoAuth {
            path: created,
            permission,
            identity,
        }) = &refused
        else {
            panic!("expected NoAuth, got {refused:?}");
        };
        assert!(created.starts_with(&format!("{path}/")), "{created}");
        assert_eq!(*permission, Some(Permission::Create));
        assert_eq!(identity, "digest:bob");
        let shown = refused.as_ref().unwrap_err().to_string();
        assert!(
            shown.contains(&format!("CREATE on {path} (to create {created})"))
                && shown.contains("identity digest:bob")
                && !shown.contains("bob-password"),
            "{shown}"
        );
        assert_eq!(
            alice_lock.contenders().unwrap().len(),
            1,
            "bob left a node behind"
        );

        // Breaking deletes the holder's node (DELETE on the lock path); revoking writes it.
        let refused = bob_lock.break_contender(&holder).unwrap_err();
        assert_eq!(
            refused,
            Error::NoAuth {
                path: node.clone(),
                permission: Some(Permission::Delete),
                identity: "digest:bob".into(),
            }
        );
        let refused = bob_lock.request_revocation(&holder).unwrap_err();
        assert_eq!(
            refused,
            Error::NoAuth {
                path: node,
                permission: Some(Permission::Write),
                identity: "digest:bob".into(),
            }
        );

        // Without credentials, and where even reading is refused.
        let hidden = common::lock_path("acl-named-hidden");
        let carol = client_as("carol", NodeAcl::CreatorOnly);
        let _held = DistributedMutex::new(&carol, &hidden)
            .unwrap()
            .lock()
            .unwrap();
        let anyone = common::client();
        let refused = DistributedMutex::new(&anyone, &hidden)
            .unwrap()
            .contenders()
            .unwrap_err();
        assert_eq!(
            refused,
            Error::NoAuth {
                path: hidden.clone(),
                permission: Some(Permission::Read),
                identity: "anonymous (world)".into(),
            }
        );
        assert!(
            refused.to_string().contains(&format!(
                "READ on {hidden} refused for identity anonymous (world)"
            )),
            "{refused}"
        );
    }

    #[test]
    fn creator_only_without_read_hides_the_queue() {
        let path = common::lock_path("acl-hidden");
        let alice = client_as("alice", NodeAcl::CreatorOnly);
        let _guard = DistributedMutex::new(&alice, &path)
            .unwrap()
            .lock()
            .unwrap();
        let bob = client_as("bob", NodeAcl::Open);
        assert!(matches!(
            DistributedMutex::new(&bob, &path).unwrap().contenders(),
            Err(Error::NoAuth { .. })
        ));
    }

    #[test]
    fn open_acl_lets_anyone_break_a_lock() {
        // Why the creator-only modes matter: with ZooKeeper's default ACL a stranger can delete the
        // holder's node and walk in.
        let path = common::lock_path("acl-open");
        let alice = client_as("alice", NodeAcl::Open);
        let _guard = DistributedMutex::new(&alice, &path)
            .unwrap()
            .lock()
            .unwrap();
        let stranger = common::client();
        let lock = DistributedMutex::new(&stranger, &path).unwrap();
        let holder = lock.contenders().unwrap().remove(0);
        assert!(lock.break_contender(&holder).unwrap());
        assert!(lock.try_lock().unwrap().is_some());
    }

    #[test]
    fn credentials_never_show_and_creator_only_needs_them() {
        let builder = Client::builder(&common::connect_string())
            .auth_digest("carol", "hunter2")
            .acl(NodeAcl::CreatorOnly);
        let shown = format!("{builder:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("carol"),
            "{shown}"
        );
        let err = Client::builder(&common::connect_string())
            .acl(NodeAcl::CreatorOnly)
            .connect()
            .unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    }
}

mod acls_on_each_release {
    //! Restricted ACLs on every ZooKeeper release CI covers: each scenario runs against a server of
    //! 3.9.5 and one of Debian's 3.8.0, started here (`scripts/start-zk.sh --version`) whatever
    //! release the run's main server is.
    //!
    //! The releases differ: from 3.9 on, `exists` on a node whose ACL denies READ answers NoAuth
    //! where 3.8 answers with its stat. Every zklock call below must give the same answer on both,
    //! or a typed [`Error::NoAuth`] naming the permission: never "free" for a held lock, never a
    //! hang, never a node left behind.

    use crate::common;
    use common::raw::RawClient;
    use common::servers::{self, free_port, Servers};
    use std::sync::OnceLock;
    use std::time::{Duration, Instant};
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
}

mod shared_parents {
    //! Parents created on the way let other identities create siblings: those a lock creates, and
    //! those a fenced write creates inside its transaction, even when the nodes themselves are
    //! creator-only.

    use crate::common;
    use common::RawClient;
    use std::time::Duration;
    use zklock::acl::NodeAcl;
    use zklock::{Client, DistributedMutex, Error};

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

    /// A client of `user` (password "pw") whose nodes are creator-only.
    fn creator_only_client(user: &str) -> Client {
        common::init_logging();
        Client::builder(&common::connect_string())
            .session_timeout(Duration::from_secs(4))
            .auth_digest(user, "pw")
            .acl(NodeAcl::CreatorOnly)
            .connect()
            .unwrap()
    }

    /// ParentAcl / issue 10: parents created on the way must let other identities create
    /// siblings. `Client::set_data` (Session::put) creates missing parents with the parent ACL
    /// (world READ|CREATE), but a fenced write creates them inside its transaction as
    /// `TxnOp::Create`, which always uses the *lock* ACL (src/session.rs `Session::multi`,
    /// src/fence.rs `Fence::set_data`): with `NodeAcl::CreatorOnly`, alice's fenced write to
    /// `<root>/shared/a` makes `<root>/shared` creator-only, and bob can no longer write (or lock)
    /// anything next to it.
    #[test]
    fn fenced_write_parents_let_other_identities_write_siblings() {
        let root = common::lock_path("review-fence-acl");
        common::RawClient::connect(&common::connect_string()).mkdir_open(&root);
        let (alice, bob) = (creator_only_client("alice"), creator_only_client("bob"));

        // Control: parents made by an ordinary write are shared.
        alice
            .set_data(&format!("{root}/plain/a"), b"alice")
            .unwrap();
        bob.set_data(&format!("{root}/plain/b"), b"bob")
            .expect("bob writes next to a parent alice created with set_data");

        // The same through a fenced write.
        let lock = DistributedMutex::new(&alice, &format!("{root}/lock")).unwrap();
        let guard = lock.lock().unwrap();
        guard
            .fenced_set_data(&format!("{root}/fenced/a"), b"alice")
            .unwrap();
        let outcome = bob.set_data(&format!("{root}/fenced/b"), b"bob");
        assert!(
            outcome.is_ok(),
            "bob cannot write next to a parent alice created with a fenced write: {outcome:?}"
        );
    }
}

mod secure_servers {
    //! zklock against secure ZooKeeper servers that this test starts itself with
    //! `scripts/start-zk.sh --sasl` (SASL DIGEST-MD5 required of every session; users alice and bob)
    //! and `scripts/start-zk.sh --tls` (TLS client port, client certificates required), each on
    //! free ports of its own so they never meet the plain test servers. Each is started once per
    //! test binary, by the first test that needs it, and stopped when the binary exits.
    //!
    //! The tests skip (with a message on stderr) only when the tools the servers need are
    //! missing: java, and for TLS also keytool and openssl; under `CI=true` they fail instead
    //! (`common::skip_unless_ci`).
    #![cfg(any(feature = "sasl", feature = "tls"))]

    use crate::common;
    #[cfg(feature = "sasl")]
    use common::secure::sasl_server;
    #[cfg(feature = "tls")]
    use common::secure::tls_server;
    use common::secure::{lock_path, Server};
    use std::time::{Duration, Instant};
    use zklock::{Client, DistributedMutex, Error};

    #[cfg(feature = "sasl")]
    mod sasl {
        use super::*;
        use zklock::acl::NodeAcl;

        fn builder(server: &Server, user: &str, password: &str) -> zklock::ClientBuilder {
            Client::builder(&server.connect)
                .session_timeout(Duration::from_secs(4))
                .sasl_digest_md5(user, password)
        }

        fn client(server: &Server, user: &str, acl: NodeAcl) -> Client {
            builder(server, user, &format!("{user}-secret"))
                .acl(acl)
                .connect()
                .unwrap_or_else(|e| panic!("{user} cannot connect: {e}"))
        }

        #[test]
        fn wrong_password_is_auth_failed_promptly_and_correct_clients_still_work() {
            let Some(server) = sasl_server("wrong_password_is_auth_failed_promptly") else {
                return;
            };
            // The default connect timeout is 15 s: a refusal must come long before it.
            for (user, password) in [
                ("alice", "not-alice-secret"),
                ("alice", ""),
                ("mallory", "mallory-secret"),
                ("bob", "alice-secret"),
            ] {
                let started = Instant::now();
                let err = builder(server, user, password).connect().unwrap_err();
                let took = started.elapsed();
                assert_eq!(err, Error::AuthFailed, "{user:?}/{password:?}");
                assert!(took < Duration::from_secs(3), "{user:?}: took {took:?}");
            }
            // enforce.auth.schemes=sasl: a session without SASL is refused as well, not left open
            // as an unauthenticated session.
            let started = Instant::now();
            let outcome = Client::builder(&server.connect).connect().and_then(|c| {
                DistributedMutex::new(&c, &lock_path("nosasl"))?
                    .try_lock()
                    .map(drop)
            });
            assert_eq!(outcome.unwrap_err(), Error::AuthFailed);
            assert!(started.elapsed() < Duration::from_secs(3));

            // The same process, the same server: correct credentials work.
            let alice = client(server, "alice", NodeAcl::Open);
            let path = lock_path("after-failures");
            let mutex = DistributedMutex::new(&alice, &path).unwrap();
            let guard = mutex.try_lock().unwrap().expect("lock is free");
            assert!(guard.is_held());
            let bob = client(server, "bob", NodeAcl::Open);
            let theirs = DistributedMutex::new(&bob, &path).unwrap();
            assert!(theirs.try_lock().unwrap().is_none(), "bob must see it busy");
            drop(guard);
            assert!(theirs.try_lock().unwrap().is_some());
            assert!(mutex.contenders().unwrap().is_empty());
        }

        #[test]
        fn empty_sasl_user_fails_within_the_connect_timeout() {
            // ZooKeeper's DIGEST-MD5 server throws on an empty user name and drops the connection
            // without an answer, so the client cannot tell a refusal from a network failure: it
            // retries until the connect timeout. What matters here: a typed error, in time.
            let Some(server) = sasl_server("empty_sasl_user_fails_within_the_connect_timeout")
            else {
                return;
            };
            let started = Instant::now();
            let err = builder(server, "", "")
                .connect_timeout(Duration::from_secs(2))
                .connect()
                .unwrap_err();
            assert!(
                matches!(
                    err,
                    Error::AuthFailed | Error::Connect { .. } | Error::InvalidArgument(_)
                ),
                "{err:?}"
            );
            assert!(started.elapsed() < Duration::from_secs(5));
        }

        #[test]
        fn creator_only_anyone_read_keeps_other_identities_out() {
            let Some(server) = sasl_server("creator_only_anyone_read_keeps_other_identities_out")
            else {
                return;
            };
            let path = lock_path("creator-read");
            let alice = client(server, "alice", NodeAcl::CreatorOnlyAnyoneRead);
            let mutex = DistributedMutex::new(&alice, &path).unwrap();
            let guard = mutex.lock().unwrap();

            let bob = client(server, "bob", NodeAcl::CreatorOnlyAnyoneRead);
            let theirs = DistributedMutex::new(&bob, &path).unwrap();
            // READ for everyone: bob sees the holder...
            let holder = theirs.contenders().unwrap().remove(0);
            assert!(holder.owner.contains("pid="), "{holder:?}");
            assert_eq!(holder.session_id, alice.session_id());
            // ...but can neither delete it, nor overwrite it, nor queue behind it.
            let no_auth = |what: &str, outcome: zklock::Result<()>| match outcome {
                Err(Error::NoAuth {
                    path: p, identity, ..
                }) => {
                    assert!(p.starts_with(&path), "{what}: {p}");
                    assert_eq!(identity, "sasl:bob", "{what}");
                }
                other => panic!("{what}: expected NoAuth, got {other:?}"),
            };
            no_auth("break", theirs.break_contender(&holder).map(drop));
            no_auth("revoke", theirs.request_revocation(&holder).map(drop));
            no_auth("try_lock", theirs.try_lock().map(drop));
            no_auth(
                "lock_timeout",
                theirs.lock_timeout(Duration::from_millis(300)).map(drop),
            );
            let started = Instant::now();
            no_auth("lock", theirs.lock().map(drop));
            assert!(started.elapsed() < Duration::from_secs(3), "lock() waited");
            assert!(guard.is_held());
            assert_eq!(mutex.contenders().unwrap().len(), 1, "bob left a node");

            // Another session of alice's shares the lock normally.
            let alice2 = client(server, "alice", NodeAcl::CreatorOnlyAnyoneRead);
            let same = DistributedMutex::new(&alice2, &path).unwrap();
            assert!(same.try_lock().unwrap().is_none());
            drop(guard);
            let guard = same
                .try_lock()
                .unwrap()
                .expect("free after alice's release");
            // Bob still reads, still cannot touch.
            assert_eq!(theirs.contenders().unwrap().len(), 1);
            let holder = theirs.contenders().unwrap().remove(0);
            no_auth("break again", theirs.break_contender(&holder).map(drop));
            drop(guard);
        }

        #[test]
        fn open_acl_lets_another_identity_break_the_lock() {
            // Why the creator-only modes matter, with SASL identities too.
            let Some(server) = sasl_server("open_acl_lets_another_identity_break_the_lock") else {
                return;
            };
            let path = lock_path("open");
            let alice = client(server, "alice", NodeAcl::Open);
            let _guard = DistributedMutex::new(&alice, &path)
                .unwrap()
                .lock()
                .unwrap();
            let bob = client(server, "bob", NodeAcl::Open);
            let theirs = DistributedMutex::new(&bob, &path).unwrap();
            let holder = theirs.contenders().unwrap().remove(0);
            assert!(theirs.break_contender(&holder).unwrap());
            assert!(theirs.try_lock().unwrap().is_some());
        }
    }

    #[cfg(feature = "tls")]
    mod tls {
        use super::*;

        fn read(server: &Server, file: &str) -> String {
            let path = server.dir.join(file);
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        }

        /// A client trusting `ca` (a file of the server's dir), with the client certificate.
        fn builder(server: &Server, connect: &str, ca: &str) -> zklock::ClientBuilder {
            Client::builder(connect)
                .session_timeout(Duration::from_secs(4))
                .connect_timeout(Duration::from_secs(3))
                .tls(&read(server, ca))
                .tls_identity(&read(server, "client.pem"), &read(server, "client-key.pem"))
        }

        fn client(server: &Server) -> Client {
            builder(server, &server.connect, "ca.pem")
                .connect()
                .unwrap_or_else(|e| panic!("TLS connect to {}: {e}", server.connect))
        }

        /// The connect timeout (3 s) plus a margin: a failure must not take longer.
        const BOUND: Duration = Duration::from_secs(8);

        #[test]
        fn locks_over_tls_with_a_client_certificate() {
            let Some(server) = tls_server("locks_over_tls_with_a_client_certificate") else {
                return;
            };
            let tls_port = server.secure_port;
            assert_eq!(server.connect, format!("127.0.0.1:{tls_port}"));
            let path = lock_path("tls");
            let a = client(server);
            // The certificate names localhost too.
            let b = builder(server, &format!("localhost:{tls_port}"), "ca.pem")
                .connect()
                .unwrap();
            let mine = DistributedMutex::new(&a, &path).unwrap();
            let theirs = DistributedMutex::new(&b, &path).unwrap();
            let guard = mine.lock().unwrap();
            let first_token = guard.fencing().zxid();
            assert!(theirs.try_lock().unwrap().is_none());
            assert!(theirs
                .lock_timeout(Duration::from_millis(200))
                .unwrap()
                .is_none());

            std::thread::scope(|s| {
                let waiter = s.spawn(|| {
                    let guard = theirs.lock().unwrap();
                    (guard.fencing().zxid(), guard.session_id())
                });
                assert!(
                    common::wait_contenders(&mine, 2, Duration::from_secs(10)),
                    "the waiter never queued"
                );
                let contenders = mine.contenders().unwrap();
                assert_eq!(contenders[0].session_id, a.session_id());
                assert_eq!(contenders[1].session_id, b.session_id());
                guard.unlock().unwrap();
                let (token, session) = waiter.join().unwrap();
                assert!(token > first_token);
                assert_eq!(session, b.session_id());
            });
            assert!(mine.contenders().unwrap().is_empty());
            assert!(mine.try_lock().unwrap().is_some());
        }

        #[test]
        fn a_refusal_names_the_certificate_subject() {
            let Some(server) = tls_server("a_refusal_names_the_certificate_subject") else {
                return;
            };
            // Alice, on the plain port with a password, keeps everyone else from queueing.
            let path = lock_path("x509");
            let alice = Client::builder(&format!("127.0.0.1:{}", server.port))
                .auth_digest("alice", "alice-password")
                .acl(zklock::acl::NodeAcl::CreatorOnlyAnyoneRead)
                .connect()
                .unwrap();
            let guard = DistributedMutex::new(&alice, &path)
                .unwrap()
                .lock()
                .unwrap();
            // The TLS client is `x509:<its certificate's subject>` to the server, as an ACL
            // would have to name it (scripts/lib/secure.sh: /O=zklock tests/CN=zklock-client).
            let theirs = DistributedMutex::new(&client(server), &path).unwrap();
            match theirs.try_lock() {
                Err(Error::NoAuth {
                    permission,
                    identity,
                    ..
                }) => {
                    assert_eq!(permission, Some(zklock::acl::Permission::Create));
                    assert_eq!(identity, "x509:CN=zklock-client,O=zklock tests");
                }
                other => panic!("expected NoAuth, got {:?}", other.map(|g| g.is_some())),
            }
            assert_eq!(theirs.contenders().unwrap().len(), 1, "nothing left behind");
            drop(guard);
        }

        #[test]
        fn untrusted_server_certificate_is_a_tls_error_not_a_hang() {
            let Some(server) = tls_server("untrusted_server_certificate_is_a_tls_error_not_a_hang")
            else {
                return;
            };
            let started = Instant::now();
            let err = builder(server, &server.connect, "other-ca.pem")
                .connect()
                .unwrap_err();
            let took = started.elapsed();
            assert!(matches!(err, Error::Tls { .. }), "{err:?}");
            assert!(err.to_string().contains("TLS"), "{err}");
            assert!(took < BOUND, "took {took:?}");
            // The failure is the client's alone: trusted clients are served meanwhile.
            let c = client(server);
            assert!(DistributedMutex::new(&c, &lock_path("after-untrusted"))
                .unwrap()
                .try_lock()
                .unwrap()
                .is_some());
        }

        #[test]
        fn client_without_certificate_is_refused() {
            // The server runs with ssl.clientAuth=need.
            let Some(server) = tls_server("client_without_certificate_is_refused") else {
                return;
            };
            let started = Instant::now();
            let err = Client::builder(&server.connect)
                .connect_timeout(Duration::from_secs(3))
                .tls(&read(server, "ca.pem"))
                .connect()
                .unwrap_err();
            assert!(matches!(err, Error::Tls { .. }), "{err:?}");
            assert!(started.elapsed() < BOUND, "took {:?}", started.elapsed());
        }

        #[test]
        fn tls_and_plain_ports_mixed_up_fail_cleanly() {
            let Some(server) = tls_server("tls_and_plain_ports_mixed_up_fail_cleanly") else {
                return;
            };
            // TLS client on a plain port: the port answers, no handshake completes.
            let started = Instant::now();
            let err = builder(server, &format!("127.0.0.1:{}", server.port), "ca.pem")
                .connect()
                .unwrap_err();
            assert!(matches!(err, Error::Tls { .. }), "{err:?}");
            assert!(started.elapsed() < BOUND, "took {:?}", started.elapsed());
            // Plain client on the TLS port: no session, within the connect timeout.
            let started = Instant::now();
            let err = Client::builder(&server.connect)
                .connect_timeout(Duration::from_secs(3))
                .connect()
                .unwrap_err();
            assert!(matches!(err, Error::Connect { .. }), "{err:?}");
            assert!(started.elapsed() < BOUND, "took {:?}", started.elapsed());
        }

        #[test]
        fn host_that_is_no_dns_name_fails_cleanly_over_tls() {
            let Some(server) = tls_server("host_that_is_no_dns_name_fails_cleanly_over_tls") else {
                return;
            };
            for host in ["127.1", "2130706433", "0x7f.1"] {
                let err = builder(server, &format!("{host}:{}", server.secure_port), "ca.pem")
                    .connect()
                    .unwrap_err();
                assert!(
                    matches!(err, Error::InvalidConnectString { .. } | Error::Tls { .. })
                        && !err.to_string().contains("panicked"),
                    "{host}: {err}"
                );
            }
            // A good host and a bad one: refused up front, so the client crate never gets to
            // name (and panic on) the bad one during a later reconnect.
            let connect = format!("{},127.1:{}", server.connect, server.secure_port);
            let err = builder(server, &connect, "ca.pem").connect().unwrap_err();
            assert!(matches!(err, Error::InvalidConnectString { .. }), "{err}");
        }

        #[test]
        fn invalid_tls_material_is_a_tls_error_before_connecting() {
            // No server needed: the material is checked first. Port 9 (discard) is never used.
            for (ca, cert, key) in [
                ("", None, None),
                ("not a certificate", None, None),
                (
                    "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
                    None,
                    None,
                ),
            ] {
                let mut builder = Client::builder("127.0.0.1:9")
                    .connect_timeout(Duration::from_secs(1))
                    .tls(ca);
                if let (Some(cert), Some(key)) = (cert, key) {
                    builder = builder.tls_identity(cert, key);
                }
                let started = Instant::now();
                let err = builder.connect().unwrap_err();
                assert!(matches!(err, Error::Tls { .. }), "{ca:?}: {err:?}");
                assert!(started.elapsed() < Duration::from_millis(500));
            }
            // A valid CA but a garbage identity.
            if let Some(server) = tls_server(
                "invalid_tls_material_is_a_tls_error_before_connecting (its part with a server)",
            ) {
                let err = Client::builder(&server.connect)
                    .connect_timeout(Duration::from_secs(1))
                    .tls(&read(server, "ca.pem"))
                    .tls_identity("garbage", "more garbage")
                    .connect()
                    .unwrap_err();
                assert!(matches!(err, Error::Tls { .. }), "{err:?}");
                // A certificate with somebody else's key.
                let err = Client::builder(&server.connect)
                    .connect_timeout(Duration::from_secs(3))
                    .tls(&read(server, "ca.pem"))
                    .tls_identity(&read(server, "client.pem"), &read(server, "ca-key.pem"))
                    .connect()
                    .unwrap_err();
                assert!(
                    matches!(err, Error::Tls { .. } | Error::Connect { .. }),
                    "{err:?}"
                );
            }
        }
    }
}
