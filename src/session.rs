//! `Session`: one ZooKeeper session and every request zklock makes through it.
//!
//! Everything zklock asks of ZooKeeper goes through this module, so the recipes never see the
//! client crate's types and the transport can be replaced without touching them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use parking_lot::{Condvar, Mutex};
use zookeeper_client as zk;

use crate::client::ClientBuilder;
use crate::error::{outcome_unknown, Error, Result};
use crate::runtime::{block_on, deadline_after, Runtime};
use crate::security::NodeAcl;
use crate::watch::{NodeFlags, NodeWatch, OwnNodeWatch, Signal};

pub(crate) fn open_session(
    runtime: &Runtime,
    config: &ClientBuilder,
    hosts: &str,
    chroot: Option<&str>,
    releases: &Arc<Releases>,
    deadline: Option<Instant>,
) -> Result<Session> {
    let connect_deadline = deadline_after(config.connect_timeout);
    let deadline = deadline.map_or(connect_deadline, |d| d.min(connect_deadline));
    let connect_error = |reason: String| Error::Connect {
        connect_string: config.connect_string.clone(),
        timeout: config.connect_timeout,
        reason,
    };
    let connector = config
        .security
        .configure(zk::Client::connector().with_session_timeout(config.session_timeout))?;
    let hosts_owned = hosts.to_owned();
    let secure = config.security.is_tls();
    // Connecting spawns the session task, so it must run on the runtime.
    let task = runtime.handle().spawn(async move {
        #[cfg(feature = "tls")]
        if secure {
            return connector.secure_connect(&hosts_owned).await;
        }
        connector.connect(&hosts_owned).await
    });
    // With TLS, the client crate reports a failed handshake only as a failed connection: if
    // the TCP port answers, the handshake is what failed.
    let connect_error = |reason: String| {
        let tcp_answers = hosts
            .split(',')
            .filter_map(|h| {
                h.trim()
                    .rsplit_once("://")
                    .map_or(Some(h.trim()), |(_, a)| Some(a))
            })
            .any(|addr| {
                std::net::ToSocketAddrs::to_socket_addrs(addr)
                    .ok()
                    .and_then(|mut a| a.next())
                    .is_some_and(|a| {
                        std::net::TcpStream::connect_timeout(&a, Duration::from_millis(500)).is_ok()
                    })
            });
        if secure && tcp_answers {
            Error::Tls {
                reason: format!("servers at {hosts} accept TCP but no TLS session was established ({reason}): is their certificate signed by the configured CA and valid for the host name, and is this their secureClientPort?"),
            }
        } else {
            connect_error(reason)
        }
    };
    let zk = match block_on(task, Some(deadline)) {
        Ok(Ok(Ok(zk))) => zk,
        Ok(Ok(Err(zk::Error::BadArguments(reason)))) => {
            return Err(Error::InvalidConnectString {
                connect_string: config.connect_string.clone(),
                reason: (*reason).to_owned(),
            })
        }
        Ok(Ok(Err(zk::Error::AuthFailed))) => return Err(Error::AuthFailed),
        Ok(Ok(Err(zk::Error::Timeout))) => {
            return Err(connect_error("no server granted a session".into()))
        }
        Ok(Ok(Err(err))) => return Err(connect_error(err.to_string())),
        Ok(Err(join)) => return Err(connect_error(format!("connect task failed: {join}"))),
        Err(task) => {
            task.abort();
            return Err(connect_error("no server granted a session".into()));
        }
    };
    let acl = config.security.acl;
    let zk = match chroot {
        None => zk,
        Some(root) => {
            let mkdir = {
                let zk = zk.clone();
                let root = root.to_owned();
                Box::pin(async move {
                    zk.mkdir(&root, &zk::CreateMode::Container.with_acls(acl.acls()))
                        .await
                })
            };
            match block_on(mkdir, Some(deadline)) {
                Ok(Ok(())) => {}
                Ok(Err(err)) => return Err(Error::from_zk(err, root)),
                Err(_) => return Err(connect_error(format!("could not create chroot {root}"))),
            }
            zk.chroot(root).map_err(|_| Error::InvalidConnectString {
                connect_string: config.connect_string.clone(),
                reason: "bad chroot".into(),
            })?
        }
    };
    let mut state = zk.state_watcher();
    state.state();
    Ok(Session {
        id: zk.session_id().0,
        timeout: zk.session_timeout(),
        zk,
        state,
        acl,
        handle: runtime.handle().clone(),
        releases: releases.clone(),
    })
}

