//! The network side: a listener thread, a reader and a writer thread per connection, and a
//! timer thread for session expiry and the container sweep. One lock guards the model and the
//! connections' outboxes, so a write's notifications are queued on every watching connection
//! before the writer's reply, and each connection's frames leave in the order queued.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::{Condvar, Mutex};
use zklock_proto::{
    code, notification_frame, split_frame, ConnectRequest, DecodeError, Reader, Record,
    ReplyHeader, Request, RequestHeader, Writer,
};

use crate::fourlw;
use crate::journal::{self, Journal};
use crate::model::{ConnId, Connected, Model, Now, Out};
use crate::Config;

/// What a connection has to send, and whether to close after it. Its reader thread writes
/// its own replies (no thread handoff on the request path); its writer thread sends what other
/// connections' writes queue on it (notifications) and carries out the close. `writing` keeps
/// the two from writing at once, so frames leave in the order queued.
/// Frames held back by a reply delay ([`Server::set_reply_delay`]) wait in `delayed`, each with
/// the moment it may leave; only the writer thread sends them, in order.
#[derive(Default)]
struct OutState {
    buf: Vec<u8>,
    delayed: VecDeque<(Instant, Vec<u8>)>,
    close: bool,
    writing: bool,
}

/// The faults a test switched on that every connection obeys.
#[derive(Default)]
pub(crate) struct Faults {
    pub(crate) silent: AtomicBool,
    pub(crate) delay_ms: AtomicU64,
    pub(crate) stopping: AtomicBool,
    /// Sessions whose every connection is silent (a client cut off from the server).
    pub(crate) silent_sessions: Mutex<HashSet<i64>>,
}

pub(crate) struct Outbox {
    state: Mutex<OutState>,
    ready: Condvar,
    pub(crate) peer: SocketAddr,
    pub(crate) sent: AtomicU64,
    faults: Arc<Faults>,
    /// The session it carries or asks to resume (0 until known).
    pub(crate) session: AtomicI64,
    /// Closed with a reset: nothing may send a FIN first.
    pub(crate) reset: AtomicBool,
}

/// How long a thread held by a silent connection sleeps between looks at the switch.
const SILENT_POLL: Duration = Duration::from_millis(5);

impl Outbox {
    pub(crate) fn muted(&self) -> bool {
        if self.faults.silent.load(Ordering::SeqCst) {
            return true;
        }
        let session = self.session.load(Ordering::SeqCst);
        session != 0 && self.faults.silent_sessions.lock().contains(&session)
    }

    fn enqueue(&self, s: &mut OutState, frame: &[u8]) {
        let delay = self.faults.delay_ms.load(Ordering::SeqCst);
        // Frames still delayed keep later ones behind them, so the order holds.
        if delay > 0 || !s.delayed.is_empty() {
            let due = Instant::now() + Duration::from_millis(delay);
            s.delayed.push_back((due, frame.to_vec()));
        } else {
            s.buf.extend_from_slice(frame);
        }
        self.sent.fetch_add(1, Ordering::Relaxed);
    }

    /// Queues a frame for the writer thread.
    fn push(&self, frame: &[u8]) {
        let mut s = self.state.lock();
        if !s.close {
            self.enqueue(&mut s, frame);
            self.ready.notify_one();
        }
    }

    /// Queues a frame that the calling thread will [`flush`](Self::flush) itself.
    fn push_own(&self, frame: &[u8]) {
        let mut s = self.state.lock();
        if !s.close {
            self.enqueue(&mut s, frame);
        }
    }

    /// Writes what is queued, unless another thread is writing (it will write it too).
    /// `false` once the socket failed.
    fn flush(&self, stream: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
        loop {
            {
                let mut s = self.state.lock();
                if self.muted() || !s.delayed.is_empty() {
                    // The writer thread sends it when the connection speaks again, or when due.
                    self.ready.notify_one();
                    return true;
                }
                if s.writing || s.buf.is_empty() {
                    return true;
                }
                s.writing = true;
                std::mem::swap(buf, &mut s.buf);
            }
            let ok = stream.write_all(buf).is_ok();
            buf.clear();
            let mut s = self.state.lock();
            s.writing = false;
            if !ok {
                s.close = true;
                s.buf.clear();
                self.ready.notify_one();
                return false;
            }
            // Frames queued while we wrote may be waiting on us: the writer thread skipped them.
            self.ready.notify_one();
        }
    }

