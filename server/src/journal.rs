//! The data directory: a snapshot of the model and an append-only log of what changed it
//! since, replayed at start, so that a server killed with SIGKILL and started again on the same
//! directory keeps every write it acknowledged, and its sessions (as ZooKeeper's snapshot and
//! transaction log do). Each entry is written to the file (the OS's cache) before the model
//! takes it, so before the reply that acknowledges it; with `fsync`, also to the disk. An entry
//! that cannot be written is not applied: the caller refuses what it was for.
//!
//! An entry is one input to the model, with the time it was given: a handshake, a request
//! other than a read, a connection gone, a session ended, a container sweep, an operator's
//! delete, a restart. The model is deterministic given its inputs and times, so replaying them
//! on the snapshot rebuilds the tree, the zxid and the sessions exactly; each process start is
//! a restart that keeps them, as ZooKeeper restarting from its snapshot and log does.
//!
//! Once the log passes a size (the larger of the configured one and the last snapshot's), the
//! model is written as a snapshot of the next generation (a temporary file, synced with
//! `fsync`, renamed over the last) and a new, empty log of that generation is started; the old
//! log is removed. A start reads the snapshot, then only its generation's log, so a kill at any
//! step of this leaves a snapshot and a log that agree.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use zklock_proto::{op, ConnectRequest, Reader, Record, Request, RequestHeader, Writer};

use crate::model::{ConnId, Model, Now};

/// What marks a directory as a zklock-server's own.
const MARKER: &str = "zklock-server.data";
const MARKER_TEXT: &str = "zklock-server data directory, format 1\n";
const SNAPSHOT: &str = "snapshot";
const SNAPSHOT_TMP: &str = "snapshot.tmp";
/// A snapshot file starts with this, then its generation, its payload's length and checksum.
const SNAPSHOT_MAGIC: &[u8; 16] = b"zklock-snapshot1";

const SEEDS: u8 = 1;
const RESTART: u8 = 2;
const CONNECT: u8 = 3;
const REQUEST: u8 = 4;
const DISCONNECT: u8 = 5;
const CLOSE_SESSION: u8 = 6;
const SWEEP: u8 = 7;
const DELETE: u8 = 8;
const UNDECODABLE: u8 = 9;

/// The log of generation `g` (the first, before any snapshot, has no number).
fn log_name(g: u64) -> String {
    if g == 0 {
        "transactions.log".to_owned()
    } else {
        format!("transactions.{g}.log")
    }
}

fn is_log_name(name: &str) -> bool {
    name.starts_with("transactions.") && name.ends_with(".log")
}

/// FNV-1a: enough to tell a damaged snapshot from a whole one.
fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn damaged(path: &Path, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{} is damaged: {why}", path.display()),
    )
}

/// A snapshot file's generation and payload.
fn read_snapshot(path: &Path, bytes: &[u8]) -> io::Result<(u64, Vec<u8>)> {
    let header = SNAPSHOT_MAGIC.len() + 24;
    if bytes.len() < header || &bytes[..SNAPSHOT_MAGIC.len()] != SNAPSHOT_MAGIC {
        return Err(damaged(path, "not a snapshot of this format"));
    }
    let word = |i: usize| {
        let at = SNAPSHOT_MAGIC.len() + 8 * i;
        let mut b = [0; 8];
        b.copy_from_slice(&bytes[at..at + 8]);
        u64::from_be_bytes(b)
    };
    let (generation, len, sum) = (word(0), word(1), word(2));
    let payload = &bytes[header..];
    if payload.len() as u64 != len || checksum(payload) != sum {
        return Err(damaged(path, "its length or checksum does not match"));
    }
    Ok((generation, payload.to_vec()))
}

