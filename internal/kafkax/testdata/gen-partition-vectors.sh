#!/usr/bin/env bash
# Regenerates the partitioner vectors pinned in this folder by producing keys
# through a real Kafka broker with real clients and reading back where each
# key landed:
#   partitions-java-console-producer.json  Kafka's own console producer (Java client)
#   partitions-kcat-murmur2.json           kcat with -X partitioner=murmur2_random
# Needs a broker (default: the e2e broker, `e2e/kafka/broker.sh start`), kcat
# and python3. Usage: gen-partition-vectors.sh [BROKERS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
brokers=${1:-127.0.0.1:${FLECHT_E2E_KAFKA_PORT:-29092}}
counts="1 3 6 7 12 100"
run=$(date +%s)

keys() {
  # One key per line; the empty key is the first line. No tabs or newlines.
  printf '%s\n' "" a abc 21 foobar "with space" tenant:device tenant:device:2 \
    "sensor/42/temperature" ümlaut "日本語のキー" "🦄🌈" "Ελληνικά" "ключ" \
    "a-little-bit-longer-string" "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"
  for i in $(seq 0 39); do printf 'key-%d\n' "$i"; done
}

produce_java() { # topic
  keys | sed 's/$/\tv/' | "$root/e2e/kafka/broker.sh" class org.apache.kafka.tools.ConsoleProducer \
    --bootstrap-server "$brokers" --topic "$1" \
    --property parse.key=true --property key.separator=$'\t' >/dev/null
}

produce_kcat() { # topic
  keys | sed 's/$/\tv/' | kcat -b "$brokers" -P -t "$1" -K $'\t' -X partitioner=murmur2_random
}

collect() { # tag client producer-fn out-file
  local tag=$1 client=$2 fn=$3 out=$4 tmp
  tmp=$(mktemp)
  for n in $counts; do
    topic="flecht-vectors-$tag-$n-$run"
    "$root/e2e/kafka/broker.sh" class org.apache.kafka.tools.TopicCommand --bootstrap-server "$brokers" \
      --create --topic "$topic" --partitions "$n" --replication-factor 1 >/dev/null
    "$fn" "$topic"
    kcat -b "$brokers" -C -t "$topic" -e -q -f "$n\t%p\t%k\n" >> "$tmp"
    "$root/e2e/kafka/broker.sh" class org.apache.kafka.tools.TopicCommand --bootstrap-server "$brokers" \
      --delete --topic "$topic" >/dev/null
  done
  python3 - "$client" "$tmp" "$out" <<'PY'
import json, sys
client, src, out = sys.argv[1:]
vectors = []
with open(src, encoding="utf-8") as f:
    for line in f:
        n, p, key = line.rstrip("\n").split("\t", 2)
        vectors.append({"key": key, "partitions": int(n), "partition": int(p)})
vectors.sort(key=lambda v: (v["partitions"], v["key"]))
with open(out, "w", encoding="utf-8") as f:
    json.dump({"client": client, "vectors": vectors}, f, ensure_ascii=False, indent=1)
    f.write("\n")
PY
  rm -f "$tmp"
}

collect java "kafka-console-producer (Java client 4.1)" produce_java "$here/partitions-java-console-producer.json"
collect kcat "kcat -X partitioner=murmur2_random" produce_kcat "$here/partitions-kcat-murmur2.json"
