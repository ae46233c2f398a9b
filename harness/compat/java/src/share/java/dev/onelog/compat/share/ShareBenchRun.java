// One measured run of ShareBench: `count` KafkaShareConsumer members of a fresh share group, each
// on its own thread of this JVM, explicit acknowledgement (ACCEPT every record, then commitSync
// after every poll), until `target` distinct records are accepted with the broker's
// confirmation. Owns the run's clock, its ledger of deliveries and acknowledgements (by
// partition and offset), the commitSync latencies and the CPU readings around the window.
//
// The window: the members subscribe and poll once (a share member joins at its first poll), the
// run waits until ShareGroupDescribe shows every member at the target assignment epoch with the
// topic's partitions covered, reads the brokers' CPU, then releases every member at once (t0).
// It ends when the commitSync that confirms the target-th distinct record returns. A member's
// first poll after t0 may hand out records its consumer fetched (acquired) between the
// assignment and t0: at most one fetch's worth (max.poll.records) per member.
package dev.onelog.compat.share;

import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.admin.ShareMemberDescription;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.GroupIdNotFoundException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

final class ShareBenchRun {
    /** How long one poll waits: short, so a member notices the end of the run. */
    private static final Duration POLL = Duration.ofMillis(100);
    /** A commitSync's budget; a longer one fails the partition's acknowledgements. */
    private static final Duration COMMIT_TIMEOUT = Duration.ofSeconds(30);
    /** How long the group may take to settle before the run is abandoned. */
    private static final Duration SETTLE_TIMEOUT = Duration.ofSeconds(90);

    /** What a run needs (an options struct, not positional arguments). */
    record Spec(Properties common, List<String> clientConfigs, String topic, int partitions, String group,
            int members, long target, Duration timeout, List<Long> brokerPids, long clkTck) {}

    /** What a run measured. */
    record Result(double seconds, double settleSeconds, String assignment, Ledger ledger, long[] commitNs,
            long[] perMember, double[] brokerCpuS, double clientCpuS) {}

    private final Spec spec;
    private final Ledger ledger;
    private final CountDownLatch joined;
    private final CountDownLatch start = new CountDownLatch(1);
    private final CountDownLatch done = new CountDownLatch(1);
    private final AtomicBoolean stop = new AtomicBoolean();
    private final AtomicReference<Throwable> failure = new AtomicReference<>();
    private final AtomicBoolean ended = new AtomicBoolean();
    private volatile long endNs;

    private ShareBenchRun(Spec spec, Map<Integer, Long> endOffsets) {
        this.spec = spec;
        this.ledger = new Ledger(endOffsets);
        this.joined = new CountDownLatch(spec.members());
    }

    static Result run(Spec spec, Map<Integer, Long> endOffsets) throws Exception {
        return new ShareBenchRun(spec, endOffsets).measure();
    }

