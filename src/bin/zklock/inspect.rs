//! `zklock status`, `zklock break` and `zklock revoke`, for every layout the library makes:
//! mutex, read/write lock, semaphore and leader election.

use std::fmt::Write as _;
use std::io::{BufRead as _, Write as _};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zklock::{
    Client, Contender, DistributedMutex, DistributedRwLock, LeaderElection, Role, Semaphore,
};

use crate::text::{format_duration, json_string, parse_owner, session_hex};
use crate::{code, BreakArgs, Failure, Global, Outcome, RevokeArgs, StatusArgs};

/// The recipe whose nodes are under a lock path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    Mutex,
    RwLock,
    Semaphore,
    Election,
}

impl Layout {
    fn name(self) -> &'static str {
        match self {
            Layout::Mutex => "mutex",
            Layout::RwLock => "rwlock",
            Layout::Semaphore => "semaphore",
            Layout::Election => "election",
        }
    }
}

/// One node of a lock, as shown.
struct Entry {
    contender: Contender,
    /// The node's name relative to the lock path: the node name, or `leases/NAME` and
    /// `locks/NAME` in a semaphore.
    name: String,
    /// The node's parent: the lock path, or the semaphore's `leases` or `locks` child.
    parent: String,
    /// exclusive, read, write, lease, queued (a semaphore's lease taker) or participant.
    kind: &'static str,
    /// Whether it holds the lock (leads, holds a lease); `None` if that cannot be told.
    holds: Option<bool>,
}

impl Entry {
    fn role(&self) -> &'static str {
        match self.holds {
            Some(true) => "holder",
            Some(false) => "waiter",
            None => "unknown",
        }
    }

    fn full_path(&self) -> String {
        format!("{}/{}", self.parent, self.contender.node_name)
    }

    fn owner(&self) -> &str {
        if self.contender.owner.is_empty() {
            "unknown"
        } else {
            &self.contender.owner
        }
    }
}

/// A lock path's nodes, in queue order (a semaphore's leases, then its queued lease takers).
struct View {
    path: String,
    /// `None`: nothing under the path.
    layout: Option<Layout>,
    permits: Option<u32>,
    entries: Vec<Entry>,
}

impl View {
    fn holders(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(|e| e.holds == Some(true))
    }

    fn waiting(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| e.holds == Some(false))
            .count()
    }

    /// The entry called `name` (as `status` shows it, a bare node name, or a full path).
    fn find(&self, name: &str) -> Result<(usize, &Entry), Failure> {
        let name = name
            .strip_prefix(&format!("{}/", self.path))
            .unwrap_or(name);
        self.entries
            .iter()
            .enumerate()
            .find(|(_, e)| e.name == name || e.contender.node_name == name)
            .ok_or_else(|| {
                Failure::error(format!(
                    "no node {name:?} under {} (see `zklock status {}`)",
                    self.path, self.path
                ))
            })
    }
}

/// The type of a semaphore's lease nodes.
const LEASE: &str = "lease";

fn kind(role: Role) -> &'static str {
    match role {
        Role::Exclusive => "exclusive",
        Role::Read => "read",
        Role::Write => "write",
        Role::Lease => LEASE,
        Role::Participant => "participant",
        _ => "other",
    }
}

/// Which nodes of a read/write lock's queue hold it: the leading writer, or the readers before
/// the first writer.
fn rwlock_holds(roles: &[Role]) -> Vec<bool> {
    match roles.first() {
        Some(Role::Write) => (0..roles.len()).map(|i| i == 0).collect(),
        _ => {
            let readers = roles.iter().take_while(|r| **r != Role::Write).count();
            (0..roles.len()).map(|i| i < readers).collect()
        }
    }
}

