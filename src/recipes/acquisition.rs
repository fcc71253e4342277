//! What zklock reports about each acquisition: how long the caller waited and how it ended,
//! in the log and the metrics (see `metrics.rs`). What it took is then followed by a `Track`
//! (`core/track.rs`), which reports the hold and its loss.
//!
//! An acquisition is measured by the recipe's front end, around the whole call
//! ([`Acquisition`]).

use std::time::Instant;

use log::debug;

use crate::client::Client;
use crate::core::held::Held;
use crate::core::track::{Track, LOG_TARGET};
use crate::core::wait::{Attempt, Patience};
use crate::error::{Error, Result};
use crate::metrics::{self, Outcome, Recipe};

/// One acquisition call, measured from its start.
pub(crate) struct Acquisition {
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
    pub(crate) fn start(client: &Client, recipe: Recipe, path: &str) -> Acquisition {
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
    pub(crate) fn finish<G>(
        self,
        attempt: &Attempt,
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
                let (session, token) = nodes
                    .first()
                    .map_or((0, 0), |n| (n.session_id(), n.fencing_token()));
                debug!(target: LOG_TARGET, "acquired {names} ({recipe} on {path}, session {session:#x}, fencing token {token}) after waiting {waited:?}");
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
