package reencrypt

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/flecht-dev/flecht/internal/stagefile"
)

// Field is one declared secret field: a dotted path into a record's JSON
// value, whether it holds a list of tokens, and its scope ("" unscoped).
type Field struct {
	Path  []string
	List  bool
	Scope string
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

// Spec is the field in the --field syntax: NAME[:scope].
func (f Field) Spec() string {
	if f.Scope == "" {
		return f.Name()
	}
	return f.Name() + ":" + f.Scope
}

// ParseFields parses --field values (or a stage file's secret_fields) in the
// stage file's syntax, NAME[:scope] with NAME a dotted path and a trailing []
// for a list of tokens. A field named twice, or nested inside another
// declared field, is refused: rewriting the outer value would rewrite the
// inner one behind its back.
func ParseFields(specs []string) ([]Field, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("no secret field given: use --field NAME[:scope] (repeatable) or -f stage.yaml with secret_fields")
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
		f := Field{Path: sf.Path, List: sf.List, Scope: sf.Scope}
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
