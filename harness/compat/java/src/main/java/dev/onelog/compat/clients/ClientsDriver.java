// The kafka-clients driver of the compatibility matrix: one JVM runs the 20 contract scenarios
// with the kafka-clients version it was built against (run.sh builds 4.4.0, 3.9.1 and 2.8.2 from
// this one source). Usage: ClientsDriver <client id>, environment as in dev.onelog.compat.Compat.
package dev.onelog.compat.clients;

import dev.onelog.compat.Compat;
import dev.onelog.compat.Kit;

public final class ClientsDriver {
    private ClientsDriver() {}

    public static void main(String[] args) {
        String client = args.length > 0 ? args[0] : "java-" + Compat.kafkaVersion();
        Compat compat = new Compat(client, Compat.kafkaVersion());
        Kit kit = new Kit(compat.bootstrap);
        if ("security".equals(System.getenv("COMPAT_SUITE"))) {
            new SecurityScenarios(compat, kit).runAll();
            System.exit(0);
        }
        Basics basics = new Basics(compat, kit);
        Groups groups = new Groups(compat, kit);
        Txns txns = new Txns(compat, kit);
        Faults faults = new Faults(compat, kit);
        compat.run("create_topic", basics::createTopic);
        compat.run("produce_consume", basics::produceConsume);
        compat.run("compression", basics::compression);
        compat.run("consume_earliest", basics::consumeEarliest);
        compat.run("consume_latest", basics::consumeLatest);
        compat.run("seek_timestamp", basics::seekTimestamp);
        compat.run("group_rebalance", groups::groupRebalance);
        compat.run("member_leave_rejoin", groups::memberLeaveRejoin);
        compat.run("idempotent_produce", txns::idempotentProduce);
        compat.run("txn_commit_abort", txns::commitAbort);
        compat.run("consume_process_produce", txns::consumeProcessProduce);
        compat.run("txn_fencing", txns::fencing);
        compat.run("alter_config", basics::alterConfig);
        compat.run("delete_records", basics::deleteRecords);
        compat.run("leader_kill", faults::leaderKill);
        compat.run("txn_leader_kill", faults::txnLeaderKill);
        compat.run("err_unknown_topic", faults::unknownTopic);
        compat.run("err_offset_out_of_range", faults::offsetOutOfRange);
        compat.run("err_stale_generation", groups::staleGeneration);
        compat.run("err_fenced_producer", txns::fencedProducer);
        // Scenario threads that outlived their budget must not keep the JVM alive.
        System.exit(0);
    }
}
