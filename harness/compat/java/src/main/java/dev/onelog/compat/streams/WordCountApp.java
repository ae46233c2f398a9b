// The Kafka Streams application of the compatibility matrix: an exactly_once_v2 word count from
// the input topic to the output topic (word -> count). It runs in its own JVM, started by
// StreamsDriver, because a scenario kills -9 it. It sets no exception handler (Streams' defaults)
// and exits with EXIT_STOPPED when Streams stops on its own (state ERROR or NOT_RUNNING), so the
// driver can tell a stop from a kill.
// Usage: WordCountApp <bootstrap> <application.id> <input> <output> <state.dir>
package dev.onelog.compat.streams;

import dev.onelog.compat.Kit;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Produced;

public final class WordCountApp {
    /** Exit code when Streams stopped by itself. */
    static final int EXIT_STOPPED = 3;

    private WordCountApp() {}

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String appId = args[1];
        String input = args[2];
        String output = args[3];
        String stateDir = args[4];
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
        // A killed instance's member must leave the group quickly for the restarted one.
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), "6000");
        p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), "1500");

        StreamsBuilder builder = new StreamsBuilder();
        builder.<String, String>stream(input)
                .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split(" ")))
                .groupBy((key, word) -> word)
                .count()
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        streams.setStateListener((now, before) -> {
            System.err.println("wordcount " + appId + ": " + before + " -> " + now);
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                // halt: close() from a Streams thread would wait for itself.
                Runtime.getRuntime().halt(EXIT_STOPPED);
            }
        });
        streams.start();
        Thread.currentThread().join();
    }
}
