//! The requests a [`Transport`] sends, each answered by one [`Completion`], and the reading of
//! their replies.

use std::future::Future;
use std::sync::Arc;

use super::completion::{self, Completion};
use super::conn::{self, Answer};
use super::error::{Error, Refused, Result};
use super::events::{OneshotWatcher, Unwatch, WatchKind};
use super::jute::{self, Reader, Writer};
use super::proto::{self, op, perms, Stat};
use super::transport::Transport;
use super::{CreateOptions, TxnRequest};

/// A node's data and stat, as a getData reply gives them.
pub type NodeData = (Vec<u8>, Stat);

impl Transport {
    /// Creates a node; the reply is its stat and its path (with the sequence number of a
    /// sequential node).
    pub fn create(
        &self,
        path: &str,
        data: &[u8],
        options: &CreateOptions,
    ) -> Completion<(Stat, String)> {
        self.create_in(path, data, options, false)
    }

    /// [`create`](Self::create) of a lock node (ephemeral and sequential: two creates never
    /// name one node). With `coalesce`, while the connection is busy it may go out in one
    /// `multi` with other lock-node creates and deletes of our own nodes, never with another
    /// create under the same parent; the outcome is what this create alone would have had (a
    /// failed `multi` is sent again one request at a time). Before ZooKeeper 3.9 a create in
    /// a `multi` is answered with its path only: the stat is then made of what is known (the
    /// czxid is the `multi`'s zxid, the owner this session), its times 0.
    pub fn create_own(
        &self,
        path: &str,
        data: &[u8],
        options: &CreateOptions,
        coalesce: bool,
    ) -> Completion<(Stat, String)> {
        self.create_in(path, data, options, coalesce)
    }

    /// Until the guard drops, requests this thread sends wait, then go out together (see
    /// [`conn::Cork`]).
    pub fn cork(&self) -> conn::Cork {
        self.shared.cork()
    }

    /// Whether the parent of `path` was lately seen to exist on this session (a create below
    /// it succeeded).
    pub fn knows_parent(&self, path: &str) -> bool {
        self.shared
            .learned
            .known_parents
            .knows(&self.server_path(path))
    }

    fn create_in(
        &self,
        path: &str,
        data: &[u8],
        options: &CreateOptions,
        coalescible: bool,
    ) -> Completion<(Stat, String)> {
        let server = self.server_path(path);
        let strip = self.chroot_len();
        let mode = options.mode;
        let asked = Refused::new(perms::CREATE, path);
        let coalescible = coalescible && mode == proto::CreateMode::EphemeralSequential;
        let node = server.clone();
        self.shared.request_in(
            mode.op(),
            false,
            coalescible,
            |w| proto::write_create(w, &server, data, options.acls, mode),
            move |err, mut r, learned| {
                match err {
                    0 => learned.known_parents.learn(&node, true),
                    -101 => learned.known_parents.learn(&node, false),
                    _ => {}
                }
                on_ok(err, asked, || {
                    let created = r.string()?;
                    Ok((proto::read_stat(&mut r)?, strip_root(&created, strip)))
                })
            },
        )
    }

    /// Deletes a node, if `version` is given only at that data version.
    pub fn delete(&self, path: &str, version: Option<i32>) -> Completion<()> {
        let server = self.server_path(path);
        let asked = Refused::new(perms::DELETE, path);
        self.shared.request(
            op::DELETE,
            |w| {
                w.string(&server).int(version.unwrap_or(-1));
            },
            |err, _, _| Ok(error_for(err, asked).map_or(Ok(()), Err)),
        )
    }

    /// Deletes one of our own nodes (any version). While the connection is busy it may go
    /// out in one `multi` with other such deletes; the outcome is what this delete alone
    /// would have had (a failed `multi` is sent again one delete at a time).
    pub fn delete_own(&self, path: &str) -> Completion<()> {
        let server = self.server_path(path);
        let asked = Refused::new(perms::DELETE, path);
        self.shared.request_coalescible(
            op::DELETE,
            |w| {
                w.string(&server).int(-1);
            },
            |err, _, _| Ok(error_for(err, asked).map_or(Ok(()), Err)),
        )
    }

