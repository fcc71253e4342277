//! Authentication and ACLs against real servers: creator-only ACLs keep other identities out,
//! refusals name what was refused, restricted ACLs give the same answers on every ZooKeeper
//! release CI covers, and parents created on the way are shared. The SASL and TLS servers are
//! `security_tls_sasl.rs`, a binary of its own: its tests bound a connect to a few seconds, which
//! the servers that `acls_on_each_release` starts would eat into if they started beside them.

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

    /// ParentAcl: parents created on the way must let other identities create
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
