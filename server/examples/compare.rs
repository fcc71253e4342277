//! Sends the same scripted requests to two servers and prints where their answers differ
//! (zxids, times, session ids normalised). A quick check while developing; the differential
//! test proper lives with zklock's conformance tests.
//!
//! ```text
//! cargo run -p zklock-server --example compare -- 127.0.0.1:2181 127.0.0.1:2191
//! ```

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use zklock_proto::*;

struct Conn {
    s: TcpStream,
    xid: i32,
    session: i64,
}

fn frame(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0; 4];
    s.read_exact(&mut len).ok()?;
    let mut b = vec![0; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut b).ok()?;
    Some(b)
}

impl Conn {
    fn open(addr: &str) -> Conn {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(1500)))
            .unwrap();
        let mut w = Writer::frame();
        w.record(&ConnectRequest {
            timeout: 10_000,
            passwd: vec![0; 16],
            read_only: Some(false),
            ..ConnectRequest::default()
        });
        s.write_all(&w.finish()).unwrap();
        let r = ConnectResponse::from_bytes(&frame(&mut s).unwrap()).unwrap();
        Conn {
            s,
            xid: 0,
            session: r.session_id,
        }
    }

    /// The reply and the notifications before it, as text with zxids and times masked.
    fn call(&mut self, req: &Request) -> String {
        self.xid += 1;
        let xid = if req.op() == op::PING {
            xid::PING
        } else {
            self.xid
        };
        let mut out = String::new();
        if self.s.write_all(&req.to_frame(xid)).is_err() {
            return "<closed or silent>".into();
        }
        loop {
            let Some(b) = frame(&mut self.s) else {
                out.push_str("<closed or silent>");
                return out;
            };
            let mut r = Reader::new(&b);
            let h: ReplyHeader = r.record().unwrap();
            if h.xid == xid::NOTIFICATION {
                let e = WatcherEvent::from_bytes(r.rest()).unwrap();
                out.push_str(&format!(
                    "NOTE(zxid {}) {e:?}; ",
                    if h.zxid == -1 { "-1" } else { "z" }
                ));
                continue;
            }
            let body = Response::decode(req.op(), h.err, &mut r);
            let mut text = format!("err={} xid_ok={} {:?}", h.err, h.xid == xid, body);
            text = mask(&text, self.session);
            out.push_str(&text);
            return out;
        }
    }
}