    pub fn get_data(&self, path: &str) -> Completion<(Vec<u8>, Stat)> {
        self.read(op::GET_DATA, path, read_data)
    }

    /// Reads the data of every node of `paths` in one request (ZooKeeper's `multiRead`, 3.6
    /// and later), setting no watch. Each read has the outcome it would have had alone, in the
    /// order of `paths`; the server answers them in one pass, far faster than a request each.
    pub fn get_data_each(&self, paths: &[&str]) -> Completion<Vec<Result<NodeData>>> {
        let servers: Vec<String> = paths.iter().map(|p| self.server_path(p)).collect();
        let asked: Vec<Refused> = paths.iter().map(|p| Refused::new(perms::READ, p)).collect();
        self.shared.request(
            op::MULTI_READ,
            |w| {
                for server in &servers {
                    w.int(op::GET_DATA).boolean(false).int(-1);
                    w.string(server).boolean(false);
                }
                w.int(-1).boolean(true).int(-1);
            },
            move |err, mut r, _| {
                if let Some(e) = proto::error_of(err) {
                    return Ok(Err(e));
                }
                let results = proto::read_multi_read(&mut r)?;
                if results.len() != asked.len() {
                    return Err(jute::Malformed(format!(
                        "{} results to a multiRead of {}",
                        results.len(),
                        asked.len()
                    )));
                }
                Ok(Ok(results
                    .into_iter()
                    .zip(asked)
                    .map(|(result, asked)| {
                        result.map_err(|code| error_for(code, asked).unwrap_or(Error::Code(code)))
                    })
                    .collect()))
            },
        )
    }

    /// A read of `path` that sets no watch, its reply decoded by `read`.
    fn read<T: Send + 'static>(
        &self,
        opcode: i32,
        path: &str,
        read: fn(&mut Reader<'_>) -> Result<T, jute::Malformed>,
    ) -> Completion<T> {
        let server = self.server_path(path);
        let asked = Refused::new(perms::READ, path);
        self.shared.request(
            opcode,
            |w| {
                w.string(&server).boolean(false);
            },
            move |err, mut r, _| on_ok(err, asked, || read(&mut r)),
        )
    }

    /// Whether the node exists, whatever its ACL.
    ///
    /// ZooKeeper up to 3.8 checks no permission for exists; 3.9 checks READ, but only on a
    /// node that exists (FinalRequestProcessor looks the node up first and answers a missing
    /// one with NoNode). A NoAuth therefore proves the node is there, and the answer is the
    /// same on every release.
    pub fn exists(&self, path: &str) -> Completion<bool> {
        let server = self.server_path(path);
        let asked = Refused::new(perms::READ, path);
        self.shared.request(
            op::EXISTS,
            |w| {
                w.string(&server).boolean(false);
            },
            |err, mut r, _| match error_for(err, asked) {
                Some(Error::NoNode) => Ok(Ok(false)),
                Some(Error::NoAuth(_)) => Ok(Ok(true)),
                Some(e) => Ok(Err(e)),
                None => proto::read_stat(&mut r).map(|_| Ok(true)),
            },
        )
    }

    /// The node's stat, `None` if it does not exist. Needs READ on the node from ZooKeeper
    /// 3.9 on (NoAuth), none before: see [`exists`](Self::exists). Only the fuzz tests need
    /// the stat.
    #[cfg(test)]
    pub fn check_stat(&self, path: &str) -> Completion<Option<Stat>> {
        let server = self.server_path(path);
        let asked = Refused::new(perms::READ, path);
        self.shared.request(
            op::EXISTS,
            |w| {
                w.string(&server).boolean(false);
            },
            |err, mut r, _| match error_for(err, asked) {
                Some(Error::NoNode) => Ok(Ok(None)),
                Some(e) => Ok(Err(e)),
                None => Ok(Ok(Some(proto::read_stat(&mut r)?))),
            },
        )
    }

