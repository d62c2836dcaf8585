package reencrypt

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// Mode is how a field stores its value: the upstream codec that reads it.
type Mode = stagefile.SecretMode

// The modes, as the field syntax names them.
const (
	ModeEncrypted       = stagefile.ModeEncrypted       // ENCRYPTED(inner, scope=S): a flenc token
	ModeSigned          = stagefile.ModeSigned          // SIGNED(inner, scope=S): a flsig value in the clear
	ModeEncryptedSigned = stagefile.ModeEncryptedSigned // ENCRYPTED(SIGNED(inner, scope=S), scope=S)
)

// Field is one declared secret field: a dotted path into a record's JSON
// value, whether it holds a list of values, its scope ("" unscoped) and
// its mode.
type Field struct {
	Path  []string
	List  bool
	Scope string
	Mode  Mode // "" is ModeEncrypted
}

// Name is the field as it is written without its scope: "auth.api_key",
// "tokens[]".
func (f Field) Name() string {
	n := strings.Join(f.Path, ".")
	if f.List {
		n += "[]"
	}
	return n
}

// Spec is the field in the --field syntax: NAME[:scope[:mode]].
func (f Field) Spec() string {
	return stagefile.SecretField{Path: f.Path, List: f.List, Scope: f.Scope, Mode: f.Mode}.Spec()
}

// TargetFlags repeats topics and fields as the --topics and --field flags
// of a suggested scan or sweep command, each shell-quoted.
func TargetFlags(topics []string, fields []Field) string {
	parts := []string{"--topics", textfmt.ShellQuote(strings.Join(topics, ","))}
	for _, f := range fields {
		parts = append(parts, "--field", textfmt.ShellQuote(f.Spec()))
	}
	return strings.Join(parts, " ")
}

// mode is the field's mode, ModeEncrypted when unset.
func (f Field) mode() Mode {
	if f.Mode == "" {
		return ModeEncrypted
	}
	return f.Mode
}

// Encrypted reports whether the field's values are flenc tokens (modes
// encrypted and encrypted-signed).
func (f Field) Encrypted() bool { return f.Mode != ModeSigned }

// Signed reports whether the field's values must carry a signature (modes
// signed and encrypted-signed).
func (f Field) Signed() bool { return f.Mode == ModeSigned || f.Mode == ModeEncryptedSigned }

// ParseFields parses --field values (or a stage file's secret_fields) in the
// stage file's syntax, NAME[:scope[:mode]] with NAME a dotted path, a
// trailing [] for a list of values, and mode encrypted (the default),
// signed or encrypted-signed (stagefile.ParseSecretField). A field named twice, or nested inside another
// declared field, is refused: rewriting the outer value would rewrite the
// inner one behind its back.
func ParseFields(specs []string) ([]Field, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("no secret field given: use --field NAME[:scope[:mode]] (repeatable) or -f stage.yaml with secret_fields")
	}
	out := make([]Field, 0, len(specs))
	for _, s := range specs {
		sf, err := stagefile.ParseSecretField(s)
		if err != nil {
			return nil, fmt.Errorf("--field %w", err)
		}
		for _, seg := range sf.Path {
			if strings.TrimSpace(seg) != seg {
				return nil, fmt.Errorf("--field %q: the name has spaces around a path segment (%q)", s, seg)
			}
		}
		f := Field{Path: sf.Path, List: sf.List, Scope: sf.Scope, Mode: sf.Mode}
		if !utf8.ValidString(f.Scope) || !utf8.ValidString(strings.Join(f.Path, ".")) {
			return nil, fmt.Errorf("--field %q: not valid UTF-8", s)
		}
		for _, g := range out {
			switch {
			case slices.Equal(g.Path, f.Path):
				return nil, fmt.Errorf("--field %q: field %s is declared twice", s, f.Name())
			case isPrefix(g.Path, f.Path) || isPrefix(f.Path, g.Path):
				return nil, fmt.Errorf("--field %q: %s and %s nest inside each other; declare only one of them", s, g.Name(), f.Name())
			}
		}
		out = append(out, f)
	}
	return out, nil
}

func isPrefix(short, long []string) bool {
	return len(short) < len(long) && slices.Equal(short, long[:len(short)])
}

// FieldSpecs renders fields back into their --field form.
func FieldSpecs(fields []Field) []string {
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = f.Spec()
	}
	return out
}

// ResolveTargets is the config topics and secret fields a scan or sweep
// works on: those given, else the stage file's config_topics and
// secret_fields.
func ResolveTargets(topics, specs []string, stageFile string) ([]string, []Field, error) {
	if stageFile != "" {
		st, err := stagefile.Load(stageFile)
		if err != nil {
			return nil, nil, exitcode.UsageError(err)
		}
		if len(topics) == 0 {
			topics = st.ConfigTopics
		}
		if len(specs) == 0 {
			specs = st.SecretFields
		}
	}
	for _, t := range topics {
		if strings.TrimSpace(t) == "" {
			return nil, nil, exitcode.UsageError(errors.New("--topics has an empty topic name"))
		}
	}
	topics = textfmt.Dedupe(topics)
	if len(topics) == 0 {
		return nil, nil, exitcode.UsageError(errors.New("give the config topics: --topics T1,T2 or -f stage.yaml with config_topics"))
	}
	fields, err := ParseFields(specs)
	if err != nil {
		return nil, nil, exitcode.UsageError(err)
	}
	return topics, fields, nil
}
