//! Reading a lock of every layout the library makes (mutex, read/write lock, semaphore and
//! leader election), and `zklock break` and `zklock revoke`; `status.rs` shows what is read.

use std::io::{BufRead as _, Write as _};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zklock::inspect::{Contender, InspectedNode, LockKind, Role};
use zklock::{Client, DistributedMutex, DistributedRwLock, LeaderElection, Semaphore};

use crate::text::{format_duration, printable, session_hex};
use crate::{code, BreakArgs, Failure, Global, Outcome, RevokeArgs};

/// One node of a lock, as shown.
pub struct Entry {
    pub contender: Contender,
    /// The node's name relative to the lock path: the node name, or `leases/NAME` and
    /// `locks/NAME` in a semaphore.
    pub name: String,
    /// The node's parent: the lock path, or the semaphore's `leases` or `locks` child.
    pub parent: String,
    /// exclusive, read, write, lease, queued (a semaphore's lease taker) or participant.
    pub kind: &'static str,
    /// Whether it holds the lock (leads, holds a lease); `None` if that cannot be told.
    pub holds: Option<bool>,
    /// The recipe the node belongs to.
    pub recipe: LockKind,
}

impl Entry {
    pub fn standing(&self) -> &'static str {
        match self.holds {
            Some(true) => "holder",
            Some(false) => "waiter",
            None => "unknown",
        }
    }

    fn full_path(&self) -> String {
        format!("{}/{}", self.parent, self.contender.node_name)
    }

    /// The owner data, fit for one line of output (control characters escaped); `unknown`
    /// if there is none.
    pub fn owner(&self) -> String {
        if self.contender.owner.is_empty() {
            "unknown".into()
        } else {
            printable(&self.contender.owner)
        }
    }
}

/// A lock path's nodes, in queue order (a semaphore's leases, then its queued lease takers).
pub struct View {
    pub path: String,
    /// `None`: no lock nodes under the path.
    pub layout: Option<LockKind>,
    /// Every recipe whose nodes are under the path; more than one is a misuse (each thinks
    /// it holds the path).
    pub layouts: Vec<LockKind>,
    pub permits: Option<u32>,
    pub entries: Vec<Entry>,
    /// How many children the node at the path has (of any kind), `None` if there is no node.
    pub children: Option<usize>,
}

impl View {
    /// Whether the path is a lock: it has lock nodes, or is an empty node (a free lock's
    /// parent stays until the server sweeps it). A missing node or one with other children
    /// is not a lock.
    pub fn is_lock(&self) -> bool {
        self.layout.is_some() || self.children == Some(0)
    }

    /// Why there is no holder to act on: a free lock, or no lock at all.
    fn nobody(&self) -> String {
        if self.is_lock() {
            format!("{}: free (no holder)", self.path)
        } else {
            format!("no lock at {}", self.path)
        }
    }

    pub fn holders(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(|e| e.holds == Some(true))
    }

    /// Whether anything holds the lock: a holder by its recipe's rule, or a semaphore's lease
    /// whose standing is unknown (without --permits): with any lease there, a permit is taken.
    pub fn held(&self) -> bool {
        self.entries
            .iter()
            .any(|e| e.holds == Some(true) || (e.holds.is_none() && e.kind == LEASE))
    }

    pub fn waiting(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| e.holds == Some(false))
            .count()
    }

    /// The entry called `name` (as `status` shows it, a bare node name, or a full path).
    fn find(&self, name: &str) -> Result<(usize, &Entry), Failure> {
        let name = name
            .strip_prefix(&format!("{}/", self.path))
            .unwrap_or(name);
        self.entries
            .iter()
            .enumerate()
            .find(|(_, e)| e.name == name || e.contender.node_name == name)
            .ok_or_else(|| {
                Failure::error(format!(
                    "no node {name:?} under {} (see `zklock status {}`)",
                    self.path, self.path
                ))
            })
    }
}

