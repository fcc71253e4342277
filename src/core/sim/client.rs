//! A simulated session behind the [`ZkSession`] seam: each call goes through the simulated
//! connection as the real [`Session`](crate::session::Session)'s does (reads and syncs retried
//! after a lost connection, a create pipelined with its listing and reported `Unknown` when its
//! answer is lost), measured on the virtual clock.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::core::floors::Floors;
use crate::core::session_view::{Elapsed, Fired};
use crate::error::{Error, Result};
use crate::session::create::Create;
use crate::session::listing::{Children, Listed};
use crate::session::seam::fired;
use crate::session::{Liveness, NodeStat};

use super::world::{Background, Mode, Op, Reply, World, ZkErr};
use crate::core::seam::{NodeStore, SessionFacts, ZkSession};

/// The world, shared by the simulated sessions and the scheduler.
pub(crate) type Shared = Arc<Mutex<World>>;

/// Pause before retrying a request that got no answer while still connected (as the session's
/// `RETRY_PAUSE`).
const RETRY_PAUSE: Duration = Duration::from_millis(20);

/// One simulated client session.
pub(crate) struct SimSession {
    pub(crate) world: Shared,
    pub(crate) id: i64,
    floors: Floors,
    /// The latest listing of each lock path through [`ZkSession::list_since`], with when it was
    /// sent: the waiters of the session share it, as they share the session's listings
    /// (`session/listing.rs`: a waiter gets any listing sent no earlier than it asks for).
    shared: Mutex<std::collections::BTreeMap<String, (Instant, Listed, i64)>>,
}

impl SimSession {
    pub(crate) fn new(world: &Shared, id: i64) -> SimSession {
        SimSession {
            world: world.clone(),
            id,
            floors: Floors::default(),
            shared: Mutex::default(),
        }
    }

    fn since_origin(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.world.lock().origin)
    }

    /// Sends `op` now; the future waits for its answer until `deadline`.
    fn call(&self, op: Op, deadline: Option<Instant>) -> Call {
        let deadline = deadline.map(|d| self.since_origin(d));
        let slot = self.world.lock().send(self.id, op);
        Call {
            world: self.world.clone(),
            id: self.id,
            slot,
            deadline,
            done: false,
        }
    }

    /// One request, retried after a lost connection as the session's `retry_async` does.
    async fn retrying(&self, op: Op, deadline: Option<Instant>) -> Result<Reply> {
        loop {
            match self.call(op.clone(), deadline).await {
                Ok(reply) => return Ok(reply),
                Err(Failed::Zk(ZkErr::ConnectionLoss)) => {
                    if self.liveness() == Liveness::Connected {
                        let pause = self.world.lock().instant() + RETRY_PAUSE;
                        self.sleep_until(pause).await;
                    }
                    self.wait_connected(deadline).await?;
                }
                Err(Failed::Zk(ZkErr::SessionExpired)) => return Err(self.ended_error()),
                Err(Failed::Zk(ZkErr::NoNode)) => return Err(Error::NoNode { path: op_path(&op) }),
                Err(Failed::Zk(ZkErr::NodeExists | ZkErr::NotEmpty | ZkErr::Other(_))) => {
                    // None of the seam's retried requests can get these (a plain create of a
                    // container handles NodeExists itself).
                    return Err(Error::NoNode { path: op_path(&op) });
                }
                Err(Failed::Deadline) => return Err(Error::connection_loss()),
            }
        }
    }
}

fn op_path(op: &Op) -> String {
    match op {
        Op::Create { path, .. }
        | Op::Delete { path }
        | Op::Children { path, .. }
        | Op::GetData { path, .. }
        | Op::SetData { path } => path.clone(),
        Op::Sync => "/".to_owned(),
    }
}

/// Why a call got no answer.
#[derive(Debug)]
enum Failed {
    Zk(ZkErr),
    Deadline,
}

/// A request in flight; dropped unanswered, it is given up on (see [`World::abandon`]).
struct Call {
    world: Shared,
    id: i64,
    slot: u64,
    deadline: Option<Duration>,
    done: bool,
}

