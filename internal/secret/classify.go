package secret

import (
	"github.com/flecht-dev/flecht/internal/attr"
)

// Status is a secret field's state on the wire, as a scan reports it.
type Status string

const (
	StatusEncrypted Status = "encrypted" // a well-formed, accepted token
	StatusPlaintext Status = "plaintext" // any non-flenc: value: a legacy or pasted secret
	StatusCorrupt   Status = "corrupt"   // a flenc: value that does not parse, or (with a keyring) does not open
	StatusAbsent    Status = "absent"    // JSON null: no value, so no leak either
)

// Classification is one field's verdict. Kid and Scope come from the token
// header (unauthenticated unless classified with a keyring).
type Classification struct {
	Status Status `json:"status"`
	Kid    string `json:"kid,omitempty"`
	Scope  string `json:"scope,omitempty"`
	Err    *Error `json:"error,omitempty"`
}

// Classify judges a field's raw JSON value without a keyring: the engine of a
// migration or rotation scan. It never fails; a value it cannot read is
// reported as corrupt, so one bad record cannot abort a scan.
func Classify(raw []byte) Classification {
	v, err := attr.ParseJSON(raw)
	if err != nil {
		return Classification{Status: StatusCorrupt, Err: &Error{Kind: KindMalformed, Detail: "field value is not JSON"}}
	}
	return ClassifyValue(v)
}

// ClassifyValue is Classify for a JSON-native value (Record.RawValue).
func ClassifyValue(v any) Classification {
	if v == nil {
		return Classification{Status: StatusAbsent}
	}
	s, ok := v.(string)
	if !ok || !IsEncrypted(s) {
		return Classification{Status: StatusPlaintext}
	}
	info, err := Inspect(s)
	if err != nil {
		e := asError(err)
		return Classification{Status: StatusCorrupt, Kid: e.Kid, Err: e}
	}
	return Classification{Status: StatusEncrypted, Kid: info.Kid, Scope: info.Scope}
}

// Classify also opens an encrypted value through a field of the given scope,
// so a token whose kid is missing, whose tag fails or whose scope is wrong
// reports as corrupt with that error's kind.
func (kr *Keyring) Classify(raw []byte, scope string) Classification {
	c := Classify(raw)
	if c.Status != StatusEncrypted {
		return c
	}
	v, _ := attr.ParseJSON(raw)
	if _, _, err := kr.Decrypt(v.(string), scope); err != nil {
		c.Status, c.Err = StatusCorrupt, asError(err)
	}
	return c
}

func asError(err error) *Error {
	if e, ok := err.(*Error); ok {
		return e
	}
	return &Error{Kind: KindMalformed, Err: err}
}
