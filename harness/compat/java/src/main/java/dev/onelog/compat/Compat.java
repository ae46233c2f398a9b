// The driver side of the compatibility-matrix contract (harness/compat/, issue 12): the
// environment the runner gives every driver, and one JSON line per scenario on stdout.
// Every scenario runs with its own budget on its own thread, and any exception, assertion or
// timeout becomes a "fail" line, so a driver always prints a line for every scenario and exits 0.
package dev.onelog.compat;

import java.io.PrintStream;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

public final class Compat {
    /** Longest detail printed: the runner shows it in a table cell. */
    private static final int DETAIL_CHARS_MAX = 400;

    public final String client;
    public final String version;
    public final String bootstrap;
    public final String killLeader;
    /**
     * COMPAT_PAUSE_LEADER: a command that SIGSTOPs the Raft leader for a while, then SIGCONTs it
     * (harness/compat/pause-leader.sh); only the opt-in streams_soak scenario uses it.
     */
    public final String pauseLeader;
    public final String prefix;
    public final int timeoutS;
    /**
     * COMPAT_GROUP_PROTOCOL: "classic" (the default) or "consumer" (KIP-848), the protocol every
     * group consumer of this run uses (Kit.consumer). The runner sets it for the *-consumer ids.
     */
    public static final String GROUP_PROTOCOL = env("COMPAT_GROUP_PROTOCOL", "classic");
    /** COMPAT_SCENARIOS: when set, the scenario ids to run (the CI subset, or by hand). */
    private final java.util.Set<String> only;
    /** Where the JSON lines go; the real stdout, kept before the CLI driver redirects System.out. */
    private final PrintStream out = System.out;

    public Compat(String client, String version) {
        this.client = client;
        this.version = version;
        this.bootstrap = env("COMPAT_BOOTSTRAP", "127.0.0.1:19092,127.0.0.1:19093,127.0.0.1:19094");
        this.killLeader = env("COMPAT_KILL_LEADER", "");
        this.pauseLeader = env("COMPAT_PAUSE_LEADER", "");
        this.prefix = env("COMPAT_PREFIX", "compat-" + client + "-" + System.currentTimeMillis());
        this.timeoutS = Integer.parseInt(env("COMPAT_TIMEOUT_S", "60"));
        String onlyList = env("COMPAT_SCENARIOS", "");
        this.only = onlyList.isEmpty() ? java.util.Set.of() : java.util.Set.of(onlyList.split(","));
    }

    /**
     * The kafka-clients version on the classpath. AppInfoParser moved to
     * org.apache.kafka.common.utils.internals in 4.4 (it was never public API), so it is found by
     * name: this one source compiles against 2.8, 3.9 and 4.4.
     */
    public static String kafkaVersion() {
        for (String name : new String[] {"org.apache.kafka.common.utils.internals.AppInfoParser",
                "org.apache.kafka.common.utils.AppInfoParser"}) {
            try {
                return (String) Class.forName(name).getMethod("getVersion").invoke(null);
            } catch (ReflectiveOperationException e) {
                // try the other home
            }
        }
        return "unknown";
    }

    /** The run's group consumers use the KIP-848 consumer group protocol. */
    public static boolean consumerProtocol() {
        return "consumer".equalsIgnoreCase(GROUP_PROTOCOL);
    }

    private static String env(String name, String fallback) {
        String value = System.getenv(name);
        return value == null || value.isEmpty() ? fallback : value;
    }

    /** A scenario's body: returns the pass detail, throws on failure, or throws NotExpressible. */
    public interface Scenario {
        String run() throws Exception;
    }

    /** Thrown by a scenario the client's API cannot express; becomes an "n/a" line. */
    public static final class NotExpressible extends RuntimeException {
        public NotExpressible(String why) {
            super(why);
        }
    }

    /**
     * Whether COMPAT_SCENARIOS names `id`: an opt-in scenario (too long for the matrix, e.g.
     * streams_soak) runs only then, and is never part of a run that names nothing.
     */
    public boolean named(String id) {
        return only.contains(id);
    }

    /** Runs one scenario within the budget and prints its line. */
    public void run(String id, Scenario scenario) {
        run(id, timeoutS, scenario);
    }

