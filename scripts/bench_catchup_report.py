"""The consumer catch-up table of scripts/bench-report.py (bench-compare.sh's catchup section,
scripts/bench-catchup.sh): what one consumer reading a whole topic from a cold page cache gets
from each system, and what it costs the brokers."""
import os


def catchup_table(md, raw, systems, settings, names, table, load):
    """Appends the section to md; names maps a system to its column title, table renders rows,
    load reads a summary (None if missing or unreadable): bench-report.py's own helpers."""
    runs = {}
    for s in systems:
        p = os.path.join(raw, s, "catchup")
        if os.path.isdir(p):
            runs[s] = (load(os.path.join(p, "producers.json")), load(os.path.join(p, "consumer.json")))
    if not runs:
        return
    shown = [s for s in systems if s in runs]
    records = int(settings.get("CATCHUP_RECORDS", 0) or 0)
    md.append("## Consumer catch-up\n")
    md.append(f"{settings.get('CATCHUP_PRODUCERS', '?')} `ProducerPerformance` processes write "
              f"{records:,} records of 1 KiB ({records * 1024 / 1e9:.2f} GB) together into one topic of "
              f"{settings.get('CATCHUP_PARTITIONS', '?')} partitions, replication factor 3, acks=all, idempotent, "
              f"with `{settings.get('CATCHUP_PRODUCER_PROPS', '')}`: each producer spreads its batches over "
              "every partition, so the partitions' batches lie interleaved in what the system writes. Then the "
              "page cache is dropped (`echo 3 > /proc/sys/vm/drop_caches`) and one `ConsumerPerformance` "
              "reads the whole topic. MB/s over the consumer's whole run (its group join included) and over "
              "fetching alone; bytes read from the device are the three brokers' `read_bytes` of "
              "/proc/PID/io (reads that missed the page cache); CPU is the three brokers' utime + stime over "
              "the consumer's run, per MB consumed.\n")

    def cell(s, fn):
        producers, consumer = runs[s]
        try:
            return fn(producers, consumer)
        except (TypeError, KeyError):
            return "failed"

    rows = [
        ["write: MB/s (sum of the producers)"] + [cell(s, lambda p, c: f"{p['mb_per_s']:.1f}") for s in shown],
        ["catch-up: MB/s (whole run)"] + [cell(s, lambda p, c: f"{c['mb_per_s']:.1f}") for s in shown],
        ["catch-up: MB/s fetching"] + [cell(s, lambda p, c: f"{c['fetch_mb_per_s']:.1f}") for s in shown],
        ["page cache before the read"] + [cell(s, lambda p, c: "cold" if c["cold_page_cache"] else "warm")
                                          for s in shown],
        ["MB read from the device, three nodes"] + [cell(s, lambda p, c: f"{c['device_read_mb']:,.0f}")
                                                    for s in shown],
        ["broker CPU s per MB consumed"] + [cell(s, lambda p, c: f"{c['cpu_s_per_mb']:.4f}") for s in shown],
    ]
    md.append(table(["metric"] + [names[s] for s in shown], rows))
    md.append("")
    md.append("Raw outputs and summaries: `raw/<system>/catchup/` (`producers-<i>.txt`, `producers.json`, "
              "`consumer.txt`, `consumer.json`).\n")
