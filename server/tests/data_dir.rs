//! The binary with `--data-dir`: killed with SIGKILL and started again on the same directory,
//! it keeps every write it acknowledged and its sessions; it refuses a directory that is not
//! its own and a port in use with a clear error; SIGTERM stops it cleanly.

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
    Command::new(env!("CARGO_BIN_EXE_zklock-server"))
        .args(["--port", &port.to_string(), "--data-dir"])
        .arg(dir)
        .env("ZKLOCK_SERVER_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
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
        self.xid += 1;
        self.s.write_all(&req.to_frame(self.xid)).unwrap();
        loop {
            let body = read_frame(&mut self.s).expect("a reply");
            let mut r = Reader::new(&body);
            let h: ReplyHeader = r.record().unwrap();
            if h.xid == self.xid {
                return (h, Response::decode(req.op(), h.err, &mut r).unwrap());
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
        let (h, resp) = b.call(&Request::GetData(PathWatchRequest {
            path: format!("/n/{i}"),
            watch: false,
        }));
        assert_eq!(h.err, 0);
        let Response::GetData(d) = resp else {
            panic!("{resp:?}")
        };
        assert_eq!(d.data, format!("/n/{i}").into_bytes());
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
