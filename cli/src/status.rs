//! `zklock status`: a lock's holders and waiters, or, for a path that is not a lock, the locks
//! under it and the nodes there it could not read.

use std::collections::VecDeque;
use std::fmt::Write as _;

use zklock::inspect::LockKind;
use zklock::Client;

use crate::inspect::{age, look, Entry, View};
use crate::text::{format_duration, json_string, printable, session_hex};
use crate::{code, Global, Outcome, StatusArgs};

/// How far below a path that is not a lock `status` looks for locks: levels, nodes listed, and
/// locks shown.
const SEARCH_DEPTH: usize = 4;
const SEARCH_NODES: usize = 500;
const SEARCH_LOCKS: usize = 100;

pub fn status(global: &Global, args: &StatusArgs) -> Outcome {
    let client = global.connect_existing()?;
    let view = look(&client, &args.path, args.permits)?;
    // A free lock's empty node is swept by the server after a while: no node is a free lock
    // too, unless the caller wants to catch a typo.
    let lock = view.is_lock() || (view.children.is_none() && !args.must_exist);
    let below = match view.children {
        Some(n) if n > 0 && !lock => find_locks(&client, &args.path),
        _ => Below::default(),
    };
    print!(
        "{}",
        if args.json {
            status_json(&view, lock, &below)
        } else if lock {
            status_table(&view)
        } else {
            no_lock_text(&view, &below)
        }
    );
    Ok(if !below.unreadable.is_empty() {
        code::INCOMPLETE
    } else if lock {
        0
    } else {
        code::NOTHING_DONE
    })
}

/// The held or waited-for locks found under a path that is not a lock.
#[derive(Default)]
struct Below {
    locks: Vec<View>,
    /// The search stopped early: at one of its limits, or at an error that ends every read.
    truncated: bool,
    /// The nodes that could not be read, and why: locks, or parents of locks, zklock cannot
    /// tell anything about.
    unreadable: Vec<(String, zklock::Error)>,
}

impl Below {
    /// Lists `path` as unreadable for `err`; `true` if the search must stop there (the error
    /// ends every read), which marks it truncated.
    fn note_unreadable(&mut self, path: String, err: zklock::Error) -> bool {
        let last = ends_every_read(&err);
        self.unreadable.push((path, err));
        self.truncated |= last;
        last
    }
}

/// Whether a node name ends in a ten-digit sequence number, as every lock node's does.
fn is_sequential(name: &str) -> bool {
    name.bytes().rev().take_while(u8::is_ascii_digit).count() >= 10
}

/// Whether no further read can succeed after `err`: the session or the client is gone, or the
/// connection stayed down for a call's whole wait.
fn ends_every_read(err: &zklock::Error) -> bool {
    use zklock::Error;
    matches!(
        err,
        Error::ConnectionLoss { .. }
            | Error::SessionExpired
            | Error::Closed
            | Error::AuthFailed
            | Error::Forked
            | Error::Runtime { .. }
    )
}

/// Looks breadth-first for held or waited-for locks below `root` (itself not a lock), within
/// the search limits. A node that cannot be read (not allowed, a listing too large, the
/// connection lost) is listed as unreadable: it may be a lock, or hold some below it. Once the
/// connection or session is gone, the search stops there.
fn find_locks(client: &Client, root: &str) -> Below {
    let mut below = Below::default();
    let mut queue = VecDeque::from([(root.to_owned(), 0)]);
    let mut listed = 0;
    while let Some((path, depth)) = queue.pop_front() {
        if listed == SEARCH_NODES || below.locks.len() == SEARCH_LOCKS {
            below.truncated = true;
            break;
        }
        listed += 1;
        let mut children = match client.children(&path) {
            Ok(Some(children)) => children,
            // Gone since its parent was listed.
            Ok(None) => continue,
            Err(err) => {
                if below.note_unreadable(path, err) {
                    break;
                }
                continue;
            }
        };
        // The library tells from the names whether a lock may be there; `look` decides.
        if path != root && LockKind::of_children(&children).is_some() {
            match look(client, &path, None) {
                Ok(view) if !view.entries.is_empty() => {
                    below.locks.push(view);
                    continue;
                }
                Ok(_) => {}
                Err(err) => {
                    if below.note_unreadable(path, err) {
                        break;
                    }
                    continue;
                }
            }
        }
        if depth < SEARCH_DEPTH {
            children.sort();
            queue.extend(
                children
                    .into_iter()
                    .filter(|c| !is_sequential(c))
                    .map(|c| (format!("{path}/{c}"), depth + 1)),
            );
        } else if children.iter().any(|c| !is_sequential(c)) {
            below.truncated = true;
        }
    }
    below.locks.sort_by(|a, b| a.path.cmp(&b.path));
    below.unreadable.sort_by(|a, b| a.0.cmp(&b.0));
    below
}

