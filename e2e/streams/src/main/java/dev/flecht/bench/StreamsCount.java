package dev.flecht.bench;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * The count stage of flecht's benchmark in Kafka Streams: a running counter
 * per key in a RocksDB store, each output the input JSON object plus "seq",
 * exactly_once_v2, two stream threads, the default commit interval (100 ms
 * under exactly-once), static membership.
 *
 * <p>Usage: StreamsCount BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR
 * [INSTANCE STANDBYS SESSION_MS]: the optional three make it one instance
 * of a group (its group.instance.id APPLICATION_ID-INSTANCE) with
 * num.standby.replicas STANDBYS and that session timeout.
 *
 * <p>Each time all its tasks run (after any restore) it prints "RESTORED
 * records=N restore_ms=T", the changelog records restored so far and the
 * time from the first restore's start to the last one's end, then "STATE
 * RUNNING", for the benchmark to read; and "RESTORE_END records=N" each
 * time an active task's restore ends (N: restored so far in all).
 */
public final class StreamsCount {
  static final String STORE = "counts";

  public static void main(String[] args) throws Exception {
    if (args.length != 5 && args.length != 8) {
      System.err.println("usage: StreamsCount BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR [INSTANCE STANDBYS SESSION_MS]");
      System.exit(2);
    }
    String instance = args.length == 8 ? args[5] : "0";
    Properties p = new Properties();
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
    p.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
    p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 2);
    p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
    // Static membership, as Kafka Streams recommends for restarts: a
    // restarted instance takes its tasks back at once instead of waiting
    // for its old member's session (45 s) to expire, since Streams does
    // not leave the group on close.
    p.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG), args[1] + "-" + instance);
    if (args.length == 8) {
      p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, Integer.parseInt(args[6]));
      p.put(StreamsConfig.mainConsumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), Integer.parseInt(args[7]));
    }

    StreamsBuilder b = new StreamsBuilder();
    b.addStateStore(Stores.keyValueStoreBuilder(
        Stores.persistentKeyValueStore(STORE), Serdes.String(), Serdes.Long()));
    b.stream(args[2], Consumed.with(Serdes.String(), Serdes.String()))
        .processValues(Count::new, STORE)
        .to(args[3], Produced.with(Serdes.String(), Serdes.String()));

    KafkaStreams streams = new KafkaStreams(b.build(), p);
    AtomicLong restored = new AtomicLong();
    AtomicLong firstStart = new AtomicLong();
    AtomicLong lastEnd = new AtomicLong();
    streams.setGlobalStateRestoreListener(new StateRestoreListener() {
      @Override public void onRestoreStart(TopicPartition tp, String store, long from, long to) {
        firstStart.compareAndSet(0, System.nanoTime());
      }
      @Override public void onBatchRestored(TopicPartition tp, String store, long end, long n) {}
      @Override public void onRestoreEnd(TopicPartition tp, String store, long n) {
        System.out.printf("RESTORE_END records=%d%n", restored.addAndGet(n));
        lastEnd.set(System.nanoTime());
      }
    });
    CountDownLatch done = new CountDownLatch(1);
    streams.setStateListener((now, before) -> {
      if (now == KafkaStreams.State.RUNNING) {
        long ms = firstStart.get() == 0 ? 0 : (lastEnd.get() - firstStart.get()) / 1_000_000;
        System.out.printf("RESTORED records=%d restore_ms=%d%n", restored.get(), ms);
        System.out.println("STATE RUNNING");
      }
      if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
        done.countDown();
      }
    });
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      streams.close();
      done.countDown();
    }));
    streams.start();
    done.await();
  }

  /** The running counter: seq = 1, 2, 3… per key, stamped on a copy of the value. */
  static final class Count implements FixedKeyProcessor<String, String, String> {
    private static final ObjectMapper JSON = new ObjectMapper();
    private FixedKeyProcessorContext<String, String> ctx;
    private KeyValueStore<String, Long> counts;

    @Override public void init(FixedKeyProcessorContext<String, String> ctx) {
      this.ctx = ctx;
      this.counts = ctx.getStateStore(STORE);
    }

    @Override public void process(FixedKeyRecord<String, String> r) {
      if (r.value() == null) {
        return;
      }
      Long prev = counts.get(r.key());
      long seq = prev == null ? 1 : prev + 1;
      counts.put(r.key(), seq);
      try {
        ObjectNode v = (ObjectNode) JSON.readTree(r.value());
        v.put("seq", seq);
        ctx.forward(r.withValue(JSON.writeValueAsString(v)));
      } catch (Exception e) {
        throw new RuntimeException("record of key " + r.key() + " is not a JSON object", e);
      }
    }
  }
}