    /** Runs one scenario within its own budget of `budgetS` seconds and prints its line. */
    public void run(String id, int budgetS, Scenario scenario) {
        if (!only.isEmpty() && !only.contains(id)) {
            // Not asked for (COMPAT_SCENARIOS): the runner counts only the lines it asked for.
            System.err.printf("[%s] %s: not run (COMPAT_SCENARIOS)%n", client, id);
            return;
        }
        long start = System.nanoTime();
        String result;
        String detail;
        ExecutorService pool = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "scenario-" + id);
            t.setDaemon(true);
            return t;
        });
        Future<String> future = pool.submit(scenario::run);
        try {
            detail = future.get(budgetS, TimeUnit.SECONDS);
            result = "pass";
        } catch (TimeoutException e) {
            future.cancel(true);
            result = "fail";
            detail = "timeout after " + budgetS + " s";
        } catch (java.util.concurrent.ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof NotExpressible) {
                result = "n/a";
                detail = cause.getMessage();
            } else {
                result = "fail";
                detail = describe(cause);
                cause.printStackTrace();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            result = "fail";
            detail = "interrupted";
        } finally {
            pool.shutdownNow();
        }
        long ms = (System.nanoTime() - start) / 1_000_000;
        System.err.printf("[%s] %s: %s in %d ms: %s%n", client, id, result, ms, detail);
        line(id, result, detail);
    }

    /** An exception as "Class: message <- Cause: message", the chain a reader needs. */
    public static String describe(Throwable t) {
        StringBuilder s = new StringBuilder();
        for (Throwable c = t; c != null && s.length() < DETAIL_CHARS_MAX; c = c.getCause()) {
            if (s.length() > 0) s.append(" <- ");
            s.append(c.getClass().getSimpleName());
            if (c.getMessage() != null) s.append(": ").append(c.getMessage());
            if (c.getCause() == c) break;
        }
        return s.toString();
    }

    private synchronized void line(String scenario, String result, String detail) {
        if (detail == null) detail = "";
        if (detail.length() > DETAIL_CHARS_MAX) detail = detail.substring(0, DETAIL_CHARS_MAX) + "...";
        out.println("{" + field("client", client) + "," + field("version", version) + ","
                + field("scenario", scenario) + "," + field("result", result) + ","
                + field("detail", detail) + "}");
        out.flush();
    }

    private static String field(String key, String value) {
        return quote(key) + ":" + quote(value);
    }

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
                    else b.append(c);
                }
            }
        }
        return b.append('"').toString();
    }

    /** Throws with `message` unless `condition` holds: scenarios check values, not just no error. */
    public static void check(boolean condition, String message) {
        if (!condition) throw new AssertionError(message);
    }

    /** Runs COMPAT_KILL_LEADER through sh and waits; throws if it is missing or fails. */
    public void killLeader() throws Exception {
        killLeaderAt(() -> {});
    }

    /**
     * killLeader(), answering when the kill -9 took effect (System.nanoTime()): when the command
     * printed scripts/cluster.sh's "killed with SIGKILL" line, else when the command started.
     * `onKilled` runs once, as soon as that line appears (while the command still waits for the
     * new leader and restarts the node), or when the command ends if it never does.
     */
    public long killLeaderAt(Runnable onKilled) throws Exception {
        check(!killLeader.isEmpty(), "COMPAT_KILL_LEADER is not set");
        return fault("COMPAT_KILL_LEADER", killLeader, "killed with SIGKILL", onKilled).at;
    }

    /** What one fault command did: when its marker line appeared (System.nanoTime()) and its output. */
    public static final class FaultRun {
        /** When the marker line appeared, else when the command started. */
        public final long at;
        /** Every line the command printed, each with the System.nanoTime() it was read at. */
        public final java.util.List<java.util.Map.Entry<Long, String>> lines;

        FaultRun(long at, java.util.List<java.util.Map.Entry<Long, String>> lines) {
            this.at = at;
            this.lines = lines;
        }

        /** When the first line containing `text` was read, or -1. */
        public long lineAt(String text) {
            synchronized (lines) {
                for (java.util.Map.Entry<Long, String> l : lines) if (l.getValue().contains(text)) return l.getKey();
            }
            return -1;
        }

        /** The first line containing `text`, or null. */
        public String line(String text) {
            synchronized (lines) {
                for (java.util.Map.Entry<Long, String> l : lines) if (l.getValue().contains(text)) return l.getValue();
            }
            return null;
        }
    }

    /**
     * Runs a fault command (`name` is its variable, for messages) through sh and waits for it,
     * at most COMPAT_TIMEOUT_S; its output goes to stderr line by line. `onMarker` runs once, as
     * soon as a line containing `marker` appears (the fault took effect), or when the command
     * ends if none does. Throws if the command fails or does not return in time.
     */
    public FaultRun fault(String name, String command, String marker, Runnable onMarker) throws Exception {
        // Its output goes to stderr, line by line: the driver's stdout carries only the JSON lines.
        long started = System.nanoTime();
        Process p = new ProcessBuilder("sh", "-c", command)
                .redirectErrorStream(true)
                .start();
        p.getOutputStream().close();
        java.util.concurrent.atomic.AtomicLong marked = new java.util.concurrent.atomic.AtomicLong();
        java.util.List<java.util.Map.Entry<Long, String>> lines = new java.util.ArrayList<>();
        Thread copy = new Thread(() -> {
            try (java.io.BufferedReader r = new java.io.BufferedReader(
                    new java.io.InputStreamReader(p.getInputStream(), java.nio.charset.StandardCharsets.UTF_8))) {
                for (String l; (l = r.readLine()) != null; ) {
                    long now = System.nanoTime();
                    synchronized (lines) {
                        lines.add(java.util.Map.entry(now, l));
                    }
                    if (l.contains(marker) && marked.compareAndSet(0, now)) onMarker.run();
                    System.err.println(l);
                }
            } catch (java.io.IOException e) {
                System.err.println(name + " output: " + e);
            }
        }, "fault-output");
        copy.setDaemon(true);
        copy.start();
        boolean returned = p.waitFor(timeoutS, TimeUnit.SECONDS);
        copy.join(5000);
        if (marked.get() == 0) onMarker.run();
        if (!returned) p.destroyForcibly();
        check(returned, name + " did not return in " + timeoutS + " s");
        check(p.exitValue() == 0, name + " exited " + p.exitValue());
        return new FaultRun(marked.get() != 0 ? marked.get() : started, lines);
    }
}
