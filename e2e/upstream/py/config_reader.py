"""A stage on flechtwerk 0.17 that reads the secret fields of its config records.

The reader of a key rotation: it loads the keyring FILE once at start (as a
deployment does: the file is mounted, the process reads it and hands it to
Flechtwerk.of(keyring=...), which installs it and publishes
flechtwerk_keyring_keys_loaded{kid} on the metrics port). A
password-protected file is opened with flechtctl's decrypt_keyring and the
password in --password-file, as a deployment that mounts both would. It
reads the config topic into its config store and reads each field through
the library's own codecs, so every rule of upstream applies (the kind of
the key behind the kid, the scope ratchet, key bindings, signatures and
their scopes) and every read is counted on the metrics port
(flechtwerk_secret_decrypts_total, flechtwerk_secret_verifications_total).

The fields are given as --field NAME[:SCOPE[:MODE]], as flecht's
secret_fields spell them: MODE "encrypted" (the default) is
ENCRYPTED(STR, scope=SCOPE), "signed" SIGNED(STR, scope=SCOPE) and
"encrypted-signed" ENCRYPTED(SIGNED(STR, scope=SCOPE), scope=SCOPE).
Without --field: "api_key:api_key" and "password".

The stage is a transformer on a probe topic: a probe record
{"probe": N, "keys": [config keys...]} makes it read every field of each
named config from its store and report every outcome, as one log line and
one output record per value:

  {"probe": N, "config": KEY, "field": F, "ok": true, "kid": KID, "signer": KID or null,
   "sha256": hex of the plaintext}
  {"probe": N, "config": KEY, "field": F, "ok": false, "error": TYPE, "kind": KIND, "kid": KID or null}

where kid is the sealing kid of a token (the signer of a signed field) and
signer the kid that signed the value (in a signed or encrypted-signed
field); a config the store does not hold is one result with field null and
error "missing". A test counts reads and failures (0 is the assertion) and
checks the values without the plaintext ever being written. SIGTERM stops
it cleanly.
"""
import argparse
import asyncio
import hashlib
import logging
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from flechtctl import decrypt, decrypt_keyring, is_encrypted_keyring
from flechtwerk import Event, Flechtwerk, IncomingMessage, Message, State, Transformer
from flechtwerk.attribute import INT, LIST, STR, Attribute
from flechtwerk.secrets import ENCRYPTED, SIGNED, Keyring, SecretError, kid_of, signer_of

from verdicts import kind

PROBE = Attribute("probe", INT)
KEYS = Attribute("keys", LIST(STR))

log = logging.getLogger("config_reader")


class Field:
    """One secret field and the codec upstream reads it with."""

    def __init__(self, spec: str) -> None:
        name, _, rest = spec.partition(":")
        scope, _, mode = rest.partition(":")
        self.name, self.scope, self.mode = name, scope, mode or "encrypted"
        if self.mode == "encrypted":
            codec = ENCRYPTED(STR, scope=scope)
        elif self.mode == "signed":
            codec = SIGNED(STR, scope=scope)
        elif self.mode == "encrypted-signed":
            codec = ENCRYPTED(SIGNED(STR, scope=scope), scope=scope)
        else:
            raise SystemExit(f"--field {spec}: unknown mode {self.mode!r}")
        self.attribute = Attribute(name, codec)

    def kids(self, keyring: Keyring, value: object) -> tuple[str | None, str | None]:
        """The sealing kid (the signer, for a signed field) and the signer.

        Read without the codec, so without counting: the counters on the
        metrics port count the codec's reads alone.
        """
        if self.mode == "signed":
            return signer_of(value), signer_of(value)
        kid = kid_of(value)
        if self.mode == "encrypted-signed":
            return kid, signer_of(decrypt(keyring, value, scope=self.scope))
        return kid, None


class ConfigReader(Transformer):
    """Reads the fields of the configs a probe names; stateless."""

    def __init__(self, fields: list[Field], keyring: Keyring, probe_topic: str, config_topic: str,
                 output_topic: str) -> None:
        self.fields = fields
        self.keyring = keyring
        self.input_topics = [probe_topic]
        self.config_topics = [config_topic]
        self.output_topic = output_topic

    async def transform(self, msg: IncomingMessage, state: State) -> AsyncIterator[Message | State]:
        if msg.value is None:
            return
        probe = msg.value[PROBE]
        for key in msg.value[KEYS]:
            for result in self.read_all(probe, key):
                yield Message(key=key, topic=self.output_topic, value=Event.wrap(result))

    def read_all(self, probe: int, key: str) -> list[dict]:
        config = self.configs.get(key)
        if config is None:
            log.info("probe=%d config=%s: no such config in the store", probe, key)
            return [{"probe": probe, "config": key, "field": None, "ok": False, "error": "missing",
                     "kind": "missing", "kid": None}]
        results = []
        for field in self.fields:
            kid = signer = None
            try:
                kid, signer = field.kids(self.keyring, config.raw.get(field.name))
                plaintext = config[field.attribute]
            except (SecretError, KeyError, ValueError, TypeError) as e:
                # The class and kind are what a test compares; the message
                # may name a kid or scope but never the value.
                log.error("read FAILED probe=%d config=%s field=%s kid=%s error=%s kind=%s",
                          probe, key, field.name, kid, type(e).__name__, kind(e))
                results.append({"probe": probe, "config": key, "field": field.name, "ok": False,
                                "error": type(e).__name__, "kind": kind(e), "kid": kid})
                continue
            log.info("read ok probe=%d config=%s field=%s kid=%s signer=%s", probe, key, field.name, kid, signer)
            results.append({"probe": probe, "config": key, "field": field.name, "ok": True, "kid": kid,
                            "signer": signer, "sha256": hashlib.sha256(plaintext.encode("utf-8")).hexdigest()})
        return results


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--application-id", required=True)
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--keyring", required=True, help="the keyring file (a JWK Set, or password-protected)")
    parser.add_argument("--password-file", help="the password of a protected keyring file")
    parser.add_argument("--field", action="append", default=[], help="NAME[:SCOPE[:MODE]] (repeatable)")
    parser.add_argument("--config-topic", required=True)
    parser.add_argument("--probe-topic", required=True)
    parser.add_argument("--output-topic", required=True)
    parser.add_argument("--metrics-port", type=int, required=True)
    return parser.parse_args(argv)


def load_keyring(path: str, password_file: str | None) -> Keyring:
    text = Path(path).read_text(encoding="utf-8")
    if is_encrypted_keyring(text):
        if not password_file:
            raise SystemExit(f"{path} is password-protected: give --password-file")
        return decrypt_keyring(text, Path(password_file).read_text(encoding="utf-8").removesuffix("\n"))
    return Keyring.from_json(text)


async def run(args: argparse.Namespace) -> None:
    keyring = load_keyring(args.keyring, args.password_file)
    fields = [Field(spec) for spec in args.field or ["api_key:api_key", "password"]]
    log.info("keyring %s loaded: kids=%s primary=%s; fields %s", args.keyring, ",".join(keyring.kids()),
             keyring.primary, " ".join(f"{f.name}:{f.scope}:{f.mode}" for f in fields))
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
        stage=ConfigReader(fields, keyring, args.probe_topic, args.config_topic, args.output_topic),
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
