//! Running one sequence on one server, and its transcript normalised so that two servers'
//! transcripts compare line by line: zxids replaced by their rank among the zxids the
//! transcript shows, session ids by the slot and generation that opened them, times dropped,
//! the sequence's root path by `~`.

use std::collections::{BTreeSet, HashMap};

use zklock_proto::{op, MultiResponse, OpResult, Request, Response, Stat, WatcherEvent};

use super::gen::{self, Action, Step, SLOTS, USERS};
use super::wire::{Event, Reply, Session};

/// One line of a transcript before normalisation.
struct Line {
    step: usize,
    slot: usize,
    what: String,
    outcome: Outcome,
}

enum Outcome {
    /// A session opened: what of the handshake is not configuration (the read-only byte).
    Opened { read_only: Option<bool> },
    /// A reply; `write` says whether its header's zxid is the write's own (and so compared).
    Reply { reply: Reply, write: bool },
    /// A session moved to a new connection: whether the server took it back (a timeout > 0)
    /// as the same session, and the answer to re-arming its watches.
    Moved {
        resumed: bool,
        same_session: bool,
        watches: Option<Reply>,
    },
    /// The server closed the connection instead of answering.
    Lost,
}

/// The sessions of one sequence on one server.
struct Run<'a> {
    addr: &'a str,
    root: &'a str,
    sessions: Vec<Option<Session>>,
    generation: [u32; SLOTS],
    /// Session id -> a stand-in that names the slot and generation that opened it.
    labels: HashMap<i64, i64>,
    /// Sequential nodes created, relative to the root, in the order of their creation.
    sequential: Vec<String>,
    lines: Vec<Line>,
}

/// Whether a reply to `code` carries the write's own zxid in its header (reads carry the
/// server's latest, which other sessions move).
fn is_write(code: i32) -> bool {
    matches!(
        code,
        op::CREATE
            | op::CREATE2
            | op::CREATE_CONTAINER
            | op::CREATE_TTL
            | op::DELETE
            | op::DELETE_CONTAINER
            | op::SET_DATA
            | op::SET_ACL
            | op::MULTI
    )
}

