//! ZooKeeper's client protocol, written once for both sides: the jute encoding
//! ([`Reader`], [`Writer`]), every record of `zookeeper.jute` a client and a server exchange
//! (each with [`Record::encode`] and [`Record::decode`]), whole requests and replies chosen by
//! op code ([`Request`], [`Response`], [`MultiResponse`]), and the protocol's numbers
//! ([`op`], [`xid`], [`code`], [`perms`], [`create_mode`], [`event_type`], [`keeper_state`],
//! [`watcher_type`], [`add_watch_mode`]).
//!
//! Decoding never panics and never trusts a length: a truncated or lying frame is a
//! [`DecodeError`], and a vector's count is checked against the bytes left before anything is
//! reserved. [`split_frame`] cuts frames off a stream and refuses one over a limit (ZooKeeper's
//! `jute.maxbuffer`).
//!
//! ```
//! use zklock_proto::{Reader, Record, Request, PathWatchRequest, split_frame};
//!
//! let frame = Request::GetData(PathWatchRequest { path: "/a".into(), watch: true }).to_frame(7);
//! let (body, used) = split_frame(&frame, 0xfffff).unwrap().unwrap();
//! assert_eq!(used, frame.len());
//! let (header, request) = Request::from_frame_body(body).unwrap();
//! assert_eq!((header.xid, header.op), (7, zklock_proto::op::GET_DATA));
//! assert!(matches!(request, Request::GetData(r) if r.path == "/a" && r.watch));
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod codes;
mod jute;
mod message;
mod records;

pub use codes::{
    add_watch_mode, code, create_mode, event_type, keeper_state, op, perms, watcher_type, xid,
};
pub use jute::{split_frame, DecodeError, Decoded, Reader, Record, Writer};
pub use message::{notification_frame, MultiOp, MultiResponse, OpResult, Request, Response};
pub use records::*;

#[cfg(test)]
mod tests;
