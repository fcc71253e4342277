//! A run's history: every fact the checker judges, read from the raw logs of a run
//! (`History::from_dir`), and written to / read back from JSON Lines (`history.jsonl`), one flat
//! object per line with an `"ev"` field naming the event. The page (plot.rs) is drawn from the
//! JSON Lines, and `nemesis check --history FILE` judges them again offline.
//!
//! Times are CLOCK_MONOTONIC nanoseconds, the one clock of every process of the run.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{bail, Context};

#[derive(Debug, Clone, Default)]
pub struct History {
    pub seed: u64,
    pub duration_s: u64,
    /// When the clients were started, and when they were told to stop.
    pub start: u64,
    pub stop: u64,
    pub clients: usize,
    pub session_ms: u64,
    pub bound_ns: u64,
    /// The orchestrator's verdict on the warm-up: (when, every client acquired).
    pub warmup: Option<(u64, bool)>,
    pub faults: Vec<Fault>,
    pub health: Vec<Health>,
    /// The ensemble did not become whole again after a fault: (when, fault, what).
    pub unhealthy: Vec<(u64, usize, String)>,
    pub truncations: Vec<Truncation>,
    pub holds: Vec<Hold>,
    /// Acquisitions that returned without the lock.
    pub attempts: Vec<Attempt>,
    pub client_info: BTreeMap<usize, ClientInfo>,
    /// The registers' final content, read once every client had exited.
    pub registers: BTreeMap<String, String>,
    pub leftovers: Vec<Leftover>,
    /// The checker's summary line, once judged.
    pub summary: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct Hold {
    pub client: usize,
    pub h: u64,
    pub lock: String,
    pub mode: String,
    pub t_call: u64,
    pub t_acq: u64,
    pub token: i64,
    pub session: String,
    pub patience_ms: u64,
    /// (release called, release returned, outcome); `None` if the log ends inside the hold.
    pub release: Option<(u64, u64, String)>,
    pub checks: Vec<(u64, bool)>,
    pub reads: Vec<Read>,
    pub writes: Vec<Write>,
    pub pauses: Vec<Pause>,
}

#[derive(Debug, Clone, Default)]
pub struct Read {
    pub register: String,
    pub t: u64,
    /// `None` when the read failed.
    pub value: Option<u64>,
    pub token: i64,
    pub elements: usize,
}

#[derive(Debug, Clone, Default)]
pub struct Write {
    pub register: String,
    pub t_send: u64,
    pub t_done: u64,
    pub token: i64,
    pub old: u64,
    pub element: String,
    /// The client's session after the call.
    pub session: String,
    pub outcome: String,
    pub detail: String,
}

#[derive(Debug, Clone, Default)]
pub struct Pause {
    pub t_stop: u64,
    pub t_resume: u64,
    pub planned_ms: u64,
    /// `careless` or `careful`.
    pub kind: String,
    pub t_ready: u64,
    /// `new` (a new session), `same` (the old one lived), `timeout`.
    pub ready: String,
}

#[derive(Debug, Clone, Default)]
pub struct Attempt {
    pub client: usize,
    pub h: u64,
    pub lock: String,
    pub mode: String,
    pub t_call: u64,
    pub t_ret: u64,
    pub patience_ms: u64,
    /// `timeout` or `error`.
    pub outcome: String,
    pub err: String,
}

#[derive(Debug, Clone, Default)]
pub struct Fault {
    pub n: usize,
    pub kind: String,
    pub what: String,
    pub start: u64,
    pub heal: Option<u64>,
    /// What the nemesis saw it do: packets dropped or delayed.
    pub effect: String,
}

impl Fault {
    /// Stacked on purpose on the fault before (injected before the ensemble was whole).
    pub fn stacked(&self) -> bool {
        self.what.starts_with("[stacked")
    }

