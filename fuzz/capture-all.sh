#!/usr/bin/env bash
# Refreshes fuzz/seeds/ from every client of the compatibility matrix (fuzz/README.md): runs
# fuzz/capture.py with each driver of harness/compat/ (installed by scripts/compat.sh into
# ~/.cache/onelog-compat), every scenario except leader_kill (one cluster, no kills).
#
#   fuzz/capture-all.sh ONELOG_BIN [SEEDS_DIR]     SEEDS_DIR default fuzz/seeds
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:?usage: fuzz/capture-all.sh ONELOG_BIN [SEEDS_DIR]}"
seeds="${2:-fuzz/seeds}"
cache="${ONELOG_COMPAT_CACHE:-$HOME/.cache/onelog-compat}"
compat=harness/compat
py="$cache/venv/bin/python"
COMPAT_SCENARIOS="$(python3 -c "
import sys; sys.path.insert(0, '$compat/python')
from compat_common import SCENARIOS
print(','.join(s for s in SCENARIOS if s != 'leader_kill'))")"
export COMPAT_SCENARIOS COMPAT_TIMEOUT_S="${COMPAT_TIMEOUT_S:-30}"
python3 fuzz/capture.py --onelog "$bin" --seeds "$seeds" --logs "${TMPDIR:-/tmp}" \
    "$py $compat/python/confluent_driver.py" \
    "$py $compat/python/kafka_python_driver.py" \
    "$py $compat/python/aiokafka_driver.py" \
    "$cache/go-bin/franz" \
    "$cache/go-bin/sarama" \
    "NODE_PATH=$cache/node/node_modules node $compat/node/kafkajs_driver.js" \
    "$compat/java/run.sh java-4.4.0" \
    "$compat/java/run.sh java-2.8.2" \
    "$compat/java/run.sh kafka-cli-4.4.0"
