// Scenarios of the compatibility matrix about failures: a kill -9 of the Raft leader while
// producing and consuming (nothing acknowledged may be lost), the same kill under a loop of
// transactions (none may be aborted, every committed one is read back exactly once), a produce
// to a missing topic with auto-create off, and a fetch past the end with no reset policy.
package dev.onelog.compat.clients;

import static dev.onelog.compat.Compat.check;

import dev.onelog.compat.Compat;
import dev.onelog.compat.Kit;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

final class Faults {
    /** How long records flow before and after the kill. */
    private static final Duration FLOW = Duration.ofSeconds(2);
    private final Compat compat;
    private final Kit kit;

    Faults(Compat compat, Kit kit) {
        this.compat = compat;
        this.kit = kit;
    }

    String leaderKill() throws Exception {
        String topic = compat.prefix + "-leader-kill";
        kit.createTopic(topic, 3);
        Set<String> acked = ConcurrentHashMap.newKeySet();
        AtomicInteger failed = new AtomicInteger();
        AtomicInteger consumed = new AtomicInteger();
        AtomicBoolean stop = new AtomicBoolean();
        AtomicReference<Throwable> crash = new AtomicReference<>();
        Thread producer = new Thread(() -> {
            try (KafkaProducer<String, String> p = kit.producer("enable.idempotence", "true", "retries", "2147483647")) {
                for (int i = 0; !stop.get(); i++) {
                    String v = "lk" + i;
                    p.send(new ProducerRecord<>(topic, v, v), (md, e) -> {
                        if (e == null) acked.add(v);
                        else failed.incrementAndGet();
                    });
                    Thread.sleep(2);
                }
                p.flush();
            } catch (Throwable t) {
                crash.compareAndSet(null, t);
            }
        }, "leader-kill-producer");
        Thread consumer = new Thread(() -> {
            try (KafkaConsumer<String, String> c = kit.consumer("group.id", topic + "-g")) {
                c.subscribe(List.of(topic));
                while (!stop.get()) {
                    consumed.addAndGet(c.poll(Kit.POLL).count());
                    try {
                        c.commitSync();
                    } catch (RuntimeException e) {
                        // A commit may fail while the leader moves; the next poll retries.
                    }
                }
            } catch (Throwable t) {
                crash.compareAndSet(null, t);
            }
        }, "leader-kill-consumer");
        producer.start();
        consumer.start();
        Thread.sleep(FLOW.toMillis());
        int ackedBefore = acked.size();
        long killStart = System.nanoTime();
        compat.killLeader();
        long killMs = (System.nanoTime() - killStart) / 1_000_000;
        int ackedAtReturn = acked.size();
        Thread.sleep(FLOW.toMillis());
        stop.set(true);
        producer.join(60_000);
        consumer.join(30_000);
        check(crash.get() == null, "client thread died: " + (crash.get() == null ? "" : Compat.describe(crash.get())));
        check(acked.size() > ackedAtReturn, "no record acknowledged after the kill (" + acked.size() + " in all)");
        Set<String> read = new HashSet<>(Kit.values(kit.readAll(topic, 3, "read_uncommitted", Duration.ofSeconds(30))));
        Set<String> lost = new HashSet<>(acked);
        lost.removeAll(read);
        check(lost.isEmpty(), lost.size() + " acknowledged records lost, e.g. " + (lost.isEmpty() ? "" : lost.iterator().next()));
        return acked.size() + " acked (" + ackedBefore + " before the kill), " + failed.get() + " failed, none lost; "
                + "the group consumed " + consumed.get() + " while running; kill+restart took " + killMs + " ms";
    }

    /** One transaction of txn_leader_kill: its number and when it began and committed (nanoTime). */
    private static final class Txn {
        final int n;
        final long begin;
        final long commitStart;
        final long end;

        Txn(int n, long begin, long commitStart, long end) {
            this.n = n;
            this.begin = begin;
            this.commitStart = commitStart;
            this.end = end;
        }
    }

