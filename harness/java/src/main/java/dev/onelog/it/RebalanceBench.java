// Rebalance time (issue 28): --members consumers of one group share a --partitions topic and
// settle; then one more joins, and the time from its subscribe() until the group is settled
// again (every partition owned by exactly one of the members, the newcomer owning some, by the
// members' own rebalance callbacks) is one sample. The newcomer then closes, the group settles
// without it, and the join is repeated --rounds times. Each member is a KafkaConsumer on its own
// thread, polling every 100 ms; client configs on the command line (group.protocol=consumer,
// partition.assignment.strategy, ...) apply to every member.
//
// Prints one JSON line per join and one summary:
//   {"event":"join","round":i,"ms":t}
//   {"event":"summary","members":N,"rounds":R,"min_ms":..,"median_ms":..,"max_ms":..}
// Creates the topic (replication factor --replication-factor, default 3) when it is missing.
package dev.onelog.it;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class RebalanceBench {
    /** How long one settling may take before the run is abandoned. */
    private static final long SETTLE_TIMEOUT_MS = 120_000;

    public static void main(String[] argv) throws Exception {
        Args args = new Args(argv);
        String topic = args.string("topic");
        int partitions = (int) args.number("partitions", 30);
        int members = (int) args.number("members", 10);
        int rounds = (int) args.number("rounds", 5);
        createTopic(args, topic, partitions, (short) args.number("replication-factor", 3));
        Map<Object, Set<Integer>> owned = new ConcurrentHashMap<>();
        List<Member> group = new ArrayList<>();
        for (int i = 0; i < members; i++) {
            group.add(Member.start(args, topic, owned));
        }
        settle(owned, group, partitions);
        List<Long> samples = new ArrayList<>();
        for (int round = 1; round <= rounds; round++) {
            long started = System.nanoTime();
            Member newcomer = Member.start(args, topic, owned);
            group.add(newcomer);
            settle(owned, group, partitions);
            long ms = (System.nanoTime() - started) / 1_000_000;
            samples.add(ms);
            Json.println(Json.obj("event", "join", "round", round, "ms", ms));
            group.remove(newcomer);
            newcomer.close();
            settle(owned, group, partitions);
        }
        for (Member m : group) {
            m.close();
        }
        samples.sort(null);
        Json.println(Json.obj("event", "summary", "members", members, "rounds", rounds,
            "min_ms", samples.get(0), "median_ms", samples.get(samples.size() / 2),
            "max_ms", samples.get(samples.size() - 1)));
    }

    private static void createTopic(Args args, String topic, int partitions, short rf) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args.bootstrap);
        try (Admin admin = Admin.create(props)) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, rf))).all().get();
        } catch (java.util.concurrent.ExecutionException e) {
            if (!(e.getCause() instanceof TopicExistsException)) {
                throw e;
            }
        }
    }

    /** Waits until the members in `group` own every partition once, each some. */
    private static void settle(Map<Object, Set<Integer>> owned, List<Member> group, int partitions)
            throws InterruptedException {
        long deadline = System.currentTimeMillis() + SETTLE_TIMEOUT_MS;
        while (!settled(owned, group, partitions)) {
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("the group did not settle: " + owned);
            }
            Thread.sleep(5);
        }
    }

    private static boolean settled(Map<Object, Set<Integer>> owned, List<Member> group, int partitions) {
        Set<Integer> union = new HashSet<>();
        int total = 0;
        for (Member m : group) {
            Set<Integer> mine = owned.getOrDefault(m, Set.of());
            synchronized (mine) {
                if (mine.isEmpty()) {
                    return false;
                }
                total += mine.size();
                union.addAll(mine);
            }
        }
        return total == partitions && union.size() == partitions;
    }

    /** One consumer polling on its own thread, its owned partitions kept in `owned`. */
    private static final class Member {
        private final Thread thread;
        private final Map<Object, Set<Integer>> owned;
        private volatile boolean stopping;

        private Member(Args args, String topic, Map<Object, Set<Integer>> owned) {
            this.owned = owned;
            Set<Integer> mine = new HashSet<>();
            owned.put(this, mine);
            Map<String, Object> defaults = Map.of(
                "group.id", args.string("group"),
                "key.deserializer", ByteArrayDeserializer.class.getName(),
                "value.deserializer", ByteArrayDeserializer.class.getName(),
                "enable.auto.commit", "false");
            Properties config = args.clientConfig(defaults);
            thread = new Thread(() -> run(config, topic, mine), "member");
        }

        static Member start(Args args, String topic, Map<Object, Set<Integer>> owned) {
            Member m = new Member(args, topic, owned);
            m.thread.start();
            return m;
        }

        private void run(Properties config, String topic, Set<Integer> mine) {
            try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(config)) {
                consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
                        synchronized (mine) {
                            partitions.forEach(tp -> mine.add(tp.partition()));
                        }
                    }

                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
                        synchronized (mine) {
                            partitions.forEach(tp -> mine.remove(tp.partition()));
                        }
                    }
                });
                while (!stopping) {
                    consumer.poll(Duration.ofMillis(100));
                }
            }
        }

        void close() throws InterruptedException {
            stopping = true;
            thread.join();
            owned.remove(this);
        }
    }
}
