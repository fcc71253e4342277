//! Several locks taken as one (a multi-lock): in the one global order every taker uses, the
//! order of their paths, so two takers of overlapping sets never wait for each other; all or
//! nothing.

use std::sync::Arc;
use std::time::Instant;

use crate::error::Result;

use super::contend::take;
use super::hold::Holds;
use super::kind::Kind;
use super::partial::Partial;
use super::wait::Budget;

/// Takes every lock of `members` (a path and the kind to queue as there, each path once) on
/// `session`, in the order of their paths, whatever the order given. `Ok(None)` when one was
/// busy and the patience ran out; on that and on every error, the locks taken so far are
/// released in reverse order (see [`Partial`]). The held nodes come in the order taken.
pub(crate) async fn take_in_order<S: Holds>(
    session: &Arc<S>,
    members: &[(String, &'static Kind)],
    attempt: &Budget,
    deadline: Option<Instant>,
) -> Result<Option<Vec<S::Held>>> {
    let mut order: Vec<&(String, &'static Kind)> = members.iter().collect();
    order.sort_by(|a, b| a.0.cmp(&b.0));
    let mut taken = Partial::new(attempt);
    for (path, kind) in order {
        // Boxed: a future is as large as its largest state.
        match Box::pin(take(session, path, kind, attempt, deadline)).await? {
            Some(held) => taken.push(held),
            None => return Ok(None),
        }
    }
    Ok(Some(taken.complete()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::hold::Hold;
    use crate::core::kind::{previous_node, Role};
    use crate::core::sim::world::{Mode, OPERATOR};
    use crate::core::sim::Sim;
    use crate::metrics::Recipe;

    const EXCLUSIVE: Kind = Kind {
        names: &[("lock-", Role::Exclusive)],
        ours: 0,
        blocker: previous_node,
        metric: Recipe::Multi,
        recipe: "test",
        rival: |_| None,
    };

    /// Two lock paths, and another session holding the first.
    fn two_paths_the_first_held() -> (Sim, String) {
        let sim = Sim::new(1);
        let mut world = sim.world.lock();
        world.mkdirs("/l/a", Mode::Container);
        world.mkdirs("/l/b", Mode::Container);
        let held = world
            .create_now(OPERATOR, "/l/a/_c_x-lock-", true)
            .expect("made");
        drop(world);
        (sim, held)
    }

    fn members() -> Vec<(String, &'static Kind)> {
        // Given in the other order.
        vec![
            ("/l/b".to_owned(), &EXCLUSIVE),
            ("/l/a".to_owned(), &EXCLUSIVE),
        ]
    }

    #[test]
    fn the_locks_are_taken_in_the_order_of_their_paths_whatever_the_order_given() {
        let (sim, held) = two_paths_the_first_held();
        let session = sim.session();
        let members = members();
        let attempt = Budget::forever();
        let mut taking = Box::pin(take_in_order(&session, &members, &attempt, None));
        assert!(sim.poll(taking.as_mut()).is_none(), "waits for /l/a");
        assert!(
            sim.world.lock().children("/l/b").is_empty(),
            "/l/b not touched"
        );
        assert!(sim.world.lock().delete_now(&held));
        let taken = sim.poll(taking.as_mut()).expect("done").expect("no error");
        let taken = taken.expect("taken");
        let paths: Vec<&str> = taken.iter().map(|h| h.node_path()).collect();
        assert!(
            paths[0].starts_with("/l/a/") && paths[1].starts_with("/l/b/"),
            "{paths:?}"
        );
    }

    #[test]
    fn one_lock_busy_releases_the_ones_taken() {
        let sim = Sim::new(1);
        let mut world = sim.world.lock();
        world.mkdirs("/l/a", Mode::Container);
        world.mkdirs("/l/b", Mode::Container);
        world
            .create_now(OPERATOR, "/l/b/_c_x-lock-", true)
            .expect("made");
        drop(world);
        let session = sim.session();
        let members = members();
        let attempt = Budget::dont_wait();
        let mut taking = Box::pin(take_in_order(&session, &members, &attempt, None));
        let outcome = sim.poll(taking.as_mut()).expect("done").expect("no error");
        assert!(outcome.is_none(), "busy");
        drop(taking);
        sim.settle();
        assert!(
            sim.world.lock().children("/l/a").is_empty(),
            "/l/a released"
        );
    }
}
