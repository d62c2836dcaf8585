"""Mint the upstream interop vectors with the real flechtctl 0.17.0.

Run with a Python that has flechtctl==0.17.0 (and so joserfc) installed:

    python mint.py > vectors.json

(mint.sh runs it in the project's Debian chroot.) Every keyring, token and
signed value in vectors.json is made by flechtctl's own code; every reject
records the error flechtctl raises for it, so the Go tests check flecht
refuses the same values.
"""
import base64
import json
import sys
from importlib.metadata import version

from flechtctl import tokens
from flechtctl.keyring import Ed25519Key, Keyring, X25519Key

PASSWORD = "correct horse battery staple"


def b64(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def refusal(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the message is the record
        return f"{type(e).__name__}: {e}"
    raise SystemExit("upstream accepted a value meant to be refused")


oct_a, oct_b = tokens.generate_oct_key(), tokens.generate_oct_key()
rec, rec2 = tokens.generate_x25519_key(), tokens.generate_x25519_key()
sig = tokens.generate_ed25519_key()

rings = {
    "oct_only": Keyring.of({"a": oct_a, "b": oct_b}, primary="b"),
    "per_scope_primaries": Keyring.of(
        {"a": oct_a, "b": oct_b}, primary="a", primaries={"api": "b"}, scopes={"b": {"api", "db"}}),
    "x25519_ed25519": Keyring.of(
        {"a": oct_a}, primary="a",
        recipients={"r": rec}, signers={"s": sig},
        scopes={"r": {"api"}, "s": {"api", "cfg"}},
        primaries={"api": "r"}, signing={"api": "s", "cfg": "s"}),
    "seal_only": Keyring.of(
        {"a": oct_a}, primary="a", recipients={"r": X25519Key(public=rec.public)},
        signers={"s": Ed25519Key(public=sig.public)},
        scopes={"r": {"api"}, "s": {"api", "cfg"}}, primaries={"api": "r"}),
    "x25519_primary": Keyring.of({}, primary="r2", recipients={"r2": rec2}, scopes={"r2": {"api"}}),
}
full = rings["x25519_ed25519"]

out = {
    "generator": f"flechtctl {version('flechtctl')}, joserfc {version('joserfc')} (mint.py)",
    "password": PASSWORD,
    "keyrings": {name: json.loads(k.to_json()) for name, k in rings.items()},
    "protected": tokens.encrypt_keyring(full, PASSWORD),
    "protected_keyring": "x25519_ed25519",
    "tokens": [],
    "signed": [],
    "rejects": [],
}


def token(name, ring, value, scope=""):
    t = tokens.encrypt(rings[ring], value, scope=scope)
    out["tokens"].append({"name": name, "keyring": ring, "scope": scope,
                          "payload": tokens.canonical_json(value).decode(), "token": t,
                          "kid": tokens.kid_of(t), "alg": tokens.read_header(t)["alg"]})
    return t


token("dir unscoped", "oct_only", "s3cret")
token("dir scoped", "oct_only", {"user": "ü", "pass": "p😀"}, "db")
token("dir per-scope primary", "per_scope_primaries", [1, "two"], "api")
ecdh_scoped = token("ecdh scoped", "x25519_ed25519", "sk-live-123", "api")
token("ecdh unscoped to an X25519 primary", "x25519_primary", 42, "api")
signed = tokens.sign(full, {"endpoint": "https://example.test"}, scope="api")
out["signed"].append({"name": "signed record", "keyring": "x25519_ed25519", "scope": "api",
                      "payload": tokens.canonical_json({"endpoint": "https://example.test"}).decode(),
                      "token": signed, "kid": "s"})
inner = tokens.sign(full, "wrapped", scope="api")
token("encrypted signed value", "x25519_ed25519", inner, "api")
out["enc_signed"] = {"name": "ENCRYPTED(SIGNED(STR, api), api)", "token": out["tokens"][-1]["token"],
                     "signed": inner, "value": "wrapped", "scope": "api", "keyring": "x25519_ed25519"}


def reject(name, ring, tok, scope, kind, fn):
    out["rejects"].append({"name": name, "keyring": ring, "token": tok, "scope": scope,
                           "kind": kind, "upstream": refusal(fn)})


dir_api = tokens.encrypt(rings["oct_only"], "v", scope="api")
reject("wrong scope", "oct_only", dir_api, "db", "scope_violation",
       lambda: tokens.decrypt(rings["oct_only"], dir_api, scope="db"))
reject("scoped token, unscoped read", "oct_only", dir_api, "", "scope_violation",
       lambda: tokens.decrypt(rings["oct_only"], dir_api))
# A token sealed under b before b was bound: a reader whose keyring binds b
# to api and db refuses it unscoped and in another scope.
unbound = tokens.encrypt(Keyring.of({"b": oct_b}, primary="b"), "v", scope="other")
reject("scope outside the key's binding", "per_scope_primaries", unbound, "other", "key_binding",
       lambda: tokens.decrypt(rings["per_scope_primaries"], unbound, scope="other"))
reject("seal-only recipient cannot open", "seal_only", ecdh_scoped, "api", "seal_only",
       lambda: tokens.decrypt(rings["seal_only"], ecdh_scoped, scope="api"))
# The same kid "r" as an oct key: the kind behind the kid picks the
# allowlist, so an ECDH header on an oct kid is refused, and the reverse.
as_oct = Keyring.of({"r": oct_a}, primary="r")
out["keyrings"]["r_as_oct"] = json.loads(as_oct.to_json())
reject("ECDH-ES header on an oct kid", "r_as_oct", ecdh_scoped, "api", "header_rejected",
       lambda: tokens.decrypt(as_oct, ecdh_scoped, scope="api"))
dir_r = tokens.encrypt(as_oct, "v", scope="api")
reject("dir header on an X25519 kid", "x25519_ed25519", dir_r, "api", "header_rejected",
       lambda: tokens.decrypt(full, dir_r, scope="api"))
# A flenc token whose kid names an Ed25519 signer in the reader's keyring.
to_s = tokens.encrypt(Keyring.of({"s": oct_a}, primary="s"), "v")
reject("signing kid names no token key", "x25519_ed25519", to_s, "", "unknown_kid",
       lambda: tokens.decrypt(full, to_s))
reject("signed for another scope", "x25519_ed25519", signed, "cfg", "scope_violation",
       lambda: tokens.verify(full, signed, scope="cfg"))
other_signer = Keyring.of({"a": oct_a}, primary="a", signers={"s": tokens.generate_ed25519_key()},
                          scopes={"s": {"api"}}, signing={"api": "s"})
forged = tokens.sign(other_signer, "x", scope="api")
reject("signed by another key under the same kid", "x25519_ed25519", forged, "api", "bad_signature",
       lambda: tokens.verify(full, forged, scope="api"))
reject("unknown signer", "oct_only", signed, "api", "unknown_signer",
       lambda: tokens.verify(rings["oct_only"], signed, scope="api"))
# alg EdDSA: the polymorphic name is refused by the pinned registry.
header = b64(json.dumps({"alg": "EdDSA", "flenc_scope": "api", "kid": "s"}, separators=(",", ":")).encode())
payload = b64(b'"x"')
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
sk = Ed25519PrivateKey.from_private_bytes(sig.private)
eddsa = "flsig:jws:" + header + "." + payload + "." + b64(sk.sign(f"{header}.{payload}".encode()))
reject("alg EdDSA", "x25519_ed25519", eddsa, "api", "header_rejected",
       lambda: tokens.verify(full, eddsa, scope="api"))

json.dump(out, sys.stdout, indent=2, ensure_ascii=False, sort_keys=True)
sys.stdout.write("\n")
