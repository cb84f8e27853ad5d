package dev.baton.bench;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.CloseOptions.GroupMembershipOperation;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * The click counter on Kafka Streams, as bench/peers/CONTRACT.md describes it: count the clicks
 * per user in a RocksDB store with a changelog (Kafka Streams' defaults, record cache
 * included) and write the counts to the output topic.
 *
 * <p>Runs until SIGTERM; the shutdown hook closes Kafka Streams (which commits and leaves the
 * group) and exits 0, or 1 if the close timed out or a stream thread had failed.
 */
public final class ClickCounter {
  private static final ObjectMapper MAPPER = new ObjectMapper();
  private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(60);
  // Kafka Streams' default close stays in the consumer group, so a restart with the same
  // application id waits out the old member's session timeout (45 s) before it gets its
  // partitions; the other peers' clients leave the group on close, and so does this one.
  private static final CloseOptions CLOSE = CloseOptions
      .groupMembershipOperation(GroupMembershipOperation.LEAVE_GROUP)
      .withTimeout(CLOSE_TIMEOUT);

  private ClickCounter() {}

  static Topology topology(String input, String output) {
    StreamsBuilder builder = new StreamsBuilder();
    builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
        .mapValues(ClickCounter::parse)
        // the key is unchanged, so no repartition and no value serde is needed here
        .groupByKey(Grouped.keySerde(Serdes.String()))
        .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts")
            .withKeySerde(Serdes.String())
            .withValueSerde(Serdes.Long()))
        .toStream()
        .mapValues(String::valueOf)
        .to(output, Produced.with(Serdes.String(), Serdes.String()));
    return builder.build();
  }

  private static JsonNode parse(String value) {
    try {
      return MAPPER.readTree(value);
    } catch (JsonProcessingException e) {
      throw new UncheckedIOException("bad input value: " + value, e);
    }
  }

  static Properties config() {
    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, env("BENCH_APP_ID"));
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, env("BENCH_BOOTSTRAP"));
    props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee(env("BENCH_GUARANTEE")));
    props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Long.parseLong(env("BENCH_COMMIT_INTERVAL_MS")));
    props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
    props.put(StreamsConfig.STATE_DIR_CONFIG, env("BENCH_STATE_DIR"));
    props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
    // No global stores here; this only silences the WARN that 4.x logs at start when it is unset.
    props.put(StreamsConfig.PROCESSING_EXCEPTION_HANDLER_GLOBAL_ENABLED_CONFIG, true);
    return props;
  }

  private static String guarantee(String name) {
    return switch (name) {
      case "exactly_once" -> StreamsConfig.EXACTLY_ONCE_V2;
      case "at_least_once" -> StreamsConfig.AT_LEAST_ONCE;
      default -> throw new IllegalArgumentException(
          "BENCH_GUARANTEE must be at_least_once or exactly_once, not " + name);
    };
  }

  private static String env(String name) {
    String value = System.getenv(name);
    if (value == null || value.isEmpty()) {
      throw new IllegalArgumentException("environment variable " + name + " is not set");
    }
    return value;
  }

  public static void main(String[] args) throws InterruptedException {
    Properties props = config();
    Topology topology = topology(env("BENCH_INPUT"), env("BENCH_OUTPUT"));
    KafkaStreams streams = new KafkaStreams(topology, props);
    CountDownLatch failed = new CountDownLatch(1);
    streams.setUncaughtExceptionHandler(e -> {
      System.err.println("click counter: stream thread failed");
      e.printStackTrace();
      failed.countDown();
      return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
    });
    // A JVM shut down by SIGTERM exits with 143 once its hooks have run, whatever they do; the
    // contract wants 0 after a clean shutdown, so the hook halts with its own status once Kafka
    // Streams is closed (log4j2's own hook is disabled in log4j2.xml, so nothing else runs).
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      boolean closed = streams.close(CLOSE);
      if (!closed) {
        System.err.println("click counter: Kafka Streams did not close within " + CLOSE_TIMEOUT);
      }
      System.out.flush();
      System.err.flush();
      Runtime.getRuntime().halt(closed && failed.getCount() > 0 ? 0 : 1);
    }, "click-counter-shutdown"));
    try {
      streams.start();
    } catch (RuntimeException e) {
      failed.countDown();
      throw e;
    }
    failed.await();
    System.exit(1);
  }
}
