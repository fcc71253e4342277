//! `nemesis plot --history FILE --out HTML`: a run's history drawn as one self-contained HTML
//! page of inline SVG (no script, no external resource):
//!
//! - per lock, one lane per client: when it waited, when it believed it held the lock (from the
//!   acquisition to its last `is_held() == true`), when it held it only on paper (belief over,
//!   not yet released), when it froze itself, and its writes with their outcome (fenced on the
//!   upper half of the lane, the unfenced control on the lower); fault windows shaded;
//! - the registers' acked values over time, fenced beside unfenced (a stale unfenced write
//!   shows as the line going back);
//! - acquisition latency and throughput over time, and the servers' modes around each fault.
//!
//! Every lane is a `<g class="lane">`, so a headless browser's DOM dump can count them
//! (scripts/nemesis.sh --screenshot).

use std::fmt::Write as _;

use crate::check::History;
use crate::{Args, LOCKS, REGISTERS};

pub fn run(args: &Args) -> anyhow::Result<()> {
    let history = History::from_jsonl(&std::fs::read_to_string(args.get("history")?)?)?;
    std::fs::write(args.get("out")?, page(&history))?;
    Ok(())
}

const WIDTH: f64 = 1400.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const LANE: f64 = 16.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

struct Axis {
    t0: u64,
    t1: u64,
}

impl Axis {
    fn x(&self, t: u64) -> f64 {
        let span = (self.t1 - self.t0).max(1) as f64;
        let t = t.clamp(self.t0, self.t1);
        LEFT + (t - self.t0) as f64 / span * (WIDTH - LEFT - RIGHT)
    }

    fn secs(&self, t: u64) -> f64 {
        (t as f64 - self.t0 as f64) / 1e9
    }

    /// Grid lines and labels every few seconds, over `[top, bottom]`.
    fn grid(&self, out: &mut String, top: f64, bottom: f64) {
        let span = (self.t1 - self.t0) as f64 / 1e9;
        let step = [1.0, 2.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0]
            .into_iter()
            .find(|s| span / s <= 14.0)
            .unwrap_or(600.0);
        let mut s = 0.0;
        while s <= span {
            let x = LEFT + s / span.max(1e-9) * (WIDTH - LEFT - RIGHT);
            let _ = write!(
                out,
                r##"<line x1="{x:.1}" y1="{top:.1}" x2="{x:.1}" y2="{bottom:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" font-size="10" text-anchor="middle" fill="#666">{s:.0} s</text>"##,
                bottom + 11.0
            );
            s += step;
        }
    }

    /// The fault windows, shaded over `[top, bottom]`, labelled if `label`.
    fn faults(&self, out: &mut String, h: &History, top: f64, bottom: f64, label: bool) {
        // Where the last label ended: in a long run, labels that would overlap are cut to the
        // fault's number, or left out.
        let mut free_from = 0.0;
        for f in &h.faults {
            let x0 = self.x(f.start);
            let x1 = self.x(f.heal.unwrap_or(h.stop));
            let _ = write!(
                out,
                r##"<rect class="fault" x="{x0:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="#f4c542" fill-opacity="0.22"><title>fault {} {}: {}</title></rect>"##,
                (x1 - x0).max(1.0),
                bottom - top,
                f.n,
                esc(&f.kind),
                esc(&f.what)
            );
            let full = format!(
                "{} {}{}",
                f.n,
                f.kind,
                if f.stacked() { " (stacked)" } else { "" }
            );
            let next = h
                .faults
                .iter()
                .find(|g| g.n > f.n)
                .map_or(WIDTH, |g| self.x(g.start));
            let room = next.min(WIDTH) - x0 - 4.0;
            let text = [full, f.n.to_string()]
                .into_iter()
                .find(|t| t.len() as f64 * 5.2 <= room);
            if let (true, Some(text)) = (label && x0 >= free_from, text) {
                let _ = write!(
                    out,
                    r##"<text x="{:.1}" y="{:.1}" font-size="9" fill="#8a6d00">{}</text>"##,
                    x0 + 2.0,
                    top + 9.0,
                    esc(&text)
                );
                free_from = x0 + 4.0 + text.len() as f64 * 5.2;
            }
        }
    }
}