    pub fn list_children(
        &self,
        path: &str,
    ) -> impl Future<Output = Result<Vec<String>>> + Send + 'static {
        let listing = self.get_children(path);
        async move { listing.await.map(|(children, _)| children) }
    }

    /// Children and the node's stat (getChildren2).
    pub fn get_children(&self, path: &str) -> Completion<(Vec<String>, Stat)> {
        self.read(op::GET_CHILDREN2, path, read_children)
    }

    /// Data and stat, and a watch that fires on the node's next change or deletion.
    pub fn get_and_watch_data(&self, path: &str) -> Completion<(Vec<u8>, Stat, OneshotWatcher)> {
        self.watching(
            op::GET_DATA,
            path,
            WatchKind::Data,
            read_data,
            |(data, stat), watcher| (data, stat, watcher),
        )
    }

    /// Children and stat, and a watch that fires on the next change of the children.
    pub fn get_and_watch_children(
        &self,
        path: &str,
    ) -> Completion<(Vec<String>, Stat, OneshotWatcher)> {
        self.watching(
            op::GET_CHILDREN2,
            path,
            WatchKind::Child,
            read_children,
            |(children, stat), watcher| (children, stat, watcher),
        )
    }

    /// A read that sets a watch: the watcher is registered when the reply says the server set
    /// the watch.
    fn watching<T, U: Send + 'static>(
        &self,
        opcode: i32,
        path: &str,
        kind: WatchKind,
        read: impl FnOnce(&mut Reader<'_>) -> Result<T, jute::Malformed> + Send + 'static,
        combine: impl FnOnce(T, OneshotWatcher) -> U + Send + 'static,
    ) -> Completion<U> {
        let server = self.server_path(path);
        let strip = self.chroot_len();
        let (slot, completion) = completion::pair();
        let key = server.clone();
        let asked = Refused::new(perms::READ, path);
        let owner: std::sync::Weak<dyn Unwatch> = {
            let strong: Arc<dyn Unwatch> = self.shared.clone();
            Arc::downgrade(&strong)
        };
        let session = Arc::downgrade(&self.shared);
        let on_reply: conn::OnReply = Box::new(move |answer| {
            let (err, mut body) = match answer {
                Answer::Lost(e) => {
                    if let Some(shared) = session.upgrade() {
                        shared
                            .watches
                            .lock()
                            .settled(&key, kind, false, strip, &owner);
                    }
                    slot.fill(Err(e));
                    return Ok(());
                }
                Answer::Reply { err, body, .. } => (err, body),
            };
            let Some(shared) = session.upgrade() else {
                slot.fill(Err(Error::ClientClosed));
                return Ok(());
            };
            if let Some(e) = error_for(err, asked) {
                shared
                    .watches
                    .lock()
                    .settled(&key, kind, false, strip, &owner);
                slot.fill(Err(e));
                return Ok(());
            }
            match read(&mut body) {
                Ok(value) => {
                    let watcher = shared
                        .watches
                        .lock()
                        .settled(&key, kind, true, strip, &owner);
                    match watcher {
                        Some(watcher) => slot.fill(Ok(combine(value, watcher))),
                        None => slot.fill(Err(Error::ConnectionLoss)),
                    }
                    Ok(())
                }
                Err(m) => {
                    shared
                        .watches
                        .lock()
                        .settled(&key, kind, false, strip, &owner);
                    slot.fill(Err(Error::ConnectionLoss));
                    Err(m)
                }
            }
        });
        let frame = self.shared.encode(opcode, |w| {
            w.string(&server).boolean(true);
        });
        let sent = {
            // Counted and queued under the registry's lock, so that a removal of the same
            // watch is queued either before this request or not at all (see `unwatch`).
            let mut watches = self.shared.watches.lock();
            watches.setting(&server, kind);
            match frame {
                Ok(frame) => self.shared.enqueue(frame, on_reply, false),
                Err(e) => Err((on_reply, e)),
            }
        };
        self.shared.flush();
        if let Err((on_reply, err)) = sent {
            let _ = on_reply(Answer::Lost(err));
        }
        completion
    }

    pub fn set_data(&self, path: &str, data: &[u8], version: Option<i32>) -> Completion<Stat> {
        let server = self.server_path(path);
        let asked = Refused::new(perms::WRITE, path);
        self.shared.request(
            op::SET_DATA,
            |w| {
                w.string(&server).buffer(data).int(version.unwrap_or(-1));
            },
            |err, mut r, _| on_ok(err, asked, || proto::read_stat(&mut r)),
        )
    }

    /// Makes the server catch up with the leader on `path`.
    pub fn sync(&self, path: &str) -> Completion<()> {
        self.sync_as(path, false)
    }

    /// A sync that goes out ahead of every request not yet written, for a liveness check: it
    /// must not wait behind bulk traffic, and its order relative to other requests does not
    /// matter (a sync that must order reads after writes is [`sync`](Self::sync)).
    pub fn sync_first(&self, path: &str) -> Completion<()> {
        self.sync_as(path, true)
    }

    fn sync_as(&self, path: &str, urgent: bool) -> Completion<()> {
        let server = self.server_path(path);
        // ZooKeeper checks no permission for sync; READ is what it serves.
        let asked = Refused::new(perms::READ, path);
        self.shared.request_as(
            op::SYNC,
            urgent,
            |w| {
                w.string(&server);
            },
            |err, mut r, _| on_ok(err, asked, || Ok(r.string().map(drop)?)),
        )
    }

    /// Creates `path` and its missing ancestors with `options`; a node that exists already
    /// is what was asked for.
    pub fn mkdir(
        &self,
        path: &str,
        options: &CreateOptions,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let client = self.clone();
        let (path, options) = (path.to_owned(), *options);
        async move {
            // The deepest node first: usually its parent exists and one request does. Each
            // NoNode moves one level up; then the missing levels are created going down.
            let mut missing: Vec<String> = Vec::new();
            let mut at = path;
            while at != "/" && !at.is_empty() {
                match client.create(&at, &[], &options).await {
                    Ok(_) | Err(Error::NodeExists) => break,
                    Err(Error::NoNode) => {
                        let parent = match at.rfind('/') {
                            Some(0) | None => "/".to_owned(),
                            Some(i) => at[..i].to_owned(),
                        };
                        missing.push(std::mem::replace(&mut at, parent));
                    }
                    Err(e) => return Err(e),
                }
            }
            for level in missing.iter().rev() {
                match client.create(level, &[], &options).await {
                    Ok(_) | Err(Error::NodeExists) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        }
    }

    /// Runs `ops` as one transaction. `Ok(None)` if it committed, `Ok(Some((index, error)))`
    /// if the server refused operation `index` (nothing was applied), `Err` if the request
    /// itself failed.
    pub fn multi(&self, ops: &[TxnRequest]) -> Completion<Option<(usize, Error)>> {
        let asked: Vec<Refused> = ops.iter().map(TxnRequest::asked).collect();
        let ops: Vec<TxnRequest> = ops
            .iter()
            .map(|op| match op.clone() {
                TxnRequest::Check { path, version } => TxnRequest::Check {
                    path: self.server_path(&path),
                    version,
                },
                TxnRequest::Create {
                    path,
                    data,
                    options,
                } => TxnRequest::Create {
                    path: self.server_path(&path),
                    data,
                    options,
                },
                TxnRequest::SetData {
                    path,
                    data,
                    version,
                } => TxnRequest::SetData {
                    path: self.server_path(&path),
                    data,
                    version,
                },
                TxnRequest::Delete { path, version } => TxnRequest::Delete {
                    path: self.server_path(&path),
                    version,
                },
            })
            .collect();
        self.shared.request(
            op::MULTI,
            |w| write_multi(w, &ops),
            move |err, mut r, _| {
                if err != 0 && r.remaining() == 0 {
                    return Ok(Err(proto::error_of(err).unwrap_or(Error::Code(err))));
                }
                let results = proto::read_multi(&mut r)?;
                let failed = results
                    .iter()
                    .enumerate()
                    .find_map(|(i, result)| match result {
                        proto::MultiResult::Error(code) if *code != 0 && *code != -2 => {
                            let asked = asked.get(i).cloned();
                            let error = match asked {
                                Some(asked) => error_for(*code, asked),
                                None => proto::error_of(*code),
                            };
                            Some((i, error.unwrap_or(Error::Code(*code))))
                        }
                        _ => None,
                    });
                match (failed, proto::error_of(err)) {
                    (Some(failed), _) => Ok(Ok(Some(failed))),
                    (None, Some(e)) => Ok(Err(e)),
                    (None, None) => Ok(Ok(None)),
                }
            },
        )
    }
}

fn write_multi(w: &mut Writer, ops: &[TxnRequest]) {
    for op in ops {
        match op {
            TxnRequest::Check { path, version } => {
                w.int(op::CHECK).boolean(false).int(-1);
                w.string(path).int(*version);
            }
            TxnRequest::Create {
                path,
                data,
                options,
            } => {
                w.int(options.mode.op()).boolean(false).int(-1);
                proto::write_create(w, path, data, options.acls, options.mode);
            }
            TxnRequest::SetData {
                path,
                data,
                version,
            } => {
                w.int(op::SET_DATA).boolean(false).int(-1);
                w.string(path).buffer(data).int(*version);
            }
            TxnRequest::Delete { path, version } => {
                w.int(op::DELETE).boolean(false).int(-1);
                w.string(path).int(*version);
            }
        }
    }
    w.int(-1).boolean(true).int(-1);
}

/// A reply's value, read by `read` if the server said OK, else the server's error.
fn on_ok<T>(
    err: i32,
    asked: Refused,
    read: impl FnOnce() -> Result<T, jute::Malformed>,
) -> Result<Result<T, Error>, jute::Malformed> {
    match error_for(err, asked) {
        Some(e) => Ok(Err(e)),
        None => read().map(Ok),
    }
}

/// The error of a reply to the request `asked` describes, `None` for OK: a NoAuth names the
/// request, so that the caller can say who needed what where.
fn error_for(err: i32, asked: Refused) -> Option<Error> {
    match proto::error_of(err)? {
        Error::NoAuth(_) => Some(Error::NoAuth(Some(asked))),
        other => Some(other),
    }
}

/// A getData reply: the data and the stat.
fn read_data(r: &mut Reader<'_>) -> Result<(Vec<u8>, Stat), jute::Malformed> {
    Ok((r.buffer()?.to_vec(), proto::read_stat(r)?))
}

/// A getChildren2 reply: the children and the parent's stat.
fn read_children(r: &mut Reader<'_>) -> Result<(Vec<String>, Stat), jute::Malformed> {
    Ok((r.strings()?, proto::read_stat(r)?))
}

/// `path` as the server gave it, with the client's chroot (its first `strip` bytes) removed.
fn strip_root(path: &str, strip: usize) -> String {
    match path.get(strip..) {
        Some("") | None => "/".to_owned(),
        Some(rest) => rest.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chroot_paths_map_both_ways() {
        assert_eq!(
            strip_root("/root/a/lock-0000000001", 5),
            "/a/lock-0000000001"
        );
        assert_eq!(strip_root("/root", 5), "/");
        assert_eq!(strip_root("/a", 0), "/a");
    }

    #[test]
    fn a_multi_is_framed_with_a_closing_header() {
        let mut w = Writer::frame();
        write_multi(
            &mut w,
            &[TxnRequest::Check {
                path: "/l".into(),
                version: -1,
            }],
        );
        let frame = w.finish();
        let mut r = Reader::new(&frame[4..]);
        assert_eq!(r.int().unwrap(), op::CHECK);
        assert!(!r.boolean().unwrap());
        assert_eq!(r.int().unwrap(), -1);
        assert_eq!(r.string().unwrap(), "/l");
        assert_eq!(r.int().unwrap(), -1);
        assert_eq!(
            (r.int().unwrap(), r.boolean().unwrap(), r.int().unwrap()),
            (-1, true, -1)
        );
        assert_eq!(r.remaining(), 0);
    }
}
