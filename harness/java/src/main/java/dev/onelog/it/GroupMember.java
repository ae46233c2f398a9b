// One member of a consumer group, run for as long as the test wants it: subscribes to --topic
// in --group, and after processing each poll's records commits their offsets (commitSync of
// each processed record's offset + 1), the at-least-once pattern that gives exactly once when
// no commit fails.
//
// Prints one JSON line per event on stdout:
//   {"event":"assignment","partitions":[..]}        after every rebalance callback (whole set)
//   {"event":"processed","ids":[..]}                 record values (ids) of one poll, processed
//   {"event":"committed","offsets":{"p":o,..}}      after that poll's commitSync returned
//   {"event":"commit_failed","error":".."}           a commitSync that threw
//   {"event":"closed","processed":N,"commit_failures":K}   last line, after close()
// Reads stdin: a line "stop" (or end of input) makes it close the consumer, which sends
// LeaveGroup, and exit 0. --max-per-partition=N processes at most N records per partition and
// then pauses it (the member stays in the group with a known committed position).
package dev.onelog.it;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public final class GroupMember {
    private static volatile boolean stopping;

    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        String topic = args.string("topic");
        long maxPerPartition = args.number("max-per-partition", Long.MAX_VALUE);
        Map<String, Object> defaults = Map.of(
            "group.id", args.string("group"),
            "key.deserializer", StringDeserializer.class.getName(),
            "value.deserializer", StringDeserializer.class.getName(),
            "auto.offset.reset", "earliest",
            "enable.auto.commit", "false");
        Thread stdin = new Thread(GroupMember::waitForStop, "stdin");
        stdin.setDaemon(true);
        stdin.start();

        Set<Integer> owned = new TreeSet<>();
        Map<Integer, Long> processedPerPartition = new HashMap<>();
        long processed = 0;
        long commitFailures = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(args.clientConfig(defaults))) {
            consumer.subscribe(List.of(topic), new Listener(owned));
            while (!stopping) {
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                List<Long> ids = new ArrayList<>();
                for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(100))) {
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    if (processedPerPartition.getOrDefault(r.partition(), 0L) >= maxPerPartition) {
                        consumer.pause(List.of(tp));
                        continue;
                    }
                    ids.add(Long.parseLong(r.value()));
                    processedPerPartition.merge(r.partition(), 1L, Long::sum);
                    offsets.put(tp, new OffsetAndMetadata(r.offset() + 1));
                }
                if (ids.isEmpty()) {
                    continue;
                }
                processed += ids.size();
                Json.println(Json.obj("event", "processed", "ids", ids));
                try {
                    consumer.commitSync(offsets);
                    Map<Integer, Long> committed = new TreeMap<>();
                    offsets.forEach((tp, o) -> committed.put(tp.partition(), o.offset()));
                    Json.println(Json.obj("event", "committed", "offsets", committed));
                } catch (RuntimeException e) {
                    commitFailures++;
                    Json.println(Json.obj("event", "commit_failed", "error", e.toString()));
                }
            }
        }
        Json.println(Json.obj("event", "closed", "processed", processed, "commit_failures", commitFailures));
    }

    private static void waitForStop() {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in))) {
            String line;
            while ((line = in.readLine()) != null && !line.trim().equals("stop")) {
                // Only "stop" means anything.
            }
        } catch (Exception e) {
            // A broken stdin stops the member like end of input.
        }
        stopping = true;
    }

    /** Keeps the owned set and prints it after every change. */
    private record Listener(Set<Integer> owned) implements ConsumerRebalanceListener {
        @Override
        public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
            partitions.forEach(tp -> owned.add(tp.partition()));
            print();
        }

        @Override
        public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
            partitions.forEach(tp -> owned.remove(tp.partition()));
            print();
        }

        @Override
        public void onPartitionsLost(Collection<TopicPartition> partitions) {
            onPartitionsRevoked(partitions);
        }

        private void print() {
            Json.println(Json.obj("event", "assignment", "partitions", new ArrayList<>(owned)));
        }
    }
}
