// The multi-instance Kafka Streams scenarios of the compatibility matrix (StreamsDriver runs them
// under both group protocols). One application, WordCountApp with its join: the word count of the
// input lines plus a stream-stream join of each line with its tag, re-keyed (so repartitioned)
// by line id; three sub-topologies, so 9 tasks over 3 partitions each. Each instance is a child
// JVM (StreamsDriver.App) with its own state directory, exactly_once_v2 and default exception
// handlers, while a producer thread writes one line and one tag every 10 ms.
// streams_three_instances: 3 instances; the Raft leader is killed -9 (on Kafka: the group
// coordinator), then one instance is killed -9 and restarted, then the leader is killed again
// (on Kafka: the leader of the input's partition 0). No instance may stop, and none may leave
// RUNNING after a leader kill; after each kill the driver prints how long the committed input
// offsets stalled; the word counts and the joins must be exact for every line produced.
// streams_scale (opt-in, a measurement): 1 instance, then 3, then 1 again (2 closed, leaving the
// group); how long until all tasks run again, each once, on RUNNING instances.
package dev.onelog.compat.streams;

import static dev.onelog.compat.Compat.check;

import dev.onelog.compat.Compat;
import dev.onelog.compat.Kit;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.StringDeserializer;

final class ThreeInstances {
    static final String ID = "streams_three_instances";
    static final int BUDGET_S = 300;
    static final String SCALE_ID = "streams_scale";
    static final int SCALE_BUDGET_S = 600;
    private static final int PARTITIONS = 3;
    private static final int INSTANCES = 3;
    /** One line and one tag every this many ms. */
    private static final long LINE_EVERY_MS = 10;
    /** Input flows this long after the app has recovered, before the next fault. */
    private static final long SETTLE_MS = 2000;
    /** Kafka's offsets.topic.num.partitions: a group's coordinator leads partition abs(hash) % 50. */
    private static final int OFFSETS_PARTITIONS = 50;
    /** streams_scale: rounds of 1 -> 3 -> 1 (COMPAT_STREAMS_SCALE_ROUNDS). */
    private static final int SCALE_ROUNDS = Integer.parseInt(System.getenv().getOrDefault("COMPAT_STREAMS_SCALE_ROUNDS", "2"));

    private final StreamsDriver d;
    private final Compat compat;
    private final List<Path> stateDirs = new ArrayList<>();

    ThreeInstances(StreamsDriver d) {
        this.d = d;
        this.compat = d.compat;
    }

    /** The topics and application id of one run. */
    private final class Names {
        final String input;
        final String tags;
        final String output;
        final String joined;
        final String appId;

        Names(String name) {
            String base = compat.prefix + "-streams-" + name;
            input = base + "-in";
            tags = base + "-tags";
            output = base + "-out";
            joined = base + "-joined";
            appId = coordinatorZeroAppId(base + "-app");
        }

        void create() throws Exception {
            for (String t : List.of(input, tags, output, joined)) d.kit.createTopic(t, PARTITIONS);
        }

        StreamsDriver.App instance(int i) throws Exception {
            Path dir = Files.createTempDirectory("onelog-compat-streams-" + i + "-");
            stateDirs.add(dir);
            return d.new App("[i" + i + "] ", appId, input, output, dir, tags, joined);
        }
    }

    /**
     * An application id whose group Kafka places on __consumer_offsets partition 0, so that
     * kill-kafka.sh with COMPAT_KILL_TOPIC=__consumer_offsets kills the group coordinator (on
     * onelog every role is the Raft leader's and the name does not matter).
     */
    private static String coordinatorZeroAppId(String base) {
        for (int n = 0; ; n++) {
            String id = base + "-" + n;
            int h = id.hashCode();
            if ((h == Integer.MIN_VALUE ? 0 : Math.abs(h)) % OFFSETS_PARTITIONS == 0) return id;
        }
    }

    /** The input producer: line i to the input (key line-i), tag-i -> line-i to the tags, every LINE_EVERY_MS. */
    private static final class Feed {
        final Map<String, Long> sentCounts = new ConcurrentHashMap<>();
        final AtomicInteger sent = new AtomicInteger();
        private final AtomicInteger errors = new AtomicInteger();
        private final AtomicReference<Exception> firstError = new AtomicReference<>();
        private final AtomicBoolean stop = new AtomicBoolean();
        private final KafkaProducer<String, String> in;
        private final Thread thread;

