package kafkax

import (
	"errors"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestAuthorizationErrorsNameTheACL(t *testing.T) {
	err := ProduceError("out", kerr.TopicAuthorizationFailed)
	if want := "writing to topic out: not authorized (needs Write on topic out): " + kerr.TopicAuthorizationFailed.Error(); err.Error() != want || !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("got %q, want %q", err, want)
	}
	if err := ProduceError("out", io.EOF); err.Error() != "writing to topic out: EOF" {
		t.Errorf("a produce failure that is not about permissions: %q", err)
	}
	if err := NeedsACL(kerr.GroupAuthorizationFailed, "Read on group app"); !errors.Is(err, kerr.GroupAuthorizationFailed) || err.Error() != "not authorized (needs Read on group app): "+kerr.GroupAuthorizationFailed.Error() {
		t.Errorf("got %q", err)
	}
	if err := NeedsACL(io.EOF, "Read on group app"); err != io.EOF {
		t.Errorf("another error is changed: %v", err)
	}
}