/// Reads the nodes under `path` and tells the layout from them.
fn look(client: &Client, path: &str, permits: Option<u32>) -> Result<View, Failure> {
    let entries = |contenders: Vec<Contender>, parent: &str, holds: &dyn Fn(usize) -> bool| {
        contenders
            .into_iter()
            .enumerate()
            .map(|(i, c)| Entry {
                name: c.node_name.clone(),
                parent: parent.to_owned(),
                kind: kind(c.role),
                holds: Some(holds(i)),
                contender: c,
            })
            .collect::<Vec<_>>()
    };
    let view = |layout, entries| View {
        path: path.to_owned(),
        layout,
        permits,
        entries,
    };
    // Making the recipes checks the path; nothing is sent until they are asked.
    let contenders = DistributedMutex::new(client, path)?.contenders()?;
    if !contenders.is_empty() {
        return Ok(view(
            Some(Layout::Mutex),
            entries(contenders, path, &|i| i == 0),
        ));
    }
    let contenders = DistributedRwLock::new(client, path)?.contenders()?;
    if !contenders.is_empty() {
        let roles: Vec<Role> = contenders.iter().map(|c| c.role).collect();
        let holds = rwlock_holds(&roles);
        return Ok(view(
            Some(Layout::RwLock),
            entries(contenders, path, &|i| holds[i]),
        ));
    }
    let contenders = LeaderElection::new(client, path)?.participants()?;
    if !contenders.is_empty() {
        return Ok(view(
            Some(Layout::Election),
            entries(contenders, path, &|i| i == 0),
        ));
    }
    let (leases_path, locks_path) = (format!("{path}/leases"), format!("{path}/locks"));
    if client.get_data(&leases_path)?.is_none() && client.get_data(&locks_path)?.is_none() {
        return Ok(view(None, Vec::new()));
    }
    // The permits only matter for telling held leases from the one waited for.
    let semaphore = Semaphore::new(client, path, permits.map_or(1, |p| p as usize))?;
    let mut all: Vec<Entry> = semaphore
        .leases()?
        .into_iter()
        .enumerate()
        .map(|(i, c)| Entry {
            name: format!("leases/{}", c.node_name),
            parent: leases_path.clone(),
            kind: kind(c.role),
            holds: permits.map(|p| i < p as usize),
            contender: c,
        })
        .collect();
    // Lease takers queue on the semaphore's internal mutex; the first of them holds that
    // mutex while it waits for a lease.
    let queued = DistributedMutex::new(client, &locks_path)?.contenders()?;
    all.extend(queued.into_iter().map(|c| Entry {
        name: format!("locks/{}", c.node_name),
        parent: locks_path.clone(),
        kind: "queued",
        holds: Some(false),
        contender: c,
    }));
    Ok(view(Some(Layout::Semaphore), all))
}

/// How long ago the server created the node, by the local clock (0 if the clocks disagree).
fn age(contender: &Contender) -> Duration {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    Duration::from_millis(u64::try_from(now_ms - contender.created_ms).unwrap_or(0))
}

pub fn status(global: &Global, args: &StatusArgs) -> Outcome {
    let client = global.connect(None)?;
    let view = look(&client, &args.path, args.permits)?;
    let out = if args.json {
        status_json(&view)
    } else {
        status_table(&view)
    };
    print!("{out}");
    Ok(0)
}

fn waiting(n: usize) -> String {
    match n {
        0 => "no waiters".into(),
        n => format!("{n} waiting"),
    }
}

/// The first line of `status`: the lock in a few words.
fn summary(view: &View) -> String {
    let path = &view.path;
    let holders: Vec<&Entry> = view.holders().collect();
    let waiters = waiting(view.waiting());
    match view.layout {
        None => format!("{path}: free (no holder, no waiters)"),
        Some(_) if view.entries.is_empty() => {
            format!("{path}: free (no holder, no waiters)")
        }
        Some(Layout::Mutex) => format!("{path}: held, {waiters}"),
        Some(Layout::RwLock) => match holders.as_slice() {
            [writer] if writer.kind == "write" => {
                format!("{path}: read/write lock, held by a writer, {waiters}")
            }
            [_] => format!("{path}: read/write lock, held by 1 reader, {waiters}"),
            readers => format!(
                "{path}: read/write lock, held by {} readers, {waiters}",
                readers.len()
            ),
        },
        Some(Layout::Election) => {
            format!(
                "{path}: leader election, led by {}, {waiters}",
                holders[0].owner()
            )
        }
        Some(Layout::Semaphore) => match view.permits {
            Some(permits) => format!(
                "{path}: semaphore, {} of {permits} permits held, {waiters}",
                holders.len()
            ),
            None => {
                let leases = view.entries.iter().filter(|e| e.holds.is_none()).count();
                format!(
                    "{path}: semaphore, {leases} lease{} held or waited for (give --permits N to \
                     tell), {} queued",
                    if leases == 1 { "" } else { "s" },
                    view.waiting()
                )
            }
        },
    }
}