        Feed(KafkaProducer<String, String> in, Names n) {
            this.in = in;
            thread = new Thread(() -> {
                try {
                    for (int i = 0; !stop.get(); i++) {
                        for (String w : StreamsDriver.line(i).split(" ")) sentCounts.merge(w, 1L, Long::sum);
                        sent.incrementAndGet();
                        in.send(new ProducerRecord<>(n.input, "line-" + i, StreamsDriver.line(i)), this::acked);
                        in.send(new ProducerRecord<>(n.tags, "tag-" + i, "line-" + i), this::acked);
                        Thread.sleep(LINE_EVERY_MS);
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                } catch (Exception e) {
                    errors.incrementAndGet();
                    firstError.compareAndSet(null, e);
                }
            }, "streams-input");
            thread.start();
        }

        private void acked(org.apache.kafka.clients.producer.RecordMetadata md, Exception e) {
            if (e == null) return;
            errors.incrementAndGet();
            firstError.compareAndSet(null, e);
        }

        /** Stops the input and answers the number of lines (and tags) produced; fails on any send error. */
        int stop() throws Exception {
            stop.set(true);
            thread.join(TimeUnit.SECONDS.toMillis(10));
            check(!thread.isAlive(), "the input producer did not stop");
            in.flush();
            check(errors.get() == 0, errors.get() + " input sends failed, the first: " + Compat.describe(firstError.get()));
            return sent.get();
        }
    }

    /**
     * The output and joined topics read read_committed by an assigned (groupless) consumer: the
     * latest count per word (never above what was sent) and each line's join result (exactly
     * "tag-i: <line i>", at most once).
     */
    private static final class Output implements AutoCloseable {
        final Map<String, Long> counts = new HashMap<>();
        final Map<Integer, String> joins = new HashMap<>();
        private final KafkaConsumer<String, byte[]> consumer;
        private final String output;
        private final LongDeserializer longs = new LongDeserializer();

        Output(Kit kit, Names n) {
            java.util.Properties p = kit.common();
            p.put("auto.offset.reset", "earliest");
            p.put("isolation.level", "read_committed");
            p.put("enable.auto.commit", "false");
            p.put("key.deserializer", StringDeserializer.class.getName());
            p.put("value.deserializer", ByteArrayDeserializer.class.getName());
            consumer = new KafkaConsumer<>(p);
            output = n.output;
            List<TopicPartition> tps = new ArrayList<>();
            for (String t : List.of(n.output, n.joined)) for (int i = 0; i < PARTITIONS; i++) tps.add(new TopicPartition(t, i));
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
        }

        void poll(Feed feed) {
            for (ConsumerRecord<String, byte[]> r : consumer.poll(Kit.POLL)) {
                String where = " at " + r.topic() + "-" + r.partition() + "@" + r.offset();
                if (r.topic().equals(output)) {
                    long count = longs.deserialize(r.topic(), r.value());
                    Long sent = feed.sentCounts.get(r.key());
                    check(sent != null, "count for an unknown word " + r.key() + where);
                    check(count <= sent, "over-count: " + r.key() + " = " + count + " > " + sent + " sent" + where);
                    counts.put(r.key(), count);
                } else {
                    String value = new String(r.value(), java.nio.charset.StandardCharsets.UTF_8);
                    check(r.key() != null && r.key().startsWith("line-"), "join result with key " + r.key() + where);
                    int i = Integer.parseInt(r.key().substring(5));
                    check(i < feed.sent.get(), "join result for line " + i + " not produced yet" + where);
                    String want = "tag-" + i + ": " + StreamsDriver.line(i);
                    check(value.equals(want), "join result " + r.key() + " = '" + value + "', not '" + want + "'" + where);
                    String before = joins.put(i, value);
                    check(before == null, "join result for " + r.key() + " twice" + where);
                }
            }
        }

        /** Reads until the counts and joins are exact for `lines` lines; fails at `deadline`. */
        void drain(Feed feed, int lines, List<StreamsDriver.App> apps, long deadline) {
            Map<String, Long> expected = StreamsDriver.expectedCounts(lines);
            while (!counts.equals(expected) || joins.size() != lines) {
                check(System.nanoTime() < deadline, "after input stopped: counts " + counts + " not " + expected + "; "
                        + joins.size() + " of " + lines + " join results");
                for (StreamsDriver.App a : apps) a.checkRunning("after input stopped");
                poll(feed);
            }
        }

        @Override
        public void close() {
            consumer.close();
        }
    }

