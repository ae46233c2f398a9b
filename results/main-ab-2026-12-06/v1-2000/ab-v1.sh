#!/bin/bash
# kafka-clients 2.8.2 TxWritesBench and BaseWritesBench: c86 against after, interleaved
cd /work/main
cp2=$(cat harness/java/target/classpath-kafka2); cp4=$(cat harness/java/target/classpath)
boot=127.0.0.1:31092,127.0.0.1:31093,127.0.0.1:31094
for round in 1 2 3; do
for v in c86 after; do
  dir=/tmp/abv1-work; rm -rf $dir
  ONELOG_BIN=/tmp/onelog-$v ONELOG_CLUSTER_DIR=$dir ONELOG_BASE_PORT=31092 scripts/cluster.sh up 3 > /dev/null 2>&1
  KAFKA_CONNECTION=$boot REPLICATION_FACTOR=3 timeout 120 java -cp "$cp4" dev.onelog.bench.CreateTopics > /dev/null 2>&1
  KAFKA_CONNECTION=$boot WARMUP=0 TXES=300 PRODUCERS=10 TX_ID=warm GROUP=warm timeout 300 java -cp "$cp4" dev.onelog.bench.BaseWritesBench > /dev/null 2>&1
  for b in BaseWritesBench TxWritesBench; do
    KAFKA_CONNECTION=$boot WARMUP=200 TXES=2000 SUMMARY_FILE=/tmp/abv1-$v-$round-$b.json TX_ID=$b-$round GROUP=$b-$round \
      timeout 300 java -cp "$cp2" dev.onelog.bench.$b > /tmp/abv1-$v-$round-$b.log 2>&1
    echo "$v $round $b $(python3 -c "import json;d=json.load(open('/tmp/abv1-$v-$round-$b.json'));print(d['p50_ms'],d['p99_ms'],d['tps'])")"
  done
  ONELOG_CLUSTER_DIR=$dir ONELOG_BASE_PORT=31092 scripts/cluster.sh down > /dev/null 2>&1; rm -rf $dir
done
done
