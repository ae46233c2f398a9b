// The Kafka Streams driver of the compatibility matrix (client id kafka-streams-4.1.1): an
// exactly_once_v2 word count (WordCountApp, in a child JVM) over a fixed input the driver
// produces, whose final counts must be exact after a plain run, after a kill -9 of the Streams
// process, and after a kill -9 of the Raft leader (COMPAT_KILL_LEADER).
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
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
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
        Compat compat = new Compat(args.length > 0 ? args[0] : "kafka-streams-4.1.1",
                org.apache.kafka.common.utils.AppInfoParser.getVersion());
        StreamsDriver d = new StreamsDriver(compat);
        compat.run("streams_eos_wordcount", () -> d.wordCount("plain", Fault.NONE));
        compat.run("streams_kill_streams", () -> d.wordCount("kill-streams", Fault.KILL_STREAMS));
        compat.run("streams_kill_leader", () -> d.wordCount("kill-leader", Fault.KILL_LEADER));
        System.exit(0);
    }

    private enum Fault { NONE, KILL_STREAMS, KILL_LEADER }

    private static String line(int i) {
        return WORDS.get(i % WORDS.size()) + " " + WORDS.get((i * 3 + 1) % WORDS.size()) + " "
                + WORDS.get((i * i) % WORDS.size());
    }

    private static Map<String, Long> expectedCounts() {
        Map<String, Long> counts = new TreeMap<>();
        for (int i = 0; i < LINES; i++) for (String w : line(i).split(" ")) counts.merge(w, 1L, Long::sum);
        return counts;
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

        void start() throws Exception {
            process = new ProcessBuilder(command).redirectOutput(ProcessBuilder.Redirect.DISCARD)
                    .redirectError(ProcessBuilder.Redirect.INHERIT).start();
            starts++;
        }

        /** kill -9 (destroyForcibly is SIGKILL on Linux) and wait for the exit. */
        void kill() throws Exception {
            process.destroyForcibly();
            process.waitFor(10, TimeUnit.SECONDS);
        }

        /** Whether it stopped on its own; restarts it if so. */
        boolean restartIfStopped() throws Exception {
            if (process.isAlive()) return false;
            System.err.println("wordcount stopped with exit code " + process.exitValue() + "; restarting it");
            start();
            return true;
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
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(compat.timeoutS) - TimeUnit.SECONDS.toNanos(3);
        int stops = 0;
        String event = "no fault";
        try (KafkaConsumer<String, Long> out = outputConsumer(output);
                KafkaProducer<String, String> in = kit.producer("enable.idempotence", "true",
                        "delivery.timeout.ms", "120000", "max.block.ms", "60000")) {
            out.subscribe(List.of(output));
            app.start();
            Map<String, Long> latest = new HashMap<>();
            produce(in, input, 0, LINES / 2);
            // Mid-run: the fault strikes once the app has produced some counts.
            while (latest.isEmpty()) {
                check(System.nanoTime() < deadline, "no output before the fault; app starts " + app.starts);
                if (app.restartIfStopped()) stops++;
                poll(out, latest, expected);
            }
            if (fault == Fault.KILL_STREAMS) {
                app.kill();
                event = "Streams process killed -9 after " + latest + " partial counts";
                produce(in, input, LINES / 2, LINES);
                app.start();
            } else if (fault == Fault.KILL_LEADER) {
                compat.killLeader();
                event = "Raft leader killed -9 mid-run";
                produce(in, input, LINES / 2, LINES);
            } else {
                produce(in, input, LINES / 2, LINES);
            }
            while (!latest.equals(expected)) {
                check(System.nanoTime() < deadline, "counts " + latest + " not " + expected + " (" + stops
                        + " stops of the app)");
                if (app.restartIfStopped()) stops++;
                poll(out, latest, expected);
            }
        } finally {
            if (app.process != null) app.kill();
            deleteTree(stateDir);
        }
        String restarts = stops == 0 ? "Streams ran without stopping" : "Streams stopped " + stops
                + " time(s) and was restarted by the driver";
        check(fault == Fault.KILL_LEADER || stops == 0, restarts);
        return event + "; " + restarts + "; final counts exact " + expected;
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
