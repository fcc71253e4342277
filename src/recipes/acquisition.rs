//! The envelope of every acquisition, written once for every recipe ([`envelope`]): it
//! measures the call, resolves the session and the deadline of its requests, runs the
//! recipe's own taking until it ends, the caller's token or the client's close stops it
//! (a stopped taking is dropped, which withdraws what it queued, and waited for briefly:
//! see `Budget::run`), hands the guard its nodes, and reports how the call ended, in the
//! log and the metrics (see `metrics.rs`). What it took is then followed by a `Track`
//! (`core/track.rs`), which reports the hold and its loss.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use log::debug;

use crate::client::Client;
use crate::core::held::Held;
use crate::core::track::{Track, LOG_TARGET};
use crate::core::wait::{Budget, Patience};
use crate::error::{Error, Result};
use crate::metrics::{self, Outcome, Recipe};
use crate::session::Session;

/// Acquires through `take` as `attempt` says, in the envelope every recipe shares: `recipe`
/// on `path` (for a multi-lock, its paths) names the call in the log and the metrics;
/// `take` is given the session and the deadline of its requests and returns the guard;
/// `nodes` picks the guard's nodes, which release in the background when dropped with
/// `background_drop` (async callers). An outage is reported with the lock path, the call's
/// timeout and the server.
pub(crate) async fn envelope<G, F, Fut>(
    client: &Client,
    (recipe, path): (Recipe, &str),
    attempt: &Budget,
    background_drop: bool,
    take: F,
    nodes: impl FnOnce(&mut G) -> Vec<&mut Held>,
) -> Result<Option<G>>
where
    F: FnOnce(Arc<Session>, Option<Instant>) -> Fut,
    Fut: Future<Output = Result<Option<G>>>,
{
    let measured = Acquisition::start(client, recipe, path);
    // Boxed: moved into the race by value, it would be kept twice in this future.
    let taking = Box::pin(on_session(client, attempt, take));
    let outcome = attempt.run(client.close_token(), taking).await;
    measured.finish(attempt, outcome, |guard| {
        let mut nodes = nodes(guard);
        for node in &mut nodes {
            node.background_drop = background_drop;
        }
        nodes
    })
}

/// Runs `take` on the client's session for `attempt`, with the deadline of its requests:
/// the part of the envelope that a local queue's contention, which runs on behalf of
/// callers already measured, shares with every acquisition.
pub(crate) async fn on_session<T, F, Fut>(client: &Client, attempt: &Budget, take: F) -> Result<T>
where
    F: FnOnce(Arc<Session>, Option<Instant>) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let deadline = attempt.deadline(|| client.call_deadline());
    // Each step is boxed: a future is as large as its largest state.
    let session = Box::pin(client.session_async(deadline)).await?;
    Box::pin(take(session, deadline)).await
}

/// One acquisition call, measured from its start.
struct Acquisition {
    client: Client,
    started: Instant,
    recipe: Recipe,
    path: String,
    path_label: bool,
    _waiting: Waiting,
}

/// Counts an acquisition call in the `waiting` gauge for as long as it lives, however the call
/// ends (a panic in a recorder included).
struct Waiting {
    recipe: Recipe,
    path: Option<String>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        metrics::waiting(self.recipe, self.path.as_deref(), -1.0);
    }
}

impl Acquisition {
    /// Starts measuring an acquisition of `recipe` on `path` (for a multi-lock, its paths).
    fn start(client: &Client, recipe: Recipe, path: &str) -> Acquisition {
        let path_label = client.observe().path_label;
        let label = path_label.then(|| path.to_owned());
        metrics::waiting(recipe, label.as_deref(), 1.0);
        Acquisition {
            client: client.clone(),
            started: Instant::now(),
            recipe,
            path: path.to_owned(),
            path_label,
            _waiting: Waiting {
                recipe,
                path: label,
            },
        }
    }

    /// Records how the call ended and, when it acquired, starts following what it took
    /// (`nodes` picks the nodes out of the guard). An outage is reported with the lock path,
    /// the call's timeout and the server.
    fn finish<G>(
        self,
        attempt: &Budget,
        outcome: Result<Option<G>>,
        nodes: impl FnOnce(&mut G) -> Vec<&mut Held>,
    ) -> Result<Option<G>> {
        let mut outcome = outcome.map_err(|err| {
            let timeout = attempt.time_allowed(|| self.client.call_timeout());
            self.client.outage(err, &self.path, timeout)
        });
        let waited = self.started.elapsed();
        let label = self.path_label.then_some(self.path.as_str());
        let (recipe, path) = (self.recipe.label(), &self.path);
        let ended = match &outcome {
            Ok(Some(_)) => Outcome::Acquired,
            Ok(None) if matches!(attempt.patience, Patience::DontWait) => Outcome::Busy,
            Ok(None) => Outcome::Timeout,
            Err(Error::Cancelled | Error::Closed) => Outcome::Cancelled,
            Err(_) => Outcome::Error,
        };
        metrics::acquisition(self.recipe, ended, label, waited);
        match &mut outcome {
            Ok(Some(guard)) => {
                let mut nodes = nodes(guard);
                let names: Vec<&str> = nodes.iter().map(|n| n.node_path()).collect();
                let names = names.join(", ");
                let (session, fencing) = nodes
                    .first()
                    .map_or((0, 0), |n| (n.session_id(), n.fencing_token()));
                debug!(target: LOG_TARGET, "acquired {names} ({recipe} on {path}, session {session:#x}, fencing token {fencing}) after waiting {waited:?}");
                let track = Track::start(self.recipe, self.path, self.path_label, names, session);
                for node in &mut nodes {
                    node.track = track.clone();
                }
            }
            Ok(None) => debug!(
                target: LOG_TARGET,
                "{recipe} on {path}: {} after waiting {waited:?}",
                ended.label()
            ),
            Err(err) => {
                debug!(target: LOG_TARGET, "{recipe} on {path} failed after waiting {waited:?}: {err}")
            }
        }
        outcome
    }
}
