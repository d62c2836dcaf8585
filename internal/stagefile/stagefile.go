// Package stagefile reads the YAML file that describes one stage: its
// identity, topics, state key, policies and the built-in logic it runs.
// Everything is validated before any connection is made, and errors name
// the field and what to write instead.
package stagefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/flecht-dev/flecht/internal/boundedread"
	"github.com/flecht-dev/flecht/internal/profile"
	"github.com/flecht-dev/flecht/internal/statekey"
	"github.com/flecht-dev/flecht/internal/yamldoc"
)

// Kinds of stage.
const (
	KindTransformer = "transformer"
	KindExtractor   = "extractor"
	KindMQTT        = "mqtt"
)

// Invalid-message policies (docs/contract.md §7).
const (
	InvalidCrash = "crash"
	InvalidSkip  = "skip"
	InvalidDLQ   = "dlq"
)

// DefaultStateCleanupDelay is how long a store of a task that left an
// instance stays: long enough for a restarted or briefly moved task to
// find its store, short enough that scaling out frees the disk.
const DefaultStateCleanupDelay = 10 * time.Minute

// MaxStandbyReplicas bounds standby_replicas: each copy costs an
// instance the disk and the changelog reads of the tasks it keeps.
const MaxStandbyReplicas = 5

// DefaultMaxPollRecords bounds one batch, as upstream.
const DefaultMaxPollRecords = 500

// DefaultCommitInterval is how long a transformer task's transaction
// collects records, Kafka Streams' commit.interval.ms under exactly-once.
const DefaultCommitInterval = 100 * time.Millisecond

// MaxCommitInterval keeps a transaction well inside the runner's 60 s
// transaction timeout, past which the coordinator would abort it.
const MaxCommitInterval = 30 * time.Second

// DefaultMaxTransactionRecords caps the input records of one task's
// transaction: what an abort throws away and what waits in memory while
// the previous transaction commits.
const DefaultMaxTransactionRecords = 5_000

// Stage is a parsed, validated stage file.
type Stage struct {
	ApplicationID string   `yaml:"application_id" json:"application_id"`
	Kind          string   `yaml:"kind" json:"kind"`
	InputTopics   []string `yaml:"input_topics,omitempty" json:"input_topics,omitempty"`
	ConfigTopics  []string `yaml:"config_topics,omitempty" json:"config_topics,omitempty"`
	// IntermediateTopics are input topics the transformer also writes
	// (it reads back what it wrote). A stage whose outputs include an
	// input is refused unless the topic is declared here; a replay moves
	// an intermediate topic's offsets to its end instead of reading it
	// again (docs/transformers.md).
	IntermediateTopics []string `yaml:"intermediate_topics,omitempty" json:"intermediate_topics,omitempty"`
	StateKey           string   `yaml:"state_key,omitempty" json:"state_key,omitempty"`
	MaxPollRecords     int      `yaml:"max_poll_records,omitempty" json:"max_poll_records,omitempty"`
	// CommitInterval is how long a transformer task's transaction stays
	// open collecting records (several polls) before it commits.
	CommitInterval Duration `yaml:"commit_interval,omitempty" json:"commit_interval,omitempty"`
	// MaxTransactionRecords caps the input records of one task's
	// transaction: it commits early when the cap is reached.
	MaxTransactionRecords int `yaml:"max_transaction_records,omitempty" json:"max_transaction_records,omitempty"`
	// StandbyReplicas is how many instances besides a task's own keep its
	// state warm (a transformer's standby replicas; docs/operations.md).
	StandbyReplicas int `yaml:"standby_replicas,omitempty" json:"standby_replicas,omitempty"`
	// StateCleanupDelay is how long the store of a task that left an
	// instance stays on its disk (unless the task comes back or is kept
	// as a standby) before it is removed.
	StateCleanupDelay Duration `yaml:"state_cleanup_delay,omitempty" json:"state_cleanup_delay,omitempty"`
	InvalidMessages   string   `yaml:"invalid_messages,omitempty" json:"invalid_messages,omitempty"`
	// Lineage, false, keeps a transformer's lineage headers off its
	// records (docs/contract.md §12); unset, they are on.
	Lineage *Bool `yaml:"lineage,omitempty" json:"lineage,omitempty"`
	// SecretFields declares the config fields that hold secret values, as
	// NAME[:scope[:mode]] with NAME a dotted path, a trailing [] for a
	// list, and mode encrypted (default), signed or encrypted-signed
	// (ParseSecretField).
	SecretFields []string           `yaml:"secret_fields,omitempty" json:"secret_fields,omitempty"`
	PollInterval Duration           `yaml:"poll_interval,omitempty" json:"poll_interval,omitempty"`
	MQTT         *MQTT              `yaml:"mqtt,omitempty" json:"mqtt,omitempty"`
	Transform    *Builtin           `yaml:"transform,omitempty" json:"transform,omitempty"`
	Extract      *Builtin           `yaml:"extract,omitempty" json:"extract,omitempty"`
	Metrics      *Metrics           `yaml:"metrics,omitempty" json:"metrics,omitempty"`
	Template     *statekey.Template `yaml:"-" json:"-"`
	Path         string             `yaml:"-" json:"-"`
	// written holds the settings the file writes ("commit_interval",
	// "transform.memory_limit"): a limit written as 0 is refused with its
	// range, where one left out takes its default.
	written map[string]bool
}

