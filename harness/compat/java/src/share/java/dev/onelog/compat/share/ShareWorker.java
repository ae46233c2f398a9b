// One consumer of share_acceptance (ShareAcceptance starts three, and kill -9s one): a child JVM
// with a KafkaShareConsumer in explicit mode that accepts every record it gets, commitSync after
// each poll, and reports each delivery and each acknowledgement's outcome on stdout, flushed
// after every poll, so that the parent keeps one ledger of all three. It keeps going through
// errors (a leader change fails a poll or a commit; the records come back) until its stdin
// closes, then closes the consumer and exits 0.
// Usage: ShareWorker <client id> <topic> <group> <pause ms> [hold]: it pauses after each poll
// with records, after its commit, or with `hold` before its acknowledgements, so that it holds
// acquired records most of the time (the one ShareAcceptance kills).
// stdout, one line each:
//   d VALUE DELIVERY_COUNT      a delivery
//   a VALUE                     its accept, confirmed by commitSync
//   f VALUE ERROR               its accept, reported failed
//   e ERROR                     a poll or commitSync that threw (the worker goes on)
// Logs go to stderr.
package dev.onelog.compat.share;

import dev.onelog.compat.Compat;
import dev.onelog.compat.Kit;
import java.io.PrintStream;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;

public final class ShareWorker {
    private ShareWorker() {}

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), false, "UTF-8");
        if (args.length < 4) {
            System.err.println("usage: ShareWorker <client id> <topic> <group> <pause ms>");
            System.exit(2);
        }
        long pauseMs = Long.parseLong(args[3]);
        boolean hold = args.length > 4 && args[4].equals("hold");
        AtomicBoolean stop = new AtomicBoolean();
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // Only its end matters.
                }
            } catch (java.io.IOException e) {
                // the parent is gone: stop too
            }
            stop.set(true);
        }, "share-worker-stdin");
        stdin.setDaemon(true);
        stdin.start();
        Compat compat = new Compat(args[0], Compat.kafkaVersion());
        ShareKit share = new ShareKit(compat, new Kit(compat.bootstrap));
        try (KafkaShareConsumer<String, String> c = share.consumer(args[2], "explicit", args[1])) {
            while (!stop.get()) {
                try {
                    if (pollAccept(c, out, hold ? pauseMs : 0) && !hold && pauseMs > 0) Thread.sleep(pauseMs);
                } catch (KafkaException e) {
                    out.println("e " + Compat.describe(e).replace('\n', ' '));
                    out.flush();
                }
            }
        }
        System.exit(0);
    }

    /**
     * One poll, every record accepted (after `holdMs`) and committed, every line printed;
     * whether it got any.
     */
    private static boolean pollAccept(KafkaShareConsumer<String, String> c, PrintStream out, long holdMs)
            throws InterruptedException {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        for (ConsumerRecord<String, String> r : c.poll(Kit.POLL)) {
            got.add(r);
            out.println("d " + r.value() + " " + ShareKit.deliveryCount(r));
        }
        out.flush();
        if (got.isEmpty()) return false;
        if (holdMs > 0) Thread.sleep(holdMs);
        for (ConsumerRecord<String, String> r : got) c.acknowledge(r, AcknowledgeType.ACCEPT);
        Map<TopicIdPartition, Optional<KafkaException>> results = c.commitSync(Duration.ofSeconds(30));
        Map<Integer, Optional<KafkaException>> byPartition = new HashMap<>();
        results.forEach((tip, e) -> byPartition.put(tip.partition(), e));
        for (ConsumerRecord<String, String> r : got) {
            Optional<KafkaException> result = byPartition.get(r.partition());
            if (result == null) out.println("f " + r.value() + " no result for its partition");
            else if (result.isPresent()) out.println("f " + r.value() + " " + Compat.describe(result.get()).replace('\n', ' '));
            else out.println("a " + r.value());
        }
        out.flush();
        return true;
    }
}
