//! One recipe per lock path: a contender refuses to queue where another recipe's nodes are
//! (`Error::RecipeConflict`, naming both), for every pair of recipes, blocking and async,
//! leaving nothing behind; inspection reports every recipe it finds at a path.
//!
//! Before 0.2 a `DistributedRwLock::try_write` and a `LeaderElection::try_participate` on a
//! path that a `DistributedMutex` held both succeeded: three holders of one path.

use std::any::Any;
use std::collections::BTreeSet;
use std::time::Duration;

use zklock::inspect::LockKind;
use zklock::{
    Client, DistributedMutex, DistributedRwLock, Error, LeaderElection, MultiLock, Semaphore,
};

mod common;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Recipe {
    Mutex,
    Read,
    Write,
    Election,
    Semaphore,
    /// A multi-lock whose member at the path is a mutex.
    MultiMutex,
    /// A multi-lock whose member at the path is a write lock.
    MultiWrite,
}

use Recipe::*;

impl Recipe {
    /// The recipe's name in `Error::RecipeConflict`.
    fn name(self) -> &'static str {
        match self {
            Mutex | MultiMutex => "mutex",
            Read | Write | MultiWrite => "rwlock",
            Election => "election",
            Semaphore => "semaphore",
        }
    }
}

type Guard = Box<dyn Any + Send>;

fn boxed<G: Any + Send>(guard: zklock::Result<Option<G>>) -> zklock::Result<Option<Guard>> {
    guard.map(|g| g.map(|g| Box::new(g) as Guard))
}

/// `try_*` of `recipe` on `path`, blocking or async (on futures' own executor).
fn try_take(
    client: &Client,
    recipe: Recipe,
    path: &str,
    async_: bool,
) -> zklock::Result<Option<Guard>> {
    // The path's other member of a multi-lock: a path of its own.
    let other = format!("{path}-other");
    macro_rules! take {
        ($lock:expr, $try:ident, $try_async:ident) => {{
            let lock = $lock;
            if async_ {
                boxed(futures::executor::block_on(lock.$try_async()))
            } else {
                boxed(lock.$try())
            }
        }};
    }
    match recipe {
        Mutex => take!(
            DistributedMutex::new(client, path)?,
            try_lock,
            try_lock_async
        ),
        Read => take!(
            DistributedRwLock::new(client, path)?,
            try_read,
            try_read_async
        ),
        Write => take!(
            DistributedRwLock::new(client, path)?,
            try_write,
            try_write_async
        ),
        Election => take!(
            LeaderElection::new(client, path)?,
            try_participate,
            try_participate_async
        ),
        Semaphore => take!(
            Semaphore::new(client, path, 2)?,
            try_acquire,
            try_acquire_async
        ),
        MultiMutex => take!(
            MultiLock::new(client).mutex(path)?.mutex(&other)?,
            try_lock,
            try_lock_async
        ),
        MultiWrite => take!(
            MultiLock::new(client).write_lock(path)?.mutex(&other)?,
            try_lock,
            try_lock_async
        ),
    }
}

/// The nodes under `path` and, for a semaphore's `leases` and `locks`, under those. (Those two
/// are containers: a refused semaphore may leave its empty gate, which keeps no one out and
/// which the server sweeps like any empty lock path.)
fn tree(client: &Client, path: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for child in client.children(path).unwrap().unwrap_or_default() {
        if child == "leases" || child == "locks" {
            let below = client.children(&format!("{path}/{child}")).unwrap();
            for name in below.unwrap_or_default() {
                names.insert(format!("{child}/{name}"));
            }
        } else {
            names.insert(child);
        }
    }
    names
}

fn same_recipe(a: Recipe, b: Recipe) -> bool {
    a.name() == b.name()
}

