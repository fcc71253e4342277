//! Whole requests and replies: a request's body chosen by its op code, the ops of `multi` and
//! `multiRead` and their results, and reply bodies chosen by the op they answer.

use crate::codes::op;
use crate::jute::{malformed, DecodeError, Decoded, Reader, Record, Writer};
use crate::records::*;

/// One op of a `multi` (writes) or `multiRead` (reads).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MultiOp {
    /// `create`: its result is the path alone.
    Create(CreateRequest),
    /// `create2`: its result has the stat.
    Create2(CreateRequest),
    /// `createContainer`.
    CreateContainer(CreateRequest),
    /// `createTTL`.
    CreateTtl(CreateTtlRequest),
    /// `delete`.
    Delete(DeleteRequest),
    /// `setData`.
    SetData(SetDataRequest),
    /// `check`: the node has this version.
    Check(CheckVersionRequest),
    /// `getChildren` (multiRead).
    GetChildren(PathWatchRequest),
    /// `getData` (multiRead).
    GetData(PathWatchRequest),
}

impl MultiOp {
    /// The op code.
    pub fn op(&self) -> i32 {
        match self {
            MultiOp::Create(_) => op::CREATE,
            MultiOp::Create2(_) => op::CREATE2,
            MultiOp::CreateContainer(_) => op::CREATE_CONTAINER,
            MultiOp::CreateTtl(_) => op::CREATE_TTL,
            MultiOp::Delete(_) => op::DELETE,
            MultiOp::SetData(_) => op::SET_DATA,
            MultiOp::Check(_) => op::CHECK,
            MultiOp::GetChildren(_) => op::GET_CHILDREN,
            MultiOp::GetData(_) => op::GET_DATA,
        }
    }

    /// The path the op is about.
    pub fn path(&self) -> &str {
        match self {
            MultiOp::Create(r) | MultiOp::Create2(r) | MultiOp::CreateContainer(r) => &r.path,
            MultiOp::CreateTtl(r) => &r.path,
            MultiOp::Delete(r) => &r.path,
            MultiOp::SetData(r) => &r.path,
            MultiOp::Check(r) => &r.path,
            MultiOp::GetChildren(r) | MultiOp::GetData(r) => &r.path,
        }
    }

    fn encode_body(&self, w: &mut Writer) {
        match self {
            MultiOp::Create(r) | MultiOp::Create2(r) | MultiOp::CreateContainer(r) => r.encode(w),
            MultiOp::CreateTtl(r) => r.encode(w),
            MultiOp::Delete(r) => r.encode(w),
            MultiOp::SetData(r) => r.encode(w),
            MultiOp::Check(r) => r.encode(w),
            MultiOp::GetChildren(r) | MultiOp::GetData(r) => r.encode(w),
        }
    }

    fn decode_body(code: i32, r: &mut Reader<'_>) -> Decoded<MultiOp> {
        Ok(match code {
            op::CREATE => MultiOp::Create(r.record()?),
            op::CREATE2 => MultiOp::Create2(r.record()?),
            op::CREATE_CONTAINER => MultiOp::CreateContainer(r.record()?),
            op::CREATE_TTL => MultiOp::CreateTtl(r.record()?),
            op::DELETE => MultiOp::Delete(r.record()?),
            op::SET_DATA => MultiOp::SetData(r.record()?),
            op::CHECK => MultiOp::Check(r.record()?),
            op::GET_CHILDREN => MultiOp::GetChildren(r.record()?),
            op::GET_DATA => MultiOp::GetData(r.record()?),
            other => return malformed(format!("op {other} in a multi")),
        })
    }
}

/// The ops of a `multi` or `multiRead` request, up to the end marker.
fn encode_ops(ops: &[MultiOp], w: &mut Writer) {
    for o in ops {
        w.record(&MultiHeader {
            op: o.op(),
            done: false,
            err: -1,
        });
        o.encode_body(w);
    }
    w.record(&MultiHeader {
        op: -1,
        done: true,
        err: -1,
    });
}

