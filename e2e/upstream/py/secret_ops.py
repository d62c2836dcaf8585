"""Keyrings, tokens and signed values through flechtctl 0.17, for the interop tests.

    secret_ops.py < {"keyrings": {NAME: {"path": FILE, "password_file": FILE or null}},
                     "ops": [OP, ...]}

prints one JSON object per OP, in order. The ops:

  {"op": "model", "keyring": NAME}
      what upstream loads from the file: {"ok": true, "protected": bool,
      "keys": [{"kid", "kind", "half", "scopes", "roles"}], "show": [the lines
      of `flechtctl keyring show`]}; a file upstream refuses:
      {"ok": false, "kind": "keyring", "error": ..., "message": ...}
  {"op": "encrypt" | "sign" | "encrypt_signed", "keyring", "scope", "value"}
      seal or sign VALUE (JSON text); encrypt_signed signs it, then seals the
      signed value as a string (an ENCRYPTED(SIGNED(...)) field's token):
      {"ok": true, "token": T}
  {"op": "decrypt" | "verify" | "decrypt_verify", "keyring", "scope", "token"}
      open, verify, or open then verify what the token holds:
      {"ok": true, "value": the canonical JSON of the value}

A refusal is {"ok": false, "kind": KIND, "error": TYPE, "cause": TYPE or null}
with KIND one of flecht's error kinds (verdicts.py). Every crypto op runs
twice, through flechtctl's library (which gives the verdict and the kind)
and through its command line, in this process with the arguments a user
types; "cli_agrees" says whether the command did the same (exit 0 with the
same value, or exit 1 with "flechtctl: error:"), and the token an
encrypt or sign returns is the command's. An op with "no_cli": true runs
the library alone (the command line derives a protected file's key again
for every run). Nothing here prints a key or a password.
"""
import contextlib
import io
import json
import sys
from pathlib import Path

from flechtctl import (
    Keyring,
    UnsignedSecretError,
    canonical_json,
    decrypt,
    decrypt_keyring,
    encrypt,
    is_encrypted_keyring,
    is_signed,
    sign,
    verify,
)
from flechtctl.cli import main as flechtctl_main

from verdicts import refusal


_loaded: dict[str, Keyring] = {}


def load(ring: dict) -> Keyring:
    """The keyring in the file, read once per run (a protected file costs a
    key derivation per open; the files do not change during a run)."""
    if ring["path"] not in _loaded:
        _loaded[ring["path"]] = read(ring)
    return _loaded[ring["path"]]


def read(ring: dict) -> Keyring:
    text = Path(ring["path"]).read_text(encoding="utf-8")
    if is_encrypted_keyring(text):
        return decrypt_keyring(text, Path(ring["password_file"]).read_text(encoding="utf-8").removesuffix("\n"))
    return Keyring.from_json(text)


def cli(ring: dict, *argv: str) -> tuple[int, str, str]:
    """flechtctl with argv and the keyring's options, run in this process."""
    args = [*argv[:1], "-k", ring["path"], *password(ring), *argv[1:]]
    return run_cli(args)


def password(ring: dict) -> list[str]:
    return ["--password-file", ring["password_file"]] if ring.get("password_file") else []


