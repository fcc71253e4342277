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
//! Logs and snapshots have generations. The snapshot of generation `g` is the model as it was
//! when the log of generation `g` was started, so the state is always *the newest complete
//! snapshot, then every log of its generation or later, in order*; a start reads exactly that
//! and removes the logs older than the snapshot and any temporary.
//!
//! Once the log passes a size (the larger of the configured one and the last snapshot's), the
//! snapshot is taken in two halves, so that a large tree does not stall every request:
//! - under the server's lock (the caller's), only what must be: the model is encoded into a
//!   buffer (copying the model instead costs as much: a few allocations a node), and the next
//!   generation's log is created (with `fsync`, the directory synced) and takes every later
//!   entry;
//! - on a thread of its own, the buffer is checksummed and written to a temporary file (synced
//!   with `fsync`), renamed over the last snapshot (the switch), the directory synced, and only
//!   then are the older logs removed.
//!
//! The new log starts at the snapshot's cut, rather than the old one going on until the
//! snapshot is durable, so that the cut is a file's start: no offset to record, and a start
//! needs no other rule than the one above.
//!
//! A kill before the switch leaves the previous snapshot and both logs, which a start replays
//! one after the other; a kill after it leaves the new snapshot, whose generation's log is the
//! new one; the old log, if still there, is removed. One snapshot is written at a time; one
//! that failed leaves its logs in place, and the next one (a generation later) replaces them
//! all. A restart that could not be logged writes its snapshot before it returns, since the
//! logs alone would not rebuild it.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::thread::{self, JoinHandle};

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

/// The generation of a log, from its file's name.
fn log_generation(name: &str) -> Option<u64> {
    if name == log_name(0) {
        return Some(0);
    }
    name.strip_prefix("transactions.")?
        .strip_suffix(".log")?
        .parse()
        .ok()
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
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
    /// The generation of the open log (0: the first, before any snapshot).
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
    /// The snapshot being written off the lock, if one is.
    writing: Option<JoinHandle<io::Result<u64>>>,
    /// The size of the last snapshot written (the log may grow as much before the next).
    snapshot_len: u64,
    /// Tests: snapshots kept here, unwritten, as a kill before their thread ran leaves them.
    #[cfg(test)]
    held: Option<Vec<SnapshotJob>>,
}

/// A snapshot encoded under the lock (copying the model would cost as much), to be
/// checksummed and written to its file off it.
struct SnapshotJob {
    dir: PathBuf,
    fsync: bool,
    generation: u64,
    payload: Vec<u8>,
}

impl SnapshotJob {
    /// The snapshot file's header: magic, generation, the payload's length and checksum.
    fn header(&self) -> Vec<u8> {
        let mut header = Vec::with_capacity(SNAPSHOT_MAGIC.len() + 24);
        header.extend_from_slice(SNAPSHOT_MAGIC);
        header.extend_from_slice(&self.generation.to_be_bytes());
        header.extend_from_slice(&(self.payload.len() as u64).to_be_bytes());
        header.extend_from_slice(&checksum(&self.payload).to_be_bytes());
        header
    }

    /// The snapshot file's bytes.
    #[cfg(test)]
    fn bytes(&self) -> Vec<u8> {
        [self.header(), self.payload.clone()].concat()
    }

    /// Writes the temporary file and renames it over the last snapshot: from there a start
    /// reads this snapshot and the logs of its generation on. Returns the file's size.
    fn install(&self) -> io::Result<u64> {
        let header = self.header();
        let tmp = self.dir.join(SNAPSHOT_TMP);
        {
            let mut f = File::create(&tmp)?;
            f.write_all(&header)?;
            f.write_all(&self.payload)?;
            if self.fsync {
                f.sync_all()?;
            }
        }
        fs::rename(&tmp, self.dir.join(SNAPSHOT))?;
        if self.fsync {
            sync_dir(&self.dir)?;
        }
        Ok((header.len() + self.payload.len()) as u64)
    }

