//! Inspection of a lock's queue, and breaking a stale holder's node, for every recipe; and
//! [`Client::inspect`], which tells what is at a path by the catalogue's layouts.

use std::time::Instant;

use crate::client::Client;
use crate::core::kind::{Kind, Role};
use crate::error::{Error, Result};
use crate::session::Session;
use crate::znode::layout::{sorted_lock_nodes, LockNode, REVOKE_MESSAGE};
use crate::znode::path::validate_lock_path;

use super::catalogue::{Layout, LockKind, SemaphoreLayout, CATALOGUE};

/// One node in a lock's queue, as seen by inspection (every recipe's `contenders()`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Contender {
    /// The node's name, the last segment of its path.
    pub node_name: String,
    /// What the node stands for (exclusive lock, reader, writer, lease, participant).
    pub role: Role,
    /// The sequence number ZooKeeper appended; the queue order.
    pub sequence: i64,
    /// The session owning the (ephemeral) node.
    pub session_id: i64,
    /// The node's data, as text: who created it (`host=.. pid=.. thread=..` for zklock nodes).
    pub owner: String,
    /// When the node was created, in milliseconds since the Unix epoch (server clock).
    pub created_ms: i64,
    /// The node's creation zxid: the [`zxid`](crate::FencingToken::zxid) part of its
    /// holder's [`FencingToken`](crate::FencingToken) ([`LockGuard::fencing`](crate::LockGuard::fencing)).
    pub zxid: i64,
    /// The node's data version (changes when someone writes its data, e.g. a revocation
    /// request); breaking a node refuses to delete a changed one.
    pub version: i32,
    /// Whether this node holds the lock, by its recipe's rule (the first node of a mutex or an
    /// election; the leading readers, or the leading writer, of a read/write lock; the first
    /// `permits` permit nodes of a semaphore).
    pub holds: bool,
}

/// The fields of the owner data zklock writes into its nodes (`host=H pid=P thread=T`); see
/// [`Contender::owner_info`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Owner<'a> {
    /// The host name of the process.
    pub host: &'a str,
    /// Its process id.
    pub pid: u32,
    /// The thread's name (or id) that queued the node; it may contain spaces.
    pub thread: &'a str,
}

impl Contender {
    /// [`owner`](Self::owner) parsed, for nodes zklock wrote; `None` for other data (Curator
    /// stores an IP address, a participant id is free text).
    pub fn owner_info(&self) -> Option<Owner<'_>> {
        let rest = self.owner.strip_prefix("host=")?;
        let (host, rest) = rest.split_once(" pid=")?;
        let (pid, thread) = rest.split_once(" thread=")?;
        Some(Owner {
            host,
            pid: pid.parse().ok()?,
            thread,
        })
    }
}

/// The nodes under `path` carrying one of `names`, in queue order. An absent path is empty.
/// `holds` tells, from the queue and a node's index in it, whether that node holds the lock.
/// The one listing behind every recipe's `contenders()` and `contenders_async()`.
pub(crate) async fn contenders(
    client: &Client,
    path: &str,
    names: &[(&str, Role)],
    holds: impl Fn(&[LockNode], usize) -> bool,
) -> Result<Vec<Contender>> {
    client
        .one_call_async(path, |session, deadline| async move {
            contenders_on(&session, path, names, holds, deadline).await
        })
        .await
}

/// [`contenders`] on `session`.
async fn contenders_on(
    session: &Session,
    path: &str,
    names: &[(&str, Role)],
    holds: impl Fn(&[LockNode], usize) -> bool,
    deadline: Option<Instant>,
) -> Result<Vec<Contender>> {
    match list(session, path, deadline).await? {
        Some(children) => read_contenders(session, path, children, names, holds, deadline).await,
        None => Ok(Vec::new()),
    }
}

/// The children of `path`, `None` if there is no such node.
async fn list(
    session: &Session,
    path: &str,
    deadline: Option<Instant>,
) -> Result<Option<Vec<String>>> {
    match session.list_async(path, deadline).await {
        Ok(children) => Ok(Some(children)),
        Err(Error::NoNode { .. }) => Ok(None),
        Err(err) => Err(err),
    }
}

/// The contenders among `children`, a listing of `path` (see [`contenders`]).
async fn read_contenders(
    session: &Session,
    path: &str,
    children: Vec<String>,
    names: &[(&str, Role)],
    holds: impl Fn(&[LockNode], usize) -> bool,
    deadline: Option<Instant>,
) -> Result<Vec<Contender>> {
    let lock_names: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
    let mut contenders = Vec::new();
    let nodes = sorted_lock_nodes(children, &lock_names);
    let node_names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    let reads = session
        .get_data_many_async(path, &node_names, deadline)
        .await?;
    // A node may go away between the listing and the read: it is no contender then.
    let (present, reads): (Vec<LockNode>, Vec<_>) = nodes
        .into_iter()
        .zip(reads)
        .filter_map(|(node, read)| read.map(|read| (node, read)))
        .unzip();
    for (at, (node, (data, stat))) in present.iter().zip(reads).enumerate() {
        contenders.push(Contender {
            node_name: node.name.clone(),
            role: names[node.name_index].1,
            sequence: node.sequence,
            session_id: stat.ephemeral_owner,
            owner: String::from_utf8_lossy(&data).into_owned(),
            created_ms: stat.ctime,
            zxid: stat.czxid,
            version: stat.version,
            holds: holds(&present, at),
        });
    }
    Ok(contenders)
}

