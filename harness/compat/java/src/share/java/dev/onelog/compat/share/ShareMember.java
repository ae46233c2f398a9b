// The share consumer that share_member_kill kill -9s: a child JVM (ShareFaults starts it, as the
// Streams driver starts its app) that joins the share group with explicit acknowledgement,
// acquires at most MAX records (share.acquire.mode=record_limit) in one poll that returns some,
// prints them and then holds them: it never acknowledges and never polls again, but stays alive
// (its heartbeats go on) until it is killed. Usage: ShareMember <client id> <topic> <group> <max>.
// stdout, one line each:
//   record PARTITION OFFSET DELIVERY_COUNT VALUE   every record it acquired
//   held N                                         then, once
//   error TEXT                                     a failure; the process then exits 1
// Logs go to stderr.
package dev.onelog.compat.share;

import dev.onelog.compat.Compat;
import dev.onelog.compat.Kit;
import java.io.PrintStream;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;

public final class ShareMember {
    private ShareMember() {}

    public static void main(String[] args) {
        PrintStream out = System.out;
        if (args.length < 4) {
            out.println("error usage: ShareMember <client id> <topic> <group> <max records>");
            System.exit(2);
        }
        Compat compat = new Compat(args[0], Compat.kafkaVersion());
        ShareKit share = new ShareKit(compat, new Kit(compat.bootstrap));
        try {
            KafkaShareConsumer<String, String> c = share.consumer(args[2], "explicit", args[1],
                    "max.poll.records", args[3], "share.acquire.mode", "record_limit");
            long deadline = System.nanoTime() + 60_000_000_000L;
            ConsumerRecords<String, String> got = ConsumerRecords.empty();
            while (got.isEmpty()) {
                if (System.nanoTime() > deadline) throw new IllegalStateException("no record in 60 s");
                got = c.poll(Kit.POLL);
            }
            for (ConsumerRecord<String, String> r : got) {
                out.println("record " + r.partition() + " " + r.offset() + " " + ShareKit.deliveryCount(r) + " " + r.value());
            }
            out.println("held " + got.count());
            out.flush();
            // Holds them: no acknowledgement, no poll, no close, until the kill -9.
            while (true) Thread.sleep(60_000);
        } catch (Throwable t) {
            t.printStackTrace();
            out.println("error " + Compat.describe(t).replace('\n', ' '));
            out.flush();
            System.exit(1);
        }
    }
}
