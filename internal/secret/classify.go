package secret

import (
	"github.com/flecht-dev/flecht/internal/attr"
)

// Status is a secret field's state on the wire, as a scan reports it.
type Status string

const (
	StatusEncrypted Status = "encrypted" // a well-formed, accepted flenc: token
	StatusSigned    Status = "signed"    // a well-formed, accepted flsig: signed value (in the clear)
	StatusPlaintext Status = "plaintext" // neither flenc: nor flsig:: a legacy or pasted secret, or an unsigned value
	StatusCorrupt   Status = "corrupt"   // a flenc: or flsig: value that does not parse, or (with a keyring) does not open
	StatusAbsent    Status = "absent"    // JSON null: no value, so no leak either
)

// Classification is one field's verdict. Kid and Scope come from the token
// header (unauthenticated unless classified with a keyring): the sealing kid
// of a flenc token, the signer kid of a flsig value.
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
	inspect, status := Inspect, StatusEncrypted
	switch {
	case !ok:
		return Classification{Status: StatusPlaintext}
	case IsSigned(s):
		inspect, status = InspectSigned, StatusSigned
	case !IsEncrypted(s):
		return Classification{Status: StatusPlaintext}
	}
	info, err := inspect(s)
	if err != nil {
		e := asError(err)
		return Classification{Status: StatusCorrupt, Kid: e.Kid, Scope: e.TokenScope, Err: e}
	}
	return Classification{Status: status, Kid: info.Kid, Scope: info.Scope}
}

// Classify also opens an encrypted value, or verifies a signed one, through
// a field of the given scope, so a token whose kid is missing, whose tag or
// signature fails or whose scope is wrong reports as corrupt with that
// error's kind.
func (kr *Keyring) Classify(raw []byte, scope string) Classification {
	c := Classify(raw)
	var err error
	switch c.Status {
	case StatusEncrypted:
		v, _ := attr.ParseJSON(raw)
		_, _, err = kr.Decrypt(v.(string), scope)
	case StatusSigned:
		v, _ := attr.ParseJSON(raw)
		_, _, err = kr.Verify(v.(string), scope)
	}
	if err != nil {
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
