# Consumer catch-up (issue 31): sourced by scripts/bench-compare.sh, not run alone.
#
# CATCHUP_PRODUCERS ProducerPerformance processes write CATCHUP_RECORDS records of 1 KiB
# together into topic catchup (CATCHUP_PARTITIONS partitions, replication factor 3). Each one
# spreads its batches over every partition, so the partitions' batches lie interleaved in
# whatever the system writes them to: for onelog's journaled segments, one Raft log. Then the
# page cache is dropped (`echo 3 > /proc/sys/vm/drop_caches`, as root) and one
# ConsumerPerformance reads the whole topic from disk. What the consumer gets is the figure;
# beside it the bytes the nodes read from the device (read_bytes of /proc/PID/io, which counts
# reads that missed the page cache) and their CPU, per MB consumed.
#
# The producers use larger batches than the raw section (CATCHUP_PRODUCER_PROPS): this section
# is about reading, and Kafka with an fsync per append would take most of an hour to write 4 GB
# of 16 KiB batches here.

# catchup_section SYSTEM: the whole section against the running system.
catchup_section() {
    local s="$1" sub=catchup
    local dir="$out/raw/$s/$sub"
    mkdir -p "$dir"
    if ! create_topics "$s" TOPICS=catchup PARTITIONS="$CATCHUP_PARTITIONS" TOPIC_CONFIG=; then
        failures+=("$s catchup: CreateTopics failed (raw/$s/logs/create-topics.log)")
        step=$((step + 2))
        return
    fi
    local -a props
    read -r -a props <<<"$CATCHUP_PRODUCER_PROPS"
    raw_produce "$s" "$CATCHUP_PRODUCERS" catchup "$CATCHUP_RECORDS" producers "$sub" "${props[@]}"
    if [ ! -s "$dir/producers.json" ]; then
        step=$((step + 1))
        failures+=("$s catchup consumer: not run, the producers failed")
        return
    fi
    local cold=true
    sync
    if ! { echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null; then
        cold=false
        echo "bench-compare.sh: cannot drop the page cache (not root?): the catch-up read is warm" >&2
    fi
    local read0 cpu0 t0=$SECONDS
    read0="$(system_io_bytes read_bytes)" cpu0="$(system_cpu_ticks)"
    raw_consume "$s" catchup "$CATCHUP_RECORDS" "$sub"
    [ -s "$dir/consumer.json" ] || return 0
    python3 "$repo/scripts/bench-compare-results.py" catchup "$dir" "$cold" "$CATCHUP_PARTITIONS" \
        "$read0" "$(system_io_bytes read_bytes)" "$cpu0" "$(system_cpu_ticks)" "$(getconf CLK_TCK)" \
        "$((SECONDS - t0))"
}
