package extract

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/stage"
)

// An output topic that is missing or cannot exist is the config's
// problem; anything else placing a record fails the stage as before.
func TestRecordErrorBlamesTheConfigForItsOutputTopic(t *testing.T) {
	p := &page{configKey: "feed"}
	for _, tc := range []struct {
		err    error
		config bool
	}{
		{fmt.Errorf("output topic: %w", &kafkax.MissingTopicsError{Topics: []string{"nope"}}), true},
		{fmt.Errorf("output topic: describing topic %q: %w", "bad topic!", kerr.InvalidTopicException), true},
		{fmt.Errorf("output topic: describing topics: %w", errors.New("connection refused")), false},
	} {
		err := p.recordError(stage.Message{Topic: "nope"}, tc.err)
		var ce *ConfigError
		if got := errors.As(err, &ce); got != tc.config || (got && ce.ConfigKey != "feed") {
			t.Errorf("%v → %v: config error %v, want %v", tc.err, err, got, tc.config)
		}
	}
}
