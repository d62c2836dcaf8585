package secret

import (
	"log/slog"
	"reflect"
	"sync"
)

// Observer receives the events behind flechtwerk_secret_plaintext_reads_total
// {scope}, flechtwerk_secret_decrypts_total{scope,kid},
// flechtwerk_secret_verifications_total{scope,kid} and
// flechtwerk_secret_unsigned_reads_total{scope}. The metrics package
// implements it; calls come from hot read paths, so they must be cheap and
// must not block.
type Observer interface {
	PlaintextRead(scope string)
	Decrypted(scope, kid string)
	Verified(scope, kid string)
	UnsignedRead(scope string)
}

type nopObserver struct{}

func (nopObserver) PlaintextRead(string)     {}
func (nopObserver) Decrypted(string, string) {}
func (nopObserver) Verified(string, string)  {}
func (nopObserver) UnsignedRead(string)      {}

// The process keyring and observer. Attributes are package-level values
// declared long before a keyring is loaded, so an ENCRYPTED codec resolves
// its keyring when it runs, here, unless it was bound to one with
// WithKeyring. This is process-global state on purpose, as in the Python
// library: one keyring per process, installed once at startup.
var process struct {
	mu       sync.RWMutex
	keyring  *Keyring
	observer Observer
}

// Install sets the process keyring. Installing the same material again is a
// no-op; installing different material is a KindKeyringConflict error,
// because a silent last-writer-wins would encrypt under the wrong key.
func Install(kr *Keyring) error {
	process.mu.Lock()
	defer process.mu.Unlock()
	if process.keyring != nil {
		if !process.keyring.Equal(kr) {
			return &Error{Kind: KindKeyringConflict, Detail: "a different keyring is already installed in this process"}
		}
		return nil
	}
	process.keyring = kr
	return nil
}

// Installed returns the process keyring, or nil.
func Installed() *Keyring {
	process.mu.RLock()
	defer process.mu.RUnlock()
	return process.keyring
}

// SetObserver sets the process observer. The first one set wins; a later,
// different one is logged and ignored, so that two stages in one process do
// not flip each other's metric labels.
func SetObserver(o Observer) {
	process.mu.Lock()
	defer process.mu.Unlock()
	if process.observer != nil && !sameObserver(process.observer, o) {
		slog.Warn("a secret observer is already installed; keeping the first")
		return
	}
	process.observer = o
}

func installedObserver() Observer {
	process.mu.RLock()
	defer process.mu.RUnlock()
	if process.observer == nil {
		return nopObserver{}
	}
	return process.observer
}

// sameObserver compares without panicking on observers of a non-comparable
// type (those are never "the same" unless they are one pointer).
func sameObserver(a, b Observer) bool {
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta.Comparable() && a == b
}