def run_cli(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = flechtctl_main(args)
        except SystemExit as e:  # argparse's usage errors
            code = e.code if isinstance(e.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def model(ring: dict) -> dict:
    try:
        keyring = load(ring)
    except Exception as e:  # a file upstream cannot load is the finding
        return {"ok": False, "kind": "keyring", "error": type(e).__name__, "message": str(e)}
    keys = []
    for kid in keyring.kids():
        if kid in keyring.keys:
            kind, half = "oct", "private"
        elif kid in keyring.recipients:
            kind, half = "x25519", "private" if keyring.recipients[kid].private is not None else "public"
        else:
            kind, half = "ed25519", "private" if keyring.signers[kid].private is not None else "public"
        roles = (["primary"] if kid == keyring.primary else []) + \
            [f"primary-for:{s}" for s, k in sorted(keyring.primaries.items()) if k == kid] + \
            [f"signing-for:{s}" for s, k in sorted(keyring.signing.items()) if k == kid]
        keys.append({"kid": kid, "kind": kind, "half": half,
                     "scopes": sorted(keyring.scopes.get(kid, ())), "roles": roles})
    code, out, err = run_cli(["keyring", "show", ring["path"], *password(ring)])
    protected = is_encrypted_keyring(Path(ring["path"]).read_text(encoding="utf-8"))
    return {"ok": True, "protected": protected, "keys": keys, "show": out.splitlines(),
            "show_code": code, "show_error": err.strip() if code else ""}


def canonical(value: object) -> str:
    return canonical_json(value).decode("utf-8")


def make(ring: dict, op: str, scope: str, value_text: str, with_cli: bool) -> dict:
    value = json.loads(value_text)
    try:
        keyring = load(ring)
        if op == "encrypt":
            token = encrypt(keyring, value, scope=scope)
        elif op == "sign":
            token = sign(keyring, value, scope=scope)
        else:
            token = encrypt(keyring, sign(keyring, value, scope=scope), scope=scope)
        result = {"ok": True, "token": token}
    except Exception as e:  # every refusal is a verdict, none ends the run
        result = refusal(e)
    if not with_cli:
        return result
    if op == "encrypt_signed":
        code, out, err = cli(ring, "sign", "--scope", scope, value_text)
        if code == 0:
            code, out, err = cli(ring, "encrypt", "--scope", scope, "--string", out.strip())
    else:
        code, out, err = cli(ring, op, "--scope", scope, value_text)
    result["cli_agrees"] = (code == 0) == result["ok"] and (code == 0 or "flechtctl: error:" in err)
    if code == 0 and result["ok"]:
        result["token"] = out.strip()  # the command's, so that the other side opens what it wrote
    return result


def open_(ring: dict, op: str, scope: str, token: str, with_cli: bool) -> dict:
    try:
        keyring = load(ring)
        if op == "decrypt":
            value = decrypt(keyring, token, scope=scope)
        elif op == "verify":
            value = verify(keyring, token, scope=scope)
        else:
            # As ENCRYPTED(SIGNED(...)) reads it: a value that is not a
            # flsig: string inside the token is unsigned.
            inner = decrypt(keyring, token, scope=scope)
            if not is_signed(inner):
                raise UnsignedSecretError(scope=scope)
            value = verify(keyring, inner, scope=scope)
        result = {"ok": True, "value": canonical(value)}
    except Exception as e:  # every refusal is a verdict, none ends the run
        result = refusal(e)
    if not with_cli:
        return result
    if op == "decrypt_verify":
        code, out, err = cli(ring, "decrypt", "--scope", scope, "--string", token)
        if code == 0:
            code, out, err = cli(ring, "verify", "--scope", scope, out.rstrip("\n"))
    else:
        code, out, err = cli(ring, op, "--scope", scope, token)
    if result["ok"]:
        result["cli_agrees"] = code == 0 and canonical(json.loads(out)) == result["value"]
    else:
        result["cli_agrees"] = code == 1 and "flechtctl: error:" in err
    return result


def main() -> int:
    request = json.load(sys.stdin)
    rings = request["keyrings"]
    for op in request["ops"]:
        ring = rings[op["keyring"]]
        name = op["op"]
        with_cli = not op.get("no_cli", False)
        if name == "model":
            result = model(ring)
        elif name in ("encrypt", "sign", "encrypt_signed"):
            result = make(ring, name, op.get("scope", ""), op["value"], with_cli)
        elif name in ("decrypt", "verify", "decrypt_verify"):
            result = open_(ring, name, op.get("scope", ""), op["token"], with_cli)
        else:
            raise SystemExit(f"unknown op {name!r}")
        print(json.dumps(result, ensure_ascii=False), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
