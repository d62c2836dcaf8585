package attr

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Problem says what is wrong with a JSON value that did not decode,
// without quoting it (the value may be a secret).
func Problem(err error) string {
	var de *DecodeError
	if !errors.As(err, &de) {
		return "not JSON"
	}
	var syn *json.SyntaxError
	if errors.As(de.Err, &syn) {
		return fmt.Sprintf("%s, syntax error at offset %d", de.Reason, syn.Offset)
	}
	if errors.Is(de.Err, io.ErrUnexpectedEOF) || errors.Is(de.Err, io.EOF) {
		return de.Reason + ", incomplete"
	}
	return de.Reason
}
