// Scenarios of the compatibility matrix about consumer groups: a group of two with a rebalance,
// commit and resume; a member leaving and one rejoining; a commit from a member the group has
// dropped. The protocol is Compat.GROUP_PROTOCOL (classic, the default of every version built, or
// the KIP-848 consumer protocol for java-4.4.0-consumer; Kit.consumer sets it up).
package dev.onelog.compat.clients;

import static dev.onelog.compat.Compat.check;

import dev.onelog.compat.Compat;
import dev.onelog.compat.Kit;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.IllegalGenerationException;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.UnknownMemberIdException;

final class Groups {
    private static final Duration SETTLE_TIMEOUT = Duration.ofSeconds(40);
    private final Compat compat;
    private final Kit kit;

    Groups(Compat compat, Kit kit) {
        this.compat = compat;
        this.kit = kit;
    }

    private KafkaConsumer<String, String> member(String group, String... extra) {
        List<String> props = new ArrayList<>(List.of("group.id", group, "session.timeout.ms", "10000",
                "heartbeat.interval.ms", "1000", "max.poll.records", "5"));
        props.addAll(List.of(extra));
        return kit.consumer(props.toArray(new String[0]));
    }

    /**
     * Polls every member in turn (a classic rebalance needs each to rejoin) until their
     * assignments are disjoint, cover all `partitions`, and each member holds at least one.
     * Records polled meanwhile go to `sink`.
     */
    static void settle(List<KafkaConsumer<String, String>> members, int partitions, List<ConsumerRecord<String, String>> sink) {
        long deadline = System.nanoTime() + SETTLE_TIMEOUT.toNanos();
        while (true) {
            for (KafkaConsumer<String, String> m : members) m.poll(Kit.POLL).forEach(sink::add);
            Set<TopicPartition> union = new HashSet<>();
            int total = 0;
            boolean everyone = true;
            for (KafkaConsumer<String, String> m : members) {
                union.addAll(m.assignment());
                total += m.assignment().size();
                everyone &= !m.assignment().isEmpty();
            }
            if (everyone && union.size() == partitions && total == partitions) return;
            check(System.nanoTime() < deadline, "group did not settle: " + assignments(members));
        }
    }

    /**
     * Under the consumer protocol: the Admin client must describe `group` as a consumer-protocol
     * group (ConsumerGroupDescription.type(), kafka-clients 3.7+, called by name so this source
     * still builds against 2.8) with `members` members. Checks nothing under the classic one.
     */
    private void checkGroupType(String group, int members) throws Exception {
        if (!Compat.consumerProtocol()) return;
        try (org.apache.kafka.clients.admin.Admin admin = kit.admin()) {
            org.apache.kafka.clients.admin.ConsumerGroupDescription d =
                    admin.describeConsumerGroups(List.of(group)).describedGroups().get(group).get();
            Object type = d.getClass().getMethod("type").invoke(d);
            check(String.valueOf(type).equalsIgnoreCase("consumer"), "group " + group + " is of type " + type);
            check(d.members().size() == members, "group " + group + " has " + d.members().size() + " members");
        }
    }

    private static String assignments(List<KafkaConsumer<String, String>> members) {
        List<String> out = new ArrayList<>();
        for (KafkaConsumer<String, String> m : members) out.add(m.assignment().toString());
        return String.join(" | ", out);
    }

    String groupRebalance() throws Exception {
        String topic = compat.prefix + "-rebalance";
        String group = topic + "-g";
        kit.createTopic(topic, 3);
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        try (KafkaConsumer<String, String> c1 = member(group); KafkaConsumer<String, String> c2 = member(group)) {
            c1.subscribe(List.of(topic));
            settle(List.of(c1), 3, got);
            c2.subscribe(List.of(topic));
            settle(List.of(c1, c2), 3, got);
            checkGroupType(group, 2);
            String shares = assignments(List.of(c1, c2));
            check(got.isEmpty(), "records before any was produced: " + got.size());
            List<String> first = Kit.numbered("r", 30);
            try (KafkaProducer<String, String> p = kit.producer()) {
                Kit.sendAll(p, topic, first);
            }
            // Each member commits what it has consumed after every poll.
            long deadline = System.nanoTime() + SETTLE_TIMEOUT.toNanos();
            while (got.size() < first.size()) {
                check(System.nanoTime() < deadline, "group read " + got.size() + " of " + first.size());
                for (KafkaConsumer<String, String> m : List.of(c1, c2)) {
                    m.poll(Kit.POLL).forEach(got::add);
                    m.commitSync();
                }
            }
            check(new HashSet<>(Kit.values(got)).equals(new HashSet<>(first)) && got.size() == first.size(),
                    "group read " + Kit.values(got));
            try (KafkaProducer<String, String> p = kit.producer()) {
                Kit.sendAll(p, topic, Kit.numbered("s", 15));
            }
            Map<TopicPartition, Long> committed = committedOffsets(c1, topic);
            c1.close();
            c2.close();
            try (KafkaConsumer<String, String> c3 = member(group)) {
                c3.subscribe(List.of(topic));
                Set<String> resumed = Basics.pollValues(c3, 15);
                check(resumed.equals(new HashSet<>(Kit.numbered("s", 15))), "new member read " + resumed);
                return "shares " + shares + "; committed " + committed + "; a new member read exactly the 15 later records";
            }
        }
    }