// writtenKeys lists the keys of a mapping and of the mappings directly
// under it, the nested ones as "outer.inner".
func writtenKeys(n *yaml.Node) map[string]bool {
	out := map[string]bool{}
	if n == nil || n.Kind != yaml.MappingNode {
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i].Value, n.Content[i+1]
		out[k] = true
		if v.Kind == yaml.MappingNode {
			for j := 0; j+1 < len(v.Content); j += 2 {
				out[k+"."+v.Content[j].Value] = true
			}
		}
	}
	return out
}

// MQTT configures the bridge's connection (kind: mqtt). An mqtts:// URL
// connects with TLS, verifying the broker against the system roots or the
// private CA in ca_file; cert_file and key_file, both or neither, are the
// client certificate of mutual TLS.
type MQTT struct {
	URL          string `yaml:"url,omitempty" json:"url,omitempty"`
	Username     string `yaml:"username,omitempty" json:"username,omitempty"`
	PasswordEnv  string `yaml:"password_env,omitempty" json:"password_env,omitempty"`
	PasswordFile string `yaml:"password_file,omitempty" json:"password_file,omitempty"`
	CAFile       string `yaml:"ca_file,omitempty" json:"ca_file,omitempty"`
	CertFile     string `yaml:"cert_file,omitempty" json:"cert_file,omitempty"`
	KeyFile      string `yaml:"key_file,omitempty" json:"key_file,omitempty"`
	// InsecureSkipVerify is read only to be refused with advice.
	InsecureSkipVerify bool     `yaml:"insecure_skip_verify,omitempty" json:"-"`
	SessionExpiry      Duration `yaml:"session_expiry,omitempty" json:"session_expiry,omitempty"`
	// ReceiveMaximum is nil when unset (the broker's own window applies).
	ReceiveMaximum *int `yaml:"receive_maximum,omitempty" json:"receive_maximum,omitempty"`
}

// ReceiveMax is the Receive Maximum to send in CONNECT, 0 when unset.
func (m *MQTT) ReceiveMax() int {
	if m == nil || m.ReceiveMaximum == nil {
		return 0
	}
	return *m.ReceiveMaximum
}

// checkConnection refuses what the mqtt: block cannot connect with on its
// own; how it combines with flags, environment and profile is checked
// when `flecht run` resolves the connection.
func (m *MQTT) checkConnection() error {
	if m.InsecureSkipVerify {
		return fmt.Errorf("insecure_skip_verify: %s", profile.ErrNoInsecureMQTT)
	}
	if (m.CertFile == "") != (m.KeyFile == "") {
		return errors.New("cert_file and key_file go together: give both for mutual TLS, or neither")
	}
	if m.URL == "" {
		return nil
	}
	u, err := profile.ParseMQTTURL(m.URL)
	if err != nil {
		return fmt.Errorf("url: %w", err)
	}
	if !profile.MQTTURLSecure(u) && (m.CAFile != "" || m.CertFile != "" || m.KeyFile != "") {
		return errors.New("ca_file, cert_file and key_file need a TLS URL, but url is plain MQTT: write mqtts://host:port to connect with TLS, or remove the files")
	}
	return nil
}

