package dev.baton.bench;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.UncheckedIOException;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;

/** JSON values as Jackson trees: what a Kafka Streams user without a schema writes. */
final class Json {
  static final ObjectMapper MAPPER = new ObjectMapper();

  private Json() {}

  static JsonNode parse(String value) {
    try {
      return MAPPER.readTree(value);
    } catch (JsonProcessingException e) {
      throw new UncheckedIOException("bad input value: " + value, e);
    }
  }

  /** A serde of Jackson trees (UTF-8 JSON bytes). */
  static Serde<JsonNode> serde() {
    return Serdes.serdeFrom(
        (topic, node) -> {
          if (node == null) {
            return null;
          }
          try {
            return MAPPER.writeValueAsBytes(node);
          } catch (JsonProcessingException e) {
            throw new UncheckedIOException(e);
          }
        },
        (topic, bytes) -> {
          if (bytes == null) {
            return null;
          }
          try {
            return MAPPER.readTree(bytes);
          } catch (IOException e) {
            throw new UncheckedIOException("bad JSON value on " + topic, e);
          }
        });
  }
}
