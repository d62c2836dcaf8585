package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/reencrypt"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/ui"
)

// secretTargets are the topics and secret fields a scan or sweep covers:
// --topics and --field, or the config_topics and secret_fields of -f
// stage.yaml (flags win).
type secretTargets struct {
	Topics    []string
	Fields    []string
	StageFile string
}

func (s *secretTargets) addFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringSliceVar(&s.Topics, "topics", nil, "config topics to read, comma-separated")
	fl.StringArrayVar(&s.Fields, "field", nil, "a secret field, NAME[:scope] (repeatable): NAME a dotted path, NAME[] a list of tokens")
	fl.StringVarP(&s.StageFile, "file", "f", "", "take the config topics and secret fields from this stage file")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
}

// given reports whether any target flag was set.
func (s *secretTargets) given() bool {
	return len(s.Topics) > 0 || len(s.Fields) > 0 || s.StageFile != ""
}

// resolve returns the topics and parsed fields, or a usage error.
func (s *secretTargets) resolve() ([]string, []reencrypt.Field, error) {
	topics, specs := s.Topics, s.Fields
	if s.StageFile != "" {
		st, err := stagefile.Load(s.StageFile)
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
	topics = dedupeStrings(topics)
	if len(topics) == 0 {
		return nil, nil, exitcode.UsageError(errors.New("give the config topics: --topics T1,T2 or -f stage.yaml with config_topics"))
	}
	fields, err := reencrypt.ParseFields(specs)
	if err != nil {
		return nil, nil, exitcode.UsageError(err)
	}
	return topics, fields, nil
}

// targetFlags renders topics and fields as flags for a command to suggest.
func targetFlags(topics []string, fields []reencrypt.Field) string {
	parts := []string{"--topics", shellQuote(strings.Join(topics, ","))}
	for _, f := range fields {
		parts = append(parts, "--field", shellQuote(f.Spec()))
	}
	return strings.Join(parts, " ")
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./:,=@%+-]+$`)

// shellQuote quotes s for a POSIX shell when it needs it ([] would glob).
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// loadOptionalKeyring loads the keyring when a path is given (flag or
// environment); "" gives nil.
func loadOptionalKeyring(io *ui.IOStreams, path, passwordFile string) (*secret.Keyring, error) {
	if path == "" {
		return nil, nil
	}
	kr, err := loadKeyringFile(io.ErrOut, path, keyringPassword(passwordFile, io))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("keyring %s does not exist", path)
	}
	var se *secret.Error
	if errors.As(err, &se) {
		return nil, errors.New(secretLine(se, nil))
	}
	return kr, err
}

// SecretsScanOptions are the inputs of `flecht secrets scan`.
type SecretsScanOptions struct {
	IO           *ui.IOStreams
	Printer      func() *ui.Printer
	Targets      secretTargets
	Keyring      string // optional: --keyring, else FLECHT_KEYRING
	PasswordFile string // a protected keyring's password: --password-file, else FLECHT_KEYRING_PASSWORD_FILE
	FindingsOnly bool
	// Scan reads the topics (a Kafka client from the factory).
	Scan func(ctx context.Context, o reencrypt.ScanOptions) (*reencrypt.ScanReport, error)
}

const secretsScanLong = `Report every secret value stored in config topics, so that a migration or
a key rotation can be checked before anything is removed.

The topics are read (read_committed) to the end offsets captured at the
start, keeping the latest record per partition and key: the compacted view
every reader builds, so a record placed off its key's hash partition counts
where it is. For each secret field (--field NAME[:scope], repeatable; NAME a
dotted path, NAME[] a list of tokens; or -f stage.yaml with secret_fields)
every value is listed with its topic, partition, offset, key and status:

  encrypted   a flenc:jwe: token; its kid and scope come from its header
  plaintext   not a token: a legacy value, or a pasted secret
  corrupt     a flenc: value that does not parse, a record that is not a
              JSON object, or a field path through a duplicated key

Absent and null values are skipped: absence is not a leak. Every token's
header is held against its field's scope ratchet, keyring or not: a token of
another scope, or a scoped token in an unscoped field, is a scope_violation
(the field refuses it whatever the key). With a keyring (--keyring or
` + EnvKeyring + `) every token is also opened through its field's scope, and the
outcome is listed (ok, unknown_kid, tag_mismatch, scope_violation). A
summary counts the values per kid and status.

A plaintext value is never printed: it shows as a length range (powers of
two) and a fingerprint, the first 12 hex digits of an HMAC-SHA-256 of its
JSON text. An unkeyed hash would let anyone with the report confirm a
guessed PIN or password, so the HMAC key is derived from the keyring's
primary key (HKDF, a fixed label) when a keyring is given: the same value
then has the same fingerprint in every run with that keyring, to follow it
across runs, until the primary changes. Without a keyring the key is random
per run, and fingerprints compare within one report only ("fingerprints":
"run" in -o json).

A missing topic is an error, never a clean report. Exit 0 when clean, 4
when any value is plaintext, corrupt, in the wrong scope or (with a
keyring) does not open, so CI can gate on it.

With -o json:
  {"topics", "fields", "fingerprints", "primary", "kids", "clean",
   "partitions": [{"topic", "partition", "end_offset", "records"}],
   "summary": {"records", "values", "by_status", "by_kid": [{"kid", "status",
     "count"}], "by_decrypt", "plaintext", "corrupt", "undecryptable", "findings"},
   "entries": [{"topic", "partition", "offset", "key", "field", "field_scope",
     "status", "kid", "scope", "decrypt", "error": {"kind", "message"},
     "plaintext": {"length_range", "fingerprint"}}]}`

// NewCmdSecretsScan builds `flecht secrets scan`.
func NewCmdSecretsScan(f *Factory, runF func(*SecretsScanOptions) error) *cobra.Command {
	opts := &SecretsScanOptions{IO: f.IO, Printer: f.Printer}
	opts.Scan = f.ScanTopics
	cmd := &cobra.Command{
		Use:   "scan (--topics T,... --field NAME[:scope]... | -f stage.yaml) [--keyring FILE]",
		Short: "Report every secret value in config topics: encrypted (by kid), plaintext, corrupt",
		Long:  secretsScanLong,
		Example: `  flecht secrets scan --topics configs --field api_key:api_key --field 'auth.tokens[]'
  flecht secrets scan -f extractor.yaml --keyring keyring.json --findings-only
  flecht secrets scan -f extractor.yaml -o json | jq '.summary.by_kid'`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Keyring = keyringPath(opts.Keyring, f.Getenv)
			opts.PasswordFile = passwordFilePath(opts.PasswordFile, f.Getenv)
			if runF != nil {
				return runF(opts)
			}
			return runSecretsScan(cmd.Context(), opts)
		},
	}
	opts.Targets.addFlags(cmd)
	addKeyringFlag(cmd, &opts.Keyring)
	addPasswordFileFlag(cmd, &opts.PasswordFile)
	cmd.Flags().BoolVar(&opts.FindingsOnly, "findings-only", false, "list only plaintext, corrupt and undecryptable values (the summary still counts all)")
	return cmd
}

func runSecretsScan(ctx context.Context, opts *SecretsScanOptions) error {
	topics, fields, err := opts.Targets.resolve()
	if err != nil {
		return err
	}
	kr, err := loadOptionalKeyring(opts.IO, opts.Keyring, opts.PasswordFile)
	if err != nil {
		return err
	}
	rep, err := scanWithProgress(ctx, opts.IO, opts.Scan, reencrypt.ScanOptions{Topics: topics, Fields: fields, Keyring: kr})
	if err != nil {
		return err
	}
	if opts.FindingsOnly {
		kept := rep.Entries[:0:0]
		for _, e := range rep.Entries {
			if e.Finding() {
				kept = append(kept, e)
			}
		}
		rep.Entries = kept
	}
	if err := opts.Printer().Print(rep, func(h *ui.Human) error { return printScan(h, rep) }); err != nil {
		return err
	}
	if !rep.Clean {
		return &exitcode.Silent{Code: exitcode.Findings}
	}
	return nil
}

func printScan(h *ui.Human, rep *reencrypt.ScanReport) error {
	withKeyring := rep.Primary != ""
	headers := []string{"topic", "partition", "offset", "key", "field", "status", "kid", "scope"}
	if withKeyring {
		headers = append(headers, "decrypt")
	}
	headers = append(headers, "detail")
	rows := make([][]string, 0, len(rep.Entries))
	for _, e := range rep.Entries {
		status := string(e.Status)
		if e.Finding() {
			status = h.Bad(status)
		}
		row := []string{e.Topic, strconv.Itoa(int(e.Partition)), strconv.FormatInt(e.Offset, 10), displayKey(e.Key, e.KeyBase64), e.Field, status, e.Kid, e.Scope}
		if withKeyring {
			d := string(e.Decrypt)
			if e.Decrypt != "" && e.Decrypt != reencrypt.DecryptOK {
				d = h.Bad(d)
			}
			row = append(row, d)
		}
		row = append(row, entryDetail(e))
		rows = append(rows, row)
	}
	if len(rows) > 0 || rep.Summary.Values == 0 {
		h.Table(headers, rows)
		h.Printf("\n")
	}
	kidRows := make([][]string, len(rep.Summary.ByKid))
	for i, k := range rep.Summary.ByKid {
		kid := k.Kid
		if kid == "" {
			kid = "-"
		}
		if rep.Primary != "" && k.Kid == rep.Primary {
			kid += " (primary)"
		}
		kidRows[i] = []string{kid, string(k.Status), ui.GroupDigits(int64(k.Count))}
	}
	h.Table([]string{"kid", "status", "values"}, kidRows)
	s := rep.Summary
	h.Printf("\n%s values in %s records of %s\n", ui.GroupDigits(int64(s.Values)), ui.GroupDigits(int64(s.Records)), strings.Join(rep.Topics, ", "))
	if rep.Clean {
		h.Printf("%s\n", h.Good("clean: every value is a token that "+map[bool]string{true: "opens", false: "parses"}[withKeyring]))
		return nil
	}
	var parts []string
	if s.Plaintext > 0 {
		parts = append(parts, fmt.Sprintf("%d plaintext", s.Plaintext))
	}
	if s.Corrupt > 0 {
		parts = append(parts, fmt.Sprintf("%d corrupt", s.Corrupt))
	}
	if s.Undecryptable > 0 && withKeyring {
		parts = append(parts, fmt.Sprintf("%d that do not open", s.Undecryptable))
	} else if s.Undecryptable > 0 {
		parts = append(parts, fmt.Sprintf("%d in the wrong scope", s.Undecryptable))
	}
	h.Printf("%s\n", h.Bad("findings: "+strings.Join(parts, ", ")))
	if s.Plaintext > 0 {
		h.Printf("%s\n", h.Faint("a plaintext value in a secret field was disclosed: rotate it at its source, then encrypt it ('flecht secrets reencrypt --encrypt-plaintext')"))
	}
	return nil
}

func entryDetail(e reencrypt.ScanEntry) string {
	switch {
	case e.Plaintext != nil:
		return fmt.Sprintf("%s chars, fingerprint %s", e.Plaintext.LengthRange, e.Plaintext.Fingerprint)
	case e.Error != nil:
		return e.Error.Message
	}
	return ""
}

func displayKey(key, b64 string) string {
	if b64 != "" {
		return "base64:" + b64
	}
	return strconv.Quote(key)[1 : len(strconv.Quote(key))-1]
}

// scanWithProgress runs a scan behind a progress bar (drawn on a terminal
// only).
func scanWithProgress(ctx context.Context, io *ui.IOStreams, scan func(context.Context, reencrypt.ScanOptions) (*reencrypt.ScanReport, error), o reencrypt.ScanOptions) (*reencrypt.ScanReport, error) {
	p := ui.NewProgress(io, "scanning "+strings.Join(o.Topics, ", "))
	o.Planned, o.Read = p.SetTotal, p.Add
	rep, err := scan(ctx, o)
	p.Done()
	return rep, err
}
