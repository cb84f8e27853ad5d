package dev.baton.bench;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.state.WindowStore;

/**
 * Clicks per page and minute (bench/throughput.py --topology windowed, the same topology as
 * bench/topologies/page_windows.py): drop bot clicks, re-key by page (through the repartition
 * topic {@code <application.id>-clicks-by-page-repartition}), count in 1-minute tumbling windows
 * with a 10 s grace on the record timestamps, write every count to the output topic. The output
 * key is the page and the window start in Kafka Streams' {@code TimeWindowedSerializer} layout
 * (Baton's windowed keys use the same), the value the count as a decimal string.
 */
final class PageWindows {
  static final Duration SIZE = Duration.ofMinutes(1);
  static final Duration GRACE = Duration.ofSeconds(10);

  private PageWindows() {}

  static Topology topology(String input, String output) {
    Serde<JsonNode> json = Json.serde();
    StreamsBuilder builder = new StreamsBuilder();
    builder.stream(input, Consumed.with(Serdes.String(), json))
        .filter((user, click) -> !click.path("bot").asBoolean())
        .selectKey((user, click) -> click.path("page").asText())
        .groupByKey(Grouped.with("clicks-by-page", Serdes.String(), json))
        .windowedBy(TimeWindows.ofSizeAndGrace(SIZE, GRACE))
        .count(Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("page-counts")
            .withKeySerde(Serdes.String())
            .withValueSerde(Serdes.Long()))
        .toStream()
        .mapValues(String::valueOf)
        .to(output, Produced.with(
            WindowedSerdes.timeWindowedSerdeFrom(String.class, SIZE.toMillis()), Serdes.String()));
    return builder.build();
  }
}
