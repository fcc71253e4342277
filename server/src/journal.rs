//! The data directory: an append-only log of what changed the model, replayed at start, so
//! that a server killed with SIGKILL and started again on the same directory keeps every write
//! it acknowledged, and its sessions (as ZooKeeper's transaction log does). Each entry is
//! written to the file (the OS's cache) before the reply that acknowledges it leaves; with
//! `fsync`, also to the disk.
//!
//! An entry is one input to the model, with the time it was given: a handshake, a request
//! other than a read, a connection gone, a session ended, a container sweep, an operator's
//! delete, a restart. The model is deterministic given its inputs and times, so replaying them
//! rebuilds the tree, the zxid and the sessions exactly; each process start is a restart that
//! keeps them, as ZooKeeper restarting from its snapshot and log does.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use zklock_proto::{op, ConnectRequest, Reader, Record, Request, RequestHeader, Writer};

use crate::model::{ConnId, Model, Now};

/// What marks a directory as a zklock-server's own.
const MARKER: &str = "zklock-server.data";
const MARKER_TEXT: &str = "zklock-server data directory, format 1\n";
const LOG: &str = "transactions.log";

const SEEDS: u8 = 1;
const RESTART: u8 = 2;
const CONNECT: u8 = 3;
const REQUEST: u8 = 4;
const DISCONNECT: u8 = 5;
const CLOSE_SESSION: u8 = 6;
const SWEEP: u8 = 7;
const DELETE: u8 = 8;
const UNDECODABLE: u8 = 9;

/// The open log.
pub(crate) struct Journal {
    file: BufWriter<File>,
    fsync: bool,
    path: PathBuf,
}

/// Whether a request changes nothing the log must keep (the reads, pings and watch requests:
/// what they change lives with the connection, which a restart ends anyway).
pub(crate) fn is_read(opc: i32) -> bool {
    matches!(
        opc,
        op::EXISTS
            | op::GET_DATA
            | op::GET_ACL
            | op::GET_CHILDREN
            | op::GET_CHILDREN2
            | op::SYNC
            | op::PING
            | op::CHECK_WATCHES
            | op::REMOVE_WATCHES
            | op::MULTI_READ
            | op::GET_EPHEMERALS
            | op::GET_ALL_CHILDREN_NUMBER
            | op::WHO_AM_I
            | op::SET_WATCHES
            | op::SET_WATCHES2
            | op::ADD_WATCH
    )
}

fn now_bytes(w: &mut Writer, now: Now) {
    w.long(now.mono_ms as i64).long(now.wall_ms);
}

fn read_now(r: &mut Reader<'_>) -> Option<Now> {
    Some(Now {
        mono_ms: r.long().ok()? as u64,
        wall_ms: r.long().ok()?,
    })
}

