// Package jose holds the policy-free JOSE primitives the secret package
// builds its token and keyring-file profiles on: strict base64url segments
// and compact-serialization splitting (RFC 7515/7516), AES Key Wrap (RFC
// 3394, as A*KW in RFC 7518 §4.4), the Concat KDF of ECDH-ES (RFC 7518
// §4.6.2) and the PBES2 key derivation (RFC 7518 §4.8).
//
// Nothing here decides what a header may say or which algorithm a key may
// use: that policy, the acceptance rule, lives in internal/secret. Every
// function works on the standard library alone and returns an error, never
// panics, on any input.
package jose
