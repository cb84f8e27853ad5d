package dev.baton.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Clicks enriched from a table of users (bench/throughput.py --topology join, the same topology
 * as bench/topologies/click_enrichment.py): a stream-table inner join on the user id, both topics
 * keyed by user and co-partitioned; each click gains its user's country and tier and is written to
 * the output topic. A click of a user the table lacks is dropped.
 */
final class ClickEnrichment {
  private ClickEnrichment() {}

  static Topology topology(String input, String table, String output) {
    Serde<JsonNode> json = Json.serde();
    StreamsBuilder builder = new StreamsBuilder();
    KTable<String, JsonNode> users = builder.table(table, Consumed.with(Serdes.String(), json));
    builder.stream(input, Consumed.with(Serdes.String(), json))
        .join(users, ClickEnrichment::enrich)
        .to(output, Produced.with(Serdes.String(), json));
    return builder.build();
  }

  private static JsonNode enrich(JsonNode click, JsonNode user) {
    ObjectNode out = (ObjectNode) click;  // deserialized for this record alone: changed in place
    out.set("country", user.get("country"));
    out.set("tier", user.get("tier"));
    return out;
  }
}
