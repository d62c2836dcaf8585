"""Pins what the real upstream library writes for tricky record values.

For every input below it runs the path a Python stage takes for a record it
re-emits: flechtwerk.kafka.decode_record(raw, Event) (strict UTF-8,
json.loads, Record.wrap) and then flechtwerk.kafka.encode_json, which is
json.dumps(allow_nan=False, ensure_ascii=False, separators=(",", ":"),
sort_keys=True). Each vector keeps the input and either the exact output
bytes or where and how upstream failed:

  {"name", "input" | "input_base64", "output"}
  {"name", "input" | "input_base64", "error": {"stage": "decode" | "encode", "type", "message"}}

A decode error that is a ValueError (UnicodeDecodeError, JSONDecodeError, a
non-object value, an integer over 4300 digits) is what upstream hands its
on_invalid_message policy; any other decode error (RecursionError) and every
encode error escape that policy and stop the stage.

Run it with the upstream venv (flechtwerk 0.17.0 on CPython 3.13), from the
repository root:

  chroot /work/upstream/chroot /opt/fw/bin/python - \
    < internal/attr/testdata/canonical/gen_vectors.py \
    > internal/attr/testdata/canonical/vectors.json

The random part is seeded, so a rerun writes the same file.
"""
import base64
import importlib.metadata
import json
import math
import platform
import random
import struct
import sys

from flechtwerk.kafka import decode_record, encode_json
from flechtwerk.types import Event

CASES: list[tuple[str, bytes]] = []


def case(name: str, raw: bytes | str) -> None:
    CASES.append((name, raw.encode("utf-8") if isinstance(raw, str) else raw))


def num(name: str, literal: str) -> None:
    case("number " + name, '{"n":' + literal + "}")


# --- numbers: upstream re-encodes every literal through int / float ---
for lit in [
    "0", "-0", "1", "-1", "0.0", "-0.0", "1.0", "1.50", "100", "1e2", "1E2", "1e+2",
    "1e-2", "2.5E-3", "1e0", "1.0e0", "0e0", "-0e0", "0e-5", "123.456e2", "0.1",
    "0.30000000000000004", "0.1000000000000000055511151231257827021181583404541015625",
    "1.23456789012345678901234567890", "12345678901234567890", "-12345678901234567890",
    "123456789012345678901234567890", "9007199254740993", "9007199254740993.0",
    "1e15", "1e16", "1e17", "9999999999999999.0", "12345678901234567.0", "1234567890123456.7",
    "0.0001", "0.00001", "0.000015", "1.5e-5", "0.00012", "1e-05", "1e22", "1e21", "1e23",
    "5e-324", "2.4703282292062328e-324", "2e-324", "1e-400", "-1e-400",
    "1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308",
    "1E400", "-1E400", "1e309", "2.2250738585072014e-308", "2.2250738585072011e-308",
    "4.9406564584124654e-324", "123e-2", "-2.5", "1e-7", "0.000123456789", "1e100",
    "6.02214076e23", "-6.62607015e-34", "3.141592653589793", "2.718281828459045235360287",
]:
    num(lit, lit)
num("4300 digits", "1" + "0" * 4299)
num("4301 digits", "1" + "0" * 4300)
num("negative 4300 digits", "-" + "9" * 4300)
num("309 digit float", "1" * 309 + ".0")
num("310 digit float", "1" * 310 + ".0")
num("400 digit integer", "1" * 400)
case("numbers nested", '{"a":[1e2,{"b":-0,"c":[2.5E-3,-0.0]}],"d":{"e":1E1}}')

# --- literals JSON does not have but Python's json.loads accepts ---
for lit in ["NaN", "Infinity", "-Infinity"]:
    num(lit, lit)

# --- strings: escapes, non-ASCII, surrogates ---
for name, lit in [
    ("ascii", '"plain"'), ("e acute raw", '"é"'), ("e acute escaped", '"\\u00e9"'),
    ("cjk", '"日本語"'), ("emoji raw", '"😀"'), ("emoji pair escaped", '"\\ud83d\\ude00"'),
    ("emoji pair upper", '"\\uD83D\\uDE00"'), ("max code point", '"\\udbff\\udfff"'),
    ("line separator", '"\\u2028"'), ("paragraph separator", '"\\u2029"'),
    ("line separator raw", '"\u2028\u2029"'),
    ("del escaped", '"\\u007f"'), ("del raw", '"\x7f"'), ("nul", '"\\u0000"'),
    ("control 01", '"\\u0001"'), ("control 1f", '"\\u001f"'), ("control 0b", '"\\u000b"'),
    ("short escapes", '"\\b\\f\\n\\r\\t"'), ("escaped short as u", '"\\u0008\\u000c\\u000a\\u000d\\u0009"'),
    ("quote and backslash", '"\\"\\\\"'), ("solidus", '"\\/"'), ("html", '"<>&\'"'),
    ("nel c1", '"\\u0085"'), ("c1 raw", '"\u0080\u009f"'), ("bom in string", '"\\ufeff"'),
    ("bom raw in string", '"\ufeff"'), ("u+fffe", '"\\ufffe"'), ("u+ffff", '"\\uffff"'),
    ("replacement char", '"\\ufffd"'), ("lone high", '"\\ud800"'), ("lone low", '"\\udc00"'),
    ("high then letter", '"\\ud800A"'), ("high high", '"\\ud800\\ud800"'),
    ("low then high", '"\\udc00\\ud800"'), ("empty", '""'), ("combining", '"e\\u0301"'),
]:
    case("string " + name, '{"s":' + lit + "}")
