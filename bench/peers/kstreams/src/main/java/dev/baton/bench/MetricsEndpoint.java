package dev.baton.bench;

import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.streams.KafkaStreams;

/**
 * Kafka Streams' own metrics over HTTP on 127.0.0.1, for bench/throughput.py: it polls this as it
 * polls a Baton worker's /metrics, so both are timed from their first to their last processed
 * record the same way. One line per value, {@code name value}:
 *
 * <ul>
 *   <li>{@code process_total}: the stream thread's {@code process-total} (records processed by
 *       its tasks, every sub-topology's, repartition topics and tables included);
 *   <li>{@code dropped_records_total}: the tasks' {@code dropped-records-total} (late records
 *       among them);
 *   <li>{@code records_consumed_total{topic="..."}}: the source nodes' records per topic.
 * </ul>
 */
final class MetricsEndpoint {
  private static final java.util.Set<String> WANTED = java.util.Set.of(
      "stream-thread-metrics/process-total",
      "stream-task-metrics/dropped-records-total",
      "stream-topic-metrics/records-consumed-total");

  private MetricsEndpoint() {}

  static HttpServer start(KafkaStreams streams, int port) {
    try {
      HttpServer server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 0);
      server.createContext("/metrics", exchange -> {
        byte[] body = render(streams.metrics()).getBytes(StandardCharsets.UTF_8);
        exchange.getResponseHeaders().set("Content-Type", "text/plain; charset=utf-8");
        exchange.sendResponseHeaders(200, body.length);
        try (OutputStream out = exchange.getResponseBody()) {
          out.write(body);
        }
      });
      server.start();
      return server;
    } catch (IOException e) {
      throw new UncheckedIOException("metrics endpoint on port " + port, e);
    }
  }

  static String render(Map<MetricName, ? extends Metric> metrics) {
    double processed = 0;
    double dropped = 0;
    Map<String, Double> consumed = new TreeMap<>();
    for (Map.Entry<MetricName, ? extends Metric> entry : metrics.entrySet()) {
      MetricName name = entry.getKey();
      String key = name.group() + "/" + name.name();
      // Only these three are evaluated: a RocksDB property gauge read from this HTTP thread while
      // the stream thread closes a window segment's store crashed the JVM (SIGSEGV in
      // rocksdb::DBImpl::GetAggregatedIntProperty, the windowed exactly-once run).
      if (!WANTED.contains(key)
          || !(entry.getValue().metricValue() instanceof Double value)
          || value.isNaN()) {
        continue;
      }
      switch (key) {
        case "stream-thread-metrics/process-total" -> processed += value;
        case "stream-task-metrics/dropped-records-total" -> dropped += value;
        case "stream-topic-metrics/records-consumed-total" ->
            consumed.merge(name.tags().getOrDefault("topic", ""), value, Double::sum);
        default -> { }
      }
    }
    StringBuilder out = new StringBuilder();
    out.append("process_total ").append(processed).append('\n');
    out.append("dropped_records_total ").append(dropped).append('\n');
    consumed.forEach((topic, value) ->
        out.append("records_consumed_total{topic=\"").append(topic).append("\"} ").append(value).append('\n'));
    return out.toString();
  }
}
