//! Placing our node in a queue: a protected ephemeral-sequential node, created at most once
//! whatever replies are lost, behind the [`NodeStore`] seam so that unit tests can drive every
//! outcome of a create.

use std::sync::Arc;
use std::time::Instant;

use log::{debug, warn};

use crate::error::{Error, Result};
use crate::znode::layout::protected_prefix;

use super::claim::node_vanished;
use super::seam::{NodeStore, ZkSession};
use super::session_view::{Children, Create, Elapsed, Listed, NodeStat};
use super::wait::Budget;
use super::withdraw::{OurNode, Withdrawals};

/// How many times a missing lock path is created before giving up (a racing container reaper
/// can delete an empty parent between our mkdir and our create).
const PARENT_ATTEMPTS: u32 = 5;

/// How many creates in a row may go unanswered (connection lost, nothing created) before the
/// acquisition gives up with [`Error::ConnectionLoss`] instead of retrying for ever.
const UNANSWERED_CREATES: u32 = 10;

/// Our freshly created node, deleted on drop unless claimed.
pub(super) struct Created<S: ZkSession> {
    pub(super) contender: OurNode<S>,
    pub(super) name: String,
    pub(super) stat: NodeStat,
    /// A listing of the lock path sent after the create (with the lock path's stat).
    pub(super) children: Listed,
    /// The lock path's creation time: the generation of our fencing token.
    pub(super) generation: i64,
}

/// Creates our protected ephemeral-sequential node `<uuid-prefix><lock_name><seq>` under
/// `lock_path` (creating the path if needed), surviving a lost reply without ever leaving two
/// nodes. [`Elapsed`] if the deadline passed first; a node created late is then deleted in
/// the background.
pub(super) async fn create_node<S: ZkSession>(
    session: &Arc<S>,
    lock_path: &str,
    lock_name: &str,
    data: &[u8],
    attempt: &Budget,
    deadline: Option<Instant>,
) -> Result<std::result::Result<Created<S>, Elapsed>> {
    let prefix = format!("{}{lock_name}", protected_prefix(&session.unique_id()));
    // Before the create is sent: what a node was created after (`examples/bench.rs hot`
    // counts another process's holds from here).
    debug!(
        "creating {lock_path}/{prefix} (session {:#x})",
        session.id()
    );
    let withdrawals = &attempt.withdrawals;
    let placed = place_node(
        session.as_ref(),
        lock_path,
        &prefix,
        data,
        deadline,
        withdrawals,
    )
    .await?;
    let (name, stat, children, parent) = match placed {
        Ok(found) => found,
        Err(elapsed) => return Ok(Err(elapsed)),
    };
    let node_path = format!("{lock_path}/{name}");
    debug!("created {node_path} (session {:#x})", session.id());
    let mut contender = OurNode {
        session: session.clone(),
        node_path,
        armed: true,
        withdrawals: attempt.withdrawals.clone(),
    };
    let children = match (children, parent) {
        (Some(children), Some(parent)) => Children::new(children, parent),
        // No listing came with the create (other creates were in flight on the session, the
        // listing was lost, or the create's reply was, and the node was found by its prefix):
        // one sent after the create was answered, shared with the session's other creates.
        _ => {
            session
                .list_since(lock_path, deadline, session.now())
                .await?
        }
    };
    // While our node exists the lock path cannot be re-created; one created after our node
    // means ours is gone already.
    if children.stat.czxid >= stat.czxid {
        return Err(node_vanished(&mut contender, lock_path));
    }
    let generation = children.stat.ctime;
    Ok(Ok(Created {
        contender,
        name,
        stat,
        children,
        generation,
    }))
}

/// Our node's name and stat, the listing it was found in, and the lock path's stat from that
/// listing's reply.
type FoundNode = (String, NodeStat, Option<Vec<String>>, Option<NodeStat>);