/// Deletes `path/<contender>` if unchanged since it was inspected; `Ok(false)` if gone.
pub(crate) async fn break_contender(
    client: &Client,
    path: &str,
    contender: &Contender,
) -> Result<bool> {
    let node = node_of(path, contender)?;
    let (zxid, version) = (contender.zxid, contender.version);
    let deleted = client
        .one_call_async(&node, |session, deadline| {
            let node = &node;
            async move {
                session
                    .delete_if_unchanged_async(node, zxid, version, deadline)
                    .await
            }
        })
        .await?;
    if deleted {
        log::info!(
            "broke lock node {node} (owner {:?}, session {:#x})",
            contender.owner,
            contender.session_id
        );
    }
    Ok(deleted)
}

/// Asks the holder of `path/<contender>` to release (Curator's revocation protocol: the node's
/// data becomes `__REVOKE__`); `Ok(false)` if the node is gone.
pub(crate) async fn request_revocation(
    client: &Client,
    path: &str,
    contender: &Contender,
) -> Result<bool> {
    let node = node_of(path, contender)?;
    client
        .one_call_async(&node, |session, deadline| {
            let node = &node;
            async move {
                session
                    .set_existing_async(node, REVOKE_MESSAGE, deadline)
                    .await
            }
        })
        .await
}

/// The full path of an inspected contender's node.
fn node_of(path: &str, contender: &Contender) -> Result<String> {
    let name = &contender.node_name;
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(Error::InvalidPath {
            path: name.clone(),
            reason: "not a node name",
        });
    }
    Ok(format!("{path}/{name}"))
}

/// What [`Client::inspect`] found at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Inspection {
    /// The recipe whose nodes are there; `None` if there are none (a free lock, or no lock).
    /// Where several recipes' nodes are (see [`kinds`](Self::kinds)), the first of them.
    pub kind: Option<LockKind>,
    /// Every recipe whose nodes are there, in the catalogue's order (mutex, rwlock, election,
    /// semaphore). More than one is a misuse that zklock refuses
    /// ([`Error::RecipeConflict`]) but other clients, or zklock before 0.2, may have made:
    /// each recipe then thinks it holds the path.
    pub kinds: Vec<LockKind>,
    /// Their nodes, recipe by recipe, each in queue order: the contenders of a mutex, a
    /// read/write lock or an election; a semaphore's permit nodes, oldest first, then the
    /// permit takers queued at its gate.
    pub nodes: Vec<InspectedNode>,
    /// How many children the node at the path has, of any kind; `None` if there is no node.
    pub children: Option<usize>,
}

/// One node found by [`Client::inspect`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct InspectedNode {
    /// The recipe the node belongs to.
    pub kind: LockKind,
    /// The node, as inspection shows it (its `holds` is [`holds`](Self::holds), `false` where
    /// that cannot be told).
    pub contender: Contender,
    /// Its path relative to the inspected path: its name, or for a semaphore `leases/<name>`
    /// (a permit node: Curator names them leases) and `locks/<name>` (a permit taker queued
    /// at the gate).
    pub name: String,
    /// The full path of its parent: the inspected path, or a semaphore's `leases` or gate node.
    /// A lock's `break_contender` at that path deletes the node.
    pub parent: String,
    /// Whether it holds the lock (leads, holds a permit), by its recipe's rule; `None` where
    /// that cannot be told: a semaphore's permit nodes, unless its permits were given. A
    /// queued permit taker holds nothing.
    pub holds: Option<bool>,
    /// A semaphore's permit taker, queued at its gate for its turn to take a permit.
    pub queued: bool,
}

impl Client {
    /// What is at `path`: the lock whose nodes are there, told by every recipe's node names
    /// (see [`LockKind`]), and its nodes in queue order, each with
    /// whether it holds. For tools that look at locks they did not make (`zklock status`, `break`, `revoke`).
    ///
    /// `permits`: a semaphore's number of permits, which ZooKeeper does not store. With it, its
    /// permit nodes say whether they hold (the first `permits` do); without, they cannot.
    ///
    /// Blocks for a few round trips (a listing, then the nodes' data; a few more at a
    /// semaphore), waiting for a lost connection to return for at most the session timeout.
    ///
    /// # Errors
    /// [`Error::InvalidPath`]; [`Error::InvalidArgument`] for zero `permits` where there is a
    /// semaphore; [`Error::NoAuth`] and other server and connection errors. A missing node is no
    /// error: nothing is there.
    pub fn inspect(&self, path: &str, permits: Option<usize>) -> Result<Inspection> {
        crate::session::blocking(self.inspect_async(path, permits))
    }

