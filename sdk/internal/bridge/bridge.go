// Package bridge connects package transform to where it runs: the host's
// imports inside WebAssembly, or package transformtest in a native test.
// Package transform fills in its side at init; the other side fills in
// the rest.
package bridge

// Set by package transform.
var (
	// Transform runs the registered handler over a batch and returns the
	// results (abi layout); cursor is told each record's index first.
	Transform func(batch []byte, cursor func(i int)) []byte
	// Setup hands the setup document to the registered setup function and
	// returns why it refuses it, or "".
	Setup func(doc []byte) string
)

// Set by where the module runs.
var (
	// Lookup finds a config record's canonical JSON by its key.
	Lookup func(key string) ([]byte, bool)
	// Log writes one line into the stage's log.
	Log func(level int, msg string)
)
