package secret

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/flecht-dev/flecht/internal/attr"
)

// The operations on single values that flecht secrets encrypt, decrypt,
// sign, verify, reseal and inspect run, each with the result it prints.

// EncryptResult is what `flecht secrets encrypt` prints.
type EncryptResult struct {
	Token string `json:"token"`
	Kid   string `json:"kid"`             // the key that sealed it: the scope's sealing key
	Alg   string `json:"alg"`             // dir (an oct key) or ECDH-ES+A256KW (an x25519 recipient)
	Scope string `json:"scope,omitempty"` // flenc_scope, when given
}

// DecryptResult is what `flecht secrets decrypt` prints.
type DecryptResult struct {
	Value     json.RawMessage `json:"value"`               // the JSON wire value
	Kid       string          `json:"kid,omitempty"`       // the key that opened it
	Alg       string          `json:"alg,omitempty"`       // the token's generation: dir or ECDH-ES+A256KW
	KeyType   KeyType         `json:"key_type,omitempty"`  // the kind of that key: oct or x25519
	Scope     string          `json:"scope,omitempty"`     // the token's flenc_scope
	Plaintext bool            `json:"plaintext,omitempty"` // read as legacy plaintext (--read-plaintext)
	// Signed: the value is itself a signed value (flsig:jws:), as an
	// ENCRYPTED(SIGNED(…)) field stores it; check it with secrets verify.
	Signed bool `json:"signed,omitempty"`
}

// SignResult is what `flecht secrets sign` prints.
type SignResult struct {
	Token string `json:"token"`
	Kid   string `json:"kid"`   // the signing key: the scope's flenc_signing entry
	Scope string `json:"scope"` // the scope stamped in the header
}

// VerifyResult is what `flecht secrets verify` prints.
type VerifyResult struct {
	Value json.RawMessage `json:"value"` // the JSON value that was signed
	Kid   string          `json:"kid"`   // the signer, authenticated
	Scope string          `json:"scope"` // the scope it was signed for
}

// ResealResult is what `flecht secrets reseal` prints.
type ResealResult struct {
	Token   string `json:"token"`
	Kid     string `json:"kid"`      // the sealing key now: the scope's
	Alg     string `json:"alg"`      // dir or ECDH-ES+A256KW
	FromKid string `json:"from_kid"` // the key that sealed the token given
	Scope   string `json:"scope,omitempty"`
}

// InspectResult is what `flecht secrets inspect` prints: a token's header,
// read without a key and so UNAUTHENTICATED.
type InspectResult struct {
	Authenticated bool   `json:"authenticated"` // always false: nothing was verified
	Envelope      string `json:"envelope"`      // flenc:jwe or flsig:jws
	Alg           string `json:"alg"`           // dir, ECDH-ES+A256KW or Ed25519
	Enc           string `json:"enc,omitempty"` // A256GCM for a flenc token
	Kid           string `json:"kid"`
	Scope         string `json:"scope,omitempty"` // flenc_scope
	EPK           bool   `json:"epk"`             // an ephemeral X25519 public key: sealed to a recipient
	// KeyType is the kind of key the kid must name to open or verify it:
	// oct, x25519 or ed25519.
	KeyType KeyType `json:"key_type"`
	// Header is the protected header as it stands in the token (it passed
	// the acceptance rule, so it holds only the profile's members).
	Header json.RawMessage `json:"header"`
}

// headerKeyType is the kind of key a header asks for.
func headerKeyType(h Header) KeyType {
	switch h.Alg {
	case "dir":
		return TypeOct
	case "ECDH-ES+A256KW":
		return TypeX25519
	}
	return TypeEd25519
}

// protectedHeaderJSON is the decoded first segment of a token that passed the
// acceptance rule.
func protectedHeaderJSON(token string) json.RawMessage {
	compact := strings.TrimPrefix(strings.TrimPrefix(token, Prefix), SignedPrefix)
	seg, _, _ := strings.Cut(compact, ".")
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil || !json.Valid(b) {
		return nil
	}
	return b
}

// EncryptToken seals payload, the canonical JSON of a value, under scope's
// sealing key.
func EncryptToken(kr *Keyring, payload []byte, scope string) (EncryptResult, error) {
	tok, err := kr.Encrypt(payload, scope)
	if err != nil {
		return EncryptResult{}, err
	}
	h, _ := InspectHeader(tok)
	return EncryptResult{Token: tok, Kid: h.Kid, Alg: h.Alg, Scope: scope}, nil
}