case("string raw control", b'{"s":"a\x01b"}')
case("string raw newline", b'{"s":"a\nb"}')

# --- keys: order by code point, escapes, duplicates ---
case("keys sorted", '{"b":1,"a":2,"B":3,"_":4,"":5,"aa":6,"a ":7}')
case("keys non-ascii order", '{"é":1,"z":2,"😀":3,"\\uffff":4,"\\u00ff":5,"Z":6,"\\u0100":7}')
case("keys escaped", '{"a\\nb":1,"\\"":2,"\\u0000":3,"\\u2028":4}')
case("keys duplicate", '{"a":1,"a":2}')
case("keys duplicate nested", '{"a":{"x":1},"a":{"y":2}}')
case("keys nested sorted", '{"z":{"b":[{"d":1,"c":2}],"a":null}}')
case("key lone surrogate", '{"\\ud800":1}')

# --- shapes and whitespace ---
case("empty value", b"")
case("empty object", "{}")
case("whitespace", ' \t\r\n{ "a" : [ 1 , true , false , null ] , "b" : { } } \n')
case("literals", '{"t":true,"f":false,"n":null,"a":[],"o":{}}')
case("array value", "[1,2]")
case("string value", '"x"')
case("number value", "1")
case("null value", "null")
case("trailing data", '{"a":1} x')
case("two objects", '{"a":1}{"b":2}')
case("trailing comma", '{"a":1,}')
case("single quotes", "{'a':1}")
case("leading zero", '{"n":01}')
case("plus sign", '{"n":+1}')
case("bare dot", '{"n":.5}')
case("bom prefix", "\ufeff{}".encode("utf-8"))
case("invalid utf8", b'{"s":"\xff"}')
case("cesu8 surrogate", b'{"s":"\xed\xa0\x80"}')
case("overlong utf8", b'{"s":"\xc0\xaf"}')
case("utf16", '{"a":1}'.encode("utf-16"))
case("nested 400", '{"a":' + "[" * 400 + "]" * 400 + "}")
case("nested 2000", '{"a":' + "[" * 2000 + "]" * 2000 + "}")

# --- seeded random numbers: Python repr must hold for any double ---
rng = random.Random(20260817)
spellings = [repr, lambda f: "%.17g" % f, lambda f: "%.20e" % f, lambda f: "%.3E" % f,
             lambda f: "%.6f" % f, lambda f: "%.25g" % f]
for i in range(400):
    f = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
    if math.isnan(f) or math.isinf(f):
        continue
    lit = rng.choice(spellings)(f)
    if lit in ("nan", "inf", "-inf"):
        continue
    num(f"random float {i}", lit)
for i in range(100):
    e = rng.randint(-30, 30)
    f = rng.random() * 10.0 ** e * rng.choice([1, -1])
    num(f"random scaled {i}", rng.choice(spellings)(f))
for i in range(60):
    digits = rng.randint(1, 60)
    n = rng.randint(10 ** (digits - 1) if digits > 1 else 0, 10 ** digits - 1) * rng.choice([1, -1])
    num(f"random int {i}", str(n))


def vector(name: str, raw: bytes) -> dict:
    v: dict = {"name": name}
    try:
        v["input"] = raw.decode("utf-8")
    except UnicodeDecodeError:
        v["input_base64"] = base64.b64encode(raw).decode("ascii")
    try:
        record = decode_record(raw, Event)
    except BaseException as e:  # noqa: BLE001 -- recording what upstream raises is the point
        v["error"] = {"stage": "decode", "type": type(e).__name__, "message": str(e)[:200]}
        return v
    try:
        out = encode_json(record)
    except BaseException as e:  # noqa: BLE001
        v["error"] = {"stage": "encode", "type": type(e).__name__, "message": str(e)[:200]}
        return v
    v["output"] = out.decode("utf-8")
    return v


json.dump({
    "generator": "internal/attr/testdata/canonical/gen_vectors.py",
    "flechtwerk": importlib.metadata.version("flechtwerk"),
    "python": platform.python_version(),
    "vectors": [vector(name, raw) for name, raw in CASES],
}, sys.stdout, ensure_ascii=True, indent=1)
sys.stdout.write("\n")