fn mode_color(mode: &str) -> &'static str {
    match mode {
        "x" => "#2a6fdb",
        "w" => "#7b3fbf",
        "r" => "#1b9e77",
        _ => "#e08a00",
    }
}

fn write_color(outcome: &str) -> &'static str {
    match outcome {
        "acked" => "#1a7f37",
        "refused" => "#d1242f",
        "unknown" => "#bf8700",
        _ => "#888",
    }
}

pub fn page(h: &History) -> String {
    let last = h
        .holds
        .iter()
        .filter_map(|x| x.release.as_ref().map(|r| r.1))
        .max()
        .unwrap_or(0);
    let axis = Axis {
        t0: h.start,
        t1: h.stop.max(last).max(h.start + 1),
    };
    let mut out = String::new();
    let title = format!("zklock nemesis, seed {}", h.seed);
    let _ = write!(
        out,
        r##"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>body{{font-family:sans-serif;margin:16px;color:#222}}h1{{font-size:18px;margin:0 0 4px}}h2{{font-size:14px;margin:14px 0 2px}}p{{margin:2px 0;font-size:12px}}.summary{{font-family:monospace;font-size:12px;background:#f6f8fa;padding:6px;white-space:pre-wrap}}svg{{display:block}}</style>
</head><body>
<h1>{title}</h1>
<p>{} clients, session timeout {} ms, {} s of faults, {} holds, {} faults.</p>
<div class="summary">{}</div>
<p>Lanes: <span style="color:#2a6fdb">&#9632;</span> mutex held (believed: acquisition to last <code>is_held()</code> true), <span style="color:#7b3fbf">&#9632;</span> write lock, <span style="color:#1b9e77">&#9632;</span> read lock, <span style="color:#e08a00">&#9632;</span> permit; <span style="color:#bbb">&#9632;</span> held on paper only (belief over, not yet released); <span style="color:#000">&#9632;</span> frozen (self-pause, careless ones hatched); thin line: waiting.
Writes: upper tick fenced, lower tick unfenced control; <span style="color:#1a7f37">acked</span>, <span style="color:#d1242f">refused</span>, <span style="color:#bf8700">unknown</span>, <span style="color:#888">not sent / error</span>. Shaded: fault windows.</p>
"##,
        h.clients,
        h.session_ms,
        h.duration_s,
        h.holds.len(),
        h.faults.len(),
        esc(h.summary.as_deref().unwrap_or("(not judged)"))
    );
    let _ = write!(
        out,
        r##"<svg width="0" height="0"><defs><pattern id="hatch" width="4" height="4" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="4" height="4" fill="#000"/><line x1="0" y1="0" x2="0" y2="4" stroke="#fff" stroke-width="1.5"/></pattern></defs></svg>"##
    );
    for lock in LOCKS {
        timeline(&mut out, h, &axis, lock.name, lock.permits);
    }
    registers(&mut out, h, &axis);
    latency(&mut out, h, &axis);
    throughput(&mut out, h, &axis);
    servers(&mut out, h, &axis);
    out.push_str("</body></html>\n");
    out
}

