//! Inspection of a lock's queue, and breaking a stale holder's node, for every recipe.

use std::time::Instant;

use crate::client::{Call, Client};
use crate::core::kind::Role;
use crate::error::{Error, Result};
use crate::znode::layout::{sorted_lock_nodes, LockNode, REVOKE_MESSAGE};

/// One node in a lock's queue, as seen by inspection (`contenders()`, `participants()`).
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
    /// The node's creation zxid: what its holder's
    /// [`LockGuard::fencing_token`](crate::LockGuard::fencing_token) returns (the
    /// [`zxid`](crate::FencingToken::zxid) part of its [`FencingToken`](crate::FencingToken)).
    pub fencing_token: i64,
    /// The node's data version (changes when someone writes its data, e.g. a revocation
    /// request); breaking a node refuses to delete a changed one.
    pub version: i32,
    /// Whether this node holds the lock, by its recipe's rule (the first node of a mutex or an
    /// election; the leading readers, or the leading writer, of a read/write lock; the first
    /// `permits` leases of a semaphore).
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
pub(crate) fn contenders(
    client: &Client,
    path: &str,
    names: &[(&str, Role)],
    holds: impl Fn(&[LockNode], usize) -> bool,
) -> Result<Vec<Contender>> {
    let deadline = Some(client.call_deadline());
    let session = client.session(deadline)?;
    let children = match session.list(path, deadline) {
        Ok(children) => children,
        Err(Error::NoNode { .. }) => return Ok(Vec::new()),
        Err(err) => return Err(err),
    };
    let lock_names: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
    let mut contenders = Vec::new();
    let nodes = sorted_lock_nodes(children, &lock_names);
    let node_names: Vec<&str> = nodes.iter().map(|n| n.name.as_str()).collect();
    let reads = session.get_data_many(path, &node_names, deadline)?;
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
            fencing_token: stat.czxid,
            version: stat.version,
            holds: holds(&present, at),
        });
    }
    Ok(contenders)
}

/// Deletes `path/<contender>` if unchanged since it was inspected; `Ok(false)` if gone.
pub(crate) fn break_contender(client: &Client, path: &str, contender: &Contender) -> Result<bool> {
    let (session, node, deadline) = reach(client, path, contender)?;
    let deleted =
        session.delete_if_unchanged(&node, contender.fencing_token, contender.version, deadline)?;
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
pub(crate) fn request_revocation(
    client: &Client,
    path: &str,
    contender: &Contender,
) -> Result<bool> {
    let (session, node, deadline) = reach(client, path, contender)?;
    session.set_existing(&node, REVOKE_MESSAGE, deadline)
}

/// The session, full node path and deadline for one operation on an inspected contender.
fn reach(
    client: &Client,
    path: &str,
    contender: &Contender,
) -> Result<(Call, String, Option<Instant>)> {
    let name = &contender.node_name;
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(Error::InvalidPath {
            path: name.clone(),
            reason: "not a node name",
        });
    }
    let deadline = Some(client.call_deadline());
    Ok((
        client.session(deadline)?,
        format!("{path}/{name}"),
        deadline,
    ))
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
            fencing_token: 0,
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