fn decode_ops(r: &mut Reader<'_>) -> Decoded<Vec<MultiOp>> {
    let mut ops = Vec::new();
    loop {
        // Each op takes at least its header: the loop is bounded by the frame.
        let h: MultiHeader = r.record()?;
        if h.done {
            return Ok(ops);
        }
        ops.push(MultiOp::decode_body(h.op, r)?);
    }
}

/// One op's outcome in a `multi` or `multiRead` reply.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum OpResult {
    /// A `create`'s path.
    Create(String),
    /// A `create2`/`createContainer`/`createTTL`'s path and stat (answered as op 15).
    Create2(String, Stat),
    /// A `delete`.
    Delete,
    /// A `setData`'s new stat.
    SetData(Stat),
    /// A `check`.
    Check,
    /// A `getChildren`'s children.
    GetChildren(Vec<String>),
    /// A `getData`'s data and stat.
    GetData(Vec<u8>, Stat),
    /// An error: the failing op's code; in a failed `multi`, 0 for the ops before it and
    /// RuntimeInconsistency (-2) for those after.
    Error(i32),
}

impl OpResult {
    /// The op code its header carries.
    pub fn op(&self) -> i32 {
        match self {
            OpResult::Create(_) => op::CREATE,
            OpResult::Create2(..) => op::CREATE2,
            OpResult::Delete => op::DELETE,
            OpResult::SetData(_) => op::SET_DATA,
            OpResult::Check => op::CHECK,
            OpResult::GetChildren(_) => op::GET_CHILDREN,
            OpResult::GetData(..) => op::GET_DATA,
            OpResult::Error(_) => op::ERROR,
        }
    }
}

/// The results of a `multi` or `multiRead` reply.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct MultiResponse {
    /// One result per op, in order.
    pub results: Vec<OpResult>,
}

impl Record for MultiResponse {
    fn encode(&self, w: &mut Writer) {
        for res in &self.results {
            let err = match res {
                OpResult::Error(e) => *e,
                _ => 0,
            };
            w.record(&MultiHeader {
                op: res.op(),
                done: false,
                err,
            });
            match res {
                OpResult::Create(path) => {
                    w.string(path);
                }
                OpResult::Create2(path, stat) => {
                    w.string(path).record(stat);
                }
                OpResult::Delete | OpResult::Check => {}
                OpResult::SetData(stat) => {
                    w.record(stat);
                }
                OpResult::GetChildren(children) => {
                    w.strings(children);
                }
                OpResult::GetData(data, stat) => {
                    w.buffer(data).record(stat);
                }
                OpResult::Error(e) => {
                    w.int(*e);
                }
            }
        }
        w.record(&MultiHeader {
            op: -1,
            done: true,
            err: -1,
        });
    }

    fn decode(r: &mut Reader<'_>) -> Decoded<Self> {
        let mut results = Vec::new();
        loop {
            let h: MultiHeader = r.record()?;
            if h.done {
                return Ok(MultiResponse { results });
            }
            results.push(match h.op {
                op::CREATE => OpResult::Create(r.string()?),
                op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL => {
                    OpResult::Create2(r.string()?, r.record()?)
                }
                op::DELETE => OpResult::Delete,
                op::SET_DATA => OpResult::SetData(r.record()?),
                op::CHECK => OpResult::Check,
                op::GET_CHILDREN => OpResult::GetChildren(r.strings()?),
                op::GET_DATA => OpResult::GetData(r.buffer()?.to_vec(), r.record()?),
                op::ERROR => OpResult::Error(r.int()?),
                other => return malformed(format!("op {other} in a multi reply")),
            });
        }
    }
}

