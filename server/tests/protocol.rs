//! The server at the byte level, with zklock-proto as a bare client: the handshake's edge
//! cases, bad frames, ordering of notifications and replies, and ZooKeeper's numbering.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use zklock_proto::*;
use zklock_server::{Config, Server};

struct Raw {
    s: TcpStream,
    xid: i32,
    session: i64,
    passwd: Vec<u8>,
    timeout: i32,
}

fn connect_req(session: i64, passwd: Vec<u8>, last_zxid: i64, read_only: Option<bool>) -> Vec<u8> {
    let mut w = Writer::frame();
    w.record(&ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: last_zxid,
        timeout: 10_000,
        session_id: session,
        passwd,
        read_only,
    });
    w.finish()
}

fn read_frame(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0; 4];
    s.read_exact(&mut len).ok()?;
    let mut body = vec![0; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).ok()?;
    Some(body)
}

impl Raw {
    fn open(server: &Server) -> Raw {
        Raw::resume(server, 0, vec![0; 16]).unwrap()
    }

    fn resume(server: &Server, session: i64, passwd: Vec<u8>) -> Option<Raw> {
        let mut s = TcpStream::connect(server.connect_string()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(&connect_req(session, passwd, 0, Some(false)))
            .unwrap();
        let body = read_frame(&mut s)?;
        let resp = ConnectResponse::from_bytes(&body).unwrap();
        Some(Raw {
            s,
            xid: 0,
            session: resp.session_id,
            passwd: resp.passwd,
            timeout: resp.timeout,
        })
    }

    fn send(&mut self, req: &Request) -> i32 {
        self.xid += 1;
        self.s.write_all(&req.to_frame(self.xid)).unwrap();
        self.xid
    }

    /// The next frame: (header, body bytes).
    fn next(&mut self) -> Option<(ReplyHeader, Vec<u8>)> {
        let body = read_frame(&mut self.s)?;
        let mut r = Reader::new(&body);
        let h: ReplyHeader = r.record().unwrap();
        Some((h, r.rest().to_vec()))
    }

    /// Sends `req` and returns (err, body) of its reply, collecting notifications before it.
    fn call(&mut self, req: &Request, notes: &mut Vec<WatcherEvent>) -> (i32, Response) {
        let op = req.op();
        let mut xid = self.send(req);
        if op == op::PING {
            xid = xid::PING;
        }
        loop {
            let (h, body) = self.next().expect("connection closed");
            if h.xid == xid::NOTIFICATION {
                notes.push(WatcherEvent::from_bytes(&body).unwrap());
                continue;
            }
            assert_eq!(h.xid, xid, "replies in request order");
            let resp = Response::decode(op, h.err, &mut Reader::new(&body)).unwrap();
            return (h.err, resp);
        }
    }

    fn ok(&mut self, req: Request) -> Response {
        let (err, r) = self.call(&req, &mut Vec::new());
        assert_eq!(err, 0, "{req:?}");
        r
    }

    fn closed(&mut self) -> bool {
        let mut b = [0; 1];
        matches!(self.s.read(&mut b), Ok(0) | Err(_))
    }
}

fn create(path: &str, flags: i32) -> Request {
    Request::Create2(CreateRequest {
        path: path.into(),
        data: vec![],
        acl: Acl::open(),
        flags,
    })
}

fn stat_of(r: Response) -> Stat {
    match r {
        Response::Create2(c) => c.stat,
        Response::Stat(s) => s.stat,
        Response::GetData(d) => d.stat,
        other => panic!("no stat in {other:?}"),
    }
}

fn server() -> Server {
    Server::start(Config {
        tick_time: Duration::from_millis(100),
        ..Config::default()
    })
    .unwrap()
}

#[test]
fn sequence_numbers_come_from_the_stored_cversion_and_deletes_do_not_move_it() {
    let srv = server();
    let mut c = Raw::open(&srv);
    c.ok(create("/p", create_mode::PERSISTENT));
    let Response::Create2(a) = c.ok(create("/p/n-", create_mode::PERSISTENT_SEQUENTIAL)) else {
        panic!()
    };
    assert_eq!(a.path, "/p/n-0000000000");
    c.ok(Request::Delete(DeleteRequest {
        path: a.path,
        version: -1,
    }));
    let Response::Create2(b) = c.ok(create("/p/n-", create_mode::EPHEMERAL_SEQUENTIAL)) else {
        panic!()
    };
    assert_eq!(b.path, "/p/n-0000000001");
    let parent = stat_of(c.ok(Request::Exists(PathWatchRequest {
        path: "/p".into(),
        watch: false,
    })));
    // Stored cversion 2 with one child: clients see 2 * 2 - 1.
    assert_eq!((parent.cversion, parent.num_children), (3, 1));
    assert_eq!(b.stat.ephemeral_owner, c.session);
}

#[test]
fn a_failed_multi_changes_nothing_and_answers_each_op() {
    let srv = server();
    let mut c = Raw::open(&srv);
    let (err, r) = c.call(
        &Request::Multi(vec![
            MultiOp::Create(CreateRequest {
                path: "/m".into(),
                data: vec![],
                acl: Acl::open(),
                flags: 0,
            }),
            MultiOp::Delete(DeleteRequest {
                path: "/missing".into(),
                version: -1,
            }),
            MultiOp::Check(CheckVersionRequest {
                path: "/m".into(),
                version: 0,
            }),
        ]),
        &mut Vec::new(),
    );
    assert_eq!(err, 0);
    let Response::Multi(m) = r else { panic!() };
    assert_eq!(
        m.results,
        vec![
            OpResult::Error(0),
            OpResult::Error(code::NO_NODE),
            OpResult::Error(code::RUNTIME_INCONSISTENCY)
        ]
    );
    let (err, _) = c.call(
        &Request::Exists(PathWatchRequest {
            path: "/m".into(),
            watch: false,
        }),
        &mut Vec::new(),
    );
    assert_eq!(err, code::NO_NODE);
}

#[test]
fn a_notification_precedes_the_reply_that_shows_the_change() {
    let srv = server();
    let mut watcher = Raw::open(&srv);
    let mut writer = Raw::open(&srv);
    watcher.ok(create("/w", 0));
    watcher.ok(Request::GetData(PathWatchRequest {
        path: "/w".into(),
        watch: true,
    }));
    writer.ok(Request::SetData(SetDataRequest {
        path: "/w".into(),
        data: b"x".to_vec(),
        version: -1,
    }));
    let mut notes = Vec::new();
    let (_, r) = watcher.call(
        &Request::GetData(PathWatchRequest {
            path: "/w".into(),
            watch: false,
        }),
        &mut notes,
    );
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0].kind, event_type::NODE_DATA_CHANGED);
    assert!(matches!(r, Response::GetData(d) if d.data == b"x"));
}