/// Pause before retrying a request the server did not answer while the connection stayed up.
const RETRY_PAUSE: Duration = Duration::from_millis(20);

/// The subset of a node's `Stat` that zklock uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NodeStat {
    /// Zxid of the create: ensemble-wide monotonic, hence a fencing token.
    pub(crate) czxid: i64,
    /// Session id owning an ephemeral node, 0 for persistent ones.
    pub(crate) ephemeral_owner: i64,
    /// Creation time, milliseconds since the epoch (server clock).
    pub(crate) ctime: i64,
    /// Data version: bumped by every setData (Curator's revocation request writes it).
    pub(crate) version: i32,
}

impl From<&zk::Stat> for NodeStat {
    fn from(stat: &zk::Stat) -> Self {
        NodeStat {
            czxid: stat.czxid,
            ephemeral_owner: stat.ephemeral_owner,
            ctime: stat.ctime,
            version: stat.version,
        }
    }
}

/// A node's data and stat.
pub(crate) type NodeData = (Vec<u8>, NodeStat);

/// How the state of a session looks to a lock holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Liveness {
    Connected,
    /// No word from the server for a while (the client crate's connection timeout, 2/5 of the
    /// session timeout) or connection dropped: the session may live, or may be expiring.
    Disconnected,
    /// Terminal: expired, closed or refused.
    Ended,
}

/// One ZooKeeper session of a [`Client`]; replaced when it expires.
pub(crate) struct Session {
    zk: zk::Client,
    pub(crate) id: i64,
    pub(crate) timeout: Duration,
    pub(crate) state: zk::StateWatcher,
    /// The ACL of every node this session creates.
    acl: NodeAcl,
    handle: tokio::runtime::Handle,
    releases: Arc<Releases>,
}

type ZkResult<T> = std::result::Result<T, zk::Error>;
/// The replies to a pipelined create (node name, stat) and listing.
type CreateAndList = (ZkResult<(String, NodeStat)>, ZkResult<Vec<String>>);
type Op<T> = std::pin::Pin<Box<dyn std::future::Future<Output = ZkResult<T>> + Send>>;

/// Outcome of [`Session::create_lock_node`].
pub(crate) enum Create {
    /// Created; the listing of the lock path taken right after, when it could be read.
    Created {
        name: String,
        stat: NodeStat,
        children: Option<Vec<String>>,
    },
    /// The connection dropped before the reply: the node may or may not exist.
    Unknown,
    /// The deadline passed first. The request is still pending; a background task deletes the
    /// node if it appears.
    TimedOut,
    /// The lock path does not exist (yet, or any more).
    ParentMissing,
}