/// A request's body, by op code.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Request {
    /// `create` (1).
    Create(CreateRequest),
    /// `create2` (15).
    Create2(CreateRequest),
    /// `createContainer` (19).
    CreateContainer(CreateRequest),
    /// `createTTL` (21).
    CreateTtl(CreateTtlRequest),
    /// `delete` (2).
    Delete(DeleteRequest),
    /// `deleteContainer` (20): the container sweep's delete, which ZooKeeper also takes from
    /// a client (its body is a path only).
    DeleteContainer(PathRequest),
    /// `exists` (3).
    Exists(PathWatchRequest),
    /// `getData` (4).
    GetData(PathWatchRequest),
    /// `setData` (5).
    SetData(SetDataRequest),
    /// `getACL` (6).
    GetAcl(PathRequest),
    /// `setACL` (7).
    SetAcl(SetAclRequest),
    /// `getChildren` (8).
    GetChildren(PathWatchRequest),
    /// `sync` (9).
    Sync(PathRequest),
    /// `ping` (11): no body.
    Ping,
    /// `getChildren2` (12).
    GetChildren2(PathWatchRequest),
    /// `check` (13).
    Check(CheckVersionRequest),
    /// `multi` (14).
    Multi(Vec<MultiOp>),
    /// `reconfig` (16).
    Reconfig(ReconfigRequest),
    /// `checkWatches` (17).
    CheckWatches(WatchesRequest),
    /// `removeWatches` (18).
    RemoveWatches(WatchesRequest),
    /// `multiRead` (22).
    MultiRead(Vec<MultiOp>),
    /// `auth` (100).
    Auth(AuthPacket),
    /// `setWatches` (101).
    SetWatches(SetWatches),
    /// `getEphemerals` (103).
    GetEphemerals(PathRequest),
    /// `getAllChildrenNumber` (104).
    GetAllChildrenNumber(PathRequest),
    /// `setWatches2` (105).
    SetWatches2(SetWatches2),
    /// `addWatch` (106).
    AddWatch(AddWatchRequest),
    /// `whoAmI` (107): no body.
    WhoAmI,
    /// `closeSession` (-11): no body.
    CloseSession,
}

impl Request {
    /// The op code.
    pub fn op(&self) -> i32 {
        match self {
            Request::Create(_) => op::CREATE,
            Request::Create2(_) => op::CREATE2,
            Request::CreateContainer(_) => op::CREATE_CONTAINER,
            Request::CreateTtl(_) => op::CREATE_TTL,
            Request::Delete(_) => op::DELETE,
            Request::DeleteContainer(_) => op::DELETE_CONTAINER,
            Request::Exists(_) => op::EXISTS,
            Request::GetData(_) => op::GET_DATA,
            Request::SetData(_) => op::SET_DATA,
            Request::GetAcl(_) => op::GET_ACL,
            Request::SetAcl(_) => op::SET_ACL,
            Request::GetChildren(_) => op::GET_CHILDREN,
            Request::Sync(_) => op::SYNC,
            Request::Ping => op::PING,
            Request::GetChildren2(_) => op::GET_CHILDREN2,
            Request::Check(_) => op::CHECK,
            Request::Multi(_) => op::MULTI,
            Request::Reconfig(_) => op::RECONFIG,
            Request::CheckWatches(_) => op::CHECK_WATCHES,
            Request::RemoveWatches(_) => op::REMOVE_WATCHES,
            Request::MultiRead(_) => op::MULTI_READ,
            Request::Auth(_) => op::AUTH,
            Request::SetWatches(_) => op::SET_WATCHES,
            Request::GetEphemerals(_) => op::GET_EPHEMERALS,
            Request::GetAllChildrenNumber(_) => op::GET_ALL_CHILDREN_NUMBER,
            Request::SetWatches2(_) => op::SET_WATCHES2,
            Request::AddWatch(_) => op::ADD_WATCH,
            Request::WhoAmI => op::WHO_AM_I,
            Request::CloseSession => op::CLOSE_SESSION,
        }
    }