fn timeline(out: &mut String, h: &History, axis: &Axis, lock: &str, permits: usize) {
    let top = 14.0;
    let height = top + h.clients as f64 * LANE + 16.0;
    let bottom = top + h.clients as f64 * LANE;
    let what = if permits > 0 {
        format!(" ({permits} permit{})", if permits > 1 { "s" } else { "" })
    } else {
        String::new()
    };
    let _ = write!(
        out,
        r##"<h2>{lock}{what}</h2><svg class="timeline" data-lock="{lock}" width="{WIDTH}" height="{height:.0}" xmlns="http://www.w3.org/2000/svg">"##
    );
    axis.grid(out, top, bottom);
    for c in 1..=h.clients {
        let y = top + (c - 1) as f64 * LANE;
        let _ = write!(
            out,
            r##"<g class="lane" data-lock="{lock}" data-client="{c}"><rect x="{LEFT}" y="{y:.1}" width="{:.1}" height="{:.1}" fill="{}"/><text x="4" y="{:.1}" font-size="11">client {c}</text>"##,
            WIDTH - LEFT - RIGHT,
            LANE - 2.0,
            if c % 2 == 0 { "#fafafa" } else { "#f2f2f2" },
            y + LANE - 5.0
        );
        for x in h.holds.iter().filter(|x| x.client == c && x.lock == lock) {
            let mid = y + (LANE - 2.0) / 2.0;
            let (xc, xa) = (axis.x(x.t_call), axis.x(x.t_acq));
            if xa - xc >= 1.0 {
                let _ = write!(
                    out,
                    r##"<line x1="{xc:.1}" y1="{mid:.1}" x2="{xa:.1}" y2="{mid:.1}" stroke="#999" stroke-width="1"/>"##
                );
            }
            let end = x
                .release
                .as_ref()
                .map_or(axis.t1, |(_, done, _)| *done)
                .max(x.t_acq);
            let believed_to = x.belief().map_or(x.t_acq, |b| b.1);
            let xe = axis.x(end);
            let xb = axis.x(believed_to);
            let _ = write!(
                out,
                r##"<rect x="{xa:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#bbb"/>"##,
                y + 1.0,
                (xe - xa).max(0.5),
                LANE - 4.0
            );
            let _ = write!(
                out,
                r##"<rect x="{xa:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"><title>client {c} hold {} ({} {}), token {:#x}, acquired {:.3} s, believed to {:.3} s, released {:.3} s: {}</title></rect>"##,
                y + 1.0,
                (xb - xa).max(1.0),
                LANE - 4.0,
                mode_color(&x.mode),
                x.h,
                lock,
                x.mode,
                x.token,
                axis.secs(x.t_acq),
                axis.secs(believed_to),
                axis.secs(end),
                esc(x.release.as_ref().map_or("never", |r| r.2.as_str()))
            );
            for p in &x.pauses {
                let (x0, x1) = (axis.x(p.t_stop), axis.x(p.t_resume));
                let fill = if p.kind == "careless" {
                    "url(#hatch)"
                } else {
                    "#000"
                };
                let _ = write!(
                    out,
                    r##"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{fill}"><title>{} self-pause {:.2} s ({:.2} session timeouts), then {}</title></rect>"##,
                    y + 3.0,
                    (x1 - x0).max(1.0),
                    LANE - 8.0,
                    p.kind,
                    (p.t_resume - p.t_stop) as f64 / 1e9,
                    (p.t_resume - p.t_stop) as f64 / (h.session_ms as f64 * 1e6),
                    esc(&p.ready)
                );
            }
            for w in &x.writes {
                let fenced = REGISTERS.iter().any(|r| r.path == w.register && r.fenced);
                let xw = axis.x(w.t_send);
                let (y0, y1) = if fenced {
                    (y - 1.0, mid)
                } else {
                    (mid, y + LANE - 1.0)
                };
                let cause = if w.outcome == "refused" {
                    if w.session != x.session {
                        " by the check (new session)"
                    } else {
                        " by expiry"
                    }
                } else {
                    ""
                };
                let _ = write!(
                    out,
                    r##"<line x1="{xw:.1}" y1="{y0:.1}" x2="{xw:.1}" y2="{y1:.1}" stroke="{}" stroke-width="2"><title>{} write of {} to {} at {:.3} s: {}{cause}</title></line>"##,
                    write_color(&w.outcome),
                    if fenced { "fenced" } else { "unfenced" },
                    w.old + 1,
                    esc(&w.register),
                    axis.secs(w.t_send),
                    esc(&w.outcome)
                );
            }
        }
        out.push_str("</g>");
    }
    // Over the lanes, translucent, so that the holds under a fault stay visible.
    axis.faults(out, h, top - 12.0, bottom, true);
    out.push_str("</svg>\n");
}