fn mask(s: &str, session: i64) -> String {
    let mut t = s.replace(&session.to_string(), "SESSION");
    for key in ["czxid: ", "mzxid: ", "pzxid: ", "ctime: ", "mtime: "] {
        let mut out = String::new();
        let mut rest = t.as_str();
        while let Some(i) = rest.find(key) {
            out.push_str(&rest[..i + key.len()]);
            rest = &rest[i + key.len()..];
            let end = rest
                .find(|c: char| !c.is_ascii_digit() && c != '-')
                .unwrap_or(rest.len());
            out.push('N');
            rest = &rest[end..];
        }
        out.push_str(rest);
        t = out;
    }
    t
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (a, b) = (&args[0], &args[1]);
    let base = format!("/cmp{}", std::process::id());
    let p = |s: &str| format!("{base}{s}");
    let pw = |path: String, watch| PathWatchRequest { path, watch };
    let cr = |path: String, flags| CreateRequest {
        path,
        data: b"d".to_vec(),
        acl: Acl::open(),
        flags,
    };
    let script: Vec<(usize, Request)> = vec![
        (0, Request::Create(cr(base.clone(), 0))),
        (0, Request::Create2(cr(p("/a"), 0))),
        (0, Request::Create2(cr(p("/a/s-"), 2))),
        (0, Request::Create2(cr(p("/a/s-"), 3))),
        (0, Request::Create2(cr(p("/a/s-0000000001"), 0))),
        (0, Request::Create2(cr(p("/bad"), 9))),
        (0, Request::Create2(cr(p("/t"), 5))),
        (
            0,
            Request::CreateTtl(CreateTtlRequest {
                path: p("/t"),
                data: vec![],
                acl: Acl::open(),
                flags: 5,
                ttl: 100,
            }),
        ),
        (0, Request::Create2(cr(p("/e"), 1))),
        (0, Request::Create2(cr(p("/e/x"), 0))),
        (0, Request::Create2(cr(p("/rel/"), 0))),
        (0, Request::Create2(cr("noslash".into(), 0))),
        (0, Request::CreateContainer(cr(p("/c"), 4))),
        (0, Request::GetChildren2(pw(p("/a"), true))),
        (1, Request::GetData(pw(p("/a"), true))),
        (1, Request::Exists(pw(p("/nx"), true))),
        (
            0,
            Request::SetData(SetDataRequest {
                path: p("/a"),
                data: vec![1],
                version: 5,
            }),
        ),
        (
            0,
            Request::SetData(SetDataRequest {
                path: p("/a"),
                data: vec![1],
                version: 0,
            }),
        ),
        (1, Request::Sync(PathRequest { path: p("/a") })),
        (0, Request::Create2(cr(p("/nx"), 0))),
        (1, Request::Sync(PathRequest { path: p("/a") })),
        (
            0,
            Request::Check(CheckVersionRequest {
                path: p("/a"),
                version: 1,
            }),
        ),
        (
            0,
            Request::Delete(DeleteRequest {
                path: "/".into(),
                version: -1,
            }),
        ),
        (
            0,
            Request::Delete(DeleteRequest {
                path: "/zookeeper".into(),
                version: -1,
            }),
        ),
        (
            0,
            Request::Delete(DeleteRequest {
                path: p("/a"),
                version: -1,
            }),
        ),
        (
            0,
            Request::Multi(vec![MultiOp::GetData(pw(p("/a"), false))]),
        ),
        (
            0,
            Request::Multi(vec![
                MultiOp::Create2(cr(p("/m"), 0)),
                MultiOp::CreateContainer(cr(p("/mc"), 4)),
                MultiOp::SetData(SetDataRequest {
                    path: p("/m"),
                    data: vec![],
                    version: 0,
                }),
                MultiOp::Check(CheckVersionRequest {
                    path: p("/m"),
                    version: 1,
                }),
                MultiOp::Delete(DeleteRequest {
                    path: p("/m"),
                    version: -1,
                }),
                MultiOp::Create(cr(p("/m"), 0)),
            ]),
        ),
        (
            0,
            Request::MultiRead(vec![
                MultiOp::GetData(pw(p("/a"), false)),
                MultiOp::GetChildren(pw(p("/zz"), false)),
                MultiOp::GetChildren(pw(p("/a"), false)),
            ]),
        ),
        (
            0,
            Request::MultiRead(vec![MultiOp::Check(CheckVersionRequest {
                path: p("/a"),
                version: 1,
            })]),
        ),
        (
            0,
            Request::AddWatch(AddWatchRequest {
                path: p("/a"),
                mode: 7,
            }),
        ),
        (
            0,
            Request::AddWatch(AddWatchRequest {
                path: base.clone(),
                mode: 1,
            }),
        ),
        (
            0,
            Request::CheckWatches(WatchesRequest {
                path: base.clone(),
                kind: watcher_type::PERSISTENT_RECURSIVE,
            }),
        ),
        (
            0,
            Request::CheckWatches(WatchesRequest {
                path: base.clone(),
                kind: watcher_type::DATA,
            }),
        ),
        (
            0,
            Request::RemoveWatches(WatchesRequest {
                path: base.clone(),
                kind: 9,
            }),
        ),
        (
            0,
            Request::GetAllChildrenNumber(PathRequest { path: base.clone() }),
        ),
        (0, Request::GetEphemerals(PathRequest { path: p("/e") })),
        (0, Request::WhoAmI),
        (
            0,
            Request::Auth(AuthPacket {
                kind: 0,
                scheme: "digest".into(),
                auth: b"u:p".to_vec(),
            }),
        ),
        (0, Request::WhoAmI),
        (
            0,
            Request::SetAcl(SetAclRequest {
                path: p("/a"),
                acl: vec![Acl::new(31, "auth", ""), Acl::new(1, "world", "anyone")],
                version: 0,
            }),
        ),
        (1, Request::GetAcl(PathRequest { path: p("/a") })),
        (
            1,
            Request::SetData(SetDataRequest {
                path: p("/a"),
                data: vec![],
                version: -1,
            }),
        ),
        (1, Request::Create2(cr(p("/a/q"), 0))),
        (
            1,
            Request::Delete(DeleteRequest {
                path: p("/a/s-0000000000"),
                version: -1,
            }),
        ),
        (
            0,
            Request::SetAcl(SetAclRequest {
                path: p("/a"),
                acl: vec![Acl::new(31, "ip", "300.1.1.1")],
                version: -1,
            }),
        ),
        (
            0,
            Request::SetAcl(SetAclRequest {
                path: p("/a"),
                acl: vec![Acl::new(31, "digest", "nocolon")],
                version: -1,
            }),
        ),
        (
            0,
            Request::SetAcl(SetAclRequest {
                path: p("/a"),
                acl: vec![],
                version: -1,
            }),
        ),
        (
            0,
            Request::SetWatches(SetWatches {
                relative_zxid: 0,
                data_watches: vec![p("/a"), p("/gone")],
                exist_watches: vec![p("/a"), p("/nothere")],
                child_watches: vec![p("/a")],
            }),
        ),
        (0, Request::Reconfig(ReconfigRequest::default())),
        (0, Request::Ping),
        (1, Request::GetChildren(pw(base.clone(), false))),
    ];
    let mut ca = [Conn::open(a), Conn::open(a)];
    let mut cb = [Conn::open(b), Conn::open(b)];
    let mut diffs = 0;
    for (i, (who, req)) in script.iter().enumerate() {
        let ra = ca[*who].call(req);
        let rb = cb[*who].call(req);
        // A connection the server closed is opened again for the next request.
        if ra.ends_with("<closed or silent>") || ra.contains("err=-6") {
            ca[*who] = Conn::open(a);
        }
        if rb.ends_with("<closed or silent>") || rb.contains("err=-6") {
            cb[*who] = Conn::open(b);
        }
        if ra != rb {
            diffs += 1;
            println!("#{i} {:?}\n  A: {ra}\n  B: {rb}", req);
        }
    }
    println!("{diffs} differences in {} requests", script.len());
}
