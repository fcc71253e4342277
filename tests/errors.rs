//! Bad input and error messages: everything that reaches ZooKeeper from a user ends in a typed
//! error (never a panic or a hang) and leaves nothing behind, and the messages say what happened
//! without misleading.

mod common;

mod bad_input {
    //! Fuzz-ish bad input for everything that reaches ZooKeeper from a user: lock paths, chroots and
    //! connect strings, credentials, and node data. Every case must end in a typed error (never a
    //! panic or a hang) and leave nothing behind, which is checked with a raw listing of the server
    //! (`common::RawClient`, a session of its own on the wire protocol, not zklock). Valid input,
    //! Unicode included, must work.
    //!
    //! Runs against the test server (`ZK_CONNECT`, see `tests/common/mod.rs`).

    use crate::common;
    use common::RawClient;
    use std::time::{Duration, Instant};
    use zklock::{
        Client, DistributedMutex, DistributedRwLock, Error, LeaderElection, MultiLock, Semaphore,
    };

    /// A fresh raw session for one look at the server.
    fn raw() -> RawClient {
        RawClient::connect(&common::connect_string())
    }

    /// A unique tag to put into the paths of one test.
    fn tag() -> String {
        format!("zklock-fuzz-{}", uuid::Uuid::new_v4().simple())
    }

    /// Lock paths that must be refused with `InvalidPath` before anything is sent. Each contains
    /// `tag`, so a raw listing can tell whether it left a node anywhere.
    fn bad_paths(tag: &str) -> Vec<String> {
        let mut paths = vec![
            // not absolute, empty, the root
            tag.to_owned(),
            format!("{tag}/lock"),
            format!("./{tag}"),
            format!("../{tag}"),
            String::new(),
            "/".to_owned(),
            "//".to_owned(),
            // '/' components: empty segments, trailing slash
            format!("/{tag}/"),
            format!("//{tag}"),
            format!("/{tag}//lock"),
            format!("/{tag}///"),
            // relative segments
            format!("/{tag}/."),
            format!("/{tag}/.."),
            format!("/{tag}/./lock"),
            format!("/{tag}/../lock"),
            format!("/./{tag}"),
            format!("/../{tag}"),
            format!("/{tag}/lock/../../.."),
            // very long: 5 KB in one segment, in many, and in multi-byte characters
            format!("/{tag}/{}", "x".repeat(5 * 1024)),
            format!("/{tag}{}", "/seg".repeat(1300)),
            format!("/{tag}/{}", "锁".repeat(1800)),
        ];
        // control characters and the characters ZooKeeper reserves
        for c in [
            '\0', '\u{1}', '\t', '\n', '\r', '\u{1b}', '\u{1f}', '\u{7f}', '\u{80}', '\u{9f}',
            '\u{f000}', '\u{f8ff}', '\u{fff0}', '\u{fffe}', '\u{ffff}',
        ] {
            paths.push(format!("/{tag}/a{c}b"));
            paths.push(format!("/{tag}{c}"));
        }
        paths
    }

    /// Every entry point that takes a path refuses `path` with `InvalidPath` naming it.
    fn assert_refused_everywhere(client: &Client, path: &str) {
        let check = |what: &str, outcome: zklock::Result<()>| match outcome {
            Err(Error::InvalidPath { path: p, reason }) => {
                assert_eq!(p, path, "{what}");
                assert!(!reason.is_empty());
            }
            other => panic!("{what}({path:?}): expected InvalidPath, got {other:?}"),
        };
        check(
            "DistributedMutex::new",
            DistributedMutex::new(client, path).map(drop),
        );
        check(
            "DistributedRwLock::new",
            DistributedRwLock::new(client, path).map(drop),
        );
        check("Semaphore::new", Semaphore::new(client, path, 2).map(drop));
        check(
            "LeaderElection::new",
            LeaderElection::new(client, path).map(drop),
        );
        check(
            "MultiLock::mutex",
            MultiLock::new(client).mutex(path).map(drop),
        );
        check(
            "MultiLock::write_lock",
            MultiLock::new(client).write_lock(path).map(drop),
        );
        check("Client::get_data", client.get_data(path).map(drop));
        check("Client::set_data", client.set_data(path, b"data"));
    }