    /// The client a `pause-client` fault stopped.
    pub fn paused_client(&self) -> Option<usize> {
        if self.kind != "pause-client" {
            return None;
        }
        let rest = &self.what[self.what.find("SIGSTOP client ")? + 15..];
        rest.split(' ').next()?.parse().ok()
    }
}

#[derive(Debug, Clone, Default)]
pub struct Health {
    pub t: u64,
    /// `before` the fault, right after its `heal`, once `whole` again.
    pub phase: String,
    pub fault: usize,
    pub server: usize,
    /// leader, follower, or `-` when it did not answer as serving.
    pub mode: String,
    /// Last zxid, as `srvr` printed it (`-` if unknown).
    pub zxid: String,
    pub epoch: Option<u64>,
    pub accepted: Option<u64>,
}

impl Health {
    /// The epoch: the `currentEpoch` file, else the zxid's high 32 bits.
    pub fn epoch(&self) -> Option<u64> {
        self.epoch.or_else(|| {
            let hex = self.zxid.strip_prefix("0x")?;
            Some(u64::from_str_radix(hex, 16).ok()? >> 32)
        })
    }
}

#[derive(Debug, Clone, Default)]
pub struct Truncation {
    pub server: usize,
    /// On the run's clock (0 if the log line's wall time could not be placed).
    pub t: u64,
    pub line: String,
}

#[derive(Debug, Clone, Default)]
pub struct ClientInfo {
    pub started: u64,
    /// Its `X` stamp, else the stop of the run.
    pub exit: u64,
    /// Exit status as the orchestrator saw it (`0`, a code, `signal`, `hung`); `None` if never
    /// reported.
    pub status: Option<String>,
}

/// Something left behind: `idle-node`, `idle-watch` (while every client idled with its session
/// open), `node`, `watch` (after every client exited), `no-wchs` (a server did not answer).
#[derive(Debug, Clone, Default)]
pub struct Leftover {
    pub kind: String,
    pub count: usize,
    pub detail: String,
}

// ------------------------------------------------------------------ from the run's logs

impl History {
    /// Reads `nemesis.log`, the clients' logs and the servers' logs of a run's directory (the
    /// final server state comes separately: see `check::gather`).
    pub fn from_dir(dir: &Path) -> anyhow::Result<History> {
        let mut h = History::default();
        let nemesis = std::fs::read_to_string(dir.join("nemesis.log"))?;
        // (monotonic ns, wall ms) pairs, to place the servers' log lines on the run's clock.
        let mut wall: Option<(u64, u64)> = None;
        for line in nemesis.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            match f[0] {
                "seed" => h.seed = num(1),
                "S" => {
                    h.start = num(1);
                    h.clients = num(3) as usize;
                    h.session_ms = num(5);
                    h.bound_ns = num(7);
                    h.duration_s = num(9);
                }
                "N" if wall.is_none() => wall = Some((num(1), num(3))),
                "U" => h.warmup = Some((num(1), f.get(2) == Some(&"ok"))),
                "F" => h.faults.push(Fault {
                    n: num(2) as usize,
                    kind: f.get(3).unwrap_or(&"").to_string(),
                    what: f.get(4..).unwrap_or(&[]).join(" "),
                    start: num(1),
                    heal: None,
                    effect: String::new(),
                }),
                "H" => {
                    if let Some(fault) = h.faults.iter_mut().find(|x| x.n == num(2) as usize) {
                        fault.heal = Some(num(1));
                        fault.effect = f.get(4).unwrap_or(&"").to_string();
                    }
                }
                "V" if f.len() >= 9 => h.health.push(Health {
                    t: num(1),
                    phase: f[2].to_owned(),
                    fault: num(3) as usize,
                    server: num(4) as usize,
                    mode: f[5].to_owned(),
                    zxid: f[6].to_owned(),
                    epoch: f[7].parse().ok(),
                    accepted: f[8].parse().ok(),
                }),
                "Y" => {
                    h.unhealthy
                        .push((num(1), num(2) as usize, f.get(3..).unwrap_or(&[]).join(" ")))
                }
                "Z" => h.stop = num(1),
                "Q" => {
                    let status = f.get(2).unwrap_or(&"?").to_string();
                    h.client_info.entry(num(1) as usize).or_default().status = Some(status);
                }
                _ => {}
            }
        }
        if h.bound_ns == 0 {
            h.bound_ns = 30_000_000_000;
        }
        for c in 1..=h.clients {
            let path = dir.join(format!("c{c}/client.log"));
            let text =
                std::fs::read_to_string(&path).with_context(|| format!("reading {path:?}"))?;
            h.parse_client(c, &text);
        }
        for s in 1..=crate::SERVERS {
            let Ok(text) = std::fs::read_to_string(dir.join(format!("s{s}/server.log"))) else {
                continue;
            };
            for line in text.lines().filter(|l| l.contains("Truncating log")) {
                let t = match (wall, log4j_utc_ms(line)) {
                    (Some((mono, wall_ms)), Some(ms)) => {
                        (mono as i128 + (ms as i128 - wall_ms as i128) * 1_000_000).max(0) as u64
                    }
                    _ => 0,
                };
                h.truncations.push(Truncation {
                    server: s,
                    t,
                    line: line.to_owned(),
                });
            }
        }
        Ok(h)
    }

