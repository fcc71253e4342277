//! ZooKeeper's requests and replies as zklock sends and reads them. Every record's layout is
//! `zklock-proto`'s (shared with the embedded server and the differential test); what is here
//! are the client's own value types and the shapes its callers want.

use zklock_proto::Record;

use super::error::Error;
use super::jute::{Decoded, Malformed, Reader, Writer};

/// Op codes and the special xids: `zklock-proto`'s, as the server's.
pub(crate) use zklock_proto::{op, xid};

/// ZooKeeper's default `jute.maxbuffer` (1 MiB) plus room for the headers: the largest request
/// sent (the server refuses larger ones), and the largest frame read during a handshake. The
/// replies of an established session have a limit of their own (`Connector::max_reply_size`):
/// the server bounds what it accepts, not what it sends.
pub(crate) const MAX_FRAME: usize = 0x10_0000 + 0x1000;

/// How many bytes of paths one SetWatches request carries at most (as ZooKeeper's own
/// client does): a server refuses a frame over its `jute.maxbuffer`.
pub(crate) const SET_WATCHES_MAX_BYTES: usize = 128 * 1024;

/// A node's `Stat`: the record of `zklock-proto`, the one codec of the client and the server.
pub use zklock_proto::Stat;

/// Reads a [`Stat`], failing as every other read of a reply does.
pub(crate) fn read_stat(r: &mut Reader<'_>) -> Decoded<Stat> {
    Ok(zklock_proto::Record::decode(r)?)
}

/// What a notification says happened (`Watcher.Event.EventType`), plus `Session` for a watch
/// that will never fire because its session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Session,
    NodeCreated,
    NodeDeleted,
    NodeDataChanged,
    NodeChildrenChanged,
}

/// A watch notification: its type and the node's path (inside the client's chroot).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchedEvent {
    pub event_type: EventType,
    pub path: String,
}

/// A notification as it comes off the wire (path as the server knows it).
pub(crate) struct Notification {
    pub(crate) kind: i32,
    pub(crate) path: String,
}

impl Notification {
    pub(crate) fn read(r: &mut Reader<'_>) -> Decoded<Notification> {
        let e = zklock_proto::WatcherEvent::decode(r)?;
        Ok(Notification {
            kind: e.kind,
            path: e.path,
        })
    }

    pub(crate) fn event_type(&self) -> Option<EventType> {
        Some(match self.kind {
            1 => EventType::NodeCreated,
            2 => EventType::NodeDeleted,
            3 => EventType::NodeDataChanged,
            4 => EventType::NodeChildrenChanged,
            _ => return None,
        })
    }
}

/// `ReplyHeader`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReplyHeader {
    pub(crate) xid: i32,
    pub(crate) zxid: i64,
    pub(crate) err: i32,
}

impl ReplyHeader {
    pub(crate) fn read(r: &mut Reader<'_>) -> Decoded<ReplyHeader> {
        let h = zklock_proto::ReplyHeader::decode(r)?;
        Ok(ReplyHeader {
            xid: h.xid,
            zxid: h.zxid,
            err: h.err,
        })
    }
}

/// `ConnectRequest`: a new session (id 0) or the re-establishment of ours.
pub(crate) struct ConnectRequest<'a> {
    pub(crate) last_zxid: i64,
    pub(crate) timeout_ms: i32,
    pub(crate) session_id: i64,
    pub(crate) password: &'a [u8],
}

impl ConnectRequest<'_> {
    pub(crate) fn frame(&self) -> Vec<u8> {
        let mut w = Writer::frame();
        w.record(&zklock_proto::ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: self.last_zxid,
            timeout: self.timeout_ms,
            session_id: self.session_id,
            passwd: self.password.to_vec(),
            // Not read-only: a server cut off from its quorum must refuse us rather than
            // serve stale reads to a lock.
            read_only: Some(false),
        });
        w.finish()
    }
}

