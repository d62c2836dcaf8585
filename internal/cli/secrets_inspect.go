package cli

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/ui"
)

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
	KeyType secret.KeyType `json:"key_type"`
	// Header is the protected header as it stands in the token (it passed
	// the acceptance rule, so it holds only the profile's members).
	Header json.RawMessage `json:"header"`
}

func newCmdSecretsInspect(f *Factory, runF func(*SecretsOptions) error) *cobra.Command {
	opts := &SecretsOptions{IO: f.IO, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:   "inspect TOKEN | -",
		Short: "Show the unauthenticated header of a flenc: or flsig: token (no keyring)",
		Long: `Show what the protected header of a token says, without any key:
envelope (flenc:jwe or flsig:jws), alg, enc, kid, scope, whether it carries
an ephemeral public key (epk: sealed to an x25519 recipient), and which kind
of key the kid must name to open or verify it.

NOTHING HERE IS AUTHENTICATED: anyone can write any header. It says which
key a value claims to need (which key a rotation still depends on, which
keyring to look in), never that the value is genuine; only decrypt and
verify establish that.

The header must pass the checks decrypt and verify make before any
cryptography: exactly the members a flenc: token of either generation or a
flsig: signed value may have, with the algorithms they allow (no zip, crit
or unknown members). A token that fails them exits 4 naming the kind
(malformed, header_rejected), which is what a stage would say. TOKEN may be
given bare or in double quotes; "-" reads standard input. -o json prints
the decoded header too.`,
		Example: `  flecht secrets inspect flenc:jwe:eyJhbGciOi…
  kcat -C -t configs -e -f '%s' | jq -r .api_key | flecht secrets inspect -o json - | jq -r .kid`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.Input = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runSecretsInspect(opts)
		},
	}
	return cmd
}

func runSecretsInspect(opts *SecretsOptions) error {
	token, _, err := tokenInput(opts)
	if err != nil {
		return err
	}
	h, err := secret.InspectHeader(token)
	if err != nil {
		var se *secret.Error
		if errors.As(err, &se) && !secret.IsEncrypted(token) && !secret.IsSigned(token) {
			se.Detail = "the value is not a flenc: token nor a flsig: signed value"
		}
		return secretFailure(opts, err, nil)
	}
	res := InspectResult{Envelope: h.Envelope, Alg: h.Alg, Enc: h.Enc, Kid: h.Kid, Scope: h.Scope,
		EPK: h.Alg == "ECDH-ES+A256KW", KeyType: headerKeyType(h), Header: protectedHeader(token)}
	return opts.Printer().Print(res, func(hu *ui.Human) error {
		hu.Printf("%s\n", hu.Warn("UNAUTHENTICATED: read without a key; nothing here is verified until decrypt or verify succeeds"))
		pairs := [][2]string{{"envelope", res.Envelope}, {"alg", res.Alg}}
		if res.Enc != "" {
			pairs = append(pairs, [2]string{"enc", res.Enc})
		}
		pairs = append(pairs, [2]string{"kid", res.Kid})
		scope := "(none: unscoped)"
		if res.Scope != "" {
			scope = res.Scope
		}
		pairs = append(pairs, [2]string{"scope", scope})
		if res.EPK {
			pairs = append(pairs, [2]string{"epk", "an ephemeral X25519 public key (ECDH-ES): sealed to a recipient"})
		}
		var needs string
		switch res.KeyType {
		case secret.TypeOct:
			needs = "an oct key under this kid opens it"
		case secret.TypeX25519:
			needs = "the private half of an x25519 key under this kid opens it"
		default:
			needs = "an ed25519 key under this kid verifies it"
		}
		pairs = append(pairs, [2]string{"needs", needs})
		hu.KV(pairs...)
		return nil
	})
}

// headerKeyType is the kind of key a header asks for.
func headerKeyType(h secret.Header) secret.KeyType {
	switch h.Alg {
	case "dir":
		return secret.TypeOct
	case "ECDH-ES+A256KW":
		return secret.TypeX25519
	}
	return secret.TypeEd25519
}

// protectedHeader is the decoded first segment of a token that passed the
// acceptance rule.
func protectedHeader(token string) json.RawMessage {
	compact := strings.TrimPrefix(strings.TrimPrefix(token, secret.Prefix), secret.SignedPrefix)
	seg, _, _ := strings.Cut(compact, ".")
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil || !json.Valid(b) {
		return nil
	}
	return b
}
