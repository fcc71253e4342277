use super::*;
use proptest::prelude::*;

fn stat(seed: i64) -> Stat {
    Stat {
        czxid: seed,
        mzxid: seed + 1,
        ctime: seed + 2,
        mtime: seed + 3,
        version: 4,
        cversion: -1,
        aversion: 6,
        ephemeral_owner: 0x1234_5678_9abc,
        data_length: 8,
        num_children: 9,
        pzxid: seed + 10,
    }
}

fn round_trip<R: Record + PartialEq + std::fmt::Debug>(r: R) {
    let bytes = r.to_bytes();
    assert_eq!(R::from_bytes(&bytes).unwrap(), r);
    // Every proper prefix is an error, never a panic (records with optional tails aside).
    for cut in 0..bytes.len() {
        let _ = R::from_bytes(&bytes[..cut]);
    }
}

fn create(path: &str, flags: i32) -> CreateRequest {
    CreateRequest {
        path: path.into(),
        data: b"data".to_vec(),
        acl: vec![
            Acl::new(perms::ALL, "world", "anyone"),
            Acl::new(perms::READ, "digest", "u:hash"),
        ],
        flags,
    }
}

fn every_request() -> Vec<Request> {
    let pw = PathWatchRequest {
        path: "/p".into(),
        watch: true,
    };
    let pr = PathRequest { path: "/p".into() };
    let ttl = CreateTtlRequest {
        path: "/t".into(),
        data: vec![],
        acl: Acl::open(),
        flags: create_mode::PERSISTENT_WITH_TTL,
        ttl: 5000,
    };
    let ops = vec![
        MultiOp::Create(create("/a", 0)),
        MultiOp::Create2(create("/b", 2)),
        MultiOp::CreateContainer(create("/c", 4)),
        MultiOp::CreateTtl(ttl.clone()),
        MultiOp::Delete(DeleteRequest {
            path: "/d".into(),
            version: -1,
        }),
        MultiOp::SetData(SetDataRequest {
            path: "/e".into(),
            data: vec![1, 2],
            version: 3,
        }),
        MultiOp::Check(CheckVersionRequest {
            path: "/f".into(),
            version: 0,
        }),
    ];
    let reads = vec![
        MultiOp::GetChildren(pw.clone()),
        MultiOp::GetData(pw.clone()),
    ];
    let watches = WatchesRequest {
        path: "/w".into(),
        kind: watcher_type::ANY,
    };
    vec![
        Request::Create(create("/a", 1)),
        Request::Create2(create("/a", 3)),
        Request::CreateContainer(create("/a", 4)),
        Request::CreateTtl(ttl),
        Request::Delete(DeleteRequest {
            path: "/a".into(),
            version: 7,
        }),
        Request::Exists(pw.clone()),
        Request::GetData(pw.clone()),
        Request::SetData(SetDataRequest {
            path: "/a".into(),
            data: vec![0; 3],
            version: -1,
        }),
        Request::GetAcl(pr.clone()),
        Request::SetAcl(SetAclRequest {
            path: "/a".into(),
            acl: Acl::open(),
            version: 2,
        }),
        Request::GetChildren(pw.clone()),
        Request::Sync(pr.clone()),
        Request::DeleteContainer(pr.clone()),
        Request::Ping,
        Request::GetChildren2(pw),
        Request::Check(CheckVersionRequest {
            path: "/a".into(),
            version: 1,
        }),
        Request::Multi(ops),
        Request::Reconfig(ReconfigRequest::default()),
        Request::CheckWatches(watches.clone()),
        Request::RemoveWatches(watches),
        Request::MultiRead(reads),
        Request::Auth(AuthPacket {
            kind: 0,
            scheme: "digest".into(),
            auth: b"u:p".to_vec(),
        }),
        Request::SetWatches(SetWatches {
            relative_zxid: 9,
            data_watches: vec!["/a".into()],
            exist_watches: vec!["/b".into()],
            child_watches: vec![],
        }),
        Request::GetEphemerals(pr.clone()),
        Request::GetAllChildrenNumber(pr),
        Request::SetWatches2(SetWatches2 {
            relative_zxid: 9,
            data_watches: vec!["/a".into()],
            exist_watches: vec![],
            child_watches: vec!["/c".into()],
            persistent_watches: vec!["/p".into()],
            persistent_recursive_watches: vec!["/r".into()],
        }),
        Request::AddWatch(AddWatchRequest {
            path: "/a".into(),
            mode: add_watch_mode::PERSISTENT_RECURSIVE,
        }),
        Request::WhoAmI,
        Request::CloseSession,
    ]
}