// DefaultSessionExpiry is what an MQTT stage asks for unless told.
const DefaultSessionExpiry = 24 * time.Hour

// MaxSessionExpiry is the longest session expiry MQTT 5 can carry (a u32
// of seconds).
const MaxSessionExpiry = (1<<32 - 1) * time.Second

// Metrics configures the Prometheus endpoint.
type Metrics struct {
	Listen string            `yaml:"listen,omitempty" json:"listen,omitempty"`
	Labels map[string]string `yaml:"labels,omitempty" json:"labels,omitempty"`
}

// Builtin names built-in stage logic and holds its own options, decoded by
// the builtin itself (strictly) with DecodeOptions. A transformer's
// transform: may instead name a WebAssembly module (Module).
type Builtin struct {
	Name string `yaml:"builtin" json:"builtin"`
	// Module, when set, is the team's own transform logic: transform:
	// {module: FILE.wasm, ...} instead of a builtin.
	Module  *Module   `yaml:"-" json:"-"`
	Options yaml.Node `yaml:"-" json:"-"`
	options map[string]any
}

// UnmarshalYAML keeps every key but builtin as the builtin's options; a
// mapping with a module: key is a Module, decoded strictly.
func (b *Builtin) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: expected a mapping with a builtin: or a module: key", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "module" {
			return b.unmarshalModule(n)
		}
	}
	rest := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n.Line, Column: n.Column}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Value == "builtin" {
			if err := v.Decode(&b.Name); err != nil {
				return err
			}
			continue
		}
		rest.Content = append(rest.Content, k, v)
	}
	b.Options = *rest
	var m map[string]any
	if err := rest.Decode(&m); err != nil {
		return err
	}
	b.options = m
	return nil
}

// MarshalJSON shows the builtin with its options, or the module, for
// `-o json` views.
func (b *Builtin) MarshalJSON() ([]byte, error) {
	if b.Module != nil {
		return json.Marshal(b.Module)
	}
	out := map[string]any{"builtin": b.Name}
	for k, v := range b.options {
		out[k] = v
	}
	return json.Marshal(out)
}

// DecodeOptions decodes the builtin's options into v (a pointer to a
// struct holding its defaults), rejecting unknown keys so a typo is an
// error rather than a silent default. Errors name the stage file's lines.
func (b *Builtin) DecodeOptions(v any) error {
	if len(b.Options.Content) == 0 {
		return nil
	}
	if err := noOptions(b.Name, &b.Options, reflect.TypeOf(v)); err != nil {
		return err
	}
	if err := unknownKeys(&b.Options, reflect.TypeOf(v)); err != nil {
		return fmt.Errorf("builtin %s: %w", boundedread.Quote(b.Name), err)
	}
	if err := b.Options.Decode(v); err != nil {
		return fmt.Errorf("builtin %s: %w", boundedread.Quote(b.Name), err)
	}
	return nil
}

// LineageOn says whether a transformer stamps the lineage headers on
// what it writes: unless the stage file says lineage: false.
func (s *Stage) LineageOn() bool { return s.Lineage == nil || bool(*s.Lineage) }

// Bool is a setting written true or false, and nothing else: YAML's
// quoted "true" or a yes is refused rather than guessed at.
type Bool bool

// UnmarshalYAML takes a plain true or false.
func (b *Bool) UnmarshalYAML(n *yaml.Node) error {
	var v bool
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: a list or a mapping where true or false belongs", n.Line)
	}
	if n.ShortTag() != "!!bool" || n.Decode(&v) != nil {
		return fmt.Errorf("line %d: %s is not true or false (write either, unquoted)", n.Line, boundedread.Quote(n.Value))
	}
	*b = Bool(v)
	return nil
}

// Duration is a time.Duration written as "24h", "500ms".
type Duration time.Duration

// UnmarshalYAML parses Go duration syntax.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return fmt.Errorf("line %d: a duration like 30s or 24h", n.Line)
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: %s is not a duration like 30s or 24h", n.Line, boundedread.Quote(s))
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML prints the duration in Go syntax.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// MarshalJSON prints the duration in Go syntax.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Duration(d).String() + `"`), nil
}

