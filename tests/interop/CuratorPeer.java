// A line-oriented Apache Curator peer for zklock's interop tests (tests/interop.rs).
//
//   java -cp <curator jars>:<build dir> CuratorPeer <command> <connect> <args...>
//
// Commands (an optional trailing <ms> makes the acquisition timed: on timeout the peer prints
// TIMEOUT and exits 0):
//   mutex     <connect> <path> [ms]            InterProcessMutex
//   revocable <connect> <path>                 InterProcessMutex.makeRevocable: prints
//                                              REVOKE-REQUESTED when its listener fires
//   read      <connect> <path> [ms]            InterProcessReadWriteLock.readLock()
//   write     <connect> <path> [ms]            InterProcessReadWriteLock.writeLock()
//   lease     <connect> <path> <permits> [ms]  InterProcessSemaphoreV2, one lease
//   latch     <connect> <path> <id> [ms]       LeaderLatch: prints LEADER whenever it leads;
//                                              with <ms>, "NOT-LEADER <leader's id>" if
//                                              await(ms) is false
//   revoke    <connect> <node path>            Revoker.attemptRevoke, prints REVOKED
//
// Once holding, a lock command prints "ACQUIRED <node path>" and holds until it reads a line
// RELEASE on stdin (or stdin ends), then releases, prints RELEASED and exits 0. A latch holds
// its place in the election the same way. A peer still waiting to acquire 3 s after RELEASE or
// the end of stdin closes its session and exits 3. Errors go to stderr with a non-zero exit.

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.utils.ZKPaths;

public final class CuratorPeer {
    private static final CountDownLatch RELEASE = new CountDownLatch(1);
    /** How long the peer may still take to exit once stdin said RELEASE or ended. */
    private static final long EXIT_GRACE_MS = 3000;
    private static CuratorFramework client;

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) {
        if (args.length < 3) {
            System.err.println("usage: CuratorPeer <command> <connect> <path> [args...]");
            System.exit(2);
        }
        client = CuratorFrameworkFactory.newClient(args[1], new ExponentialBackoffRetry(100, 3));
        int code;
        try {
            client.start();
            if (!client.blockUntilConnected(20, TimeUnit.SECONDS)) {
                throw new IllegalStateException("no connection to " + args[1]);
            }
            startStdinReader();
            code = run(client, args);
        } catch (Throwable e) {
            System.err.println("CuratorPeer " + args[0] + ": " + e);
            e.printStackTrace();
            code = 1;
        } finally {
            client.close();
        }
        System.exit(code);
    }

    /**
     * RELEASE on stdin, or its end, lets the holder go. A peer still waiting to acquire then
     * (its test gave up on it) leaves after a grace period, closing its session so that its
     * node goes at once instead of after the session timeout.
     */
    private static void startStdinReader() {
        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(
                    new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    if (line.trim().equals("RELEASE")) {
                        break;
                    }
                }
            } catch (Exception e) {
                System.err.println("stdin: " + e);
            }
            RELEASE.countDown();
            try {
                Thread.sleep(EXIT_GRACE_MS);
            } catch (InterruptedException e) {
                // leave now
            }
            System.err.println("CuratorPeer: still running " + EXIT_GRACE_MS + " ms after RELEASE: leaving");
            client.close();
            Runtime.getRuntime().halt(3);
        }, "stdin");
        reader.setDaemon(true);
        reader.start();
    }

    private static long optionalMs(String[] args, int index) {
        return args.length > index ? Long.parseLong(args[index]) : -1;
    }

    private static int run(CuratorFramework client, String[] args) throws Exception {
        String command = args[0];
        String path = args[2];
        switch (command) {
            case "mutex":
                return hold(new InterProcessMutex(client, path), optionalMs(args, 3));
            case "revocable": {
                InterProcessMutex mutex = new InterProcessMutex(client, path);
                mutex.makeRevocable(m -> say("REVOKE-REQUESTED"));
                return hold(mutex, -1);
            }
            case "read":
                return hold(new InterProcessReadWriteLock(client, path).readLock(), optionalMs(args, 3));
            case "write":
                return hold(new InterProcessReadWriteLock(client, path).writeLock(), optionalMs(args, 3));
            case "lease":
                return lease(client, path, Integer.parseInt(args[3]), optionalMs(args, 4));
            case "latch":
                return latch(client, path, args[3], optionalMs(args, 4));
            case "revoke":
                Revoker.attemptRevoke(client, path);
                say("REVOKED");
                return 0;
            default:
                System.err.println("unknown command " + command);
                return 2;
        }
    }

    /** The node a mutex (or a read/write lock side) holds: Curator keeps it protected. */
    private static String lockNode(InterProcessMutex mutex) throws Exception {
        Method getLockPath = InterProcessMutex.class.getDeclaredMethod("getLockPath");
        getLockPath.setAccessible(true);
        return (String) getLockPath.invoke(mutex);
    }

    private static int hold(InterProcessMutex mutex, long ms) throws Exception {
        if (ms >= 0) {
            if (!mutex.acquire(ms, TimeUnit.MILLISECONDS)) {
                say("TIMEOUT");
                return 0;
            }
        } else {
            mutex.acquire();
        }
        say("ACQUIRED " + lockNode(mutex));
        RELEASE.await();
        mutex.release();
        say("RELEASED");
        return 0;
    }

    private static int lease(CuratorFramework client, String path, int permits, long ms)
            throws Exception {
        InterProcessSemaphoreV2 semaphore = new InterProcessSemaphoreV2(client, path, permits);
        Lease lease;
        if (ms >= 0) {
            lease = semaphore.acquire(ms, TimeUnit.MILLISECONDS);
            if (lease == null) {
                say("TIMEOUT");
                return 0;
            }
        } else {
            lease = semaphore.acquire();
        }
        say("ACQUIRED " + ZKPaths.makePath(ZKPaths.makePath(path, "leases"), lease.getNodeName()));
        RELEASE.await();
        lease.close();
        say("RELEASED");
        return 0;
    }

    private static int latch(CuratorFramework client, String path, String id, long ms)
            throws Exception {
        LeaderLatch latch = new LeaderLatch(client, path, id);
        latch.addListener(new LeaderLatchListener() {
            @Override
            public void isLeader() {
                say("LEADER");
            }

            @Override
            public void notLeader() {}
        });
        latch.start();
        if (ms >= 0 && !latch.await(ms, TimeUnit.MILLISECONDS)) {
            say("NOT-LEADER " + latch.getLeader().getId());
        }
        RELEASE.await();
        latch.close();
        say("RELEASED");
        return 0;
    }
}
