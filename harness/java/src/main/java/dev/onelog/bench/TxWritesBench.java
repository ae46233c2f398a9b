// Atomic multi-partition write: BaseWritesBench with each iteration wrapped in a transaction
// (beginTransaction, send to topic1 and topic2, commitTransaction, then wait for both send
// futures). The recorded latency is the whole iteration. Transactional id TX_ID (default
// tx-writes-bench; TX_ID-<i> per worker with PRODUCERS). Settings: BenchConfig.
package dev.onelog.bench;

public final class TxWritesBench {
    public static void main(String[] argv) throws Exception {
        BenchConfig cfg = new BenchConfig("tx-writes-bench", "streaming-bench");
        Runner.run("TxWritesBench", cfg, index -> new BaseWritesBench.Writes(cfg, cfg.txId(index)));
    }
}