/// The open log.
pub(crate) struct Journal {
    dir: PathBuf,
    file: File,
    fsync: bool,
    /// The generation of the snapshot the log follows (0: none yet).
    generation: u64,
    /// Bytes of whole entries in the log.
    len: u64,
    /// An append failed and may have left part of an entry after `len`.
    torn: bool,
    /// The configured log size that calls for a snapshot.
    snapshot_bytes: u64,
    /// The log size at which the next snapshot is written.
    compact_at: u64,
    scratch: Vec<u8>,
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
    /// Opens `dir` (made if missing; refused if it has files and no marker), loads its
    /// snapshot and replays its log into `model` (what a killed server wrote last, if cut
    /// short, is dropped: it was never acknowledged), and records this start. A snapshot is
    /// written once the log passes `snapshot_bytes` (or the last snapshot's size, if larger).
    pub(crate) fn open(
        dir: &Path,
        fsync: bool,
        snapshot_bytes: u64,
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
        let snapshot = dir.join(SNAPSHOT);
        let (generation, snapshot_len) = match fs::read(&snapshot) {
            Ok(bytes) => {
                let (generation, payload) = read_snapshot(&snapshot, &bytes)?;
                model
                    .load_snapshot(&payload)
                    .map_err(|e| damaged(&snapshot, &e.to_string()))?;
                (generation, bytes.len() as u64)
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => (0, 0),
            Err(e) => return Err(e),
        };
        // Left by a kill in the middle of a snapshot: another generation's log, a temporary.
        for entry in fs::read_dir(dir)? {
            let name = entry?.file_name();
            let name = name.to_string_lossy();
            if (is_log_name(&name) && name != log_name(generation)) || name == SNAPSHOT_TMP {
                fs::remove_file(dir.join(&*name))?;
            }
        }
        let path = dir.join(log_name(generation));
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
        log::info!(
            "{}: snapshot generation {generation}, {entries} entries replayed, zxid 0x{:x}, {} sessions",
            dir.display(),
            model.last_zxid(),
            model.session_ids().len()
        );
        let mut j = Journal {
            dir: dir.to_owned(),
            file,
            fsync,
            generation,
            len: kept as u64,
            torn: false,
            snapshot_bytes,
            compact_at: snapshot_bytes.max(snapshot_len),
            scratch: Vec::new(),
        };
        if generation == 0 && entries == 0 {
            let (next_session, secret) = model.seeds();
            let mut w = Writer::new();
            w.long(next_session).long(secret as i64);
            j.append(model, SEEDS, &w.into_inner())?;
        }
        j.restart(model, true, now)?;
        model.restart(true, now);
        Ok(j)
    }

    /// Writes one entry, after a snapshot of `model` if the log is due for one. On an error
    /// nothing of the entry stays in the log.
    fn append(&mut self, model: &Model, kind: u8, payload: &[u8]) -> io::Result<()> {
        if self.torn {
            // A later entry after a torn one would be lost to the replay: cut it off first.
            self.file.set_len(self.len)?;
            self.torn = false;
        }
        if self.len >= self.compact_at {
            if let Err(e) = self.snapshot_now(model) {
                log::error!("{}: cannot write a snapshot: {e}", self.dir.display());
                // Again once the log has grown as much more.
                self.compact_at = self.len + self.snapshot_bytes;
            }
        }
        self.scratch.clear();
        self.scratch
            .extend_from_slice(&((payload.len() + 1) as u32).to_be_bytes());
        self.scratch.push(kind);
        self.scratch.extend_from_slice(payload);
        let done = self.file.write_all(&self.scratch).and_then(|()| {
            if self.fsync {
                self.file.sync_data()
            } else {
                Ok(())
            }
        });
        match done {
            Ok(()) => {
                self.len += self.scratch.len() as u64;
                Ok(())
            }
            Err(e) => {
                log::error!(
                    "{}: cannot append: {e}",
                    self.dir.join(log_name(self.generation)).display()
                );
                self.torn = self.file.set_len(self.len).is_err();
                Err(e)
            }
        }
    }

    /// Writes `model` as the next generation's snapshot and starts that generation's log
    /// (done whenever the log is due for it, and by a restart that could not be logged).
    pub(crate) fn snapshot_now(&mut self, model: &Model) -> io::Result<()> {
        let next = self.generation + 1;
        let payload = model.snapshot();
        let mut bytes = Vec::with_capacity(SNAPSHOT_MAGIC.len() + 24 + payload.len());
        bytes.extend_from_slice(SNAPSHOT_MAGIC);
        bytes.extend_from_slice(&next.to_be_bytes());
        bytes.extend_from_slice(&(payload.len() as u64).to_be_bytes());
        bytes.extend_from_slice(&checksum(&payload).to_be_bytes());
        bytes.extend_from_slice(&payload);
        let log_path = self.dir.join(log_name(next));
        let log = OpenOptions::new()
            .read(true)
            .create(true)
            .append(true)
            .open(&log_path)?;
        log.set_len(0)?;
        let tmp = self.dir.join(SNAPSHOT_TMP);
        {
            let mut f = File::create(&tmp)?;
            f.write_all(&bytes)?;
            if self.fsync {
                f.sync_all()?;
                log.sync_all()?;
            }
        }
        // The switch: from here a start reads this snapshot and the new log.
        fs::rename(&tmp, self.dir.join(SNAPSHOT))?;
        if self.fsync {
            File::open(&self.dir)?.sync_all()?;
        }
        let old = self.dir.join(log_name(self.generation));
        log::info!(
            "{}: snapshot generation {next} written ({} bytes) after {} bytes of log",
            self.dir.display(),
            bytes.len(),
            self.len
        );
        self.file = log;
        self.generation = next;
        self.len = 0;
        self.torn = false;
        self.compact_at = self.snapshot_bytes.max(bytes.len() as u64);
        if let Err(e) = fs::remove_file(&old) {
            log::warn!("{}: cannot remove: {e}", old.display());
        }
        Ok(())
    }

    pub(crate) fn restart(&mut self, model: &Model, keep: bool, now: Now) -> io::Result<()> {
        let mut w = Writer::new();
        w.boolean(keep);
        now_bytes(&mut w, now);
        self.append(model, RESTART, &w.into_inner())
    }

    pub(crate) fn connect(
        &mut self,
        model: &Model,
        conn: ConnId,
        ip: &str,
        body: &[u8],
        now: Now,
    ) -> io::Result<()> {
        let mut w = Writer::new();
        w.long(conn as i64);
        now_bytes(&mut w, now);
        w.string(ip).buffer(body);
        self.append(model, CONNECT, &w.into_inner())
    }

    pub(crate) fn request(
        &mut self,
        model: &Model,
        conn: ConnId,
        body: &[u8],
        now: Now,
    ) -> io::Result<()> {
        let mut w = Writer::new();
        w.long(conn as i64);
        now_bytes(&mut w, now);
        w.buffer(body);
        self.append(model, REQUEST, &w.into_inner())
    }

    pub(crate) fn disconnect(&mut self, model: &Model, conn: ConnId) -> io::Result<()> {
        let mut w = Writer::new();
        w.long(conn as i64);
        self.append(model, DISCONNECT, &w.into_inner())
    }

    pub(crate) fn close_session(&mut self, model: &Model, id: i64, now: Now) -> io::Result<()> {
        let mut w = Writer::new();
        w.long(id);
        now_bytes(&mut w, now);
        self.append(model, CLOSE_SESSION, &w.into_inner())
    }

    pub(crate) fn sweep(&mut self, model: &Model, now: Now) -> io::Result<()> {
        let mut w = Writer::new();
        now_bytes(&mut w, now);
        self.append(model, SWEEP, &w.into_inner())
    }

    pub(crate) fn delete(&mut self, model: &Model, path: &str) -> io::Result<()> {
        let mut w = Writer::new();
        w.string(path);
        self.append(model, DELETE, &w.into_inner())
    }

    pub(crate) fn undecodable(
        &mut self,
        model: &Model,
        conn: ConnId,
        xid: i32,
        opc: i32,
        now: Now,
    ) -> io::Result<()> {
        let mut w = Writer::new();
        w.long(conn as i64).int(xid).int(opc);
        now_bytes(&mut w, now);
        self.append(model, UNDECODABLE, &w.into_inner())
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

#[cfg(test)]
mod tests {
    use zklock_proto::{CreateRequest, Request};

    use super::*;
    use crate::model::ModelConfig;

    fn model() -> Model {
        let cfg = ModelConfig {
            tick_ms: 100,
            min_session_timeout_ms: 200,
            max_session_timeout_ms: 2000,
            extended_types: false,
            super_digest: None,
            container_max_never_used_ms: 0,
        };
        Model::new(cfg, NOW)
    }

    const NOW: Now = Now {
        mono_ms: 0,
        wall_ms: 1_000,
    };

    #[test]
    fn a_start_reads_the_last_snapshot_and_its_log_whatever_a_kill_left_beside_them() {
        let dir = std::env::temp_dir().join(format!("zklock-journal-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let mut m = model();
        let mut j = Journal::open(&dir, false, 1024, &mut m, NOW).unwrap();
        let hello = crate::model::test_hello(1000);
        let mut w = Writer::new();
        w.record(&hello);
        let body = w.into_inner();
        j.connect(&m, 1, "127.0.0.1", &body, NOW).unwrap();
        let _ = m.connect(1, "127.0.0.1", &hello, NOW, &mut Vec::new());
        for i in 0..60 {
            let req = Request::Create(CreateRequest {
                path: format!("/n{i}"),
                data: vec![b'x'; 40],
                acl: zklock_proto::Acl::open(),
                flags: 0,
            });
            let body = req.to_frame(i);
            j.request(&m, 1, &body[4..], NOW).unwrap();
            assert_eq!(m.request(1, i, req, NOW, &mut Vec::new()).err, 0);
        }
        let generation = j.generation;
        assert!(generation >= 2, "snapshots taken: generation {generation}");
        drop(j);
        // What a kill in the middle of the next snapshot leaves.
        fs::write(dir.join(log_name(generation + 1)), b"junk").unwrap();
        fs::write(dir.join(SNAPSHOT_TMP), b"junk").unwrap();

        let mut back = model();
        drop(Journal::open(&dir, false, 1024, &mut back, NOW).unwrap());
        m.restart(true, NOW);
        assert_eq!(back.snapshot(), m.snapshot(), "the same state");
        // The leftovers removed: a snapshot, one log (this start's restart entry may have
        // been the one to pass the size, and started the next generation), the marker.
        let mut names: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names.len(), 3, "{names:?}");
        assert_eq!((names[0].as_str(), names[2].as_str()), (SNAPSHOT, MARKER));
        assert!(is_log_name(&names[1]), "{names:?}");
        let log = fs::read(dir.join(&names[1])).unwrap();
        assert!(!log.starts_with(b"junk"), "the kill's log is not read");

        // A damaged snapshot is an error, not an empty server.
        let mut bytes = fs::read(dir.join(SNAPSHOT)).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        fs::write(dir.join(SNAPSHOT), bytes).unwrap();
        let e = Journal::open(&dir, false, 1024, &mut model(), NOW)
            .err()
            .expect("refused");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
        let _ = fs::remove_dir_all(&dir);
    }
}
