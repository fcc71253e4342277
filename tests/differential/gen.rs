//! The random request sequences: a pure function of a seed, so that a difference is replayed
//! by its seed alone. Paths are templates relative to the sequence's root, resolved on each
//! server at send time (a sequential node is named by the index of its creation, since only
//! the server knows its name).

use zklock_proto::{
    add_watch_mode, create_mode, perms, watcher_type, Acl, AddWatchRequest, CheckVersionRequest,
    CreateRequest, CreateTtlRequest, DeleteRequest, MultiOp, PathRequest, PathWatchRequest,
    Request, SetAclRequest, SetDataRequest, SetWatches2, WatchesRequest,
};

/// splitmix64: small, fast, and the same sequence on every platform.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

/// How many sessions a sequence uses at most (slots; a closed slot's next step opens anew).
pub const SLOTS: usize = 3;

/// The digest users a session may authenticate as (the clean-up session is both).
pub const USERS: &[(&str, &str)] = &[("u1", "pw1"), ("u2", "pw2")];

/// Path templates below the root: fixed names, `@k` for the k-th sequential node created,
/// `!` for an invalid path, `""` for the root itself.
const FIXED: &[&str] = &["a", "a/b", "a/b/c", "b", "b/e", "c"];

/// One step of a sequence, on session slot `slot`.
#[derive(Debug, Clone)]
pub struct Step {
    pub slot: usize,
    pub action: Action,
}

#[derive(Debug, Clone)]
pub enum Action {
    /// A request whose paths are templates.
    Request(Request),
    /// `addAuth digest user:password` of `USERS[i]`.
    AddAuth(usize),
    /// `closeSession`; the slot's next step opens a new session.
    Close,
    /// The slot's session moved to a new connection (the old one dropped), as a client
    /// reconnects; `setWatches2` then re-arms the watches given, relative to the last zxid
    /// the session saw.
    Reconnect(Option<SetWatches2>),
}

fn path(rng: &mut Rng) -> String {
    match rng.below(100) {
        // Shallow paths exist more often, so that watches on them fire.
        0..=39 => rng.pick(&["a", "b", "c"]).to_owned(),
        40..=71 => rng.pick(FIXED).to_owned(),
        72..=87 => format!("@{}", rng.below(6)),
        88..=94 => String::new(),
        _ => format!("{}/{}", rng.pick(FIXED), rng.pick(&["s", "z"])),
    }
}

/// A create's path: sometimes under a sequential node, sometimes invalid; never the root
/// itself (a sequential create there would number a sibling of the root by the counter that
/// every sequence's root shares).
fn create_path(rng: &mut Rng) -> String {
    match rng.below(100) {
        0..=1 => "!".to_owned(),
        2..=11 => format!("@{}/n", rng.below(4)),
        _ => Some(path(rng))
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "a".to_owned()),
    }
}

fn data(rng: &mut Rng) -> Vec<u8> {
    match rng.below(4) {
        0 => Vec::new(),
        n => format!("d{}", rng.below(1000) * n).into_bytes(),
    }
}

fn version(rng: &mut Rng) -> i32 {
    rng.pick(&[-1, -1, 0, 0, 1, 2, 5])
}

/// An ACL: open, the creator's, readable by anyone and all to the creator, read-only.
/// (`auth` ids need an authenticated session, or the create answers InvalidACL.)
fn acl(rng: &mut Rng, for_create: bool) -> Vec<Acl> {
    match rng.below(10) {
        0 => vec![Acl::new(perms::ALL, "auth", "")],
        1 => vec![
            Acl::new(perms::READ, "world", "anyone"),
            Acl::new(perms::ALL, "auth", ""),
        ],
        2 => vec![
            Acl::new(perms::READ | perms::CREATE, "world", "anyone"),
            Acl::new(perms::ALL, "auth", ""),
        ],
        3 => vec![
            Acl::new(perms::ALL & !perms::DELETE, "world", "anyone"),
            Acl::new(perms::ALL, "auth", ""),
        ],
        4 => Vec::new(), // no entries: InvalidACL
        // Read-only for everyone, and no ADMIN to undo it: only where nothing can be created
        // below afterwards (a create), so that the clean-up can still delete it.
        5 if for_create => vec![Acl::new(perms::READ, "world", "anyone")],
        _ => Acl::open(),
    }
}