#[test]
fn a_moved_session_closes_its_old_connection_and_an_unknown_one_gets_timeout_zero() {
    let srv = server();
    let mut first = Raw::open(&srv);
    assert!(first.timeout >= 200);
    let mut second = Raw::resume(&srv, first.session, first.passwd.clone()).unwrap();
    assert_eq!(second.session, first.session);
    assert!(first.closed(), "the old connection is closed");
    second.ok(Request::Sync(PathRequest { path: "/".into() }));

    let mut s = TcpStream::connect(srv.connect_string()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&connect_req(0x1234, vec![0; 16], 0, None))
        .unwrap();
    let resp = ConnectResponse::from_bytes(&read_frame(&mut s).unwrap()).unwrap();
    assert_eq!(
        (resp.timeout, resp.session_id, resp.read_only),
        (0, 0, None)
    );
    assert!(read_frame(&mut s).is_none(), "closed after the reply");
}

#[test]
fn a_client_ahead_of_the_server_is_refused_and_read_only_is_echoed_only_if_sent() {
    let srv = server();
    let mut s = TcpStream::connect(srv.connect_string()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&connect_req(0, vec![0; 16], 1 << 40, Some(false)))
        .unwrap();
    assert!(read_frame(&mut s).is_none());

    let c = Raw::open(&srv);
    let mut s = TcpStream::connect(srv.connect_string()).unwrap();
    s.write_all(&connect_req(0, vec![0; 16], 0, None)).unwrap();
    let resp = ConnectResponse::from_bytes(&read_frame(&mut s).unwrap()).unwrap();
    assert_eq!(resp.read_only, None);
    drop(c);
}

