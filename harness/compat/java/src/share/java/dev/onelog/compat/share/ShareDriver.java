// The share-group (KIP-932, Kafka's queues) driver of the compatibility matrix, client id
// java-4.4.0-share: kafka-clients 4.4.0's KafkaShareConsumer, with a plain KafkaProducer and
// Admin for set-up (group configs through incrementalAlterConfigs on GROUP resources). One JVM
// runs the seven scenarios; share_member_kill starts a child JVM (ShareMember) to kill -9.
// share_acceptance (opt-in, ShareAcceptance) runs three ShareWorker child JVMs.
// Usage: ShareDriver <client id>, environment as in dev.onelog.compat.Compat. Only the 4.4.0
// build compiles this directory (src/share/java, the pom's `share` profile): KafkaShareConsumer
// is not in kafka-clients 3.9 or 2.8.
package dev.onelog.compat.share;

import dev.onelog.compat.Compat;
import dev.onelog.compat.Kit;

public final class ShareDriver {
    private ShareDriver() {}

    public static void main(String[] args) {
        String client = args.length > 0 ? args[0] : "java-" + Compat.kafkaVersion() + "-share";
        Compat compat = new Compat(client, Compat.kafkaVersion());
        ShareKit share = new ShareKit(compat, new Kit(compat.bootstrap));
        Queues queues = new Queues(compat, share);
        ShareFaults faults = new ShareFaults(compat, share);
        // The scenarios that wait for a 15 s lock or a broker's kill and restart get more room.
        int lockBudget = Math.max(compat.timeoutS, 90);
        compat.run("share_consume_implicit", queues::consumeImplicit);
        compat.run("share_explicit_ack", queues::explicitAck);
        compat.run("share_reject_archive", queues::rejectArchive);
        compat.run("share_lock_expiry", lockBudget, queues::lockExpiry);
        compat.run("share_two_consumers", queues::twoConsumers);
        compat.run("share_member_kill", lockBudget, faults::memberKill);
        compat.run("share_leader_kill", Math.max(compat.timeoutS, 180), faults::leaderKill);
        // Opt-in (scripts/compat.sh --share-accept): issue 29's 100,000-record acceptance run.
        ShareAcceptance acceptance = new ShareAcceptance(compat, share);
        if (compat.named("share_acceptance")) compat.run("share_acceptance", 1800, acceptance::run);
        // Scenario threads that outlived their budget must not keep the JVM alive.
        System.exit(0);
    }
}
