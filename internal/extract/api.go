// Package extract runs extractors (docs/contract.md §4): stages whose only Kafka input
// is their config topics and which poll an outside source per config. Each
// page of output commits with its cursor in one transaction of the token's
// fenced producer, so a crash or a handover re-reads at most the page in
// flight and never shows it twice.
package extract

import (
	"context"
	"errors"
	"fmt"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/stage"
)

// Page is how Poll answers: messages, and states that close pages.
type Page interface {
	// Message adds a record to the open page.
	Message(m stage.Message)
	// State closes the page: its messages and this state (the cursor)
	// commit in one transaction. It returns once the page is committed;
	// poll must not go on after an error. An empty state deletes it.
	State(ctx context.Context, s attr.State) error
}

// Extractor polls one config's source. Messages after the last State call
// commit as a trailing page when Poll returns nil. An error aborts the open
// page and stops the stage (let it crash) unless it is a *ConfigError, which
// is reported and skips this config until the next cycle.
type Extractor interface {
	Poll(ctx context.Context, configKey string, cfg attr.Config, st attr.State, page Page) error
}

// ConfigError is a problem with one config that retrying cannot fix (a
// 4xx, a missing field, an output topic that does not exist): reported
// once per distinct error, the config retried each cycle, the other
// configs go on.
type ConfigError struct {
	ConfigKey string
	Err       error
}

func (e *ConfigError) Error() string { return fmt.Sprintf("config %q: %v", e.ConfigKey, e.Err) }
func (e *ConfigError) Unwrap() error { return e.Err }

// IsConfigError reports whether err is a ConfigError.
func IsConfigError(err error) bool {
	var ce *ConfigError
	return errors.As(err, &ce)
}