fn create(rng: &mut Rng) -> Request {
    let path = create_path(rng);
    let data = data(rng);
    let acl = acl(rng, true);
    match rng.below(12) {
        0..=3 => Request::Create(CreateRequest {
            path,
            data,
            acl,
            flags: rng.pick(&[0, 0, 1, 2, 3, 4]),
        }),
        4..=7 => Request::Create2(CreateRequest {
            path,
            data,
            acl,
            flags: rng.pick(&[0, 1, 2, 3]),
        }),
        8..=10 => Request::CreateContainer(CreateRequest {
            path,
            data,
            acl,
            flags: create_mode::CONTAINER,
        }),
        _ => Request::CreateTtl(CreateTtlRequest {
            path,
            data,
            acl,
            flags: rng.pick(&[
                create_mode::PERSISTENT_WITH_TTL,
                create_mode::PERSISTENT_SEQUENTIAL_WITH_TTL,
            ]),
            ttl: rng.pick(&[1, 60_000]),
        }),
    }
}

fn multi_write_op(rng: &mut Rng) -> MultiOp {
    match rng.below(10) {
        0..=3 => match create(rng) {
            Request::Create(r) => MultiOp::Create(r),
            Request::Create2(r) => MultiOp::Create2(r),
            Request::CreateContainer(r) => MultiOp::CreateContainer(r),
            Request::CreateTtl(r) => MultiOp::CreateTtl(r),
            _ => unreachable!("create() makes creates"),
        },
        4..=5 => MultiOp::Delete(DeleteRequest {
            path: path(rng),
            version: version(rng),
        }),
        6..=7 => MultiOp::SetData(SetDataRequest {
            path: path(rng),
            data: data(rng),
            version: version(rng),
        }),
        _ => MultiOp::Check(CheckVersionRequest {
            path: path(rng),
            version: version(rng),
        }),
    }
}

fn multi_read_op(rng: &mut Rng) -> MultiOp {
    let r = PathWatchRequest {
        path: path(rng),
        watch: false,
    };
    if rng.chance(50) {
        MultiOp::GetData(r)
    } else {
        MultiOp::GetChildren(r)
    }
}

/// Every `WatcherType` a checkWatches or removeWatches may name.
const WATCHER_TYPES: &[i32] = &[
    watcher_type::CHILDREN,
    watcher_type::DATA,
    watcher_type::ANY,
    watcher_type::PERSISTENT,
    watcher_type::PERSISTENT_RECURSIVE,
];

/// A persistent or recursive watch, then a checkWatches or removeWatches of some type on the
/// same path and session: which types match which modes is only seen on a watch just set.
fn watch_then_look(rng: &mut Rng) -> [Request; 2] {
    let path = path(rng);
    let add = Request::AddWatch(AddWatchRequest {
        path: path.clone(),
        mode: rng.pick(&[
            add_watch_mode::PERSISTENT,
            add_watch_mode::PERSISTENT_RECURSIVE,
        ]),
    });
    let look = WatchesRequest {
        path,
        kind: rng.pick(WATCHER_TYPES),
    };
    let look = if rng.chance(50) {
        Request::CheckWatches(look)
    } else {
        Request::RemoveWatches(look)
    };
    [add, look]
}

fn request(rng: &mut Rng) -> Request {
    let watch = rng.chance(60);
    match rng.below(100) {
        0..=21 => create(rng),
        22..=29 => Request::Delete(DeleteRequest {
            path: path(rng),
            version: version(rng),
        }),
        30..=37 => Request::SetData(SetDataRequest {
            path: path(rng),
            data: data(rng),
            version: version(rng),
        }),
        38..=42 => Request::Exists(PathWatchRequest {
            path: path(rng),
            watch,
        }),
        43..=48 => Request::GetData(PathWatchRequest {
            path: path(rng),
            watch,
        }),
        49..=52 => Request::GetChildren(PathWatchRequest {
            path: path(rng),
            watch,
        }),
        53..=57 => Request::GetChildren2(PathWatchRequest {
            path: path(rng),
            watch,
        }),
        58..=65 => Request::Multi((0..1 + rng.below(4)).map(|_| multi_write_op(rng)).collect()),
        66..=68 => Request::MultiRead((0..1 + rng.below(3)).map(|_| multi_read_op(rng)).collect()),
        69..=71 => Request::GetAcl(PathRequest { path: path(rng) }),
        72..=74 => Request::SetAcl(SetAclRequest {
            path: path(rng),
            acl: acl(rng, false),
            version: version(rng),
        }),
        75..=76 => Request::Sync(PathRequest { path: path(rng) }),
        77..=83 => Request::AddWatch(AddWatchRequest {
            path: path(rng),
            mode: rng.pick(&[
                add_watch_mode::PERSISTENT,
                add_watch_mode::PERSISTENT_RECURSIVE,
            ]),
        }),
        84..=86 => Request::RemoveWatches(WatchesRequest {
            path: path(rng),
            kind: rng.pick(WATCHER_TYPES),
        }),
        87..=88 => Request::CheckWatches(WatchesRequest {
            path: path(rng),
            kind: rng.pick(WATCHER_TYPES),
        }),
        89..=90 => Request::GetAllChildrenNumber(PathRequest { path: path(rng) }),
        91..=92 => Request::GetEphemerals(PathRequest { path: path(rng) }),
        93..=94 => Request::WhoAmI,
        95..=96 => Request::DeleteContainer(PathRequest { path: path(rng) }),
        _ => Request::Check(CheckVersionRequest {
            path: path(rng),
            version: version(rng),
        }),
    }
}

