package attr

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"testing"
)

// upstreamVectors is testdata/canonical/vectors.json, written by
// gen_vectors.py beside it with the real flechtwerk 0.17.0: what a Python
// stage writes when it decodes a record and writes it back.
type upstreamVectors struct {
	Flechtwerk string `json:"flechtwerk"`
	Python     string `json:"python"`
	Vectors    []struct {
		Name        string  `json:"name"`
		Input       *string `json:"input"`
		InputBase64 string  `json:"input_base64"`
		Output      *string `json:"output"`
		Error       *struct {
			Stage string `json:"stage"`
			Type  string `json:"type"`
		} `json:"error"`
	} `json:"vectors"`
}

func loadUpstreamVectors(t *testing.T) upstreamVectors {
	t.Helper()
	raw, err := os.ReadFile("testdata/canonical/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v upstreamVectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if v.Flechtwerk != "0.17.0" {
		t.Fatalf("vectors come from flechtwerk %q, want 0.17.0", v.Flechtwerk)
	}
	return v
}

// Every record upstream writes back, flecht writes byte for byte the same.
// Where upstream fails, flecht refuses the record when it decodes it, so
// the stage's invalid_messages policy decides (see number.go); the one
// exception is nesting, where flecht's limit is encoding/json's 10000
// levels and Python's is its recursion limit (about 500 on the record path;
// a RecursionError stops a Python stage whatever its policy).
func TestCanonicalBytesMatchUpstream(t *testing.T) {
	vs := loadUpstreamVectors(t)
	counts := map[string]int{}
	for _, v := range vs.Vectors {
		var in []byte
		if v.Input != nil {
			in = []byte(*v.Input)
		} else {
			b, err := base64.StdEncoding.DecodeString(v.InputBase64)
			if err != nil {
				t.Fatalf("%s: %v", v.Name, err)
			}
			in = b
		}
		ev, _, err := Decode[Event](in)
		switch {
		case v.Output != nil:
			counts["same bytes"]++
			if err != nil {
				t.Errorf("%s: upstream writes %s, flecht does not decode it: %v", v.Name, *v.Output, err)
				continue
			}
			got, err := ev.Bytes()
			if err != nil || string(got) != *v.Output {
				t.Errorf("%s: flecht writes %s (%v)\n                 upstream writes %s", v.Name, got, err, *v.Output)
			}
		case v.Error != nil && v.Error.Type == "RecursionError":
			counts["deeper than Python"]++
			if err != nil {
				t.Errorf("%s: %v", v.Name, err)
				continue
			}
			got, err := ev.Bytes()
			if err != nil {
				t.Errorf("%s: %v", v.Name, err)
				continue
			}
			again, _, err := Decode[Event](got)
			if b, _ := again.Bytes(); err != nil || string(b) != string(got) {
				t.Errorf("%s: canonical form does not survive a round trip: %v", v.Name, err)
			}
		case v.Error != nil:
			counts["refused at "+v.Error.Stage]++
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Errorf("%s: upstream fails at %s (%s), flecht decoded it (err %v)", v.Name, v.Error.Stage, v.Error.Type, err)
			}
		default:
			t.Fatalf("%s: vector has neither output nor error", v.Name)
		}
	}
	// The file is the proof: a truncated or regenerated-empty one must fail.
	if counts["same bytes"] < 600 || counts["refused at decode"] < 15 || counts["refused at encode"] < 10 || counts["deeper than Python"] < 1 {
		t.Errorf("too few vectors of some kind: %v", counts)
	}
	t.Logf("flechtwerk %s on Python %s: %v", vs.Flechtwerk, vs.Python, counts)
}
