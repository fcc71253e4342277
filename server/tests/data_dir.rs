//! The binary with `--data-dir`: killed with SIGKILL and started again on the same directory,
//! it keeps every write it acknowledged and its sessions, across the snapshots that keep its
//! directory small; a write its directory cannot take is not acknowledged, nor kept; it
//! refuses a directory that is not its own and a port in use with a clear error; SIGTERM
//! stops it cleanly.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use zklock_proto::*;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("zklock-server-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn spawn(port: u16, dir: &Path) -> Child {
    spawn_with(port, dir, &[], None)
}

/// The binary with `extra` arguments; with `max_file_blocks`, under a limit on the size of
/// the files it writes (512-byte blocks, `ulimit -f`), past which a write fails with EFBIG
/// (SIGXFSZ ignored), as on a full disk.
fn spawn_with(port: u16, dir: &Path, extra: &[&str], max_file_blocks: Option<u32>) -> Child {
    let bin = env!("CARGO_BIN_EXE_zklock-server");
    let mut cmd = match max_file_blocks {
        Some(blocks) => {
            let mut c = Command::new("sh");
            c.arg("-c")
                .arg(format!(
                    "trap '' XFSZ; ulimit -f {blocks}; exec \"$0\" \"$@\""
                ))
                .arg(bin);
            c
        }
        None => Command::new(bin),
    };
    cmd.args(["--port", &port.to_string(), "--data-dir"])
        .arg(dir)
        .args(extra)
        .env("ZKLOCK_SERVER_LOG", "warn")
        .stdout(Stdio::null())
        // Read only by the tests of its start's errors: a server that logs error after error
        // must not block on a full pipe.
        .stderr(if max_file_blocks.is_some() {
            Stdio::null()
        } else {
            Stdio::piped()
        })
        .spawn()
        .unwrap()
}

/// A four-letter word's answer.
fn four_letters(port: u16, word: &str) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(word.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// The value of `srvr`'s line `name: value`.
fn srvr_field(port: u16, name: &str) -> String {
    let text = four_letters(port, "srvr");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .unwrap_or_else(|| panic!("no {name} in {text}"))
        .to_owned()
}

/// The bytes of the files in `dir`.
fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

/// A server process killed when the test ends, failed or not.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A raw session: connect (or resume), then requests one at a time.
struct Raw {
    s: TcpStream,
    xid: i32,
    session: i64,
    passwd: Vec<u8>,
    timeout: i32,
}

fn read_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0; 4];
    s.read_exact(&mut len).ok()?;
    let mut body = vec![0; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).ok()?;
    Some(body)
}

impl Raw {
    /// Connects to `port` once the server listens (up to 10 s), resuming `session` if not 0.
    fn connect(port: u16, session: i64, passwd: Vec<u8>, last_zxid: i64) -> Raw {
        let until = Instant::now() + Duration::from_secs(10);
        let mut s = loop {
            match TcpStream::connect(("127.0.0.1", port)) {
                Ok(s) => break s,
                Err(e) if Instant::now() < until => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => panic!("the server never listened on {port}: {e}"),
            }
        };
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut w = Writer::frame();
        w.record(&ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: last_zxid,
            timeout: 10_000,
            session_id: session,
            passwd,
            read_only: Some(false),
        });
        s.write_all(&w.finish()).unwrap();
        let body = read_frame(&mut s).expect("a connect response");
        let resp = ConnectResponse::from_bytes(&body).unwrap();
        Raw {
            s,
            xid: 0,
            session: resp.session_id,
            passwd: resp.passwd,
            timeout: resp.timeout,
        }
    }

    /// Sends `req`, returns its reply's header and body.
    fn call(&mut self, req: &Request) -> (ReplyHeader, Response) {
        self.try_call(req).expect("a reply")
    }

    /// Sends `req`; its reply, or `None` if the connection closed without one.
    fn try_call(&mut self, req: &Request) -> Option<(ReplyHeader, Response)> {
        self.xid += 1;
        self.s.write_all(&req.to_frame(self.xid)).ok()?;
        loop {
            let body = read_frame(&mut self.s)?;
            let mut r = Reader::new(&body);
            let h: ReplyHeader = r.record().unwrap();
            if h.xid == self.xid {
                return Some((h, Response::decode(req.op(), h.err, &mut r).unwrap()));
            }
        }
    }
}

fn create(path: &str, flags: i32) -> Request {
    Request::Create(CreateRequest {
        path: path.into(),
        data: path.as_bytes().to_vec(),
        acl: Acl::open(),
        flags,
    })
}

