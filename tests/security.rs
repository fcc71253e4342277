//! Authentication and ACLs on the nodes zklock creates, against a real server (digest scheme:
//! built into every ZooKeeper server, no server configuration needed).

mod common;

use common::client_as;
use zklock::{Client, DistributedMutex, Error, NodeAcl};

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
