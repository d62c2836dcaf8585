"""flecht's `count` builtin, written on flechtwerk 0.17's public API.

The interop tests run it against the real upstream library, on the same
application_id as `flecht run` with the `count` builtin, and hand the
application over between the two in both directions: what one leaves in the
changelog, the group's offsets and the transactional IDs, the other must
take up. So it writes what the builtin writes (internal/stage/builtin/
count.go), byte for byte:

  * output: the input value plus "seq" (the running count of the state
    key), as canonical JSON, under the input key, with the input's
    timestamp;
  * state (the changelog): {"seq": n} per state key, the message key;
  * a tombstone passes without output and without a state change.

Everything else (topics, client id, max_poll_records, metrics port) comes
from the command line; --skip-invalid makes on_invalid_message skip a
record whose key or value does not decode (returning None), as flecht's
`invalid_messages: skip` does. SIGTERM stops it cleanly: the consumer
leaves the group, and the process exits 0.
"""
import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import AsyncIterator

from flechtwerk import Event, Flechtwerk, IncomingMessage, InvalidMessageError, Message, State, Transformer
from flechtwerk.attribute import INT, Attribute

SEQ = Attribute("seq", INT)
"""The running count per state key, in the output value and in the state."""

log = logging.getLogger("count_stage")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--application-id", required=True)
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--input-topic", action="append", required=True, help="repeatable")
    parser.add_argument("--output-topic", required=True)
    parser.add_argument("--max-poll-records", type=int, default=500)
    parser.add_argument("--metrics-port", type=int, default=0, help="0: no metrics")
    parser.add_argument("--skip-invalid", action="store_true",
                        help="skip a record that does not decode (on_invalid_message returns None)")
    return parser.parse_args(argv)


def skip(error: InvalidMessageError) -> None:
    """Skip the record: the stage counts it as outcome "skipped" and goes on."""
    log.info("skipped an invalid record at %s/%d@%d (%s)", error.topic, error.partition, error.offset, error.part)
    return None


def count_stage(input_topics: list[str], output_topic: str, skip_invalid: bool) -> Transformer:
    async def count(msg: IncomingMessage, state: State) -> AsyncIterator[Message | State]:
        if msg.value is None:
            return
        seq = (state.get(SEQ) or 0) + 1
        yield Message(key=msg.key, topic=output_topic, value=Event({**msg.value, SEQ: seq}), timestamp=msg.timestamp)
        yield State({**state, SEQ: seq})

    return Transformer.of(input_topics=input_topics, transform=count,
                          on_invalid_message=skip if skip_invalid else None)


async def run(args: argparse.Namespace) -> None:
    handle = Flechtwerk.of(
        application_id=args.application_id,
        bootstrap_servers=args.bootstrap_servers,
        client_id=args.client_id,
        max_poll_records=args.max_poll_records,
        # At least one label: with metrics on and none, flechtwerk 0.17
        # crashes at its first .labels() call (see config_reader.py).
        metrics_labels={"stage": "count"},
        metrics_port=args.metrics_port,
        stage=count_stage(args.input_topic, args.output_topic, args.skip_invalid),
    )
    main = asyncio.current_task()
    assert main is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main.cancel)
    log.info("count stage starting: application_id=%s client_id=%s inputs=%s output=%s max_poll_records=%d%s",
             args.application_id, args.client_id, args.input_topic, args.output_topic, args.max_poll_records,
             f" metrics url=http://127.0.0.1:{args.metrics_port}/metrics" if args.metrics_port else "")
    await handle.run()


def main() -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = parse_args(sys.argv[1:])
    try:
        asyncio.run(run(args))
    except asyncio.CancelledError:
        log.info("count stage stopped (SIGTERM)")
        return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
