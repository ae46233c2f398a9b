// The Kafka Streams driver of the compatibility matrix (client id kafka-streams-4.4.0): an
// exactly_once_v2 word count (WordCountApp, in a child JVM, default exception handlers) whose
// final counts must be exact after a plain run, after a kill -9 of the Streams process, and
// across two kill -9s of the Raft leader (COMPAT_KILL_LEADER) while input keeps arriving. The
// app must never stop by itself; the leader-kill scenario also measures how long the app's
// committed input offsets stall after each kill. streams_soak (opt-in: only when
// COMPAT_SCENARIOS names it) runs the same app for ten minutes under continuous input with a
// fault on the Raft leader every ~50 s, kill -9s and SIGSTOP pauses in turn.
package dev.onelog.compat.streams;

import static dev.onelog.compat.Compat.check;

import dev.onelog.compat.Compat;
import dev.onelog.compat.Kit;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Stream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;

public final class StreamsDriver {
    private static final List<String> WORDS = List.of("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf");
    /** Input lines; each holds three words, so the counts differ per word. */
    private static final int LINES = 600;

    final Compat compat;
    final Kit kit;

    private StreamsDriver(Compat compat) {
        this.compat = compat;
        this.kit = new Kit(compat.bootstrap);
    }

    public static void main(String[] args) {
        // kafka-streams is released with kafka-clients of the same version.
        // COMPAT_GROUP_PROTOCOL=streams (client id kafka-streams-4.4.0-streams): every app runs
        // on the KIP-1071 Streams group protocol.
        String client = args.length > 0 ? args[0] : "kafka-streams-4.4.0";
        if (WordCountApp.streamsProtocol() && !client.endsWith("-streams")) client += "-streams";
        Compat compat = new Compat(client, Compat.kafkaVersion());
        StreamsDriver d = new StreamsDriver(compat);
        compat.run("streams_eos_wordcount", () -> d.wordCount("plain", Fault.NONE));
        compat.run("streams_kill_streams", () -> d.wordCount("kill-streams", Fault.KILL_STREAMS));
        compat.run("streams_kill_leader", () -> d.killLeaderTwice("kill-leader"));
        compat.run(ThreeInstances.ID, ThreeInstances.BUDGET_S, () -> new ThreeInstances(d).run());
        compat.run(StandbyStatic.ID, () -> new StandbyStatic(d, compat, d.kit).run());
        // Opt-in (COMPAT_SCENARIOS must name it): a measurement, not a check of the matrix
        // (scripts/compat.sh --streams-scale runs it).
        if (compat.named(ThreeInstances.SCALE_ID)) {
            compat.run(ThreeInstances.SCALE_ID, ThreeInstances.SCALE_BUDGET_S, () -> new ThreeInstances(d).scale());
        }
        // Opt-in (COMPAT_SCENARIOS must name it): ten minutes by default, so never part of the
        // matrix or its CI subset (scripts/compat.sh --streams-soak runs it).
        if (compat.named(SOAK)) compat.run(SOAK, SOAK_S + SOAK_BUDGET_EXTRA_S, () -> d.soak("soak"));
        System.exit(0);
    }

    private enum Fault { NONE, KILL_STREAMS }

    /** streams_kill_leader: how many times the Raft leader is killed. */
    private static final int LEADER_KILLS = 2;
    /** streams_kill_leader: one input line every this many ms, across both kills. */
    private static final long LINE_EVERY_MS = 10;
    /** streams_kill_leader: how often the app's committed input offsets are read. */
    private static final long OFFSETS_EVERY_MS = 100;
    /** streams_kill_leader: input keeps flowing this long after the app commits, before a kill. */
    private static final long SETTLE_MS = 1000;

    static String line(int i) {
        // i * i in long: as an int it overflows from i = 46341 (about eight minutes of
        // streams_soak's input) and the index goes negative.
        return WORDS.get(i % WORDS.size()) + " " + WORDS.get((i * 3 + 1) % WORDS.size()) + " "
                + WORDS.get((int) (((long) i * i) % WORDS.size()));
    }

    private static Map<String, Long> expectedCounts() {
        return expectedCounts(LINES);
    }

    /** The counts of lines 0..lines-1. */
    static Map<String, Long> expectedCounts(int lines) {
        Map<String, Long> counts = new TreeMap<>();
        for (int i = 0; i < lines; i++) for (String w : line(i).split(" ")) counts.merge(w, 1L, Long::sum);
        return counts;
    }

    /** A logged exception: "[Caused by: ]some.package.SomeException: message". */
    private static final java.util.regex.Pattern EXCEPTION_LINE =
            java.util.regex.Pattern.compile("^(Caused by: )?[\\w.$]+(Exception|Error): .*");

    /** The start of a log line of the app (simplelogger's time first): the stack trace ended. */
    private static final java.util.regex.Pattern LOG_LINE = java.util.regex.Pattern.compile("\\d\\d:\\d\\d:\\d\\d");

    /** "SomeException: message" from a logged exception line. */
    private static String shortException(String line) {
        return line.replaceFirst("^Caused by: ", "").replaceFirst("^[\\w.$]+\\.", "");
    }

    /** The Streams app in a child JVM; its log goes to this driver's stderr. */
    final class App {
        private final List<String> command;
        /** Put before each line of its log on stderr ("" for a lone instance). */
        private final String label;
        Process process;
        int starts;

        App(String appId, String input, String output, Path stateDir) throws Exception {
            this("", appId, input, output, stateDir);
        }

