package kafkax

import "testing"

// Kafka reports a member's host as Java prints an address, "/10.0.0.7":
// flecht shows it without the slash, in JSON as in tables.
func TestClientHost(t *testing.T) {
	for in, want := range map[string]string{"/10.0.0.7": "10.0.0.7", "10.0.0.7": "10.0.0.7", "node-1/10.0.0.7": "node-1/10.0.0.7", "": ""} {
		if got := clientHost(in); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
}
