package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/secret"
)

// requireScope makes --scope mandatory, with usage as its help: a
// signature always names the compartment it vouches for.
func requireScope(cmd *cobra.Command, opts *SecretsOptions, usage string) {
	inner := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if opts.Scope == "" {
			return exitcode.UsageError(errors.New("--scope S is required: a signed value always names the scope it is signed for"))
		}
		return inner(c, args)
	}
	cmd.Flags().Lookup("scope").Usage = usage
}

func newCmdSecretsSign(f *Factory, runF func(*SecretsOptions) error) *cobra.Command {
	cmd, opts := secretsCommand(f, &cobra.Command{
		Use:   "sign --keyring FILE --scope S [--string] JSON_VALUE | -",
		Short: "Sign a JSON value into a flsig:jws: value with the scope's signing key",
		Long: `Sign JSON_VALUE with the keyring's signing key for scope S (its
flenc_signing entry: an ed25519 key holding its private half, bound to S)
and print the signed value: "flsig:jws:" + a compact JWS whose header is
{"alg":"Ed25519","flenc_scope":S,"kid":KID} and whose payload is the value's
canonical JSON, as a SIGNED field of Flechtwerk 0.17 stores it. The value
is readable by anyone; the signature proves who wrote it and for which
scope. For a secret, seal the signed value too: pass it, as a JSON string,
to 'flecht secrets encrypt --scope S' (an ENCRYPTED(SIGNED(…)) field).

JSON_VALUE is the value as JSON, or with --string a raw string; "-" reads
standard input. A scope without a signing key fails with no_signing_key
(exit 4); add one with
  flecht keys add --type ed25519 --kid K --scope S --signing-for S
or make a key the keyring holds its signer with 'flecht keys signing'.`,
		Example: `  flecht secrets sign --keyring keyring.json --scope api '"https://hooks.example/7"'
  flecht secrets sign --scope api --string - < endpoint.txt
  flecht secrets sign --scope api -o json '{"limit":10}' | jq -r .token | jq -R . | flecht secrets encrypt --scope api -`,
	}, runF, runSecretsSign)
	cmd.Flags().BoolVar(&opts.String, "string", false, "take the value as a raw string, not as JSON")
	requireScope(cmd, opts, "the scope to sign the value for (required): its signing key signs, and the value verifies only in this scope")
	return cmd
}

func runSecretsSign(opts *SecretsOptions) error {
	payload, _, err := valueInput(opts)
	if err != nil {
		return err
	}
	kr, err := secretsKeyring(opts)
	if err != nil {
		return err
	}
	res, err := secret.SignToken(kr, payload, opts.Scope)
	if err != nil {
		return secretFailure(opts, err, kr)
	}
	return printToken(opts, res, res.Token)
}

func newCmdSecretsVerify(f *Factory, runF func(*SecretsOptions) error) *cobra.Command {
	cmd, opts := secretsCommand(f, &cobra.Command{
		Use:   "verify --keyring FILE --scope S [--string] TOKEN | -",
		Short: "Verify a flsig:jws: value and print it with its signer",
		Long: `Verify the signed value TOKEN as a SIGNED field of scope S reads it, and
print the value (--string: a string value raw, without quotes); standard
error gets the signer's kid, which -o json has as kid. TOKEN may be given
bare or in double quotes as it stands in a record's JSON; "-" reads standard
input.

The rules are a stage's: the header is exactly alg Ed25519 with a kid and a
scope (no EdDSA, no key-carrying members), checked before any cryptography;
the kid must name an ed25519 key of the keyring (unknown_signer); the
signature must verify under its public half (bad_signature); the scope
stamped in the value must be S exactly (scope_violation: where a field of
scope S also opens unscoped tokens, a signed value always has one scope);
the signer must be bound to S (key_binding). A value that is not a flsig:
value is unsigned. Each failure exits 4 naming its kind, without echoing
the input.`,
		Example: `  flecht secrets verify --keyring keyring.json --scope api flsig:jws:eyJhbGciOi…
  flecht secrets verify --scope api -o json - < value.txt | jq -r .kid`,
	}, runF, runSecretsVerify)
	cmd.Flags().BoolVar(&opts.String, "string", false, "print a string value raw, without JSON quotes")
	requireScope(cmd, opts, "the scope the value must be signed for (required; a value signed for any other scope is refused)")
	return cmd
}

func runSecretsVerify(opts *SecretsOptions) error {
	token, _, err := tokenInput(opts)
	if err != nil {
		return err
	}
	kr, err := secretsKeyring(opts)
	if err != nil {
		return err
	}
	res, err := secret.VerifyValue(kr, token, opts.Scope)
	if err != nil {
		return secretFailure(opts, err, kr)
	}
	return printSecretValue(opts, res, res.Value, func(w io.Writer) {
		fmt.Fprintf(w, "verified: signed by kid %q for scope %q\n", secret.Clip(res.Kid), secret.Clip(res.Scope))
	})
}