    /// Adds the facts of client `c`'s log.
    pub fn parse_client(&mut self, c: usize, text: &str) {
        let mut by_h: HashMap<u64, usize> = HashMap::new();
        let stop = self.stop;
        let info = self.client_info.entry(c).or_default();
        info.exit = stop;
        for line in text.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            let hold = |by_h: &HashMap<u64, usize>| by_h.get(&num(1)).copied();
            match f[0] {
                "B" => self.client_info.entry(c).or_default().started = num(1),
                "X" => self.client_info.entry(c).or_default().exit = num(1),
                "A" if f.len() >= 8 => {
                    by_h.insert(num(1), self.holds.len());
                    self.holds.push(Hold {
                        client: c,
                        h: num(1),
                        lock: f[2].to_owned(),
                        mode: f[3].to_owned(),
                        t_call: num(4),
                        t_acq: num(5),
                        token: f[6].parse().unwrap_or(0),
                        session: f[7].to_owned(),
                        patience_ms: num(8),
                        ..Hold::default()
                    });
                }
                "T" | "E" if f.len() >= 7 => self.attempts.push(Attempt {
                    client: c,
                    h: num(1),
                    lock: f[2].to_owned(),
                    mode: f[3].to_owned(),
                    t_call: num(4),
                    t_ret: num(5),
                    patience_ms: num(6),
                    outcome: if f[0] == "T" { "timeout" } else { "error" }.to_owned(),
                    err: f.get(7..).unwrap_or(&[]).join(" "),
                }),
                "C" if f.len() >= 4 => {
                    if let Some(i) = hold(&by_h) {
                        self.holds[i].checks.push((num(2), f[3] == "1"));
                    }
                }
                "G" if f.len() >= 5 => {
                    if let Some(i) = hold(&by_h) {
                        let ok = f[4] != "err";
                        self.holds[i].reads.push(Read {
                            register: f[2].to_owned(),
                            t: num(3),
                            value: if ok {
                                f.get(5).and_then(|v| v.parse().ok())
                            } else {
                                None
                            },
                            token: if ok { f[4].parse().unwrap_or(0) } else { 0 },
                            elements: num(6) as usize,
                        });
                    }
                }
                "W" if f.len() >= 10 => {
                    if let Some(i) = hold(&by_h) {
                        self.holds[i].writes.push(Write {
                            register: f[2].to_owned(),
                            t_send: num(3),
                            t_done: num(4),
                            token: f[5].parse().unwrap_or(0),
                            old: num(6),
                            element: f[7].to_owned(),
                            session: f[8].to_owned(),
                            outcome: f[9].to_owned(),
                            detail: f.get(10..).unwrap_or(&[]).join(" "),
                        });
                    }
                }
                "P" if f.len() >= 8 => {
                    if let Some(i) = hold(&by_h) {
                        self.holds[i].pauses.push(Pause {
                            t_stop: num(2),
                            t_resume: num(3),
                            planned_ms: num(4),
                            kind: f[5].to_owned(),
                            t_ready: num(6),
                            ready: f[7].to_owned(),
                        });
                    }
                }
                "R" if f.len() >= 5 => {
                    if let Some(i) = hold(&by_h) {
                        self.holds[i].release = Some((num(2), num(3), f[4..].join(" ")));
                    }
                }
                _ => {}
            }
        }
    }
}