/// A chart frame: title, grid, fault shading; returns (top, bottom) of the plot area.
fn frame(out: &mut String, h: &History, axis: &Axis, title: &str, class: &str) -> (f64, f64) {
    let (top, bottom) = (8.0, 128.0);
    let _ = write!(
        out,
        r##"<h2>{title}</h2><svg class="{class}" width="{WIDTH}" height="{:.0}" xmlns="http://www.w3.org/2000/svg"><rect x="{LEFT}" y="{top}" width="{:.1}" height="{:.1}" fill="#fcfcfc" stroke="#ccc"/>"##,
        bottom + 16.0,
        WIDTH - LEFT - RIGHT,
        bottom - top
    );
    axis.grid(out, top, bottom);
    axis.faults(out, h, top, bottom, false);
    (top, bottom)
}

fn registers(out: &mut String, h: &History, axis: &Axis) {
    let (top, bottom) = frame(
        out,
        h,
        axis,
        "Registers: acked values over time (fenced vs unfenced control)",
        "registers",
    );
    // (register, fenced, acked (time, value) points)
    type Series<'a> = (&'a str, bool, Vec<(u64, u64)>);
    let mut series: Vec<Series> = Vec::new();
    for spec in REGISTERS {
        let mut points: Vec<(u64, u64)> = h
            .holds
            .iter()
            .flat_map(|x| x.writes.iter())
            .filter(|w| w.register == spec.path && w.outcome == "acked")
            .map(|w| (w.t_done, w.old + 1))
            .collect();
        points.sort_unstable();
        series.push((spec.path, spec.fenced, points));
    }
    let max = series
        .iter()
        .flat_map(|s| s.2.iter().map(|p| p.1))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let y = |v: u64| bottom - v as f64 / max * (bottom - top - 4.0);
    for (i, (path, fenced, points)) in series.iter().enumerate() {
        let color = ["#2a6fdb", "#7b3fbf", "#d1242f", "#e08a00"][i % 4];
        let mut d = String::new();
        for (j, (t, v)) in points.iter().enumerate() {
            let _ = write!(
                d,
                "{}{:.1},{:.1}",
                if j == 0 { "M" } else { "L" },
                axis.x(*t),
                y(*v)
            );
        }
        let _ = write!(
            out,
            r##"<path d="{d}" fill="none" stroke="{color}" stroke-width="{}" {}/><text x="{:.1}" y="{:.1}" font-size="10" fill="{color}">{} ({})</text>"##,
            if *fenced { 1.5 } else { 1.0 },
            if *fenced {
                ""
            } else {
                r#"stroke-dasharray="3,2""#
            },
            LEFT + 6.0,
            top + 12.0 + i as f64 * 11.0,
            esc(path),
            if *fenced { "fenced" } else { "unfenced" }
        );
    }
    let _ = write!(
        out,
        r##"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end">{max:.0}</text></svg>"##,
        LEFT - 4.0,
        top + 8.0
    );
}

fn latency(out: &mut String, h: &History, axis: &Axis) {
    let (top, bottom) = frame(
        out,
        h,
        axis,
        "Acquisition latency (call to return, log scale; timed-out and failed calls as crosses)",
        "latency",
    );
    let lo = 0.1f64.log10();
    let hi = 10_000f64.log10();
    let y = |ns: u64| {
        let ms = (ns as f64 / 1e6).max(0.1);
        bottom - (ms.log10() - lo) / (hi - lo) * (bottom - top)
    };
    for (ms, label) in [
        (1u64, "1 ms"),
        (10, "10 ms"),
        (100, "100 ms"),
        (1000, "1 s"),
    ] {
        let yy = y(ms * 1_000_000);
        let _ = write!(
            out,
            r##"<line x1="{LEFT}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#eee"/><text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end">{label}</text>"##,
            WIDTH - RIGHT,
            LEFT - 4.0,
            yy + 3.0
        );
    }
    for x in &h.holds {
        let _ = write!(
            out,
            r##"<circle cx="{:.1}" cy="{:.1}" r="1.6" fill="{}"/>"##,
            axis.x(x.t_acq),
            y(x.t_acq - x.t_call),
            mode_color(&x.mode)
        );
    }
    for a in &h.attempts {
        let (cx, cy) = (axis.x(a.t_ret), y(a.t_ret.saturating_sub(a.t_call)));
        let _ = write!(
            out,
            r##"<path d="M{:.1},{:.1}l4,4m0,-4l-4,4" stroke="{}" stroke-width="1"/>"##,
            cx - 2.0,
            cy - 2.0,
            if a.outcome == "timeout" {
                "#999"
            } else {
                "#d1242f"
            }
        );
    }
    out.push_str("</svg>\n");
}

