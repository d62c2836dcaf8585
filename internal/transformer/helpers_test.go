package transformer_test

import (
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
)

// testLogger logs to stderr at debug level when FLECHT_TEST_DEBUG is set.
func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("FLECHT_TEST_DEBUG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("test", t.Name())
}

func errorsAs(err error, target any) bool { return errors.As(err, target) }

func contains(s, sub string) bool { return strings.Contains(s, sub) }
