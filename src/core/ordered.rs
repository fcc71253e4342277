//! Several locks taken as one (a multi-lock): in the one global order every taker uses, the
//! order of their paths, so two takers of overlapping sets never wait for each other; all or
//! nothing.

use std::sync::Arc;
use std::time::Instant;

use crate::error::Result;

use super::hold::{take, Holds};
use super::kind::Kind;
use super::partial::Partial;
use super::wait::Attempt;

/// Takes every lock of `members` (a path and the kind to queue as there, each path once) on
/// `session`, in the order of their paths, whatever the order given. `Ok(None)` when one was
/// busy and the patience ran out; on that and on every error, the locks taken so far are
/// released in reverse order (see [`Partial`]). The held nodes come in the order taken.
pub(crate) async fn take_in_order<S: Holds>(
    session: &Arc<S>,
    members: &[(String, &'static Kind)],
    attempt: &Attempt,
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