    #[test]
    fn bad_lock_paths_are_refused_before_reaching_zookeeper() {
        let client = common::client();
        let tag = tag();
        for path in bad_paths(&tag) {
            assert_refused_everywhere(&client, &path);
        }
        assert_eq!(
            raw().top_level_with(&tag),
            Vec::<String>::new(),
            "left behind"
        );

        // The same through a chroot: nothing appears under it (the chroot itself is created when
        // the client connects, as documented).
        let chroot = format!("/{tag}-chroot");
        let chrooted = common::client_at(
            &format!("{}{chroot}", common::connect_string()),
            Duration::from_secs(4),
        );
        for path in bad_paths(&tag) {
            assert_refused_everywhere(&chrooted, &path);
        }
        assert_eq!(
            raw().children(&chroot),
            Vec::<String>::new(),
            "left under the chroot"
        );
    }

    #[test]
    fn lock_path_under_a_lock_node_is_ephemeral_parent() {
        // A lock path with '/' components that runs through another holder's (ephemeral) node.
        let client = common::client();
        let path = format!("/{}", tag());
        let mutex = DistributedMutex::new(&client, &path).unwrap();
        let guard = mutex.lock().unwrap();
        let other = common::client();
        let inner = format!("{}/nested", guard.node_path());
        for outcome in [
            DistributedMutex::new(&other, &inner)
                .unwrap()
                .try_lock()
                .map(drop),
            DistributedMutex::new(&other, &format!("{}/lock", guard.node_path()))
                .unwrap()
                .lock_timeout(Duration::from_millis(200))
                .map(drop),
        ] {
            assert!(
                matches!(outcome, Err(Error::EphemeralParent { .. })),
                "{outcome:?}"
            );
        }
        assert_eq!(raw().children(guard.node_path()), Vec::<String>::new());
        assert_eq!(mutex.contenders().unwrap().len(), 1);
    }

    #[test]
    fn valid_unicode_and_odd_but_valid_names_work() {
        let client = common::client();
        let root = format!("/{}", tag());
        let names = [
            "ünïcödé",
            "锁/子锁",
            "замок",
            "قفل-rtl",
            "e\u{301}-combining",
            "a\u{200d}b-zwj",
            "nbsp\u{a0}here",
            "\u{d7ff}-last-before-surrogates",
            "\u{fb01}-after-private-use",
            "\u{ffef}-last-allowed",
            "...",
            ".hidden",
            "trailing..",
            "lock-0000000001",
            "_c_not-a-uuid-lock-",
            " spaces & symbols !@#$%^*()[]{}<>?,;:'\"|\\`~+=",
            "zookeeper",
        ];
        for name in names {
            let path = format!("{root}/{name}");
            let mutex = DistributedMutex::new(&client, &path).unwrap();
            let guard = mutex
                .try_lock()
                .unwrap_or_else(|e| panic!("{path:?}: {e}"))
                .expect("free");
            let node = guard.node_path().to_owned();
            assert!(node.starts_with(&format!("{path}/")), "{node:?}");
            let node_name = &node[path.len() + 1..];
            // The server stored exactly that name.
            assert_eq!(
                raw().children(&path),
                vec![node_name.to_owned()],
                "{path:?}"
            );
            let contenders = mutex.contenders().unwrap();
            assert_eq!(contenders.len(), 1, "{path:?}");
            assert_eq!(contenders[0].node_name, node_name);
            // Someone else sees it busy, by the same name.
            let other = DistributedMutex::new(&common::client(), &path).unwrap();
            assert!(other.try_lock().unwrap().is_none(), "{path:?}");
            drop(guard);
            assert!(mutex.contenders().unwrap().is_empty(), "{path:?}");
            assert!(raw().children(&path).is_empty(), "{path:?}");
        }

        // Every recipe, on one Unicode path each.
        let rw = DistributedRwLock::new(&client, &format!("{root}/読み書き")).unwrap();
        drop(rw.read().unwrap());
        drop(rw.write().unwrap());
        assert!(rw.contenders().unwrap().is_empty());
        let semaphore = Semaphore::new(&client, &format!("{root}/семафор"), 2).unwrap();
        let permit = semaphore.acquire_many(2).unwrap();
        assert_eq!(semaphore.contenders().unwrap().len(), 2);
        drop(permit);
        let election = LeaderElection::new(&client, &format!("{root}/élection"))
            .unwrap()
            .participant_id("ünï 锁 participant");
        let leader = election.participate().unwrap();
        assert_eq!(
            election.current_leader().unwrap().unwrap().owner,
            "ünï 锁 participant"
        );
        drop(leader);
        client
            .set_data(&format!("{root}/データ/ключ"), "ünï 锁".as_bytes())
            .unwrap();
        assert_eq!(
            client.get_data(&format!("{root}/データ/ключ")).unwrap(),
            Some("ünï 锁".as_bytes().to_vec())
        );
    }