#[test]
fn every_request_round_trips_through_a_frame() {
    for (i, req) in every_request().into_iter().enumerate() {
        let frame = req.to_frame(i as i32);
        let (body, used) = split_frame(&frame, 0xfffff).unwrap().unwrap();
        assert_eq!(used, frame.len());
        let (h, back) = Request::from_frame_body(body).unwrap();
        assert_eq!((h.xid, h.op), (i as i32, req.op()));
        assert_eq!(back, req);
        for cut in 0..body.len() {
            let _ = Request::from_frame_body(&body[..cut]);
        }
    }
}

#[test]
fn every_response_round_trips() {
    let s = stat(100);
    let cases = vec![
        (op::DELETE, Response::Empty),
        (
            op::CREATE,
            Response::Create(CreateResponse { path: "/a".into() }),
        ),
        (
            op::CREATE2,
            Response::Create2(Create2Response {
                path: "/a".into(),
                stat: s,
            }),
        ),
        (op::EXISTS, Response::Stat(StatResponse { stat: s })),
        (
            op::GET_DATA,
            Response::GetData(GetDataResponse {
                data: b"x".to_vec(),
                stat: s,
            }),
        ),
        (
            op::GET_ACL,
            Response::GetAcl(GetAclResponse {
                acl: Acl::open(),
                stat: s,
            }),
        ),
        (
            op::GET_CHILDREN,
            Response::GetChildren(GetChildrenResponse {
                children: vec!["a".into(), "b".into()],
            }),
        ),
        (
            op::GET_CHILDREN2,
            Response::GetChildren2(GetChildren2Response {
                children: vec!["a".into()],
                stat: s,
            }),
        ),
        (op::SYNC, Response::Sync(PathRequest { path: "/".into() })),
        (
            op::MULTI,
            Response::Multi(MultiResponse {
                results: vec![
                    OpResult::Create("/a".into()),
                    OpResult::Create2("/b".into(), s),
                    OpResult::Delete,
                    OpResult::SetData(s),
                    OpResult::Check,
                    OpResult::Error(code::NO_NODE),
                ],
            }),
        ),
        (
            op::MULTI_READ,
            Response::Multi(MultiResponse {
                results: vec![
                    OpResult::GetChildren(vec!["x".into()]),
                    OpResult::GetData(vec![1], s),
                    OpResult::Error(code::NO_AUTH),
                ],
            }),
        ),
        (
            op::GET_ALL_CHILDREN_NUMBER,
            Response::GetAllChildrenNumber(GetAllChildrenNumberResponse { total_number: 3 }),
        ),
        (
            op::GET_EPHEMERALS,
            Response::GetEphemerals(GetEphemeralsResponse {
                ephemerals: vec!["/e".into()],
            }),
        ),
        (op::ADD_WATCH, Response::AddWatch(ErrorResponse { err: 0 })),
        (
            op::WHO_AM_I,
            Response::WhoAmI(WhoAmIResponse {
                client_info: vec![ClientInfo {
                    auth_scheme: "ip".into(),
                    user: "127.0.0.1".into(),
                }],
            }),
        ),
    ];
    for (code, resp) in cases {
        let header = ReplyHeader {
            xid: 5,
            zxid: 77,
            err: 0,
        };
        let frame = resp.to_frame(&header);
        let mut r = Reader::new(&frame[4..]);
        assert_eq!(r.record::<ReplyHeader>().unwrap(), header);
        assert_eq!(
            Response::decode(code, 0, &mut r).unwrap(),
            resp,
            "op {code}"
        );
        assert_eq!(r.remaining(), 0);
    }
}

#[test]
fn records_round_trip_and_truncations_are_errors() {
    round_trip(stat(1));
    round_trip(Acl::new(perms::READ | perms::ADMIN, "ip", "127.0.0.1"));
    round_trip(WatcherEvent {
        kind: event_type::NODE_DELETED,
        state: keeper_state::SYNC_CONNECTED,
        path: "/a/b".into(),
    });
    round_trip(MultiHeader {
        op: -1,
        done: true,
        err: -1,
    });
    for read_only in [None, Some(false), Some(true)] {
        round_trip(ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 42,
            timeout: 30_000,
            session_id: 0x100,
            passwd: vec![7; 16],
            read_only,
        });
        round_trip(ConnectResponse {
            protocol_version: 0,
            timeout: 4000,
            session_id: 0x100,
            passwd: vec![7; 16],
            read_only,
        });
    }
}

/// A new session's handshake as ZooKeeper's Java client 3.9 writes it (30 s asked for).
#[test]
fn golden_connect_request() {
    let mut w = Writer::frame();
    w.record(&ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        timeout: 30_000,
        session_id: 0,
        passwd: vec![0; 16],
        read_only: Some(false),
    });
    let mut expected = vec![0, 0, 0, 45, 0, 0, 0, 0];
    expected.extend([0; 8]);
    expected.extend([0, 0, 0x75, 0x30]);
    expected.extend([0; 8]);
    expected.extend([0, 0, 0, 16]);
    expected.extend([0; 16]);
    expected.push(0);
    assert_eq!(w.finish(), expected);
}

