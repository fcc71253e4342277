//! The virtual clock: timers, the next instant anything is due, and advancing time (the
//! keepalive heard, sessions expired at the model, frozen processes woken, partitions noticed).

use std::task::Waker;
use std::time::Duration;

use zklock_proto::Request;

use super::{World, OPERATOR};
use crate::session::Liveness;

impl World {
    pub(crate) fn add_timer(&mut self, at: Duration, waker: &Waker) {
        self.next_timer += 1;
        self.timers.insert((at, self.next_timer), waker.clone());
    }

    /// The next instant anything is due: a timer, a frozen process waking, a partition
    /// noticed, a session expiring at the server.
    pub(crate) fn next_due(&self) -> Option<Duration> {
        let timers = self.timers.keys().next().map(|(at, _)| *at);
        let sessions = self
            .sessions
            .iter()
            .filter(|(id, _)| **id != OPERATOR)
            .flat_map(|(id, s)| {
                let expiry = self.model.session_expiry(*id).map(Duration::from_millis);
                [s.frozen_until, s.partitioned_until_noticed, expiry]
            });
        timers
            .into_iter()
            .chain(sessions.flatten())
            .filter(|at| *at > self.now)
            .min()
    }

    /// Moves the clock to `to`: sessions whose connection carries traffic are heard from (the
    /// keepalive renews their lease), the rest may expire at the server; frozen processes
    /// wake, partitions are noticed, timers fire.
    pub(crate) fn advance(&mut self, to: Duration) {
        if to <= self.now {
            return;
        }
        if let Some(every) = self.sweep_every {
            // The server's ContainerManager (`znode.container.checkIntervalMs`).
            let ticks = |t: Duration| t.as_nanos() / every.as_nanos().max(1);
            if ticks(to) > ticks(self.now) {
                self.sweep_containers();
            }
        }
        self.now = to;
        let instant = self.instant();
        let ids: Vec<i64> = self.sessions.keys().copied().collect();
        for id in ids {
            if id == OPERATOR {
                continue;
            }
            if self.session(id).frozen_until.is_some_and(|t| t <= to) {
                self.session_mut(id).frozen_until = None;
                self.note(|| format!("process of {id:#x} resumes"));
                if self.server_ended(id) && self.session(id).link_up {
                    // The server closed the connection meanwhile.
                    self.drop_link(id);
                }
            }
            if self
                .session(id)
                .partitioned_until_noticed
                .is_some_and(|t| t <= to)
            {
                self.drop_link(id);
            }
            if self.server_ended(id) {
                continue;
            }
            if self.flows(id) && self.session(id).liveness == Liveness::Connected {
                // The keepalive (a ping every third of the timeout) is answered.
                let conn = self.session(id).conn;
                let _ = self.request(conn, Request::Ping);
                self.session_mut(id).lease.renew(instant);
            }
        }
        let operator = self.operator_conn;
        let _ = self.request(operator, Request::Ping);
        // The rest expire once their time is up: ephemerals deleted, connections closed.
        let now = self.model_now();
        let due: Vec<i64> = self
            .sessions
            .keys()
            .copied()
            .filter(|id| {
                self.model
                    .session_expiry(*id)
                    .is_some_and(|at| at <= now.mono_ms)
            })
            .collect();
        for id in due {
            self.note(|| format!("server expires session {id:#x}"));
        }
        let mut out = Vec::new();
        self.model.expire_sessions(now, &mut out);
        self.carry_out(out);
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > to {
                break;
            }
            entry.remove().wake();
        }
    }
}