impl Session {
    pub(crate) fn liveness(&self) -> Liveness {
        match self.state() {
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                Liveness::Connected
            }
            zk::SessionState::Disconnected => Liveness::Disconnected,
            _ => Liveness::Ended,
        }
    }

    pub(crate) fn state(&self) -> zk::SessionState {
        self.state.peek_state()
    }

    fn ended_error(&self) -> Error {
        match self.state() {
            zk::SessionState::AuthFailed => Error::AuthFailed,
            zk::SessionState::Closed => Error::Closed,
            _ => Error::SessionExpired,
        }
    }

    /// Blocks until the session is connected, the session ends (error) or `deadline` passes
    /// ([`Error::ConnectionLoss`]).
    pub(crate) fn wait_connected(&self, deadline: Option<Instant>) -> Result<()> {
        let mut state = self.state.clone();
        loop {
            // Check before waiting: `changed()` never returns once the state is terminal.
            match state.state() {
                s if s.is_terminated() => return Err(self.ended_error()),
                zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                    return Ok(())
                }
                _ => {}
            }
            if block_on(Box::pin(state.changed()), deadline).is_err() {
                return Err(Error::ConnectionLoss);
            }
        }
    }

    /// Blocks until the session is no longer connected (`true`) or `deadline` passes (`false`).
    pub(crate) fn wait_disconnected(&self, deadline: Option<Instant>) -> bool {
        let mut state = self.state.clone();
        loop {
            // Consume the current state first, so no change between check and wait is missed.
            let current = state.state();
            if !matches!(
                current,
                zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly
            ) {
                return true;
            }
            if block_on(Box::pin(state.changed()), deadline).is_err() {
                return false;
            }
        }
    }

    /// Runs a read, retrying across reconnects until `deadline`.
    fn read<T: Send + 'static>(
        &self,
        path: &str,
        deadline: Option<Instant>,
        op: impl Fn(zk::Client, String) -> Op<T>,
    ) -> Result<T> {
        loop {
            match block_on(op(self.zk.clone(), path.to_owned()), deadline) {
                Ok(Ok(value)) => return Ok(value),
                Ok(Err(err)) if outcome_unknown(&err) => {
                    debug!("request on {path} failed without an answer ({err}); retrying");
                    if self.liveness() == Liveness::Connected {
                        // Throttled, or a transient fault the connection survived: back off.
                        std::thread::sleep(RETRY_PAUSE);
                    }
                    self.wait_connected(deadline)?;
                }
                Ok(Err(err)) => return Err(Error::from_zk(err, path)),
                Err(_) => return Err(Error::ConnectionLoss),
            }
        }
    }

    /// The children of `path`; `NoNode` as an error.
    pub(crate) fn list(&self, path: &str, deadline: Option<Instant>) -> Result<Vec<String>> {
        self.read(path, deadline, |zk, p| {
            Box::pin(async move { zk.list_children(&p).await })
        })
    }

    /// Data and stat of `path`, `None` if it does not exist.
    pub(crate) fn get_data(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> Result<Option<NodeData>> {
        self.read(path, deadline, |zk, p| {
            Box::pin(async move {
                match zk.get_data(&p).await {
                    Ok((data, stat)) => Ok(Some((data, NodeStat::from(&stat)))),
                    Err(zk::Error::NoNode) => Ok(None),
                    Err(err) => Err(err),
                }
            })
        })
    }

    /// Data and stat of each of `paths` under `parent` (`None` for a missing one). The reads
    /// are sent back to back and awaited together: one round trip, not one per node.
    pub(crate) fn get_data_many(
        &self,
        parent: &str,
        names: &[&str],
        deadline: Option<Instant>,
    ) -> Result<Vec<Option<NodeData>>> {
        let paths: Vec<String> = names
            .iter()
            .map(|name| format!("{parent}/{name}"))
            .collect();
        self.read(parent, deadline, move |zk, _| {
            let paths = paths.clone();
            Box::pin(async move {
                let replies: Vec<_> = paths.iter().map(|p| zk.get_data(p)).collect();
                let mut found = Vec::with_capacity(replies.len());
                for reply in replies {
                    found.push(match reply.await {
                        Ok((data, stat)) => Some((data, NodeStat::from(&stat))),
                        Err(zk::Error::NoNode) => None,
                        Err(err) => return Err(err),
                    });
                }
                Ok(found)
            })
        })
    }

    /// Creates `path` and its missing ancestors as container nodes (the server removes them
    /// once they are empty, so lock parents do not pile up).
    pub(crate) fn ensure_path(&self, path: &str, deadline: Option<Instant>) -> Result<()> {
        let acl = self.acl;
        self.read(path, deadline, move |zk, p| {
            Box::pin(async move {
                zk.mkdir(&p, &zk::CreateMode::Container.with_acls(acl.acls()))
                    .await
            })
        })
    }

    /// Deletes `path` only if it still has data version `version`: `Ok(false)` if it is gone,
    /// [`Error::NodeChanged`] if it changed.
    pub(crate) fn delete_if_unchanged(
        &self,
        path: &str,
        version: i32,
        deadline: Option<Instant>,
    ) -> Result<bool> {
        self.read(path, deadline, move |zk, p| {
            Box::pin(async move {
                match zk.delete(&p, Some(version)).await {
                    Ok(()) => Ok(true),
                    Err(zk::Error::NoNode) => Ok(false),
                    Err(err) => Err(err),
                }
            })
        })
    }

    /// Writes `data` into `path` if it exists: `Ok(false)` if it does not.
    pub(crate) fn set_existing(
        &self,
        path: &str,
        data: &[u8],
        deadline: Option<Instant>,
    ) -> Result<bool> {
        let data = data.to_vec();
        self.read(path, deadline, move |zk, p| {
            let data = data.clone();
            Box::pin(async move {
                match zk.set_data(&p, &data, None).await {
                    Ok(_) => Ok(true),
                    Err(zk::Error::NoNode) => Ok(false),
                    Err(err) => Err(err),
                }
            })
        })
    }

    /// Watches our lock node `path`, in the background, for the revocation marker and for its
    /// deletion by someone else.
    pub(crate) fn watch_own_node(&self, path: &str) -> OwnNodeWatch {
        let flags = Arc::new(NodeFlags::default());
        let (zk, path, raise) = (self.zk.clone(), path.to_owned(), flags.clone());
        let mut state = self.state_watcher();
        let task = self.handle.spawn(async move {
            loop {
                match zk.get_and_watch_data(&path).await {
                    Ok((data, _, watcher)) => {
                        // Keep watching after a request: the holder may ignore it, and a later
                        // deletion must still mark the lock lost.
                        if data == crate::recipe::REVOKE_MESSAGE && !raise.revocation_raised() {
                            info!("revocation requested for {path}");
                            raise.raise_revocation();
                        }
                        match watcher.changed().await.event_type {
                            zk::EventType::NodeDataChanged => {}
                            zk::EventType::NodeDeleted => {
                                warn!("lock node {path} was deleted by someone else: lock lost");
                                raise.raise_deleted();
                                return;
                            }
                            _ => return, // The session ended: the guard sees that itself.
                        }
                    }
                    Err(err) if outcome_unknown(&err) => {
                        if !retry_pause_async(&mut state).await {
                            return;
                        }
                    }
                    Err(zk::Error::NoNode) => {
                        raise.raise_deleted();
                        return;
                    }
                    Err(_) => return,
                }
            }
        });
        OwnNodeWatch::new(flags, task)
    }

    /// Creates or overwrites a persistent node.
    pub(crate) fn put(&self, path: &str, data: &[u8], deadline: Option<Instant>) -> Result<()> {
        let (data, acl) = (data.to_vec(), self.acl);
        self.read(path, deadline, move |zk, p| {
            let data = data.clone();
            Box::pin(async move {
                let options = zk::CreateMode::Persistent.with_acls(acl.acls());
                match zk.set_data(&p, &data, None).await {
                    Err(zk::Error::NoNode) => {}
                    other => return other.map(drop),
                }
                if let Some(parent) = crate::path::parent(&p) {
                    zk.mkdir(parent, &options).await?;
                }
                match zk.create(&p, &data, &options).await {
                    Err(zk::Error::NodeExists) => zk.set_data(&p, &data, None).await.map(drop),
                    other => other.map(drop),
                }
            })
        })
    }

    /// Creates the ephemeral sequential node `prefix` + sequence and, pipelined behind it on the
    /// same session, lists `lock_path`. ZooKeeper executes one session's requests in order, so
    /// the listing contains our node and every node created before it.
    pub(crate) fn create_lock_node(
        &self,
        lock_path: &str,
        prefix: &str,
        data: &[u8],
        deadline: Option<Instant>,
    ) -> Result<Create> {
        let (zk, acl) = (self.zk.clone(), self.acl);
        let (node_prefix, list_path, data) = (
            format!("{lock_path}/{prefix}"),
            lock_path.to_owned(),
            data.to_vec(),
        );
        let op: Op<CreateAndList> = Box::pin(async move {
            let options = zk::CreateMode::EphemeralSequential.with_acls(acl.acls());
            // Both requests are sent here, before the first await.
            let create = zk.create(&node_prefix, &data, &options);
            let list = zk.list_children(&list_path);
            let created = create.await.map(|(stat, seq)| {
                (
                    format!("{}{seq}", &node_prefix[list_path.len() + 1..]),
                    NodeStat::from(&stat),
                )
            });
            Ok((created, list.await))
        });
        match block_on(op, deadline) {
            Ok(Ok((Ok((name, stat)), listing))) => Ok(Create::Created {
                name,
                stat,
                children: listing.ok(),
            }),
            Ok(Ok((Err(err), _))) if outcome_unknown(&err) => Ok(Create::Unknown),
            Ok(Ok((Err(zk::Error::NoNode), _))) => Ok(Create::ParentMissing),
            Ok(Ok((Err(err), _))) => Err(Error::from_zk(err, lock_path)),
            Ok(Err(err)) => Err(Error::from_zk(err, lock_path)),
            Err(pending) => {
                // The create may still execute after the connection returns.
                let zk = self.zk.clone();
                let (lock_path, prefix) = (lock_path.to_owned(), prefix.to_owned());
                self.spawn_release(async move {
                    match pending.await {
                        Ok((Ok((name, _)), _)) => {
                            delete_until_gone(&zk, &format!("{lock_path}/{name}")).await
                        }
                        Ok((Err(err), _)) if outcome_unknown(&err) => {
                            sweep(&zk, &lock_path, &prefix).await
                        }
                        _ => {}
                    }
                });
                Ok(Create::TimedOut)
            }
        }
    }

    /// Sets a watch on `path` (getData-and-watch: an exists watch on a node deleted meanwhile
    /// would never fire) that signals `signal` on a change or deletion, and on every session
    /// state change. `None` if the node does not exist.
    pub(crate) fn watch_node(
        &self,
        path: &str,
        signal: &Arc<Signal>,
        deadline: Option<Instant>,
    ) -> Result<Option<NodeWatch>> {
        let watcher = self.read(path, deadline, |zk, p| {
            Box::pin(async move {
                match zk.get_and_watch_data(&p).await {
                    Ok((_, _, watcher)) => Ok(Some(watcher)),
                    Err(zk::Error::NoNode) => Ok(None),
                    Err(err) => Err(err),
                }
            })
        })?;
        Ok(watcher.map(|watcher| {
            NodeWatch::spawn(&self.handle, watcher, self.state_watcher(), signal.clone())
        }))
    }

    /// Lists `path` and sets a child watch that signals `signal` (like [`watch_node`]
    /// (Self::watch_node) does for one node).
    pub(crate) fn watch_children(
        &self,
        path: &str,
        signal: &Arc<Signal>,
        deadline: Option<Instant>,
    ) -> Result<(Vec<String>, NodeWatch)> {
        let (children, watcher) = self.read(path, deadline, |zk, p| {
            Box::pin(async move {
                zk.get_and_watch_children(&p)
                    .await
                    .map(|(children, _, watcher)| (children, watcher))
            })
        })?;
        Ok((
            children,
            NodeWatch::spawn(&self.handle, watcher, self.state_watcher(), signal.clone()),
        ))
    }

    /// A state watcher positioned at the current state, for waits on session changes.
    pub(crate) fn state_watcher(&self) -> zk::StateWatcher {
        let mut state = self.state.clone();
        state.state();
        state
    }

    /// Deletes our node `path`: waits for the reply up to `wait`, then, if the connection is
    /// down or slow, keeps retrying in the background until the node is gone or the session
    /// has ended. `Ok(true)` if the node was deleted, `Ok(false)` if it was already gone.
    pub(crate) fn delete_node(&self, path: &str, wait: Duration) -> Result<bool> {
        if self.liveness() == Liveness::Ended {
            return Err(self.ended_error());
        }
        let zk = self.zk.clone();
        let target = path.to_owned();
        let op: Op<()> = Box::pin(async move { zk.delete(&target, None).await });
        let deadline = if self.liveness() == Liveness::Connected {
            Instant::now() + wait
        } else {
            Instant::now()
        };
        let pending = match block_on(op, Some(deadline)) {
            Ok(Ok(())) => return Ok(true),
            Ok(Err(zk::Error::NoNode)) => return Ok(false),
            Ok(Err(err)) if !outcome_unknown(&err) => return Err(Error::from_zk(err, path)),
            Ok(Err(_)) => None,
            Err(pending) => Some(pending),
        };
        warn!(
            "delete of {path} (session {:#x}) not confirmed; retrying in the background",
            self.id
        );
        let zk = self.zk.clone();
        let target = path.to_owned();
        self.spawn_release(async move {
            if let Some(pending) = pending {
                match pending.await {
                    Ok(()) | Err(zk::Error::NoNode) => return,
                    Err(err) if !outcome_unknown(&err) => return,
                    Err(_) => {}
                }
            }
            delete_until_gone(&zk, &target).await;
        });
        Err(Error::ConnectionLoss)
    }

    /// Deletes every child of `lock_path` whose name starts with `prefix`, in the background,
    /// once the connection allows (used after a create whose outcome is unknown was abandoned).
    pub(crate) fn sweep_in_background(&self, lock_path: &str, prefix: &str) {
        let zk = self.zk.clone();
        let (lock_path, prefix) = (lock_path.to_owned(), prefix.to_owned());
        self.spawn_release(async move { sweep(&zk, &lock_path, &prefix).await });
    }

    fn spawn_release(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        let token = self.releases.begin();
        self.handle.spawn(async move {
            task.await;
            drop(token);
        });
    }
}