/// The sequence of `seed`: 15 to 60 steps over up to [`SLOTS`] sessions.
pub fn sequence(seed: u64) -> Vec<Step> {
    let mut rng = Rng::new(seed);
    let len = 15 + rng.below(46);
    // Half the sequences have a session watch everything from the start.
    let everything = rng.chance(50).then(|| Step {
        slot: rng.below(SLOTS),
        action: Action::Request(Request::AddWatch(AddWatchRequest {
            path: String::new(),
            mode: add_watch_mode::PERSISTENT_RECURSIVE,
        })),
    });
    everything
        .into_iter()
        .chain((0..len).flat_map(|_| {
            let slot = rng.below(SLOTS);
            let step = |action| Step { slot, action };
            let action = match rng.below(100) {
                0..=4 => {
                    return watch_then_look(&mut rng)
                        .map(|r| step(Action::Request(r)))
                        .to_vec()
                }
                5..=10 => Action::AddAuth(rng.below(USERS.len())),
                11..=13 => Action::Close,
                14..=16 => Action::Reconnect(rng.chance(70).then(|| {
                    let paths = |rng: &mut Rng| -> Vec<String> {
                        (0..rng.below(3)).map(|_| path(rng)).collect()
                    };
                    SetWatches2 {
                        relative_zxid: 0, // the session's last zxid, filled in when sent
                        data_watches: paths(&mut rng),
                        exist_watches: paths(&mut rng),
                        child_watches: paths(&mut rng),
                        persistent_watches: paths(&mut rng),
                        persistent_recursive_watches: paths(&mut rng),
                    }
                })),
                _ => Action::Request(request(&mut rng)),
            };
            vec![step(action)]
        }))
        .collect()
}

/// Rewrites every path of `request` with `f`.
pub fn map_paths(request: &mut Request, f: &mut impl FnMut(&str) -> String) {
    fn op(o: &mut MultiOp, f: &mut impl FnMut(&str) -> String) {
        let p = match o {
            MultiOp::Create(r) | MultiOp::Create2(r) | MultiOp::CreateContainer(r) => &mut r.path,
            MultiOp::CreateTtl(r) => &mut r.path,
            MultiOp::Delete(r) => &mut r.path,
            MultiOp::SetData(r) => &mut r.path,
            MultiOp::Check(r) => &mut r.path,
            MultiOp::GetChildren(r) | MultiOp::GetData(r) => &mut r.path,
        };
        *p = f(p);
    }
    let p = match request {
        Request::Create(r) | Request::Create2(r) | Request::CreateContainer(r) => &mut r.path,
        Request::CreateTtl(r) => &mut r.path,
        Request::Delete(r) => &mut r.path,
        Request::Exists(r)
        | Request::GetData(r)
        | Request::GetChildren(r)
        | Request::GetChildren2(r) => &mut r.path,
        Request::SetData(r) => &mut r.path,
        Request::GetAcl(r)
        | Request::Sync(r)
        | Request::DeleteContainer(r)
        | Request::GetEphemerals(r)
        | Request::GetAllChildrenNumber(r) => &mut r.path,
        Request::SetAcl(r) => &mut r.path,
        Request::Check(r) => &mut r.path,
        Request::AddWatch(r) => &mut r.path,
        Request::CheckWatches(r) | Request::RemoveWatches(r) => &mut r.path,
        Request::Multi(ops) | Request::MultiRead(ops) => {
            for o in ops {
                op(o, f);
            }
            return;
        }
        _ => return,
    };
    *p = f(p);
}