/// The decisions of [`create_node`]: creates a node named `prefix` + sequence, looking for it
/// by its unique prefix after a lost reply instead of creating a second one, recreating a
/// missing lock path a few times, and giving up on a create the server keeps dropping.
async fn place_node(
    store: &impl NodeStore,
    lock_path: &str,
    prefix: &str,
    data: &[u8],
    deadline: Option<Instant>,
    withdrawals: &Withdrawals,
) -> Result<std::result::Result<FoundNode, Elapsed>> {
    let (mut parent_attempts, mut unanswered) = (0, 0);
    loop {
        // Dropped unanswered (a cancel), the create is withdrawn like a node we know: a caller
        // that stops waits for it.
        let settling = || withdrawals.begin();
        match store
            .create(lock_path, prefix, data, deadline, settling)
            .await?
        {
            Create::Created {
                name,
                stat,
                children,
                parent,
            } => return Ok(Ok((name, stat, children, parent))),
            Create::Elapsed(elapsed) => return Ok(Err(elapsed)),
            Create::Unknown => {
                // The reply was lost: look for the node by its unique prefix before creating
                // again, so there is never a second node of ours.
                if let Some(found) = find_created(store, lock_path, prefix, deadline).await? {
                    return Ok(Ok(found));
                }
                // A create the server keeps dropping the connection over is not an outage.
                unanswered += 1;
                if unanswered >= UNANSWERED_CREATES {
                    store.sweep(lock_path, prefix);
                    return Err(Error::connection_loss());
                }
            }
            Create::ParentMissing if parent_attempts < PARENT_ATTEMPTS => {
                parent_attempts += 1;
                store.ensure_path(lock_path, deadline).await?;
            }
            Create::ParentMissing => {
                warn!("{lock_path} keeps disappearing while we create our node in it");
                return Err(Error::NoNode {
                    path: lock_path.to_owned(),
                });
            }
        }
    }
}

/// After a create whose reply was lost: our node by its prefix, if the create executed. On any
/// error, or if dropped meanwhile, the prefix is swept in the background, so a late node
/// cannot linger.
async fn find_created(
    store: &impl NodeStore,
    lock_path: &str,
    prefix: &str,
    deadline: Option<Instant>,
) -> Result<Option<FoundNode>> {
    /// Sweeps the prefix unless disarmed.
    struct SweepUnlessFound<'a, S: NodeStore>(&'a S, &'a str, &'a str, bool);
    impl<S: NodeStore> Drop for SweepUnlessFound<'_, S> {
        fn drop(&mut self) {
            if self.3 {
                self.0.sweep(self.1, self.2);
            }
        }
    }
    let mut sweep = SweepUnlessFound(store, lock_path, prefix, true);
    store.wait_connected(deadline).await?;
    // We may be talking to another server now, one that has not yet applied our create:
    // without the sync its listing could miss our node, and we would create a second one
    // that waits for ever behind the first.
    let listed = match store.sync(lock_path, deadline).await {
        Ok(()) => store.list(lock_path, deadline).await,
        Err(err) => Err(err),
    };
    let children = match listed {
        // No lock path, so no node of ours in it (a container goes only once empty): the
        // caller creates again, and makes the lock path first.
        Err(Error::NoNode { .. }) => {
            sweep.3 = false;
            return Ok(None);
        }
        listed => listed?,
    };
    let Some(found) = children.iter().find(|c| c.starts_with(prefix)).cloned() else {
        sweep.3 = false;
        return Ok(None);
    };
    let path = format!("{lock_path}/{found}");
    // `None`: gone again (session trouble); the caller creates anew.
    let stat = store.stat(&path, deadline).await?;
    sweep.3 = false;
    Ok(stat.map(|stat| {
        debug!("found {path} after a lost create reply");
        (found, stat, Some(children), None)
    }))
}

#[cfg(test)]
mod tests {
    //! The waiting core's decisions about placing our node, driven through [`NodeStore`] on
    //! the simulated ZooKeeper, with each create's fate scripted (the integration tests prove
    //! the same against a real server, with real faults, in seconds rather than milliseconds).

    use std::time::Duration;

    use super::*;
    use crate::core::sim::store::Store;
    use crate::core::sim::world::CreateFault as Step;

    const PREFIX: &str = "_c_1-lock-";

    fn scripted(steps: &[Step]) -> Store {
        let store = Store::new("/lock");
        store.script(steps);
        store
    }