/// Retries `delete(path)` until it succeeds, the node is gone, or the session ends.
async fn delete_until_gone(zk: &zk::Client, path: &str) {
    let mut state = zk.state_watcher();
    loop {
        match zk.delete(path, None).await {
            Ok(()) => {
                debug!("deleted {path} in the background");
                return;
            }
            Err(zk::Error::NoNode) => return,
            Err(err) if outcome_unknown(&err) => {
                if !retry_pause_async(&mut state).await {
                    return;
                }
            }
            Err(err) => {
                // Expired or closed: the server removes the ephemeral node itself.
                debug!("background delete of {path} stopped: {err}");
                return;
            }
        }
    }
}

/// Deletes the children of `lock_path` starting with `prefix`, retrying across reconnects.
async fn sweep(zk: &zk::Client, lock_path: &str, prefix: &str) {
    let mut state = zk.state_watcher();
    loop {
        match zk.list_children(lock_path).await {
            Ok(children) => {
                for child in children.iter().filter(|c| c.starts_with(prefix)) {
                    warn!("deleting {lock_path}/{child}, left by an abandoned create");
                    delete_until_gone(zk, &format!("{lock_path}/{child}")).await;
                }
                return;
            }
            Err(err) if outcome_unknown(&err) => {
                if !retry_pause_async(&mut state).await {
                    return;
                }
            }
            Err(_) => return,
        }
    }
}

