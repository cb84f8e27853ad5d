package dev.baton.bench;

import com.sun.net.httpserver.HttpServer;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.streams.CloseOptions;
import org.apache.kafka.streams.CloseOptions.GroupMembershipOperation;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;

/**
 * The Kafka Streams peer of the benchmarks: one of the topologies, chosen by the first argument,
 * run by one stream thread with Kafka Streams' defaults except what the run needs.
 *
 * <ul>
 *   <li>{@code clicks} (the default): the click counter of bench/peers/CONTRACT.md ({@link ClickCounter});
 *   <li>{@code windowed}: clicks per page and minute through a repartition topic ({@link PageWindows});
 *   <li>{@code join}: clicks enriched from a table of users ({@link ClickEnrichment}).
 * </ul>
 *
 * <p>Configured by the environment of bench/peers/CONTRACT.md ({@code BENCH_BOOTSTRAP},
 * {@code BENCH_INPUT}, {@code BENCH_OUTPUT}, {@code BENCH_APP_ID}, {@code BENCH_GUARANTEE},
 * {@code BENCH_STATE_DIR}), plus {@code BENCH_TABLE} (the join's table topic); optionally
 * {@code BENCH_COMMIT_INTERVAL_MS} (unset: Kafka Streams' default, 100 ms under exactly-once and
 * 30 s otherwise) and {@code BENCH_METRICS_PORT} ({@link MetricsEndpoint}).
 *
 * <p>Runs until SIGTERM; the shutdown hook closes Kafka Streams (which commits and leaves the
 * group) and exits 0, or 1 if the close timed out or a stream thread had failed.
 */
public final class Bench {
  private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(60);
  // Kafka Streams' default close stays in the consumer group, so a restart with the same
  // application id waits out the old member's session timeout (45 s) before it gets its
  // partitions; the other peers' clients leave the group on close, and so does this one.
  private static final CloseOptions CLOSE = CloseOptions
      .groupMembershipOperation(GroupMembershipOperation.LEAVE_GROUP)
      .withTimeout(CLOSE_TIMEOUT);

  private Bench() {}

  static Topology topology(String name) {
    return switch (name) {
      case "clicks" -> ClickCounter.topology(env("BENCH_INPUT"), env("BENCH_OUTPUT"));
      case "windowed" -> PageWindows.topology(env("BENCH_INPUT"), env("BENCH_OUTPUT"));
      case "join" -> ClickEnrichment.topology(env("BENCH_INPUT"), env("BENCH_TABLE"), env("BENCH_OUTPUT"));
      default -> throw new IllegalArgumentException(
          "the topology must be clicks, windowed or join, not " + name);
    };
  }

  static Properties config() {
    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, env("BENCH_APP_ID"));
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, env("BENCH_BOOTSTRAP"));
    props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, guarantee(env("BENCH_GUARANTEE")));
    String commitMs = System.getenv("BENCH_COMMIT_INTERVAL_MS");
    if (commitMs != null && !commitMs.isEmpty()) {
      props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Long.parseLong(commitMs));
    }
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

  static String env(String name) {
    String value = System.getenv(name);
    if (value == null || value.isEmpty()) {
      throw new IllegalArgumentException("environment variable " + name + " is not set");
    }
    return value;
  }

  public static void main(String[] args) throws InterruptedException {
    String name = args.length > 0 ? args[0] : "clicks";
    Properties props = config();
    KafkaStreams streams = new KafkaStreams(topology(name), props);
    CountDownLatch failed = new CountDownLatch(1);
    streams.setUncaughtExceptionHandler(e -> {
      System.err.println(name + ": stream thread failed");
      e.printStackTrace();
      failed.countDown();
      return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
    });
    String port = System.getenv("BENCH_METRICS_PORT");
    HttpServer metrics = port == null || port.isEmpty()
        ? null : MetricsEndpoint.start(streams, Integer.parseInt(port));
    // A JVM shut down by SIGTERM exits with 143 once its hooks have run, whatever they do; the
    // contract wants 0 after a clean shutdown, so the hook halts with its own status once Kafka
    // Streams is closed (log4j2's own hook is disabled in log4j2.xml, so nothing else runs).
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      boolean closed = streams.close(CLOSE);
      if (!closed) {
        System.err.println(name + ": Kafka Streams did not close within " + CLOSE_TIMEOUT);
      }
      if (metrics != null) {
        metrics.stop(0);
      }
      System.out.flush();
      System.err.flush();
      Runtime.getRuntime().halt(closed && failed.getCount() > 0 ? 0 : 1);
    }, "bench-shutdown"));
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
