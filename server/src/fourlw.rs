//! The four-letter words: a connection whose first four bytes spell one gets a text answer and
//! is closed, as ZooKeeper's `NIOServerCnxn.checkFourLetterWord` does.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use crate::net::Inner;

/// The version reported, in ZooKeeper's format (tools parse the numbers before `-`).
const VERSION: &str = concat!(
    "3.9.5-zklock-server-",
    env!("CARGO_PKG_VERSION"),
    ", built on 1970-01-01 00:00 UTC"
);

const WORDS: [&str; 12] = [
    "ruok", "srvr", "stat", "mntr", "cons", "wchs", "wchc", "wchp", "dump", "conf", "envi", "isro",
];

/// The word the first four bytes spell, if they spell one.
pub(crate) fn word(first: &[u8; 4]) -> Option<&'static str> {
    let s = std::str::from_utf8(first).ok()?;
    WORDS.iter().find(|w| **w == s).copied()
}

pub(crate) fn answer(inner: &Inner, word: &str) -> String {
    let shared = inner.shared.lock();
    let m = &shared.model;
    let stats = m.stats();
    let received = inner.received.load(Ordering::Relaxed);
    let sent = inner.sent.load(Ordering::Relaxed);
    let mut s = String::new();
    let clients = |s: &mut String| {
        let mut conns: Vec<_> = shared.outboxes.iter().collect();
        conns.sort_by_key(|(id, _)| **id);
        for (id, ob) in conns {
            let (session, timeout, packets) = m.conn_info(*id).unwrap_or((0, 0, 0));
            let _ = writeln!(
                s,
                " /{}[1](queued=0,recved={packets},sent={},sid=0x{session:x},lop=NA,est=0,to={timeout},lzxid=0x{:x},lresp=0,llat=0,minlat=0,avglat=0,maxlat=0)",
                ob.peer,
                ob.sent.load(Ordering::Relaxed),
                stats.zxid
            );
        }
    };
    match word {
        "ruok" => s.push_str("imok"),
        "isro" => s.push_str("rw"),
        "srvr" | "stat" => {
            let _ = writeln!(s, "Zookeeper version: {VERSION}");
            if word == "stat" {
                s.push_str("Clients:\n");
                clients(&mut s);
                s.push('\n');
            }
            let _ = writeln!(s, "Latency min/avg/max: 0/0.0/0");
            let _ = writeln!(s, "Received: {received}");
            let _ = writeln!(s, "Sent: {sent}");
            let _ = writeln!(s, "Connections: {}", shared.outboxes.len());
            let _ = writeln!(s, "Outstanding: 0");
            let _ = writeln!(s, "Zxid: 0x{:x}", stats.zxid);
            let _ = writeln!(s, "Mode: standalone");
            let _ = writeln!(s, "Node count: {}", stats.nodes);
        }
        "mntr" => {
            let c = stats.counters;
            let lines: [(&str, String); 22] = [
                ("zk_version", VERSION.to_owned()),
                ("zk_server_state", "standalone".into()),
                ("zk_avg_latency", "0.0".into()),
                ("zk_max_latency", "0".into()),
                ("zk_min_latency", "0".into()),
                ("zk_packets_received", received.to_string()),
                ("zk_packets_sent", sent.to_string()),
                (
                    "zk_num_alive_connections",
                    shared.outboxes.len().to_string(),
                ),
                ("zk_outstanding_requests", "0".into()),
                ("zk_znode_count", stats.nodes.to_string()),
                ("zk_watch_count", stats.watches.to_string()),
                ("zk_ephemerals_count", stats.ephemerals.to_string()),
                ("zk_approximate_data_size", stats.data_size.to_string()),
                ("zk_global_sessions", stats.sessions.to_string()),
                ("zk_local_sessions", "0".into()),
                ("zk_uptime", inner.now().mono_ms.to_string()),
                ("zk_cnt_readlatency", c.reads.to_string()),
                ("zk_cnt_updatelatency", c.updates.to_string()),
                ("zk_sum_node_created_watch_count", c.fired[0].to_string()),
                ("zk_sum_node_deleted_watch_count", c.fired[1].to_string()),
                ("zk_sum_node_changed_watch_count", c.fired[2].to_string()),
                ("zk_sum_node_children_watch_count", c.fired[3].to_string()),
            ];
            for (k, v) in lines {
                let _ = writeln!(s, "{k}\t{v}");
            }
        }
        "cons" => {
            clients(&mut s);
            s.push('\n');
        }
        "wchs" => {
            let _ = writeln!(
                s,
                "{} connections watching {} paths\nTotal watches:{}",
                m.watches_by_session().len(),
                stats.watched_paths,
                stats.watches
            );
        }
        "wchc" | "wchp" => {
            if word == "wchc" {
                for (session, paths) in m.watches_by_session() {
                    let _ = writeln!(s, "0x{session:x}");
                    for p in paths {
                        let _ = writeln!(s, "\t{p}");
                    }
                }
            } else {
                let mut by_path: std::collections::BTreeMap<String, Vec<i64>> = Default::default();
                for (session, paths) in m.watches_by_session() {
                    for p in paths {
                        by_path.entry(p).or_default().push(session);
                    }
                }
                for (p, sessions) in by_path {
                    let _ = writeln!(s, "{p}");
                    for id in sessions {
                        let _ = writeln!(s, "\t0x{id:x}");
                    }
                }
            }
        }
        "dump" => {
            let sessions = m.sessions_dump();
            let _ = writeln!(s, "SessionTracker dump:");
            let _ = writeln!(s, "Global Sessions({}):", sessions.len());
            for (id, (timeout, _)) in &sessions {
                let _ = writeln!(s, "0x{id:x}\t{timeout}ms");
            }
            let _ = writeln!(s, "ephemeral nodes dump:");
            let with: Vec<_> = sessions
                .iter()
                .filter(|(_, (_, e))| !e.is_empty())
                .collect();
            let _ = writeln!(s, "Sessions with Ephemerals ({}):", with.len());
            for (id, (_, eph)) in with {
                let _ = writeln!(s, "0x{id:x}:");
                for p in eph {
                    let _ = writeln!(s, "\t{p}");
                }
            }
            let _ = writeln!(s, "Connections dump:");
            let _ = writeln!(s, "Connections Sets (1)/({}):", shared.outboxes.len());
        }
        "conf" => {
            let cfg = &inner.cfg;
            let mc = &m.cfg;
            let _ = writeln!(s, "clientPort={}", inner.port);
            let _ = writeln!(s, "clientPortAddress=127.0.0.1:{}", inner.port);
            let _ = writeln!(s, "dataDir=(in memory)");
            let _ = writeln!(s, "tickTime={}", mc.tick_ms);
            let _ = writeln!(s, "maxClientCnxns=0");
            let _ = writeln!(s, "minSessionTimeout={}", mc.min_session_timeout_ms);
            let _ = writeln!(s, "maxSessionTimeout={}", mc.max_session_timeout_ms);
            let _ = writeln!(s, "clientPortListenBacklog=-1");
            let _ = writeln!(s, "serverId=0");
            let _ = writeln!(s, "jute.maxbuffer={}", cfg.max_buffer);
            let _ = writeln!(
                s,
                "znode.container.checkIntervalMs={}",
                cfg.container_check_interval.as_millis()
            );
        }
        "envi" => {
            let _ = writeln!(s, "Environment:");
            let _ = writeln!(s, "zookeeper.version={VERSION}");
            let _ = writeln!(s, "os.name={}", std::env::consts::OS);
            let _ = writeln!(s, "os.arch={}", std::env::consts::ARCH);
        }
        _ => {}
    }
    s
}