fn no_lock_text(view: &View, below: &Below) -> String {
    let path = &view.path;
    let mut out = match view.children {
        None => format!(
            "no lock at {path}: no such node (a lock nobody has held or waited for in a while \
             leaves none)\n"
        ),
        Some(n) => format!(
            "no lock at {path}: it has {n} child node{} and no lock nodes\n",
            if n == 1 { "" } else { "s" }
        ),
    };
    if view.children.is_some_and(|n| n > 0) {
        // What was not read may be a lock: never claim there is none.
        let unread = !below.unreadable.is_empty();
        if below.locks.is_empty() {
            let _ = writeln!(
                out,
                "no {}lock is held or waited for under it{}",
                if unread { "readable " } else { "" },
                if below.truncated {
                    " (as far as zklock looked)"
                } else {
                    ""
                }
            );
        } else {
            let _ = writeln!(
                out,
                "{}locks held or waited for under it{}:",
                if unread { "readable " } else { "" },
                if below.truncated {
                    " (zklock stopped looking; there may be more)"
                } else {
                    ""
                }
            );
            for lock in &below.locks {
                let _ = writeln!(out, "{}", summary(lock));
            }
        }
        if unread {
            let n = below.unreadable.len();
            let _ = writeln!(
                out,
                "{n} node{} under it could not be read, and may be or hold locks:",
                if n == 1 { "" } else { "s" }
            );
            for (path, err) in &below.unreadable {
                let _ = writeln!(out, "{path}: {}", printable(&err.to_string()));
            }
            if below
                .unreadable
                .iter()
                .any(|(_, err)| matches!(err, zklock::Error::NoAuth { .. }))
            {
                let _ = writeln!(
                    out,
                    "(to read a creator-only lock, connect as an identity its ACL admits, with \
                     --auth-digest or --sasl-user)"
                );
            }
        }
    }
    out
}

fn waiting(n: usize) -> String {
    match n {
        0 => "no waiters".into(),
        n => format!("{n} waiting"),
    }
}