    /// Appends the body (not the header).
    pub fn encode_body(&self, w: &mut Writer) {
        match self {
            Request::Create(r) | Request::Create2(r) | Request::CreateContainer(r) => r.encode(w),
            Request::CreateTtl(r) => r.encode(w),
            Request::Delete(r) => r.encode(w),
            Request::Exists(r)
            | Request::GetData(r)
            | Request::GetChildren(r)
            | Request::GetChildren2(r) => r.encode(w),
            Request::SetData(r) => r.encode(w),
            Request::GetAcl(r)
            | Request::Sync(r)
            | Request::DeleteContainer(r)
            | Request::GetEphemerals(r)
            | Request::GetAllChildrenNumber(r) => r.encode(w),
            Request::SetAcl(r) => r.encode(w),
            Request::Ping | Request::WhoAmI | Request::CloseSession => {}
            Request::Check(r) => r.encode(w),
            Request::Multi(ops) | Request::MultiRead(ops) => encode_ops(ops, w),
            Request::Reconfig(r) => r.encode(w),
            Request::CheckWatches(r) | Request::RemoveWatches(r) => r.encode(w),
            Request::Auth(r) => r.encode(w),
            Request::SetWatches(r) => r.encode(w),
            Request::SetWatches2(r) => r.encode(w),
            Request::AddWatch(r) => r.encode(w),
        }
    }

    /// Reads the body of a request of op code `code`. Trailing bytes are ignored, as
    /// ZooKeeper's deserializer ignores them.
    ///
    /// # Errors
    /// [`DecodeError::UnknownOp`] for an op code this crate does not know (a server answers
    /// `Unimplemented`), [`DecodeError::Malformed`] for a body that does not decode.
    pub fn decode_body(code: i32, r: &mut Reader<'_>) -> Decoded<Request> {
        Ok(match code {
            op::CREATE => Request::Create(r.record()?),
            op::CREATE2 => Request::Create2(r.record()?),
            op::CREATE_CONTAINER => Request::CreateContainer(r.record()?),
            op::CREATE_TTL => Request::CreateTtl(r.record()?),
            op::DELETE => Request::Delete(r.record()?),
            op::DELETE_CONTAINER => Request::DeleteContainer(r.record()?),
            op::EXISTS => Request::Exists(r.record()?),
            op::GET_DATA => Request::GetData(r.record()?),
            op::SET_DATA => Request::SetData(r.record()?),
            op::GET_ACL => Request::GetAcl(r.record()?),
            op::SET_ACL => Request::SetAcl(r.record()?),
            op::GET_CHILDREN => Request::GetChildren(r.record()?),
            op::SYNC => Request::Sync(r.record()?),
            op::PING => Request::Ping,
            op::GET_CHILDREN2 => Request::GetChildren2(r.record()?),
            op::CHECK => Request::Check(r.record()?),
            op::MULTI => Request::Multi(decode_ops(r)?),
            op::RECONFIG => Request::Reconfig(r.record()?),
            op::CHECK_WATCHES => Request::CheckWatches(r.record()?),
            op::REMOVE_WATCHES => Request::RemoveWatches(r.record()?),
            op::MULTI_READ => Request::MultiRead(decode_ops(r)?),
            op::AUTH => Request::Auth(r.record()?),
            op::SET_WATCHES => Request::SetWatches(r.record()?),
            op::GET_EPHEMERALS => Request::GetEphemerals(r.record()?),
            op::GET_ALL_CHILDREN_NUMBER => Request::GetAllChildrenNumber(r.record()?),
            op::SET_WATCHES2 => Request::SetWatches2(r.record()?),
            op::ADD_WATCH => Request::AddWatch(r.record()?),
            op::WHO_AM_I => Request::WhoAmI,
            op::CLOSE_SESSION => Request::CloseSession,
            other => return Err(DecodeError::UnknownOp(other)),
        })
    }

    /// A whole frame: length prefix, header with `xid`, body.
    pub fn to_frame(&self, xid: i32) -> Vec<u8> {
        let mut w = Writer::frame();
        w.record(&RequestHeader { xid, op: self.op() });
        self.encode_body(&mut w);
        w.finish()
    }

    /// A frame's body (after its length prefix): the header and the request.
    ///
    /// # Errors
    /// As [`Request::decode_body`]; a header that does not decode is malformed.
    pub fn from_frame_body(body: &[u8]) -> Decoded<(RequestHeader, Request)> {
        let mut r = Reader::new(body);
        let h: RequestHeader = r.record()?;
        Ok((h, Request::decode_body(h.op, &mut r)?))
    }
}

