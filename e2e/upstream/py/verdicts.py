"""flechtctl 0.17's refusals, sorted into flecht's error kinds.

flechtctl raises few exception types and tells its cases apart by message
and by __cause__; flecht names each case as a kind (`flecht secrets --help`).
The interop tests compare the two, so this module maps what upstream raised
to the kind flecht must report for the same input:

  SecretDecryptError / SecretSignatureError
    caused by UnknownKeyError             unknown_kid / unknown_signer
    "holds only the public half"          seal_only
    "scope mismatch", "downgrade blocked" scope_violation
    "is bound to scopes"                  key_binding (a token or signature
                                          outside its key's binding)
    caused by a joserfc header error      header_rejected (the registry of the
                                          key's kind refused the header)
    caused by joserfc BadSignatureError   bad_signature
    caused by joserfc DecodeError         tag_mismatch (a token), bad_signature
                                          (a signature)
  SecretFormatError                       malformed
  UnsignedSecretError                     unsigned
  KeyringError "cannot seal"              key_binding (sealing a scope outside
                                          the sealing key's binding)
  KeyringError "no signing key"           no_signing_key
  anything else                           "other"

`refusal(e)` also reports the exception's and its cause's type names, so a
test that disagrees can say exactly what upstream did. Messages are never
reported: they may hold scope names, but the tests judge kinds only.
"""
from flechtctl import (
    KeyringError,
    SecretDecryptError,
    SecretFormatError,
    SecretSignatureError,
    UnknownKeyError,
    UnsignedSecretError,
)

# joserfc's errors for a header its registry does not admit: an algorithm or
# member outside the pinned allowlist of the key's kind.
HEADER_ERRORS = frozenset({
    "ConflictAlgorithmError",
    "InvalidEncryptionAlgorithmError",
    "InvalidHeaderValueError",
    "MissingAlgorithmError",
    "MissingCritHeaderError",
    "MissingEncryptionError",
    "MissingHeaderError",
    "UnsupportedAlgorithmError",
    "UnsupportedHeaderError",
})


def kind(e: BaseException) -> str:
    cause = e.__cause__
    text = str(e)
    if isinstance(e, SecretFormatError):
        return "malformed"
    if isinstance(e, UnsignedSecretError):
        return "unsigned"
    if isinstance(e, (SecretDecryptError, SecretSignatureError)):
        signature = isinstance(e, SecretSignatureError)
        if isinstance(cause, UnknownKeyError):
            return "unknown_signer" if signature else "unknown_kid"
        if "only the public half" in text:
            return "seal_only"
        if "scope mismatch" in text or "downgrade blocked" in text:
            return "scope_violation"
        if "is bound to scopes" in text:
            return "key_binding"
        if cause is not None and type(cause).__module__.startswith("joserfc"):
            name = type(cause).__name__
            if name in HEADER_ERRORS:
                return "header_rejected"
            if name == "BadSignatureError":
                return "bad_signature"
            if name == "DecodeError":
                return "bad_signature" if signature else "tag_mismatch"
        return "other"
    if isinstance(e, KeyringError):
        if "cannot seal" in text:
            return "key_binding"
        if "no signing key" in text:
            return "no_signing_key"
    return "other"


def refusal(e: BaseException) -> dict:
    cause = e.__cause__
    return {"ok": False, "kind": kind(e), "error": type(e).__name__,
            "cause": None if cause is None else type(cause).__name__}