/// The first line of `status`: the lock in a few words.
fn summary(view: &View) -> String {
    if view.layouts.len() > 1 {
        let names: Vec<&str> = view.layouts.iter().map(|l| l.name()).collect();
        return format!(
            "{}: nodes of several recipes ({}): each may think it holds the path; give each \
             recipe a path of its own",
            view.path,
            names.join(", ")
        );
    }
    let path = &view.path;
    let holders: Vec<&Entry> = view.holders().collect();
    let waiters = waiting(view.waiting());
    match view.layout {
        // No --must-exist: a typo looks free too, so say there is no node.
        None if view.children.is_none() => {
            format!("{path}: free (no holder, no waiters; no node at this path)")
        }
        None => format!("{path}: free (no holder, no waiters)"),
        Some(_) if view.entries.is_empty() => {
            format!("{path}: free (no holder, no waiters)")
        }
        Some(LockKind::Mutex) => format!("{path}: held, {waiters}"),
        Some(LockKind::RwLock) => match holders.as_slice() {
            [writer] if writer.kind == "write" => {
                format!("{path}: read/write lock, held by a writer, {waiters}")
            }
            [_] => format!("{path}: read/write lock, held by 1 reader, {waiters}"),
            readers => format!(
                "{path}: read/write lock, held by {} readers, {waiters}",
                readers.len()
            ),
        },
        Some(LockKind::Election) => {
            format!(
                "{path}: leader election, led by {}, {waiters}",
                holders[0].owner()
            )
        }
        Some(LockKind::Semaphore) => match view.permits {
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
        // A recipe this tool does not know yet: its name, and who holds by its own rule.
        Some(kind) => format!("{path}: {kind}, {} holding, {waiters}", holders.len()),
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
                e.standing().to_owned(),
                e.kind.to_owned(),
                format_duration(age(&e.contender)),
                session_hex(e.contender.session_id),
                e.name.clone(),
                printable(&e.contender.owner),
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

/// `status --json`: one object with the same keys whatever the path is (a held or free
/// lock, no node, a parent of locks, several recipes' nodes).
fn status_json(view: &View, lock: bool, below: &Below) -> String {
    let contenders: Vec<String> = view
        .entries
        .iter()
        .enumerate()
        .map(|(i, e)| contender_json(i, e))
        .collect();
    let locks: Vec<String> = below
        .locks
        .iter()
        .map(|lock| {
            format!(
                "{{\"path\":{},\"layout\":{},\"contenders\":{},\"holders\":{},\"waiting\":{}}}",
                json_string(&lock.path),
                layout_json(lock.layout),
                lock.entries.len(),
                lock.holders().count(),
                lock.waiting(),
            )
        })
        .collect();
    let unreadable: Vec<String> = below
        .unreadable
        .iter()
        .map(|(path, err)| {
            format!(
                "{{\"path\":{},\"error\":{}}}",
                json_string(path),
                json_string(&err.to_string())
            )
        })
        .collect();
    let layouts: Vec<String> = view.layouts.iter().map(|l| layout_json(Some(*l))).collect();
    format!(
        "{{\"path\":{},\"exists\":{},\"lock\":{lock},\"held\":{},\"layout\":{},\
         \"layouts\":[{}],\"permits\":{},\"contenders\":[{}],\"locks\":[{}],\
         \"truncated\":{},\"unreadable\":[{}]}}\n",
        json_string(&view.path),
        view.children.is_some(),
        view.held(),
        layout_json(view.layout),
        layouts.join(","),
        view.permits.map_or("null".into(), |p| p.to_string()),
        contenders.join(","),
        locks.join(","),
        below.truncated,
        unreadable.join(","),
    )
}

fn layout_json(layout: Option<LockKind>) -> String {
    layout.map_or("null".into(), |l| format!("\"{}\"", l.name()))
}

fn contender_json(position: usize, e: &Entry) -> String {
    let c = &e.contender;
    let owner = c.owner_info();
    let (host, pid, thread) = match &owner {
        Some(o) => (
            json_string(o.host),
            o.pid.to_string(),
            json_string(o.thread),
        ),
        None => ("null".into(), "null".into(), "null".into()),
    };
    format!(
        "{{\"position\":{position},\"standing\":\"{}\",\"node\":{},\"sequence\":{},\
         \"session_id\":\"{}\",\"owner\":{},\"host\":{host},\"pid\":{pid},\
         \"thread\":{thread},\"created_ms\":{},\"age_ms\":{},\"fencing_token\":{},\
         \"version\":{},\"type\":\"{}\",\"holds\":{}}}",
        e.standing(),
        json_string(&e.name),
        c.sequence,
        session_hex(c.session_id),
        json_string(&c.owner),
        c.created_ms,
        age(c).as_millis(),
        c.zxid,
        c.version,
        e.kind,
        e.holds.map_or("null".into(), |h| h.to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_nodes_are_told_by_their_names() {
        assert!(is_sequential(
            "_c_5e0c2a9d-1f7b-4c55-9a3e-2d6f0e8b7c41-lock-0000000041"
        ));
        assert!(is_sequential("lock-0000000000"));
        assert!(!is_sequential("deploy"));
        assert!(!is_sequential("build-12345"));
    }
}
