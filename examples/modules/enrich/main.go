// Command enrich merges the fields of a config record into each record:
// the config whose key the record's lookup field names (its device, say),
// from the stage's config topics. A record whose config is missing is
// dropped, passed on unchanged, or rejected (the stage's invalid_messages
// policy then decides: crash, skip or a dead-letter topic).
//
//	config_topics: [devices.config]
//	transform:
//	  module: enrich.wasm
//	  output_topics: [sensors.enriched]
//	  config: {lookup: device, into: meta, missing: reject}
package main

import (
	"fmt"

	"github.com/flecht-dev/flecht/sdk/transform"
	"github.com/flecht-dev/flecht/sdk/wire"
)

// The setup, set by OnSetup (every field, every time).
var (
	output, lookup, into string
	missing              string
)

func init() {
	transform.OnSetup(setup)
	transform.Handle(enrich)
}

func setup(s transform.Setup) error {
	if len(s.OutputTopics) != 1 {
		return fmt.Errorf("enrich writes to one topic: give output_topics one")
	}
	output = s.OutputTopics[0]
	var ok bool
	if lookup, ok = s.Config.String("lookup"); !ok || lookup == "" {
		return fmt.Errorf("config.lookup: name the value's field that holds the config key")
	}
	into, _ = s.Config.String("into")
	missing = "drop"
	if m, ok := s.Config.String("missing"); ok {
		missing = m
	}
	switch missing {
	case "drop", "pass", "reject":
	default:
		return fmt.Errorf("config.missing %q: use drop, pass or reject", missing)
	}
	return nil
}

func enrich(rec *transform.Record, out *transform.Output) error {
	if rec.Tombstone() {
		return out.Delete(output, rec.Key())
	}
	value, err := rec.Object()
	if err != nil {
		return transform.Reject("%v", err)
	}
	why := ""
	key, ok := value[lookup].(string)
	var cfg wire.Object
	if !ok {
		why = fmt.Sprintf("value.%s is missing or not a string", lookup)
	} else if cfg, ok = transform.Lookup(key); !ok {
		why = fmt.Sprintf("no config for the record's %s %q", lookup, key)
	}
	if why != "" {
		switch missing {
		case "pass":
			return out.Send(output, rec.Key(), rec.Value())
		case "reject":
			return transform.Reject("%s", why)
		}
		return nil
	}
	if into != "" {
		value[into] = map[string]any(cfg)
	} else {
		for k, v := range cfg {
			value[k] = v
		}
	}
	return out.Send(output, rec.Key(), value)
}

func main() {}
