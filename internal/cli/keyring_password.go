package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/textfmt"
	"github.com/flecht-dev/flecht/internal/ui"
)

// EnvKeyringPasswordFile names the file holding the password of a
// password-protected keyring when --password-file is not given.
const EnvKeyringPasswordFile = "FLECHT_KEYRING_PASSWORD_FILE"

// addPasswordFileFlag adds --password-file beside --keyring: every command
// that loads a keyring opens a protected one with it.
func addPasswordFileFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "password-file", "", "file holding the password of a password-protected keyring; UTF-8, one trailing line break is ignored (env "+EnvKeyringPasswordFile+"; a prompt on a terminal)")
	_ = cmd.MarkFlagFilename("password-file")
}

// passwordFilePath applies flag > environment.
func passwordFilePath(flag string, getenv func(string) string) string {
	if flag != "" {
		return flag
	}
	return getenv(EnvKeyringPasswordFile)
}

// warnExposed warns on errOut when a password file is open to group or
// others.
func warnExposed(errOut io.Writer, passwordFile string) {
	if w := (profile.Password{File: passwordFile}).Warning(); w != "" {
		fmt.Fprintf(errOut, "warning: %s\n", textfmt.Text(w))
	}
}

// keyringPassword is the load option that opens a protected keyring: the
// password file when one is named, else a prompt when standard input is a
// terminal, else a keyring_password error saying what to give. It is asked
// only when the file turns out to be protected, so a plain keyring needs
// none of it.
func keyringPassword(passwordFile string, streams *ui.IOStreams) secret.FileOption {
	if passwordFile != "" {
		read := secret.PasswordFile(passwordFile)
		return secret.WithPassword(func() ([]byte, error) {
			warnExposed(streams.ErrOut, passwordFile)
			return read()
		})
	}
	return secret.WithPassword(func() ([]byte, error) {
		prompt := ui.PasswordPrompt(streams)
		if prompt == nil {
			return nil, &secret.Error{Kind: secret.KindKeyringPassword,
				Detail: "the keyring is password-protected: give --password-file FILE or set " + EnvKeyringPasswordFile}
		}
		return prompt("Keyring password: ")
	})
}

// newKeyringPassword is the password a keyring is newly protected with
// (keys protect, init --protect, import --protect): the password file when
// one is named, else asked twice on a terminal, else a usage error saying
// what to give. A password under secret.MinPasswordBytes is refused before
// it is asked again. The password is never echoed.
func newKeyringPassword(passwordFile string, prompt ui.PromptFunc) ([]byte, error) {
	tooShort := fmt.Errorf("a keyring password must be at least %d bytes", secret.MinPasswordBytes)
	if passwordFile != "" {
		pw, err := secret.PasswordFile(passwordFile)()
		var se *secret.Error
		switch {
		case errors.As(err, &se) && missingFile(passwordFile):
			return nil, exitcode.UsageError(errors.New(secret.ErrorLine(se, nil))) // a missing file, as everywhere
		case errors.As(err, &se):
			return nil, secretLine(se, err)
		}
		if err != nil {
			return nil, err
		}
		if len(pw) < secret.MinPasswordBytes {
			return nil, exitcode.Usagef("%w; the password file %s holds %d", tooShort, passwordFile, len(pw))
		}
		return pw, nil
	}
	if prompt == nil {
		return nil, exitcode.UsageError(errors.New("protecting a keyring needs a password: give --password-file FILE or set " +
			EnvKeyringPasswordFile + " (or run on a terminal to be asked)"))
	}
	pw, err := prompt("New keyring password: ")
	if err != nil {
		return nil, err
	}
	if len(pw) < secret.MinPasswordBytes {
		return nil, exitcode.UsageError(tooShort)
	}
	again, err := prompt("Repeat the password: ")
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(pw, again) {
		return nil, exitcode.UsageError(errors.New("the two passwords differ; nothing was changed"))
	}
	return pw, nil
}

// missingFile reports whether path names nothing (the secret package keeps
// a missing password file apart from a missing keyring, so it does not
// wrap fs.ErrNotExist).
func missingFile(path string) bool {
	_, err := os.Lstat(path)
	return errors.Is(err, fs.ErrNotExist)
}

// secretLine is a keyring error as one line, keeping err's exit code: a
// keyring or password file too large is a usage error (exit 2), as every
// file too large for its kind is.
func secretLine(se *secret.Error, err error) error {
	line := errors.New(secret.ErrorLine(se, nil))
	if exitcode.Code(err) == exitcode.Usage {
		return exitcode.UsageError(line)
	}
	return line
}