    private static Map<TopicPartition, Long> committedOffsets(KafkaConsumer<String, String> c, String topic) {
        Map<TopicPartition, Long> out = new HashMap<>();
        Map<TopicPartition, OffsetAndMetadata> committed = c.committed(new HashSet<>(Kit.partitions(topic, 3)));
        long sum = 0;
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : committed.entrySet()) {
            check(e.getValue() != null, "no committed offset for " + e.getKey());
            out.put(e.getKey(), e.getValue().offset());
            sum += e.getValue().offset();
        }
        check(sum == 30, "committed offsets " + out + " sum to " + sum + ", want 30");
        return out;
    }

    String memberLeaveRejoin() throws Exception {
        String topic = compat.prefix + "-leave";
        String group = topic + "-g";
        kit.createTopic(topic, 3);
        List<ConsumerRecord<String, String>> ignored = new ArrayList<>();
        try (KafkaConsumer<String, String> c1 = member(group)) {
            String before;
            try (KafkaConsumer<String, String> c2 = member(group)) {
                c1.subscribe(List.of(topic));
                c2.subscribe(List.of(topic));
                settle(List.of(c1, c2), 3, ignored);
                before = assignments(List.of(c1, c2));
            }
            // c2 closed: it left the group, so c1 gets every partition without a session timeout.
            long leftAt = System.nanoTime();
            settle(List.of(c1), 3, ignored);
            long takeoverMs = (System.nanoTime() - leftAt) / 1_000_000;
            try (KafkaConsumer<String, String> c3 = member(group)) {
                c3.subscribe(List.of(topic));
                settle(List.of(c1, c3), 3, ignored);
                checkGroupType(group, 2);
                return "two members " + before + "; after a close the other held all 3 in " + takeoverMs
                        + " ms; after a rejoin " + assignments(List.of(c1, c3));
            }
        }
    }

    /**
     * A member the group dropped commits: c1 stops polling, its max.poll.interval.ms runs out
     * while c2 joins, so the group moves on without it (classic: the rebalance times c1 out and
     * its generation is stale; consumer protocol: the client itself leaves the group when the
     * poll interval runs out, and the broker fences its member epoch). Its commit must fail with
     * the group error the client reports for that (classic: CommitFailedException or
     * ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID / REBALANCE_IN_PROGRESS; consumer protocol also
     * STALE_MEMBER_EPOCH or FENCED_MEMBER_EPOCH), and the group's committed offsets must not
     * hold the dropped member's offsets.
     */
    String staleGeneration() throws Exception {
        String topic = compat.prefix + "-stale";
        String group = topic + "-g";
        kit.createTopic(topic, 3, Kit.numbered("g", 9));
        List<ConsumerRecord<String, String>> ignored = new ArrayList<>();
        try (KafkaConsumer<String, String> c1 = member(group, "max.poll.interval.ms", "5000");
                KafkaConsumer<String, String> c2 = member(group)) {
            c1.subscribe(List.of(topic));
            settle(List.of(c1), 3, ignored);
            c2.subscribe(List.of(topic));
            long deadline = System.nanoTime() + SETTLE_TIMEOUT.toNanos();
            while (c2.assignment().size() < 3) {
                check(System.nanoTime() < deadline, "c2 never got every partition: " + c2.assignment());
                c2.poll(Kit.POLL);
            }
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (TopicPartition tp : Kit.partitions(topic, 3)) offsets.put(tp, new OffsetAndMetadata(1));
            String failure;
            try {
                c1.commitSync(offsets);
                throw new AssertionError("a dropped member's commit succeeded");
            } catch (CommitFailedException | RebalanceInProgressException | IllegalGenerationException
                    | UnknownMemberIdException e) {
                failure = Compat.describe(e);
            } catch (org.apache.kafka.common.KafkaException e) {
                // kafka-clients 2.8 has no StaleMemberEpochException / FencedMemberEpochException
                // (KIP-848): matched by name, for the consumer protocol only.
                String type = e.getClass().getSimpleName();
                check(Compat.consumerProtocol()
                        && (type.equals("StaleMemberEpochException") || type.equals("FencedMemberEpochException")),
                        "a dropped member's commit failed with an unexpected error: " + Compat.describe(e));
                failure = Compat.describe(e);
            }
            Map<TopicPartition, OffsetAndMetadata> stored;
            try (org.apache.kafka.clients.admin.Admin admin = kit.admin()) {
                stored = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            }
            for (TopicPartition tp : Kit.partitions(topic, 3)) {
                OffsetAndMetadata o = stored.get(tp);
                check(o == null || o.offset() != 1, "the dropped member's offset was stored: " + stored);
            }
            return "a dropped member's commit failed (" + Compat.GROUP_PROTOCOL + " protocol) and stored nothing: "
                    + failure;
        }
    }
}