/// The type of a semaphore's lease nodes.
const LEASE: &str = "lease";

fn kind(role: Role) -> &'static str {
    match role {
        Role::Exclusive => "exclusive",
        Role::Read => "read",
        Role::Write => "write",
        Role::Lease => LEASE,
        Role::Participant => "participant",
        _ => "other",
    }
}

/// Reads the nodes under `path`; the library tells the layout from them, and who holds by
/// each recipe's rule.
pub fn look(client: &Client, path: &str, permits: Option<u32>) -> zklock::Result<View> {
    let found = client.inspect(path, permits.map(|p| p as usize))?;
    let entries = found.nodes.into_iter().map(entry).collect();
    Ok(View {
        path: path.to_owned(),
        layout: found.kind,
        layouts: found.kinds,
        permits,
        entries,
        children: found.children,
    })
}

fn entry(node: InspectedNode) -> Entry {
    Entry {
        kind: if node.queued {
            "queued"
        } else {
            kind(node.contender.role)
        },
        name: node.name,
        parent: node.parent,
        holds: node.holds,
        recipe: node.kind,
        contender: node.contender,
    }
}

/// How long ago the server created the node, by the local clock (0 if the clocks disagree).
pub fn age(contender: &Contender) -> Duration {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    Duration::from_millis(u64::try_from(now_ms - contender.created_ms).unwrap_or(0))
}

/// The holder to act on when no --node is given; `Ok(None)` if nothing holds.
fn sole_holder<'v>(view: &'v View, verb: &str) -> Result<Option<(usize, &'v Entry)>, Failure> {
    // A semaphore without --permits: every lease may hold.
    let candidates: Vec<(usize, &Entry)> = view
        .entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.holds != Some(false))
        .collect();
    match candidates.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(*one)),
        many => Err(Failure::error(format!(
            "{} has {} holders; name the node to {verb} with --node NAME (see `zklock status {}`)",
            view.path,
            many.len(),
            view.path
        ))),
    }
}

pub fn break_lock(global: &Global, args: &BreakArgs) -> Outcome {
    let client = global.connect_existing()?;
    let view = look(&client, &args.path, None)?;
    let (position, target) = match &args.node {
        Some(name) => view.find(name)?,
        None => match sole_holder(&view, "delete")? {
            Some(holder) => holder,
            None => {
                println!("{}; nothing to break", view.nobody());
                return Ok(code::NOTHING_DONE);
            }
        },
    };
    let shown = format!(
        "{} ({}, {}, session {}, age {}, owner {})",
        target.full_path(),
        target.standing(),
        target.kind,
        session_hex(target.contender.session_id),
        format_duration(age(&target.contender)),
        target.owner(),
    );
    // Who takes over once the holder's node is gone.
    let next = match (target.holds, view.entries.get(position + 1), view.layout) {
        (Some(true), Some(next), Some(LockKind::Mutex)) => Some(format!(
            "the next waiter ({}) acquires the lock",
            next.owner()
        )),
        (Some(true), Some(next), Some(LockKind::Election)) => {
            Some(format!("the next participant ({}) leads", next.owner()))
        }
        _ => None,
    };
    // Nothing is said to be deleted before the server has deleted it: a refused or failed
    // delete must not read as done (with --yes nothing precedes the outcome).
    if !args.yes {
        println!("to delete: {shown}");
        if let Some(next) = &next {
            println!("once it is deleted, {next}");
        }
        if !confirm()? {
            println!("not deleted");
            return Ok(code::NOTHING_DONE);
        }
    }
    delete(&client, &view, target, &shown, next.as_deref())
}

