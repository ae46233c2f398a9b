// The Kafka Streams application of the compatibility matrix: an exactly_once_v2 word count from
// the input topic to the output topic (word -> count), and, given a tags topic and a joined
// topic, also a stream-stream join that needs a repartition: each tag record (key tag-i, value
// line-i) is re-keyed to line-i and joined with the input line line-i (key line-i), giving
// line-i -> "tag-i: <line>" on the joined topic. It runs in its own JVM, started by
// StreamsDriver, because a scenario kills -9 it. It sets no exception handler (Streams' defaults)
// and exits with EXIT_STOPPED when Streams stops on its own (state ERROR or NOT_RUNNING), so the
// driver can tell a stop from a kill; SIGTERM closes it (leaving the group) and exits 0.
// COMPAT_GROUP_PROTOCOL=streams runs it on the KIP-1071 Streams group protocol (group.protocol
// = streams); anything else on the classic one.
// It prints, on stderr: "wordcount <app>: <old> -> <new>" at each state change, "topology <app>
// <n> subtopologies" once, and "tasks <app> <state> <active task ids>" whenever its state or
// its active tasks change (the driver checks task coverage across instances with these).
// Usage: WordCountApp <bootstrap> <application.id> <input> <output> <state.dir> [<tags> <joined>]
package dev.onelog.compat.streams;

import dev.onelog.compat.Kit;
import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.TreeSet;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Produced;

public final class WordCountApp {
    /** Exit code when Streams stopped by itself. */
    static final int EXIT_STOPPED = 3;
    /** The join window (and its grace): far longer than any scenario, so every pair joins. */
    private static final Duration JOIN_WINDOW = Duration.ofMinutes(10);

    private WordCountApp() {}

    /** Whether this run uses the KIP-1071 Streams group protocol (COMPAT_GROUP_PROTOCOL=streams). */
    static boolean streamsProtocol() {
        return "streams".equalsIgnoreCase(System.getenv("COMPAT_GROUP_PROTOCOL"));
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String appId = args[1];
        String input = args[2];
        String output = args[3];
        String stateDir = args[4];
        String tags = args.length > 6 ? args[5] : null;
        String joined = args.length > 6 ? args[6] : null;
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        // The child JVM inherits the driver's environment, COMPAT_SECURITY_* included.
        p.putAll(dev.onelog.compat.Security.fromEnv().properties());
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        // Each transaction's first write reaches the log at once (linger 5 ms, not Streams' 100)
        // and the transaction stays open until the next commit, half a second later: a leader
        // kill then nearly always lands inside an open transaction with a durable write, the case
        // streams_kill_leader is about (a leader that aborts such transactions at takeover stops
        // Streams, whose default production exception handler fails on the abort).
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "500");
        p.put(StreamsConfig.producerPrefix("linger.ms"), "5");
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, Short.toString(Kit.REPLICATION_FACTOR));
        // Internal topics too get the small segment size the matrix's cluster needs.
        p.put(StreamsConfig.topicPrefix("segment.bytes"), Kit.SEGMENT_BYTES);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        if (streamsProtocol()) {
            // The broker owns the session timeout and heartbeat interval of a Streams group: the
            // driver sets the group's streams.session.timeout.ms and streams.heartbeat.interval.ms.
            p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        } else {
            // A killed instance's member must leave the group quickly for the restarted one.
            p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), "6000");
            p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), "1500");
        }

        if (tags != null) {
            // The multi-instance app (ThreeInstances): its transactions may stay open across the
            // reference Kafka's failover, which takes 9-15 s (its broker session timeout first);
            // with Streams' 10 s default the new transaction coordinator aborts them and bumps
            // the epoch, and Streams then stops (InvalidTxnStateException on commit, default
            // handler) or rejoins, which is Kafka's timeout at work, not the failover under test.
            p.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), "60000");
        }
        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> lines = builder.stream(input);
        lines.flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split(" ")))
                .groupBy((key, word) -> word)
                .count()
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        if (tags != null) {
            // map() changes the key: Streams repartitions the tags by line id before the join.
            KStream<String, String> tagsByLine = builder.<String, String>stream(tags)
                    .map((tagId, lineId) -> KeyValue.pair(lineId, tagId));
            lines.join(tagsByLine, (line, tagId) -> tagId + ": " + line,
                            JoinWindows.ofTimeDifferenceAndGrace(JOIN_WINDOW, JOIN_WINDOW))
                    .to(joined);
        }
        Topology topology = builder.build();
        System.err.println("topology " + appId + " " + topology.describe().subtopologies().size() + " subtopologies");
        KafkaStreams streams = new KafkaStreams(topology, p);
        Object closing = new Object();
        boolean[] closed = {false};
        streams.setStateListener((now, before) -> {
            System.err.println("wordcount " + appId + ": " + before + " -> " + now);
            boolean stopping;
            synchronized (closing) {
                stopping = closed[0];
            }
            if (!stopping && (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING)) {
                // halt: close() from a Streams thread would wait for itself.
                Runtime.getRuntime().halt(EXIT_STOPPED);
            }
        });
        // SIGTERM (the driver's graceful stop): close, leaving the group at once, then exit 0.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            synchronized (closing) {
                closed[0] = true;
            }
            streams.close(CloseOptions.groupMembershipOperation(CloseOptions.GroupMembershipOperation.LEAVE_GROUP)
                    .withTimeout(Duration.ofSeconds(30)));
            System.err.println("wordcount " + appId + ": closed");
        }, "wordcount-close"));
        streams.start();
        String last = "";
        while (true) {
            String now = streams.state() + " " + activeTasks(streams);
            if (!now.equals(last)) {
                System.err.println("tasks " + appId + " " + now);
                last = now;
            }
            Thread.sleep(100);
        }
    }

    /** The active task ids of this instance's threads, sorted and comma-separated ("-" for none). */
    private static String activeTasks(KafkaStreams streams) {
        TreeSet<String> ids = new TreeSet<>();
        try {
            for (ThreadMetadata t : streams.metadataForLocalThreads()) {
                for (TaskMetadata task : t.activeTasks()) ids.add(task.taskId().toString());
            }
        } catch (IllegalStateException e) {
            // Not running or rebalancing: no tasks to show.
        }
        return ids.isEmpty() ? "-" : String.join(",", ids);
    }
}