// DecryptValue opens token in scope; a value that is no token is read as
// legacy plaintext (plain, the input as a value) only with readPlaintext,
// and the result says so.
func DecryptValue(kr *Keyring, token string, plain any, scope string, readPlaintext bool) (DecryptResult, error) {
	if !IsEncrypted(token) {
		if !readPlaintext {
			return DecryptResult{}, &Error{Kind: KindPlaintext, Scope: scope, Detail: "plaintext in a strict encrypted field"}
		}
		payload, err := attr.Marshal(plain)
		if err != nil {
			return DecryptResult{}, &Error{Kind: KindMalformed, Scope: scope, Detail: "the plaintext value is not valid UTF-8 text"}
		}
		return DecryptResult{Value: payload, Plaintext: true}, nil
	}
	payload, info, err := kr.Open(token, scope)
	if err != nil {
		return DecryptResult{}, err
	}
	v, err := attr.ParseJSON(payload)
	if err != nil {
		return DecryptResult{}, &Error{Kind: KindMalformed, Kid: info.Kid, Scope: scope, Detail: "the token opens, but its payload is not JSON"}
	}
	h, _ := InspectHeader(token)
	inner, _ := v.(string)
	return DecryptResult{Value: payload, Kid: info.Kid, Alg: h.Alg, KeyType: kr.Type(info.Kid), Scope: info.Scope, Signed: IsSigned(inner)}, nil
}

// SignToken signs payload, the canonical JSON of a value, with scope's
// signing key.
func SignToken(kr *Keyring, payload []byte, scope string) (SignResult, error) {
	tok, err := kr.Sign(payload, scope)
	if err != nil {
		return SignResult{}, err
	}
	h, _ := InspectHeader(tok)
	return SignResult{Token: tok, Kid: h.Kid, Scope: h.Scope}, nil
}

// VerifyValue checks a signed value in exactly scope.
func VerifyValue(kr *Keyring, token, scope string) (VerifyResult, error) {
	if !IsSigned(token) {
		detail := "the value is not a flsig: signed value"
		if IsEncrypted(token) {
			detail += "; it is a flenc: token: decrypt it first ('flecht secrets decrypt --string … | flecht secrets verify -')"
		}
		return VerifyResult{}, &Error{Kind: KindUnsigned, Scope: scope, Detail: detail}
	}
	payload, info, err := kr.Verify(token, scope)
	if err != nil {
		return VerifyResult{}, err
	}
	if _, err := attr.ParseJSON(payload); err != nil {
		return VerifyResult{}, &Error{Kind: KindMalformed, Kid: info.Kid, Scope: scope, Detail: "the signature verifies, but the payload is not JSON"}
	}
	return VerifyResult{Value: payload, Kid: info.Kid, Scope: info.Scope}, nil
}

// ResealValue opens token in scope and seals it again under the scope's
// sealing key.
func ResealValue(kr *Keyring, token, scope string) (ResealResult, error) {
	if !IsEncrypted(token) {
		return ResealResult{}, &Error{Kind: KindPlaintext, Scope: scope,
			Detail: "the value is not a flenc: token, so there is nothing to re-seal; 'flecht secrets encrypt' seals a plaintext"}
	}
	from, _ := InspectHeader(token)
	tok, err := kr.Reencrypt(token, scope)
	if err != nil {
		return ResealResult{}, err
	}
	h, _ := InspectHeader(tok)
	return ResealResult{Token: tok, Kid: h.Kid, Alg: h.Alg, FromKid: from.Kid, Scope: h.Scope}, nil
}

// InspectToken reads a token's header without a key: nothing in it is
// authenticated.
func InspectToken(token string) (InspectResult, error) {
	h, err := InspectHeader(token)
	if err != nil {
		var se *Error
		if errors.As(err, &se) && !IsEncrypted(token) && !IsSigned(token) {
			se.Detail = "the value is not a flenc: token nor a flsig: signed value"
		}
		return InspectResult{}, err
	}
	return InspectResult{Envelope: h.Envelope, Alg: h.Alg, Enc: h.Enc, Kid: h.Kid, Scope: h.Scope,
		EPK: h.Alg == "ECDH-ES+A256KW", KeyType: headerKeyType(h), Header: protectedHeaderJSON(token)}, nil
}

// ParseTokenInput reads the token a verb works on: bare, or as it stands
// in a record's JSON (a string in quotes); plain is the input as a value,
// for a legacy plaintext read.
func ParseTokenInput(input []byte) (token string, plain any) {
	raw := bytes.TrimSpace(input)
	token, plain = string(raw), string(raw)
	if v, err := attr.ParseJSON(raw); err == nil {
		plain = v
		if s, ok := v.(string); ok {
			token = s
		} else {
			token = "" // not a string, so not a token
		}
	}
	return token, plain
}

// ParseValueInput reads the value encrypt and sign work on: input parsed
// as JSON, or asString taken as a string (from standard input, one
// trailing newline dropped), and its canonical JSON payload. problem says
// what is wrong with it without quoting it ("" when nothing is).
func ParseValueInput(input []byte, asString, fromStdin bool) (payload []byte, value any, problem string) {
	if asString {
		if fromStdin {
			input = bytes.TrimSuffix(input, []byte("\n"))
		}
		value = string(input)
	} else {
		var err error
		if value, err = attr.ParseJSON(input); err != nil {
			return nil, nil, fmt.Sprintf("JSON_VALUE is not a JSON value (%s); a string needs JSON quotes, e.g. '\"text\"', or --string", attr.Problem(err))
		}
	}
	payload, err := attr.Marshal(value)
	if err != nil {
		return nil, nil, "JSON_VALUE has no canonical JSON form (a string must be valid UTF-8)"
	}
	return payload, value, ""
}