    /** Every task id of the topology: subtopology_partition, from the instances' "topology" report. */
    private static Set<String> allTasks(List<StreamsDriver.App> apps) {
        int subtopologies = -1;
        for (StreamsDriver.App a : apps) subtopologies = Math.max(subtopologies, a.subtopologies.get());
        Set<String> all = new TreeSet<>();
        for (int s = 0; s < subtopologies; s++) for (int p = 0; p < PARTITIONS; p++) all.add(s + "_" + p);
        return all;
    }

    /**
     * Null when every instance of `apps` is RUNNING, each has at least one active task, and
     * together they run every task of the topology exactly once; else what is missing.
     */
    private static String notCovered(List<StreamsDriver.App> apps) {
        Set<String> all = allTasks(apps);
        if (all.isEmpty()) return "no topology reported yet";
        Set<String> seen = new TreeSet<>();
        for (int i = 0; i < apps.size(); i++) {
            String t = apps.get(i).tasks.get();
            if (!t.startsWith("RUNNING ")) return "instance " + i + " is " + (t.isEmpty() ? "starting" : t);
            String ids = t.substring("RUNNING ".length());
            if (ids.equals("-")) return "instance " + i + " runs no task";
            for (String id : ids.split(",")) if (!seen.add(id)) return "task " + id + " runs twice";
        }
        return seen.equals(all) ? null : "active tasks " + seen + ", not " + all;
    }

    /** "3/3/3": each instance's active task count. */
    private static String spread(List<StreamsDriver.App> apps) {
        List<String> n = new ArrayList<>();
        for (StreamsDriver.App a : apps) {
            String t = a.tasks.get();
            String ids = t.contains(" ") ? t.substring(t.indexOf(' ') + 1) : "-";
            n.add(Integer.toString(ids.equals("-") ? 0 : ids.split(",").length));
        }
        return String.join("/", n);
    }

    /** Polls the output until `apps` cover every task (notCovered); answers when; fails at `deadline`. */
    private long waitCovered(List<StreamsDriver.App> apps, List<StreamsDriver.App> alive, Output out, Feed feed,
            long deadline, String when) {
        String why;
        while ((why = notCovered(apps)) != null) {
            check(System.nanoTime() < deadline, "tasks not all running " + when + ": " + why);
            for (StreamsDriver.App a : alive) a.checkRunning(when);
            out.poll(feed);
        }
        return System.nanoTime();
    }

    /** Polls the output for `ms`, checking that every instance runs. */
    private static void settle(long ms, List<StreamsDriver.App> apps, Output out, Feed feed, String when) {
        long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ms);
        while (System.nanoTime() < until) {
            for (StreamsDriver.App a : apps) a.checkRunning(when);
            out.poll(feed);
        }
    }

    /** A leader kill's window must hold no rebalance of its own: none may still be under way when it starts. */
    private static final long QUIET_MS = 3000;

    /**
     * Waits until every instance has logged no state change for QUIET_MS while all tasks ran
     * (notCovered), so that a change after the next kill is the kill's; fails at `deadline`.
     */
    private static void quiet(List<StreamsDriver.App> apps, Output out, Feed feed, long deadline, String when) {
        long since = System.nanoTime();
        int changes = -1;
        while (true) {
            int now = 0;
            for (StreamsDriver.App a : apps) now += a.changes.size();
            if (now != changes || notCovered(apps) != null) {
                changes = now;
                since = System.nanoTime();
            } else if (System.nanoTime() - since >= TimeUnit.MILLISECONDS.toNanos(QUIET_MS)) {
                return;
            }
            check(System.nanoTime() < deadline, "the instances did not settle " + when + ": " + notCovered(apps));
            for (StreamsDriver.App a : apps) a.checkRunning(when);
            out.poll(feed);
        }
    }

    /** What the committed input offsets did after a fault at `at`. */
    private final class Stall {
        long sumMs;
        long allMs;
        String timeline;

        /** Waits until the sum and then every input partition's committed offset advance past their value at `at`. */
        Stall(StreamsDriver.OffsetsMonitor committed, long at, List<StreamsDriver.App> apps, Output out, Feed feed,
                long deadline, String when) {
            StreamsDriver.Sample before;
            while ((before = committed.firstAbove(at, -1)) == null) {
                check(System.nanoTime() < deadline, "no committed offsets read " + when + " ("
                        + committed.failures.get() + " offset reads failed)");
                for (StreamsDriver.App a : apps) a.checkRunning(when);
                out.poll(feed);
            }
            StreamsDriver.Sample sum;
            StreamsDriver.Sample all;
            while ((sum = committed.firstAbove(at, before.sum)) == null || (all = committed.firstAllAbove(at, before)) == null) {
                check(System.nanoTime() < deadline, "committed input offsets " + before.offsets + " did not all advance "
                        + when + " (" + feed.sent.get() + " lines sent, " + committed.failures.get() + " offset reads failed)");
                for (StreamsDriver.App a : apps) a.checkRunning(when);
                out.poll(feed);
            }
            sumMs = (sum.answered - at) / 1_000_000;
            allMs = (all.answered - at) / 1_000_000;
            timeline = committed.timeline(at, all.answered);
        }
    }

