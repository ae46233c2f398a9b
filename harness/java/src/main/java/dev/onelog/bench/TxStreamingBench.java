// Transactional streaming: BaseStreamingBench with each record processed in a transaction
// (beginTransaction, send to topic2, sendOffsetsToTransaction for the group, commitTransaction,
// wait for the send). Only that write path is measured, not the fetch. Transactional id TX_ID
// (default tx-streaming-bench), group GROUP (default streaming-bench); with PRODUCERS, worker i
// uses TX_ID-<i> and GROUP-<i>. Settings: BenchConfig; the loop: Streaming.
package dev.onelog.bench;

public final class TxStreamingBench {
    public static void main(String[] argv) throws Exception {
        BenchConfig cfg = new BenchConfig("tx-streaming-bench", "streaming-bench");
        long first = Streaming.fillSource(cfg, (long) cfg.producers * cfg.iterations());
        Runner.run("TxStreamingBench", cfg,
            index -> new Streaming(cfg, cfg.group(index), cfg.txId(index), first + (long) index * cfg.iterations()));
    }
}
