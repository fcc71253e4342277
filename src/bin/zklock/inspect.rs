//! `zklock status` and `zklock break`.

use std::fmt::Write as _;
use std::io::{BufRead as _, Write as _};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zklock::{Contender, DistributedMutex};

use crate::text::{format_duration, json_string, parse_owner, session_hex};
use crate::{code, open, BreakArgs, Failure, Global, Outcome, StatusArgs};

/// How long ago the server created the node, by the local clock (0 if the clocks disagree).
fn age(contender: &Contender) -> Duration {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    Duration::from_millis(u64::try_from(now_ms - contender.created_ms).unwrap_or(0))
}

fn role(position: usize) -> &'static str {
    if position == 0 {
        "holder"
    } else {
        "waiter"
    }
}

pub fn status(global: &Global, args: &StatusArgs) -> Outcome {
    let (_client, mutex) = open(global, &args.path, None)?;
    let contenders = mutex.contenders()?;
    let out = if args.json {
        status_json(&args.path, &contenders)
    } else {
        status_table(&args.path, &contenders)
    };
    print!("{out}");
    Ok(0)
}

fn status_table(path: &str, contenders: &[Contender]) -> String {
    let mut out = match contenders.len() {
        0 => format!("{path}: free (no holder, no waiters)\n"),
        1 => format!("{path}: held, no waiters\n"),
        n => format!("{path}: held, {} waiting\n", n - 1),
    };
    if contenders.is_empty() {
        return out;
    }
    let rows: Vec<[String; 6]> = contenders
        .iter()
        .enumerate()
        .map(|(i, c)| {
            [
                i.to_string(),
                role(i).to_owned(),
                format_duration(age(c)),
                session_hex(c.session_id),
                c.node_name.clone(),
                c.owner.clone(),
            ]
        })
        .collect();
    let header = ["POS", "ROLE", "AGE", "SESSION", "NODE", "OWNER"];
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

fn status_json(path: &str, contenders: &[Contender]) -> String {
    let items: Vec<String> = contenders
        .iter()
        .enumerate()
        .map(|(i, c)| {
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
                 \"version\":{}}}",
                role(i),
                json_string(&c.node_name),
                c.sequence,
                session_hex(c.session_id),
                json_string(&c.owner),
                c.created_ms,
                age(c).as_millis(),
                c.fencing_token,
                c.version,
            )
        })
        .collect();
    format!(
        "{{\"path\":{},\"contenders\":[{}]}}\n",
        json_string(path),
        items.join(",")
    )
}

pub fn break_lock(global: &Global, args: &BreakArgs) -> Outcome {
    let (_client, mutex) = open(global, &args.path, None)?;
    let contenders = mutex.contenders()?;
    let (position, target) = match &args.node {
        Some(name) => {
            // Accept the full node path too, as people paste it from logs.
            let name = name
                .strip_prefix(&format!("{}/", args.path))
                .unwrap_or(name);
            contenders
                .iter()
                .enumerate()
                .find(|(_, c)| c.node_name == name)
                .ok_or_else(|| {
                    Failure::error(format!(
                        "no node {name:?} under {} (see `zklock status {}`)",
                        args.path, args.path
                    ))
                })?
        }
        None => match contenders.first() {
            Some(holder) => (0, holder),
            None => {
                println!("{}: free (no holder); nothing to break", args.path);
                return Ok(code::NOTHING_DONE);
            }
        },
    };
    println!(
        "will delete {}/{} ({}, session {}, age {}, owner {})",
        args.path,
        target.node_name,
        role(position),
        session_hex(target.session_id),
        format_duration(age(target)),
        if target.owner.is_empty() {
            "unknown"
        } else {
            &target.owner
        },
    );
    if position == 0 && contenders.len() > 1 {
        println!(
            "the next waiter ({}) will acquire the lock",
            contenders[1].owner
        );
    }
    if !args.yes && !confirm()? {
        println!("not deleted");
        return Ok(code::NOTHING_DONE);
    }
    delete(&mutex, target)
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

fn delete(mutex: &DistributedMutex, target: &Contender) -> Outcome {
    let path = format!("{}/{}", mutex.path(), target.node_name);
    // The library logs every broken node as a warning, for programs; we report it on stdout
    // (the warning still shows with -v).
    let level = log::max_level();
    if level <= log::LevelFilter::Warn {
        log::set_max_level(log::LevelFilter::Error);
    }
    let deleted = mutex.break_contender(target);
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
        Err(zklock::Error::ZooKeeper { code: -103, .. }) => {
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
