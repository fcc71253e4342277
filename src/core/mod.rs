//! The private waiting core shared by every recipe: place a protected ephemeral-sequential node,
//! find its position, wait on exactly the node that blocks it, claim the lock, and release it.
//! Recipes differ only in their [`kind`]s (node names and blocker rule), which the catalogue
//! (`recipes/catalogue.rs`) defines.
//!
//! - [`kind`]: what a recipe contributes (names, roles, blocker rule);
//! - [`wait`]: how long an acquisition waits, and what stops it;
//! - [`seam`]: the seam between the core and ZooKeeper (requests, watches, session state),
//!   which the session implements and unit tests and the simulation drive on a simulated
//!   ZooKeeper ([`sim`]); [`session_view`]: the core's words for what a session reports;
//! - [`place`]: creating our node at most once;
//! - [`contend`]: the wait for the blocker, and the end of an acquisition's requests;
//!   [`floors`]: what a session's listings proved of its queues, which spares listings;
//!   [`permits`]: a semaphore's count of permit nodes instead of a blocker, and its pass
//!   through the gate for one or several;
//! - [`claim`], [`withdraw`]: the two ends of a wait (ours, or deleted again);
//! - [`held`]: a held node, its release, and [`own_node`]: its watch on its own node; [`partial`]: all or nothing across several;
//! - [`hold`]: what an acquisition of several holds, on any session; [`ordered`]: a
//!   multi-lock's locks in their one order;
//! - [`standing`]: the one rule deciding whether a lock is held; [`track`]: what is reported
//!   about a hold and its loss.

pub(crate) mod claim;
pub(crate) mod cohort;
pub(crate) mod contend;
pub(crate) mod floors;
pub(crate) mod held;
pub(crate) mod hold;
pub(crate) mod kind;
pub(crate) mod ordered;
pub(crate) mod own_node;
pub(crate) mod partial;
pub(crate) mod permits;
pub(crate) mod place;
pub(crate) mod seam;
pub(crate) mod session_view;
// The simulated ZooKeeper: test code, never in a user's build (feature `simulation`).
#[cfg(any(test, feature = "simulation"))]
pub(crate) mod sim;
pub(crate) mod standing;
pub(crate) mod track;
pub(crate) mod wait;
pub(crate) mod withdraw;