    pub(crate) fn close(&self) {
        self.state.lock().close = true;
        self.ready.notify_one();
    }

    fn is_closed(&self) -> bool {
        self.state.lock().close
    }

    /// Holds the calling reader while its connection is silent: what it read waits, unanswered
    /// and without renewing the session, as in a server that stopped running.
    fn wait_voiced(&self) {
        while self.muted()
            && !self.faults.stopping.load(Ordering::SeqCst)
            && !self.reset.load(Ordering::SeqCst)
            && !self.is_closed()
        {
            thread::sleep(SILENT_POLL);
        }
    }
}

/// The model and the live connections, under one lock.
pub(crate) struct Shared {
    pub(crate) model: Model,
    pub(crate) outboxes: HashMap<ConnId, Arc<Outbox>>,
    pub(crate) journal: Option<Journal>,
}

impl Shared {
    /// Writes an input to the journal (if there is a data dir) before the model takes it: on
    /// an error the caller must not apply it, nor acknowledge it.
    pub(crate) fn record(
        &mut self,
        entry: impl FnOnce(&mut Journal, &Model) -> io::Result<()>,
    ) -> io::Result<()> {
        match self.journal.as_mut() {
            Some(j) => entry(j, &self.model),
            None => Ok(()),
        }
    }
}

pub(crate) struct Inner {
    pub(crate) shared: Mutex<Shared>,
    pub(crate) cfg: Config,
    pub(crate) port: u16,
    pub(crate) started: Instant,
    pub(crate) faults: Arc<Faults>,
    pub(crate) timer_wake: Condvar,
    next_conn: AtomicU64,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Every open socket, so that stopping can end a connection blocked in a read (one that
    /// never finished its handshake included).
    pub(crate) sockets: Mutex<HashMap<ConnId, TcpStream>>,
    pub(crate) received: AtomicU64,
    pub(crate) sent: AtomicU64,
}

impl Inner {
    pub(crate) fn now(&self) -> Now {
        Now {
            mono_ms: self.started.elapsed().as_millis() as u64,
            wall_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64),
        }
    }

    /// Carries out the model's effects (under the lock, so their order holds).
    pub(crate) fn apply(&self, shared: &mut Shared, out: Vec<Out>) {
        for o in out {
            match o {
                Out::Notify { conn, zxid, event } => {
                    if let Some(ob) = shared.outboxes.get(&conn) {
                        ob.push(&notification_frame(zxid, &event));
                        self.sent.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Out::Close { conn } => {
                    if let Some(ob) = shared.outboxes.remove(&conn) {
                        ob.close();
                    }
                }
            }
        }
    }
}

/// A running server. It stops when dropped, or with [`Server::stop`].
pub struct Server {
    pub(crate) inner: Arc<Inner>,
    listener: Option<JoinHandle<()>>,
    timer: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("port", &self.inner.port)
            .finish()
    }
}

impl Server {
    /// Binds 127.0.0.1 on `config.port` (0: a free port, chosen by the system at bind time) and
    /// starts serving. Returns once the listener is bound: connections are accepted from then
    /// on.
    ///
    /// # Errors
    /// The bind's error (a port in use: `AddrInUse`), or `InvalidInput` for session timeout
    /// bounds that contradict each other.
    pub fn start(config: Config) -> io::Result<Server> {
        let model_cfg = config.model_config()?;
        let listener = TcpListener::bind(("127.0.0.1", config.port))?;
        let port = listener.local_addr()?.port();
        let started = Instant::now();
        let now = Now {
            mono_ms: 0,
            wall_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64),
        };
        let mut model = Model::new(model_cfg, now);
        let journal = match &config.data_dir {
            Some(dir) => Some(Journal::open(
                dir,
                config.fsync,
                config.snapshot_log_bytes,
                &mut model,
                now,
            )?),
            None => None,
        };
        let inner = Arc::new(Inner {
            shared: Mutex::new(Shared {
                model,
                outboxes: HashMap::new(),
                journal,
            }),
            cfg: config,
            port,
            started,
            faults: Arc::new(Faults::default()),
            timer_wake: Condvar::new(),
            next_conn: AtomicU64::new(1),
            threads: Mutex::new(Vec::new()),
            sockets: Mutex::new(HashMap::new()),
            received: AtomicU64::new(0),
            sent: AtomicU64::new(0),
        });
        let i = inner.clone();
        let listener = thread::Builder::new()
            .name(format!("zk-server-accept-{port}"))
            .spawn(move || accept_loop(&i, listener))?;
        let i = inner.clone();
        let timer = thread::Builder::new()
            .name(format!("zk-server-timer-{port}"))
            .spawn(move || timer_loop(&i))?;
        log::info!("serving ZooKeeper's protocol on 127.0.0.1:{port}");
        Ok(Server {
            inner,
            listener: Some(listener),
            timer: Some(timer),
        })
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.inner.port
    }

