//! Sessions and the faults that befall them: expiry at the server, a connection dropped
//! (requests in flight applied or not), a partition noticed late, a frozen process, and a
//! reconnect that keeps the session (re-arming its watches, possibly missing a change) or
//! learns that it has ended.

use std::collections::{BTreeMap, VecDeque};
use std::task::Waker;
use std::time::Duration;

use super::{Msg, Request, WatchKind, World, ZkErr};
use crate::session::lease::Lease;
use crate::session::Liveness;
use crate::wire as zk;

/// One session: the server's view (alive, last heard), the connection, and the client's view.
pub(crate) struct SessionRecord {
    pub(crate) timeout: Duration,
    /// The server has expired (or closed) it.
    pub(super) server_ended: bool,
    pub(super) last_heard: Duration,
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
    pub(super) outbox: VecDeque<Request>,
    pub(super) inbox: VecDeque<Msg>,
    /// Requests issued while disconnected, sent once reconnected.
    pub(super) parked: VecDeque<Request>,
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
    pub(crate) fn open_session(&mut self, timeout: Duration) -> i64 {
        let id = self.next_session;
        self.next_session += 1;
        self.open_session_with_id(id, timeout);
        id
    }

    pub(super) fn open_session_with_id(&mut self, id: i64, timeout: Duration) {
        let lease = Lease::new(self.instant(), timeout);
        self.sessions.insert(
            id,
            SessionRecord {
                timeout,
                server_ended: false,
                last_heard: self.now,
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

    /// The server expires `id`: its ephemerals go (firing the watches of others), its watches
    /// with them; the client learns it when it next reaches the server.
    pub(crate) fn expire(&mut self, id: i64) {
        if self.session(id).server_ended {
            return;
        }
        self.note(|| format!("server expires session {id:#x}"));
        self.session_mut(id).server_ended = true;
        let ids: Vec<u64> = self
            .watches
            .iter()
            .filter(|(_, w)| w.session == id)
            .map(|(k, _)| *k)
            .collect();
        for w in ids {
            self.watches.get_mut(&w).expect("listed").armed = false;
        }
        let owned: Vec<String> = self
            .nodes
            .iter()
            .filter(|(_, n)| n.stat.ephemeral_owner == id)
            .map(|(p, _)| p.clone())
            .collect();
        for path in owned {
            self.zxid += 1;
            let _ = self.delete_node(&path);
        }
        // A connection still up is closed by the server.
        if self.session(id).link_up && self.session(id).frozen_until.is_none() {
            self.drop_link(id);
        }
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
        for request in outbox {
            if !self.session(id).server_ended && self.rng.chance(self.applied_percent) {
                let applied = self.apply(id, &request.op);
                self.discard(&applied);
            }
            self.fail_request(id, request);
        }
        for msg in inbox {
            if let Msg::Reply { slot, outcome, .. } = msg {
                self.discard(&outcome);
                self.fail_slot(id, slot);
            }
        }
        for w in self.watches.values_mut() {
            if w.session == id {
                w.armed = false;
            }
        }
        self.set_liveness(id, Liveness::Disconnected);
    }

    /// A request lost with the connection: background work waits to be sent again, anything
    /// else fails with a connection loss.
    pub(super) fn fail_request(&mut self, id: i64, request: Request) {
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

    /// The client reconnects: to its session if the server still has it (its watches are
    /// re-armed, each possibly missing a change), else it learns that the session ended.
    pub(crate) fn reconnect(&mut self, id: i64) {
        let s = self.session(id);
        if s.link_up || s.liveness == Liveness::Ended || s.frozen_until.is_some() {
            return;
        }
        if s.server_ended {
            self.end_client(id);
            return;
        }
        self.note(|| format!("session {id:#x} reconnects"));
        let now = self.now;
        let instant = self.instant();
        let s = self.session_mut(id);
        s.link_up = true;
        s.last_heard = now;
        s.lease.renew(instant);
        let seen = s.seen_zxid;
        let parked = std::mem::take(&mut s.parked);
        s.outbox.extend(parked);
        // SetWatches: each watch the client still holds is re-armed, or fires at once if what
        // it watches changed after the client's last seen zxid; some changes are missed.
        let ids: Vec<u64> = self
            .watches
            .iter()
            .filter(|(_, w)| w.session == id && !w.armed && w.fired.is_none())
            .map(|(k, _)| *k)
            .collect();
        for w in ids {
            if !self.robust.contains(&w) && self.rng.chance(self.lose_watch_percent) {
                self.note(|| format!("watch {w} of {id:#x} lost across the reconnect"));
                continue;
            }
            let (kind, path) = {
                let reg = &self.watches[&w];
                (reg.kind, reg.path.clone())
            };
            let event = match (kind, self.nodes.get(&path)) {
                (_, None) => Some(zk::EventType::NodeDeleted),
                (WatchKind::Data, Some(n)) if n.stat.mzxid > seen => {
                    Some(zk::EventType::NodeDataChanged)
                }
                (WatchKind::Child, Some(n)) if n.stat.pzxid > seen => {
                    Some(zk::EventType::NodeChildrenChanged)
                }
                _ => None,
            };
            match event {
                Some(event) => {
                    let zxid = self.zxid;
                    self.session_mut(id)
                        .inbox
                        .push_back(Msg::Event { watch: w, event });
                    let _ = zxid;
                }
                None => self.watches.get_mut(&w).expect("listed").armed = true,
            }
        }
        self.set_liveness(id, Liveness::Connected);
    }

    /// The client learns that its session has ended: its calls fail, its watches report the
    /// session's end.
    pub(super) fn end_client(&mut self, id: i64) {
        self.note(|| format!("session {id:#x} learns it has ended"));
        let s = self.session_mut(id);
        s.link_up = false;
        let requests: Vec<Request> = s.parked.drain(..).chain(s.outbox.drain(..)).collect();
        let replies: Vec<u64> = s
            .inbox
            .drain(..)
            .filter_map(|m| match m {
                Msg::Reply { slot, .. } => Some(slot),
                Msg::Event { .. } => None,
            })
            .collect();
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
