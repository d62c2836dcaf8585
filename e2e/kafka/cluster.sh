#!/usr/bin/env bash
# Starts, stops and breaks a three-node Apache Kafka 4.x cluster (KRaft) on
# 127.0.0.1 for the cluster tier of the e2e tests (`make e2e-cluster`).
#
# Shape: three nodes, each both broker and controller (combined roles), so
# the controller quorum (3 voters, majority 2) fails and recovers with the
# brokers. Replication 3 and min ISR 2 everywhere: default topics,
# __consumer_offsets, __transaction_state and the share coordinator's state.
# Heaps are 640 MiB each, so the tier takes about 2.5 GiB beside the tests.
# Jars, logging and the fetch step are broker.sh's (same directory).
#
#   cluster.sh start          format (one cluster id) and start all three; wait until all answer
#   cluster.sh stop           stop every node this run started (SIGCONT first, then SIGTERM, then SIGKILL)
#   cluster.sh brokers        print the bootstrap list host:port,host:port,host:port
#   cluster.sh node N OP      one node (N = 1, 2, 3; it is also the Kafka node.id):
#                               kill     SIGKILL, wait until it is gone
#                               stop     SIGTERM (controlled shutdown), SIGKILL after 60 s
#                               start    start it again on its data; wait until it answers
#                               restart  stop, then start
#                               pause    SIGSTOP (a zombie: the process lives, nothing answers)
#                               resume   SIGCONT
#                               pid      print its PID (nothing when it is down)
#
# Ports: FLECHT_E2E_KAFKA_PORT (default 29192) is the base; node N listens
# on base+2(N-1) (clients) and base+2(N-1)+1 (controller). Everything lives
# under e2e/.run/kafka-cluster-<base> (ignored by git). The default lies
# below Linux's ephemeral range (32768-60999): while a node is down, its
# peers and clients keep connecting to its port, and a port in that range
# can then be taken as the local end of one of those very connections (a
# TCP self-connect), so that the node cannot bind it when it starts again.
# A base in the range works too, with restarts that may need retries.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
base=${FLECHT_E2E_KAFKA_PORT:-29192}
run=${FLECHT_E2E_RUN:-$here/../.run}/kafka-cluster-$base
libs=$here/target/libs
nodes=(1 2 3)

port_of() { echo $((base + 2 * ($1 - 1))); }
cport_of() { echo $((base + 2 * ($1 - 1) + 1)); }
dir_of() { echo "$run/node-$1"; }

