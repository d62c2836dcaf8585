#!/usr/bin/env bash
# Starts and stops one Apache Kafka 4.x node (broker + controller, KRaft) on
# 127.0.0.1 for the e2e tier. The jars come from Maven (pom.xml beside this
# file); data, logs and the PID live under e2e/.run/kafka-<port> (ignored by git).
#
#   broker.sh start   fetch jars if needed, format storage, start, wait until it answers;
#                     fails if a node (or anything) already serves the port
#   broker.sh stop    stop the node started by `start` (by PID)
#   broker.sh class C ARGS...   run a Kafka tool class (e.g. org.apache.kafka.tools.ProducerPerformance)
#
# Ports: FLECHT_E2E_KAFKA_PORT (default 29092) and that port + 1 for the controller.
#
# Secured mode (the secured tier, e2e/secured_*_test.go): with
# FLECHT_E2E_SECURED_DIR naming a directory the test wrote (ca.pem, the
# broker's broker.pem = PKCS#8 key + certificate, jwks.json, and scram: one
# `--add-scram` value a line), the node listens on
#   port     SASL_SSL, SCRAM-SHA-512
#   port+1   SSL, client certificate required, principal = the certificate's CN
#   port+2   SASL_SSL, OAUTHBEARER validated against file:jwks.json
#   port+3   PLAINTEXT for the node itself (User:ANONYMOUS, a super user)
#   port+4   the controller
# with StandardAuthorizer, allow.everyone.if.no.acl.found=false and the super
# users User:admin and User:ANONYMOUS.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
port=${FLECHT_E2E_KAFKA_PORT:-29092}
# One directory per port, so two brokers (a developer's and a CI run's)
# never share data or a PID file.
run=${FLECHT_E2E_RUN:-$here/../.run}/kafka-$port
cport=$((port + 1))
secured=${FLECHT_E2E_SECURED_DIR:-}
jvm_extra=()
if [ -n "$secured" ]; then
  cport=$((port + 4))
  # Kafka 4.x reads no JWKS or token URL that this list does not allow.
  jvm_extra=(-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls="file://$secured/jwks.json")
fi
libs=$here/target/libs

fetch() {
  if [ ! -f "$libs/.complete" ]; then
    echo "fetching Kafka jars with Maven into $libs" >&2
    (cd "$here" && mvn -q -B -Dstyle.color=never dependency:copy-dependencies)
    touch "$libs/.complete"
  fi
}

