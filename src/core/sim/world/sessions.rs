//! Sessions' connections and the faults that befall them: a connection dropped (requests in
//! flight applied or not), a partition noticed late, a frozen process, and a reconnect that
//! resumes the session at the model (SetWatches re-arming its watches, some possibly left
//! out) or learns that it has ended. The server's side of a session (its expiry, its
//! ephemerals) is the model's.

use std::collections::{BTreeMap, VecDeque};
use std::task::Waker;
use std::time::Duration;

use zklock_proto::{ConnectRequest, Request, SetWatches2};
use zklock_server::model::{ConnId, Connected};

use super::requests::{Msg, Request as Queued};
use super::{WatchKind, World, ZkErr, OPERATOR};
use crate::session::lease::Lease;
use crate::session::Liveness;
use crate::wire as zk;

/// One session: its connection, and the client's view.
pub(crate) struct SessionRecord {
    /// The timeout the server granted.
    pub(crate) timeout: Duration,
    /// Its connection at the model (the latest, if none is up).
    pub(super) conn: ConnId,
    /// The session's password, to resume it on a new connection.
    passwd: Vec<u8>,
    /// The connection is up: requests and messages can move.
    pub(super) link_up: bool,
    /// The connection is up but carries nothing (a partition the client has yet to notice),
    /// until the client drops it at this instant.
    pub(super) partitioned_until_noticed: Option<Duration>,
    /// The process is frozen (SIGSTOP, a long pause): none of its tasks run, nothing it sends
    /// or receives moves, and the server does not hear from it.
    pub(crate) frozen_until: Option<Duration>,
    /// What the client believes.
    pub(crate) liveness: Liveness,
    /// When the client learnt that the session had ended.
    pub(crate) ended_at: Option<Duration>,
    pub(super) state_changes: u64,
    pub(super) state_wakers: Vec<Waker>,
    pub(super) outbox: VecDeque<Queued>,
    pub(super) inbox: VecDeque<Msg>,
    /// Requests issued while disconnected, sent once reconnected.
    pub(super) parked: VecDeque<Queued>,
    pub(crate) lease: Lease,
    /// The zxid of the latest reply this client received (its `lastZxidSeen`).
    pub(crate) seen_zxid: i64,
    /// Ops the server processed for it, by label.
    pub(super) processed: BTreeMap<&'static str, usize>,
    /// The paths it watched with getData, in order.
    pub(crate) watched: Vec<String>,
    /// The API calls its seam received, in order (`create`, `sync`, `list`, ...).
    pub(crate) calls: Vec<&'static str>,
    /// Prefixes swept.
    pub(crate) swept: Vec<String>,
}