/// Asks on stderr, reads the answer from stdin; anything but y/yes (or end of input) is no.
fn confirm() -> Result<bool, Failure> {
    eprint!("delete it? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Failure::error(format!("reading the answer: {e}")))?;
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

/// Deletes `target` (described as `shown`) and says so, with who takes over (`next`), only
/// once the server has deleted it.
fn delete(
    client: &Client,
    view: &View,
    target: &Entry,
    shown: &str,
    next: Option<&str>,
) -> Outcome {
    let path = target.full_path();
    let node = &target.contender;
    let deleted = match Some(target.recipe) {
        Some(LockKind::RwLock) => DistributedRwLock::new(client, &view.path)?.break_contender(node),
        Some(LockKind::Election) => LeaderElection::new(client, &view.path)?.break_contender(node),
        // The permits do not matter for breaking a lease.
        Some(LockKind::Semaphore) if target.kind == LEASE => {
            Semaphore::new(client, &view.path, 1)?.break_contender(node)
        }
        // A queued lease taker's node is in the semaphore's internal mutex at `<path>/locks`:
        // a real mutex, broken as one.
        _ => DistributedMutex::new(client, &target.parent)?.break_contender(node),
    };
    match deleted {
        Ok(true) => {
            println!("deleted {shown}");
            if let Some(next) = next {
                println!("{next}");
            }
            Ok(0)
        }
        Ok(false) => {
            println!("{path} is already gone; nothing deleted");
            Ok(code::NOTHING_DONE)
        }
        Err(zklock::Error::NodeChanged { .. }) => {
            println!(
                "{path} changed since it was shown; not deleted (look again with `zklock status`)"
            );
            Ok(code::NOTHING_DONE)
        }
        Err(zklock::Error::NoAuth { .. }) => Err(Failure::error(format!(
            "not allowed to delete {path}: the lock's ACL admits only the identity that \
             created it (connect as that identity with --auth-digest, or wait for its session \
             to end)"
        ))),
        Err(err) => Err(err.into()),
    }
}

pub fn revoke(global: &Global, args: &RevokeArgs) -> Outcome {
    let client = global.connect_existing()?;
    let view = look(&client, &args.path, None)?;
    match view.layout {
        Some(LockKind::Semaphore) => {
            return Err(Failure::error(format!(
                "{} is a semaphore: leases have no revocation protocol (`zklock break --node` \
                 frees one)",
                args.path
            )))
        }
        Some(LockKind::Election) => {
            return Err(Failure::error(format!(
                "{} is a leader election: leaders have no revocation protocol (`zklock break` \
                 makes the next participant lead)",
                args.path
            )))
        }
        _ => {}
    }
    let targets: Vec<&Entry> = match &args.node {
        Some(name) => vec![view.find(name)?.1],
        // Every holder: all the readers of a read lock.
        None => view.holders().collect(),
    };
    if targets.is_empty() {
        println!("{}; nothing to revoke", view.nobody());
        return Ok(code::NOTHING_DONE);
    }
    let rwlock = match view.layout {
        Some(LockKind::RwLock) => Some(DistributedRwLock::new(&client, &args.path)?),
        _ => None,
    };
    let mutex = DistributedMutex::new(&client, &args.path)?;
    let mut asked = 0;
    for target in targets {
        let path = target.full_path();
        let requested = match &rwlock {
            Some(rwlock) => rwlock.request_revocation(&target.contender),
            None => mutex.request_revocation(&target.contender),
        };
        match requested {
            Ok(true) => {
                println!(
                    "asked {path} ({}, {}, owner {}) to release",
                    target.standing(),
                    target.kind,
                    target.owner()
                );
                asked += 1;
            }
            Ok(false) => println!("{path} is already gone"),
            Err(zklock::Error::NoAuth { .. }) => {
                return Err(Failure::error(format!(
                    "not allowed to write to {path}: the lock's ACL admits only the identity \
                     that created it (connect as that identity with --auth-digest)"
                )))
            }
            Err(err) => return Err(err.into()),
        }
    }
    Ok(if asked > 0 { 0 } else { code::NOTHING_DONE })
}