    private Result measure() throws Exception {
        List<Member> members = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < spec.members(); i++) {
            Member m = new Member(i);
            members.add(m);
            Thread t = new Thread(m, spec.group() + "-member-" + i);
            t.start();
            threads.add(t);
        }
        try {
            check(joined.await(SETTLE_TIMEOUT.toSeconds(), TimeUnit.SECONDS), "members did not subscribe");
            rethrow();
            long settleFrom = System.nanoTime();
            String assignment = settle();
            double settleSeconds = (System.nanoTime() - settleFrom) / 1e9;
            long[] cpu0 = brokerTicks();
            long client0 = clientCpuNs();
            long t0 = System.nanoTime();
            start.countDown();
            boolean finished = done.await(spec.timeout().toSeconds(), TimeUnit.SECONDS);
            long[] cpu1 = brokerTicks();
            long client1 = clientCpuNs();
            rethrow();
            check(finished, "accepted " + ledger.accepted() + " of " + spec.target() + " records in "
                    + spec.timeout().toSeconds() + " s (" + ledger.summary() + ")");
            double[] brokerCpu = new double[cpu0.length];
            for (int i = 0; i < cpu0.length; i++) brokerCpu[i] = (cpu1[i] - cpu0[i]) / (double) spec.clkTck();
            stopAll(threads);
            long[] perMember = members.stream().mapToLong(m -> m.records).toArray();
            return new Result((endNs - t0) / 1e9, settleSeconds, assignment, ledger, commitLatencies(members),
                    perMember, brokerCpu, (client1 - client0) / 1e9);
        } finally {
            stopAll(threads);
        }
    }

    private void stopAll(List<Thread> threads) throws InterruptedException {
        stop.set(true);
        start.countDown();
        for (Thread t : threads) t.join(60_000);
    }

    private void rethrow() throws Exception {
        Throwable t = failure.get();
        if (t instanceof Exception e) throw e;
        if (t != null) throw new IllegalStateException(t);
    }

    private static long[] commitLatencies(List<Member> members) {
        List<Long> all = new ArrayList<>();
        for (Member m : members) all.addAll(m.commitNs);
        return all.stream().mapToLong(Long::longValue).sorted().toArray();
    }

    /**
     * Waits until the group has every member, each at the target assignment epoch (it has been
     * sent its assignment in a heartbeat response), the union of their assignments covers the
     * topic and, when there are no more members than partitions, each member owns some. Answers
     * the assignment as "[0, 1] [2] [3]".
     */
    private String settle() throws Exception {
        long deadline = System.nanoTime() + SETTLE_TIMEOUT.toNanos();
        try (Admin admin = Admin.create(spec.common())) {
            while (true) {
                rethrow();
                ShareGroupDescription d = describe(admin);
                if (d == null) {
                    // The members' first heartbeats have not reached the coordinator yet.
                    check(System.nanoTime() < deadline, "the group did not appear in " + SETTLE_TIMEOUT.toSeconds() + " s");
                    Thread.sleep(100);
                    continue;
                }
                Set<Integer> union = new HashSet<>();
                boolean ready = d.members().size() == spec.members() && d.groupEpoch() == d.targetAssignmentEpoch();
                List<String> shown = new ArrayList<>();
                for (ShareMemberDescription m : d.members()) {
                    List<Integer> parts = new ArrayList<>();
                    for (TopicPartition tp : m.assignment().topicPartitions()) parts.add(tp.partition());
                    Collections.sort(parts);
                    shown.add(parts.toString());
                    union.addAll(parts);
                    ready &= m.memberEpoch() == d.targetAssignmentEpoch();
                    ready &= !parts.isEmpty() || spec.members() > spec.partitions();
                }
                Collections.sort(shown);
                String assignment = String.join(" ", shown);
                if (ready && union.size() == spec.partitions()) return assignment;
                check(System.nanoTime() < deadline, "the group did not settle in " + SETTLE_TIMEOUT.toSeconds()
                        + " s: " + d.groupState() + " epoch " + d.groupEpoch() + "/" + d.targetAssignmentEpoch()
                        + " " + assignment);
                Thread.sleep(100);
            }
        }
    }

    /** The group's description, or null while it does not exist. */
    private ShareGroupDescription describe(Admin admin) throws Exception {
        try {
            return admin.describeShareGroups(List.of(spec.group())).describedGroups().get(spec.group()).get();
        } catch (java.util.concurrent.ExecutionException e) {
            if (e.getCause() instanceof GroupIdNotFoundException) return null;
            throw e;
        }
    }

    /** utime + stime of each broker process, in clock ticks (/proc/PID/stat fields 14 and 15). */
    private long[] brokerTicks() throws Exception {
        long[] out = new long[spec.brokerPids().size()];
        for (int i = 0; i < out.length; i++) {
            String stat = java.nio.file.Files.readString(java.nio.file.Path.of("/proc/" + spec.brokerPids().get(i) + "/stat"));
            String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
            out[i] = Long.parseLong(f[11]) + Long.parseLong(f[12]);
        }
        return out;
    }

    private static long clientCpuNs() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean()).getProcessCpuTime();
    }

    private static void check(boolean condition, String message) {
        if (!condition) throw new IllegalStateException(message);
    }

    /** One share group member on its own thread: its consumer is created, used and closed there. */
    private final class Member implements Runnable {
        private final int index;
        final List<Long> commitNs = new ArrayList<>();
        volatile long records;

        Member(int index) {
            this.index = index;
        }

        @Override
        public void run() {
            try (KafkaShareConsumer<byte[], byte[]> c = consumer()) {
                c.subscribe(List.of(spec.topic()));
                // A share member joins at its first poll; before the group settles it has no
                // assignment, so this poll returns nothing (anything it does return is acknowledged
                // after t0 with the rest).
                ConsumerRecords<byte[], byte[]> early = c.poll(Duration.ZERO);
                joined.countDown();
                start.await();
                if (!early.isEmpty()) acknowledge(c, early);
                while (!stop.get()) {
                    ConsumerRecords<byte[], byte[]> batch = c.poll(POLL);
                    if (!batch.isEmpty() && !stop.get()) acknowledge(c, batch);
                }
            } catch (Throwable t) {
                failure.compareAndSet(null, t);
                done.countDown();
            }
        }

        private KafkaShareConsumer<byte[], byte[]> consumer() {
            Properties p = new Properties();
            p.putAll(spec.common());
            p.put("group.id", spec.group());
            p.put("client.id", spec.group() + "-" + index);
            p.put("key.deserializer", ByteArrayDeserializer.class.getName());
            p.put("value.deserializer", ByteArrayDeserializer.class.getName());
            p.put("share.acknowledgement.mode", "explicit");
            for (String kv : spec.clientConfigs()) {
                int eq = kv.indexOf('=');
                p.put(kv.substring(0, eq), kv.substring(eq + 1));
            }
            return new KafkaShareConsumer<>(p);
        }

        /** ACCEPTs the batch, then commitSync: its duration is one latency sample. */
        private void acknowledge(KafkaShareConsumer<byte[], byte[]> c, ConsumerRecords<byte[], byte[]> batch) {
            List<ConsumerRecord<byte[], byte[]>> got = new ArrayList<>();
            for (ConsumerRecord<byte[], byte[]> r : batch) {
                ledger.delivered(r.partition(), r.offset(), r.deliveryCount().orElse((short) 0));
                c.acknowledge(r, AcknowledgeType.ACCEPT);
                got.add(r);
            }
            records += got.size();
            long c0 = System.nanoTime();
            Map<TopicIdPartition, Optional<KafkaException>> results = c.commitSync(COMMIT_TIMEOUT);
            long c1 = System.nanoTime();
            commitNs.add(c1 - c0);
            Map<Integer, Optional<KafkaException>> byPartition = new java.util.HashMap<>();
            results.forEach((tip, e) -> byPartition.put(tip.partition(), e));
            for (ConsumerRecord<byte[], byte[]> r : got) {
                Optional<KafkaException> e = byPartition.get(r.partition());
                boolean ok = e != null && e.isEmpty();
                long accepted = ledger.acknowledged(r.partition(), r.offset(), ok);
                if (ok && accepted == spec.target() && ended.compareAndSet(false, true)) {
                    endNs = c1;
                    done.countDown();
                }
            }
        }
    }

    /** Every delivery and confirmed acceptance, by partition and offset; shared by the members. */
    static final class Ledger {
        private final Map<Integer, Long> endOffsets;
        private final Map<Integer, BitSet> delivered = new java.util.TreeMap<>();
        private final Map<Integer, BitSet> accepted = new java.util.TreeMap<>();
        long deliveries;
        /** Deliveries of a record delivered before (to any member). */
        long redeliveries;
        /** Deliveries with a delivery count above 1. */
        long deliveryCountAbove1;
        short deliveryCountMax;
        /** Deliveries of a record whose ACCEPT was already confirmed: never allowed. */
        long afterAccept;
        /** Confirmed ACCEPTs of a record already accepted: never allowed. */
        long acceptedTwice;
        /** Records whose commitSync reported their partition failed. */
        long ackFailures;
        /** Records outside the topic's offsets as produced. */
        long unknown;
        private long acceptedDistinct;

        Ledger(Map<Integer, Long> endOffsets) {
            this.endOffsets = endOffsets;
            endOffsets.keySet().forEach(p -> {
                delivered.put(p, new BitSet());
                accepted.put(p, new BitSet());
            });
        }

        synchronized void delivered(int partition, long offset, short deliveryCount) {
            deliveries++;
            deliveryCountMax = (short) Math.max(deliveryCountMax, deliveryCount);
            if (deliveryCount > 1) deliveryCountAbove1++;
            if (!known(partition, offset)) {
                unknown++;
                return;
            }
            BitSet d = delivered.get(partition);
            if (d.get((int) offset)) redeliveries++;
            d.set((int) offset);
            if (accepted.get(partition).get((int) offset)) afterAccept++;
        }

        /** Records an acknowledgement's outcome; answers the distinct records accepted so far. */
        synchronized long acknowledged(int partition, long offset, boolean ok) {
            if (!ok) {
                ackFailures++;
            } else if (known(partition, offset)) {
                BitSet a = accepted.get(partition);
                if (a.get((int) offset)) {
                    acceptedTwice++;
                } else {
                    a.set((int) offset);
                    acceptedDistinct++;
                }
            }
            return acceptedDistinct;
        }

        private boolean known(int partition, long offset) {
            Long end = endOffsets.get(partition);
            return end != null && offset >= 0 && offset < end;
        }

        synchronized long accepted() {
            return acceptedDistinct;
        }

        synchronized long distinctDelivered() {
            return delivered.values().stream().mapToLong(BitSet::cardinality).sum();
        }

        synchronized String summary() {
            return deliveries + " deliveries, " + distinctDelivered() + " distinct, " + redeliveries + " redeliveries, "
                    + ackFailures + " failed acknowledgements, " + acceptedTwice + " accepted twice, " + afterAccept
                    + " delivered after their accept";
        }
    }
}