/// `2026-11-24 04:47:22,412 ...` (log4j ISO8601, the servers run with user.timezone=UTC) as
/// milliseconds since the epoch.
fn log4j_utc_ms(line: &str) -> Option<u64> {
    let stamp = line.get(..23)?;
    let num = |a: usize, b: usize| stamp.get(a..b)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0, 4)?, num(5, 7)?, num(8, 10)?);
    let (hh, mm, ss, ms) = (num(11, 13)?, num(14, 16)?, num(17, 19)?, num(20, 23)?);
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if mo > 2 { mo - 3 } else { mo + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    u64::try_from(secs * 1000 + ms).ok()
}

// ------------------------------------------------------------------ JSON Lines

/// One flat JSON object under construction.
struct Obj(String);

impl Obj {
    fn new(ev: &str) -> Obj {
        let mut o = Obj(String::from("{"));
        o.s("ev", ev);
        o
    }

    fn key(&mut self, k: &str) {
        if self.0.len() > 1 {
            self.0.push(',');
        }
        let _ = write!(self.0, "\"{k}\":");
    }

    fn s(&mut self, k: &str, v: &str) -> &mut Obj {
        self.key(k);
        self.0.push('"');
        for c in v.chars() {
            match c {
                '"' => self.0.push_str("\\\""),
                '\\' => self.0.push_str("\\\\"),
                '\n' => self.0.push_str("\\n"),
                '\r' => self.0.push_str("\\r"),
                '\t' => self.0.push_str("\\t"),
                c if (c as u32) < 0x20 => {
                    let _ = write!(self.0, "\\u{:04x}", c as u32);
                }
                c => self.0.push(c),
            }
        }
        self.0.push('"');
        self
    }

    fn n(&mut self, k: &str, v: impl std::fmt::Display) -> &mut Obj {
        self.key(k);
        let _ = write!(self.0, "{v}");
        self
    }

    fn b(&mut self, k: &str, v: bool) -> &mut Obj {
        self.n(k, v)
    }

    fn opt(&mut self, k: &str, v: Option<u64>) -> &mut Obj {
        match v {
            Some(v) => self.n(k, v),
            None => self.n(k, "null"),
        }
    }

    fn line(&mut self, out: &mut String) {
        out.push_str(&self.0);
        out.push_str("}\n");
    }
}

/// A parsed flat JSON object: strings, numbers (kept as text), booleans and nulls.
#[derive(Debug, Default)]
pub struct Fields(HashMap<String, Option<String>>);

impl Fields {
    fn str(&self, k: &str) -> String {
        self.0.get(k).cloned().flatten().unwrap_or_default()
    }

    fn u(&self, k: &str) -> u64 {
        self.opt(k).unwrap_or(0)
    }

    fn opt(&self, k: &str) -> Option<u64> {
        self.0.get(k)?.as_deref()?.parse().ok()
    }

    fn i(&self, k: &str) -> i64 {
        self.0
            .get(k)
            .and_then(|v| v.as_deref()?.parse().ok())
            .unwrap_or(0)
    }

    fn b(&self, k: &str) -> bool {
        self.0.get(k).and_then(|v| v.as_deref()) == Some("true")
    }
}