fn status_table(view: &View) -> String {
    let mut out = summary(view);
    out.push('\n');
    if view.entries.is_empty() {
        return out;
    }
    let rows: Vec<[String; 7]> = view
        .entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            [
                i.to_string(),
                e.role().to_owned(),
                e.kind.to_owned(),
                format_duration(age(&e.contender)),
                session_hex(e.contender.session_id),
                e.name.clone(),
                e.contender.owner.clone(),
            ]
        })
        .collect();
    let header = ["POS", "ROLE", "TYPE", "AGE", "SESSION", "NODE", "OWNER"];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in std::iter::once(header.map(str::to_owned)).chain(rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}  ", w = widths[i]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn status_json(view: &View) -> String {
    let items: Vec<String> = view
        .entries
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let c = &e.contender;
            let owner = parse_owner(&c.owner);
            let (host, pid, thread) = match &owner {
                Some(o) => (
                    json_string(o.host),
                    o.pid.to_string(),
                    json_string(o.thread),
                ),
                None => ("null".into(), "null".into(), "null".into()),
            };
            format!(
                "{{\"position\":{i},\"role\":\"{}\",\"node\":{},\"sequence\":{},\
                 \"session_id\":\"{}\",\"owner\":{},\"host\":{host},\"pid\":{pid},\
                 \"thread\":{thread},\"created_ms\":{},\"age_ms\":{},\"fencing_token\":{},\
                 \"version\":{},\"type\":\"{}\",\"holds\":{}}}",
                e.role(),
                json_string(&e.name),
                c.sequence,
                session_hex(c.session_id),
                json_string(&c.owner),
                c.created_ms,
                age(c).as_millis(),
                c.fencing_token,
                c.version,
                e.kind,
                e.holds.map_or("null".into(), |h| h.to_string()),
            )
        })
        .collect();
    format!(
        "{{\"path\":{},\"contenders\":[{}],\"layout\":{},\"permits\":{}}}\n",
        json_string(&view.path),
        items.join(","),
        view.layout
            .map_or("null".into(), |l| format!("\"{}\"", l.name())),
        view.permits.map_or("null".into(), |p| p.to_string()),
    )
}

/// The holder to act on when no --node is given; `Ok(None)` if nothing holds.
fn sole_holder<'v>(view: &'v View, verb: &str) -> Result<Option<(usize, &'v Entry)>, Failure> {
    // A semaphore without --permits: every lease may hold.
    let candidates: Vec<(usize, &Entry)> = view
        .entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.holds != Some(false))
        .collect();
    match candidates.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(*one)),
        many => Err(Failure::error(format!(
            "{} has {} holders; name the node to {verb} with --node NAME (see `zklock status {}`)",
            view.path,
            many.len(),
            view.path
        ))),
    }
}

pub fn break_lock(global: &Global, args: &BreakArgs) -> Outcome {
    let client = global.connect(None)?;
    let view = look(&client, &args.path, None)?;
    let (position, target) = match &args.node {
        Some(name) => view.find(name)?,
        None => match sole_holder(&view, "delete")? {
            Some(holder) => holder,
            None => {
                println!("{}: free (no holder); nothing to break", args.path);
                return Ok(code::NOTHING_DONE);
            }
        },
    };
    println!(
        "will delete {} ({}, {}, session {}, age {}, owner {})",
        target.full_path(),
        target.role(),
        target.kind,
        session_hex(target.contender.session_id),
        format_duration(age(&target.contender)),
        target.owner(),
    );
    if target.holds == Some(true) {
        if let Some(next) = view.entries.get(position + 1) {
            match view.layout {
                Some(Layout::Mutex) => {
                    println!("the next waiter ({}) will acquire the lock", next.owner());
                }
                Some(Layout::Election) => {
                    println!("the next participant ({}) will lead", next.owner());
                }
                _ => {}
            }
        }
    }
    if !args.yes && !confirm()? {
        println!("not deleted");
        return Ok(code::NOTHING_DONE);
    }
    delete(&client, &view, target)
}