    impl Store {
        fn script(&self, steps: &[Step]) {
            let id = self.session.id;
            self.sim
                .world
                .lock()
                .create_faults
                .insert(id, steps.iter().copied().collect());
        }

        fn calls(&self) -> Vec<&'static str> {
            self.sim.world.lock().session(self.session.id).calls.clone()
        }

        fn swept(&self) -> Vec<String> {
            self.sim.world.lock().session(self.session.id).swept.clone()
        }

        fn children(&self) -> Vec<String> {
            self.sim.settle();
            self.sim.world.lock().children("/lock")
        }
    }

    /// Places our node, with a deadline a second away on the virtual clock.
    fn place(store: &Store) -> Result<std::result::Result<FoundNode, Elapsed>> {
        let deadline = store.session.now() + Duration::from_secs(1);
        let session = store.session.clone();
        let mut placing = Box::pin(async move {
            place_node(
                session.as_ref(),
                "/lock",
                PREFIX,
                b"",
                Some(deadline),
                &Withdrawals::default(),
            )
            .await
        });
        store.sim.run(placing.as_mut()).expect("placing ends")
    }

    #[test]
    fn a_lost_reply_to_an_executed_create_finds_the_node_after_a_sync() {
        let store = scripted(&[Step::ApplyLost]);
        let (name, _, children, _) = place(&store).unwrap().expect("placed");
        assert_eq!(name, "_c_1-lock-0000000000");
        assert_eq!(store.children().len(), 1, "never created twice");
        assert_eq!(children.unwrap(), [name]);
        assert_eq!(store.calls(), ["create", "sync", "list"]);
    }

    #[test]
    fn a_lost_create_that_never_executed_is_sent_again() {
        let store = scripted(&[Step::Lost, Step::Lost, Step::Apply]);
        let (name, _, _, _) = place(&store).unwrap().expect("placed");
        assert_eq!(store.children().as_slice(), [name]);
        let creates = store.calls().iter().filter(|c| **c == "create").count();
        assert_eq!(creates, 3);
    }

    #[test]
    fn a_create_that_is_never_answered_gives_up_and_sweeps() {
        let store = scripted(&[Step::Lost; UNANSWERED_CREATES as usize]);
        assert!(matches!(place(&store), Err(Error::ConnectionLoss { .. })));
        assert_eq!(store.swept().as_slice(), [PREFIX]);
    }

    #[test]
    fn a_missing_lock_path_is_created_a_few_times_then_reported() {
        let store = Store::without_path("/lock");
        assert!(place(&store).unwrap().is_ok());
        assert_eq!(store.calls(), ["create", "ensure_path", "create"]);

        let store = scripted(&[Step::ParentGone; 1 + PARENT_ATTEMPTS as usize]);
        assert!(matches!(place(&store), Err(Error::NoNode { .. })));
        let ensures = store
            .calls()
            .iter()
            .filter(|c| **c == "ensure_path")
            .count();
        assert_eq!(ensures, PARENT_ATTEMPTS as usize);
    }

    #[test]
    fn a_lost_create_under_a_missing_lock_path_makes_the_path_and_creates_again() {
        let store = Store::without_path("/lock");
        store.script(&[Step::Lost]);
        let (name, _, _, _) = place(&store).unwrap().expect("placed");
        assert_eq!(store.children().as_slice(), [name]);
        assert!(store.calls().contains(&"ensure_path"));
        assert!(store.swept().is_empty());
    }

    #[test]
    fn a_create_past_its_deadline_is_left_to_the_background() {
        let store = scripted(&[Step::Stall]);
        assert_eq!(place(&store).unwrap().err(), Some(Elapsed));
    }

    #[test]
    fn a_failed_lookup_sweeps_whatever_the_create_may_have_left() {
        let store = scripted(&[Step::ApplyLost]);
        // The lookup's listing (after the sync) goes unanswered past the deadline.
        store
            .sim
            .world
            .lock()
            .stall
            .insert(store.session.id, "children");
        assert!(matches!(place(&store), Err(Error::ConnectionLoss { .. })));
        assert_eq!(store.swept().as_slice(), [PREFIX]);
    }
}
