"""Open flenc tokens with flechtctl 0.17's library and classify each refusal.

    open_tokens.py KEYRING < [{"token": T, "scope": S}, ...]

prints one JSON object per input, in order:

    {"ok": true, "value": <canonical JSON of the plaintext>}
    {"ok": false, "class": CLASS, "error": <exception type>, "cause": <type of __cause__ or null>}

`flechtctl decrypt` runs the same code but prints one message for every
failure; the interop tests compare upstream's refusals with flecht's error
kinds, so this sorts them by what upstream raised. CLASS is

  unknown_kid      SecretDecryptError caused by UnknownKeyError (no key with that kid)
  scope_violation  SecretDecryptError for a scope the reader may not open
                   (another scope, a scoped token read unscoped, a key's binding)
  tag_mismatch     SecretDecryptError from the JWE decryption itself (wrong key
                   bytes for the kid, or a changed token)
  format           SecretFormatError (not a flenc token, an unknown envelope, a bad header)
  other            anything else (then "error" says what)

The plaintext is never printed: "value" is the payload re-encoded
canonically, which the tests compare with what was sealed.
"""
import json
import sys
from pathlib import Path

from flechtctl import (
    Keyring,
    SecretDecryptError,
    SecretFormatError,
    UnknownKeyError,
    canonical_json,
    decrypt,
)

SCOPE_REASONS = ("scope mismatch", "downgrade blocked", "is bound to scopes")


def classify(e: Exception) -> str:
    if isinstance(e, SecretFormatError):
        return "format"
    if not isinstance(e, SecretDecryptError):
        return "other"
    if isinstance(e.__cause__, UnknownKeyError):
        return "unknown_kid"
    if any(reason in str(e) for reason in SCOPE_REASONS):
        return "scope_violation"
    if e.__cause__ is not None and type(e.__cause__).__module__.startswith("joserfc"):
        return "tag_mismatch"
    return "other"


def main() -> int:
    keyring = Keyring.from_json(Path(sys.argv[1]).read_text(encoding="utf-8"))
    for item in json.load(sys.stdin):
        try:
            value = decrypt(keyring, item["token"], scope=item.get("scope", ""))
        except Exception as e:  # every refusal is reported, none ends the run
            cause = e.__cause__
            print(json.dumps({"ok": False, "class": classify(e), "error": type(e).__name__,
                              "cause": None if cause is None else type(cause).__name__}))
            continue
        print(json.dumps({"ok": True, "value": canonical_json(value).decode("utf-8")}, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
