// Naive streaming: fill topic1, read it in batches, and for each record send it on to topic2
// and commit the consumer group's offset with KafkaConsumer.commitSync, then wait for the send.
// Only send + commitSync + wait is measured, not the fetch. Group GROUP (default
// streaming-bench; GROUP-<i> per worker with PRODUCERS). Settings: BenchConfig; the loop:
// Streaming.
package dev.onelog.bench;

public final class BaseStreamingBench {
    public static void main(String[] argv) throws Exception {
        BenchConfig cfg = new BenchConfig("tx-streaming-bench", "streaming-bench");
        long first = Streaming.fillSource(cfg, (long) cfg.producers * cfg.iterations());
        Runner.run("BaseStreamingBench", cfg,
            index -> new Streaming(cfg, cfg.group(index), null, first + (long) index * cfg.iterations()));
    }
}
