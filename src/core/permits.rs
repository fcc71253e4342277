//! A semaphore's permits, Curator's `InterProcessSemaphoreV2` way: not a queue with a blocker,
//! but a count of permit nodes (in Curator's `leases` directory) that admits at most
//! `permits`; permit takers queue on a mutex, the gate (`locks`), and the one at its head
//! takes its permit nodes and leaves the gate to the next.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::znode::layout::owner_data;

use super::claim::{claim, node_vanished, Claimed};
use super::contend::take;
use super::contend::{past_deadline_is_busy, wait_for_change, Woken};
use super::hold::{Hold, Holds};
use super::kind::{Kind, Rival};
use super::partial::Partial;
use super::place::{create_node, Created};
use super::seam::ZkSession;
use super::session_view::Elapsed;
use super::wait::{Budget, Patience};
use super::withdraw::{OurNode, PAST_DEADLINE_WITHDRAW_WAIT};

/// Takes one permit of a semaphore with `permits` permits, Curator's `InterProcessSemaphoreV2`
/// way: create a permit node (named `permit_name`) under `permit_parent`, then wait until at most
/// `permits` permit nodes exist. The caller serialises permit takers with the semaphore's
/// internal mutex, so only one of them watches the permit nodes at a time (see
/// [`take_permits`]).
pub(crate) async fn acquire_permit_node<S: Holds>(
    session: &Arc<S>,
    permit_parent: &str,
    permit_name: &str,
    permits: usize,
    attempt: &Budget,
    deadline: Option<Instant>,
) -> Result<Option<S::Held>> {
    let taken = take_permit_node(
        session,
        permit_parent,
        permit_name,
        permits,
        attempt,
        deadline,
    )
    .await;
    let claimed = past_deadline_is_busy(session.as_ref(), deadline, taken)?;
    Ok(claimed.map(|claimed| S::hold(claimed, permit_parent)))
}

/// The steps of [`acquire_permit_node`], on any [`ZkSession`], whose errors it has yet to sort.
pub(crate) async fn take_permit_node<S: ZkSession>(
    session: &Arc<S>,
    permit_parent: &str,
    permit_name: &str,
    permits: usize,
    attempt: &Budget,
    deadline: Option<Instant>,
) -> Result<Option<Claimed<S>>> {
    let data = owner_data();
    let created = Box::pin(create_node(
        session,
        permit_parent,
        permit_name,
        &data,
        attempt,
        deadline,
    ))
    .await?;
    let Created {
        mut contender,
        name,
        stat,
        children,
        generation,
    } = match created {
        Ok(created) => created,
        Err(elapsed) => return elapsed.outcome(session.liveness()),
    };
    let admitted = |children: &[String], contender: &mut OurNode<S>| {
        if children.contains(&name) {
            Ok(children.len() <= permits)
        } else {
            Err(node_vanished(contender, permit_parent))
        }
    };
    let mut children = Some(children);
    loop {
        let listed = match children.take() {
            Some(children) => children,
            None => Box::pin(session.list_with_stat(permit_parent, deadline)).await?,
        };
        if admitted(&listed.names, &mut contender)? {
            return claim(contender, permit_parent, stat, generation).map(Some);
        }
        if let Patience::DontWait = attempt.patience {
            return Ok(None);
        }
        // Followed from before the watch is asked for (see `wait_for_change`).
        let states = session.states();
        let watching = Box::pin(session.watch_children(permit_parent, deadline));
        let (listed, watcher) = match watching.await {
            Ok(watched) => watched,
            // The session's word for a request that ran into the deadline.
            Err(Error::ConnectionLoss { .. }) => return Elapsed.outcome(session.liveness()),
            Err(err) => return Err(err),
        };
        if admitted(&listed, &mut contender)? {
            return claim(contender, permit_parent, stat, generation).map(Some);
        }
        drop(listed);
        let woken =
            wait_for_change(session.as_ref(), states, watcher, &mut contender, deadline).await?;
        if let Woken::Elapsed(elapsed) = woken {
            return elapsed.outcome(session.liveness());
        }
    }
}

