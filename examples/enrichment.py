"""Enrich events with reference data: a stream-table join and a foreign-key join.

* ``clicks`` (key user id, JSON click) meet ``users`` (key user id, JSON profile): each
  click goes to ``clicks-enriched`` with the user's country and plan, as the profile stood
  when the click was processed (a left join: a click of an unknown user keeps None).
* ``orders`` (key order id, JSON order naming a ``product_id``) meet ``products`` (key
  product id): ``orders-enriched`` holds, per order, the order with its product's name and
  the line total, and follows both sides: a price change re-prices every order of that
  product, an order moved to another product is re-joined, a deleted order is deleted
  (a tombstone). That is a foreign-key join (Kafka Streams' KIP-213): the two tables are
  keyed differently, so they need not be co-partitioned.

Run it: baton run examples/enrichment.py --bootstrap-servers localhost:9092 --application-id enrichment
(CLICKS_TOPIC, USERS_TOPIC, CLICKS_ENRICHED_TOPIC, ORDERS_TOPIC, PRODUCTS_TOPIC and
ORDERS_ENRICHED_TOPIC override the topic names, e.g. in tests.)
"""

import os
from typing import Any

from baton import JSON, STR, Topology


def topic(name: str) -> str:
    return os.environ.get(f"{name.upper().replace('-', '_')}_TOPIC", name)


def enrich_click(click: dict[str, Any], user: dict[str, Any] | None) -> dict[str, Any]:
    return {**click, "country": user and user["country"], "plan": user and user["plan"]}


def enrich_order(order: dict[str, Any], product: dict[str, Any]) -> dict[str, Any]:
    return {
        **order,
        "product": product["name"],
        "total_cents": order["quantity"] * product["price_cents"],
        "product_version": product["version"],
    }


topology = Topology()

users = topology.table(topic("users"), key=STR, value=JSON, store="users")
(
    topology.stream(topic("clicks"), key=STR, value=JSON)
    .left_join(users, enrich_click)
    .to(topic("clicks-enriched"), value=JSON)
)

orders = topology.table(topic("orders"), key=STR, value=JSON, store="orders")
products = topology.table(topic("products"), key=STR, value=JSON, store="products")
(
    orders.join(products, enrich_order, foreign_key=lambda order: order["product_id"], name="order-product")
    .to_stream()
    .to(topic("orders-enriched"), value=JSON)
)