    /**
     * A transactional producer commits transactions in a loop (each: begin, one record to each of
     * three partitions, commit) for FLOW; then the Raft leader is killed -9 while it runs, and the
     * loop goes on through the election and the node's restart, and for FLOW after the cluster is
     * whole again. The kill is sure to land inside an open transaction with an acknowledged write:
     * the loop's next transaction, once its record to partition 0 is acknowledged, waits until the
     * leader has been killed -9 (Compat.killLeaderAt) before it sends the other two and commits (a
     * kill at a random moment mostly falls between transactions, or before the open one's first
     * write is in the log, and proves little). A leader kill must not abort a transaction: any
     * error from begin, send or commit fails the scenario (the timeouts are long, so a slow
     * election is a wait, not an error). Every committed transaction's records must read back
     * exactly once under read_committed, in order per partition, and transactions must commit
     * after the kill.
     */
    String txnLeaderKill() throws Exception {
        String topic = compat.prefix + "-txn-leader-kill";
        int partitions = 3;
        kit.createTopic(topic, partitions);
        List<Txn> committed = Collections.synchronizedList(new ArrayList<>());
        AtomicBoolean stop = new AtomicBoolean();
        AtomicBoolean holdNext = new AtomicBoolean();
        AtomicInteger heldTxn = new AtomicInteger(-1);
        CountDownLatch holding = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        AtomicReference<Throwable> crash = new AtomicReference<>();
        AtomicReference<String> failedIn = new AtomicReference<>("");
        Thread loop = new Thread(() -> {
            try (KafkaProducer<String, String> p = kit.producer("transactional.id", topic + "-tx",
                    "transaction.timeout.ms", "60000", "max.block.ms", "45000", "delivery.timeout.ms", "45000")) {
                p.initTransactions();
                for (int n = 0; !stop.get(); n++) {
                    String step = "begin";
                    try {
                        long begin = System.nanoTime();
                        p.beginTransaction();
                        List<java.util.concurrent.Future<?>> acks = new ArrayList<>();
                        for (int part = 0; part < partitions; part++) {
                            step = "send to partition " + part;
                            String v = "t" + n + "-p" + part;
                            acks.add(p.send(new ProducerRecord<>(topic, part, v, v)));
                            if (part == 0 && holdNext.compareAndSet(true, false)) {
                                step = "the acknowledgement of its record to partition 0 before the kill";
                                acks.get(0).get();
                                heldTxn.set(n);
                                holding.countDown();
                                step = "waiting for the kill";
                                release.await();
                                step = "send to partition 1, after the kill -9";
                            }
                        }
                        step = "commit";
                        long commitStart = System.nanoTime();
                        p.commitTransaction();
                        step = "the acknowledgements after the commit";
                        for (java.util.concurrent.Future<?> f : acks) f.get();
                        committed.add(new Txn(n, begin, commitStart, System.nanoTime()));
                    } catch (Throwable t) {
                        // Never abortTransaction here: the scenario's point is that none is aborted.
                        failedIn.set("transaction " + n + " at " + step);
                        throw t;
                    }
                }
            } catch (Throwable t) {
                crash.compareAndSet(null, t);
            }
        }, "txn-leader-kill-loop");
        loop.start();
        long killStart;
        long killReturned;
        int committedBefore;
        boolean killed = false;
        try {
            Thread.sleep(FLOW.toMillis());
            holdNext.set(true);
            check(holding.await(30, TimeUnit.SECONDS) || crash.get() != null,
                    "no transaction reached its first acknowledged write within 30 s");
            check(crash.get() == null, "the transaction loop failed before the kill, "
                    + failedIn.get() + ": " + describeCrash(crash.get()));
            committedBefore = committed.size();
            check(committedBefore > 0, "no transaction committed in " + FLOW.toMillis() + " ms before the kill");
            killStart = compat.killLeaderAt(release::countDown);
            killReturned = System.nanoTime();
            killed = true;
        } finally {
            release.countDown();
            // A failure before or in the kill: the loop must not outlive the scenario.
            if (!killed) stop.set(true);
        }
        Thread.sleep(FLOW.toMillis());
        stop.set(true);
        loop.join(60_000);
        check(!loop.isAlive(), "the transaction loop did not stop within 60 s (a commit hangs)");
        List<Txn> txns;
        synchronized (committed) {
            txns = new ArrayList<>(committed);
        }
        long killMs = (killReturned - killStart) / 1_000_000;
        check(crash.get() == null, failedIn.get() + " failed (" + txns.size() + " committed, " + committedBefore
                + " before the kill, transaction " + heldTxn.get() + " open across it; the kill took "
                + killMs + " ms to a whole cluster): " + describeCrash(crash.get()));
        int duringKill = 0;
        int afterKill = 0;
        long longestCommit = 0;
        Txn held = null;
        for (Txn t : txns) {
            if (t.n == heldTxn.get()) held = t;
            else if (t.begin > killReturned) afterKill++;
            else if (t.end > killStart) duringKill++;
            longestCommit = Math.max(longestCommit, t.end - t.commitStart);
        }
        check(held != null, "the transaction held open across the kill (" + heldTxn.get() + ") did not commit");
        check(afterKill > 0, "no transaction began and committed after the kill returned (" + txns.size()
                + " committed, " + committedBefore + " before the kill)");
        // Exactly once under read_committed: every committed transaction's three records, no others,
        // each partition in transaction order.
        List<ConsumerRecord<String, String>> read = kit.readAll(topic, partitions, "read_committed", Duration.ofSeconds(30));
        for (int part = 0; part < partitions; part++) {
            List<String> want = new ArrayList<>();
            for (Txn t : txns) want.add("t" + t.n + "-p" + part);
            List<String> got = new ArrayList<>();
            for (ConsumerRecord<String, String> r : read) if (r.partition() == part) got.add(r.value());
            if (!got.equals(want)) {
                Set<String> missing = new HashSet<>(want);
                missing.removeAll(got);
                Set<String> extra = new HashSet<>(got);
                want.forEach(extra::remove);
                throw new AssertionError("partition " + part + ": read_committed read " + got.size() + " records, "
                        + want.size() + " committed; missing " + sample(missing) + ", not committed "
                        + sample(extra) + (got.size() == new HashSet<>(got).size() ? "" : ", duplicates"));
            }
        }
        return txns.size() + " transactions committed, none aborted: " + committedBefore + " before the kill, "
                + "transaction " + held.n + " open across it (committed " + (held.end - killStart) / 1_000_000
                + " ms after the kill -9), " + duringKill + " more before the cluster was whole again ("
                + killMs + " ms after the kill), " + afterKill + " after; read_committed read each exactly once ("
                + read.size() + " records); longest commit " + longestCommit / 1_000_000 + " ms, longest "
                + "transaction but the held one " + longestOther(txns, held) / 1_000_000 + " ms";
    }