#[test]
fn bad_frames_close_only_their_connection_and_unknown_ops_answer_unimplemented() {
    let srv = Server::start(Config {
        max_buffer: 1024,
        ..Config::default()
    })
    .unwrap();
    let mut good = Raw::open(&srv);
    let mut big = Raw::open(&srv);
    big.s.write_all(&2048i32.to_be_bytes()).unwrap();
    assert!(big.closed());
    // A body that does not decode: MarshallingError, and the connection stays (as 3.9.5).
    let mut junk = Raw::open(&srv);
    let mut w = Writer::frame();
    w.int(1).int(op::CREATE).int(-7);
    junk.s.write_all(&w.finish()).unwrap();
    let (h, _) = junk.next().unwrap();
    assert_eq!((h.xid, h.err), (1, code::MARSHALLING_ERROR));
    junk.ok(Request::Sync(PathRequest { path: "/".into() }));
    // A frame too short for a request header closes.
    junk.s.write_all(&[0, 0, 0, 2, 0, 0]).unwrap();
    assert!(junk.closed());
    let mut odd = Raw::open(&srv);
    let mut w = Writer::frame();
    w.int(7).int(999);
    odd.s.write_all(&w.finish()).unwrap();
    let (h, _) = odd.next().unwrap();
    assert_eq!((h.xid, h.err), (7, code::UNIMPLEMENTED));
    good.ok(Request::Sync(PathRequest { path: "/".into() }));
}

