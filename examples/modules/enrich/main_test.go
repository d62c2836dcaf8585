package main

import (
	"testing"

	"github.com/flecht-dev/flecht/sdk/transform"
	"github.com/flecht-dev/flecht/sdk/transformtest"
	"github.com/flecht-dev/flecht/sdk/wire"
)

func TestEnrichesFromTheConfigTopic(t *testing.T) {
	h, err := transformtest.New(transform.Setup{OutputTopics: []string{"enriched"},
		Config: wire.Object{"lookup": "device", "into": "meta", "missing": "reject"}})
	if err != nil {
		t.Fatal(err)
	}
	h.Configs["d-1"] = wire.Object{"site": "north", "floor": 3}
	res := h.Run(transformtest.Input{Key: "k", Value: wire.Object{"device": "d-1", "t": 20}})
	if res.Err != nil || len(res.Messages) != 1 {
		t.Fatalf("%+v", res)
	}
	if got, want := string(res.Messages[0].Value), `{"device":"d-1","meta":{"floor":3,"site":"north"},"t":20}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if res := h.Run(transformtest.Input{Key: "k", Value: wire.Object{"device": "d-2"}}); res.Rejected == "" {
		t.Errorf("a device without config: %+v, want a rejection", res)
	}
}

func TestMergesAtTheTopAndDropsByDefault(t *testing.T) {
	h, err := transformtest.New(transform.Setup{OutputTopics: []string{"enriched"}, Config: wire.Object{"lookup": "device"}})
	if err != nil {
		t.Fatal(err)
	}
	h.Configs["d-1"] = wire.Object{"site": "north"}
	res := h.Run(transformtest.Input{Key: "k", Value: wire.Object{"device": "d-1"}})
	if len(res.Messages) != 1 || string(res.Messages[0].Value) != `{"device":"d-1","site":"north"}` {
		t.Fatalf("%+v", res)
	}
	if res := h.Run(transformtest.Input{Key: "k", Value: wire.Object{"device": "nope"}}); res.Err != nil || res.Rejected != "" || len(res.Messages) != 0 {
		t.Errorf("missing config under missing: drop: %+v", res)
	}
}

func TestRefusesABadConfig(t *testing.T) {
	for _, cfg := range []wire.Object{{}, {"lookup": "d", "missing": "ignore"}} {
		if _, err := transformtest.New(transform.Setup{OutputTopics: []string{"x"}, Config: cfg}); err == nil {
			t.Errorf("config %v accepted", cfg)
		}
	}
}