    /// As [`inspect`](Self::inspect), as a future (`Send`, any executor): the same reads,
    /// awaited without blocking a thread. Cancel safe: dropping it leaves nothing behind (it
    /// only reads).
    ///
    /// # Errors
    /// As [`inspect`](Self::inspect).
    pub async fn inspect_async(&self, path: &str, permits: Option<usize>) -> Result<Inspection> {
        validate_lock_path(path)?;
        self.one_call_async(path, |session, deadline| async move {
            self.look_at(&session, path, permits, deadline).await
        })
        .await
    }

    /// [`inspect`](Self::inspect) on `session`.
    async fn look_at(
        &self,
        session: &Session,
        path: &str,
        permits: Option<usize>,
        deadline: Option<Instant>,
    ) -> Result<Inspection> {
        let Some(children) = list(session, path, deadline).await? else {
            return Ok(Inspection {
                kind: None,
                kinds: Vec::new(),
                nodes: Vec::new(),
                children: None,
            });
        };
        let count = Some(children.len());
        let (mut kinds, mut nodes) = (Vec::new(), Vec::new());
        for entry in CATALOGUE {
            if !entry.layout.is_among(&children) {
                continue;
            }
            let found: Vec<InspectedNode> = match entry.layout {
                Layout::Queue(recipe_kinds) => read_contenders(
                    session,
                    path,
                    children.clone(),
                    recipe_kinds[0].names,
                    |nodes, at| holds_by_rule(recipe_kinds, nodes, at),
                    deadline,
                )
                .await?
                .into_iter()
                .map(|contender| InspectedNode {
                    kind: entry.kind,
                    name: contender.node_name.clone(),
                    parent: path.to_owned(),
                    holds: Some(contender.holds),
                    queued: false,
                    contender,
                })
                .collect(),
                Layout::Semaphore(layout) => {
                    semaphore_nodes(session, path, layout, permits, deadline).await?
                }
            };
            // A queue whose nodes went since the listing is not there. A semaphore is, while
            // its `leases` or `locks` child is: recipes refuse to queue beside it until the
            // server sweeps those.
            if found.is_empty() && matches!(entry.layout, Layout::Queue(_)) {
                continue;
            }
            kinds.push(entry.kind);
            nodes.extend(found);
        }
        Ok(Inspection {
            kind: kinds.first().copied(),
            kinds,
            nodes,
            children: count,
        })
    }
}

/// A semaphore's permit nodes, then the permit takers queued at its gate (for
/// [`Client::inspect`]).
async fn semaphore_nodes(
    session: &Session,
    path: &str,
    layout: &SemaphoreLayout,
    permits: Option<usize>,
    deadline: Option<Instant>,
) -> Result<Vec<InspectedNode>> {
    if permits == Some(0) {
        return Err(Error::InvalidArgument(
            "a semaphore needs at least one permit",
        ));
    }
    let in_child = |child: &str, contender: Contender, holds, queued| InspectedNode {
        kind: LockKind::Semaphore,
        name: format!("{child}/{}", contender.node_name),
        parent: format!("{path}/{child}"),
        holds,
        queued,
        contender,
    };
    let permit_parent = format!("{path}/{}", layout.permit_parent);
    let holds = |_: &[LockNode], at: usize| permits.is_some_and(|p| at < p);
    let permit_nodes = contenders_on(
        session,
        &permit_parent,
        layout.permit_names,
        holds,
        deadline,
    )
    .await?;
    // Permit takers queue on the gate; the first of them holds it while it waits for a
    // permit node, but holds no permit.
    let gate_path = format!("{path}/{}", layout.gate);
    let names = layout.gate_kind.names;
    let queued = contenders_on(session, &gate_path, names, |_, _| false, deadline).await?;
    let permit_nodes = permit_nodes.into_iter().map(|c| {
        let holds = permits.map(|_| c.holds);
        in_child(layout.permit_parent, c, holds, false)
    });
    let queued = queued
        .into_iter()
        .map(|c| in_child(layout.gate, c, Some(false), true));
    Ok(permit_nodes.chain(queued).collect())
}

/// Whether the node at `at` in `nodes` holds the lock, by the rule of its own kind among
/// `kinds` (what `contenders()` reports as `holds`).
pub(crate) fn holds_by_rule(kinds: &[&Kind], nodes: &[LockNode], at: usize) -> bool {
    kinds
        .iter()
        .find(|k| k.ours == nodes[at].name_index)
        .is_some_and(|k| (k.blocker)(&nodes[..at]).is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contender(owner: &str) -> Contender {
        Contender {
            node_name: "n".into(),
            role: Role::Exclusive,
            sequence: 0,
            session_id: 0,
            owner: owner.into(),
            created_ms: 0,
            zxid: 0,
            version: 0,
            holds: false,
        }
    }

    #[test]
    fn parses_zklock_owner_data_and_nothing_else() {
        assert_eq!(
            contender("host=web-1 pid=4242 thread=worker 3").owner_info(),
            Some(Owner {
                host: "web-1",
                pid: 4242,
                thread: "worker 3"
            })
        );
        assert_eq!(contender("10.0.0.7").owner_info(), None);
        assert_eq!(contender("host=a pid=x thread=main").owner_info(), None);
    }
}