        /** WordCountApp with `more` arguments (the join's topics), its log lines labelled `label`. */
        App(String label, String appId, String input, String output, Path stateDir, String... more) throws Exception {
            this.label = label;
            streamsGroupTimeouts(appId);
            List<String> c = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                    "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", System.getProperty("java.class.path"),
                    WordCountApp.class.getName(), compat.bootstrap, appId, input, output, stateDir.toString()));
            c.addAll(List.of(more));
            command = List.copyOf(c);
        }

        /** Its latest "tasks" line: state and active task ids, from WordCountApp's reports. */
        final AtomicReference<String> tasks = new AtomicReference<>("");
        /** Its latest "topology" line's subtopology count, or -1. */
        final AtomicInteger subtopologies = new AtomicInteger(-1);
        /** Every state change it logged, with the System.nanoTime() it was read at. */
        final List<Map.Entry<Long, String>> changes = java.util.Collections.synchronizedList(new ArrayList<>());

        /** The first exception line the app logged after an ERROR line, for a stop's message. */
        private final AtomicReference<String> firstError = new AtomicReference<>();
        /** State changes to REBALANCING the app logged (WordCountApp's state listener). */
        final AtomicInteger rebalances = new AtomicInteger();
        /** ERROR lines the app logged. */
        final AtomicInteger errorLines = new AtomicInteger();

        void start() throws Exception {
            tasks.set("");
            process = new ProcessBuilder(command).redirectOutput(ProcessBuilder.Redirect.DISCARD)
                    .redirectError(ProcessBuilder.Redirect.PIPE).start();
            starts++;
            // Its log goes on to this driver's stderr, line by line.
            java.io.InputStream log = process.getErrorStream();
            Thread copy = new Thread(() -> {
                try (java.io.BufferedReader r = new java.io.BufferedReader(
                        new java.io.InputStreamReader(log, java.nio.charset.StandardCharsets.UTF_8))) {
                    // After an ERROR line: its exception's first line, then the root cause (the last
                    // "Caused by:" of that stack trace).
                    boolean afterError = false;
                    boolean inTrace = false;
                    String first = null;
                    for (String l; (l = r.readLine()) != null; ) {
                        System.err.println(label + l);
                        if (l.startsWith("wordcount ") && l.endsWith(" -> REBALANCING")) rebalances.incrementAndGet();
                        if (l.startsWith("wordcount ") && l.contains(" -> ")) {
                            changes.add(Map.entry(System.nanoTime(), l.substring(l.indexOf(": ") + 2)));
                        }
                        if (l.startsWith("tasks ")) tasks.set(l.substring(l.indexOf(' ', 6) + 1));
                        if (l.startsWith("topology ")) subtopologies.set(Integer.parseInt(l.split(" ")[2]));
                        if (l.contains(" ERROR ")) errorLines.incrementAndGet();
                        if (first == null && l.contains(" ERROR ")) {
                            afterError = true;
                        } else if (afterError && first == null && EXCEPTION_LINE.matcher(l).matches()) {
                            first = shortException(l);
                            firstError.set(first);
                            inTrace = true;
                        } else if (inTrace && l.startsWith("Caused by: ")) {
                            firstError.set(first + " <- " + shortException(l));
                        } else if (inTrace && LOG_LINE.matcher(l).lookingAt()) {
                            inTrace = false;
                        }
                    }
                } catch (java.io.IOException e) {
                    // The app was killed: its log ends.
                }
            }, "wordcount-log");
            copy.setDaemon(true);
            copy.start();
        }

        /** kill -9 (destroyForcibly is SIGKILL on Linux) and wait for the exit. */
        void kill() throws Exception {
            process.destroyForcibly();
            process.waitFor(10, TimeUnit.SECONDS);
        }

        /** SIGTERM: WordCountApp closes Streams, leaving the group, and exits 0; fails otherwise. */
        void stop() throws Exception {
            process.destroy();
            check(process.waitFor(40, TimeUnit.SECONDS), "the app did not exit within 40 s of SIGTERM");
            check(process.exitValue() == 0 || process.exitValue() == 143,
                    "the app exited " + process.exitValue() + " after SIGTERM, not 0");
        }

        /**
         * Fails if the app stopped by itself: with the default exception handlers a stop is
         * Streams giving up (exit EXIT_STOPPED), which no fault of these scenarios may cause.
         */
        void checkRunning(String when) {
            if (process.isAlive()) return;
            int code = process.exitValue();
            String error = firstError.get();
            throw new AssertionError("Streams stopped by itself " + when + " (exit code " + code
                    + (code == WordCountApp.EXIT_STOPPED ? ": state ERROR or NOT_RUNNING" : "") + ")"
                    + (error == null ? "" : "; its first error: " + error));
        }
    }

    private String wordCount(String name, Fault fault) throws Exception {
        String base = compat.prefix + "-streams-" + name;
        String input = base + "-in";
        String output = base + "-out";
        kit.createTopic(input, 3);
        kit.createTopic(output, 3);
        Path stateDir = Files.createTempDirectory("onelog-compat-streams-");
        App app = new App(base + "-app", input, output, stateDir);
        Map<String, Long> expected = expectedCounts();
        long deadline = deadline();
        String event = "no fault";
        try (KafkaConsumer<String, Long> out = outputConsumer(output);
                KafkaProducer<String, String> in = inputProducer()) {
            out.subscribe(List.of(output));
            app.start();
            Map<String, Long> latest = new HashMap<>();
            produce(in, input, 0, LINES / 2);
            // Mid-run: the fault strikes once the app has produced some counts.
            while (latest.isEmpty()) {
                check(System.nanoTime() < deadline, "no output before the fault; app starts " + app.starts);
                app.checkRunning("before the fault");
                poll(out, latest, expected);
            }
            if (fault == Fault.KILL_STREAMS) {
                app.kill();
                event = "Streams process killed -9 after " + latest + " partial counts";
                produce(in, input, LINES / 2, LINES);
                app.start();
            } else {
                produce(in, input, LINES / 2, LINES);
            }
            while (!latest.equals(expected)) {
                check(System.nanoTime() < deadline, "counts " + latest + " not " + expected);
                app.checkRunning(fault == Fault.KILL_STREAMS ? "after its restart" : "");
                poll(out, latest, expected);
            }
        } finally {
            if (app.process != null) app.kill();
            deleteTree(stateDir);
        }
        return event + "; Streams ran without stopping by itself; final counts exact " + expected;
    }

    /** A Streams group's session timeout and heartbeat interval: the classic apps' consumer settings. */
    private static final Map<String, String> STREAMS_GROUP_CONFIGS =
            Map.of("streams.session.timeout.ms", "6000", "streams.heartbeat.interval.ms", "1500");

    /**
     * On the Streams group protocol the broker, not the app, owns the session timeout and the
     * heartbeat interval: before its first start the group `appId` gets the classic apps'
     * settings as group configs (IncrementalAlterConfigs on a GROUP resource), so a killed
     * instance's member is dropped as quickly as under the classic protocol. Kafka's default
     * bounds (group.streams.min.session.timeout.ms 45000, group.streams.min.heartbeat.interval.ms
     * 5000) refuse these; scripts/compat.sh --kafka lowers them. Nothing on the classic protocol.
     */
    void streamsGroupTimeouts(String appId) throws Exception {
        if (!WordCountApp.streamsProtocol()) return;
        org.apache.kafka.common.config.ConfigResource group =
                new org.apache.kafka.common.config.ConfigResource(org.apache.kafka.common.config.ConfigResource.Type.GROUP, appId);
        List<org.apache.kafka.clients.admin.AlterConfigOp> ops = new ArrayList<>();
        STREAMS_GROUP_CONFIGS.forEach((k, v) -> ops.add(new org.apache.kafka.clients.admin.AlterConfigOp(
                new org.apache.kafka.clients.admin.ConfigEntry(k, v), org.apache.kafka.clients.admin.AlterConfigOp.OpType.SET)));
        try (Admin admin = kit.admin()) {
            admin.incrementalAlterConfigs(Map.of(group, ops)).all().get(30, TimeUnit.SECONDS);
        }
    }

    /** The scenario's own deadline, inside the runner's budget. */
    long deadline() {
        return System.nanoTime() + TimeUnit.SECONDS.toNanos(compat.timeoutS) - TimeUnit.SECONDS.toNanos(3);
    }

    KafkaProducer<String, String> inputProducer() {
        return kit.producer("enable.idempotence", "true", "delivery.timeout.ms", "120000", "max.block.ms", "60000");
    }

    /** One reading of the app's committed input offsets: when it was asked and answered, and their sum. */
    static final class Sample {
        final long asked;
        final long answered;
        final long sum;
        /** The committed offset of each input partition (empty for a failed reading). */
        final Map<TopicPartition, Long> offsets;

        Sample(long asked, long answered, long sum, Map<TopicPartition, Long> offsets) {
            this.asked = asked;
            this.answered = answered;
            this.sum = sum;
            this.offsets = offsets;
        }

        /** Whether every partition of `at` has a committed offset here above its offset there. */
        boolean allAbove(Sample at) {
            for (Map.Entry<TopicPartition, Long> e : at.offsets.entrySet()) {
                Long now = offsets.get(e.getKey());
                if (now == null || now <= e.getValue()) return false;
            }
            return !at.offsets.isEmpty();
        }
    }

    /**
     * Reads the Streams application's consumer group's committed offsets every OFFSETS_EVERY_MS
     * with an Admin client and keeps the sum over the input partitions. A read that fails (the
     * leader is gone) is counted and retried at the next tick.
     */
    final class OffsetsMonitor implements AutoCloseable {
        /** A reading that failed. */
        private static final long FAILED = Long.MIN_VALUE;
        private final List<Sample> samples = new ArrayList<>();
        private final AtomicBoolean stop = new AtomicBoolean();
        final AtomicInteger failures = new AtomicInteger();
        private final Thread thread;

        OffsetsMonitor(String group, String input) {
            this(group, java.util.Set.of(input));
        }

        /** Over the partitions of every topic of `inputs`. */
        OffsetsMonitor(String group, java.util.Set<String> inputs) {
            java.util.Properties p = kit.common();
            // Short timeouts and backoffs: a reading stuck on the killed node gives up within a
            // second and the next tick asks again, so the first reading after a kill shows when
            // the cluster answers again, apart from the app's own clients' (default) settings.
            p.put("request.timeout.ms", "800");
            p.put("default.api.timeout.ms", "1000");
            p.put("retry.backoff.ms", "50");
            p.put("retry.backoff.max.ms", "100");
            p.put("reconnect.backoff.ms", "50");
            p.put("reconnect.backoff.max.ms", "100");
            thread = new Thread(() -> {
                try (Admin admin = Admin.create(p)) {
                    while (!stop.get()) {
                        long asked = System.nanoTime();
                        try {
                            Map<TopicPartition, OffsetAndMetadata> offsets =
                                    admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                                            .get(2, TimeUnit.SECONDS);
                            long sum = 0;
                            Map<TopicPartition, Long> mine = new HashMap<>();
                            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                                if (inputs.contains(e.getKey().topic()) && e.getValue() != null) {
                                    sum += e.getValue().offset();
                                    mine.put(e.getKey(), e.getValue().offset());
                                }
                            }
                            synchronized (samples) {
                                samples.add(new Sample(asked, System.nanoTime(), sum, mine));
                            }
                        } catch (InterruptedException e) {
                            return;
                        } catch (Exception e) {
                            failures.incrementAndGet();
                            synchronized (samples) {
                                samples.add(new Sample(asked, System.nanoTime(), FAILED, Map.of()));
                            }
                        }
                        long rest = OFFSETS_EVERY_MS - (System.nanoTime() - asked) / 1_000_000;
                        if (rest > 0) Thread.sleep(rest);
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }, "streams-offsets-monitor");
            thread.setDaemon(true);
            thread.start();
        }

        /** The latest sum read, or -1 before the first reading. */
        long lastSum() {
            synchronized (samples) {
                for (int i = samples.size() - 1; i >= 0; i--) if (samples.get(i).sum != FAILED) return samples.get(i).sum;
                return -1;
            }
        }

        /** The readings answered from `from` to `to`, for the log: "+ms sum" (or "+ms failed") each. */
        String timeline(long from, long to) {
            StringBuilder b = new StringBuilder();
            synchronized (samples) {
                Long last = null;
                for (Sample s : samples) {
                    if (s.answered < from || s.answered > to || (last != null && s.sum == last)) continue;
                    b.append(b.length() == 0 ? "" : ", ").append('+').append((s.answered - from) / 1_000_000)
                            .append(" ms ").append(s.sum == FAILED ? "failed" : Long.toString(s.sum));
                    last = s.sum;
                }
            }
            return b.toString();
        }

        /** The first reading asked at or after `since` with every partition of `at` above its offset there, or null. */
        Sample firstAllAbove(long since, Sample at) {
            synchronized (samples) {
                for (Sample s : samples) if (s.asked >= since && s.allAbove(at)) return s;
                return null;
            }
        }

        /** The first reading asked at or after `since` whose sum is above `above`, or null. */
        Sample firstAbove(long since, long above) {
            synchronized (samples) {
                for (Sample s : samples) if (s.asked >= since && s.sum > above) return s;
                return null;
            }
        }

        @Override
        public void close() throws InterruptedException {
            stop.set(true);
            thread.interrupt();
            thread.join(5000);
        }
    }

    /**
     * streams_kill_leader: the word count runs while a producer thread writes one input line
     * every LINE_EVERY_MS from start to end, and the Raft leader is killed -9 twice (each once
     * the app has committed progress since the previous one). With the default exception
     * handlers the app must never stop. After each kill, the stall is the time from the kill -9
     * (Compat.killLeaderAt) until the app's committed input offsets (summed over the input
     * partitions) next advance past their value at the kill, which is the first reading asked
     * after it (only the new leader can answer that one); input never runs out while the stall
     * is measured, as the producer keeps writing. The final counts must be exact for every line
     * produced.
     */
    private String killLeaderTwice(String name) throws Exception {
        String base = compat.prefix + "-streams-" + name;
        String input = base + "-in";
        String output = base + "-out";
        String appId = base + "-app";
        kit.createTopic(input, 3);
        kit.createTopic(output, 3);
        Path stateDir = Files.createTempDirectory("onelog-compat-streams-");
        App app = new App(appId, input, output, stateDir);
        long deadline = deadline();
        // The counts of every line handed to the producer so far: no output count may exceed them.
        Map<String, Long> sentCounts = new ConcurrentHashMap<>();
        AtomicInteger sent = new AtomicInteger();
        AtomicInteger sendErrors = new AtomicInteger();
        AtomicReference<Exception> firstSendError = new AtomicReference<>();
        AtomicBoolean stopInput = new AtomicBoolean();
        long[] stallMs = new long[LEADER_KILLS];
        long[] killMs = new long[LEADER_KILLS];
        long[] readableMs = new long[LEADER_KILLS];
        int lines;
        Map<String, Long> expected;
        Thread producer = null;
        try (KafkaConsumer<String, Long> out = outputConsumer(output);
                KafkaProducer<String, String> in = inputProducer();
                OffsetsMonitor committed = new OffsetsMonitor(appId, input)) {
            out.subscribe(List.of(output));
            app.start();
            producer = new Thread(() -> {
                try {
                    for (int i = 0; !stopInput.get(); i++) {
                        for (String w : line(i).split(" ")) sentCounts.merge(w, 1L, Long::sum);
                        sent.incrementAndGet();
                        in.send(new ProducerRecord<>(input, "line-" + i, line(i)), (md, e) -> {
                            if (e != null) {
                                sendErrors.incrementAndGet();
                                firstSendError.compareAndSet(null, e);
                            }
                        });
                        Thread.sleep(LINE_EVERY_MS);
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                } catch (Exception e) {
                    sendErrors.incrementAndGet();
                    firstSendError.compareAndSet(null, e);
                }
            }, "streams-input");
            producer.start();
            Map<String, Long> latest = new HashMap<>();
            long since = System.nanoTime();
            long above = 0;
            for (int k = 0; k < LEADER_KILLS; k++) {
                // Before each kill: the app has committed input offsets since the previous one (or
                // since it started), and input flowed for SETTLE_MS after that.
                Sample progress;
                while ((progress = committed.firstAbove(since, above)) == null
                        || System.nanoTime() - progress.answered < TimeUnit.MILLISECONDS.toNanos(SETTLE_MS)) {
                    check(System.nanoTime() < deadline, "the app committed no input offsets "
                            + (k == 0 ? "before the first kill" : "after kill " + k) + " (committed sum "
                            + committed.lastSum() + ", " + sent.get() + " lines sent)");
                    app.checkRunning(k == 0 ? "before the first kill" : "after kill " + k);
                    poll(out, latest, sentCounts);
                }
                long commandStart = System.nanoTime();
                long kill = compat.killLeaderAt(() -> {});
                killMs[k] = (System.nanoTime() - commandStart) / 1_000_000;
                // The committed sum at the kill: the first reading asked after it (only the new
                // leader can answer it, so it holds what was committed before the kill).
                Sample at;
                while ((at = committed.firstAbove(kill, -1)) == null) {
                    check(System.nanoTime() < deadline, "no committed offsets read within "
                            + (System.nanoTime() - kill) / 1_000_000 + " ms of kill " + (k + 1) + " ("
                            + committed.failures.get() + " offset reads failed)");
                    app.checkRunning("after kill " + (k + 1));
                    poll(out, latest, sentCounts);
                }
                long before = at.sum;
                readableMs[k] = (at.answered - kill) / 1_000_000;
                Sample advanced;
                while ((advanced = committed.firstAbove(kill, before)) == null) {
                    check(System.nanoTime() < deadline, "the app's committed input offsets did not advance past "
                            + before + " within " + (System.nanoTime() - kill) / 1_000_000 + " ms of kill " + (k + 1)
                            + " (" + sent.get() + " lines sent, " + committed.failures.get() + " offset reads failed)");
                    app.checkRunning("after kill " + (k + 1));
                    poll(out, latest, sentCounts);
                }
                stallMs[k] = (advanced.answered - kill) / 1_000_000;
                System.err.printf("streams_kill_leader: kill %d at %s took %d ms; committed input offsets %d -> %d after %d ms;"
                        + " readings since the kill: %s%n", k + 1,
                        java.time.LocalTime.now().minusNanos(System.nanoTime() - kill), killMs[k], before,
                        advanced.sum, stallMs[k], committed.timeline(kill, advanced.answered));
                since = advanced.asked;
                above = advanced.sum;
            }
            stopInput.set(true);
            producer.join(TimeUnit.SECONDS.toMillis(10));
            check(!producer.isAlive(), "the input producer did not stop");
            in.flush();
            check(sendErrors.get() == 0, sendErrors.get() + " input sends failed, the first: "
                    + Compat.describe(firstSendError.get()));
            lines = sent.get();
            expected = expectedCounts(lines);
            while (!latest.equals(expected)) {
                check(System.nanoTime() < deadline, "counts " + latest + " not " + expected + " for " + lines + " lines");
                app.checkRunning("after both kills");
                poll(out, latest, expected);
            }
        } finally {
            stopInput.set(true);
            if (producer != null) producer.join(TimeUnit.SECONDS.toMillis(10));
            if (app.process != null) app.kill();
            deleteTree(stateDir);
        }
        return "Raft leader killed -9 " + LEADER_KILLS + " times while " + lines + " input lines were produced; "
                + "stall after kill 1: " + stallMs[0] + " ms, after kill 2: " + stallMs[1] + " ms (first offsets read "
                + "after the kill at " + readableMs[0] + " ms, " + readableMs[1] + " ms; kill+restart " + killMs[0]
                + " ms, " + killMs[1] + " ms); Streams ran without stopping (default handlers); "
                + "final counts exact " + expected;
    }

    /** streams_soak: the scenario id; opt-in, it runs only when COMPAT_SCENARIOS names it. */
    private static final String SOAK = "streams_soak";
    /** streams_soak: how long input flows and faults strike (s; COMPAT_STREAMS_SOAK_S). */
    private static final int SOAK_S = intEnv("COMPAT_STREAMS_SOAK_S", 600);
    /** streams_soak: one fault every this many seconds (COMPAT_STREAMS_SOAK_FAULT_EVERY_S). */
    private static final int SOAK_FAULT_EVERY_S = intEnv("COMPAT_STREAMS_SOAK_FAULT_EVERY_S", 50);
    /** streams_soak: no fault strikes in the last this many seconds of the run. */
    private static final int SOAK_TAIL_S = 30;
    /** streams_soak: how long pause-leader.sh holds the leader stopped (COMPAT_PAUSE_S, read by it too). */
    private static final int SOAK_PAUSE_S = intEnv("COMPAT_PAUSE_S", 5);
    /** streams_soak: after each fault the app must commit input progress within this long (s). */
    private static final int SOAK_RECOVERY_S = 90;
    /** streams_soak: once input stops, the output must reach the exact counts within this long (s). */
    private static final int SOAK_DRAIN_S = 180;
    /** streams_soak: its budget beyond SOAK_S: start-up, the last fault's recovery, the drain. */
    private static final int SOAK_BUDGET_EXTRA_S = 60 + SOAK_RECOVERY_S + SOAK_DRAIN_S;

    private static int intEnv(String name, int fallback) {
        String v = System.getenv(name);
        return v == null || v.isBlank() ? fallback : Integer.parseInt(v.trim());
    }

    private enum LeaderFault { KILL, PAUSE }

    /** streams_soak: input that stops this long is a failure of its own (s). */
    private static final int SOAK_INPUT_STALL_S = 20;

    /**
     * streams_soak: fails, with the thread's stack and the first send error, once the input
     * producer thread has stopped or sent nothing for SOAK_INPUT_STALL_S: without input the app
     * cannot commit progress, and that must not pass for the app's stall after a fault.
     */
    private static final class InputWatch {
        private final Thread thread;
        private final AtomicInteger sent;
        private final AtomicInteger errors;
        private final AtomicReference<Exception> firstError;
        private int last = -1;
        private long since = System.nanoTime();

        InputWatch(Thread thread, AtomicInteger sent, AtomicInteger errors, AtomicReference<Exception> firstError) {
            this.thread = thread;
            this.sent = sent;
            this.errors = errors;
            this.firstError = firstError;
        }

        void check() {
            int now = sent.get();
            if (now != last) {
                last = now;
                since = System.nanoTime();
            }
            boolean stalled = System.nanoTime() - since > TimeUnit.SECONDS.toNanos(SOAK_INPUT_STALL_S);
            if (thread.isAlive() && !stalled) return;
            StringBuilder top = new StringBuilder();
            for (Map.Entry<Thread, StackTraceElement[]> t : Thread.getAllStackTraces().entrySet()) {
                if (t.getKey() != thread && !t.getKey().getName().startsWith("kafka-producer-network-thread")) continue;
                System.err.println("streams_soak: stack of " + t.getKey().getName() + " (" + t.getKey().getState() + "):");
                for (StackTraceElement e : t.getValue()) System.err.println("\tat " + e);
            }
            StackTraceElement[] frames = thread.getStackTrace();
            for (int i = 0; i < Math.min(4, frames.length); i++) top.append(i == 0 ? "" : " <- ").append(frames[i]);
            throw new AssertionError("the input producer " + (thread.isAlive() ? "sent nothing for "
                    + SOAK_INPUT_STALL_S + " s" : "thread stopped") + " at " + now + " lines (" + errors.get()
                    + " send errors, the first: " + (firstError.get() == null ? "none" : Compat.describe(firstError.get()))
                    + ")" + (top.length() == 0 ? "" : "; it is in " + top));
        }
    }

    /** streams_soak: what one fault did and how long the app took to commit progress after it. */
    private static final class FaultFigures {
        int n;
        LeaderFault kind;
        /** Seconds into the run when it struck. */
        double atS;
        /** The fault command's own report: which node, when a new leader was agreed. */
        String node = "?";
        String elected = "?";
        /** The fault command's run time (kill + election + restart, or pause + rejoin), ms. */
        long commandMs;
        /** From the fault until the first committed-offsets reading answered (ms). */
        long readableMs;
        /** From the fault until the committed input offsets advanced past their value at it (ms). */
        long stallMs;
        long before;
        long after;
        /** PAUSE: from the SIGSTOP to the SIGCONT (ms), and whether progress came before the SIGCONT. */
        long resumedMs = -1;
        boolean progressWhilePaused;

        String row() {
            return String.format("fault %2d  %-5s at %6.1f s  node %s  new leader after %s  command %5d ms%s"
                    + "  first offsets read +%d ms  committed progress +%d ms (%d -> %d)%s", n, kind, atS, node,
                    elected, commandMs, kind == LeaderFault.PAUSE ? "  SIGCONT +" + resumedMs + " ms" : "",
                    readableMs, stallMs, before, after,
                    kind == LeaderFault.PAUSE ? (progressWhilePaused ? "  (progress while the old leader was stopped)"
                            : "  (no progress until the old leader was resumed)") : "");
        }
    }

    /**
     * streams_soak (opt-in, issue 28's "10 minutes with leader kills and pauses"): the
     * exactly_once_v2 word count runs for SOAK_S seconds while a producer thread writes one input
     * line every LINE_EVERY_MS, and every SOAK_FAULT_EVERY_S seconds a fault hits the Raft
     * leader, alternately a kill -9 and restart (COMPAT_KILL_LEADER) and a SIGSTOP of
     * SOAK_PAUSE_S seconds then SIGCONT (COMPAT_PAUSE_LEADER; unset: kills only). After each
     * fault the app's committed input offsets must advance within SOAK_RECOVERY_S; the time to
     * that first committed progress is measured as in streams_kill_leader. The output is read
     * read_committed throughout by an assigned (groupless) consumer: each word's counts must rise
     * strictly (an exactly-once output never repeats or lowers a count) and never exceed what was
     * sent. Then input stops, and the final counts must be exact for every line produced. With
     * default handlers the app must never stop by itself.
     */
    private String soak(String name) throws Exception {
        check(!compat.killLeader.isEmpty(), "COMPAT_KILL_LEADER is not set");
        boolean pauses = !compat.pauseLeader.isEmpty();
        String base = compat.prefix + "-streams-" + name;
        String input = base + "-in";
        String output = base + "-out";
        String appId = base + "-app";
        kit.createTopic(input, 3);
        kit.createTopic(output, 3);
        Path stateDir = Files.createTempDirectory("onelog-compat-streams-");
        App app = new App(appId, input, output, stateDir);
        Map<String, Long> sentCounts = new ConcurrentHashMap<>();
        AtomicInteger sent = new AtomicInteger();
        AtomicInteger sendErrors = new AtomicInteger();
        AtomicReference<Exception> firstSendError = new AtomicReference<>();
        AtomicBoolean stopInput = new AtomicBoolean();
        List<FaultFigures> faults = new ArrayList<>();
        List<String> violations = new ArrayList<>();
        long[] outputRecords = new long[1];
        int lines;
        long drainMs;
        long runMs;
        Map<String, Long> expected;
        Thread producer = null;
        try (KafkaConsumer<String, Long> out = assignedOutputConsumer(output, 3);
                KafkaProducer<String, String> in = inputProducer();
                OffsetsMonitor committed = new OffsetsMonitor(appId, input)) {
            app.start();
            long start = System.nanoTime();
            producer = new Thread(() -> {
                try {
                    for (int i = 0; !stopInput.get(); i++) {
                        for (String w : line(i).split(" ")) sentCounts.merge(w, 1L, Long::sum);
                        sent.incrementAndGet();
                        in.send(new ProducerRecord<>(input, "line-" + i, line(i)), (md, e) -> {
                            if (e != null) {
                                if (sendErrors.incrementAndGet() <= 5) {
                                    System.err.println("streams_soak: " + java.time.LocalTime.now() + " input send failed: "
                                            + Compat.describe(e));
                                }
                                firstSendError.compareAndSet(null, e);
                            }
                        });
                        Thread.sleep(LINE_EVERY_MS);
                    }
                } catch (InterruptedException e) {
                    if (!stopInput.get()) {
                        System.err.println("streams_soak: the input producer thread was interrupted after " + sent.get() + " lines");
                    }
                    Thread.currentThread().interrupt();
                } catch (Throwable e) {
                    // Said at once: the input stopping starves the app, which the fault loop
                    // would otherwise report as the app's stall.
                    System.err.println("streams_soak: " + java.time.LocalTime.now() + " the input producer thread stopped after "
                            + sent.get() + " lines: " + Compat.describe(e));
                    e.printStackTrace();
                    sendErrors.incrementAndGet();
                    firstSendError.compareAndSet(null, e instanceof Exception ? (Exception) e : new RuntimeException(e));
                }
            }, "streams-input");
            producer.start();
            InputWatch inputWatch = new InputWatch(producer, sent, sendErrors, firstSendError);
            Map<String, Long> latest = new HashMap<>();
            long end = start + TimeUnit.SECONDS.toNanos(SOAK_S);
            // Before the first fault the app must have committed some input.
            long since = start;
            long above = 0;
            for (int k = 0; ; k++) {
                long due = start + TimeUnit.SECONDS.toNanos((long) SOAK_FAULT_EVERY_S * (k + 1));
                if (due > end - TimeUnit.SECONDS.toNanos(SOAK_TAIL_S)) break;
                while (System.nanoTime() < due) {
                    app.checkRunning(k == 0 ? "before the first fault" : "after fault " + k);
                    pollStrict(out, latest, sentCounts, violations, outputRecords);
                    inputWatch.check();
                }
                check(committed.firstAbove(since, above) != null, "the app committed no input offsets "
                        + (k == 0 ? "before the first fault" : "since fault " + k) + " (committed sum "
                        + committed.lastSum() + ", " + sent.get() + " lines sent)");
                FaultFigures f = new FaultFigures();
                f.n = k + 1;
                f.kind = pauses && k % 2 == 1 ? LeaderFault.PAUSE : LeaderFault.KILL;
                long commandStart = System.nanoTime();
                Compat.FaultRun run = f.kind == LeaderFault.KILL
                        ? compat.fault("COMPAT_KILL_LEADER", compat.killLeader, "killed with SIGKILL", () -> {})
                        : compat.fault("COMPAT_PAUSE_LEADER", compat.pauseLeader, "paused with SIGSTOP", () -> {});
                long at = run.at;
                f.commandMs = (System.nanoTime() - commandStart) / 1_000_000;
                f.atS = (at - start) / 1e9;
                String marker = run.line(f.kind == LeaderFault.KILL ? "killed with SIGKILL" : "paused with SIGSTOP");
                java.util.regex.Matcher m;
                if (marker != null && (m = java.util.regex.Pattern.compile("node (\\d+)").matcher(marker)).find()) f.node = m.group(1);
                String leads = run.line("leads after");
                if (leads != null && (m = java.util.regex.Pattern.compile("node (\\d+) leads after ([0-9.]+)s").matcher(leads)).find()) {
                    f.elected = m.group(2) + " s (node " + m.group(1) + ")";
                }
                if (f.kind == LeaderFault.PAUSE) {
                    long resumed = run.lineAt("resumed with SIGCONT");
                    f.resumedMs = resumed < 0 ? -1 : (resumed - at) / 1_000_000;
                }
                long recoveryDeadline = at + TimeUnit.SECONDS.toNanos(SOAK_RECOVERY_S);
                // The committed sum at the fault: the first reading asked after it.
                Sample atFault;
                while ((atFault = committed.firstAbove(at, -1)) == null) {
                    check(System.nanoTime() < recoveryDeadline, "no committed offsets read within "
                            + SOAK_RECOVERY_S + " s of fault " + f.n + " (" + f.kind + ", "
                            + committed.failures.get() + " offset reads failed)");
                    app.checkRunning("after fault " + f.n + " (" + f.kind + ")");
                    pollStrict(out, latest, sentCounts, violations, outputRecords);
                    inputWatch.check();
                }
                f.before = atFault.sum;
                f.readableMs = (atFault.answered - at) / 1_000_000;
                Sample advanced;
                while ((advanced = committed.firstAbove(at, f.before)) == null) {
                    check(System.nanoTime() < recoveryDeadline, "the app's committed input offsets did not advance past "
                            + f.before + " within " + SOAK_RECOVERY_S + " s of fault " + f.n + " (" + f.kind + "; "
                            + sent.get() + " lines sent, " + committed.failures.get() + " offset reads failed)");
                    app.checkRunning("after fault " + f.n + " (" + f.kind + ")");
                    pollStrict(out, latest, sentCounts, violations, outputRecords);
                    inputWatch.check();
                }
                f.after = advanced.sum;
                f.stallMs = (advanced.answered - at) / 1_000_000;
                f.progressWhilePaused = f.kind == LeaderFault.PAUSE && f.resumedMs >= 0
                        && advanced.answered < at + TimeUnit.MILLISECONDS.toNanos(f.resumedMs);
                faults.add(f);
                System.err.println("streams_soak: " + f.row() + "; readings: " + committed.timeline(at, advanced.answered));
                since = advanced.asked;
                above = advanced.sum;
            }
            while (System.nanoTime() < end) {
                app.checkRunning("after the last fault");
                pollStrict(out, latest, sentCounts, violations, outputRecords);
                inputWatch.check();
            }
            check(committed.firstAbove(since, above) != null, "the app committed no input offsets after the last fault's recovery");
            stopInput.set(true);
            producer.join(TimeUnit.SECONDS.toMillis(10));
            check(!producer.isAlive(), "the input producer did not stop");
            in.flush();
            runMs = (System.nanoTime() - start) / 1_000_000;
            check(sendErrors.get() == 0, sendErrors.get() + " input sends failed, the first: "
                    + Compat.describe(firstSendError.get()));
            lines = sent.get();
            expected = expectedCounts(lines);
            long drainStart = System.nanoTime();
            long drainDeadline = drainStart + TimeUnit.SECONDS.toNanos(SOAK_DRAIN_S);
            while (!latest.equals(expected)) {
                check(violations.isEmpty(), violations.size() + " output violations, the first: "
                        + violations.subList(0, Math.min(3, violations.size())));
                check(System.nanoTime() < drainDeadline, "counts " + latest + " not " + expected + " for " + lines
                        + " lines " + SOAK_DRAIN_S + " s after input stopped");
                app.checkRunning("after input stopped");
                pollStrict(out, latest, expected, violations, outputRecords);
            }
            drainMs = (System.nanoTime() - drainStart) / 1_000_000;
            // A count that rose past its final value and back cannot happen without a violation
            // recorded above; a last check after the counts matched.
            check(violations.isEmpty(), violations.size() + " output violations, the first: "
                    + violations.subList(0, Math.min(3, violations.size())));
            app.checkRunning("at the end");
        } finally {
            stopInput.set(true);
            if (producer != null) producer.join(TimeUnit.SECONDS.toMillis(10));
            if (app.process != null) app.kill();
            deleteTree(stateDir);
        }
        int kills = (int) faults.stream().filter(f -> f.kind == LeaderFault.KILL).count();
        long[] stalls = faults.stream().mapToLong(f -> f.stallMs).sorted().toArray();
        String stallText = stalls.length == 0 ? "no faults" : "time to first committed progress after a fault: min "
                + stalls[0] + " ms, median " + stalls[stalls.length / 2] + " ms, max " + stalls[stalls.length - 1] + " ms";
        StringBuilder table = new StringBuilder();
        for (FaultFigures f : faults) table.append("\n  ").append(f.row());
        System.err.printf("streams_soak: totals: %.1f s of input, %d lines (%d words), %d faults (%d kill -9, %d SIGSTOP %d s),"
                + " %s; app started %d time(s), %d rebalances, %d ERROR log lines; %d output records read"
                + " read_committed, 0 violations; drained to exact counts %d ms after input stopped; final counts %s%s%n",
                runMs / 1000.0, lines, lines * 3L, faults.size(), kills, faults.size() - kills, SOAK_PAUSE_S, stallText,
                app.starts, app.rebalances.get(), app.errorLines.get(), outputRecords[0], drainMs, expected, table);
        return String.format("%d s, %d input lines, %d faults on the Raft leader (%d kill -9 + restart, %d SIGSTOP %d s"
                + " + SIGCONT)%s; %s; drained %d ms after input stopped; Streams never stopped (%d rebalances);"
                + " %d committed output records, each count rising; final counts exact %s", runMs / 1000, lines,
                faults.size(), kills, faults.size() - kills, SOAK_PAUSE_S, pauses ? "" : " (COMPAT_PAUSE_LEADER unset: kills only)",
                stallText, drainMs, app.rebalances.get(), outputRecords[0], expected);
    }

    /** The output topic's `partitions` partitions, assigned (no group: no rebalance ever re-reads), read_committed from the start. */
    private KafkaConsumer<String, Long> assignedOutputConsumer(String output, int partitions) {
        java.util.Properties p = kit.common();
        p.put("auto.offset.reset", "earliest");
        p.put("isolation.level", "read_committed");
        p.put("enable.auto.commit", "false");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", LongDeserializer.class.getName());
        KafkaConsumer<String, Long> c = new KafkaConsumer<>(p);
        List<TopicPartition> tps = new ArrayList<>();
        for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(output, i));
        c.assign(tps);
        c.seekToBeginning(tps);
        return c;
    }

    /**
     * poll() for streams_soak: besides the latest count per word, records a violation for a
     * count above what was sent and for a count not above the word's previous one (committed
     * exactly-once output only ever raises a count).
     */
    private static void pollStrict(KafkaConsumer<String, Long> out, Map<String, Long> latest, Map<String, Long> sent,
            List<String> violations, long[] records) {
        for (ConsumerRecord<String, Long> r : out.poll(Kit.POLL)) {
            records[0]++;
            Long want = sent.get(r.key());
            Long previous = latest.get(r.key());
            String where = " at " + r.topic() + "-" + r.partition() + "@" + r.offset();
            if (want == null) violation(violations, "count for an unknown word " + r.key() + where);
            else if (r.value() > want) violation(violations, "over-count: " + r.key() + " = " + r.value() + " > " + want + " sent" + where);
            if (previous != null && r.value() <= previous) {
                violation(violations, "count of " + r.key() + " went " + previous + " -> " + r.value() + where);
            }
            latest.put(r.key(), r.value());
        }
    }

    private static void violation(List<String> violations, String what) {
        violations.add(what);
        if (violations.size() <= 20) System.err.println("streams_soak: violation: " + what);
    }

    private KafkaConsumer<String, Long> outputConsumer(String output) {
        java.util.Properties p = kit.common();
        p.put("group.id", output + "-checker");
        p.put("auto.offset.reset", "earliest");
        p.put("isolation.level", "read_committed");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", LongDeserializer.class.getName());
        return new KafkaConsumer<>(p);
    }

    /** Latest count per word; a count above the expected final one is an over-count, a failure at once. */
    private static void poll(KafkaConsumer<String, Long> out, Map<String, Long> latest, Map<String, Long> expected) {
        for (ConsumerRecord<String, Long> r : out.poll(Kit.POLL)) {
            Long want = expected.get(r.key());
            check(want != null, "count for an unknown word " + r.key());
            check(r.value() <= want, "over-count: " + r.key() + " = " + r.value() + " > " + want);
            latest.put(r.key(), r.value());
        }
    }

    private static void produce(KafkaProducer<String, String> in, String topic, int from, int to) throws Exception {
        List<java.util.concurrent.Future<?>> acks = new ArrayList<>();
        for (int i = from; i < to; i++) acks.add(in.send(new ProducerRecord<>(topic, "line-" + i, line(i))));
        for (java.util.concurrent.Future<?> f : acks) f.get();
    }

    static void deleteTree(Path dir) throws Exception {
        try (Stream<Path> paths = Files.walk(dir)) {
            paths.sorted(Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
        }
    }
}