/// `ConnectResponse`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConnectResponse {
    pub(crate) timeout_ms: i32,
    pub(crate) session_id: i64,
    pub(crate) password: Vec<u8>,
}

impl ConnectResponse {
    pub(crate) fn read(r: &mut Reader<'_>) -> Decoded<ConnectResponse> {
        // A trailing read-only flag is optional (older servers omit it); we never ask for one.
        let zklock_proto::ConnectResponse {
            timeout: timeout_ms,
            session_id,
            passwd: password,
            ..
        } = zklock_proto::ConnectResponse::decode(r)?;
        if password.len() > 64 {
            return Err(Malformed(format!(
                "session password of {} bytes",
                password.len()
            )));
        }
        Ok(ConnectResponse {
            timeout_ms,
            session_id,
            password,
        })
    }
}

/// One ACL entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acl {
    pub perms: i32,
    pub scheme: &'static str,
    pub id: &'static str,
}

impl Acl {
    pub const fn new(perms: i32, scheme: &'static str, id: &'static str) -> Acl {
        Acl { perms, scheme, id }
    }
}

/// Permission bits (`ZooDefs.Perms`): `zklock-proto`'s.
pub use zklock_proto::perms;

/// How a node is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateMode {
    Persistent,
    EphemeralSequential,
    Container,
}

impl CreateMode {
    fn flags(self) -> i32 {
        match self {
            CreateMode::Persistent => 0,
            CreateMode::EphemeralSequential => 3,
            CreateMode::Container => 4,
        }
    }

    /// Containers have an op code of their own; everything else is `create2` (reply with a
    /// stat).
    pub(crate) fn op(self) -> i32 {
        match self {
            CreateMode::Container => op::CREATE_CONTAINER,
            _ => op::CREATE2,
        }
    }
}

fn proto_acls(acls: &[Acl]) -> Vec<zklock_proto::Acl> {
    acls.iter()
        .map(|a| zklock_proto::Acl::new(a.perms, a.scheme, a.id))
        .collect()
}

/// The body of a create request (`CreateRequest`).
pub(crate) fn write_create(
    w: &mut Writer,
    path: &str,
    data: &[u8],
    acls: &[Acl],
    mode: CreateMode,
) {
    w.record(&zklock_proto::CreateRequest {
        path: path.to_owned(),
        data: data.to_vec(),
        acl: proto_acls(acls),
        flags: mode.flags(),
    });
}

/// The `ErrorCode` of a reply header as an error; `None` for OK.
pub(crate) fn error_of(code: i32) -> Option<Error> {
    Some(match code {
        0 => return None,
        -4 => Error::ConnectionLoss,
        -5 => Error::Marshalling,
        -6 => Error::Unimplemented,
        -7 => Error::Timeout,
        -8 => Error::BadArguments("refused by the server".into()),
        -101 => Error::NoNode,
        // Which request needed what is for the caller to add (see `Refused`).
        -102 => Error::NoAuth(None),
        -103 => Error::BadVersion,
        -108 => Error::NoChildrenForEphemerals,
        -110 => Error::NodeExists,
        -111 => Error::NotEmpty,
        -112 => Error::SessionExpired,
        -114 => Error::InvalidAcl,
        -115 => Error::AuthFailed,
        -118 => Error::SessionMoved,
        -119 => Error::NotReadOnly,
        -121 => Error::NoWatcher,
        -123 => Error::ReconfigDisabled,
        // SessionClosedRequireSaslAuth: the server demands SASL and we did not pass it.
        -124 => Error::AuthFailed,
        -125 => Error::QuotaExceeded,
        -127 => Error::Throttled,
        other => Error::Code(other),
    })
}

/// One operation's result in a `multi` reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MultiResult {
    Done,
    /// A created node's path, with its stat when the operation was a create2 answered as one
    /// (ZooKeeper before 3.9 answers a create2 in a `multi` as a plain create, ZOOKEEPER-4026).
    Created(String, Option<Stat>),
    Error(i32),
}