    #[test]
    fn long_but_valid_paths_work() {
        let client = common::client();
        let root = format!("/{}", tag());
        // One 4000-byte segment, and a path 60 levels deep: both under the 4096-byte limit.
        for path in [
            format!("{root}/{}", "l".repeat(4000)),
            format!("{root}{}", "/deep".repeat(60)),
            format!("{root}/{}", "锁".repeat(1300)),
        ] {
            assert!(path.len() <= 4096);
            let mutex = DistributedMutex::new(&client, &path).unwrap();
            let guard = mutex.try_lock().unwrap().expect("free");
            assert_eq!(raw().children(&path).len(), 1);
            drop(guard);
            assert!(mutex.contenders().unwrap().is_empty());
        }
        // One byte too many is refused.
        let over = format!("/{}", "o".repeat(4096));
        assert!(matches!(
            DistributedMutex::new(&client, &over),
            Err(Error::InvalidPath { .. })
        ));
    }

    #[test]
    fn oversized_data_is_an_error_and_creates_nothing() {
        // ZooKeeper refuses requests larger than jute.maxbuffer (1 MiB by default) by dropping the
        // connection. Whatever zklock makes of that, it must be an error within the call's
        // deadline (one session timeout, 4 s here), with no node left.
        let client = common::client();
        let root = format!("/{}", tag());
        let huge = "x".repeat((1 << 20) + 1);

        let started = Instant::now();
        let outcome = client.set_data(&format!("{root}/data"), huge.as_bytes());
        assert!(outcome.is_err(), "{:?}", outcome.map(|_| "stored 1 MiB"));
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        assert!(!raw().exists(&format!("{root}/data")));

        let election = LeaderElection::new(&client, &format!("{root}/election"))
            .unwrap()
            .participant_id(&huge);
        let started = Instant::now();
        let outcome = election.participate_timeout(Duration::from_secs(2));
        assert!(outcome.is_err(), "{:?}", outcome.map(|g| g.is_some()));
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(
            raw().children(&format!("{root}/election")),
            Vec::<String>::new()
        );
        assert!(election.contenders().unwrap().is_empty());

        // The session survived all that, and large data under the limit works.
        let big = "y".repeat(900 * 1024);
        let election = LeaderElection::new(&client, &format!("{root}/big-election"))
            .unwrap()
            .participant_id(&big);
        let leader = election
            .participate_timeout(Duration::from_secs(5))
            .unwrap();
        assert!(leader.is_some());
        assert_eq!(election.contenders().unwrap()[0].owner.len(), big.len());
        drop(leader);
        client
            .set_data(&format!("{root}/big"), big.as_bytes())
            .unwrap();
        assert_eq!(
            client
                .get_data(&format!("{root}/big"))
                .unwrap()
                .map(|d| d.len()),
            Some(big.len())
        );
    }

