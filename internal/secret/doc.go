// Package secret encrypts attribute values in place, wire-compatible with the
// Python library's flechtwerk.secrets: the same keyring file, the same
// flenc:jwe: tokens, the same acceptance rule and scope ratchet.
//
// A token is "flenc:jwe:" + a compact JWE (RFC 7516) under alg=dir and
// enc=A256GCM with header {"alg":"dir","enc":"A256GCM","kid":…} plus
// "flenc_scope" when the field declares a scope. The keyring is an RFC 7517
// JWK Set of 32-byte oct keys with a top-level "primary".
//
// The JOSE subset is implemented here on crypto/aes and crypto/cipher rather
// than through a general JOSE library: the profile allows exactly one
// algorithm pair, and a general library's header handling (PBES2 iteration
// counts, zip, crit) is the attack surface the acceptance rule exists to
// close. Interop is pinned by vectors minted with the jose npm package
// (testdata/interop).
//
// Every failure is an *Error whose Kind an operator can tell apart; none
// carries key bytes or plaintext.
package secret