/// The results of a `multi` reply, one per operation, up to its terminating header.
pub(crate) fn read_multi(r: &mut Reader<'_>) -> Decoded<Vec<MultiResult>> {
    use zklock_proto::OpResult;
    zklock_proto::MultiResponse::decode(r)?
        .results
        .into_iter()
        .map(|res| match res {
            OpResult::Check | OpResult::Delete | OpResult::SetData(_) => Ok(MultiResult::Done),
            OpResult::Create(path) => Ok(MultiResult::Created(path, None)),
            OpResult::Create2(path, stat) => Ok(MultiResult::Created(path, Some(stat))),
            OpResult::Error(code) => Ok(MultiResult::Error(code)),
            OpResult::GetChildren(_) | OpResult::GetData(..) => {
                Err(Malformed("a read's result in a multi reply".into()))
            }
        })
        .collect()
}

/// One read's outcome in a `multiRead` reply: a getData reply, or the error code that read
/// alone would have had.
pub(crate) type ReadResult = Result<(Vec<u8>, Stat), i32>;

/// The results of a `multiRead` reply of getData reads, one per read, up to its terminating
/// header.
pub(crate) fn read_multi_read(r: &mut Reader<'_>) -> Decoded<Vec<ReadResult>> {
    read_multi_read_raw(r)?
        .into_iter()
        .map(|result| match result {
            RawRead::Data { body, .. } => {
                let mut body = Reader::new(body);
                Ok(Ok((body.buffer()?.to_vec(), read_stat(&mut body)?)))
            }
            RawRead::Error(code) => Ok(Err(code)),
            RawRead::Children(_) => Err(Malformed("a getChildren result to getData reads".into())),
        })
        .collect()
}

/// One read's outcome in a `multiRead` reply, as the bytes of its answer: a getChildren's
/// children (a vector of strings), a getData's data and stat, or the error code that read
/// alone would have had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RawRead<'a> {
    Children(&'a [u8]),
    Data {
        /// The data and the stat, as a getData reply's body.
        body: &'a [u8],
        /// The stat alone (the end of `body`).
        stat: &'a [u8],
    },
    Error(i32),
}

