package transformer

import (
	"context"
	"testing"
	"time"

	"github.com/flecht-dev/flecht/internal/devenv/devenvtest"
	"github.com/flecht-dev/flecht/internal/kafkax"
)

// A missing topic is asked about again for a moment on a single broker
// too (a KRaft broker learns a topic from its metadata log just after
// CreateTopics returned), and not for long: on one broker, past the short
// grace, it is missing.
func TestMissingTopicGraceOnOneBroker(t *testing.T) {
	env := devenvtest.Start(t)
	admin := devenvtest.KafkaClient(t, env)
	r := &Runner{}
	missing := &kafkax.MissingTopicsError{Topics: []string{"in"}}
	ctx := context.Background()
	if !r.startupRetriable(ctx, admin, missing, 500*time.Millisecond) {
		t.Error("a topic missing half a second after the start is not asked about again")
	}
	if r.startupRetriable(ctx, admin, missing, 3*time.Second) {
		t.Error("on one broker a topic missing for 3 s is still asked about")
	}
}
