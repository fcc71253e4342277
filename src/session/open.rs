//! Opening a session: dial, check or create the chroot, start the lease and its keepalive.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::rt::cancel::CancelToken;
use crate::rt::runtime::{deadline_after, on_thread, Runtime};
use crate::wire as zk;

use super::chroot::Chroot;
use super::config::SessionConfig;
use super::lease::Lease;
use super::releases::Releases;
use super::retry::retry_pause_async;
use super::{dial, proves_alive, until, Handles, Session};

/// Opens a session on `hosts`: dials within the connect timeout (and `deadline`), checks or
/// creates the chroot, and starts the lease and its keepalive.
///
/// Dialling blocks (the transport's connect and handshake are blocking socket calls, which
/// nothing can interrupt). The first connect, whose caller simply blocks, dials on the calling
/// thread (`stops: None`). A renewal, inside a call that a cancel token or the client's
/// closing must stop at once, dials on a short-lived thread of its own, which `stops` (the
/// client's close token) can wake, and awaits it: the call can then end promptly while the connect runs
/// out in the background. Everything after the dial is awaited on the caller's own executor.
pub(crate) async fn open_session(
    runtime: &Runtime,
    config: &SessionConfig,
    hosts: &[zk::Host],
    chroot: Option<&str>,
    releases: &Arc<Releases>,
    deadline: Option<Instant>,
    stops: Option<&CancelToken>,
) -> Result<Session> {
    let started = Instant::now();
    let connect_deadline = deadline_after(config.connect_timeout);
    let deadline = deadline.map_or(connect_deadline, |d| d.min(connect_deadline));
    // The session exists no earlier than the connect request: the lease starts from there.
    let (zk, connect_sent) = match stops {
        None => dial::dial(config, hosts, deadline, None)?,
        Some(stops) => {
            let (config, hosts, stops) = (config.clone(), hosts.to_vec(), stops.clone());
            on_thread("zklock-renew", move || {
                dial::dial(&config, &hosts, deadline, Some(&stops))
            })
            .await??
        }
    };
    let acl = config.security.acl;
    let parent_acl = config.security.parents();
    let identity = config.security.identity();
    let (zk, chroot) = match chroot {
        None => (zk, None),
        Some(root) => {
            let chroot = Chroot {
                path: root.to_owned(),
                root: zk.clone(),
            };
            let made = if config.require_chroot {
                // Whether it exists, not its stat: a chroot that denies this identity READ
                // answers a stat request with NoAuth on ZooKeeper 3.9 (with the stat on 3.8),
                // and the identity may still lock below it.
                until(Box::pin(chroot.root.exists(root)), Some(deadline))
                    .await
                    .map(|found| match found {
                        Ok(false) => Err(Error::NoChroot {
                            chroot: root.to_owned(),
                        }),
                        Ok(true) => Ok(()),
                        Err(err) => Err(Error::from_zk(err, root, &identity)),
                    })
                    .map_err(drop)
            } else {
                until(chroot.create(parent_acl), Some(deadline))
                    .await
                    .map(|made| made.map_err(|err| Error::from_zk(err, root, &identity)))
                    .map_err(drop)
            };
            match made {
                Ok(Ok(())) => {}
                Ok(Err(err)) => return Err(err),
                Err(()) => {
                    let reason = format!("could not create chroot {root}");
                    return Err(dial::gave_up(config, started, reason, Vec::new()));
                }
            }
            let zk = zk.chroot(root).map_err(|_| Error::InvalidConnectString {
                connect_string: config.connect_string.clone(),
                reason: "bad chroot".into(),
            })?;
            (zk, Some(chroot))
        }
    };
    let mut state = zk.state_watcher();
    state.state();
    let session = Session {
        id: zk.session_id(),
        timeout: zk.session_timeout(),
        lease: Arc::new(Lease::new(connect_sent, zk.session_timeout())),
        tasks: Mutex::new(Vec::new()),
        release_tasks: Mutex::new(Vec::new()),
        closed: AtomicBool::new(false),
        closing: Mutex::new(None),
        handles: Mutex::new(Some(Handles { zk, chroot })),
        state,
        acl,
        parent_acl,
        identity,
        pid: std::process::id(),
        handle: runtime.handle().clone(),
        releases: releases.clone(),
        closes: CancelToken::default(),
        creating: Default::default(),
        paths_seen: Default::default(),
        floors: Default::default(),
    };
    // A reconnect's handshake proves the session alive as a sync would (the leader validates
    // a session that moves), so holders read Held again without waiting behind other traffic.
    let lease = session.lease.clone();
    session.zk()?.on_session_proof(move |sent, timeout| {
        lease.set_timeout(timeout);
        lease.renew(sent);
    });
    let keepalive = keep_alive(
        session.zk()?,
        session.lease.clone(),
        session.state_watcher(),
    );
    session.spawn(keepalive);
    Ok(session)
}

/// Renews `lease` whenever a third of the session timeout passes without an answered request,
/// with a cheap read. It runs on the runtime thread on purpose: if that thread stalls, the
/// lease is not renewed and holders read "not held" in time, on their own threads.
async fn keep_alive(zk: zk::Transport, lease: Arc<Lease>, mut state: zk::StateWatcher) {
    loop {
        let due = lease.renewal_due();
        if Instant::now() < due {
            crate::rt::runtime::sleep_until(due).await;
            continue;
        }
        if !retry_pause_async(&mut state).await {
            return; // The session ended.
        }
        let sent = Instant::now();
        // A sync, not a read: a follower answers reads itself, even when it is cut off from
        // the leader that decides expiry, but it must pass a sync on to the leader.
        // Ahead of the requests still queued (after a reconnect, thousands of waiters may be
        // re-listing at once), so the answer waits for a bounded number of others.
        if proves_alive(&zk.sync_first("/").await) {
            lease.renew(sent);
        }
    }
}
