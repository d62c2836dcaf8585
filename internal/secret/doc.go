// Package secret encrypts and signs attribute values in place,
// wire-compatible with Flechtwerk 0.17 (flechtwerk.secrets) and flechtctl
// 0.17: the same keyring file, the same flenc:jwe: and flsig:jws: tokens,
// the same acceptance rules, scope ratchet and key bindings.
//
// # Keyring
//
// A Keyring is an RFC 7517 JWK Set of entries of three kinds (KeyType), one
// kind per kid:
//
//   - TypeOct: {"kty":"oct","k":…}, a 32-byte AES-256 key; seals and opens
//     dir tokens;
//   - TypeX25519: {"kty":"OKP","crv":"X25519","x":…,"d":…}, a recipient:
//     the public half x seals ECDH-ES tokens, the private half d opens them;
//     without d the entry is seal-only;
//   - TypeEd25519: {"kty":"OKP","crv":"Ed25519","x":…,"d":…}, a signer: d
//     (the seed) signs flsig values, x verifies them.
//
// Per key, "flenc_scopes" binds it to scopes (mandatory for OKP keys); top
// level, "primary" (an oct or X25519 kid), "flenc_primaries" {scope: kid}
// (the sealing key per scope) and "flenc_signing" {scope: kid} (an Ed25519
// kid with d, bound to the scope). ParseKeyring validates exactly as
// upstream's Keyring does (see validate), naming the kid or scope; unknown
// members are kept and written back. A private half that does not belong to
// its public half loads (Entry.Mismatch reports it) and is refused at use
// (KindKeyringInvalid naming the kid).
//
// Reading: ParseKeyring (plain), ReadKeyring (plain or protected, with a
// PasswordFunc), OpenProtected, Load (a file; WithPassword, FileLog).
// Describing: Primary, Kids, Has, Type, List, Entries, Entry (kind, halves,
// scopes, roles, mismatch), PrimaryFor, SigningFor, SealingKid(scope),
// SigningKid(scope), Protected. Editing, each returning a validated copy:
// Add, AddKey, Generate(kid, type, scopes), Import(jwk), Promote,
// SetPrimaryFor, ClearPrimaryFor, SetSigningFor, ClearSigningFor, Remove
// (refused while a role names the kid), Protect, Unprotect. Writing:
// JWKS (plain document), PublicJWK(kid) (export), Document (the file
// content, protected when Protected), SealProtected, Save, Create, Lock.
//
// # Password-protected keyring files
//
// A compact JWE over the JWK Set, PBES2-HS512+A256KW + A256GCM, cty
// jwk-set+json, p2c 210000 and a fresh 16-byte p2s on write; passwords under
// 14 bytes refused. A reader accepts exactly that profile, and refuses a p2c
// outside [1000, 300000] before deriving anything. A keyring read protected
// is saved protected again with the same password.
//
// # Tokens
//
// "flenc:jwe:" + a compact JWE (five segments), in two generations:
//
//   - {"alg":"dir","enc":"A256GCM","kid":K[,"flenc_scope":S]}, empty
//     encrypted key, under an oct kid;
//   - {"alg":"ECDH-ES+A256KW","enc":"A256GCM","kid":K[,"flenc_scope":S],
//     "epk":{"crv":"X25519","x":…,"kty":"OKP"}}, a 40-byte AES-KW-wrapped
//     CEK under the Concat-KDF (AlgorithmID "ECDH-ES+A256KW", empty apu/apv,
//     256 bits) of the X25519 agreement, to an X25519 kid.
//
// The plaintext is the canonical JSON of the inner codec's wire value, the
// AAD the protected header's ASCII. With a keyring, the KIND OF THE KEY
// behind the kid picks the profile, never the header: a dir header on an
// X25519 kid or an ECDH-ES header on an oct kid is KindHeaderRejected
// before any crypto; an Ed25519 kid opens nothing (KindUnknownKid, saying
// so); an X25519 kid without d is KindSealOnly. Without a keyring (Inspect,
// InspectHeader, Classify) a header matching either profile exactly is
// accepted. typ and cty are tolerated; zip, crit, apu, apv and any other
// member refused.
//
// The sealing key of a value of scope S is flenc_primaries[S], else primary
// (SealingKid); a bound key refuses a scope outside its binding, and an
// unscoped value is outside every binding (KindKeyBinding). Opening applies,
// after authentication, the scope ratchet (a scoped field reads its own
// scope and unscoped tokens; an unscoped field only unscoped tokens) and
// then the key's binding (KindKeyBinding). Reencrypt re-seals under the
// scope's sealing key: the sweep's step.
//
// # Signed values
//
// "flsig:jws:" + a compact JWS (three segments), header exactly
// {"alg":"Ed25519","flenc_scope":S,"kid":K} (never "EdDSA"; typ and cty
// tolerated as for tokens; crit, b64, jwk, jku, x5* and others refused),
// payload the canonical JSON of the value, a 64-byte signature. Sign uses
// flenc_signing[S] (none: KindNoSigningKey). Verify needs an Ed25519 signer
// kid (KindUnknownSigner), a valid signature (KindBadSignature), the stamped
// scope equal to the field's (no ratchet: KindScopeViolation), and a signer
// bound to it (KindKeyBinding).
//
// # Codecs
//
// ENCRYPTED(inner, opts…) and SIGNED(inner, scope, opts…) implement
// attr.Codec and compose: ENCRYPTED(SIGNED(inner, S), Scope(S)) is the
// recommended form for a secret whose writer must be known. SealedOf and
// SignedOf (which looks through ENCRYPTED) let tools find such fields. A
// SIGNED field refuses an unsigned value (KindUnsigned) unless ReadUnsigned
// is given (a warning and Observer.UnsignedRead per read).
//
// The JOSE primitives (AES key wrap, Concat KDF, PBES2, strict segments)
// live in internal/jose; the profile and every policy live here, on the
// standard library: a general JOSE library's header handling is the attack
// surface the acceptance rules exist to close. Interop is pinned by vectors
// minted by the real flechtctl 0.17.0 (testdata/upstream) and by panva jose
// (testdata/interop).
//
// Every failure is an *Error whose Kind an operator can tell apart (Kinds
// lists them); none carries key bytes, plaintext or a password.
package secret