// File is what a stage file is to a read: a commented stage fits 4 MiB
// many times over.
var File = boundedread.Kind{Name: "stage file", Limit: 4 << 20}

// Load reads and validates a stage file.
func Load(path string) (*Stage, error) {
	data, err := File.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("stage file %s: %w", path, err)
	}
	s.Path = path
	if s.Transform != nil && s.Transform.Module != nil {
		s.Transform.Module.resolve(path)
	}
	return s, nil
}

// Kafka's rule for topic names, which also bounds application ids (they
// become topic names and transactional ids).
var topicName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// ValidTopicName reports whether Kafka accepts t as a topic name.
func ValidTopicName(t string) bool { return topicName.MatchString(t) && t != "." && t != ".." }

// ValidApplicationID reports whether id can name a stage: its changelog
// must be a valid topic name, and id must be one plain path element, since
// it names the stage's state directory (JoinName).
func ValidApplicationID(id string) bool {
	return ValidTopicName(ChangelogTopic(id)) && checkPathElement(id) == nil
}

// CheckTopicName says why Kafka would refuse t as a topic name, or nil.
func CheckTopicName(t string) error {
	if ValidTopicName(t) {
		return nil
	}
	return fmt.Errorf("%s is not a valid Kafka topic name: use letters, digits, '.', '_' and '-', at most 249 characters (a name other than . and ..)", boundedread.Quote(t))
}

// CheckApplicationID says why id cannot name a stage, or nil.
func CheckApplicationID(id string) error {
	if ValidApplicationID(id) {
		return nil
	}
	return fmt.Errorf("application id %s: use letters, digits, '.', '_' and '-', at most %d characters, and not . or .. (it names topics, transactional IDs and the state directory)",
		boundedread.Quote(id), 249-len(ChangelogTopic("")))
}

// JoinName joins root and a name that becomes a path (an application id
// naming its state directory, a partition number its store), refusing a
// name that is not one plain path element: an empty name, . or .., one
// with a separator, or a root that is empty (the name would land in the
// working directory). Every path made from a name goes through it, so no
// name reaches outside its root.
func JoinName(root, name string) (string, error) {
	if root == "" {
		return "", fmt.Errorf("no directory to put %s in", boundedread.Quote(name))
	}
	if err := checkPathElement(name); err != nil {
		return "", err
	}
	return filepath.Join(root, name), nil
}

