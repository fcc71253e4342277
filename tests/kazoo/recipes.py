#!/usr/bin/env python3
"""kazoo's recipes and watches against a ZooKeeper server, for tests/interop_kazoo.rs.

    python3 tests/kazoo/recipes.py <connect> <root> <case>

<case> is one of lock, semaphore, election, watches. Every session is a KazooClient of its
own (a session each, as separate processes would have); everything happens below <root>,
which is deleted at the end. Prints "PASS <case> <figures>" and exits 0, or prints what went
wrong on stderr and exits 1. No case waits without a bound: each wait has a timeout (WAIT).
"""

import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout
from kazoo.protocol.states import EventType

# The bound on anything that must happen: long for a loaded machine, short enough to fail.
WAIT = 20.0
SESSION_TIMEOUT = 10.0


class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)


class Inside:
    """Who is inside a critical section right now, the most seen at once, and entries."""

    def __init__(self):
        self.guard = threading.Lock()
        self.now = 0
        self.most = 0
        self.entered = 0

    def enter(self):
        with self.guard:
            self.now += 1
            self.entered += 1
            self.most = max(self.most, self.now)

    def leave(self):
        with self.guard:
            self.now -= 1


def times_out(recipe, seconds):
    """Whether a timed acquire of a Lock or Semaphore gives up (kazoo raises LockTimeout)."""
    try:
        acquired = recipe.acquire(timeout=seconds)
    except LockTimeout:
        return True
    if acquired:
        recipe.release()
    return False


def sessions(connect, n):
    clients = []
    for _ in range(n):
        client = KazooClient(hosts=connect, timeout=SESSION_TIMEOUT)
        client.start(timeout=WAIT)
        clients.append(client)
    return clients


def run_threads(targets):
    """Runs each target on a thread; re-raises the first failure once all have ended."""
    errors = []

    def wrap(target):
        try:
            target()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=wrap, args=(t,)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT * 3)
        check(not t.is_alive(), "a contender thread is still running")
    if errors:
        raise errors[0]


def case_lock(connect, root):
    """Four sessions take kazoo's Lock in turn, 10 times each: never two inside; a timed
    acquire against a holder fails and leaves no node; contenders() names the queue."""
    path = root + "/lock"
    clients = sessions(connect, 4)
    inside = Inside()
    rounds = 10

    def contender(i):
        def run():
            lock = clients[i].Lock(path, "client-%d" % i)
            for _ in range(rounds):
                check(lock.acquire(timeout=WAIT), "client-%d: no lock within %ss" % (i, WAIT))
                inside.enter()
                time.sleep(0.002)
                inside.leave()
                lock.release()
        return run

    run_threads([contender(i) for i in range(len(clients))])
    check(inside.most == 1, "%d sessions held the lock at once" % inside.most)
    check(inside.entered == rounds * len(clients), "only %d acquisitions" % inside.entered)

    holder = clients[0].Lock(path, "holder")
    check(holder.acquire(timeout=WAIT), "holder: no lock")
    other = clients[1].Lock(path, "other")
    check(times_out(other, 0.3), "a second session acquired a held lock")
    check(holder.contenders() == ["holder"], "queue after a timed-out acquire: %r" % holder.contenders())
    check(len(clients[2].get_children(path)) == 1, "the timed-out acquire left a node")

    # A waiter queued behind the holder gets the lock once the holder's session closes.
    got = threading.Event()

    def waiter():
        lock = clients[2].Lock(path, "waiter")
        check(lock.acquire(timeout=WAIT), "waiter: no lock after the holder's session closed")
        got.set()
        lock.release()

    t = threading.Thread(target=waiter)
    t.start()
    deadline = time.time() + WAIT
    while len(holder.contenders()) < 2 and time.time() < deadline:
        time.sleep(0.01)
    check(holder.contenders() == ["holder", "waiter"], "queue: %r" % holder.contenders())
    check(not got.wait(0.3), "the waiter acquired while the holder held")
    clients[0].stop()
    clients[0].close()
    check(got.wait(WAIT), "the waiter did not acquire after the holder's session closed")
    t.join(WAIT)
    for c in clients[1:]:
        c.stop()
        c.close()
    return "%d acquisitions, at most %d inside" % (inside.entered, inside.most)


