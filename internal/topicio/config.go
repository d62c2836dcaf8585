package topicio

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ConfigChange is one key of `flecht topic config`: its value now and the
// one asked for (Delete: back to the broker's default).
type ConfigChange struct {
	Key    string `json:"key"`
	From   string `json:"from"`
	Source string `json:"source"` // where From comes from: topic, broker, default
	To     string `json:"to,omitempty"`
	Delete bool   `json:"delete,omitempty"`
	// After is the value the broker describes once the change is made
	// (executed only): what a reader of the topic's config now sees.
	After *string `json:"after,omitempty"`
}

// ConfigPlan is a topic's config change: checked by the broker (a
// validate-only request) before anything changes, made with --execute.
type ConfigPlan struct {
	Topic    string         `json:"topic"`
	Changes  []ConfigChange `json:"changes"`
	Executed bool           `json:"executed"`
}

// ParseConfigChanges reads KEY=VALUE settings and KEY deletions; a key
// given twice is refused (which one would win?).
func ParseConfigChanges(sets, deletes []string) ([]ConfigChange, error) {
	var out []ConfigChange
	seen := map[string]bool{}
	add := func(c ConfigChange) error {
		if c.Key == "" || strings.ContainsAny(c.Key, "= \t\n") {
			return fmt.Errorf("config key %q: want a name such as retention.ms", c.Key)
		}
		if seen[c.Key] {
			return fmt.Errorf("config key %s is given twice", c.Key)
		}
		seen[c.Key] = true
		out = append(out, c)
		return nil
	}
	for _, s := range sets {
		k, v, ok := strings.Cut(s, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want KEY=VALUE, such as retention.ms=-1", s)
		}
		if err := checkValue(k, v); err != nil {
			return nil, err
		}
		if err := add(ConfigChange{Key: k, To: v}); err != nil {
			return nil, err
		}
	}
	for _, k := range deletes {
		if err := add(ConfigChange{Key: k, Delete: true}); err != nil {
			return nil, err
		}
	}
	if len(out) == 0 {
		return nil, errors.New("nothing to change: give KEY=VALUE to set, or KEY to delete")
	}
	return out, nil
}

// checkValue refuses a value the broker would refuse for the keys whose
// type is plain from the name: durations and sizes (*.ms, *.bytes) are
// whole numbers, -1 or more, and cleanup.policy is delete, compact or
// both. The broker validates every change too (PlanConfig); this check
// names the key's form, and holds on brokers that validate less.
func checkValue(key, v string) error {
	switch {
	case strings.HasSuffix(key, ".ms") || strings.HasSuffix(key, ".bytes"):
		least := int64(-1)
		if strings.HasPrefix(key, "local.retention.") {
			least = -2 // tiered storage: as retention.*
		}
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < least {
			return fmt.Errorf("%s=%s: want a whole number, -1 or more (-1: no limit)", key, v)
		}
	case key == "cleanup.policy":
		for _, p := range strings.Split(v, ",") {
			if p != "delete" && p != "compact" {
				return fmt.Errorf("%s=%s: want delete, compact or compact,delete", key, v)
			}
		}
	}
	return nil
}

// PlanConfig describes the topic's current values of the keys to change
// and has the broker validate the change without making it: a key or
// value it refuses fails here, before anything changes.
func PlanConfig(ctx context.Context, cl *kgo.Client, topic string, changes []ConfigChange) (*ConfigPlan, error) {
	adm := kadm.NewClient(cl)
	now, err := describeConfigs(ctx, adm, topic)
	if err != nil {
		return nil, err
	}
	plan := &ConfigPlan{Topic: topic, Changes: slices.Clone(changes)}
	for i := range plan.Changes {
		c := &plan.Changes[i]
		c.From, c.Source = "-", "default"
		if have, ok := now[c.Key]; ok {
			c.From, c.Source = configValue(have), configSource(have.Source)
		}
	}
	if _, err := alter(ctx, adm, topic, plan.Changes, true); err != nil {
		return nil, err
	}
	return plan, nil
}

// ExecuteConfig makes the change, then describes the topic again and
// records what the broker now says of each key; a set key that does not
// read back as asked is an error.
func ExecuteConfig(ctx context.Context, cl *kgo.Client, plan *ConfigPlan) error {
	adm := kadm.NewClient(cl)
	if _, err := alter(ctx, adm, plan.Topic, plan.Changes, false); err != nil {
		return err
	}
	plan.Executed = true
	after, err := describeConfigs(ctx, adm, plan.Topic)
	if err != nil {
		return fmt.Errorf("changed; reading the config back: %w", err)
	}
	var wrong []string
	for i := range plan.Changes {
		c := &plan.Changes[i]
		if have, ok := after[c.Key]; ok {
			v := configValue(have)
			c.After = &v
			if c.Delete && have.Source == kmsg.ConfigSourceDynamicTopicConfig || !c.Delete && v != c.To {
				wrong = append(wrong, c.Key+"="+v)
			}
		} else if !c.Delete {
			wrong = append(wrong, c.Key+" (not described)")
		}
	}
	if len(wrong) > 0 {
		return fmt.Errorf("changed, but %s reads back as %s", plan.Topic, strings.Join(wrong, ", "))
	}
	return nil
}

func alter(ctx context.Context, adm *kadm.Client, topic string, changes []ConfigChange, validate bool) (kadm.AlterConfigsResponses, error) {
	req := make([]kadm.AlterConfig, len(changes))
	for i, c := range changes {
		if c.Delete {
			req[i] = kadm.AlterConfig{Op: kadm.DeleteConfig, Name: c.Key}
		} else {
			req[i] = kadm.AlterConfig{Op: kadm.SetConfig, Name: c.Key, Value: &c.To}
		}
	}
	call, verb := adm.AlterTopicConfigs, "changing"
	if validate {
		call, verb = adm.ValidateAlterTopicConfigs, "checking the change of"
	}
	resps, err := call(ctx, req, topic)
	if err == nil {
		for _, r := range resps {
			if r.Err != nil {
				err = r.Err
				if r.ErrMessage != "" {
					err = fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
				}
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s's config: %w", verb, topic, err)
	}
	return resps, nil
}

func describeConfigs(ctx context.Context, adm *kadm.Client, topic string) (map[string]kadm.Config, error) {
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("describing %s's config: %w", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return nil, fmt.Errorf("describing %s's config: %w", topic, err)
	}
	out := map[string]kadm.Config{}
	for _, c := range rc.Configs {
		out[c.Key] = c
	}
	return out, nil
}

func configValue(c kadm.Config) string {
	switch {
	case c.Sensitive:
		return "(sensitive)"
	case c.Value == nil:
		return "-"
	}
	return *c.Value
}

func configSource(s kmsg.ConfigSource) string {
	switch s {
	case kmsg.ConfigSourceDynamicTopicConfig:
		return "topic"
	case kmsg.ConfigSourceDefaultConfig:
		return "default"
	}
	return "broker"
}