    /** Every change away from RUNNING that an instance logged at or after `since`, for the failure message. */
    private static List<String> leftRunning(List<StreamsDriver.App> apps, long since) {
        List<String> left = new ArrayList<>();
        for (int i = 0; i < apps.size(); i++) {
            synchronized (apps.get(i).changes) {
                for (Map.Entry<Long, String> c : apps.get(i).changes) {
                    if (c.getKey() >= since && c.getValue().startsWith("RUNNING ->")) {
                        left.add("instance " + i + " " + c.getValue() + " at +" + (c.getKey() - since) / 1_000_000 + " ms");
                    }
                }
            }
        }
        return left;
    }

    /**
     * The leader kill: COMPAT_KILL_LEADER with COMPAT_KILL_TOPIC (kill-kafka.sh kills the
     * leader of that topic's partition 0; kill-leader.sh ignores it). Answers when it struck.
     */
    private long killLeader(String topic) throws Exception {
        check(!compat.killLeader.isEmpty(), "COMPAT_KILL_LEADER is not set");
        return compat.fault("COMPAT_KILL_LEADER", "COMPAT_KILL_TOPIC=" + topic + " " + compat.killLeader,
                "killed with SIGKILL", () -> {}).at;
    }

    /** streams_three_instances (see the file's header). */
    String run() throws Exception {
        Names n = new Names("three");
        n.create();
        List<StreamsDriver.App> apps = new ArrayList<>();
        for (int i = 0; i < INSTANCES; i++) apps.add(n.instance(i));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(BUDGET_S - 5);
        List<String> report = new ArrayList<>();
        int lines;
        try (Output out = new Output(d.kit, n);
                KafkaProducer<String, String> in = d.inputProducer();
                StreamsDriver.OffsetsMonitor committed = d.new OffsetsMonitor(n.appId, Set.of(n.input, n.tags))) {
            long start = System.nanoTime();
            for (StreamsDriver.App a : apps) a.start();
            Feed feed = new Feed(in, n);
            long covered = waitCovered(apps, apps, out, feed, deadline, "after the start");
            waitProgress(committed, start, apps, out, feed, deadline);
            report.add(String.format("%d tasks (%s) running %d ms after the start", allTasks(apps).size(), spread(apps),
                    (covered - start) / 1_000_000));
            settle(SETTLE_MS, apps, out, feed, "after the start");
            String[][] kills = {{"1", "__consumer_offsets", "group coordinator"}, {"2", n.input, "input partition 0 leader"}};
            for (String[] k : kills) {
                if (k[0].equals("2")) report.add(killInstance(apps, committed, out, feed, deadline));
                quiet(apps, out, feed, deadline, "before leader kill " + k[0]);
                long at = killLeader(k[1]);
                Stall s = new Stall(committed, at, apps, out, feed, deadline, "after leader kill " + k[0]);
                settle(SETTLE_MS, apps, out, feed, "after leader kill " + k[0]);
                String what = "leader kill " + k[0] + " (Kafka: " + k[2] + ")";
                System.err.printf("%s: %s: committed input sum advanced after %d ms, every input partition after %d ms;"
                        + " readings: %s%n", ID, what, s.sumMs, s.allMs, s.timeline);
                List<String> left = leftRunning(apps, at);
                check(left.isEmpty(), "an instance left RUNNING after " + what + ": " + left);
                report.add(String.format("%s: stall %d ms, every partition %d ms; all stayed RUNNING", what, s.sumMs, s.allMs));
            }
            lines = feed.stop();
            out.drain(feed, lines, apps, deadline);
            report.add(lines + " lines: counts and joins exact");
        } finally {
            for (StreamsDriver.App a : apps) if (a.process != null) a.kill();
            for (Path p : stateDirs) StreamsDriver.deleteTree(p);
        }
        return String.join("; ", report);
    }

    /** Waits for any committed progress since `since`; fails at `deadline`. */
    private static void waitProgress(StreamsDriver.OffsetsMonitor committed, long since, List<StreamsDriver.App> apps,
            Output out, Feed feed, long deadline) {
        while (committed.firstAbove(since, 0) == null) {
            check(System.nanoTime() < deadline, "no committed input offsets after the start");
            for (StreamsDriver.App a : apps) a.checkRunning("after the start");
            out.poll(feed);
        }
    }

