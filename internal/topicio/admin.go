package topicio

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/acl"
	"github.com/flecht-dev/flecht/internal/exitcode"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/replay"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/stagefile"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// CreateResult is what `flecht topic create` did: what `flecht topic
// create` prints.
type CreateResult struct {
	Topics []Created `json:"topics"`
}

// Created is one topic: created now, or there already.
type Created struct {
	Topic      string            `json:"topic"`
	Role       string            `json:"role,omitempty"` // input, output, config with -f
	Partitions int               `json:"partitions"`
	Created    bool              `json:"created"`
	Configs    map[string]string `json:"configs,omitempty"`
}

// ToCreate is what the arguments of `flecht topic create` ask for,
// checked: the topics given, or those a stage file reads and writes.
func ToCreate(args []string, stageFile string, partitions int, compact bool, configs []string) ([]Created, error) {
	if partitions < 1 || partitions > 1<<20 {
		return nil, exitcode.Usagef("--partitions %d: want 1 or more", partitions)
	}
	cfg := map[string]string{}
	for _, c := range configs {
		k, v, ok := strings.Cut(c, "=")
		if !ok || k == "" {
			return nil, exitcode.Usagef("--config %q: want key=value", c)
		}
		cfg[k] = v
	}
	if compact {
		cfg["cleanup.policy"] = "compact"
	}
	switch {
	case stageFile != "" && len(args) > 0:
		return nil, exitcode.Usagef("give topics or -f stage.yaml, not both")
	case stageFile == "" && len(args) == 0:
		return nil, exitcode.Usagef("give the topics to create, or -f stage.yaml")
	}
	var out []Created
	add := func(t, role string, n int, c map[string]string) {
		for _, have := range out {
			if have.Topic == t {
				return
			}
		}
		out = append(out, Created{Topic: t, Role: role, Partitions: n, Configs: c})
	}
	if stageFile == "" {
		if err := stagefile.CheckNames("", args); err != nil {
			return nil, err
		}
		for _, t := range textfmt.Dedupe(args) {
			add(t, "", partitions, cfg)
		}
		return out, nil
	}
	st, err := stagefile.Load(stageFile)
	if err != nil {
		return nil, exitcode.UsageError(err)
	}
	for _, t := range st.InputTopics {
		add(t, "input", partitions, cfg)
	}
	for _, t := range st.ConfigTopics {
		add(t, "config", partitions, map[string]string{"cleanup.policy": "compact"})
	}
	if st.Kind == stagefile.KindTransformer {
		outs, err := replay.StageOutputs(st)
		if err != nil {
			return nil, exitcode.Usagef("stage %s: %w", st.Path, err)
		}
		for _, o := range outs {
			if o.Role == replay.RoleOutput {
				add(o.Topic, "output", partitions, cfg)
			}
		}
	}
	return out, nil
}

// Create creates the topics the cluster lacks; a topic that exists is
// listed with its partition count and left alone.
func Create(ctx context.Context, cl *kgo.Client, want []Created) (*CreateResult, error) {
	adm := kadm.NewClient(cl)
	names := make([]string, len(want))
	for i, t := range want {
		names[i] = t.Topic
	}
	if err := acl.RequireCreate(ctx, cl, names); err != nil {
		return nil, err
	}
	listed, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return nil, fmt.Errorf("listing topics: %w", err)
	}
	res := &CreateResult{Topics: []Created{}}
	for _, t := range want {
		if d, ok := listed[t.Topic]; ok && d.Err == nil {
			t.Partitions, t.Configs = len(d.Partitions), nil
			res.Topics = append(res.Topics, t)
			continue
		}
		if err := kafkax.CreateTopic(ctx, adm, t.Topic, int32(t.Partitions), t.Configs); err != nil {
			return res, fmt.Errorf("creating %s: %w", t.Topic, err)
		}
		t.Created = true
		res.Topics = append(res.Topics, t)
	}
	return res, nil
}

// Produce writes one record per JSON line of in to topic, idempotently, in
// batches; a bad line stops it naming the line, after the lines before it
// were written. It returns the records written.
func Produce(ctx context.Context, cl *kgo.Client, topic string, in io.Reader, fields []Field, kr *secret.Keyring) (int, error) {
	if _, err := kafkax.DescribeTopics(ctx, kadm.NewClient(cl), topic); err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	var batch []*kgo.Record
	written, line := 0, 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			return fmt.Errorf("writing to %s: %w (%d records written before)", topic, err, written)
		}
		written += len(batch)
		batch = batch[:0]
		return nil
	}
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		rec, err := Record(topic, []byte(text), fields, kr)
		if err != nil {
			if ferr := flush(); ferr != nil {
				return written, ferr
			}
			return written, exitcode.Usagef("line %d: %w (%d records written before it)", line, err, written)
		}
		batch = append(batch, rec)
		if len(batch) == 500 {
			if err := flush(); err != nil {
				return written, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return written, fmt.Errorf("reading standard input: %w", err)
	}
	return written, flush()
}

// errEnough ends a read that printed --max records.
var errEnough = errors.New("enough records")

// Consume prints topic's committed records from start to the end as it is
// now, one JSON line each (Line), at most maxRecords of them (0: all).
func Consume(ctx context.Context, cl *kgo.Client, topic string, start kafkax.StartFunc, maxRecords int, fields []Field, kr *secret.Keyring, out io.Writer) error {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	n := 0
	_, err := kafkax.ReadFrom(ctx, cl, []string{topic}, start, nil, func(r *kgo.Record) error {
		if err := enc.Encode(Line(r, fields, kr)); err != nil {
			return err
		}
		n++
		if maxRecords > 0 && n >= maxRecords {
			return errEnough
		}
		return nil
	})
	if errors.Is(err, errEnough) {
		err = nil
	}
	return err
}

// Since starts every partition of topic at its first record at or after t.
func Since(ctx context.Context, cl *kgo.Client, topic string, t time.Time) (kafkax.StartFunc, error) {
	after, err := kafkax.OffsetsAfter(ctx, kadm.NewClient(cl), t.UnixMilli(), topic)
	if err != nil {
		return nil, err
	}
	return kafkax.FromOffsets(after), nil
}