def case_semaphore(connect, root):
    """Five sessions share a Semaphore of 2 leases, 6 rounds each: never more than 2
    inside, and 2 at once seen; a third lease times out while two are held."""
    path = root + "/semaphore"
    clients = sessions(connect, 5)
    inside = Inside()
    rounds = 6

    def contender(i):
        def run():
            sem = clients[i].Semaphore(path, "client-%d" % i, max_leases=2)
            for r in range(rounds):
                check(sem.acquire(timeout=WAIT), "client-%d: no lease within %ss" % (i, WAIT))
                inside.enter()
                time.sleep(0.005)
                inside.leave()
                sem.release()
        return run

    run_threads([contender(i) for i in range(len(clients))])
    check(inside.most <= 2, "%d sessions held leases of a 2-lease semaphore" % inside.most)
    check(inside.entered == rounds * len(clients), "only %d leases" % inside.entered)

    first = clients[0].Semaphore(path, "first", max_leases=2)
    second = clients[1].Semaphore(path, "second", max_leases=2)
    third = clients[2].Semaphore(path, "third", max_leases=2)
    check(first.acquire(timeout=WAIT) and second.acquire(timeout=WAIT), "two leases")
    check(sorted(first.lease_holders()) == ["first", "second"], "holders: %r" % first.lease_holders())
    check(times_out(third, 0.3), "a third lease of a 2-lease semaphore")
    second.release()
    check(third.acquire(timeout=WAIT), "no lease after one was released")
    check(sorted(first.lease_holders()) == ["first", "third"], "holders: %r" % first.lease_holders())
    first.release()
    third.release()
    for c in clients:
        c.stop()
        c.close()
    return "%d leases, at most %d inside" % (inside.entered, inside.most)


def case_election(connect, root):
    """Three sessions run for election: one leader at a time, each leads once, the
    contenders are listed in order; a leader whose session closes is replaced."""
    path = root + "/election"
    clients = sessions(connect, 3)
    inside = Inside()
    led = []
    order_guard = threading.Lock()
    go = threading.Event()

    def candidate(i):
        def run():
            election = clients[i].Election(path, "candidate-%d" % i)

            def lead():
                inside.enter()
                with order_guard:
                    led.append(i)
                go.wait(WAIT)  # the first leader holds until all have queued
                time.sleep(0.05)
                inside.leave()

            election.run(lead)
        return run

    threads = [threading.Thread(target=candidate(i)) for i in range(3)]
    for t in threads:
        t.start()
    watcher = clients[0].Election(path)
    deadline = time.time() + WAIT
    while len(watcher.contenders()) < 3 and time.time() < deadline:
        time.sleep(0.01)
    contenders = watcher.contenders()
    check(sorted(contenders) == ["candidate-0", "candidate-1", "candidate-2"], "contenders: %r" % contenders)
    with order_guard:
        check(len(led) == 1, "leaders before any stepped down: %r" % led)
        check(contenders[0] == "candidate-%d" % led[0], "the leader %r is not first in %r" % (led, contenders))
    go.set()
    for t in threads:
        t.join(WAIT)
        check(not t.is_alive(), "a candidate never led")
    check(inside.most == 1, "%d leaders at once" % inside.most)
    check(sorted(led) == [0, 1, 2], "led: %r" % led)

    # A leader's session closes: the next candidate takes over.
    leading = threading.Event()
    second = threading.Event()

    def hold_forever():
        leading.set()
        time.sleep(WAIT * 2)

    def successor():
        clients[2].Election(path, "successor").run(second.set)

    a = threading.Thread(target=lambda: clients[1].Election(path, "doomed").run(hold_forever), daemon=True)
    a.start()
    check(leading.wait(WAIT), "no leader")
    b = threading.Thread(target=successor)
    b.start()
    check(not second.wait(0.3), "a second leader while the first leads")
    clients[1].stop()
    clients[1].close()
    check(second.wait(WAIT), "no new leader after the leader's session closed")
    b.join(WAIT)
    for c in (clients[0], clients[2]):
        c.stop()
        c.close()
    return "%d terms, at most %d leader" % (len(led), inside.most)