    /// Removes the logs the snapshot made useless (only once it is in place: until then a
    /// start needs them).
    fn remove_older_logs(&self) {
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if log_generation(&name.to_string_lossy()).is_some_and(|g| g < self.generation) {
                if let Err(e) = fs::remove_file(entry.path()) {
                    log::warn!("{}: cannot remove: {e}", entry.path().display());
                }
            }
        }
    }

    /// Returns the snapshot file's size.
    fn run(self) -> io::Result<u64> {
        let started = std::time::Instant::now();
        let size = match self.install() {
            Ok(size) => size,
            Err(e) => {
                log::error!(
                    "{}: cannot write the snapshot of generation {}: {e}",
                    self.dir.display(),
                    self.generation
                );
                return Err(e);
            }
        };
        self.remove_older_logs();
        log::info!(
            "{}: snapshot generation {} written ({size} bytes, {} ms)",
            self.dir.display(),
            self.generation,
            started.elapsed().as_millis()
        );
        Ok(size)
    }
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
        // Older logs a kill left beside the snapshot that replaced them, a temporary.
        let mut logs = Vec::new();
        for entry in fs::read_dir(dir)? {
            let name = entry?.file_name();
            let name = name.to_string_lossy();
            match log_generation(&name) {
                Some(g) if g >= generation => logs.push(g),
                Some(_) => fs::remove_file(dir.join(&*name))?,
                None if name == SNAPSHOT_TMP => fs::remove_file(dir.join(&*name))?,
                None => {}
            }
        }
        logs.sort_unstable();
        let current = logs.last().copied().unwrap_or(generation);
        // The snapshot's generation's log, then those a kill before the next snapshot's switch
        // left after it.
        let mut entries = 0;
        for &g in &logs {
            let path = dir.join(log_name(g));
            let mut f = OpenOptions::new().read(true).write(true).open(&path)?;
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes)?;
            let (kept, n) = replay(model, &bytes);
            if kept < bytes.len() {
                log::warn!(
                    "{}: {} bytes of an entry cut short dropped",
                    path.display(),
                    bytes.len() - kept
                );
                f.set_len(kept as u64)?;
            }
            entries += n;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(log_name(current)))?;
        let len = file.metadata()?.len();
        log::info!(
            "{}: snapshot generation {generation}, logs {logs:?}, {entries} entries replayed, zxid 0x{:x}, {} sessions",
            dir.display(),
            model.last_zxid(),
            model.session_ids().len()
        );
        let mut j = Journal {
            dir: dir.to_owned(),
            file,
            fsync,
            generation: current,
            len,
            torn: false,
            snapshot_bytes,
            compact_at: snapshot_bytes.max(snapshot_len),
            scratch: Vec::new(),
            writing: None,
            snapshot_len,
            #[cfg(test)]
            held: None,
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
        if self.writing.as_ref().is_some_and(JoinHandle::is_finished) {
            // Its error, if any, is logged by its thread; the next snapshot replaces it.
            let _ = self.wait_snapshot();
        }
        if self.len >= self.compact_at && self.writing.is_none() {
            match self.start_snapshot(model) {
                Ok(job) => self.write_off_lock(job),
                Err(e) => {
                    log::error!("{}: cannot start a snapshot: {e}", self.dir.display());
                    // Again once the log has grown as much more.
                    self.compact_at = self.len + self.snapshot_bytes;
                }
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

    /// Writes `model` as the next generation's snapshot and starts that generation's log,
    /// before it returns (for a restart that could not be logged: until its snapshot is in
    /// place, a start would not rebuild it).
    pub(crate) fn snapshot_now(&mut self, model: &Model) -> io::Result<()> {
        let _ = self.wait_snapshot();
        let size = self.start_snapshot(model)?.run()?;
        self.written(size);
        Ok(())
    }

    /// A snapshot of `size` bytes is in place.
    fn written(&mut self, size: u64) {
        self.snapshot_len = size;
        self.compact_at = self.snapshot_bytes.max(size);
    }

    /// The half of a snapshot done under the lock: `model` encoded, and the next generation's
    /// log started, which takes every later entry (see the module docs).
    fn start_snapshot(&mut self, model: &Model) -> io::Result<SnapshotJob> {
        let next = self.generation + 1;
        let payload = model.snapshot();
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join(log_name(next)))?;
        // Left by a snapshot that failed before, or a kill: this generation starts empty.
        log.set_len(0)?;
        if self.fsync {
            // The entries acknowledged in it must not be lost with its name.
            log.sync_all()?;
            sync_dir(&self.dir)?;
        }
        log::info!(
            "{}: snapshot generation {next} taken after {} bytes of log",
            self.dir.display(),
            self.len
        );
        self.file = log;
        self.generation = next;
        self.len = 0;
        self.torn = false;
        self.compact_at = self.snapshot_bytes.max(self.snapshot_len);
        Ok(SnapshotJob {
            dir: self.dir.clone(),
            fsync: self.fsync,
            generation: next,
            payload,
        })
    }

    /// The other half, on a thread of its own (in the caller's, if none can be started).
    fn write_off_lock(&mut self, job: SnapshotJob) {
        #[cfg(test)]
        if let Some(held) = self.held.as_mut() {
            held.push(job);
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        match thread::Builder::new()
            .name("zk-server-snapshot".to_owned())
            .spawn(move || rx.recv().map_or(Ok(0), SnapshotJob::run))
        {
            Ok(h) => {
                let _ = tx.send(job);
                self.writing = Some(h);
            }
            Err(e) => {
                log::warn!("no thread for the snapshot ({e}): written now");
                if let Ok(size) = job.run() {
                    self.written(size);
                }
            }
        }
    }

    /// Waits for the snapshot being written, if one is; its outcome.
    pub(crate) fn wait_snapshot(&mut self) -> io::Result<()> {
        match self.writing.take().map(JoinHandle::join) {
            None => Ok(()),
            Some(Ok(done)) => done.map(|size| self.written(size)),
            Some(Err(_)) => Err(io::Error::other("the snapshot's thread panicked")),
        }
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

impl Drop for Journal {
    fn drop(&mut self) {
        let _ = self.wait_snapshot();
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
mod tests;