impl Run<'_> {
    fn resolve(&self, template: &str) -> String {
        if template.is_empty() {
            return self.root.to_owned();
        }
        if template == "!" {
            return format!("{}/bad//path", self.root);
        }
        if let Some(rest) = template.strip_prefix('@') {
            let (index, tail) = rest.split_once('/').map_or((rest, ""), |(i, t)| (i, t));
            let index: usize = index.parse().expect("a sequential index");
            let node = if self.sequential.is_empty() {
                "none".to_owned()
            } else {
                self.sequential[index % self.sequential.len()].clone()
            };
            return if tail.is_empty() {
                format!("{}/{node}", self.root)
            } else {
                format!("{}/{node}/{tail}", self.root)
            };
        }
        format!("{}/{template}", self.root)
    }

    fn session(&mut self, step: usize, slot: usize) -> Result<&mut Session, String> {
        if self.sessions[slot].is_none() {
            let session = Session::connect(self.addr).map_err(|e| {
                format!("step {step}: connecting slot {slot} to {}: {e}", self.addr)
            })?;
            let label = 1000 * (slot as i64 + 1) + i64::from(self.generation[slot]);
            self.generation[slot] += 1;
            self.labels.insert(session.id, label);
            self.lines.push(Line {
                step,
                slot,
                what: "connect".to_owned(),
                outcome: Outcome::Opened {
                    read_only: session.connected.read_only,
                },
            });
            self.sessions[slot] = Some(session);
        }
        Ok(self.sessions[slot].as_mut().expect("just opened"))
    }

    /// Learns the names of sequential nodes a reply shows created.
    fn learn(&mut self, body: &Response) {
        let mut paths = Vec::new();
        match body {
            Response::Create(r) => paths.push(r.path.clone()),
            Response::Create2(r) => paths.push(r.path.clone()),
            Response::Multi(MultiResponse { results }) => {
                for r in results {
                    match r {
                        OpResult::Create(p) | OpResult::Create2(p, _) => paths.push(p.clone()),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        let prefix = format!("{}/", self.root);
        for path in paths {
            let name = path.rsplit('/').next().unwrap_or_default();
            let sequential =
                name.len() >= 10 && name[name.len() - 10..].bytes().all(|b| b.is_ascii_digit());
            if let (true, Some(rel)) = (sequential, path.strip_prefix(&prefix)) {
                self.sequential.push(rel.to_owned());
            }
        }
    }

    fn step(&mut self, index: usize, step: &Step) -> Result<(), String> {
        let slot = step.slot;
        let (what, outcome) = match &step.action {
            Action::Request(template) => {
                let mut request = template.clone();
                gen::map_paths(&mut request, &mut |t| self.resolve(t));
                let what = format!("{request:?}");
                let code = request.op();
                let result = self.session(index, slot)?.call(&request);
                match result {
                    Ok(mut reply) => {
                        self.learn(&reply.body);
                        let mut what = what;
                        if reply.header.err == zklock_proto::code::UNIMPLEMENTED {
                            // ZooKeeper closes the connection after this answer, racing the
                            // next request: wait for it here, and go on in a new session.
                            let session = self.sessions[slot].as_mut().expect("just used");
                            let (closed, events) = session.closed_after();
                            reply.events.extend(events);
                            what += if closed {
                                " (then closed)"
                            } else {
                                " (then left open)"
                            };
                            self.sessions[slot] = None;
                        }
                        (
                            what,
                            Outcome::Reply {
                                reply,
                                write: is_write(code),
                            },
                        )
                    }
                    Err(_) => {
                        self.sessions[slot] = None;
                        (what, Outcome::Lost)
                    }
                }
            }
            Action::AddAuth(user) => {
                let (name, password) = USERS[*user];
                let what = format!("addAuth digest {name}");
                let auth = format!("{name}:{password}");
                match self
                    .session(index, slot)?
                    .add_auth("digest", auth.as_bytes())
                {
                    Ok(reply) => (
                        what,
                        Outcome::Reply {
                            reply,
                            write: false,
                        },
                    ),
                    Err(_) => {
                        self.sessions[slot] = None;
                        (what, Outcome::Lost)
                    }
                }
            }
            Action::Reconnect(watches) => {
                let Some(old) = self.sessions[slot].take() else {
                    return Ok(()); // nothing open: nothing to move
                };
                let mut moved = old
                    .reconnect(self.addr)
                    .map_err(|e| format!("step {index}: reconnecting slot {slot}: {e}"))?;
                let same_session = moved.connected.session_id == old.id;
                drop(old);
                let resumed = moved.connected.timeout > 0;
                let mut replies = None;
                if resumed {
                    if let Some(watches) = watches {
                        let mut request = watches.clone();
                        request.relative_zxid = moved.last_zxid;
                        for list in [
                            &mut request.data_watches,
                            &mut request.exist_watches,
                            &mut request.child_watches,
                            &mut request.persistent_watches,
                            &mut request.persistent_recursive_watches,
                        ] {
                            for p in list.iter_mut() {
                                *p = self.resolve(p);
                            }
                        }
                        replies = moved.set_watches(&request).ok();
                    }
                    self.sessions[slot] = Some(moved);
                }
                let what = match watches {
                    Some(w) => format!("reconnect, then {w:?}"),
                    None => "reconnect".to_owned(),
                };
                (
                    what,
                    Outcome::Moved {
                        resumed,
                        same_session,
                        watches: replies,
                    },
                )
            }
            Action::Close => {
                let Some(session) = self.sessions[slot].as_mut() else {
                    return Ok(()); // nothing open: nothing to close
                };
                let outcome = match session.call(&Request::CloseSession) {
                    Ok(reply) => Outcome::Reply {
                        reply,
                        write: false,
                    },
                    Err(_) => Outcome::Lost,
                };
                self.sessions[slot] = None;
                ("closeSession".to_owned(), outcome)
            }
        };
        self.lines.push(Line {
            step: index,
            slot,
            what,
            outcome,
        });
        Ok(())
    }

    /// Collects what is still queued for each session (a ping each), then closes them in slot
    /// order, so that the events each close causes reach the sessions after it.
    fn finish(&mut self, index: usize) {
        for slot in 0..SLOTS {
            if let Some(session) = self.sessions[slot].as_mut() {
                let outcome = match session.ping() {
                    Ok(reply) => Outcome::Reply {
                        reply,
                        write: false,
                    },
                    Err(_) => Outcome::Lost,
                };
                self.lines.push(Line {
                    step: index,
                    slot,
                    what: "ping".to_owned(),
                    outcome,
                });
            }
        }
        for slot in 0..SLOTS {
            let step = Step {
                slot,
                action: Action::Close,
            };
            let _ = self.step(index + 1, &step);
        }
    }
}

/// Deletes `root` and everything below it, as a session authenticated as every user (nodes
/// whose ACL gives only their creator ADMIN or DELETE are opened first).
pub fn clean(addr: &str, root: &str) -> Result<(), String> {
    let mut session = Session::connect(addr).map_err(|e| format!("clean-up session: {e}"))?;
    for (name, password) in USERS {
        session
            .add_auth("digest", format!("{name}:{password}").as_bytes())
            .map_err(|e| format!("clean-up auth: {e}"))?;
    }
    delete_tree(&mut session, root)?;
    let _ = session.call(&Request::CloseSession);
    Ok(())
}

fn delete_tree(session: &mut Session, path: &str) -> Result<(), String> {
    let io = |e: std::io::Error| format!("clean-up of {path}: {e}");
    // Open the node first: deleting its children needs its DELETE permission.
    session
        .call(&Request::SetAcl(zklock_proto::SetAclRequest {
            path: path.to_owned(),
            acl: zklock_proto::Acl::open(),
            version: -1,
        }))
        .map_err(io)?;
    let listing = session
        .call(&Request::GetChildren(zklock_proto::PathWatchRequest {
            path: path.to_owned(),
            watch: false,
        }))
        .map_err(io)?;
    if let Response::GetChildren(children) = listing.body {
        for child in children.children {
            delete_tree(session, &format!("{path}/{child}"))?;
        }
    }
    let deleted = session
        .call(&Request::Delete(zklock_proto::DeleteRequest {
            path: path.to_owned(),
            version: -1,
        }))
        .map_err(io)?;
    match deleted.header.err {
        0 | zklock_proto::code::NO_NODE => Ok(()),
        err => Err(format!("clean-up could not delete {path}: error {err}")),
    }
}

/// Creates the persistent node `path` (open ACL) if it is missing.
pub fn ensure_node(addr: &str, path: &str) -> Result<(), String> {
    let mut session = Session::connect(addr).map_err(|e| format!("set-up session: {e}"))?;
    let reply = session
        .call(&Request::Create(zklock_proto::CreateRequest {
            path: path.to_owned(),
            data: Vec::new(),
            acl: zklock_proto::Acl::open(),
            flags: 0,
        }))
        .map_err(|e| format!("creating {path}: {e}"))?;
    let _ = session.call(&Request::CloseSession);
    match reply.header.err {
        0 | zklock_proto::code::NODE_EXISTS => Ok(()),
        err => Err(format!("creating {path}: error {err}")),
    }
}

/// Runs `steps` on the server at `addr` in the fresh root `root` (created here, deleted after)
/// and returns the normalised transcript.
pub fn run(addr: &str, root: &str, steps: &[Step]) -> Result<Vec<String>, String> {
    let mut run = Run {
        addr,
        root,
        sessions: (0..SLOTS).map(|_| None).collect(),
        generation: [0; SLOTS],
        labels: HashMap::new(),
        sequential: Vec::new(),
        lines: Vec::new(),
    };
    // The root is made by the first session, so its create is part of the transcript.
    let make_root = Step {
        slot: 0,
        action: Action::Request(Request::Create(zklock_proto::CreateRequest {
            path: String::new(),
            data: Vec::new(),
            acl: zklock_proto::Acl::open(),
            flags: 0,
        })),
    };
    let outcome = (|| {
        run.step(0, &make_root)?;
        for (i, step) in steps.iter().enumerate() {
            run.step(i + 1, step)?;
        }
        run.finish(steps.len() + 1);
        Ok::<(), String>(())
    })();
    let cleaned = clean(addr, root);
    outcome?;
    cleaned?;
    Ok(normalise(&run.lines, &run.labels, root))
}

fn stat_zxids(stat: &Stat, out: &mut Vec<i64>) {
    out.extend([stat.czxid, stat.mzxid, stat.pzxid]);
}

fn body_stats(body: &Response) -> Vec<&Stat> {
    match body {
        Response::Create2(r) => vec![&r.stat],
        Response::Stat(r) => vec![&r.stat],
        Response::GetData(r) => vec![&r.stat],
        Response::GetAcl(r) => vec![&r.stat],
        Response::GetChildren2(r) => vec![&r.stat],
        Response::Multi(m) => m
            .results
            .iter()
            .filter_map(|r| match r {
                OpResult::Create2(_, s) | OpResult::SetData(s) | OpResult::GetData(_, s) => Some(s),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn body_stats_mut(body: &mut Response, f: &mut impl FnMut(&mut Stat)) {
    match body {
        Response::Create2(r) => f(&mut r.stat),
        Response::Stat(r) => f(&mut r.stat),
        Response::GetData(r) => f(&mut r.stat),
        Response::GetAcl(r) => f(&mut r.stat),
        Response::GetChildren2(r) => f(&mut r.stat),
        Response::Multi(m) => {
            for r in &mut m.results {
                if let OpResult::Create2(_, s) | OpResult::SetData(s) | OpResult::GetData(_, s) = r
                {
                    f(s);
                }
            }
        }
        _ => {}
    }
}

/// Sorts the lists ZooKeeper promises no order for: children ("not sorted and no guarantee
/// ... as to its natural or lexical order"), a session's ephemerals and identities, and ACL
/// entries (a set: an `auth` entry expands to the session's identities in its set's order). Apache's
/// order is that of a Java hash set, a property of Java's hash functions, not of the protocol.
fn unordered_sorted(body: &mut Response) {
    match body {
        Response::GetChildren(r) => r.children.sort(),
        Response::GetChildren2(r) => r.children.sort(),
        Response::GetEphemerals(r) => r.ephemerals.sort(),
        // An `auth` entry expands to every identity of the session, in the order of its set.
        Response::GetAcl(r) => r.acl.sort_by(|a, b| {
            (&a.id.scheme, &a.id.id, a.perms).cmp(&(&b.id.scheme, &b.id.id, b.perms))
        }),
        Response::WhoAmI(r) => r
            .client_info
            .sort_by(|a, b| (&a.auth_scheme, &a.user).cmp(&(&b.auth_scheme, &b.user))),
        Response::Multi(m) => {
            for r in &mut m.results {
                if let OpResult::GetChildren(children) = r {
                    children.sort();
                }
            }
        }
        _ => {}
    }
}

/// The transcript as text, one line per request, with zxids ranked, sessions labelled, times
/// dropped and the root written `~`.
fn normalise(lines: &[Line], labels: &HashMap<i64, i64>, root: &str) -> Vec<String> {
    let mut zxids = Vec::new();
    for line in lines {
        if let Outcome::Reply { reply, write } = &line.outcome {
            if *write {
                zxids.push(reply.header.zxid);
            }
            for stat in body_stats(&reply.body) {
                stat_zxids(stat, &mut zxids);
            }
            zxids.extend(reply.events.iter().map(|e| e.zxid));
        }
    }
    let ranks: HashMap<i64, usize> = zxids
        .into_iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .enumerate()
        .map(|(rank, zxid)| (zxid, rank + 1))
        .collect();
    let rank = |z: i64| ranks.get(&z).map_or(-1, |r| *r as i64);
    // A closed session's ephemerals go in one transaction, in the order of a hash set: the
    // events one zxid of a closeSession causes are compared as a set (sorted).
    let closes: BTreeSet<i64> = lines
        .iter()
        .filter(|l| l.what == "closeSession")
        .filter_map(|l| match &l.outcome {
            Outcome::Reply { reply, .. } => Some(reply.header.zxid),
            _ => None,
        })
        .collect();
    lines
        .iter()
        .map(|line| {
            let outcome = match &line.outcome {
                Outcome::Opened { read_only } => format!("opened, readOnly {read_only:?}"),
                Outcome::Moved {
                    resumed,
                    same_session,
                    watches,
                } => {
                    // The events re-armed watches fire at once carry no zxid of the sequence's
                    // own (Apache: -1); their order is the server's walk of its watch lists.
                    let mut events: Vec<String> = watches
                        .iter()
                        .flat_map(|r| &r.events)
                        .map(|e| format!("event(type {}, {})", e.event.kind, e.event.path))
                        .collect();
                    events.sort();
                    let answer = watches
                        .as_ref()
                        .map(|r| format!("err {} {:?}", r.header.err, r.body));
                    format!(
                        "resumed {resumed}, same session {same_session}, setWatches2 {answer:?} {events:?}"
                    )
                }
                Outcome::Lost => "connection closed by the server".to_owned(),
                Outcome::Reply { reply, write } => {
                    let mut body = reply.body.clone();
                    unordered_sorted(&mut body);
                    body_stats_mut(&mut body, &mut |s| {
                        s.czxid = rank(s.czxid);
                        s.mzxid = rank(s.mzxid);
                        s.pzxid = rank(s.pzxid);
                        s.ctime = 0;
                        s.mtime = 0;
                        if s.ephemeral_owner != 0 {
                            s.ephemeral_owner =
                                labels.get(&s.ephemeral_owner).copied().unwrap_or(-1);
                        }
                    });
                    let mut events = reply.events.clone();
                    for group in events.chunk_by_mut(|a, b| a.zxid == b.zxid) {
                        if closes.contains(&group[0].zxid) {
                            group.sort_by(|a, b| {
                                (a.event.kind, &a.event.path).cmp(&(b.event.kind, &b.event.path))
                            });
                        }
                    }
                    let events: Vec<String> = events
                        .iter()
                        .map(|Event { zxid, event }| {
                            let WatcherEvent { kind, state, path } = event;
                            format!(
                                "event(type {kind}, state {state}, {path}, zxid #{})",
                                rank(*zxid)
                            )
                        })
                        .collect();
                    let zxid = if *write {
                        format!("#{}", rank(reply.header.zxid))
                    } else {
                        "-".to_owned()
                    };
                    format!("{events:?} err {} zxid {zxid} {body:?}", reply.header.err)
                }
            };
            format!("#{} s{} {} => {outcome}", line.step, line.slot, line.what).replace(root, "~")
        })
        .collect()
}
