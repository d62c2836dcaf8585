package secret

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

func TestKindsAreStableStrings(t *testing.T) {
	want := []string{"malformed", "header_rejected", "unknown_kid", "tag_mismatch", "scope_violation",
		"plaintext", "no_keyring", "keyring_invalid", "keyring_conflict", "keyring_password", "key_binding",
		"seal_only", "bad_signature", "unknown_signer", "unsigned", "no_signing_key"}
	if len(Kinds) != len(want) {
		t.Fatalf("Kinds = %v", Kinds)
	}
	for i, k := range Kinds {
		if string(k) != want[i] {
			t.Errorf("kind %d = %q, want %q", i, k, want[i])
		}
	}
}

func TestErrorIsAsAndJSON(t *testing.T) {
	err := fmt.Errorf("reading config tenant-a: %w",
		&Error{Kind: KindUnknownKid, Kid: "prod-2025-01", Scope: "api_key", Detail: "the keyring does not hold this kid"})
	if !errors.Is(err, ErrUnknownKid) || errors.Is(err, ErrTagMismatch) {
		t.Error("errors.Is does not match by kind")
	}
	var e *Error
	if !errors.As(err, &e) || e.Kid != "prod-2025-01" {
		t.Error("errors.As")
	}
	if KindOf(err) != KindUnknownKid || KindOf(errors.New("x")) != "" {
		t.Error("KindOf")
	}
	want := `secret: unknown_kid kid="prod-2025-01" scope="api_key": the keyring does not hold this kid`
	if e.Error() != want {
		t.Errorf("Error() = %s", e.Error())
	}
	b, _ := json.Marshal(map[string]any{"error": e})
	var back struct {
		Error struct{ Kind, Kid, Scope, Message string }
	}
	if err := json.Unmarshal(b, &back); err != nil || back.Error.Kind != "unknown_kid" || back.Error.Kid != "prod-2025-01" || back.Error.Message != want {
		t.Errorf("JSON = %s", b)
	}
	// A sentinel with fields set is a specific error, not a kind matcher.
	if errors.Is(err, &Error{Kind: KindUnknownKid, Kid: "other"}) {
		t.Error("a detailed target matched")
	}
}