func checkPathElement(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`+"\x00") || !filepath.IsLocal(name) {
		return fmt.Errorf("%s is not a plain file name (not . or .., no separators), so it cannot name a directory", boundedread.Quote(name))
	}
	return nil
}

// Prometheus label names, minus the ones flecht's metrics add themselves.
var (
	labelName      = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	reservedLabels = map[string]bool{"topic": true, "partition": true, "reason": true, "outcome": true, "kid": true, "scope": true}
)

// Parse decodes a stage file strictly and validates it.
func Parse(data []byte) (*Stage, error) {
	s := &Stage{}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty stage file")
		}
		return nil, err
	}
	// Unknown keys are refused with the line, the keys that are known and
	// the nearest of them: a typo must not pass for a default.
	if len(doc.Content) > 0 {
		if err := checkKeys(doc.Content[0], reflect.TypeOf(s), "field"); err != nil {
			return nil, err
		}
	}
	if err := doc.Decode(s); err != nil {
		return nil, err
	}
	if len(doc.Content) > 0 {
		s.written = writtenKeys(doc.Content[0])
	}
	// A second document would be ignored: a stage pasted after --- must
	// not pass for one that runs. An empty one (a trailing ---) holds
	// nothing to ignore.
	if line, err := yamldoc.SecondDocument(dec); err != nil {
		return nil, err
	} else if line > 0 {
		return nil, fmt.Errorf("line %d: a second YAML document starts here (after ---): a stage file holds one stage; give each stage its own file", line)
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	if s.Transform != nil && s.Transform.Module != nil {
		s.Transform.Module.resolve("") // Load resolves it against the file's directory
	}
	return s, nil
}

// maxProblem clips a problem whose text comes from elsewhere (a state_key
// error quotes the template whole).
const maxProblem = 512

func (s *Stage) validate() error {
	var problems []string
	bad := func(format string, args ...any) {
		p := fmt.Sprintf(format, args...)
		if len(p) > maxProblem {
			p = strings.ToValidUTF8(p[:maxProblem], "") + "…"
		}
		problems = append(problems, p)
	}

	switch {
	case s.ApplicationID == "":
		bad("application_id is required")
	case !ValidApplicationID(s.ApplicationID):
		bad("application_id %s: use letters, digits, '.', '_' and '-', and not . or .. (it names topics, transactional ids and the state directory)", boundedread.Quote(s.ApplicationID))
	}
	for _, t := range append(append([]string{}, s.InputTopics...), s.ConfigTopics...) {
		if err := CheckTopicName(t); err != nil {
			bad("topic %v", err)
		}
	}
	if dup := duplicate(s.InputTopics); dup != "" {
		bad("input_topics lists %s twice", boundedread.Quote(dup))
	}
	if dup := duplicate(s.ConfigTopics); dup != "" {
		bad("config_topics lists %s twice", boundedread.Quote(dup))
	}
	if dup := duplicate(s.IntermediateTopics); dup != "" {
		bad("intermediate_topics lists %s twice", boundedread.Quote(dup))
	}
	for _, t := range s.IntermediateTopics {
		if !slices.Contains(s.InputTopics, t) {
			bad("intermediate_topics names %s, which is not in input_topics: an intermediate topic is an input the stage also writes; add it to input_topics or remove it", boundedread.Quote(t))
		}
	}
	switch {
	case s.MaxPollRecords == 0 && !s.written["max_poll_records"]:
		s.MaxPollRecords = DefaultMaxPollRecords
	case s.MaxPollRecords <= 0:
		bad("max_poll_records %d: use 1 or more (default %d)", s.MaxPollRecords, DefaultMaxPollRecords)
	}
	switch ci := time.Duration(s.CommitInterval); {
	case ci == 0 && !s.written["commit_interval"]:
		s.CommitInterval = Duration(DefaultCommitInterval)
	case ci < time.Millisecond || ci > MaxCommitInterval:
		bad("commit_interval %s: use 1ms to %s (default %s)", ci, MaxCommitInterval, DefaultCommitInterval)
	}
	switch {
	case s.MaxTransactionRecords == 0 && !s.written["max_transaction_records"]:
		s.MaxTransactionRecords = DefaultMaxTransactionRecords
	case s.MaxTransactionRecords <= 0:
		bad("max_transaction_records %d: use 1 or more (default %d)", s.MaxTransactionRecords, DefaultMaxTransactionRecords)
	}
	if s.PollInterval <= 0 && s.written["poll_interval"] {
		bad("poll_interval %s: use a positive duration such as 1m", time.Duration(s.PollInterval))
	}
	switch s.InvalidMessages {
	case "":
		s.InvalidMessages = InvalidCrash
	case InvalidCrash, InvalidSkip, InvalidDLQ:
	default:
		bad("invalid_messages %s: use crash, skip or dlq", boundedread.Quote(s.InvalidMessages))
	}
	if s.StateKey == "" {
		s.StateKey = statekey.Default
	}
	if t, err := statekey.Parse(s.StateKey); err != nil {
		bad("%v", err)
	} else {
		s.Template = t
	}
	for _, f := range s.SecretFields {
		if _, err := ParseSecretField(f); err != nil {
			bad("secret_fields: %v", err)
		}
	}

	switch s.Kind {
	case KindTransformer:
		if len(s.InputTopics) == 0 {
			bad("a transformer needs input_topics")
		}
		switch {
		case s.Transform == nil || (s.Transform.Name == "" && s.Transform.Module == nil):
			bad("a transformer needs transform: {builtin: NAME, ...} or transform: {module: FILE.wasm, output_topics: [...]}")
		case s.Transform.Module != nil:
			for _, p := range s.Transform.Module.problems(s.written) {
				bad("transform: %s", p)
			}
		}
		if s.Extract != nil || s.MQTT != nil {
			bad("extract: and mqtt: belong to extractor and mqtt stages, not a transformer")
		}
		if s.StandbyReplicas < 0 || s.StandbyReplicas > MaxStandbyReplicas {
			bad("standby_replicas %d: use 0 to %d (default 0: a task that moves restores from its changelog)", s.StandbyReplicas, MaxStandbyReplicas)
		}
		switch d := time.Duration(s.StateCleanupDelay); {
		case d == 0 && !s.written["state_cleanup_delay"]:
			s.StateCleanupDelay = Duration(DefaultStateCleanupDelay)
		case d < time.Second:
			bad("state_cleanup_delay %s: use 1s or more (default %s)", d, DefaultStateCleanupDelay)
		}
	case KindExtractor, KindMQTT:
		if len(s.InputTopics) > 0 {
			bad("an %s reads config_topics only; remove input_topics", s.Kind)
		}
		if len(s.ConfigTopics) == 0 {
			bad("an %s needs config_topics", s.Kind)
		}
		switch {
		case s.Extract != nil && s.Extract.Module != nil:
			bad("extract: runs a builtin; a WebAssembly module runs in a transformer (kind: transformer, transform: {module: ...})")
		case s.Extract == nil || s.Extract.Name == "":
			bad("an %s needs extract: {builtin: NAME, ...}", s.Kind)
		}
		if s.Transform != nil {
			bad("transform: belongs to a transformer")
		}
		if s.written["state_cleanup_delay"] {
			bad("state_cleanup_delay: belongs to a transformer")
		}
		if s.written["standby_replicas"] {
			bad("standby_replicas: belongs to a transformer (an %s's tokens restore from their changelog when they move)", s.Kind)
		}
		if s.Lineage != nil {
			bad("lineage: belongs to a transformer (a source's records come from outside Kafka)")
		}
		if s.Kind == KindMQTT {
			if s.MQTT == nil {
				s.MQTT = &MQTT{}
			}
			switch se := time.Duration(s.MQTT.SessionExpiry); {
			case se == 0 && !s.written["mqtt.session_expiry"]:
				s.MQTT.SessionExpiry = Duration(DefaultSessionExpiry)
			case se < time.Second || se > MaxSessionExpiry:
				bad("mqtt: session_expiry %s: use 1s to %s (MQTT's range; default %s): the broker keeps the bridge's messages that long while it is away", se, MaxSessionExpiry, DefaultSessionExpiry)
			}
			if s.MQTT.PasswordEnv != "" && s.MQTT.PasswordFile != "" {
				bad("mqtt: set password_env or password_file, not both")
			}
			if r := s.MQTT.ReceiveMaximum; r != nil && (*r < 1 || *r > 65535) {
				bad("mqtt: receive_maximum %d: use 1 to 65535 (MQTT 5's range), or leave it out for the broker's own window", *r)
			}
			if err := s.MQTT.checkConnection(); err != nil {
				bad("mqtt: %v", err)
			}
		} else if s.MQTT != nil {
			bad("mqtt: belongs to an mqtt stage")
		}
	case "":
		bad("kind is required: transformer, extractor or mqtt")
	default:
		bad("kind %s: use transformer, extractor or mqtt", boundedread.Quote(s.Kind))
	}
	if s.Metrics != nil {
		for name := range s.Metrics.Labels {
			if !labelName.MatchString(name) || reservedLabels[name] {
				bad("metrics.labels: %s is not a usable label name (letters, digits, _; not one of topic, partition, reason, outcome, kid, scope)", boundedread.Quote(name))
			}
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// SessionExpiry is the MQTT session expiry the stage asks for.
func (s *Stage) SessionExpiry() time.Duration {
	if s.MQTT == nil || s.MQTT.SessionExpiry == 0 {
		return DefaultSessionExpiry
	}
	return time.Duration(s.MQTT.SessionExpiry)
}

// ChangelogTopic is the stage's changelog topic name (docs/contract.md §1).
func (s *Stage) ChangelogTopic() string { return ChangelogTopic(s.ApplicationID) }

// ChangelogTopic names the changelog of an application (docs/contract.md §1).
func ChangelogTopic(applicationID string) string { return applicationID + "-changelog" }

// TransactionalID names the producer of task or token n (docs/contract.md §1).
func TransactionalID(applicationID string, n int32) string {
	return fmt.Sprintf("%s-%d", applicationID, n)
}

// DLQTopic names the dead-letter topic of a source topic (docs/contract.md §1).
func DLQTopic(topic string) string { return topic + ".dlq" }

// SecretMode is how a secret field is stored, after the upstream codec
// that reads it.
type SecretMode string

const (
	// ModeEncrypted: ENCRYPTED(inner, scope=S), a flenc:jwe: token (the
	// default).
	ModeEncrypted SecretMode = "encrypted"
	// ModeSigned: SIGNED(inner, scope=S), a flsig:jws: signed value in
	// the clear. S is required.
	ModeSigned SecretMode = "signed"
	// ModeEncryptedSigned: ENCRYPTED(SIGNED(inner, scope=S), scope=S), a
	// flenc:jwe: token whose payload is a flsig:jws: signed value, upstream's
	// recommended composition. S is required.
	ModeEncryptedSigned SecretMode = "encrypted-signed"
)

// SecretModes lists the modes in the order help text names them.
var SecretModes = []SecretMode{ModeEncrypted, ModeSigned, ModeEncryptedSigned}

func secretMode(s string) (SecretMode, bool) {
	for _, m := range SecretModes {
		if string(m) == s {
			return m, true
		}
	}
	return "", false
}

// SecretField is one declared secret field.
type SecretField struct {
	Path  []string // dotted path into the value
	List  bool     // the field holds a list of tokens
	Scope string
	Mode  SecretMode // never empty after ParseSecretField
}

// ParseSecretField parses NAME[:scope[:mode]], NAME a dotted path, NAME[] a
// list, mode one of encrypted (the default), signed or encrypted-signed.
//
// A scope may hold colons, so the mode is read only from a third segment
// or later, and only when that last segment is a mode word: "k:a:b" is
// scope "a:b", "k:a:signed" is scope "a" signed, and a scope that itself
// ends in a mode word is written with its mode ("k:a:signed:encrypted").
// "k:signed" stays scope "signed", as before modes existed.
func ParseSecretField(s string) (SecretField, error) {
	name, scope, _ := strings.Cut(s, ":")
	f := SecretField{Scope: scope, Mode: ModeEncrypted}
	if i := strings.LastIndexByte(scope, ':'); i >= 0 {
		if m, ok := secretMode(scope[i+1:]); ok {
			f.Scope, f.Mode = scope[:i], m
		}
	}
	if n, ok := strings.CutSuffix(name, "[]"); ok {
		name, f.List = n, true
	}
	if name == "" {
		return f, fmt.Errorf("%s: empty field name", boundedread.Quote(s))
	}
	f.Path = strings.Split(name, ".")
	for _, seg := range f.Path {
		if seg == "" {
			return f, fmt.Errorf("%s: empty segment in dotted path", boundedread.Quote(s))
		}
	}
	if f.Mode != ModeEncrypted && f.Scope == "" {
		return f, fmt.Errorf("%s: a %s field needs a scope (NAME:SCOPE:%s): a signature always names the scope it vouches for", boundedread.Quote(s), f.Mode, f.Mode)
	}
	return f, nil
}

// Spec renders the field back in the syntax ParseSecretField reads, as
// short as it parses back the same: the mode only when it is not
// encrypted, or when the scope would otherwise be misread.
func (f SecretField) Spec() string {
	n := strings.Join(f.Path, ".")
	if f.List {
		n += "[]"
	}
	mode := f.Mode
	if mode == ModeEncrypted || mode == "" {
		mode = ""
		if i := strings.LastIndexByte(f.Scope, ':'); i >= 0 {
			if _, ok := secretMode(f.Scope[i+1:]); ok {
				mode = ModeEncrypted
			}
		}
		if mode == "" {
			if f.Scope == "" {
				return n
			}
			return n + ":" + f.Scope
		}
	}
	return n + ":" + f.Scope + ":" + string(mode)
}

func duplicate(ss []string) string {
	seen := map[string]bool{}
	for _, s := range ss {
		if seen[s] {
			return s
		}
		seen[s] = true
	}
	return ""
}