/// Parses one line holding a flat JSON object (no nested objects or arrays).
pub fn parse_object(line: &str) -> anyhow::Result<Fields> {
    let mut chars = line.trim().chars().peekable();
    let mut fields = HashMap::new();
    let skip_ws = |chars: &mut std::iter::Peekable<std::str::Chars>| {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
    };
    let string = |chars: &mut std::iter::Peekable<std::str::Chars>| -> anyhow::Result<String> {
        let mut out = String::new();
        loop {
            match chars.next() {
                Some('"') => return Ok(out),
                Some('\\') => match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('r') => out.push('\r'),
                    Some('t') => out.push('\t'),
                    Some('u') => {
                        let hex: String = chars.by_ref().take(4).collect();
                        let code = u32::from_str_radix(&hex, 16)?;
                        out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                    }
                    Some(c) => out.push(c),
                    None => bail!("unterminated escape"),
                },
                Some(c) => out.push(c),
                None => bail!("unterminated string"),
            }
        }
    };
    skip_ws(&mut chars);
    if chars.next() != Some('{') {
        bail!("not a JSON object: {line:.60}");
    }
    loop {
        skip_ws(&mut chars);
        match chars.next() {
            Some('}') => break,
            Some(',') => continue,
            Some('"') => {}
            other => bail!("unexpected {other:?} in {line:.60}"),
        }
        let key = string(&mut chars)?;
        skip_ws(&mut chars);
        if chars.next() != Some(':') {
            bail!("no ':' after key {key:?}");
        }
        skip_ws(&mut chars);
        let value = if chars.peek() == Some(&'"') {
            chars.next();
            Some(string(&mut chars)?)
        } else {
            let mut raw = String::new();
            while chars.peek().is_some_and(|&c| c != ',' && c != '}') {
                raw.push(chars.next().unwrap());
            }
            let raw = raw.trim().to_owned();
            (raw != "null").then_some(raw)
        };
        fields.insert(key, value);
    }
    Ok(Fields(fields))
}

impl History {
    pub fn to_jsonl(&self) -> String {
        let mut out = String::new();
        Obj::new("run")
            .n("seed", self.seed)
            .n("duration_s", self.duration_s)
            .n("start", self.start)
            .n("stop", self.stop)
            .n("clients", self.clients)
            .n("session_ms", self.session_ms)
            .n("bound_ns", self.bound_ns)
            .line(&mut out);
        if let Some((t, ok)) = self.warmup {
            Obj::new("warmup").n("t", t).b("ok", ok).line(&mut out);
        }
        for f in &self.faults {
            Obj::new("fault")
                .n("n", f.n)
                .s("kind", &f.kind)
                .s("what", &f.what)
                .n("start", f.start)
                .opt("heal", f.heal)
                .s("effect", &f.effect)
                .line(&mut out);
        }
        for v in &self.health {
            Obj::new("health")
                .n("t", v.t)
                .s("phase", &v.phase)
                .n("fault", v.fault)
                .n("server", v.server)
                .s("mode", &v.mode)
                .s("zxid", &v.zxid)
                .opt("epoch", v.epoch)
                .opt("accepted", v.accepted)
                .line(&mut out);
        }
        for (t, n, what) in &self.unhealthy {
            Obj::new("unhealthy")
                .n("t", t)
                .n("fault", n)
                .s("what", what)
                .line(&mut out);
        }
        for x in &self.truncations {
            Obj::new("truncation")
                .n("server", x.server)
                .n("t", x.t)
                .s("line", &x.line)
                .line(&mut out);
        }
        for (c, info) in &self.client_info {
            let mut o = Obj::new("client");
            o.n("client", c)
                .n("started", info.started)
                .n("exit", info.exit);
            match &info.status {
                Some(s) => o.s("status", s),
                None => o.n("status", "null"),
            };
            o.line(&mut out);
        }
        for a in &self.attempts {
            Obj::new("attempt")
                .n("client", a.client)
                .n("h", a.h)
                .s("lock", &a.lock)
                .s("mode", &a.mode)
                .n("t_call", a.t_call)
                .n("t_ret", a.t_ret)
                .n("patience_ms", a.patience_ms)
                .s("outcome", &a.outcome)
                .s("err", &a.err)
                .line(&mut out);
        }
        for h in &self.holds {
            let mut o = Obj::new("hold");
            o.n("client", h.client)
                .n("h", h.h)
                .s("lock", &h.lock)
                .s("mode", &h.mode)
                .n("t_call", h.t_call)
                .n("t_acq", h.t_acq)
                .n("token", h.token)
                .s("session", &h.session)
                .n("patience_ms", h.patience_ms);
            if let Some((t, done, outcome)) = &h.release {
                o.n("t_rel", t).n("t_rel_done", done).s("release", outcome);
            }
            o.line(&mut out);
            let id = |o: &mut Obj| {
                o.n("client", h.client).n("h", h.h);
            };
            for (t, held) in &h.checks {
                let mut o = Obj::new("check");
                id(&mut o);
                o.n("t", t).b("held", *held).line(&mut out);
            }
            for r in &h.reads {
                let mut o = Obj::new("read");
                id(&mut o);
                o.s("register", &r.register)
                    .n("t", r.t)
                    .opt("value", r.value)
                    .n("token", r.token)
                    .n("elements", r.elements)
                    .line(&mut out);
            }
            for w in &h.writes {
                let mut o = Obj::new("write");
                id(&mut o);
                o.s("register", &w.register)
                    .n("t_send", w.t_send)
                    .n("t_done", w.t_done)
                    .n("token", w.token)
                    .n("old", w.old)
                    .s("element", &w.element)
                    .s("session", &w.session)
                    .s("outcome", &w.outcome)
                    .s("detail", &w.detail)
                    .line(&mut out);
            }
            for p in &h.pauses {
                let mut o = Obj::new("pause");
                id(&mut o);
                o.n("t_stop", p.t_stop)
                    .n("t_resume", p.t_resume)
                    .n("planned_ms", p.planned_ms)
                    .s("kind", &p.kind)
                    .n("t_ready", p.t_ready)
                    .s("ready", &p.ready)
                    .line(&mut out);
            }
        }
        for (path, data) in &self.registers {
            Obj::new("register")
                .s("path", path)
                .s("data", data)
                .line(&mut out);
        }
        for l in &self.leftovers {
            Obj::new("leftover")
                .s("kind", &l.kind)
                .n("count", l.count)
                .s("detail", &l.detail)
                .line(&mut out);
        }
        if let Some(summary) = &self.summary {
            Obj::new("summary").s("line", summary).line(&mut out);
        }
        out
    }