    #[test]
    fn garbage_connect_strings_give_typed_errors_in_time() {
        let cs = common::connect_string();
        let tag = tag();
        let long_host = "h".repeat(300);
        let huge = "x".repeat(100_000);
        let strings = vec![
            String::new(),
            " ".to_owned(),
            "\t\n".to_owned(),
            ",".to_owned(),
            ",,".to_owned(),
            "a:1,,b:2".to_owned(),
            ":".to_owned(),
            ":2181".to_owned(),
            "127.0.0.1:0".to_owned(),
            "127.0.0.1:65536".to_owned(),
            "127.0.0.1:99999".to_owned(),
            "127.0.0.1:-1".to_owned(),
            "127.0.0.1:abc".to_owned(),
            "127.0.0.1:2181:2181".to_owned(),
            "[::1".to_owned(),
            "[::1]x".to_owned(),
            "a:b:c:d".to_owned(),
            "\0".to_owned(),
            "\u{1}:2181".to_owned(),
            "ünïcödé.invalid:2181".to_owned(),
            "🔒:2181".to_owned(),
            "no-such-host.invalid:2181".to_owned(),
            format!("{long_host}:2181"),
            huge,
            "127.0.0.1:1".to_owned(),
            // garbage chroots
            format!("{cs}/{tag}//a"),
            format!("{cs}/{tag}/.."),
            format!("{cs}/{tag}/."),
            format!("{cs}/{tag}/"),
            format!("{cs}/{tag}/a\nb"),
            format!("{cs}/{tag}/a\u{0}b"),
            format!("{cs}/{tag}/{}", "c".repeat(5 * 1024)),
            format!("{cs}/{tag}\u{7f}"),
        ];
        for s in &strings {
            let started = Instant::now();
            let outcome = Client::builder(s)
                .connect_timeout(Duration::from_secs(1))
                .connect();
            let took = started.elapsed();
            match outcome {
                Err(Error::InvalidConnectString { connect_string, .. }) => {
                    assert_eq!(&connect_string, s)
                }
                Err(Error::Connect { .. }) => {}
                other => panic!("{s:?}: expected a connect-string error, got {other:?}"),
            }
            assert!(took < Duration::from_secs(5), "{s:?} took {took:?}");
        }
        assert_eq!(
            raw().top_level_with(&tag),
            Vec::<String>::new(),
            "left behind"
        );
    }

    #[test]
    fn odd_credentials_give_typed_outcomes() {
        let cs = common::connect_string();
        let path = format!("/{}", tag());
        // The digest scheme takes any user:password; odd ones are just identities.
        for (i, (user, password)) in [
            ("", ""),
            ("a:b", "c:d"),
            ("ünï锁", "pässwörd"),
            ("tab\tnewline\n", "\u{1}"),
            ("long", &*"p".repeat(64 * 1024)),
        ]
        .into_iter()
        .enumerate()
        {
            let client = Client::builder(&cs)
                .auth_digest(user, password)
                .acl(zklock::acl::NodeAcl::CreatorOnly)
                .connect()
                .unwrap_or_else(|e| panic!("{user:?}: {e}"));
            // Each identity under a top-level path of its own: a creator-only parent would keep
            // the others out.
            let mutex = DistributedMutex::new(&client, &format!("{path}-{i}/lock")).unwrap();
            assert!(mutex.try_lock().unwrap().is_some(), "{user:?}");
        }
        // Schemes the server does not know end the session: AuthFailed, at once.
        for scheme in ["no-such-scheme", "DIGEST", "sasl"] {
            let started = Instant::now();
            let outcome = Client::builder(&cs)
                .auth(scheme, b"whatever")
                .connect()
                .and_then(|c| {
                    DistributedMutex::new(&c, &format!("{path}/x"))?
                        .try_lock()
                        .map(drop)
                });
            assert_eq!(outcome.unwrap_err(), Error::AuthFailed, "{scheme:?}");
            assert!(started.elapsed() < Duration::from_secs(3), "{scheme:?}");
        }
        // An unnamed scheme is refused before connecting.
        let unnamed = Client::builder(&cs).auth("", b"whatever").connect();
        assert!(
            matches!(unnamed, Err(Error::InvalidArgument(_))),
            "{unnamed:?}"
        );
        // A credential larger than the server accepts: an error within the connect timeout.
        let started = Instant::now();
        let outcome = Client::builder(&cs)
            .connect_timeout(Duration::from_secs(2))
            .auth_digest("u", &"p".repeat(2 << 20))
            .connect();
        assert!(outcome.is_err());
        assert!(started.elapsed() < Duration::from_secs(6));
    }