impl Future for Call {
    type Output = std::result::Result<Reply, Failed>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let mut world = this.world.lock();
        if let Some(outcome) = world.take(this.slot, cx.waker()) {
            this.done = true;
            return Poll::Ready(outcome.map_err(Failed::Zk));
        }
        match this.deadline {
            Some(deadline) if world.now >= deadline => {
                world.abandon(this.id, this.slot);
                this.done = true;
                Poll::Ready(Err(Failed::Deadline))
            }
            Some(deadline) => {
                world.add_timer(deadline, cx.waker());
                Poll::Pending
            }
            None => Poll::Pending,
        }
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if !self.done {
            self.world.lock().abandon(self.id, self.slot);
        }
    }
}

/// A watch set through the simulated session; dropped unfired, it is removed at the server.
pub(crate) struct SimWatch {
    world: Shared,
    id: u64,
}

impl Drop for SimWatch {
    fn drop(&mut self) {
        self.world.lock().unwatch(self.id);
    }
}

/// A node created by a create whose operation has not returned yet: deleted in the background
/// unless disarmed.
struct PendingNode<'a> {
    session: &'a SimSession,
    path: Option<String>,
}

impl PendingNode<'_> {
    fn disarm(mut self) {
        self.path = None;
    }
}

impl Drop for PendingNode<'_> {
    fn drop(&mut self) {
        if let Some(path) = self.path.take() {
            let work = Background::Delete { path, ticket: None };
            self.session
                .world
                .lock()
                .background(self.session.id, work, None);
        }
    }
}

/// A sleep on the virtual clock.
pub(crate) struct Sleep {
    world: Shared,
    at: Duration,
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut world = self.world.lock();
        if world.now >= self.at {
            return Poll::Ready(());
        }
        world.add_timer(self.at, cx.waker());
        Poll::Pending
    }
}

pub(crate) fn sleep_until(world: &Shared, at: Duration) -> Sleep {
    Sleep {
        world: world.clone(),
        at,
    }
}

