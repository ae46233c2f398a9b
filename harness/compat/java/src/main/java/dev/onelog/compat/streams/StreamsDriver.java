// The Kafka Streams driver of the compatibility matrix (client id kafka-streams-4.4.0): an
// exactly_once_v2 word count (WordCountApp, in a child JVM, default exception handlers) whose
// final counts must be exact after a plain run, after a kill -9 of the Streams process, and
// across two kill -9s of the Raft leader (COMPAT_KILL_LEADER) while input keeps arriving. The
// app must never stop by itself; the leader-kill scenario also measures how long the app's
// committed input offsets stall after each kill.
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

    private final Compat compat;
    private final Kit kit;

    private StreamsDriver(Compat compat) {
        this.compat = compat;
        this.kit = new Kit(compat.bootstrap);
    }

    public static void main(String[] args) {
        // kafka-streams is released with kafka-clients of the same version.
        Compat compat = new Compat(args.length > 0 ? args[0] : "kafka-streams-4.4.0",
                Compat.kafkaVersion());
        StreamsDriver d = new StreamsDriver(compat);
        compat.run("streams_eos_wordcount", () -> d.wordCount("plain", Fault.NONE));
        compat.run("streams_kill_streams", () -> d.wordCount("kill-streams", Fault.KILL_STREAMS));
        compat.run("streams_kill_leader", () -> d.killLeaderTwice("kill-leader"));
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

    private static String line(int i) {
        return WORDS.get(i % WORDS.size()) + " " + WORDS.get((i * 3 + 1) % WORDS.size()) + " "
                + WORDS.get((i * i) % WORDS.size());
    }

    private static Map<String, Long> expectedCounts() {
        return expectedCounts(LINES);
    }

    /** The counts of lines 0..lines-1. */
    private static Map<String, Long> expectedCounts(int lines) {
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
    private final class App {
        private final List<String> command;
        private Process process;
        int starts;

        App(String appId, String input, String output, Path stateDir) {
            command = List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-Xmx384m",
                    "-XX:+UseSerialGC", "-cp", System.getProperty("java.class.path"), WordCountApp.class.getName(),
                    compat.bootstrap, appId, input, output, stateDir.toString());
        }

        /** The first exception line the app logged after an ERROR line, for a stop's message. */
        private final AtomicReference<String> firstError = new AtomicReference<>();

        void start() throws Exception {
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
                        System.err.println(l);
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

    /** The scenario's own deadline, inside the runner's budget. */
    private long deadline() {
        return System.nanoTime() + TimeUnit.SECONDS.toNanos(compat.timeoutS) - TimeUnit.SECONDS.toNanos(3);
    }

    private KafkaProducer<String, String> inputProducer() {
        return kit.producer("enable.idempotence", "true", "delivery.timeout.ms", "120000", "max.block.ms", "60000");
    }

    /** One reading of the app's committed input offsets: when it was asked and answered, and their sum. */
    private static final class Sample {
        final long asked;
        final long answered;
        final long sum;

        Sample(long asked, long answered, long sum) {
            this.asked = asked;
            this.answered = answered;
            this.sum = sum;
        }
    }

    /**
     * Reads the Streams application's consumer group's committed offsets every OFFSETS_EVERY_MS
     * with an Admin client and keeps the sum over the input partitions. A read that fails (the
     * leader is gone) is counted and retried at the next tick.
     */
    private final class OffsetsMonitor implements AutoCloseable {
        /** A reading that failed. */
        private static final long FAILED = Long.MIN_VALUE;
        private final List<Sample> samples = new ArrayList<>();
        private final AtomicBoolean stop = new AtomicBoolean();
        private final AtomicInteger failures = new AtomicInteger();
        private final Thread thread;

        OffsetsMonitor(String group, String input) {
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
                            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                                if (e.getKey().topic().equals(input) && e.getValue() != null) sum += e.getValue().offset();
                            }
                            synchronized (samples) {
                                samples.add(new Sample(asked, System.nanoTime(), sum));
                            }
                        } catch (InterruptedException e) {
                            return;
                        } catch (Exception e) {
                            failures.incrementAndGet();
                            synchronized (samples) {
                                samples.add(new Sample(asked, System.nanoTime(), FAILED));
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

    private static void deleteTree(Path dir) throws Exception {
        try (Stream<Path> paths = Files.walk(dir)) {
            paths.sorted(Comparator.reverseOrder()).map(Path::toFile).forEach(File::delete);
        }
    }
}