/// A reply's body, by the op it answers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Response {
    /// No body: an error, or delete, deleteContainer, setWatches, auth, closeSession, checkWatches,
    /// removeWatches, ping.
    Empty,
    /// `create`.
    Create(CreateResponse),
    /// `create2`, `createContainer`, `createTTL`.
    Create2(Create2Response),
    /// `exists`, `setData`, `setACL`, and a `check` outside a multi.
    Stat(StatResponse),
    /// `getData`.
    GetData(GetDataResponse),
    /// `getACL`.
    GetAcl(GetAclResponse),
    /// `getChildren`.
    GetChildren(GetChildrenResponse),
    /// `getChildren2`.
    GetChildren2(GetChildren2Response),
    /// `sync`: the path.
    Sync(PathRequest),
    /// `multi` and `multiRead`.
    Multi(MultiResponse),
    /// `getAllChildrenNumber`.
    GetAllChildrenNumber(GetAllChildrenNumberResponse),
    /// `getEphemerals`.
    GetEphemerals(GetEphemeralsResponse),
    /// `addWatch`: an error code of 0.
    AddWatch(ErrorResponse),
    /// `whoAmI`.
    WhoAmI(WhoAmIResponse),
}

impl Response {
    /// Appends the body.
    pub fn encode(&self, w: &mut Writer) {
        match self {
            Response::Empty => {}
            Response::Create(r) => r.encode(w),
            Response::Create2(r) => r.encode(w),
            Response::Stat(r) => r.encode(w),
            Response::GetData(r) => r.encode(w),
            Response::GetAcl(r) => r.encode(w),
            Response::GetChildren(r) => r.encode(w),
            Response::GetChildren2(r) => r.encode(w),
            Response::Sync(r) => r.encode(w),
            Response::Multi(r) => r.encode(w),
            Response::GetAllChildrenNumber(r) => r.encode(w),
            Response::GetEphemerals(r) => r.encode(w),
            Response::AddWatch(r) => r.encode(w),
            Response::WhoAmI(r) => r.encode(w),
        }
    }

    /// Reads the body of a reply to a request of op `code` whose header's error was `err`.
    /// Errors have no body, except a `multi`'s or `multiRead`'s (their header says 0).
    ///
    /// # Errors
    /// [`DecodeError::Malformed`] for a body that does not decode.
    pub fn decode(code: i32, err: i32, r: &mut Reader<'_>) -> Decoded<Response> {
        if err != 0 || r.remaining() == 0 && code != op::MULTI && code != op::MULTI_READ {
            return Ok(Response::Empty);
        }
        Ok(match code {
            op::CREATE => Response::Create(r.record()?),
            op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL => Response::Create2(r.record()?),
            op::EXISTS | op::SET_DATA | op::SET_ACL | op::CHECK => Response::Stat(r.record()?),
            op::GET_DATA => Response::GetData(r.record()?),
            op::GET_ACL => Response::GetAcl(r.record()?),
            op::GET_CHILDREN => Response::GetChildren(r.record()?),
            op::GET_CHILDREN2 => Response::GetChildren2(r.record()?),
            op::SYNC => Response::Sync(r.record()?),
            op::MULTI | op::MULTI_READ => Response::Multi(r.record()?),
            op::GET_ALL_CHILDREN_NUMBER => Response::GetAllChildrenNumber(r.record()?),
            op::GET_EPHEMERALS => Response::GetEphemerals(r.record()?),
            op::ADD_WATCH => Response::AddWatch(r.record()?),
            op::WHO_AM_I => Response::WhoAmI(r.record()?),
            _ => Response::Empty,
        })
    }

    /// A whole reply frame: length prefix, header, body.
    pub fn to_frame(&self, header: &ReplyHeader) -> Vec<u8> {
        let mut w = Writer::frame();
        w.record(header);
        self.encode(&mut w);
        w.finish()
    }
}

/// A notification frame: header (xid -1, the triggering zxid, err 0) and the event.
pub fn notification_frame(zxid: i64, event: &WatcherEvent) -> Vec<u8> {
    let mut w = Writer::frame();
    w.record(&ReplyHeader {
        xid: crate::xid::NOTIFICATION,
        zxid,
        err: 0,
    })
    .record(event);
    w.finish()
}