impl NodeStore for SimSession {
    async fn create<D: Send + 'static>(
        &self,
        lock_path: &str,
        prefix: &str,
        _data: &[u8],
        deadline: Option<Instant>,
        // Whether a stopped caller waits for a late node's deletion is the front end's timing,
        // which the simulation leaves out; the deletion itself is modelled (`PendingNode`).
        _settling: impl FnOnce() -> D + Send,
    ) -> Result<Create> {
        self.world.lock().session_mut_calls(self.id, "create");
        if self.liveness() == Liveness::Ended {
            return Err(self.ended_error());
        }
        let create = self.call(
            Op::Create {
                path: format!("{lock_path}/{prefix}"),
                mode: Mode::Ephemeral,
                sequential: true,
            },
            deadline,
        );
        // Pipelined behind the create on the same connection: it shows our node and every
        // node created before it.
        let listing = self.call(
            Op::Children {
                path: lock_path.to_owned(),
                watch: false,
            },
            deadline,
        );
        match create.await {
            Ok(Reply::Created { path, stat }) => {
                // As the session's `PendingCreate`: the create and its listing are one
                // operation; given up on before both are answered (dropped, or past the
                // deadline), the node is deleted in the background.
                let pending = PendingNode {
                    session: self,
                    path: Some(path.clone()),
                };
                let name = path[lock_path.len() + 1..].to_owned();
                let (children, parent) = match listing.await {
                    Ok(Reply::Children { names, stat, .. }) => {
                        (Some(names), Some(NodeStat::from(&stat)))
                    }
                    Err(Failed::Deadline) => return Ok(Create::Elapsed(Elapsed)),
                    _ => (None, None),
                };
                pending.disarm();
                Ok(Create::Created {
                    name,
                    stat: NodeStat::from(&stat),
                    children,
                    parent,
                })
            }
            Ok(_) => unreachable!("a create is answered with its node"),
            Err(Failed::Zk(ZkErr::NoNode)) => Ok(Create::ParentMissing),
            Err(Failed::Zk(ZkErr::ConnectionLoss)) => Ok(Create::Unknown),
            Err(Failed::Zk(ZkErr::SessionExpired)) => Err(self.ended_error()),
            Err(Failed::Zk(ZkErr::NodeExists | ZkErr::NotEmpty | ZkErr::Other(_))) => {
                Ok(Create::Unknown)
            }
            Err(Failed::Deadline) => Ok(Create::Elapsed(Elapsed)),
        }
    }

    async fn wait_connected(&self, deadline: Option<Instant>) -> Result<()> {
        loop {
            match self.liveness() {
                Liveness::Connected => return Ok(()),
                Liveness::Ended => return Err(self.ended_error()),
                Liveness::Disconnected => {}
            }
            let mut states = self.states();
            let changed = Self::state_changed(&mut states);
            let timer = deadline.map(|d| self.sleep_until(d));
            let mut changed = std::pin::pin!(changed);
            let mut timer = std::pin::pin!(timer);
            let timed_out = poll_fn(|cx| {
                if changed.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(false);
                }
                match timer.as_mut().as_pin_mut().map(|t| t.poll(cx)) {
                    Some(Poll::Ready(())) => Poll::Ready(true),
                    _ => Poll::Pending,
                }
            })
            .await;
            if timed_out {
                return Err(Error::connection_loss());
            }
        }
    }

    async fn sync(&self, _path: &str, deadline: Option<Instant>) -> Result<()> {
        self.world.lock().session_mut_calls(self.id, "sync");
        self.retrying(Op::Sync, deadline).await.map(|_| ())
    }

    async fn list(&self, path: &str, deadline: Option<Instant>) -> Result<Vec<String>> {
        self.world.lock().session_mut_calls(self.id, "list");
        let op = Op::Children {
            path: path.to_owned(),
            watch: false,
        };
        match self.retrying(op, deadline).await? {
            Reply::Children { names, .. } => Ok(names),
            _ => unreachable!("a listing is answered with children"),
        }
    }

    async fn stat(&self, path: &str, deadline: Option<Instant>) -> Result<Option<NodeStat>> {
        let op = Op::GetData {
            path: path.to_owned(),
            watch: false,
        };
        match self.retrying(op, deadline).await {
            Ok(Reply::Data { stat, .. }) => Ok(Some(NodeStat::from(&stat))),
            Ok(_) => unreachable!("a read is answered with a stat"),
            Err(Error::NoNode { .. }) => Ok(None),
            Err(err) => Err(err),
        }
    }

    async fn ensure_path(&self, path: &str, deadline: Option<Instant>) -> Result<()> {
        self.world.lock().session_mut_calls(self.id, "ensure_path");
        let mut at = String::new();
        for part in path.split('/').filter(|p| !p.is_empty()) {
            at.push('/');
            at.push_str(part);
            loop {
                let op = Op::Create {
                    path: at.clone(),
                    mode: Mode::Container,
                    sequential: false,
                };
                match self.call(op, deadline).await {
                    Ok(_) | Err(Failed::Zk(ZkErr::NodeExists)) => break,
                    Err(Failed::Zk(ZkErr::ConnectionLoss)) => self.wait_connected(deadline).await?,
                    Err(Failed::Zk(ZkErr::SessionExpired)) => return Err(self.ended_error()),
                    Err(Failed::Zk(_)) => return Err(Error::NoNode { path: at }),
                    Err(Failed::Deadline) => return Err(Error::connection_loss()),
                }
            }
        }
        Ok(())
    }

    fn sweep(&self, lock_path: &str, prefix: &str) {
        let mut world = self.world.lock();
        world.session_swept(self.id, prefix);
        let work = Background::Sweep {
            parent: lock_path.to_owned(),
            prefix: prefix.to_owned(),
        };
        world.background(self.id, work, None);
    }

    fn now(&self) -> Instant {
        self.world.lock().instant()
    }

    fn sleep_until(&self, at: Instant) -> impl Future<Output = ()> + Send {
        sleep_until(&self.world, self.since_origin(at))
    }

    fn unique_id(&self) -> crate::random::Uuid {
        let mut world = self.world.lock();
        world.ids += 1;
        crate::random::Uuid::from_u128(u128::from(world.ids))
    }
}

impl SessionFacts for SimSession {
    fn id(&self) -> i64 {
        self.id
    }
    fn liveness(&self) -> Liveness {
        self.world.lock().session(self.id).liveness
    }
    fn ended_error(&self) -> Error {
        Error::SessionExpired
    }
}