#[test]
fn an_expired_session_loses_its_ephemerals_and_fires_watches() {
    let srv = Server::start(Config {
        tick_time: Duration::from_millis(100),
        ..Config::default()
    })
    .unwrap();
    let mut owner = Raw::open(&srv);
    let mut watcher = Raw::open(&srv);
    // Ask for the smallest timeout: 2 ticks.
    owner.ok(create("/e", create_mode::EPHEMERAL));
    watcher.ok(Request::Exists(PathWatchRequest {
        path: "/e".into(),
        watch: true,
    }));
    let session = owner.session;
    owner.s.shutdown(Shutdown::Both).unwrap();
    // The owner's 10 s was clamped to 20 ticks (2 s); the watcher pings to outlive it.
    let mut notes = Vec::new();
    for _ in 0..30 {
        watcher.call(&Request::Ping, &mut notes);
        if !notes.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(notes.len(), 1, "{notes:?}");
    let ev = &notes[0];
    assert_eq!(
        (ev.kind, ev.path.as_str()),
        (event_type::NODE_DELETED, "/e")
    );
    assert!(Raw::resume(&srv, session, owner.passwd.clone())
        .map(|r| r.timeout == 0)
        .unwrap_or(true));
}

#[test]
fn digest_acls_are_checked_in_zookeeper_s_order() {
    let srv = server();
    let mut a = Raw::open(&srv);
    let mut b = Raw::open(&srv);
    a.ok(Request::Auth(AuthPacket {
        kind: 0,
        scheme: "digest".into(),
        auth: b"u:p".to_vec(),
    }));
    a.ok(Request::Create(CreateRequest {
        path: "/s".into(),
        data: b"secret".to_vec(),
        acl: vec![Acl::new(perms::ALL, "auth", "")],
        flags: 0,
    }));
    let mut n = Vec::new();
    // A create under a node without CREATE for us: NoAuth before NoNode's checks below it.
    assert_eq!(b.call(&create("/s/x", 0), &mut n).0, code::NO_AUTH);
    assert_eq!(
        b.call(
            &Request::GetData(PathWatchRequest {
                path: "/s".into(),
                watch: false
            }),
            &mut n
        )
        .0,
        code::NO_AUTH
    );
    // exists needs READ only when the node exists: a missing child answers NoNode.
    assert_eq!(
        b.call(
            &Request::Exists(PathWatchRequest {
                path: "/s/none".into(),
                watch: false
            }),
            &mut n
        )
        .0,
        code::NO_NODE
    );
    let Response::GetAcl(acl) = a.ok(Request::GetAcl(PathRequest { path: "/s".into() })) else {
        panic!()
    };
    assert_eq!(acl.acl[0].id.id, zklock_server::model::digest("u:p"));
}

#[test]
fn four_letter_words_answer_and_close() {
    let srv = server();
    for (word, expect) in [
        ("ruok", "imok"),
        ("srvr", "Mode: standalone"),
        ("mntr", "zk_znode_count"),
    ] {
        let mut s = TcpStream::connect(srv.connect_string()).unwrap();
        s.write_all(word.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.contains(expect), "{word}: {out}");
    }
}

#[test]
fn stop_ends_connections_that_never_finished_their_handshake() {
    let srv = server();
    let silent = TcpStream::connect(srv.connect_string()).unwrap();
    let mut half = TcpStream::connect(srv.connect_string()).unwrap();
    half.write_all(&[0, 0, 0, 45, 0, 0]).unwrap();
    let mut open = Raw::open(&srv);
    open.ok(Request::Sync(PathRequest { path: "/".into() }));
    std::thread::sleep(Duration::from_millis(100));
    let started = std::time::Instant::now();
    srv.stop();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(open.closed());
    drop((silent, half));
}

#[test]
fn a_session_expired_on_request_loses_its_ephemerals_and_its_connection() {
    let srv = server();
    let mut owner = Raw::open(&srv);
    let mut watcher = Raw::open(&srv);
    owner.ok(create("/x", create_mode::EPHEMERAL));
    watcher.ok(Request::Exists(PathWatchRequest {
        path: "/x".into(),
        watch: true,
    }));
    assert_eq!(srv.sessions().len(), 2);
    assert!(srv.expire_session(owner.session));
    assert!(!srv.expire_session(owner.session));
    assert!(owner.closed());
    let mut notes = Vec::new();
    watcher.call(&Request::Sync(PathRequest { path: "/".into() }), &mut notes);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert_eq!(notes[0].kind, event_type::NODE_DELETED);
    let again = Raw::resume(&srv, owner.session, owner.passwd.clone());
    assert!(again.is_none_or(|r| r.timeout == 0));
    assert_eq!(srv.sessions(), vec![watcher.session]);
}

#[test]
fn a_container_is_swept_on_request_once_it_had_a_child() {
    let srv = server();
    let mut c = Raw::open(&srv);
    c.ok(Request::CreateContainer(CreateRequest {
        path: "/box".into(),
        data: vec![],
        acl: Acl::open(),
        flags: create_mode::CONTAINER,
    }));
    srv.sweep_containers();
    let exists = |c: &mut Raw| {
        c.call(
            &Request::Exists(PathWatchRequest {
                path: "/box".into(),
                watch: false,
            }),
            &mut Vec::new(),
        )
        .0
    };
    assert_eq!(exists(&mut c), 0, "never used: kept");
    c.ok(create("/box/a", 0));
    c.ok(Request::Delete(DeleteRequest {
        path: "/box/a".into(),
        version: -1,
    }));
    srv.sweep_containers();
    assert_eq!(exists(&mut c), code::NO_NODE);
}

#[test]
fn delete_container_from_a_client_checks_as_zookeeper_s_prep_does() {
    let srv = server();
    let mut c = Raw::open(&srv);
    let mut notes = Vec::new();
    let del = |path: &str| Request::DeleteContainer(PathRequest { path: path.into() });
    c.ok(create("/p", create_mode::PERSISTENT));
    c.ok(create("/p/kid", create_mode::PERSISTENT));
    c.ok(create("/e", create_mode::EPHEMERAL));
    c.ok(Request::Exists(PathWatchRequest {
        path: "/p/kid".into(),
        watch: true,
    }));
    // Checked in this order: the path's form, the node, its children, whose node it is.
    assert_eq!(c.call(&del("/"), &mut notes).0, code::BAD_ARGUMENTS);
    assert_eq!(
        c.call(&del("/zookeeper"), &mut notes).0,
        code::BAD_ARGUMENTS
    );
    assert_eq!(c.call(&del("/none"), &mut notes).0, code::NO_NODE);
    assert_eq!(c.call(&del("/p"), &mut notes).0, code::NOT_EMPTY);
    assert_eq!(c.call(&del("/e"), &mut notes).0, code::BAD_VERSION);
    // A plain persistent leaf goes, with no ACL check, and its watch fires.
    let (err, body) = c.call(&del("/p/kid"), &mut notes);
    assert_eq!((err, body), (0, Response::Empty));
    assert_eq!(notes.len(), 1);
    assert_eq!(
        (notes[0].kind, notes[0].path.as_str()),
        (event_type::NODE_DELETED, "/p/kid")
    );
    c.ok(Request::Create2(CreateRequest {
        path: "/c".into(),
        data: vec![],
        acl: vec![Acl::new(perms::READ, "world", "anyone")],
        flags: create_mode::CONTAINER,
    }));
    c.ok(del("/c"));
    assert_eq!(c.call(&del("/c"), &mut notes).0, code::NO_NODE);
}

#[test]
fn check_and_remove_watches_match_modes_as_zookeeper_s_watch_manager() {
    let srv = server();
    let mut c = Raw::open(&srv);
    // Every notification that reaches this connection, before whichever reply.
    let mut notes = Vec::new();
    let mut run = |c: &mut Raw, req: Request| c.call(&req, &mut notes).0;
    let add = |path: &str, mode| {
        Request::AddWatch(AddWatchRequest {
            path: path.into(),
            mode,
        })
    };
    let look = |path: &str, kind| WatchesRequest {
        path: path.into(),
        kind,
    };
    let check = |path: &str, kind| Request::CheckWatches(look(path, kind));
    let remove = |path: &str, kind| Request::RemoveWatches(look(path, kind));
    assert_eq!(run(&mut c, create("/w", create_mode::PERSISTENT)), 0);
    // A persistent watch is in both tables, as PERSISTENT: only Persistent and Any see it.
    assert_eq!(run(&mut c, add("/w", add_watch_mode::PERSISTENT)), 0);
    for (kind, want) in [
        (watcher_type::CHILDREN, code::NO_WATCHER),
        (watcher_type::DATA, code::NO_WATCHER),
        (watcher_type::PERSISTENT, 0),
        (watcher_type::PERSISTENT_RECURSIVE, code::NO_WATCHER),
        (watcher_type::ANY, 0),
    ] {
        assert_eq!(run(&mut c, check("/w", kind)), want, "kind {kind}");
    }
    // A one-shot data watch beside it: removing Data takes that one only.
    let get = Request::GetData(PathWatchRequest {
        path: "/w".into(),
        watch: true,
    });
    assert_eq!(run(&mut c, get), 0);
    assert_eq!(run(&mut c, remove("/w", watcher_type::DATA)), 0);
    assert_eq!(
        run(&mut c, check("/w", watcher_type::DATA)),
        code::NO_WATCHER
    );
    assert_eq!(run(&mut c, check("/w", watcher_type::PERSISTENT)), 0);
    // Any takes the persistent one too, from both tables.
    assert_eq!(run(&mut c, remove("/w", watcher_type::ANY)), 0);
    assert_eq!(
        run(&mut c, check("/w", watcher_type::ANY)),
        code::NO_WATCHER
    );
    // A recursive watch is a data watch of its own mode.
    assert_eq!(
        run(&mut c, add("/r", add_watch_mode::PERSISTENT_RECURSIVE)),
        0
    );
    let r = |kind| check("/r", kind);
    assert_eq!(run(&mut c, r(watcher_type::PERSISTENT)), code::NO_WATCHER);
    assert_eq!(run(&mut c, r(watcher_type::PERSISTENT_RECURSIVE)), 0);
    let persistent = remove("/r", watcher_type::PERSISTENT);
    assert_eq!(run(&mut c, persistent), code::NO_WATCHER);
    let recursive = remove("/r", watcher_type::PERSISTENT_RECURSIVE);
    assert_eq!(run(&mut c, recursive), 0);
    // Nothing watches any more, and the server sent no event for a removal (a client's
    // DataWatchRemoved and ChildWatchRemoved are its own).
    assert_eq!(run(&mut c, create("/w/x", create_mode::PERSISTENT)), 0);
    assert_eq!(run(&mut c, create("/r", create_mode::PERSISTENT)), 0);
    assert_eq!(
        run(&mut c, Request::Sync(PathRequest { path: "/".into() })),
        0
    );
    assert!(notes.is_empty(), "{notes:?}");
}
