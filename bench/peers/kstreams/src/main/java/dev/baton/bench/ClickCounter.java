package dev.baton.bench;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * The click counter, as bench/peers/CONTRACT.md describes it: count the clicks per user in a
 * RocksDB store with a changelog (Kafka Streams' defaults, record cache included) and write the
 * counts to the output topic. {@link Bench} runs it; it is the default topology.
 */
final class ClickCounter {
  private ClickCounter() {}

  static Topology topology(String input, String output) {
    StreamsBuilder builder = new StreamsBuilder();
    builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
        .mapValues(Json::parse)
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
}