classpath() { printf '%s:' "$libs"/*.jar; }

java_cmd() {
  echo "java -Xms256m -Xmx640m -XX:+UseG1GC -XX:MaxGCPauseMillis=50 -Djava.awt.headless=true" \
    "-Dlog4j2.configurationFile=$here/log4j2.properties"
}

voters() {
  local out="" n
  for n in "${nodes[@]}"; do out+="${out:+,}$n@127.0.0.1:$(cport_of "$n")"; done
  echo "$out"
}

brokers() {
  local out="" n
  for n in "${nodes[@]}"; do out+="${out:+,}127.0.0.1:$(port_of "$n")"; done
  echo "$out"
}

write_config() {
  local n=$1 d
  d=$(dir_of "$n")
  mkdir -p "$d/data"
  cat > "$d/server.properties" <<PROPS
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$(voters)
listeners=PLAINTEXT://127.0.0.1:$(port_of "$n"),CONTROLLER://127.0.0.1:$(cport_of "$n")
advertised.listeners=PLAINTEXT://127.0.0.1:$(port_of "$n")
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
log.dirs=$d/data
num.partitions=1
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
offsets.topic.num.partitions=6
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=6
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
unclean.leader.election.enable=false
# A paused follower leaves the ISR after 10 s (Kafka's default is 30 s), so
# a SIGSTOP fault costs the tier less time; the controller fences a node
# whose heartbeats stop after 6 s (default 9 s).
replica.lag.time.max.ms=10000
broker.session.timeout.ms=6000
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

pid_of() {
  local f
  f="$(dir_of "$1")/pid"
  [ -f "$f" ] || return 1
  local pid
  pid=$(cat "$f")
  kill -0 "$pid" 2>/dev/null || return 1
  echo "$pid"
}

answering() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# launch starts node n on its data (formatted by start) in the background.
launch() {
  local n=$1 d
  d=$(dir_of "$n")
  # Each start appends to kafka.out; the marker counts the starts so the
  # readiness check only trusts this start's "started" line.
  local starts
  starts=$(grep -c 'Kafka Server started' "$d/kafka.out" 2>/dev/null || true)
  echo "${starts:-0}" > "$d/starts-before"
  nohup bash -c "exec $(java_cmd) -Dkafka.logs.dir='$d' -cp '$(classpath)' kafka.Kafka '$d/server.properties'" >> "$d/kafka.out" 2>&1 &
  echo $! > "$d/pid"
}

# wait_started waits until node n answers and has logged this start's
# "Kafka Server started" (a broker registers with the quorum first).
wait_started() {
  local n=$1 d before now
  d=$(dir_of "$n")
  before=$(cat "$d/starts-before")
  local binds=0 deadline=$((SECONDS + 180))
  while [ $SECONDS -lt $deadline ]; do
    if ! pid_of "$n" >/dev/null; then
      # A port in Linux's ephemeral range can be held for a while by an
      # outgoing connection (see Ports above). Start it again, patiently.
      if [ $binds -lt 10 ] && tail -200 "$d/kafka.out" | grep -q 'Address already in use'; then
        binds=$((binds + 1))
        echo "kafka node $n: a port was taken by another connection; starting it again ($binds)" >&2
        echo "== restart after a bind failure" >> "$d/kafka.out"
        sleep 3
        launch "$n"
        before=$(cat "$d/starts-before")
        continue
      fi
      echo "kafka node $n exited during start; last lines of $d/kafka.out:" >&2
      tail -30 "$d/kafka.out" >&2
      return 1
    fi
    now=$(grep -c 'Kafka Server started' "$d/kafka.out" 2>/dev/null || true)
    if answering "$(port_of "$n")" && [ "${now:-0}" -gt "$before" ]; then
      return 0
    fi
    sleep 0.5
  done
  echo "kafka node $n did not start within 180 s; see $d/kafka.out" >&2
  return 1
}

start() {
  "$here/broker.sh" fetch
  local n
  # Nodes already running here were started by someone else, whose stop
  # it is: adopting them would let this run stop them under them.
  for n in "${nodes[@]}"; do
    if pid_of "$n" >/dev/null; then
      echo "kafka cluster node $n already running (pid $(pid_of "$n")) under $run, started by another run;" \
        "use it with FLECHT_E2E_BROKERS=$(brokers), or pick another FLECHT_E2E_KAFKA_PORT" >&2
      return 1
    fi
    if answering "$(port_of "$n")" || answering "$(cport_of "$n")"; then
      echo "port $(port_of "$n") or $(cport_of "$n") is taken by another process; set FLECHT_E2E_KAFKA_PORT" >&2
      return 1
    fi
  done
  rm -rf "$run" && mkdir -p "$run"
  local cluster_id
  cluster_id=$("$here/broker.sh" class kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)
  for n in "${nodes[@]}"; do
    write_config "$n"
    "$here/broker.sh" class kafka.tools.StorageTool format -t "$cluster_id" \
      -c "$(dir_of "$n")/server.properties" > "$(dir_of "$n")/format.log" 2>&1
  done
  for n in "${nodes[@]}"; do launch "$n"; done
  for n in "${nodes[@]}"; do
    if ! wait_started "$n"; then
      stop
      return 1
    fi
  done
  echo "kafka cluster ready on $(brokers) (pids $(pid_of 1) $(pid_of 2) $(pid_of 3))" >&2
}

stop_node() {
  local n=$1 pid
  pid=$(pid_of "$n") || { rm -f "$(dir_of "$n")/pid"; return 0; }
  kill -CONT "$pid" 2>/dev/null || true
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -9 "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  rm -f "$(dir_of "$n")/pid"
}

kill_node() {
  local n=$1 pid
  pid=$(pid_of "$n") || { rm -f "$(dir_of "$n")/pid"; return 0; }
  kill -9 "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  rm -f "$(dir_of "$n")/pid"
}

# stop stops every node at once: a node stopped alone would wait for a
# controller quorum the others no longer make, so the last ones get SIGKILL
# after 30 s.
stop() {
  local n pid pids=()
  for n in "${nodes[@]}"; do
    if pid=$(pid_of "$n"); then
      kill -CONT "$pid" 2>/dev/null || true
      kill "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
  done
  for _ in $(seq 1 60); do
    local alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && break
    sleep 0.5
  done
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  for n in "${nodes[@]}"; do rm -f "$(dir_of "$n")/pid"; done
}

node() {
  local n=${1:-} op=${2:-}
  case "$n" in 1 | 2 | 3) ;; *) echo "node: N must be 1, 2 or 3, not '$n'" >&2; exit 2 ;; esac
  [ -f "$(dir_of "$n")/server.properties" ] || { echo "no cluster under $run: run '$0 start' first" >&2; exit 1; }
  case "$op" in
    kill) kill_node "$n" ;;
    stop) stop_node "$n" ;;
    start)
      if pid_of "$n" >/dev/null; then echo "node $n is running (pid $(pid_of "$n"))" >&2; exit 1; fi
      launch "$n" && wait_started "$n"
      ;;
    restart) stop_node "$n" && launch "$n" && wait_started "$n" ;;
    pause) kill -STOP "$(pid_of "$n")" ;;
    resume) kill -CONT "$(pid_of "$n")" ;;
    pid) pid_of "$n" || true ;;
    *) echo "node: OP is one of kill stop start restart pause resume pid" >&2; exit 2 ;;
  esac
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  brokers) brokers ;;
  node) shift; node "$@" ;;
  *) echo "usage: $0 start|stop|brokers|node N kill|stop|start|restart|pause|resume|pid" >&2; exit 2 ;;
esac