    #[test]
    fn bad_counts_are_invalid_argument_and_create_nothing() {
        let client = common::client();
        let tag = tag();
        let path = format!("/{tag}");
        assert!(matches!(
            Semaphore::new(&client, &path, 0),
            Err(Error::InvalidArgument(_))
        ));
        let semaphore = Semaphore::new(&client, &path, 3).unwrap();
        for count in [0, 4, usize::MAX] {
            assert!(matches!(
                semaphore.acquire_many_timeout(count, Duration::from_millis(100)),
                Err(Error::InvalidArgument(_))
            ));
        }
        assert!(matches!(
            MultiLock::new(&client)
                .mutex(&path)
                .unwrap()
                .write_lock(&path),
            Err(Error::InvalidArgument(_))
        ));
        assert_eq!(raw().top_level_with(&tag), Vec::<String>::new());
    }

    // ------------------------------------------------ library bugs found here, fixed, kept as tests

    #[test]
    fn names_zookeeper_cannot_store_are_refused_up_front() {
        let client = common::client();
        let tag = tag();
        // ZooKeeper validates paths as Java UTF-16: surrogates (every character above U+FFFF)
        // and U+E000..U+F8FF are refused. zklock checks only U+F000..U+F8FF.
        for name in ["\u{e000}", "\u{efff}", "🔒", "ℌ𝔢𝔩𝔩𝔬", "\u{10ffff}"] {
            let path = format!("/{tag}/{name}");
            assert_refused_everywhere(&client, &path);
            let chroot = format!("{}/{tag}/{name}", common::connect_string());
            assert!(
                matches!(
                    Client::builder(&chroot).connect(),
                    Err(Error::InvalidConnectString { .. })
                ),
                "{chroot:?}"
            );
        }
        assert_eq!(
            raw().top_level_with(&tag),
            Vec::<String>::new(),
            "left behind"
        );
    }