fn throughput(out: &mut String, h: &History, axis: &Axis) {
    let (top, bottom) = frame(
        out,
        h,
        axis,
        "Throughput: acquisitions per second (bars), fenced writes refused (red marks)",
        "throughput",
    );
    let span = axis.t1 - axis.t0;
    let bins = ((span / 1_000_000_000) as usize).clamp(1, 300);
    let width = span / bins as u64 + 1;
    let mut counts = vec![0usize; bins];
    for x in &h.holds {
        counts[((x.t_acq.saturating_sub(axis.t0)) / width).min(bins as u64 - 1) as usize] += 1;
    }
    let per_sec = |n: usize| n as f64 / (width as f64 / 1e9);
    let max = counts.iter().map(|&n| per_sec(n)).fold(1.0, f64::max);
    for (i, &n) in counts.iter().enumerate() {
        let x0 = axis.x(axis.t0 + i as u64 * width);
        let x1 = axis.x(axis.t0 + (i as u64 + 1) * width);
        let hgt = per_sec(n) / max * (bottom - top - 4.0);
        let _ = write!(
            out,
            r##"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{hgt:.1}" fill="#2a6fdb" fill-opacity="0.6"/>"##,
            bottom - hgt,
            (x1 - x0 - 0.5).max(0.5)
        );
    }
    for w in h
        .holds
        .iter()
        .flat_map(|x| x.writes.iter())
        .filter(|w| w.outcome == "refused")
    {
        let xw = axis.x(w.t_send);
        let _ = write!(
            out,
            r##"<line x1="{xw:.1}" y1="{top:.1}" x2="{xw:.1}" y2="{:.1}" stroke="#d1242f" stroke-width="2"/>"##,
            top + 10.0
        );
    }
    let _ = write!(
        out,
        r##"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end">{max:.0}/s</text></svg>"##,
        LEFT - 4.0,
        top + 8.0
    );
}

fn servers(out: &mut String, h: &History, axis: &Axis) {
    let top = 8.0;
    let bottom = top + 3.0 * LANE;
    let _ = write!(
        out,
        r##"<h2>Servers: mode and epoch around each fault (leader dark, follower light, not serving red)</h2><svg class="servers" width="{WIDTH}" height="{:.0}" xmlns="http://www.w3.org/2000/svg">"##,
        bottom + 16.0
    );
    axis.grid(out, top, bottom);
    axis.faults(out, h, top, bottom, false);
    for s in 1..=3usize {
        let y = top + (s - 1) as f64 * LANE;
        let _ = write!(
            out,
            r##"<text x="4" y="{:.1}" font-size="11">server {s}</text>"##,
            y + LANE - 5.0
        );
        for v in h.health.iter().filter(|v| v.server == s) {
            let color = match v.mode.as_str() {
                "leader" => "#333",
                "follower" => "#aaa",
                _ => "#d1242f",
            };
            let _ = write!(
                out,
                r##"<rect x="{:.1}" y="{:.1}" width="4" height="{:.1}" fill="{color}"><title>server {s} {} at {:.3} s ({} fault {}): epoch {}, last zxid {}</title></rect>"##,
                axis.x(v.t) - 2.0,
                y + 2.0,
                LANE - 4.0,
                esc(&v.mode),
                axis.secs(v.t),
                esc(&v.phase),
                v.fault,
                v.epoch().map_or("?".to_owned(), |e| e.to_string()),
                esc(&v.zxid)
            );
        }
    }
    for t in h.truncations.iter().filter(|t| t.t > 0) {
        let x = axis.x(t.t);
        let _ = write!(
            out,
            r##"<line x1="{x:.1}" y1="{top:.1}" x2="{x:.1}" y2="{bottom:.1}" stroke="#d1242f" stroke-width="2"><title>server {}: {}</title></line>"##,
            t.server,
            esc(&t.line)
        );
    }
    out.push_str("</svg>\n");
}