impl World {
    /// Opens a session with `timeout` at the model, on a connection of its own.
    pub(crate) fn open_session(&mut self, timeout: Duration) -> i64 {
        let conn = self.new_conn();
        let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        let handshake = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout: ms,
            session_id: 0,
            passwd: vec![0; 16],
            read_only: None,
        };
        let mut out = Vec::new();
        let now = self.model_now();
        let Connected::Reply { response, .. } =
            self.model
                .connect(conn, "127.0.0.1", &handshake, now, &mut out)
        else {
            unreachable!("a new session is always granted");
        };
        self.carry_out(out);
        let id = response.session_id;
        self.conns.insert(conn, id);
        let lease = Lease::new(self.instant(), timeout);
        let timeout = Duration::from_millis(u64::try_from(response.timeout).unwrap_or(0));
        self.sessions.insert(
            id,
            SessionRecord {
                timeout,
                conn,
                passwd: response.passwd,
                link_up: true,
                partitioned_until_noticed: None,
                frozen_until: None,
                liveness: Liveness::Connected,
                state_changes: 0,
                state_wakers: Vec::new(),
                outbox: VecDeque::new(),
                inbox: VecDeque::new(),
                parked: VecDeque::new(),
                lease,
                seen_zxid: 0,
                ended_at: None,
                processed: BTreeMap::new(),
                watched: Vec::new(),
                calls: Vec::new(),
                swept: Vec::new(),
            },
        );
        id
    }

    /// The operator's session ([`OPERATOR`], never expiring while the clock moves): its
    /// connection watches the whole tree. The sessions after it are numbered from `next`.
    pub(super) fn open_operator(&mut self, next: i64) {
        let (_, secret) = self.model.seeds();
        self.model.set_seeds(OPERATOR, secret);
        let id = self.open_session(Duration::from_secs(3600));
        debug_assert_eq!(id, OPERATOR);
        self.model.set_seeds(next, secret);
        self.operator_conn = self.session(OPERATOR).conn;
        let watch = Request::AddWatch(zklock_proto::AddWatchRequest {
            path: "/".into(),
            mode: zklock_proto::add_watch_mode::PERSISTENT_RECURSIVE,
        });
        let _ = self.request(self.operator_conn, watch);
    }

    fn new_conn(&mut self) -> ConnId {
        let conn = self.next_conn;
        self.next_conn += 1;
        conn
    }

    /// Whether the server has ended `id` (expired or closed it).
    pub(crate) fn server_ended(&self, id: i64) -> bool {
        self.model.session_expiry(id).is_none()
    }

    pub(crate) fn session(&self, id: i64) -> &SessionRecord {
        &self.sessions[&id]
    }

    pub(super) fn session_mut(&mut self, id: i64) -> &mut SessionRecord {
        self.sessions.get_mut(&id).expect("a simulated session")
    }

    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn processed(&self, id: i64, label: &str) -> usize {
        self.session(id).processed.get(label).copied().unwrap_or(0)
    }

    pub(crate) fn state_changes(&self, id: i64) -> u64 {
        self.session(id).state_changes
    }

    pub(crate) fn wait_state_change(&mut self, id: i64, waker: &Waker) {
        self.session_mut(id).state_wakers.push(waker.clone());
    }

    pub(super) fn set_liveness(&mut self, id: i64, liveness: Liveness) {
        let now = self.now;
        let s = self.session_mut(id);
        if s.liveness == liveness {
            return;
        }
        s.liveness = liveness;
        s.state_changes += 1;
        if liveness == Liveness::Ended {
            s.ended_at = s.ended_at.or(Some(now));
        }
        for waker in std::mem::take(&mut s.state_wakers) {
            waker.wake();
        }
        self.note(|| format!("session {id:#x} client sees {liveness:?}"));
    }

    /// The connection drops: requests in flight are applied or not (the client cannot tell),
    /// replies and notifications on their way are lost, and the server forgets the session's
    /// watches until a reconnect re-arms them.
    pub(crate) fn drop_link(&mut self, id: i64) {
        if !self.session(id).link_up {
            return;
        }
        self.note(|| format!("connection of {id:#x} drops"));
        let s = self.session_mut(id);
        s.link_up = false;
        s.partitioned_until_noticed = None;
        let outbox = std::mem::take(&mut s.outbox);
        let inbox = std::mem::take(&mut s.inbox);
        // Nothing reaches the client on this connection any more.
        let conn = s.conn;
        self.conns.remove(&conn);
        let mut failed = Vec::new();
        for request in outbox {
            // Applied before the connection went (the reply is lost with it), or never seen.
            if !self.server_ended(id) && self.rng.chance(self.applied_percent) {
                let applied = self.apply(id, &request.op);
                self.discard(&applied);
            }
            failed.push(request);
        }
        // The server forgets the connection, and its watches with it.
        self.model.disconnect(conn);
        for request in failed {
            self.fail_request(id, request);
        }
        for msg in inbox {
            if let Msg::Reply { slot, outcome, .. } = msg {
                self.discard(&outcome);
                self.fail_slot(id, slot);
            }
        }
        self.set_liveness(id, Liveness::Disconnected);
    }

    /// A request lost with the connection: background work waits to be sent again, anything
    /// else fails with a connection loss.
    pub(super) fn fail_request(&mut self, id: i64, request: Queued) {
        let background = self
            .slots
            .get(&request.slot)
            .is_some_and(|s| s.background.is_some());
        if background {
            self.session_mut(id).parked.push_back(request);
        } else {
            self.fill(request.slot, Err(ZkErr::ConnectionLoss));
        }
    }

    pub(super) fn fail_slot(&mut self, id: i64, slot: u64) {
        let background = self.slots.get(&slot).and_then(|s| s.background.clone());
        match background {
            // Its answer was lost: send it again (a delete answered NoNode then settles it).
            Some(work) => self.background(id, work, Some(slot)),
            None => self.fill(slot, Err(ZkErr::ConnectionLoss)),
        }
    }

    /// A partition the client notices only `notice` later (when it then drops the link).
    pub(crate) fn partition(&mut self, id: i64, notice: Duration) {
        let now = self.now;
        let s = self.session_mut(id);
        if s.link_up && s.partitioned_until_noticed.is_none() {
            s.partitioned_until_noticed = Some(now + notice);
            self.note(|| format!("connection of {id:#x} goes silent"));
        }
    }

    pub(crate) fn freeze(&mut self, id: i64, length: Duration) {
        if length.is_zero() {
            // No pause at all (and the clock would never move to thaw it: `next_due` looks
            // only past now; the 2,000,000-seed sweep's seed 1558670).
            return;
        }
        let until = self.now + length;
        self.session_mut(id).frozen_until = Some(until);
        self.note(|| format!("process of {id:#x} frozen for {length:?}"));
    }

    pub(crate) fn frozen(&self, id: i64) -> bool {
        self.session(id).frozen_until.is_some()
    }

    /// Whether some process is frozen: it still has work to do when it resumes (read an answer
    /// that waits in its inbox, withdraw a node), so the run is not quiet yet.
    pub(crate) fn any_frozen(&self) -> bool {
        self.sessions.values().any(|s| s.frozen_until.is_some())
    }

    /// Whether messages move on `id`'s connection.
    pub(super) fn flows(&self, id: i64) -> bool {
        let s = self.session(id);
        s.link_up && s.partitioned_until_noticed.is_none() && s.frozen_until.is_none()
    }

    /// The client reconnects: to its session if the server still has it (SetWatches re-arms
    /// its watches, or fires those whose node changed since what it last saw; some may be
    /// left out), else it learns that the session ended.
    pub(crate) fn reconnect(&mut self, id: i64) {
        let s = self.session(id);
        if s.link_up || s.liveness == Liveness::Ended || s.frozen_until.is_some() {
            return;
        }
        let handshake = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: s.seen_zxid,
            timeout: i32::try_from(s.timeout.as_millis()).unwrap_or(i32::MAX),
            session_id: id,
            passwd: s.passwd.clone(),
            read_only: None,
        };
        let seen = s.seen_zxid;
        let conn = self.new_conn();
        let mut out = Vec::new();
        let now = self.model_now();
        let connected = self
            .model
            .connect(conn, "127.0.0.1", &handshake, now, &mut out);
        self.carry_out(out);
        if !matches!(connected, Connected::Reply { valid: true, .. }) {
            self.model.disconnect(conn);
            self.end_client(id);
            return;
        }
        self.note(|| format!("session {id:#x} reconnects"));
        self.conns.insert(conn, id);
        let instant = self.instant();
        let s = self.session_mut(id);
        s.conn = conn;
        s.link_up = true;
        s.lease.renew(instant);
        let parked = std::mem::take(&mut s.parked);
        s.outbox.extend(parked);
        let watches = self.set_watches(id, seen);
        let _ = self.request(conn, Request::SetWatches2(watches));
        self.set_liveness(id, Liveness::Connected);
    }

    /// The SetWatches of `id`'s reconnect: the paths of its registrations still waiting,
    /// each left out with [`lose_watch_percent`](Self::lose_watch_percent) (unless robust).
    fn set_watches(&mut self, id: i64, seen: i64) -> SetWatches2 {
        let mut groups: BTreeMap<(WatchKind, String), bool> = BTreeMap::new();
        for (w, reg) in &self.watches {
            if reg.session == id && reg.active && reg.fired.is_none() {
                let robust = groups.entry((reg.kind, reg.path.clone())).or_default();
                *robust |= self.robust.contains(w);
            }
        }
        let mut watches = SetWatches2 {
            relative_zxid: seen,
            data_watches: Vec::new(),
            exist_watches: Vec::new(),
            child_watches: Vec::new(),
            persistent_watches: Vec::new(),
            persistent_recursive_watches: Vec::new(),
        };
        for ((kind, path), robust) in groups {
            if !robust && self.rng.chance(self.lose_watch_percent) {
                self.note(|| format!("the {kind:?} watch of {id:#x} on {path} is left out"));
                continue;
            }
            match kind {
                WatchKind::Data => watches.data_watches.push(path),
                WatchKind::Child => watches.child_watches.push(path),
            }
        }
        watches
    }

    /// The client learns that its session has ended: its calls fail, its watches report the
    /// session's end.
    pub(super) fn end_client(&mut self, id: i64) {
        self.note(|| format!("session {id:#x} learns it has ended"));
        let s = self.session_mut(id);
        s.link_up = false;
        let conn = s.conn;
        let requests: Vec<Queued> = s.parked.drain(..).chain(s.outbox.drain(..)).collect();
        let replies: Vec<u64> = s
            .inbox
            .drain(..)
            .filter_map(|m| match m {
                Msg::Reply { slot, .. } => Some(slot),
                Msg::Event { .. } => None,
            })
            .collect();
        self.conns.remove(&conn);
        self.model.disconnect(conn);
        // (Watches their replies set are reported ended below, with the others.)
        for slot in requests.into_iter().map(|r| r.slot).chain(replies) {
            self.fill(slot, Err(ZkErr::SessionExpired));
        }
        let ids: Vec<u64> = self
            .watches
            .iter()
            .filter(|(_, w)| w.session == id)
            .map(|(k, _)| *k)
            .collect();
        for w in ids {
            self.fire(w, zk::EventType::Session);
        }
        self.set_liveness(id, Liveness::Ended);
    }

    pub(crate) fn session_mut_calls(&mut self, id: i64, call: &'static str) {
        self.session_mut(id).calls.push(call);
    }

    pub(crate) fn session_swept(&mut self, id: i64, prefix: &str) {
        self.session_mut(id).swept.push(prefix.to_owned());
    }
}
