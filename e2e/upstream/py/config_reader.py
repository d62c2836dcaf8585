"""A stage on flechtwerk 0.17 that reads ENCRYPTED fields of its config records.

The reader of a key rotation: it loads the keyring FILE once at start (as a
deployment does: the file is mounted, the process reads it and hands it to
Flechtwerk.of(keyring=...), which installs it and publishes
flechtwerk_keyring_keys_loaded{kid} on the metrics port), reads the config
topic into its config store, and decrypts through the library's own
ENCRYPTED codec, so every rule of upstream applies (the kind of the key
behind the kid, the scope ratchet, key bindings).

Config records carry two encrypted fields: "api_key", scoped "api_key",
and "password", unscoped. The stage is a transformer on a probe topic: a
probe record {"probe": N, "keys": [config keys...]} makes it decrypt both
fields of each named config from its store and report every outcome, as one
log line and one output record per value:

  {"probe": N, "config": KEY, "field": F, "ok": true, "kid": KID, "sha256": hex of the plaintext}
  {"probe": N, "config": KEY, "field": F, "ok": false, "error": CLASS, "kid": KID or null}

so a test counts decrypts and failures (0 is the assertion) and checks the
values without the plaintext ever being written. SIGTERM stops it cleanly.
"""
import argparse
import asyncio
import hashlib
import logging
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from flechtwerk import Event, Flechtwerk, IncomingMessage, Message, State, Transformer
from flechtwerk.attribute import INT, LIST, STR, Attribute
from flechtwerk.secrets import ENCRYPTED, Keyring, SecretError, kid_of

API_KEY = Attribute("api_key", ENCRYPTED(STR, scope="api_key"))
PASSWORD = Attribute("password", ENCRYPTED(STR))
FIELDS = (API_KEY, PASSWORD)

PROBE = Attribute("probe", INT)
KEYS = Attribute("keys", LIST(STR))

log = logging.getLogger("config_reader")


class ConfigReader(Transformer):
    """Decrypts the configs a probe names; stateless."""

    def __init__(self, probe_topic: str, config_topic: str, output_topic: str) -> None:
        self.input_topics = [probe_topic]
        self.config_topics = [config_topic]
        self.output_topic = output_topic

    async def transform(self, msg: IncomingMessage, state: State) -> AsyncIterator[Message | State]:
        if msg.value is None:
            return
        probe = msg.value[PROBE]
        for key in msg.value[KEYS]:
            for result in self.decrypt_all(probe, key):
                yield Message(key=key, topic=self.output_topic, value=Event.wrap(result))

    def decrypt_all(self, probe: int, key: str) -> list[dict]:
        config = self.configs.get(key)
        if config is None:
            log.error("decrypt FAILED probe=%d config=%s: no such config in the store", probe, key)
            return [{"probe": probe, "config": key, "field": f.name, "ok": False, "error": "missing", "kid": None}
                    for f in FIELDS]
        results = []
        for field in FIELDS:
            token = config.raw.get(field.name)
            kid = None
            try:
                kid = kid_of(token)
                plaintext = config[field]
            except (SecretError, KeyError, ValueError, TypeError) as e:
                # The class is what a test compares; the message may name a
                # kid or scope but never the value.
                log.error("decrypt FAILED probe=%d config=%s field=%s kid=%s error=%s",
                          probe, key, field.name, kid, type(e).__name__)
                results.append({"probe": probe, "config": key, "field": field.name, "ok": False,
                                "error": type(e).__name__, "kid": kid})
                continue
            log.info("decrypt ok probe=%d config=%s field=%s kid=%s", probe, key, field.name, kid)
            results.append({"probe": probe, "config": key, "field": field.name, "ok": True, "kid": kid,
                            "sha256": hashlib.sha256(plaintext.encode("utf-8")).hexdigest()})
        return results


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--application-id", required=True)
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--keyring", required=True, help="the keyring file (a plain JWK Set)")
    parser.add_argument("--config-topic", required=True)
    parser.add_argument("--probe-topic", required=True)
    parser.add_argument("--output-topic", required=True)
    parser.add_argument("--metrics-port", type=int, required=True)
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> None:
    keyring = Keyring.from_json(Path(args.keyring).read_text(encoding="utf-8"))
    log.info("keyring %s loaded: kids=%s primary=%s", args.keyring, ",".join(keyring.kids()), keyring.primary)
    handle = Flechtwerk.of(
        application_id=args.application_id,
        bootstrap_servers=args.bootstrap_servers,
        client_id=args.client_id,
        keyring=keyring,
        max_poll_records=50,
        # At least one label: flechtwerk 0.17 registers its unlabelled
        # families with the label names of metrics_labels, so with none
        # every .labels() call raises (the first one at the config
        # bootstrap) and the stage crashes.
        metrics_labels={"stage": "config-reader"},
        metrics_port=args.metrics_port,
        stage=ConfigReader(args.probe_topic, args.config_topic, args.output_topic),
    )
    main = asyncio.current_task()
    assert main is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main.cancel)
    log.info("config reader starting: application_id=%s client_id=%s metrics url=http://127.0.0.1:%d/metrics",
             args.application_id, args.client_id, args.metrics_port)
    await handle.run()


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = parse_args(sys.argv[1:])
    try:
        asyncio.run(run(args))
    except asyncio.CancelledError:
        log.info("config reader stopped (SIGTERM)")
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