/// Before retrying a request that failed without an answer: pauses briefly if still connected
/// (throttled), else waits until connected. `false` if the session ended.
async fn retry_pause_async(state: &mut zk::StateWatcher) -> bool {
    if matches!(
        state.peek_state(),
        zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly
    ) {
        tokio::time::sleep(RETRY_PAUSE).await;
    }
    loop {
        match state.state() {
            s if s.is_terminated() => return false,
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => return true,
            _ => {
                state.changed().await;
            }
        }
    }
}

/// Counts background releases so that closing a client can wait for them.
#[derive(Default)]
pub(crate) struct Releases {
    pending: Mutex<usize>,
    idle: Condvar,
}

struct ReleaseToken(Arc<Releases>);

impl Releases {
    fn begin(self: &Arc<Self>) -> ReleaseToken {
        *self.pending.lock() += 1;
        ReleaseToken(self.clone())
    }

    /// Waits until no release is pending; `false` if `deadline` passed first.
    pub(crate) fn wait_idle(&self, deadline: Instant) -> bool {
        let mut pending = self.pending.lock();
        while *pending > 0 {
            if self.idle.wait_until(&mut pending, deadline).timed_out() {
                return *pending == 0;
            }
        }
        true
    }
}

impl Drop for ReleaseToken {
    fn drop(&mut self) {
        let mut pending = self.0.pending.lock();
        *pending -= 1;
        if *pending == 0 {
            self.0.idle.notify_all();
        }
    }
}

