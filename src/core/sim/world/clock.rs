//! The virtual clock: timers, the next instant anything is due, and advancing time (the
//! keepalive heard, sessions expired, frozen processes woken, partitions noticed).

use std::task::Waker;
use std::time::Duration;

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
            .flat_map(|(_, s)| {
                let expiry = (!s.server_ended).then(|| s.last_heard + s.timeout);
                [s.frozen_until, s.partitioned_until_noticed, expiry]
            });
        timers
            .into_iter()
            .chain(sessions.flatten())
            .filter(|at| *at > self.now)
            .min()
    }

    /// Moves the clock to `to`: sessions whose connection carries traffic are heard from (the
    /// keepalive renews their lease), the rest may expire; frozen processes wake, partitions
    /// are noticed, timers fire.
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
                if self.session(id).server_ended && self.session(id).link_up {
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
            let s = self.session(id);
            if s.server_ended {
                continue;
            }
            if self.flows(id) && s.liveness == Liveness::Connected {
                // The keepalive (a sync every third of the timeout) is answered.
                let s = self.session_mut(id);
                s.last_heard = to;
                s.lease.renew(instant);
            } else if to >= s.last_heard + s.timeout {
                self.expire(id);
            }
        }
        while let Some(entry) = self.timers.first_entry() {
            if entry.key().0 > to {
                break;
            }
            entry.remove().wake();
        }
    }
}
