//! zklock against secure ZooKeeper servers that this test starts itself with
//! `scripts/start-zk.sh --sasl` (SASL DIGEST-MD5 required of every session; users alice and bob)
//! and `scripts/start-zk.sh --tls` (TLS client port, client certificates required), each on
//! free ports of its own so they never meet the plain test servers. Each is started once per
//! test binary, by the first test that needs it, and stopped when the binary exits.
//!
//! The tests skip (with a message on stderr) only when the tools the servers need are
//! missing: java, and for TLS also keytool and openssl; under `CI=true` they fail instead
//! (`common::skip_unless_ci`).
//!
//! A binary of its own: its tests bound a connect to a few seconds, which the ZooKeeper servers
//! that `security.rs` starts (two releases) would eat into on a loaded machine.
#![cfg(any(feature = "sasl", feature = "tls"))]

mod common;

use std::time::{Duration, Instant};

#[cfg(feature = "sasl")]
use common::secure::sasl_server;
#[cfg(feature = "tls")]
use common::secure::tls_server;
use common::secure::{lock_path, Server};
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
        // as an unauthenticated session. First the server, on the wire, with no zklock in
        // between: its answer to an unauthenticated request is SessionClosedRequireSaslAuth
        // (-124) and the connection is closed. Then zklock must report exactly that. Checking the
        // server first tells a server that did not enforce from a client that ignored the
        // refusal: this part once let a session through, and was never seen to again.
        let host = server.connect.split('/').next().unwrap_or_default();
        let (code, closed) = common::raw::unauthenticated_exists(host);
        assert_eq!(
            (code, closed),
            (-124, true),
            "the --sasl server must refuse a session without SASL and close it"
        );
        let started = Instant::now();
        let outcome = Client::builder(&server.connect).connect().and_then(|c| {
            DistributedMutex::new(&c, &lock_path("nosasl"))?
                .try_lock()
                .map(drop)
        });
        assert_eq!(
            outcome.err(),
            Some(Error::AuthFailed),
            "zklock let a session without SASL through a server that refuses it"
        );
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
        let Some(server) = sasl_server("empty_sasl_user_fails_within_the_connect_timeout") else {
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
