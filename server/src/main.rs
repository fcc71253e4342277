//! `zklock-server --port P [--tick-time MS] [--container-check-interval MS] ... [--data-dir D
//! [--fsync]]`: serves ZooKeeper's client protocol on 127.0.0.1:P until SIGTERM or SIGINT,
//! keeping its data in D if given. Logs go to stderr
//! (`RUST_LOG`-style level in `ZKLOCK_SERVER_LOG`, default `info`); nothing else is printed.

use std::process::ExitCode;
use std::time::Duration;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use zklock_server::{Config, Server};

const USAGE: &str = "usage: zklock-server --port P [--tick-time MS] [--min-session-timeout MS] \
[--max-session-timeout MS] [--container-check-interval MS] [--container-max-never-used MS] \
[--max-buffer BYTES] [--extended-types] [--super-user USER:PASSWORD] [--data-dir DIR [--fsync] \
[--snapshot-log-bytes BYTES]]";

/// A logger to stderr: the server needs nothing more, and adds no dependency for it.
struct StderrLog(log::LevelFilter);

impl log::Log for StderrLog {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= self.0
    }
    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            eprintln!("{} {}: {}", r.level(), r.target(), r.args());
        }
    }
    fn flush(&self) {}
}

fn parse(args: &[String]) -> Result<Config, String> {
    let mut cfg = Config::default();
    let mut it = args.iter();
    let ms = |v: Option<&String>, name: &str| -> Result<Duration, String> {
        v.ok_or(format!("{name} needs a value"))?
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|e| format!("{name}: {e}"))
    };
    while let Some(a) = it.next() {
        match a.as_str() {
            "--port" => {
                cfg.port = it
                    .next()
                    .ok_or("--port needs a value")?
                    .parse()
                    .map_err(|e| format!("--port: {e}"))?
            }
            "--tick-time" => cfg.tick_time = ms(it.next(), a)?,
            "--min-session-timeout" => cfg.min_session_timeout = Some(ms(it.next(), a)?),
            "--max-session-timeout" => cfg.max_session_timeout = Some(ms(it.next(), a)?),
            "--container-check-interval" => cfg.container_check_interval = ms(it.next(), a)?,
            "--container-max-never-used" => cfg.container_max_never_used = Some(ms(it.next(), a)?),
            "--max-buffer" => {
                cfg.max_buffer = it
                    .next()
                    .ok_or("--max-buffer needs a value")?
                    .parse()
                    .map_err(|e| format!("--max-buffer: {e}"))?
            }
            "--extended-types" => cfg.extended_types = true,
            "--data-dir" => {
                cfg.data_dir = Some(it.next().ok_or("--data-dir needs a value")?.into())
            }
            "--fsync" => cfg.fsync = true,
            "--snapshot-log-bytes" => {
                cfg.snapshot_log_bytes = it
                    .next()
                    .ok_or("--snapshot-log-bytes needs a value")?
                    .parse()
                    .map_err(|e| format!("--snapshot-log-bytes: {e}"))?
            }
            "--super-user" => {
                cfg.super_user = Some(it.next().ok_or("--super-user needs a value")?.clone())
            }
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(cfg)
}

/// `zklock-server admin --port P COMMAND...`: sends COMMAND to the server on 127.0.0.1:P (the
/// faults of `Server`'s handles: `expire-session 0x...`, `silent on`, `restart keep`, ...) and
/// prints its answer; fails if the answer is an error.
fn admin(args: &[String]) -> ExitCode {
    use std::io::{Read, Write};
    let (port, cmd) = match args {
        [flag, port, cmd @ ..] if flag == "--port" && !cmd.is_empty() => (port, cmd.join(" ")),
        _ => {
            eprintln!("usage: zklock-server admin --port P COMMAND (\"help\" lists them)");
            return ExitCode::from(2);
        }
    };
    let answer = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).and_then(|mut s| {
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        s.write_all(format!("zkfa{cmd}\n").as_bytes())?;
        let mut text = String::new();
        s.read_to_string(&mut text)?;
        Ok(text)
    });
    match answer {
        Ok(text) => {
            print!("{text}");
            if text.starts_with("error") {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("zklock-server admin: no server on 127.0.0.1:{port}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let level = std::env::var("ZKLOCK_SERVER_LOG")
        .ok()
        .and_then(|l| l.parse().ok())
        .unwrap_or(log::LevelFilter::Info);
    if log::set_logger(Box::leak(Box::new(StderrLog(level)))).is_ok() {
        log::set_max_level(level);
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("admin") {
        return admin(&args[1..]);
    }
    let cfg = match parse(&args) {
        Ok(c) => c,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("zklock-server: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut signals = match Signals::new([SIGTERM, SIGINT]) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("zklock-server: cannot handle signals: {e}");
            return ExitCode::FAILURE;
        }
    };
    let port = cfg.port;
    let server = match Server::start(cfg) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            eprintln!("zklock-server: port {port} on 127.0.0.1 is in use: {e}");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("zklock-server: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(sig) = signals.forever().next() {
        log::info!("signal {sig}: stopping");
    }
    server.stop();
    ExitCode::SUCCESS
}