/// One operation of a transaction ([`Session::multi`]).
#[derive(Debug, Clone)]
pub(crate) enum TxnOp {
    /// Succeeds only if `path` exists and, if `version` is given, has that data version.
    Check {
        path: String,
        version: Option<i32>,
    },
    /// Creates a persistent node with the session's ACL.
    Create {
        path: String,
        data: Vec<u8>,
    },
    SetData {
        path: String,
        data: Vec<u8>,
    },
    Delete {
        path: String,
    },
}

impl TxnOp {
    pub(crate) fn path(&self) -> &str {
        match self {
            TxnOp::Check { path, .. }
            | TxnOp::Create { path, .. }
            | TxnOp::SetData { path, .. }
            | TxnOp::Delete { path } => path,
        }
    }
}

/// How a transaction ended, when the server answered or the request stayed unsent.
#[derive(Debug)]
pub(crate) enum TxnOutcome {
    /// Every operation was applied.
    Committed,
    /// The server refused operation `index` with `error` (typed for that operation's path);
    /// nothing of the transaction was applied.
    Refused { index: usize, error: Error },
    /// The request was sent but its reply was lost (connection dropped, or the deadline passed
    /// first): it may or may not have been applied, and one abandoned at the deadline may still
    /// be applied later, as the server finds the state then.
    Unknown,
}