/// The results of a `multiRead` reply of getChildren and getData reads, up to its terminating
/// header, each checked to decode.
pub(crate) fn read_multi_read_raw<'a>(r: &mut Reader<'a>) -> Decoded<Vec<RawRead<'a>>> {
    let mut results = Vec::new();
    loop {
        let kind = r.int()?;
        let done = r.boolean()?;
        let _err = r.int()?;
        if done {
            return Ok(results);
        }
        let start = r.rest();
        // Each result takes at least a header: bounded by the frame.
        results.push(match kind {
            op::GET_CHILDREN => {
                r.strings()?;
                RawRead::Children(&start[..start.len() - r.rest().len()])
            }
            op::GET_DATA => {
                r.buffer()?;
                let stat_at = start.len() - r.rest().len();
                read_stat(r)?;
                let end = start.len() - r.rest().len();
                RawRead::Data {
                    body: &start[..end],
                    stat: &start[stat_at..end],
                }
            }
            op::ERROR => RawRead::Error(r.int()?),
            other => return Err(Malformed(format!("op {other} in a multiRead reply"))),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raw_multi_read_reply_keeps_each_answer_s_bytes() {
        let mut w = Writer::frame();
        w.int(op::GET_CHILDREN).boolean(false).int(0);
        w.strings(&["lock-0000000001", "lock-0000000002"]);
        w.int(op::GET_DATA).boolean(false).int(0);
        w.buffer(b"d");
        w.record(&Stat {
            czxid: 7,
            ..Stat::default()
        });
        w.int(op::ERROR).boolean(false).int(-101).int(-101);
        w.int(-1).boolean(true).int(-1);
        let frame = w.finish();
        let results = read_multi_read_raw(&mut Reader::new(&frame[4..])).unwrap();
        assert_eq!(results.len(), 3);
        let RawRead::Children(children) = results[0] else {
            panic!("{:?}", results[0]);
        };
        assert_eq!(
            Reader::new(children).strings().unwrap(),
            ["lock-0000000001", "lock-0000000002"]
        );
        let RawRead::Data { body, stat } = results[1] else {
            panic!("{:?}", results[1]);
        };
        assert_eq!(body.len(), 4 + 1 + 68);
        assert_eq!(read_stat(&mut Reader::new(stat)).unwrap().czxid, 7);
        assert_eq!(results[2], RawRead::Error(-101));
    }

    #[test]
    fn a_raw_multi_read_reply_cut_short_is_malformed() {
        let mut w = Writer::frame();
        w.int(op::GET_DATA).boolean(false).int(0);
        w.buffer(b"d");
        let frame = w.finish();
        assert!(read_multi_read_raw(&mut Reader::new(&frame[4..])).is_err());
    }

    #[test]
    fn stat_reads_its_eleven_fields() {
        let mut w = Writer::frame();
        w.long(1)
            .long(2)
            .long(3)
            .long(4)
            .int(5)
            .int(6)
            .int(7)
            .long(8)
            .int(9)
            .int(10)
            .long(11);
        let mut frame = w.finish();
        let stat = read_stat(&mut Reader::new(&frame.split_off(4))).unwrap();
        assert_eq!(
            (stat.czxid, stat.version, stat.ephemeral_owner, stat.pzxid),
            (1, 5, 8, 11)
        );
    }

    #[test]
    fn multi_reply_with_an_error() {
        let mut w = Writer::frame();
        w.int(op::ERROR).boolean(false).int(0).int(0);
        w.int(op::ERROR).boolean(false).int(-101).int(-101);
        w.int(-1).boolean(true).int(-1);
        let mut frame = w.finish();
        let results = read_multi(&mut Reader::new(&frame.split_off(4))).unwrap();
        assert_eq!(
            results,
            vec![MultiResult::Error(0), MultiResult::Error(-101)]
        );
    }

    #[test]
    fn multi_read_reply_keeps_each_outcome_in_order() {
        let mut w = Writer::frame();
        w.int(op::GET_DATA).boolean(false).int(0);
        w.buffer(b"host=a pid=1 thread=t");
        w.long(7).long(8).long(9).long(10).int(1).int(0).int(0);
        w.long(0x55).int(21).int(0).long(7);
        w.int(op::ERROR).boolean(false).int(-101).int(-101);
        w.int(op::ERROR).boolean(false).int(-102).int(-102);
        w.int(-1).boolean(true).int(-1);
        let mut frame = w.finish();
        let results = read_multi_read(&mut Reader::new(&frame.split_off(4))).unwrap();
        assert_eq!(results.len(), 3);
        let (data, stat) = results[0].as_ref().unwrap();
        assert_eq!(data, b"host=a pid=1 thread=t");
        assert_eq!(
            (stat.czxid, stat.version, stat.ephemeral_owner),
            (7, 1, 0x55)
        );
        assert_eq!(results[1..], [Err(-101), Err(-102)]);
    }

    #[test]
    fn a_multi_read_reply_with_a_write_result_is_malformed() {
        let mut w = Writer::frame();
        w.int(op::CREATE).boolean(false).int(0).string("/a");
        w.int(-1).boolean(true).int(-1);
        let mut frame = w.finish();
        assert!(read_multi_read(&mut Reader::new(&frame.split_off(4))).is_err());
    }

    #[test]
    fn a_truncated_multi_reply_is_malformed() {
        let mut w = Writer::frame();
        w.int(op::CREATE2).boolean(false).int(0).string("/a");
        let mut frame = w.finish();
        assert!(read_multi(&mut Reader::new(&frame.split_off(4))).is_err());
    }
}