    private static long longestOther(List<Txn> txns, Txn held) {
        long longest = 0;
        for (Txn t : txns) if (t != held) longest = Math.max(longest, t.end - t.begin);
        return longest;
    }

    private static String describeCrash(Throwable t) {
        return t == null ? "" : Compat.describe(t);
    }

    private static String sample(Set<String> values) {
        if (values.isEmpty()) return "none";
        List<String> sorted = new ArrayList<>(values);
        Collections.sort(sorted);
        return values.size() + " (e.g. " + String.join(", ", sorted.subList(0, Math.min(3, sorted.size()))) + ")";
    }

    String unknownTopic() throws Exception {
        String topic = compat.prefix + "-missing";
        try (KafkaProducer<String, String> p = kit.producer("max.block.ms", "5000")) {
            try {
                p.send(new ProducerRecord<>(topic, "k", "v")).get();
            } catch (Exception e) {
                // Against Kafka: the metadata wait times out ("not present in metadata"), or the
                // error itself surfaces.
                boolean unknown = Kit.causedBy(e, UnknownTopicOrPartitionException.class);
                boolean metadataTimeout = Kit.causedBy(e, TimeoutException.class)
                        && String.valueOf(Compat.describe(e)).contains("not present in metadata");
                check(unknown || metadataTimeout, "unexpected error: " + Compat.describe(e));
                try (KafkaConsumer<String, String> c = kit.consumer()) {
                    check(!c.listTopics().containsKey(topic), "the topic was created by the produce");
                }
                return Compat.describe(e) + "; the topic was not created";
            }
        }
        throw new AssertionError("produce to a missing topic succeeded");
    }

    String offsetOutOfRange() throws Exception {
        String topic = compat.prefix + "-range";
        kit.createTopic(topic, 1);
        TopicPartition tp = new TopicPartition(topic, 0);
        try (KafkaProducer<String, String> p = kit.producer()) {
            Kit.sendAll(p, topic, Kit.numbered("o", 5));
        }
        try (KafkaConsumer<String, String> c = kit.consumer("auto.offset.reset", "none")) {
            c.assign(List.of(tp));
            c.seek(tp, 100);
            long deadline = System.nanoTime() + 20_000_000_000L;
            while (System.nanoTime() < deadline) {
                try {
                    for (ConsumerRecord<String, String> r : c.poll(Kit.POLL)) {
                        throw new AssertionError("read " + r + " from past the end");
                    }
                } catch (OffsetOutOfRangeException e) {
                    check(e.offsetOutOfRangePartitions().getOrDefault(tp, -1L) == 100,
                            "out-of-range partitions " + e.offsetOutOfRangePartitions());
                    return "poll threw OffsetOutOfRangeException for offset 100 (reset policy none)";
                }
            }
        }
        throw new AssertionError("no OffsetOutOfRangeException within 20 s of seeking to 100 (end 5)");
    }
}