/// Asks on stderr, reads the answer from stdin; anything but y/yes (or end of input) is no.
fn confirm() -> Result<bool, Failure> {
    eprint!("delete it? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Failure::error(format!("reading the answer: {e}")))?;
    Ok(matches!(
        answer.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}

fn delete(client: &Client, view: &View, target: &Entry) -> Outcome {
    let path = target.full_path();
    // The library logs every broken node as a warning, for programs; we report it on stdout
    // (the warning still shows with -v).
    let level = log::max_level();
    if level <= log::LevelFilter::Warn {
        log::set_max_level(log::LevelFilter::Error);
    }
    let node = &target.contender;
    let deleted = match view.layout {
        Some(Layout::RwLock) => DistributedRwLock::new(client, &view.path)?.break_contender(node),
        Some(Layout::Election) => LeaderElection::new(client, &view.path)?.break_participant(node),
        // The permits do not matter for breaking a lease.
        Some(Layout::Semaphore) if target.kind == LEASE => {
            Semaphore::new(client, &view.path, 1)?.break_lease(node)
        }
        // A queued lease taker's node is in the semaphore's internal mutex at `<path>/locks`:
        // a real mutex, broken as one.
        _ => DistributedMutex::new(client, &target.parent)?.break_contender(node),
    };
    log::set_max_level(level);
    match deleted {
        Ok(true) => {
            println!("deleted {path}");
            Ok(0)
        }
        Ok(false) => {
            println!("{path} is already gone; nothing deleted");
            Ok(code::NOTHING_DONE)
        }
        Err(zklock::Error::NodeChanged { .. }) => {
            println!(
                "{path} changed since it was shown; not deleted (look again with `zklock status`)"
            );
            Ok(code::NOTHING_DONE)
        }
        Err(zklock::Error::NoAuth { .. }) => Err(Failure::error(format!(
            "not allowed to delete {path}: the lock's ACL admits only the identity that \
             created it (connect as that identity with --auth-digest, or wait for its session \
             to end)"
        ))),
        Err(err) => Err(err.into()),
    }
}

pub fn revoke(global: &Global, args: &RevokeArgs) -> Outcome {
    let client = global.connect(None)?;
    let view = look(&client, &args.path, None)?;
    match view.layout {
        Some(Layout::Semaphore) => {
            return Err(Failure::error(format!(
                "{} is a semaphore: leases have no revocation protocol (`zklock break --node` \
                 frees one)",
                args.path
            )))
        }
        Some(Layout::Election) => {
            return Err(Failure::error(format!(
                "{} is a leader election: leaders have no revocation protocol (`zklock break` \
                 makes the next participant lead)",
                args.path
            )))
        }
        _ => {}
    }
    let targets: Vec<&Entry> = match &args.node {
        Some(name) => vec![view.find(name)?.1],
        // Every holder: all the readers of a read lock.
        None => view.holders().collect(),
    };
    if targets.is_empty() {
        println!("{}: free (no holder); nothing to revoke", args.path);
        return Ok(code::NOTHING_DONE);
    }
    let rwlock = match view.layout {
        Some(Layout::RwLock) => Some(DistributedRwLock::new(&client, &args.path)?),
        _ => None,
    };
    let mutex = DistributedMutex::new(&client, &args.path)?;
    let mut asked = 0;
    for target in targets {
        let path = target.full_path();
        let requested = match &rwlock {
            Some(rwlock) => rwlock.request_revocation(&target.contender),
            None => mutex.request_revocation(&target.contender),
        };
        match requested {
            Ok(true) => {
                println!(
                    "asked {path} ({}, {}, owner {}) to release",
                    target.role(),
                    target.kind,
                    target.owner()
                );
                asked += 1;
            }
            Ok(false) => println!("{path} is already gone"),
            Err(zklock::Error::NoAuth { .. }) => {
                return Err(Failure::error(format!(
                    "not allowed to write to {path}: the lock's ACL admits only the identity \
                     that created it (connect as that identity with --auth-digest)"
                )))
            }
            Err(err) => return Err(err.into()),
        }
    }
    Ok(if asked > 0 { 0 } else { code::NOTHING_DONE })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rwlock_holders_are_the_leading_readers_or_the_leading_writer() {
        use Role::{Read as R, Write as W};
        assert_eq!(rwlock_holds(&[R, R, W, R]), [true, true, false, false]);
        assert_eq!(rwlock_holds(&[W, R, R]), [true, false, false]);
        assert_eq!(rwlock_holds(&[W, W]), [true, false]);
        assert_eq!(rwlock_holds(&[R]), [true]);
        assert!(rwlock_holds(&[]).is_empty());
    }
}