impl Journal {
    /// Opens `dir` (made if missing; refused if it has files and no marker), replays its log
    /// into `model` (what a killed server wrote last, if cut short, is dropped: it was never
    /// acknowledged), and records this start.
    pub(crate) fn open(
        dir: &Path,
        fsync: bool,
        model: &mut Model,
        now: Now,
    ) -> io::Result<Journal> {
        fs::create_dir_all(dir)?;
        let marker = dir.join(MARKER);
        if !marker.exists() {
            if fs::read_dir(dir)?.next().is_some() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{} is not a zklock-server data directory (no {MARKER} in it, and it is not empty)",
                        dir.display()
                    ),
                ));
            }
            fs::write(&marker, MARKER_TEXT)?;
        }
        let path = dir.join(LOG);
        let mut file = OpenOptions::new()
            .read(true)
            .create(true)
            .append(true)
            .open(&path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let (kept, entries) = replay(model, &bytes);
        if kept < bytes.len() {
            log::warn!(
                "{}: {} bytes of an entry cut short dropped",
                path.display(),
                bytes.len() - kept
            );
            file.set_len(kept as u64)?;
        }
        file.seek(SeekFrom::End(0))?;
        log::info!(
            "{}: {entries} entries replayed, zxid 0x{:x}, {} sessions",
            path.display(),
            model.last_zxid(),
            model.session_ids().len()
        );
        let mut j = Journal {
            file: BufWriter::new(file),
            fsync,
            path,
        };
        if entries == 0 {
            let (next_session, secret) = model.seeds();
            let mut w = Writer::new();
            w.long(next_session).long(secret as i64);
            j.append(SEEDS, &w.into_inner());
        }
        model.restart(true, now);
        j.restart(true, now);
        Ok(j)
    }

    fn append(&mut self, kind: u8, payload: &[u8]) {
        let len = (payload.len() + 1) as u32;
        let done = self
            .file
            .write_all(&len.to_be_bytes())
            .and_then(|()| self.file.write_all(&[kind]))
            .and_then(|()| self.file.write_all(payload))
            .and_then(|()| self.file.flush())
            .and_then(|()| {
                if self.fsync {
                    self.file.get_ref().sync_data()
                } else {
                    Ok(())
                }
            });
        if let Err(e) = done {
            log::error!("{}: cannot append: {e}", self.path.display());
        }
    }

    pub(crate) fn restart(&mut self, keep: bool, now: Now) {
        let mut w = Writer::new();
        w.boolean(keep);
        now_bytes(&mut w, now);
        self.append(RESTART, &w.into_inner());
    }

    pub(crate) fn connect(&mut self, conn: ConnId, ip: &str, body: &[u8], now: Now) {
        let mut w = Writer::new();
        w.long(conn as i64);
        now_bytes(&mut w, now);
        w.string(ip).buffer(body);
        self.append(CONNECT, &w.into_inner());
    }

    pub(crate) fn request(&mut self, conn: ConnId, body: &[u8], now: Now) {
        let mut w = Writer::new();
        w.long(conn as i64);
        now_bytes(&mut w, now);
        w.buffer(body);
        self.append(REQUEST, &w.into_inner());
    }

    pub(crate) fn disconnect(&mut self, conn: ConnId) {
        let mut w = Writer::new();
        w.long(conn as i64);
        self.append(DISCONNECT, &w.into_inner());
    }

    pub(crate) fn close_session(&mut self, id: i64, now: Now) {
        let mut w = Writer::new();
        w.long(id);
        now_bytes(&mut w, now);
        self.append(CLOSE_SESSION, &w.into_inner());
    }

    pub(crate) fn sweep(&mut self, now: Now) {
        let mut w = Writer::new();
        now_bytes(&mut w, now);
        self.append(SWEEP, &w.into_inner());
    }

    pub(crate) fn delete(&mut self, path: &str) {
        let mut w = Writer::new();
        w.string(path);
        self.append(DELETE, &w.into_inner());
    }

    pub(crate) fn undecodable(&mut self, conn: ConnId, xid: i32, opc: i32, now: Now) {
        let mut w = Writer::new();
        w.long(conn as i64).int(xid).int(opc);
        now_bytes(&mut w, now);
        self.append(UNDECODABLE, &w.into_inner());
    }
}

/// Replays whole entries; returns how many bytes they took, and how many there were.
fn replay(model: &mut Model, bytes: &[u8]) -> (usize, usize) {
    let mut at = 0;
    let mut entries = 0;
    while bytes.len() - at >= 4 {
        let len =
            u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]) as usize;
        if len == 0 || bytes.len() - at - 4 < len {
            break;
        }
        let entry = &bytes[at + 4..at + 4 + len];
        if apply(model, entry[0], &entry[1..]).is_none() {
            log::warn!(
                "log entry {entries} (kind {}) does not decode: replay ends",
                entry[0]
            );
            break;
        }
        at += 4 + len;
        entries += 1;
    }
    (at, entries)
}

fn apply(model: &mut Model, kind: u8, payload: &[u8]) -> Option<()> {
    let mut r = Reader::new(payload);
    let mut out = Vec::new();
    match kind {
        SEEDS => {
            let next_session = r.long().ok()?;
            let secret = r.long().ok()? as u64;
            model.set_seeds(next_session, secret);
        }
        RESTART => {
            let keep = r.boolean().ok()?;
            let now = read_now(&mut r)?;
            model.restart(keep, now);
        }
        CONNECT => {
            let conn = r.long().ok()? as ConnId;
            let now = read_now(&mut r)?;
            let ip = r.string().ok()?;
            let body = r.buffer().ok()?;
            let req = ConnectRequest::decode(&mut Reader::new(body)).ok()?;
            let _ = model.connect(conn, &ip, &req, now, &mut out);
        }
        REQUEST => {
            let conn = r.long().ok()? as ConnId;
            let now = read_now(&mut r)?;
            let body = r.buffer().ok()?;
            let mut br = Reader::new(body);
            let header = RequestHeader::decode(&mut br).ok()?;
            let request = Request::decode_body(header.op, &mut br).ok()?;
            let _ = model.request(conn, header.xid, request, now, &mut out);
        }
        DISCONNECT => model.disconnect(r.long().ok()? as ConnId),
        CLOSE_SESSION => {
            let id = r.long().ok()?;
            let now = read_now(&mut r)?;
            model.close_session(id, now, &mut out);
        }
        SWEEP => {
            let now = read_now(&mut r)?;
            model.sweep_containers(now, &mut out);
        }
        DELETE => {
            let path = r.string().ok()?;
            let _ = model.operator_delete(&path, &mut out);
        }
        UNDECODABLE => {
            let conn = r.long().ok()? as ConnId;
            let xid = r.int().ok()?;
            let opc = r.int().ok()?;
            let now = read_now(&mut r)?;
            let _ = model.undecodable(conn, xid, opc, now);
        }
        _ => return None,
    }
    Some(())
}
