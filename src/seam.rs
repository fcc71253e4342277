//! Points where unit tests step in between the steps of one acquisition (a multi-lock's
//! members, a semaphore's gate and leases), to make faults happen exactly there. Outside
//! `cfg(test)` they compile to nothing.

#[cfg(not(test))]
#[inline(always)]
pub(crate) fn between_steps() {}

#[cfg(test)]
pub(crate) use hooks::between_steps;

#[cfg(test)]
pub(crate) mod hooks {
    use std::cell::RefCell;

    thread_local! {
        static BETWEEN_STEPS: RefCell<Option<Box<dyn FnMut()>>> = RefCell::new(None);
    }

    /// Runs the hook this thread installed, if any.
    pub(crate) fn between_steps() {
        BETWEEN_STEPS.with(|hook| {
            if let Some(hook) = hook.borrow_mut().as_mut() {
                hook();
            }
        });
    }

    /// Runs `hook` on this thread between the steps of every acquisition until the returned
    /// value is dropped.
    pub(crate) fn on_between_steps(hook: impl FnMut() + 'static) -> Installed {
        BETWEEN_STEPS.with(|h| *h.borrow_mut() = Some(Box::new(hook)));
        Installed
    }

    pub(crate) struct Installed;

    impl Drop for Installed {
        fn drop(&mut self) {
            BETWEEN_STEPS.with(|h| *h.borrow_mut() = None);
        }
    }
}

/// Faults between the steps of one acquisition, against the real server of the integration
/// tests (`ZK_CONNECT`, default 127.0.0.1:2181).
#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::hooks::on_between_steps;
    use crate::{Client, Error, MultiLock, Semaphore};

    fn connect() -> (Client, String) {
        let hosts = std::env::var("ZK_CONNECT").unwrap_or_else(|_| "127.0.0.1:2181".into());
        let client = Client::builder(&hosts)
            .session_timeout(Duration::from_secs(4))
            .connect()
            .expect("ZooKeeper must be running: scripts/start-zk.sh");
        (client, hosts)
    }

    fn root(test: &str) -> String {
        format!("/zklock-tests/{test}-{}", uuid::Uuid::new_v4().simple())
    }

    /// Expires the client's session the first time an acquisition reaches a step boundary.
    fn expire_between_steps(client: &Client, hosts: String) -> super::hooks::Installed {
        let session = client.session(None).unwrap();
        let mut fired = false;
        on_between_steps(move || {
            if !std::mem::replace(&mut fired, true) {
                session.expire_for_tests(&hosts);
            }
        })
    }

    #[test]
    fn a_session_expiring_between_members_fails_the_whole_multi_lock() {
        let (client, hosts) = connect();
        let root = root("seam-multi");
        let (a, b) = (format!("{root}/a"), format!("{root}/b"));
        let multi = MultiLock::new(&client)
            .mutex(&a)
            .unwrap()
            .mutex(&b)
            .unwrap();
        let hook = expire_between_steps(&client, hosts);
        let outcome = multi.lock();
        drop(hook);
        assert!(
            matches!(outcome, Err(Error::SessionExpired)),
            "a multi-lock whose session expired after its first member must fail as a whole, \
             got {outcome:?}"
        );
        // The next call opens a new session; nothing of the failed acquisition is left.
        for path in [a, b] {
            let queue = crate::DistributedMutex::new(&client, &path)
                .unwrap()
                .contenders()
                .unwrap();
            assert!(queue.is_empty(), "{path}: {queue:?}");
        }
        assert!(multi.try_lock().unwrap().is_some());
    }

    #[test]
    fn a_session_expiring_after_the_gate_fails_the_whole_semaphore_acquisition() {
        let (client, hosts) = connect();
        let semaphore = Semaphore::new(&client, &root("seam-semaphore"), 2).unwrap();
        let hook = expire_between_steps(&client, hosts);
        let outcome = semaphore.acquire_many(2);
        drop(hook);
        assert!(
            matches!(outcome, Err(Error::SessionExpired)),
            "leases must not be taken on a new session after the gate was lost with the old \
             one, got {outcome:?}"
        );
        assert!(semaphore.leases().unwrap().is_empty());
        assert_eq!(semaphore.acquire_many(2).unwrap().count(), 2);
    }
}