    pub fn from_jsonl(text: &str) -> anyhow::Result<History> {
        let mut h = History::default();
        let mut by_h: HashMap<(usize, u64), usize> = HashMap::new();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let f = parse_object(line).with_context(|| format!("line {}", n + 1))?;
            let hold = |by_h: &HashMap<(usize, u64), usize>| {
                by_h.get(&(f.u("client") as usize, f.u("h"))).copied()
            };
            match f.str("ev").as_str() {
                "run" => {
                    h.seed = f.u("seed");
                    h.duration_s = f.u("duration_s");
                    h.start = f.u("start");
                    h.stop = f.u("stop");
                    h.clients = f.u("clients") as usize;
                    h.session_ms = f.u("session_ms");
                    h.bound_ns = f.u("bound_ns");
                }
                "warmup" => h.warmup = Some((f.u("t"), f.b("ok"))),
                "fault" => h.faults.push(Fault {
                    n: f.u("n") as usize,
                    kind: f.str("kind"),
                    what: f.str("what"),
                    start: f.u("start"),
                    heal: f.opt("heal"),
                    effect: f.str("effect"),
                }),
                "health" => h.health.push(Health {
                    t: f.u("t"),
                    phase: f.str("phase"),
                    fault: f.u("fault") as usize,
                    server: f.u("server") as usize,
                    mode: f.str("mode"),
                    zxid: f.str("zxid"),
                    epoch: f.opt("epoch"),
                    accepted: f.opt("accepted"),
                }),
                "unhealthy" => h
                    .unhealthy
                    .push((f.u("t"), f.u("fault") as usize, f.str("what"))),
                "truncation" => h.truncations.push(Truncation {
                    server: f.u("server") as usize,
                    t: f.u("t"),
                    line: f.str("line"),
                }),
                "client" => {
                    h.client_info.insert(
                        f.u("client") as usize,
                        ClientInfo {
                            started: f.u("started"),
                            exit: f.u("exit"),
                            status: f.0.get("status").cloned().flatten(),
                        },
                    );
                }
                "attempt" => h.attempts.push(Attempt {
                    client: f.u("client") as usize,
                    h: f.u("h"),
                    lock: f.str("lock"),
                    mode: f.str("mode"),
                    t_call: f.u("t_call"),
                    t_ret: f.u("t_ret"),
                    patience_ms: f.u("patience_ms"),
                    outcome: f.str("outcome"),
                    err: f.str("err"),
                }),
                "hold" => {
                    by_h.insert((f.u("client") as usize, f.u("h")), h.holds.len());
                    h.holds.push(Hold {
                        client: f.u("client") as usize,
                        h: f.u("h"),
                        lock: f.str("lock"),
                        mode: f.str("mode"),
                        t_call: f.u("t_call"),
                        t_acq: f.u("t_acq"),
                        token: f.i("token"),
                        session: f.str("session"),
                        patience_ms: f.u("patience_ms"),
                        release: f
                            .opt("t_rel")
                            .map(|t| (t, f.u("t_rel_done"), f.str("release"))),
                        ..Hold::default()
                    });
                }
                "check" => {
                    if let Some(i) = hold(&by_h) {
                        h.holds[i].checks.push((f.u("t"), f.b("held")));
                    }
                }
                "read" => {
                    if let Some(i) = hold(&by_h) {
                        h.holds[i].reads.push(Read {
                            register: f.str("register"),
                            t: f.u("t"),
                            value: f.opt("value"),
                            token: f.i("token"),
                            elements: f.u("elements") as usize,
                        });
                    }
                }
                "write" => {
                    if let Some(i) = hold(&by_h) {
                        h.holds[i].writes.push(Write {
                            register: f.str("register"),
                            t_send: f.u("t_send"),
                            t_done: f.u("t_done"),
                            token: f.i("token"),
                            old: f.u("old"),
                            element: f.str("element"),
                            session: f.str("session"),
                            outcome: f.str("outcome"),
                            detail: f.str("detail"),
                        });
                    }
                }
                "pause" => {
                    if let Some(i) = hold(&by_h) {
                        h.holds[i].pauses.push(Pause {
                            t_stop: f.u("t_stop"),
                            t_resume: f.u("t_resume"),
                            planned_ms: f.u("planned_ms"),
                            kind: f.str("kind"),
                            t_ready: f.u("t_ready"),
                            ready: f.str("ready"),
                        });
                    }
                }
                "register" => {
                    h.registers.insert(f.str("path"), f.str("data"));
                }
                "leftover" => h.leftovers.push(Leftover {
                    kind: f.str("kind"),
                    count: f.u("count") as usize,
                    detail: f.str("detail"),
                }),
                "summary" => h.summary = Some(f.str("line")),
                _ => {}
            }
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_round_trip() {
        let mut h = History {
            seed: 7,
            start: 10,
            stop: 99,
            clients: 1,
            session_ms: 3000,
            bound_ns: 5,
            ..History::default()
        };
        h.parse_client(
            1,
            "B 1 2\nA 1 mutex x 10 20 4294967330 0x1a 900\nC 1 21 1\nG 1 /r 22 3 4 2\n\
             P 1 23 25 2700 careless 26 new\nW 1 /r 27 28 4294967330 4 1.1.0 0x1b refused\n\
             R 1 29 30 err lock \"x\" lost\nT 2 sem s 31 32 500\nX 40\n",
        );
        h.faults.push(Fault {
            n: 1,
            kind: "split".into(),
            what: "a \"quoted\"\tthing".into(),
            start: 11,
            heal: None,
            effect: String::new(),
        });
        h.registers.insert("/r".into(), "1:2:1.1.0,2.3.1".into());
        let back = History::from_jsonl(&h.to_jsonl()).unwrap();
        assert_eq!(back.to_jsonl(), h.to_jsonl());
        assert_eq!(back.holds[0].pauses[0].ready, "new");
        assert_eq!(back.holds[0].writes[0].outcome, "refused");
        assert_eq!(back.faults[0].what, "a \"quoted\"\tthing");
        assert_eq!(back.faults[0].heal, None);
        assert_eq!(back.attempts[0].patience_ms, 500);
    }

    #[test]
    fn log4j_stamps_are_utc_milliseconds() {
        assert_eq!(
            log4j_utc_ms("1970-01-02 00:00:01,005 WARN x"),
            Some(86_401_005)
        );
        assert_eq!(
            log4j_utc_ms("2024-02-29 12:00:00,000 INFO"),
            Some(1_709_208_000_000)
        );
    }
}