    #[test]
    fn oversized_participant_id_is_an_error_not_a_hang() {
        let client = common::client();
        let root = format!("/{}", tag());
        client.set_data(&root, b"").unwrap();
        let held = DistributedMutex::new(&client, &format!("{root}/held")).unwrap();
        let guard = held.lock().unwrap();
        let huge = "x".repeat((1 << 20) + 1);

        let election = LeaderElection::new(&client, &root)
            .unwrap()
            .participant_id(&huge);
        let outcome = election.participate_timeout(Duration::from_secs(2));
        assert!(outcome.is_err(), "{:?}", outcome.map(|g| g.is_some()));

        let (tx, rx) = std::sync::mpsc::channel();
        let forever = LeaderElection::new(&client, &root)
            .unwrap()
            .participant_id(&huge);
        std::thread::spawn(move || {
            let _ = tx.send(forever.participate().map(drop));
        });
        let started = Instant::now();
        let mut suspended = 0;
        let outcome = loop {
            if let Ok(outcome) = rx.try_recv() {
                break Some(outcome);
            }
            if started.elapsed() > Duration::from_secs(15) {
                break None;
            }
            if !guard.is_held() {
                suspended += 1;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(
            matches!(outcome, Some(Err(_))),
            "participate() with a 1 MiB id: {outcome:?}"
        );
        assert_eq!(suspended, 0, "the held lock was disturbed");
    }

    #[test]
    fn url_form_connect_strings_work() {
        let cs = common::connect_string();
        for s in [format!("tcp://{cs}"), format!("tcp://{cs}/{}", tag())] {
            let client = Client::builder(&s)
                .connect_timeout(Duration::from_secs(3))
                .connect()
                .unwrap_or_else(|e| panic!("{s:?}: {e}"));
            assert!(client.session_id() != 0);
        }
    }
}

mod messages {
    //! Messages that must not mislead, each against a real server: a wrong
    //! digest password, a release after `Client::close`, a connect that fails fast, a refusal
    //! inside a chroot.

    use crate::common;
    use common::{client_as, RawClient};
    use std::time::Duration;
    use zklock::acl::{NodeAcl, ParentAcl, Permission};
    use zklock::{Client, DistributedMutex, Error};

    #[test]
    fn a_wrong_digest_password_is_told_it_is_another_identity() {
        let path = common::lock_path("wrong-password");
        let alice = client_as("alice", NodeAcl::CreatorOnlyAnyoneRead);
        let _held = DistributedMutex::new(&alice, &path)
            .unwrap()
            .lock()
            .unwrap();
        // The digest scheme accepts any password at login: the session is simply someone else.
        let mistyped = common::builder(&common::connect_string(), common::SESSION_TIMEOUT)
            .auth_digest("alice", "alice-passwrod")
            .acl(NodeAcl::CreatorOnlyAnyoneRead)
            .connect()
            .expect("a wrong digest password is no login failure");
        let refused = DistributedMutex::new(&mistyped, &path)
            .unwrap()
            .try_lock()
            .unwrap_err();
        let Error::NoAuth { ref identity, .. } = refused else {
            panic!("expected NoAuth, got {refused:?}");
        };
        assert_eq!(identity, "digest:alice");
        let shown = refused.to_string();
        assert!(
            shown.contains("wrong password as another identity") && !shown.contains("passwrod"),
            "{shown}"
        );
    }

    #[test]
    fn unlock_after_close_is_closed_not_lost() {
        let client = common::client();
        let path = common::lock_path("unlock-after-close");
        let guard = DistributedMutex::new(&client, &path)
            .unwrap()
            .lock()
            .unwrap();
        let node = guard.node_path().to_owned();
        client.close().unwrap();
        assert_eq!(guard.unlock(), Err(Error::Closed));
        // Closing ended the session, and the node with it.
        assert!(!RawClient::connect(&common::connect_string()).exists(&node));
    }

    #[test]
    fn a_connect_failing_fast_says_how_long_it_took() {
        let port = common::servers::free_port();
        let err = Client::builder(&format!("127.0.0.1:{port}"))
            .connect_timeout(Duration::from_secs(30))
            .fail_fast_if_refused(true)
            .connect()
            .unwrap_err();
        let Error::Connect { waited, .. } = err else {
            panic!("expected Connect, got {err:?}");
        };
        let shown = err.to_string();
        eprintln!("{shown}");
        assert!(waited > Duration::ZERO, "{shown}");
        assert!(!shown.contains("after 0ns"), "{shown}");
    }

    #[test]
    fn inside_a_chroot_a_refusal_names_the_node_the_server_refused() {
        // A chroot of alice's that others may read but not create in.
        let chroot = common::lock_path("refused-chroot");
        let at_chroot = format!("{}{chroot}", common::connect_string());
        let alice = client_as("alice", NodeAcl::CreatorOnlyAnyoneRead);
        let made = common::builder(&at_chroot, common::SESSION_TIMEOUT)
            .auth_digest("alice", "alice-password")
            .acl(NodeAcl::CreatorOnlyAnyoneRead)
            .parent_acl(ParentAcl::SameAsLocks)
            .connect()
            .unwrap();
        made.close().unwrap();
        drop(alice);
        let bob = common::builder(&at_chroot, common::SESSION_TIMEOUT)
            .auth_digest("bob", "bob-password")
            .connect()
            .unwrap();
        let refused = DistributedMutex::new(&bob, "/job")
            .unwrap()
            .try_lock()
            .unwrap_err();
        let Error::NoAuth {
            ref path,
            permission,
            ..
        } = refused
        else {
            panic!("expected NoAuth, got {refused:?}");
        };
        assert_eq!(
            (path.as_str(), permission),
            (format!("{chroot}/job").as_str(), Some(Permission::Create))
        );
        let shown = refused.to_string();
        assert!(
            shown.contains(&format!("CREATE on {chroot} (to create {chroot}/job)")),
            "{shown}"
        );
        bob.close().unwrap();
        // The chroot is a persistent node (never a container): remove it. Deleting it is a right
        // over its open parent.
        RawClient::connect(&common::connect_string()).delete_tree(&chroot);
    }
}