    /// `127.0.0.1:PORT`, for a client's connect string.
    pub fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.inner.port)
    }

    /// The ids of the live sessions, in ascending order.
    pub fn sessions(&self) -> Vec<i64> {
        let mut ids = self.inner.shared.lock().model.session_ids();
        ids.sort_unstable();
        ids
    }

    /// Stops serving: the listener closes, every connection is closed, the threads are joined.
    /// Blocks until they are (connection threads end as soon as their sockets are shut).
    pub fn stop(mut self) {
        self.shutdown();
    }

    /// A handle on a running server that owns none of its threads (dropping it stops nothing).
    pub(crate) fn view(inner: Arc<Inner>) -> Server {
        Server {
            inner,
            listener: None,
            timer: None,
        }
    }

    fn shutdown(&mut self) {
        if self.listener.is_none() && self.timer.is_none() {
            // A view, or already stopped.
            return;
        }
        if self.inner.faults.stopping.swap(true, Ordering::SeqCst) {
            return;
        }
        // Wake the blocking accept with a connection of our own.
        let _ = TcpStream::connect_timeout(
            &SocketAddr::from(([127, 0, 0, 1], self.inner.port)),
            Duration::from_secs(1),
        );
        {
            let mut shared = self.inner.shared.lock();
            for (_, ob) in shared.outboxes.drain() {
                ob.close();
            }
            self.inner.timer_wake.notify_all();
        }
        if let Some(h) = self.listener.take() {
            let _ = h.join();
        }
        if let Some(h) = self.timer.take() {
            let _ = h.join();
        }
        for (_, s) in self.inner.sockets.lock().drain() {
            let _ = s.shutdown(Shutdown::Both);
        }
        let threads = std::mem::take(&mut *self.inner.threads.lock());
        for h in threads {
            let _ = h.join();
        }
        if let Some(j) = self.inner.shared.lock().journal.as_mut() {
            // A snapshot being written is finished: the next start need not replay its logs.
            let _ = j.wait_snapshot();
        }
        log::info!("stopped serving on 127.0.0.1:{}", self.inner.port);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn accept_loop(inner: &Arc<Inner>, listener: TcpListener) {
    for stream in listener.incoming() {
        if inner.faults.stopping.load(Ordering::SeqCst) {
            break;
        }
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                log::warn!("accept failed: {e}");
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let conn = inner.next_conn.fetch_add(1, Ordering::Relaxed);
        let i = inner.clone();
        let spawned = thread::Builder::new()
            .name(format!("zk-server-conn-{conn}"))
            .stack_size(256 * 1024)
            .spawn(move || serve_conn(&i, conn, stream));
        match spawned {
            Ok(h) => {
                let mut threads = inner.threads.lock();
                threads.retain(|h| !h.is_finished());
                threads.push(h);
            }
            Err(e) => log::warn!("no thread for a connection: {e}"),
        }
    }
}

fn timer_loop(inner: &Arc<Inner>) {
    let interval = inner
        .cfg
        .container_check_interval
        .max(Duration::from_millis(1));
    let mut next_sweep = inner.started + interval;
    let mut shared = inner.shared.lock();
    while !inner.faults.stopping.load(Ordering::SeqCst) {
        let now = inner.now();
        let mut out = Vec::new();
        let due: Vec<i64> = shared
            .model
            .sessions
            .iter()
            .filter(|(_, s)| s.expires_at <= now.mono_ms)
            .map(|(id, _)| *id)
            .collect();
        // An entry the data dir refused: what it was for waits a tick and is tried again.
        let mut unrecorded = false;
        for id in due {
            if shared.record(|j, m| j.close_session(m, id, now)).is_err() {
                unrecorded = true;
                continue;
            }
            log::info!("session 0x{id:x} expired");
            shared.model.close_session(id, now, &mut out);
        }
        if Instant::now() >= next_sweep {
            if shared.record(|j, m| j.sweep(m, now)).is_ok() {
                shared.model.sweep_containers(now, &mut out);
                next_sweep = Instant::now() + interval;
            } else {
                unrecorded = true;
            }
        }
        inner.apply(&mut shared, out);
        shared.model.compact();
        // At most a tick: sessions created or renewed since do not wake this thread.
        let tick = inner.cfg.tick_time.max(Duration::from_millis(1));
        let until_expiry = match shared.model.next_expiry() {
            Some(_) if unrecorded => tick,
            Some(at) => Duration::from_millis(at.saturating_sub(now.mono_ms)).min(tick),
            None => tick,
        };
        let wake = (Instant::now() + until_expiry).min(next_sweep);
        inner.timer_wake.wait_until(&mut shared, wake);
    }
}

/// Reads one frame: `Ok(None)` at a clean end of stream.
fn read_frame(
    r: &mut impl Read,
    first: Option<[u8; 4]>,
    max: usize,
) -> io::Result<Option<Vec<u8>>> {
    let len = match first {
        Some(b) => b,
        None => {
            let mut b = [0; 4];
            match r.read_exact(&mut b) {
                Ok(()) => b,
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
                Err(e) => return Err(e),
            }
        }
    };
    match split_frame(&len, max) {
        Ok(_) => {}
        Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
    }
    let n = i32::from_be_bytes(len) as usize;
    let mut body = vec![0; n];
    r.read_exact(&mut body)?;
    Ok(Some(body))
}

fn serve_conn(inner: &Arc<Inner>, conn: ConnId, stream: TcpStream) {
    match stream.try_clone() {
        Ok(s) => {
            inner.sockets.lock().insert(conn, s);
        }
        Err(_) => return,
    }
    // A stop that began before the socket was registered would not shut it.
    if inner.faults.stopping.load(Ordering::SeqCst) {
        inner.sockets.lock().remove(&conn);
        return;
    }
    serve(inner, conn, stream);
    inner.sockets.lock().remove(&conn);
}

fn serve(inner: &Arc<Inner>, conn: ConnId, stream: TcpStream) {
    let peer = match stream.peer_addr() {
        Ok(p) => p,
        Err(_) => return,
    };
    let _ = stream.set_nodelay(true);
    let mut reader = match stream.try_clone() {
        Ok(s) => BufReader::with_capacity(16 * 1024, s),
        Err(_) => return,
    };
    let mut first = [0; 4];
    if reader.read_exact(&mut first).is_err() {
        return;
    }
    if &first == crate::faults::ADMIN_WORD {
        let mut line = String::new();
        let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = reader.take(4096).read_line(&mut line);
        log::info!("admin command from {peer}: {}", line.trim());
        let text = crate::faults::admin(inner, line.trim());
        let mut s = stream;
        let _ = s.write_all(text.as_bytes());
        let _ = s.shutdown(Shutdown::Write);
        return;
    }
    if let Some(word) = fourlw::word(&first) {
        let text = fourlw::answer(inner, word);
        let mut s = stream;
        let _ = s.write_all(text.as_bytes());
        let _ = s.shutdown(Shutdown::Write);
        return;
    }
    if inner.faults.stopping.load(Ordering::SeqCst) {
        return;
    }
    let outbox = Arc::new(Outbox {
        state: Mutex::new(OutState::default()),
        ready: Condvar::new(),
        peer,
        sent: AtomicU64::new(0),
        faults: inner.faults.clone(),
        session: AtomicI64::new(0),
        reset: AtomicBool::new(false),
    });
    let writer = {
        let ob = outbox.clone();
        let s = match stream.try_clone() {
            Ok(s) => s,
            Err(_) => return,
        };
        match thread::Builder::new()
            .name(format!("zk-server-write-{conn}"))
            .stack_size(128 * 1024)
            .spawn(move || write_loop(&ob, s))
        {
            Ok(h) => h,
            Err(_) => return,
        }
    };
    if let Err(e) = read_loop(inner, conn, &outbox, &mut reader, first, &peer) {
        log::debug!("connection {conn} from {peer}: {e}");
    }
    {
        let mut shared = inner.shared.lock();
        // Applied even if not recorded: it drops what dies with the connection, which no
        // later entry depends on (a restart drops every connection anyway).
        let _ = shared.record(|j, m| j.disconnect(m, conn));
        shared.model.disconnect(conn);
        shared.outboxes.remove(&conn);
    }
    outbox.close();
    let _ = writer.join();
    if !outbox.reset.load(Ordering::SeqCst) {
        let _ = stream.shutdown(Shutdown::Both);
    }
}

fn read_loop(
    inner: &Arc<Inner>,
    conn: ConnId,
    outbox: &Arc<Outbox>,
    reader: &mut BufReader<TcpStream>,
    first: [u8; 4],
    peer: &SocketAddr,
) -> io::Result<()> {
    let mut wstream = reader.get_ref().try_clone()?;
    let mut wbuf = Vec::new();
    let max = inner.cfg.max_buffer;
    let Some(body) = read_frame(reader, Some(first), max)? else {
        return Ok(());
    };
    let req = ConnectRequest::decode(&mut Reader::new(&body))
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    // A silent session's resumption is read and held like any of its requests.
    outbox.session.store(req.session_id, Ordering::SeqCst);
    outbox.wait_voiced();
    {
        let mut shared = inner.shared.lock();
        if inner.faults.stopping.load(Ordering::SeqCst) {
            return Ok(());
        }
        let mut out = Vec::new();
        let now = inner.now();
        let ip = peer.ip().to_string();
        // Not recorded, not served: the client sees the connection close and tries again.
        shared.record(|j, m| j.connect(m, conn, &ip, &body, now))?;
        match shared.model.connect(conn, &ip, &req, now, &mut out) {
            Connected::Refuse => return Ok(()),
            Connected::Reply { response, valid } => {
                inner.apply(&mut shared, out);
                let mut w = Writer::frame();
                w.record(&response);
                outbox.push(&w.finish());
                if !valid {
                    outbox.close();
                    return Ok(());
                }
                outbox.session.store(response.session_id, Ordering::SeqCst);
                shared.outboxes.insert(conn, outbox.clone());
            }
        }
    }
    let mut out = Vec::new();
    loop {
        let Some(body) = read_frame(reader, None, max)? else {
            return Ok(());
        };
        outbox.wait_voiced();
        inner.received.fetch_add(1, Ordering::Relaxed);
        let mut r = Reader::new(&body);
        let header = RequestHeader::decode(&mut r)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let request = match Request::decode_body(header.op, &mut r) {
            Ok(x) => x,
            // An auth packet that does not decode closes the connection, as in ZooKeeper.
            Err(DecodeError::Malformed(why)) if header.op != zklock_proto::op::AUTH => {
                log::debug!("connection {conn}: op {} does not decode: {why}", header.op);
                let mut shared = inner.shared.lock();
                if !shared.outboxes.contains_key(&conn) {
                    return Ok(());
                }
                let now = inner.now();
                shared.record(|j, m| j.undecodable(m, conn, header.xid, header.op, now))?;
                let reply = shared.model.undecodable(conn, header.xid, header.op, now);
                let mut w = Writer::frame();
                w.record(&ReplyHeader {
                    xid: reply.xid,
                    zxid: reply.zxid,
                    err: reply.err,
                });
                outbox.push(&w.finish());
                continue;
            }
            Err(DecodeError::UnknownOp(op)) => {
                // As ZooKeeper's UnimplementedRequestProcessor: answer, then close.
                log::warn!("connection {conn}: unknown op {op}");
                let xid = Reader::new(&body).int().unwrap_or(0);
                let h = ReplyHeader {
                    xid,
                    zxid: -1,
                    err: code::UNIMPLEMENTED,
                };
                let mut w = Writer::frame();
                w.record(&h);
                outbox.push(&w.finish());
                outbox.close();
                return Ok(());
            }
            Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
        };
        let mut shared = inner.shared.lock();
        if !shared.outboxes.contains_key(&conn) {
            // Closed by the model (session expired or moved) while this request was read.
            return Ok(());
        }
        let RequestHeader { xid, .. } = header;
        let now = inner.now();
        if !journal::is_read(request.op()) {
            // A write the data dir did not take is neither applied nor acknowledged: the
            // connection closes, as it would on a server that failed, and the client learns
            // nothing of it but that the connection was lost.
            shared.record(|j, m| j.request(m, conn, &body, now))?;
        }
        let reply = shared.model.request(conn, xid, request, now, &mut out);
        inner.apply(&mut shared, std::mem::take(&mut out));
        let mut w = Writer::frame();
        w.record(&ReplyHeader {
            xid: reply.xid,
            zxid: reply.zxid,
            err: reply.err,
        });
        reply.body.encode(&mut w);
        inner.sent.fetch_add(1, Ordering::Relaxed);
        if reply.close {
            outbox.push(&w.finish());
            shared.outboxes.remove(&conn);
            outbox.close();
            return Ok(());
        }
        outbox.push_own(&w.finish());
        drop(shared);
        // A whole request already read is answered first, so pipelined replies leave
        // together; anything less could wait on a client that waits on us.
        let whole_frame_read = matches!(split_frame(reader.buffer(), max), Ok(Some(_)));
        if !whole_frame_read && !outbox.flush(&mut wstream, &mut wbuf) {
            return Ok(());
        }
    }
}

fn write_loop(outbox: &Outbox, mut stream: TcpStream) {
    let mut buf = Vec::new();
    loop {
        let close = {
            let mut s = outbox.state.lock();
            loop {
                if outbox.faults.stopping.load(Ordering::SeqCst)
                    || outbox.reset.load(Ordering::SeqCst)
                {
                    s.buf.clear();
                    s.delayed.clear();
                    s.close = true;
                    break;
                }
                if s.writing || outbox.muted() {
                    // A silent connection sends nothing, not even its close, until it speaks.
                    outbox.ready.wait_for(&mut s, SILENT_POLL);
                    continue;
                }
                let now = Instant::now();
                while s.delayed.front().is_some_and(|(due, _)| *due <= now) {
                    if let Some((_, frame)) = s.delayed.pop_front() {
                        s.buf.extend_from_slice(&frame);
                    }
                }
                if !s.buf.is_empty() || (s.close && s.delayed.is_empty()) {
                    break;
                }
                match s.delayed.front() {
                    Some((due, _)) => {
                        let due = *due;
                        outbox.ready.wait_until(&mut s, due);
                    }
                    None => outbox.ready.wait(&mut s),
                }
            }
            s.writing = true;
            std::mem::swap(&mut buf, &mut s.buf);
            s.close && s.delayed.is_empty()
        };
        let ok = buf.is_empty() || stream.write_all(&buf).is_ok();
        buf.clear();
        outbox.state.lock().writing = false;
        // A reply delayed behind this one may be due now: look again at once.
        outbox.ready.notify_one();
        if !ok || close {
            break;
        }
    }
    if !outbox.reset.load(Ordering::SeqCst) {
        let _ = stream.shutdown(Shutdown::Both);
    }
}