/// `create("/a", "", OPEN_ACL_UNSAFE, EPHEMERAL)` with xid 1, byte for byte.
#[test]
fn golden_create_request() {
    let frame = Request::Create(CreateRequest {
        path: "/a".into(),
        data: vec![],
        acl: Acl::open(),
        flags: create_mode::EPHEMERAL,
    })
    .to_frame(1);
    let expected: Vec<u8> = [
        &[0, 0, 0, 49][..],
        &[0, 0, 0, 1, 0, 0, 0, 1],  // xid 1, op create
        &[0, 0, 0, 2, b'/', b'a'],  // path
        &[0, 0, 0, 0],              // data
        &[0, 0, 0, 1, 0, 0, 0, 31], // one ACL, perms ALL
        &[0, 0, 0, 5, b'w', b'o', b'r', b'l', b'd'],
        &[0, 0, 0, 6, b'a', b'n', b'y', b'o', b'n', b'e'],
        &[0, 0, 0, 1], // flags
    ]
    .concat();
    assert_eq!(frame, expected);
}

/// A failed multi's reply (3.9's layout): 0 for the op before the failure, its code, -2 after;
/// each error result carries its code in the header and the body; the end marker (-1, true, -1).
#[test]
fn golden_failed_multi_reply() {
    let body = MultiResponse {
        results: vec![
            OpResult::Error(0),
            OpResult::Error(code::NO_NODE),
            OpResult::Error(code::RUNTIME_INCONSISTENCY),
        ],
    }
    .to_bytes();
    let expected: Vec<u8> = [
        &[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0][..],
        &[
            0xff, 0xff, 0xff, 0xff, 0, 0xff, 0xff, 0xff, 0x9b, 0xff, 0xff, 0xff, 0x9b,
        ],
        &[
            0xff, 0xff, 0xff, 0xff, 0, 0xff, 0xff, 0xff, 0xfe, 0xff, 0xff, 0xff, 0xfe,
        ],
        &[0xff, 0xff, 0xff, 0xff, 1, 0xff, 0xff, 0xff, 0xff],
    ]
    .concat();
    assert_eq!(body, expected);
}

#[test]
fn frames_over_the_limit_or_negative_are_refused() {
    let mut frame = vec![0, 0x10, 0, 0];
    frame.extend([0; 8]);
    assert_eq!(
        split_frame(&frame, 0xfffff),
        Err(DecodeError::TooLarge {
            len: 0x10_0000,
            max: 0xfffff
        })
    );
    assert!(split_frame(&[0xff, 0xff, 0xff, 0xfe], 100).is_err());
    assert_eq!(split_frame(&[0, 0, 0, 5, 1], 100), Ok(None));
    assert_eq!(split_frame(&[0, 0], 100), Ok(None));
}

#[test]
fn an_unknown_op_is_reported_as_such() {
    let mut w = Writer::new();
    w.int(3).int(999);
    assert_eq!(
        Request::from_frame_body(&w.into_inner()),
        Err(DecodeError::UnknownOp(999))
    );
}

#[test]
fn lying_counts_are_errors_not_allocations() {
    let mut w = Writer::new();
    w.int(i32::MAX);
    let b = w.into_inner();
    assert!(Reader::new(&b).strings().is_err());
    assert!(Reader::new(&b).buffer().is_err());
    assert!(Reader::new(&b).records::<Acl>(12).is_err());
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic_the_decoders(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(Some((body, _))) = split_frame(&bytes, 0xfffff) {
            let _ = Request::from_frame_body(body);
        }
        let _ = Request::from_frame_body(&bytes);
        let _ = ConnectRequest::from_bytes(&bytes);
        let _ = ConnectResponse::from_bytes(&bytes);
        for code in [op::MULTI, op::MULTI_READ, op::GET_DATA, op::GET_ACL, op::WHO_AM_I, op::CREATE2] {
            let _ = Response::decode(code, 0, &mut Reader::new(&bytes));
        }
    }

    #[test]
    fn arbitrary_request_bodies_after_a_valid_header_never_panic(
        code in prop::sample::select(vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17, 18, 19, 21, 22, 100, 101, 103, 104, 105, 106, 107, -11]),
        body in proptest::collection::vec(any::<u8>(), 0..128),
    ) {
        let mut w = Writer::new();
        w.int(1).int(code).raw(&body);
        let _ = Request::from_frame_body(&w.into_inner());
    }

    #[test]
    fn mutated_frames_never_panic(idx in 0usize..28, flip in any::<u8>(), at in any::<prop::sample::Index>()) {
        let reqs = every_request();
        let frame = reqs[idx % reqs.len()].to_frame(1);
        let mut body = frame[4..].to_vec();
        let i = at.index(body.len());
        body[i] ^= flip;
        let _ = Request::from_frame_body(&body);
    }
}