#[test]
fn a_killed_server_restarted_on_its_dir_keeps_every_acknowledged_write_and_its_sessions() {
    let dir = temp_dir("kill");
    let port = free_port();
    let mut server = Running(spawn(port, &dir));
    let mut a = Raw::connect(port, 0, vec![0; 16], 0);
    let (h, _) = a.call(&create("/n", 0));
    assert_eq!(h.err, 0);
    let mut last_zxid = 0;
    for i in 0..1000 {
        let (h, _) = a.call(&create(&format!("/n/{i}"), 0));
        assert_eq!(h.err, 0, "create /n/{i}");
        last_zxid = h.zxid;
    }
    let (h, _) = a.call(&create("/mine", 1)); // ephemeral
    assert_eq!(h.err, 0);
    last_zxid = last_zxid.max(h.zxid);

    server.0.kill().unwrap(); // SIGKILL
    server.0.wait().unwrap();
    let mut server = Running(spawn(port, &dir));

    let mut b = Raw::connect(port, 0, vec![0; 16], last_zxid);
    assert!(b.timeout > 0, "a new session after the restart");
    let (h, resp) = b.call(&Request::GetChildren(PathWatchRequest {
        path: "/n".into(),
        watch: false,
    }));
    assert_eq!(h.err, 0);
    let Response::GetChildren(children) = resp else {
        panic!("{resp:?}")
    };
    assert_eq!(
        children.children.len(),
        1000,
        "every acknowledged create kept"
    );
    for i in [0, 499, 999] {
        let data = get_data(&mut b, &format!("/n/{i}"));
        assert_eq!(data, format!("/n/{i}").into_bytes());
    }
    assert!(h.zxid >= last_zxid, "the zxid went on");

    // The first session resumes, its ephemeral intact.
    let resumed = Raw::connect(port, a.session, a.passwd.clone(), last_zxid);
    assert_eq!(resumed.session, a.session);
    assert!(resumed.timeout > 0, "the session was kept");
    let (h, _) = b.call(&Request::Exists(PathWatchRequest {
        path: "/mine".into(),
        watch: false,
    }));
    assert_eq!(h.err, 0, "the session's ephemeral is there");

    // SIGTERM stops it cleanly.
    let term = Command::new("kill")
        .args(["-TERM", &server.0.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let status = server.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn get_data(c: &mut Raw, path: &str) -> Vec<u8> {
    let (h, resp) = c.call(&Request::GetData(PathWatchRequest {
        path: path.into(),
        watch: false,
    }));
    assert_eq!(h.err, 0, "{path}");
    let Response::GetData(d) = resp else {
        panic!("{resp:?}")
    };
    d.data
}

fn children(c: &mut Raw, path: &str) -> Vec<String> {
    let (h, resp) = c.call(&Request::GetChildren(PathWatchRequest {
        path: path.into(),
        watch: false,
    }));
    assert_eq!(h.err, 0);
    let Response::GetChildren(r) = resp else {
        panic!("{resp:?}")
    };
    r.children
}

#[test]
fn snapshots_keep_the_dir_small_and_a_killed_server_loses_nothing_acknowledged() {
    const LOG_BYTES: u64 = 128 * 1024;
    let dir = temp_dir("snapshots");
    let port = free_port();
    let limit = LOG_BYTES.to_string();
    let start = || {
        Running(spawn_with(
            port,
            &dir,
            &["--snapshot-log-bytes", &limit],
            None,
        ))
    };
    let mut server = start();
    let mut a = Raw::connect(port, 0, vec![0; 16], 0);
    assert_eq!(a.call(&create("/n", 0)).0.err, 0);
    let mut data: Vec<Vec<u8>> = Vec::new();
    for i in 0..500 {
        let (h, _) = a.call(&create(&format!("/n/{i}"), 0));
        assert_eq!(h.err, 0);
        data.push(format!("/n/{i}").into_bytes());
    }
    assert_eq!(a.call(&create("/mine", 1)).0.err, 0); // ephemeral
                                                      // Rewrites of the same nodes: the log grows, the state does not.
    let mut largest = 0;
    let mut last_zxid = 0;
    for k in 0..8000 {
        let i = k * 7 % data.len();
        let bytes = format!("{k:>96}").into_bytes();
        let (h, _) = a.call(&Request::SetData(SetDataRequest {
            path: format!("/n/{i}"),
            data: bytes.clone(),
            version: -1,
        }));
        assert_eq!(h.err, 0);
        data[i] = bytes;
        last_zxid = h.zxid;
        if k % 250 == 0 {
            largest = largest.max(dir_size(&dir));
        }
    }
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let generation: u64 = names
        .iter()
        .find_map(|n| {
            n.strip_prefix("transactions.")?
                .strip_suffix(".log")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no snapshot's log in {names:?}"));
    let snapshot = std::fs::metadata(dir.join("snapshot")).unwrap().len();
    // 8000 entries of about 170 bytes: over 1.3 MB of log without snapshots.
    assert!(
        generation >= 4,
        "several snapshots: generation {generation}"
    );
    // The snapshot's file is written off the server's lock, so while it is written the
    // directory holds the snapshot in place and the one being written, the log the new one
    // will replace and the log that follows it: bounded, not the 1.3 MB of the whole history.
    let bound = 2 * LOG_BYTES.max(snapshot) + 2 * snapshot + 4096;
    assert!(
        largest <= bound,
        "the directory stays within two logs and two snapshots ({bound} bytes): {largest} bytes, snapshot {snapshot}"
    );
    eprintln!(
        "snapshot generation {generation}, snapshot {snapshot} bytes, directory at most {largest} bytes"
    );

    server.0.kill().unwrap(); // SIGKILL
    server.0.wait().unwrap();
    let _server = start();
    let mut b = Raw::connect(port, 0, vec![0; 16], last_zxid);
    assert_eq!(children(&mut b, "/n").len(), data.len());
    for (i, want) in data.iter().enumerate() {
        let data = get_data(&mut b, &format!("/n/{i}"));
        assert_eq!(&data, want, "/n/{i} as last acknowledged");
    }
    let resumed = Raw::connect(port, a.session, a.passwd.clone(), last_zxid);
    assert_eq!(resumed.session, a.session, "the session was kept");
    assert!(resumed.timeout > 0);
    let (h, _) = b.call(&Request::Exists(PathWatchRequest {
        path: "/mine".into(),
        watch: false,
    }));
    assert_eq!(h.err, 0, "the session's ephemeral is there");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_write_the_dir_cannot_take_is_neither_acknowledged_nor_kept() {
    let dir = temp_dir("full");
    let port = free_port();
    // 32 KiB of files: a few hundred creates, then the log cannot grow.
    let mut server = Running(spawn_with(port, &dir, &[], Some(64)));
    let mut a = Raw::connect(port, 0, vec![0; 16], 0);
    assert_eq!(a.call(&create("/n", 0)).0.err, 0);
    let nodes_before: usize = srvr_field(port, "Node count").parse().unwrap();
    let mut acked = 0;
    let mut last_zxid = 0;
    // Until a create is not answered: its connection closed.
    while let Some((h, _)) = a.try_call(&create(&format!("/n/{acked}"), 0)) {
        assert_eq!(h.err, 0);
        last_zxid = h.zxid;
        acked += 1;
        assert!(acked < 10_000, "the file size limit never stopped a write");
    }
    assert!(acked > 10, "only {acked} creates before the limit");
    // The server lives on, without the write it could not record.
    let nodes: usize = srvr_field(port, "Node count").parse().unwrap();
    assert_eq!(
        nodes,
        nodes_before + acked,
        "the refused create was not applied"
    );
    assert_eq!(srvr_field(port, "Zxid"), format!("0x{last_zxid:x}"));

    server.0.kill().unwrap(); // SIGKILL
    server.0.wait().unwrap();
    let _server = Running(spawn(port, &dir));
    let mut b = Raw::connect(port, 0, vec![0; 16], last_zxid);
    let kept = children(&mut b, "/n");
    assert_eq!(
        kept.len(),
        acked,
        "every acknowledged create, and only those"
    );
    assert!(!kept.contains(&acked.to_string()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_dir_that_is_not_its_own_and_a_port_in_use_are_clear_errors() {
    let dir = temp_dir("foreign");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("something-else"), b"x").unwrap();
    let out = spawn(free_port(), &dir).wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("not a zklock-server data directory"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);

    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let dir = temp_dir("port");
    let out = spawn(port, &dir).wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("in use"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_admin_command_expires_a_session_of_the_running_binary() {
    let dir = temp_dir("admin");
    let port = free_port();
    let _server = Running(spawn(port, &dir));
    let a = Raw::connect(port, 0, vec![0; 16], 0);
    let admin = |cmd: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_zklock-server"))
            .args(["admin", "--port", &port.to_string()])
            .args(cmd)
            .output()
            .unwrap()
    };
    let listed = admin(&["sessions"]);
    assert!(String::from_utf8_lossy(&listed.stdout).contains(&format!("0x{:x}", a.session)));
    let out = admin(&["expire-session", &format!("0x{:x}", a.session)]);
    assert!(out.status.success(), "{out:?}");
    let resumed = Raw::connect(port, a.session, a.passwd.clone(), 0);
    assert_eq!(resumed.timeout, 0, "told the session expired");
    let out = admin(&["no-such-command"]);
    assert!(!out.status.success());
    let _ = std::fs::remove_dir_all(&dir);
}