classpath() { printf '%s:' "$libs"/*.jar; }

java_run() {
  # Heap kept small: CI machines have 2 cores and share memory with the tests.
  java -Xms256m -Xmx1g -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$here/log4j2.properties" \
    -cp "$(classpath)" "$@"
}

write_config() {
  mkdir -p "$run/data"
  if [ -n "$secured" ]; then write_secured_listeners; else write_plain_listeners; fi
  # What both kinds of node share: one node, and timings short enough for tests.
  # The secured node has fewer coordinator partitions: it starts within a
  # test's budget.
  local coordinator_partitions=6
  [ -n "$secured" ] && coordinator_partitions=3
  cat >> "$run/server.properties" <<PROPS
log.dirs=$run/data
num.partitions=1
default.replication.factor=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=$coordinator_partitions
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=$coordinator_partitions
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
group.consumer.min.session.timeout.ms=6000
group.min.session.timeout.ms=1000
transaction.abort.timed.out.transaction.cleanup.interval.ms=5000
log.retention.check.interval.ms=5000
log.cleaner.backoff.ms=1000
auto.create.topics.enable=false
delete.topic.enable=true
PROPS
}

write_plain_listeners() {
  cat > "$run/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
PROPS
}

write_secured_listeners() {
  cat > "$run/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=SCRAM://127.0.0.1:$port,MTLS://127.0.0.1:$((port + 1)),OAUTH://127.0.0.1:$((port + 2)),INTERNAL://127.0.0.1:$((port + 3)),CONTROLLER://127.0.0.1:$cport
advertised.listeners=SCRAM://127.0.0.1:$port,MTLS://127.0.0.1:$((port + 1)),OAUTH://127.0.0.1:$((port + 2)),INTERNAL://127.0.0.1:$((port + 3))
controller.listener.names=CONTROLLER
inter.broker.listener.name=INTERNAL
listener.security.protocol.map=SCRAM:SASL_SSL,MTLS:SSL,OAUTH:SASL_SSL,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT
ssl.keystore.type=PEM
ssl.keystore.location=$secured/broker.pem
ssl.truststore.type=PEM
ssl.truststore.location=$secured/ca.pem
ssl.principal.mapping.rules=RULE:^CN=([^,]+)(,.*)?\$/\$1/,DEFAULT
listener.name.mtls.ssl.client.auth=required
listener.name.scram.sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.scram.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER
listener.name.oauth.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;
listener.name.oauth.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler
sasl.oauthbearer.jwks.endpoint.url=file://$secured/jwks.json
sasl.oauthbearer.expected.audience=kafka
sasl.oauthbearer.expected.issuer=https://127.0.0.1/flecht-e2e
connections.max.reauth.ms=10000
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=User:admin;User:ANONYMOUS
PROPS
}

answering() { (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; }

start() {
  fetch
  # A node already running here was started by someone else, whose stop
  # it is: adopting it would let this run stop it under them.
  if [ -f "$run/pid" ] && kill -0 "$(cat "$run/pid")" 2>/dev/null; then
    echo "kafka already running (pid $(cat "$run/pid")) on 127.0.0.1:$port, started by another run;" \
      "use it with FLECHT_E2E_BROKERS=127.0.0.1:$port, or pick another FLECHT_E2E_KAFKA_PORT" >&2
    return 1
  fi
  if answering; then
    echo "port $port is taken by another process; set FLECHT_E2E_KAFKA_PORT or FLECHT_E2E_BROKERS" >&2
    return 1
  fi
  rm -rf "$run" && mkdir -p "$run"
  write_config
  # The tool logs to stdout too; the id is its last line.
  cluster_id=$(java_run kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
  scram=()
  if [ -n "$secured" ] && [ -f "$secured/scram" ]; then
    while IFS= read -r line; do [ -n "$line" ] && scram+=(--add-scram "$line"); done < "$secured/scram"
  fi
  java_run kafka.tools.StorageTool format -t "$cluster_id" \
    -c "$run/server.properties" ${scram[@]+"${scram[@]}"} > "$run/format.log" 2>&1
  nohup bash -c "exec java -Xms256m -Xmx1g -XX:+UseG1GC -Djava.awt.headless=true ${jvm_extra[*]:-} \
    -Dlog4j2.configurationFile='$here/log4j2.properties' -Dkafka.logs.dir='$run' \
    -cp '$(classpath)' kafka.Kafka '$run/server.properties'" > "$run/kafka.out" 2>&1 &
  echo $! > "$run/pid"
  for _ in $(seq 1 120); do
    if ! kill -0 "$(cat "$run/pid")" 2>/dev/null; then
      echo "kafka exited during start; last lines of $run/kafka.out:" >&2
      tail -30 "$run/kafka.out" >&2
      return 1
    fi
    if answering && grep -q 'Kafka Server started\|\[KafkaRaftServer nodeId=1\] Kafka Server started' "$run/kafka.out"; then
      echo "kafka ready on 127.0.0.1:$port (pid $(cat "$run/pid"))" >&2
      return 0
    fi
    sleep 0.5
  done
  echo "kafka did not answer on 127.0.0.1:$port within 60s; see $run/kafka.out" >&2
  return 1
}

stop() {
  [ -f "$run/pid" ] || return 0
  pid=$(cat "$run/pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$run/pid"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  fetch) fetch ;;
  class) shift; fetch; java_run "$@" ;;
  *) echo "usage: $0 start|stop|fetch|class CLASS ARGS..." >&2; exit 2 ;;
esac
