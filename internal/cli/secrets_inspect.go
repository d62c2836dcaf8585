package cli

import (
	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/show"
	"github.com/flecht-dev/flecht/internal/ui"
)

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
	res, err := secret.InspectToken(token)
	if err != nil {
		return secretFailure(opts, err, nil)
	}
	return opts.Printer().Print(res, func(hu *ui.Human) error { return show.TokenHeader(hu, res) })
}
