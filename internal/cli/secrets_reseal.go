package cli

import (
	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/secret"
)

func newCmdSecretsReseal(f *Factory, runF func(*SecretsOptions) error) *cobra.Command {
	cmd, _ := secretsCommand(f, &cobra.Command{
		Use:   "reseal --keyring FILE [--scope S] TOKEN | -",
		Short: "Re-seal one token under its scope's current sealing key",
		Long: `Open TOKEN with the key its kid names and seal the same payload bytes
again under the keyring's sealing key for --scope (its flenc_primaries
entry, else the primary), as flechtctl's reencrypt does: it moves one token
to a new key, between generations (oct ↔ x25519) or into a scope (an
unscoped token read in scope S comes back stamped with S; a scope is never
dropped). The new token goes to standard output.

This is for one value (a runbook, a CI variable, a cross-environment copy);
'flecht secrets reencrypt' is the sweep that rewrites every token stored in
config topics. The rules and failures are decrypt's and encrypt's (exit 4).`,
		Example: `  flecht secrets reseal --keyring keyring.json --scope api_key flenc:jwe:eyJhbGciOi…
  printf '%s' "$OLD_TOKEN" | flecht secrets reseal --scope api_key -o json - | jq -r .token`,
	}, runF, runSecretsReseal)
	return cmd
}

func runSecretsReseal(opts *SecretsOptions) error {
	token, _, err := tokenInput(opts)
	if err != nil {
		return err
	}
	kr, err := secretsKeyring(opts)
	if err != nil {
		return err
	}
	res, err := secret.ResealValue(kr, token, opts.Scope)
	if err != nil {
		return secretFailure(opts, err, kr)
	}
	return printToken(opts, res, res.Token)
}
