"""Pins what a stage of the real upstream library exports.

It builds flechtwerk's own Metrics and PrometheusObserver (0.17.0) with
metrics_labels {"stage": "s"} and max_poll_records 500, calls every
observer hook once (every outcome and drop reason), and writes:

  scrape.txt              the text exposition (format 0.0.4) of the registry
  scrape.openmetrics.txt  the OpenMetrics exposition, what Prometheus asks for
  batch_size_buckets.json upstream's batch_size ladder for several
                          max_poll_records

Run it with the upstream venv, from the repository root:

  chroot /work/upstream/chroot /opt/fw/bin/python - /tmp/out \
    < internal/metrics/testdata/upstream/gen_scrape.py
  cp <chroot>/tmp/out/* internal/metrics/testdata/upstream/

The *_created samples prometheus_client adds carry wall-clock times; they
are replaced by 0 so a rerun writes the same files.
"""
import importlib.metadata
import json
import os
import re
import sys

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from flechtwerk.metrics import Metrics, _batch_size_buckets
from flechtwerk.mqtt import UNMATCHED
from flechtwerk.observer import PrometheusObserver

out = sys.argv[1]
os.makedirs(out, exist_ok=True)

metrics = Metrics()
metrics.max_poll_records = 500
metrics.metrics_labels = {"stage": "s"}
metrics.registry = CollectorRegistry()
obs = PrometheusObserver()
obs.metrics = metrics
obs.metrics_labels = metrics.metrics_labels

obs.message_in("in")
obs.message_in_bytes("in", 600_000)
for outcome in ("raised", "skipped", "substituted"):
    obs.message_invalid("in", outcome)
obs.message_out("out")
obs.message_out_bytes("out", 300)
obs.transaction_committed()
obs.active_configs(2)
obs.config_message_in("cfg")
obs.config_store_bytes(37)
obs.config_store_entries(3)
obs.config_store_restored(3)
obs.state_restored(0, 5)
obs.state_record_bytes(600_000)
obs.tasks_assigned(1)
obs.tokens_assigned(1)
obs.keyring_key_loaded("k1")
obs.secret_plaintext_read("")
obs.secret_decrypted("api", "k1")
obs.secret_unsigned_read("api")
obs.secret_verified("api", "k2")
obs.mqtt_buffered("a/#", 2)
obs.mqtt_connected()
obs.mqtt_disconnected()
obs.mqtt_message_in("a/#")
for topic, reason in (("a/#", "filtered"), ("a/#", "poison"), ("a/#", "unsubscribed"), (UNMATCHED, "stale")):
    obs.mqtt_message_dropped(topic, reason)
with obs.dispatch_scope():
    pass
with obs.batch_scope(10):
    pass
with obs.poll_cycle_scope():
    pass

created = re.compile(rb"^(\S*_created(?:\{[^}]*\})?) \S+$", re.M)


def pin(text: bytes) -> bytes:
    # Durations are wall-clock too: every timed histogram saw one
    # observation of well under 5 ms, so only its _sum varies.
    text = created.sub(rb"\1 0", text)
    return re.sub(rb"^(flechtwerk_\w+_seconds_sum\{[^}]*\}) \S+$", rb"\1 0", text, flags=re.M)


with open(os.path.join(out, "scrape.txt"), "wb") as f:
    f.write(pin(generate_latest(metrics.registry)))
with open(os.path.join(out, "scrape.openmetrics.txt"), "wb") as f:
    f.write(pin(generate_openmetrics(metrics.registry)))
with open(os.path.join(out, "batch_size_buckets.json"), "w") as f:
    json.dump({
        "flechtwerk": importlib.metadata.version("flechtwerk"),
        "prometheus_client": importlib.metadata.version("prometheus_client"),
        "buckets": {str(n): list(_batch_size_buckets(n)) for n in
                    (1, 2, 3, 4, 5, 10, 11, 26, 100, 101, 250, 251, 499, 500, 501, 1000, 1234, 5000, 100000)},
    }, f, indent=1)
    f.write("\n")