/// Where one semaphore's nodes are, and what it is.
#[derive(Clone)]
pub(crate) struct SemaphoreAt {
    /// The semaphore's path.
    pub(crate) path: String,
    /// The gate's path, a lock of `gate_kind` (a mutex).
    pub(crate) gate: String,
    pub(crate) gate_kind: &'static Kind,
    /// The path of the permit nodes' parent (Curator's `leases`), and their name.
    pub(crate) permit_parent: String,
    pub(crate) permit_name: &'static str,
    pub(crate) permits: usize,
    /// The recipe's name, as errors give it.
    pub(crate) recipe: &'static str,
    /// Given the children of the semaphore's path, another recipe whose nodes are there.
    pub(crate) rival: fn(&[String]) -> Option<Rival>,
}

/// Takes `count` permit nodes of `semaphore` on `session` (`count` between 1 and the permits),
/// all or nothing. `Ok(None)` when busy and the patience ran out; on that and on every
/// error, what was taken is released, the gate last (see [`Partial`]).
///
/// One pass through the gate for all `count` permit nodes: two takers each holding some
/// while waiting for more would wait for each other for ever. One session for the gate and
/// every permit node: were it to expire half-way, a permit node taken on a new session would
/// wait while the gate (lost with the old one) let others in. Once every permit node is taken,
/// the gate is released, waiting for the server at most `gate_wait` (a slow reply finishes in
/// the background).
pub(crate) async fn take_permits<S: Holds>(
    session: &Arc<S>,
    semaphore: &SemaphoreAt,
    count: usize,
    attempt: &Budget,
    deadline: Option<Instant>,
    gate_wait: Duration,
) -> Result<Option<Vec<S::Held>>> {
    debug_assert!((1..=semaphore.permits).contains(&count));
    let gate = Box::pin(take(
        session,
        &semaphore.gate,
        semaphore.gate_kind,
        attempt,
        deadline,
    ))
    .await?;
    let Some(gate) = gate else {
        return Ok(None);
    };
    // Dropped on the way out, `taken` releases what was taken (all or nothing); the gate,
    // taken first, goes last.
    let mut taken = Partial::new(attempt);
    taken.push(gate);
    // One recipe per path: our gate node exists (and with it the gate), so another recipe's
    // contender that lists the path after this finds the semaphore; this listing finds one
    // that created its node before (see `Kind::rival`). Refused, `taken` releases the gate.
    let beside = Box::pin(session.list(&semaphore.path, deadline)).await;
    // Run into the deadline on a live connection, the listing is a timeout, as the gate's
    // and the permit nodes' requests are.
    let Some(beside) = past_deadline_is_busy(session.as_ref(), deadline, beside.map(Some))? else {
        return Ok(None);
    };
    if let Some(rival) = (semaphore.rival)(&beside) {
        return Err(Error::RecipeConflict {
            path: semaphore.path.clone(),
            ours: semaphore.recipe,
            theirs: rival.recipe,
        });
    }
    for _ in 0..count {
        let permit = Box::pin(acquire_permit_node(
            session,
            &semaphore.permit_parent,
            semaphore.permit_name,
            semaphore.permits,
            attempt,
            deadline,
        ))
        .await?;
        match permit {
            Some(permit) => taken.push(permit),
            None => return Ok(None),
        }
    }
    let mut nodes = taken.complete();
    // Leave the gate to the next taker, within the caller's deadline (a silent connection
    // still looks connected: the release's wait must not push the return past it).
    let gate_wait = deadline
        .and_then(|d| d.checked_add(PAST_DEADLINE_WITHDRAW_WAIT))
        .map_or(gate_wait, |latest| {
            gate_wait.min(latest.saturating_duration_since(session.now()))
        });
    nodes.remove(0).release_logged(gate_wait).await;
    Ok(Some(nodes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::sim::store::Store;

    #[test]
    fn a_permit_node_is_taken_once_one_is_returned() {
        let store = Store::new("/leases");
        let other = store.add_other("lease-");
        let session = store.session.clone();
        let mut taking = Box::pin(async {
            let attempt = Budget::forever();
            take_permit_node(&session, "/leases", "lease-", 1, &attempt, None).await
        });
        assert!(store.sim.poll(taking.as_mut()).is_none(), "waits");
        store.delete(&other);
        let claimed = store.sim.poll(taking.as_mut()).expect("done");
        let claimed = claimed.expect("no error").expect("taken");
        assert_eq!(claimed.node_path, format!("/leases/{}", store.ours()[0]));
    }
}

#[cfg(test)]
mod pass_tests {
    use super::*;
    use crate::core::kind::{previous_node, Role};
    use crate::core::sim::world::{Mode, OPERATOR};
    use crate::core::sim::Sim;
    use crate::metrics::Recipe;

    const GATE: Kind = Kind {
        names: &[("lock-", Role::Exclusive)],
        ours: 0,
        blocker: previous_node,
        metric: Recipe::Semaphore,
        recipe: "test",
        rival: |_| None,
    };

    /// A semaphore at `/s` with `permits`, refusing to share its path with `rival-` nodes.
    fn semaphore(permits: usize) -> SemaphoreAt {
        SemaphoreAt {
            path: "/s".to_owned(),
            gate: "/s/locks".to_owned(),
            gate_kind: &GATE,
            permit_parent: "/s/leases".to_owned(),
            permit_name: "lease-",
            permits,
            recipe: "semaphore",
            rival: |children| {
                children
                    .iter()
                    .any(|c| c.starts_with("rival-"))
                    .then_some(Rival {
                        recipe: "rival",
                        holders: &[],
                    })
            },
        }
    }

    #[test]
    fn several_permit_nodes_are_taken_in_one_pass_and_the_gate_left() {
        let sim = Sim::new(1);
        sim.world.lock().mkdirs("/s", Mode::Persistent);
        let session = sim.session();
        let at = semaphore(3);
        let attempt = Budget::forever();
        let mut taking = Box::pin(take_permits(
            &session,
            &at,
            2,
            &attempt,
            None,
            Duration::ZERO,
        ));
        let taken = sim.poll(taking.as_mut()).expect("done").expect("no error");
        let nodes = taken.expect("taken");
        assert_eq!(nodes.len(), 2);
        sim.settle();
        let world = sim.world.lock();
        assert_eq!(world.children("/s/leases").len(), 2);
        assert!(world.children("/s/locks").is_empty(), "the gate is left");
        drop(world);
        drop(nodes);
        sim.settle();
        assert!(
            sim.world.lock().children("/s/leases").is_empty(),
            "released"
        );
    }

    #[test]
    fn another_recipe_at_the_path_is_refused_and_nothing_is_left() {
        let sim = Sim::new(1);
        sim.world.lock().mkdirs("/s", Mode::Persistent);
        sim.world.lock().create_now(OPERATOR, "/s/rival-", true);
        let session = sim.session();
        let at = semaphore(1);
        let attempt = Budget::forever();
        let mut taking = Box::pin(take_permits(
            &session,
            &at,
            1,
            &attempt,
            None,
            Duration::ZERO,
        ));
        match sim.poll(taking.as_mut()).expect("done") {
            Err(Error::RecipeConflict { path, ours, theirs }) => {
                assert_eq!((path.as_str(), ours, theirs), ("/s", "semaphore", "rival"));
            }
            other => panic!(
                "expected RecipeConflict, got {:?}",
                other.map(|o| o.is_some())
            ),
        }
        drop(taking);
        sim.settle();
        let world = sim.world.lock();
        assert!(world.children("/s/locks").is_empty() && world.children("/s/leases").is_empty());
    }
}
