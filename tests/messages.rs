//! Messages that must not mislead (issue 33, item 8), each against a real server: a wrong
//! digest password, a release after `Client::close`, a connect that fails fast, a refusal
//! inside a chroot.

mod common;

use std::time::Duration;

use common::{client_as, RawClient};
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
