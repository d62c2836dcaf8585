package replay

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// A stage file's intermediate_topics are what --intermediate-topics is to
// a replay: read by the stage, moved to their end, not replayed.
func TestNewRequestTakesTheStageFilesIntermediateTopics(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stage.yaml")
	body := "application_id: loopok\nkind: transformer\ninput_topics: [a, b]\nintermediate_topics: [b]\ntransform: {builtin: rekey, output_topic: b, key: \"{value.id}\"}\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	req, _, err := NewRequest(Flags{StageFile: path, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(req.InputTopics, []string{"a"}) || !reflect.DeepEqual(req.IntermediateTopics, []string{"b"}) {
		t.Errorf("inputs %v, intermediate %v; want [a] and [b]", req.InputTopics, req.IntermediateTopics)
	}
}
