//! Authentication and ACLs on the nodes zklock creates, against a real server (digest scheme:
//! built into every ZooKeeper server, no server configuration needed).

mod common;

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