impl Session {
    /// Sends `ops` as one ZooKeeper `multi`: the server applies all of them or none.
    ///
    /// Never resends a request that may have reached the server: only a throttled one (refused
    /// unexecuted). Blocks until a reply or `deadline`; the request is issued only once the
    /// session is connected, so [`Error::ConnectionLoss`] means nothing was sent. Other errors
    /// (session expired, client closed) are definite: nothing was applied.
    pub(crate) fn multi(&self, ops: &[TxnOp], deadline: Option<Instant>) -> Result<TxnOutcome> {
        let first_path = ops.first().map_or("", TxnOp::path);
        loop {
            // A request queued while disconnected would be sent whenever the connection
            // returns, long after the caller gave up: send only on a live connection.
            self.wait_connected(deadline)?;
            let (zk, acl, owned) = (self.zk.clone(), self.acl, ops.to_vec());
            let request = Box::pin(async move {
                let mut writer = zk.new_multi_writer();
                for op in &owned {
                    match op {
                        TxnOp::Check { path, version } => {
                            writer.add_check_version(path, version.unwrap_or(-1))?
                        }
                        TxnOp::Create { path, data } => writer.add_create(
                            path,
                            data,
                            &zk::CreateMode::Persistent.with_acls(acl.acls()),
                        )?,
                        TxnOp::SetData { path, data } => writer.add_set_data(path, data, None)?,
                        TxnOp::Delete { path } => writer.add_delete(path, None)?,
                    }
                }
                // The request is queued here, when the future is made, not when awaited.
                writer.commit().await.map(drop)
            });
            match block_on(request, deadline) {
                Ok(Ok(())) => return Ok(TxnOutcome::Committed),
                Ok(Err(zk::MultiWriteError::OperationFailed { index, source })) => {
                    let path = ops.get(index).map_or(first_path, TxnOp::path);
                    return Ok(TxnOutcome::Refused {
                        index,
                        error: Error::from_zk(source, path),
                    });
                }
                Ok(Err(zk::MultiWriteError::RequestFailed {
                    source: zk::Error::Throttled,
                })) => {
                    debug!("transaction on {first_path} throttled by the server; retrying");
                    std::thread::sleep(RETRY_PAUSE);
                }
                Ok(Err(zk::MultiWriteError::RequestFailed { source }))
                    if outcome_unknown(&source) =>
                {
                    warn!(
                        "transaction on {first_path} (session {:#x}) sent, reply lost: {source}",
                        self.id
                    );
                    return Ok(TxnOutcome::Unknown);
                }
                Ok(Err(zk::MultiWriteError::RequestFailed { source })) => {
                    return Err(Error::from_zk(source, first_path))
                }
                Err(_abandoned) => {
                    warn!("transaction on {first_path} (session {:#x}) unanswered at the deadline; it may still be applied", self.id);
                    return Ok(TxnOutcome::Unknown);
                }
            }
        }
    }
}