#[test]
fn every_pair_of_recipes_on_one_path_is_refused_by_name_and_leaves_nothing() {
    let holders = [Mutex, Read, Write, Election, Semaphore];
    let takers = [
        Mutex, Read, Write, Election, Semaphore, MultiMutex, MultiWrite,
    ];
    let client = common::client();
    let mut pairs = 0;
    for holder in holders {
        let path = common::lock_path(&format!("mixed-{}", holder.name()));
        let _held = try_take(&client, holder, &path, false)
            .unwrap()
            .expect("a free path");
        let before = tree(&client, &path);
        for taker in takers.into_iter().filter(|&t| !same_recipe(holder, t)) {
            for async_ in [false, true] {
                // Another session, as another process would be.
                let other = common::client();
                match try_take(&other, taker, &path, async_) {
                    Err(Error::RecipeConflict {
                        path: p,
                        ours,
                        theirs,
                    }) => {
                        assert_eq!(p, path, "{taker:?} after {holder:?}");
                        assert_eq!(ours, taker.name(), "{taker:?} after {holder:?}");
                        assert_eq!(theirs, holder.name(), "{taker:?} after {holder:?}");
                    }
                    Ok(Some(_)) => {
                        panic!("{taker:?} (async: {async_}) took {path}, held by a {holder:?}")
                    }
                    other => panic!("{taker:?} (async: {async_}) after {holder:?}: {other:?}"),
                }
                // Nothing of the refused contender's is left (its node goes with the call or,
                // at the latest, with its session).
                assert!(
                    common::eventually(Duration::from_secs(5), || tree(&client, &path) == before),
                    "{taker:?} (async: {async_}) after {holder:?} left {:?}, before {before:?}",
                    tree(&client, &path)
                );
                other.close().unwrap();
                pairs += 1;
            }
        }
    }
    assert_eq!(pairs, 2 * (5 + 4 + 4 + 6 + 6));
}

#[test]
fn a_refused_recipe_leaves_the_holder_holding_and_the_same_recipe_still_queues() {
    let client = common::client();
    let path = common::lock_path("mixed-holder");
    let mutex = DistributedMutex::new(&client, &path).unwrap();
    let held = mutex.lock().unwrap();
    let other = common::client();
    let write = DistributedRwLock::new(&other, &path).unwrap();
    assert!(matches!(
        write.try_write(),
        Err(Error::RecipeConflict {
            theirs: "mutex",
            ours: "rwlock",
            ..
        })
    ));
    assert!(held.is_held());
    // A mutex on another session queues behind the holder as always.
    let second = DistributedMutex::new(&other, &path).unwrap();
    assert!(second.try_lock().unwrap().is_none());
    held.unlock().unwrap();
    let g = second.try_lock().unwrap().expect("free after the unlock");
    g.unlock().unwrap();
    // Once the mutex's nodes are gone, the path is free for another recipe.
    let w = write.try_write().unwrap().expect("no mutex node left");
    w.unlock().unwrap();
}

#[test]
fn inspection_reports_every_recipe_at_a_path() {
    let client = common::client();
    let path = common::lock_path("mixed-inspect");
    let mutex = DistributedMutex::new(&client, &path).unwrap();
    let _held = mutex.lock().unwrap();
    // A writer's node as another client (or zklock before 0.2) could have left it.
    let writer = format!("{path}/_c_00000000-0000-4000-8000-000000000000-__WRIT__0000000009");
    let _raw = common::raw::create_ephemeral(&writer);
    let found = client.inspect(&path, None).unwrap();
    assert_eq!(found.kinds, [LockKind::Mutex, LockKind::RwLock]);
    assert_eq!(found.kind, Some(LockKind::Mutex));
    let kinds: Vec<LockKind> = found.nodes.iter().map(|n| n.kind).collect();
    assert_eq!(kinds, [LockKind::Mutex, LockKind::RwLock]);
    // Neither recipe queues more beside the other.
    let other = common::client();
    assert!(matches!(
        DistributedMutex::new(&other, &path).unwrap().try_lock(),
        Err(Error::RecipeConflict {
            theirs: "rwlock",
            ..
        })
    ));
    assert!(matches!(
        DistributedRwLock::new(&other, &path).unwrap().try_read(),
        Err(Error::RecipeConflict {
            theirs: "mutex",
            ..
        })
    ));
}

#[test]
fn a_semaphores_empty_nodes_keep_no_other_recipe_out() {
    let client = common::client();
    let path = common::lock_path("mixed-empty-semaphore");
    let semaphore = Semaphore::new(&client, &path, 1).unwrap();
    semaphore.acquire().unwrap().unlock().unwrap();
    // `leases` (and maybe `locks`) stay until the server sweeps them; nobody holds.
    assert!(client
        .children(&path)
        .unwrap()
        .unwrap()
        .contains(&"leases".to_owned()));
    let mutex = DistributedMutex::new(&client, &path).unwrap();
    let g = mutex
        .try_lock()
        .unwrap()
        .expect("no semaphore holds the path");
    // While the mutex holds, the semaphore is refused in its turn, and takes no lease.
    assert!(matches!(
        semaphore.try_acquire(),
        Err(Error::RecipeConflict {
            ours: "semaphore",
            theirs: "mutex",
            ..
        })
    ));
    assert!(semaphore.contenders().unwrap().is_empty());
    g.unlock().unwrap();
}