def case_watches(connect, root):
    """DataWatch and ChildrenWatch fire on every change made by another session; a one-shot
    getData watch fires once; an exists watch on a missing node fires on its creation."""
    watcher, writer = sessions(connect, 2)
    node = root + "/data"
    parent = root + "/parent"
    writer.create(node, b"v0", makepath=True)
    writer.create(parent)

    seen = []
    seen_guard = threading.Condition()

    def wait_for(pred, what):
        with seen_guard:
            check(seen_guard.wait_for(pred, WAIT), "%s; seen: %r" % (what, seen))

    @watcher.DataWatch(node)
    def on_data(data, stat, event=None):
        with seen_guard:
            seen.append(("data", data, stat.version if stat else None,
                         event.type if event else None))
            seen_guard.notify_all()

    wait_for(lambda: ("data", b"v0", 0, None) in seen, "DataWatch's first call")
    writer.set(node, b"v1")
    wait_for(lambda: ("data", b"v1", 1, EventType.CHANGED) in seen, "DataWatch after set")
    writer.set(node, b"v2")
    wait_for(lambda: ("data", b"v2", 2, EventType.CHANGED) in seen, "DataWatch after a second set")

    @watcher.ChildrenWatch(parent, send_event=True)
    def on_children(children, event):
        with seen_guard:
            seen.append(("children", tuple(sorted(children)), event.type if event else None))
            seen_guard.notify_all()

    wait_for(lambda: ("children", (), None) in seen, "ChildrenWatch's first call")
    writer.create(parent + "/a")
    wait_for(lambda: ("children", ("a",), EventType.CHILD) in seen, "ChildrenWatch after a create")
    writer.create(parent + "/b", ephemeral=True)
    wait_for(lambda: ("children", ("a", "b"), EventType.CHILD) in seen, "ChildrenWatch after a second create")
    writer.delete(parent + "/a")
    wait_for(lambda: ("children", ("b",), EventType.CHILD) in seen, "ChildrenWatch after a delete")

    # One-shot: a getData watch fires once for the first change and not for the second.
    fired = []
    fired_event = threading.Event()

    def one_shot(event):
        fired.append((event.type, event.path))
        fired_event.set()

    data, stat = watcher.get(node, watch=one_shot)
    check(data == b"v2" and stat.version == 2, "get: %r %r" % (data, stat))
    writer.set(node, b"v3")
    check(fired_event.wait(WAIT), "the getData watch did not fire")
    writer.set(node, b"v4")
    wait_for(lambda: ("data", b"v4", 4, EventType.CHANGED) in seen, "DataWatch after the fourth set")
    time.sleep(0.2)
    check(fired == [(EventType.CHANGED, node)], "one-shot watch fired: %r" % fired)

    # exists on a missing node: the watch fires on its creation.
    created = threading.Event()
    events = []

    def on_created(event):
        events.append((event.type, event.path))
        created.set()

    missing = root + "/later"
    check(watcher.exists(missing, watch=on_created) is None, "the node exists already")
    writer.create(missing)
    check(created.wait(WAIT), "the exists watch did not fire")
    check(events == [(EventType.CREATED, missing)], "exists watch: %r" % events)

    # The node goes: the DataWatch is called with None; the writer's session closing
    # removes its ephemeral child and the ChildrenWatch sees it.
    writer.delete(node)
    wait_for(lambda: ("data", None, None, EventType.DELETED) in seen, "DataWatch after delete")
    writer.stop()
    writer.close()
    wait_for(lambda: ("children", (), EventType.CHILD) in seen, "ChildrenWatch after the session closed")
    watcher.stop()
    watcher.close()
    return "%d callbacks" % len(seen)


CASES = {
    "lock": case_lock,
    "semaphore": case_semaphore,
    "election": case_election,
    "watches": case_watches,
}


def main():
    if len(sys.argv) != 4 or sys.argv[3] not in CASES:
        print("usage: recipes.py <connect> <root> <%s>" % "|".join(CASES), file=sys.stderr)
        return 2
    connect, root, case = sys.argv[1:]
    started = time.time()
    try:
        figures = CASES[case](connect, root)
    except Failed as e:
        print("FAIL %s: %s" % (case, e), file=sys.stderr)
        return 1
    finally:
        cleanup = KazooClient(hosts=connect, timeout=SESSION_TIMEOUT)
        try:
            cleanup.start(timeout=WAIT)
            cleanup.delete(root, recursive=True)
        except Exception as e:  # noqa: BLE001 - cleanup only, reported
            print("cleanup of %s: %s" % (root, e), file=sys.stderr)
        finally:
            cleanup.stop()
            cleanup.close()
    print("PASS %s %s in %.2fs" % (case, figures, time.time() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