    /** kill -9 of instance 1 and its restart at once: how long until every task and partition runs again. */
    private String killInstance(List<StreamsDriver.App> apps, StreamsDriver.OffsetsMonitor committed, Output out, Feed feed,
            long deadline) throws Exception {
        StreamsDriver.App victim = apps.get(1);
        long at = System.nanoTime();
        victim.kill();
        victim.start();
        long covered = waitCovered(apps, apps, out, feed, deadline, "after instance 1's kill -9 and restart");
        Stall s = new Stall(committed, at, apps, out, feed, deadline, "after instance 1's kill -9");
        settle(SETTLE_MS, apps, out, feed, "after instance 1's restart");
        System.err.printf("%s: instance 1 killed -9 and restarted: all tasks running again (%s) after %d ms; committed input"
                + " sum advanced after %d ms, every input partition after %d ms; readings: %s%n", ID, spread(apps),
                (covered - at) / 1_000_000, s.sumMs, s.allMs, s.timeline);
        return String.format("instance kill -9 + restart: all tasks again after %d ms; stall %d ms, every partition %d ms",
                (covered - at) / 1_000_000, s.sumMs, s.allMs);
    }

    /** streams_scale (see the file's header): SCALE_ROUNDS rounds of 1 -> 3 -> 1 instances. */
    String scale() throws Exception {
        Names n = new Names("scale");
        n.create();
        List<StreamsDriver.App> apps = new ArrayList<>();
        for (int i = 0; i < INSTANCES; i++) apps.add(n.instance(i));
        List<StreamsDriver.App> first = apps.subList(0, 1);
        List<StreamsDriver.App> others = apps.subList(1, INSTANCES);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(SCALE_BUDGET_S - 5);
        List<String> report = new ArrayList<>();
        Map<String, List<Long>> figures = new TreeMap<>();
        try (Output out = new Output(d.kit, n); KafkaProducer<String, String> in = d.inputProducer()) {
            long start = System.nanoTime();
            apps.get(0).start();
            Feed feed = new Feed(in, n);
            long ready = waitCovered(first, first, out, feed, deadline, "after the first instance started");
            report.add(String.format("1 instance: %d tasks running %d ms after its start", allTasks(first).size(),
                    (ready - start) / 1_000_000));
            for (int round = 1; round <= SCALE_ROUNDS; round++) {
                settle(SETTLE_MS, first, out, feed, "before scaling up");
                long up = System.nanoTime();
                for (StreamsDriver.App a : others) a.start();
                long upMs = (waitCovered(apps, apps, out, feed, deadline, "after scaling to 3") - up) / 1_000_000;
                String upSpread = spread(apps);
                settle(SETTLE_MS, apps, out, feed, "before scaling down");
                long down = System.nanoTime();
                for (StreamsDriver.App a : others) a.process.destroy();
                long downMs = (waitCovered(first, first, out, feed, deadline, "after scaling to 1") - down) / 1_000_000;
                for (StreamsDriver.App a : others) a.stop();
                figures.computeIfAbsent("up", k -> new ArrayList<>()).add(upMs);
                figures.computeIfAbsent("down", k -> new ArrayList<>()).add(downMs);
                System.err.printf("%s: round %d: 1 -> 3 instances: all tasks running (%s) after %d ms; 3 -> 1 (two closed,"
                        + " leaving the group): all tasks running on the one after %d ms%n", SCALE_ID, round, upSpread, upMs, downMs);
                report.add(String.format("round %d: 1->3 %d ms (%s), 3->1 %d ms", round, upMs, upSpread, downMs));
            }
            int lines = feed.stop();
            out.drain(feed, lines, first, deadline);
            report.add(lines + " lines: word counts and join results exact");
        } finally {
            for (StreamsDriver.App a : apps) if (a.process != null && a.process.isAlive()) a.kill();
            for (Path p : stateDirs) StreamsDriver.deleteTree(p);
        }
        // One machine-readable line for scripts/compat.sh --streams-scale's table.
        System.err.printf("streams_scale: result client=%s up_ms=%s down_ms=%s%n", compat.client,
                join(figures.get("up")), join(figures.get("down")));
        return String.join("; ", report);
    }

    private static String join(List<Long> ms) {
        List<String> s = new ArrayList<>();
        for (long m : ms) s.add(Long.toString(m));
        return String.join(",", s);
    }
}