impl ZkSession for SimSession {
    type Watch = SimWatch;
    type States = (Shared, i64, u64);

    async fn list_since(
        &self,
        lock_path: &str,
        deadline: Option<Instant>,
        since: Instant,
    ) -> Result<Listed> {
        // The contract of the session's shared listings, not their bookkeeping: the latest
        // listing sent no earlier than `since`, however old its answer, else a new one. (Sent
        // strictly later: on the virtual clock many steps share an instant, and a listing
        // sent at `since` may have been sent before what the caller waits for.)
        if let Some((sent, listed, zxid)) = self.shared.lock().get(lock_path) {
            if *sent > since {
                let id = self.id;
                let mut world = self.world.lock();
                world.note(|| format!("{id:#x} shares a listing of {lock_path}"));
                // (For the checks: this task read that answer.)
                world.read_by_task(*zxid, "children");
                return Ok(listed.clone());
            }
        }
        let sent = self.now();
        let listed = self.list_with_stat(lock_path, deadline).await?;
        let zxid = self.world.lock().last_taken;
        let mut shared = self.shared.lock();
        if shared.get(lock_path).is_none_or(|(at, _, _)| *at < sent) {
            shared.insert(lock_path.to_owned(), (sent, listed.clone(), zxid));
        }
        Ok(listed)
    }
    async fn list_with_stat(&self, path: &str, deadline: Option<Instant>) -> Result<Listed> {
        let op = Op::Children {
            path: path.to_owned(),
            watch: false,
        };
        match self.retrying(op, deadline).await? {
            Reply::Children { names, stat, .. } => Ok(Children::new(names, NodeStat::from(&stat))),
            _ => unreachable!("a listing is answered with children"),
        }
    }
    async fn watch_node(&self, path: &str, deadline: Option<Instant>) -> Result<Option<SimWatch>> {
        let op = Op::GetData {
            path: path.to_owned(),
            watch: true,
        };
        match self.retrying(op, deadline).await {
            Ok(Reply::Data { watch, .. }) => Ok(watch.map(|id| SimWatch {
                world: self.world.clone(),
                id,
            })),
            Ok(_) => unreachable!("a read is answered with a stat"),
            Err(Error::NoNode { .. }) => Ok(None),
            Err(err) => Err(err),
        }
    }
    async fn watch_children(
        &self,
        path: &str,
        deadline: Option<Instant>,
    ) -> Result<(Vec<String>, SimWatch)> {
        let op = Op::Children {
            path: path.to_owned(),
            watch: true,
        };
        match self.retrying(op, deadline).await? {
            Reply::Children {
                names,
                watch: Some(id),
                ..
            } => Ok((
                names,
                SimWatch {
                    world: self.world.clone(),
                    id,
                },
            )),
            _ => unreachable!("a watched listing is answered with children and a watch"),
        }
    }
    fn fired(watch: SimWatch) -> impl Future<Output = Fired> + Send {
        poll_fn(move |cx| {
            let mut world = watch.world.lock();
            match world.watch_fired(watch.id, cx.waker()) {
                Some(Some(event)) => Poll::Ready(fired(event)),
                Some(None) => Poll::Pending,
                // Removed under us: only the session's end does that.
                None => Poll::Ready(Fired::SessionEnded),
            }
        })
    }
    fn states(&self) -> Self::States {
        let seen = self.world.lock().state_changes(self.id);
        (self.world.clone(), self.id, seen)
    }
    fn state_changed(states: &mut Self::States) -> impl Future<Output = ()> + Send + '_ {
        poll_fn(move |cx| {
            let (world, id, seen) = &mut *states;
            let mut world = world.lock();
            let now = world.state_changes(*id);
            if now != *seen {
                *seen = now;
                return Poll::Ready(());
            }
            world.wait_state_change(*id, cx.waker());
            Poll::Pending
        })
    }
    fn withdraw_in_background(&self, path: &str, done: impl Send + 'static) {
        let mut world = self.world.lock();
        let ticket = world.ticket(Some(Box::new(done)));
        let work = Background::Delete {
            path: path.to_owned(),
            ticket: Some(ticket),
        };
        world.background(self.id, work, None);
    }
    fn floors(&self) -> &Floors {
        &self.floors
    }
}
