package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/ui"
)

// EnvKeyringPasswordFile names the file holding the password of a
// password-protected keyring when --password-file is not given.
const EnvKeyringPasswordFile = "FLECHT_KEYRING_PASSWORD_FILE"

// addPasswordFileFlag adds --password-file beside --keyring: every command
// that loads a keyring opens a protected one with it.
func addPasswordFileFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "password-file", "", "file holding the password of a password-protected keyring; one trailing newline is ignored (env "+EnvKeyringPasswordFile+"; a prompt on a terminal)")
	_ = cmd.MarkFlagFilename("password-file")
}

// passwordFilePath applies flag > environment.
func passwordFilePath(flag string, getenv func(string) string) string {
	if flag != "" {
		return flag
	}
	return getenv(EnvKeyringPasswordFile)
}

// keyringPassword is the load option that opens a protected keyring: the
// password file when one is named, else a prompt when standard input is a
// terminal, else a keyring_password error saying what to give. It is asked
// only when the file turns out to be protected, so a plain keyring needs
// none of it.
func keyringPassword(passwordFile string, streams *ui.IOStreams) secret.FileOption {
	if passwordFile != "" {
		return secret.WithPassword(secret.PasswordFile(passwordFile))
	}
	return secret.WithPassword(func() ([]byte, error) {
		in, ok := streams.In.(*os.File)
		if !streams.IsStdinTTY() || !ok {
			return nil, &secret.Error{Kind: secret.KindKeyringPassword,
				Detail: "the keyring is password-protected: give --password-file FILE or set " + EnvKeyringPasswordFile}
		}
		fmt.Fprint(streams.ErrOut, "Keyring password: ")
		pw, err := term.ReadPassword(int(in.Fd()))
		fmt.Fprintln(streams.ErrOut)
		if err != nil {
			return nil, fmt.Errorf("reading the keyring password: %w", err)
		}
		return pw, nil
	})
}
