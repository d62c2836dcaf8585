package rotation

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/flecht-dev/flecht/internal/promscrape"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// KeysLoadedMetric is the gauge every stage exposes, one series per kid of
// its installed keyring (docs/contract.md §10).
const KeysLoadedMetric = promscrape.KeysLoadedMetric

// Reader statuses in a keys check.
const (
	ReaderHasKey      = "has_key"
	ReaderLacksKey    = "lacks_key"
	ReaderNoMetric    = "no_metric"
	ReaderUnreachable = "unreachable"
)

// RestartReaders says what makes a reader load a key: a stage reads its
// keyring file once, when it starts, so a reader that reads the same file
// (a mounted secret updated in place) goes on lacking the key until it
// restarts.
const RestartReaders = "a stage reads its keyring when it starts: roll the keyring file out to each reader and restart it, then check again"

// Reader is what one reader's metrics endpoint says.
type Reader struct {
	URL    string   `json:"url"`
	Status string   `json:"status"` // has_key, lacks_key, no_metric, unreachable
	Kids   []string `json:"kids"`   // the kids its keyring has loaded
	Error  string   `json:"error,omitempty"`
}

// ReadersReport is the readers' answer: what `flecht keys check` prints.
type ReadersReport struct {
	Kid     string   `json:"kid"`
	Ready   bool     `json:"ready"`   // every reader has loaded the key
	Lacking int      `json:"lacking"` // readers that have not (or cannot tell)
	Readers []Reader `json:"readers"`
}

// CheckReaders asks each reader (once per URL) whether it has loaded kid.
func CheckReaders(ctx context.Context, kid string, urls []string, scrape func(context.Context, string) Reader) *ReadersReport {
	rep := &ReadersReport{Kid: kid, Readers: []Reader{}}
	for _, u := range textfmt.Dedupe(urls) {
		r := scrape(ctx, u)
		if r.Status == "" {
			r.Status = ReaderLacksKey
			if slices.Contains(r.Kids, kid) {
				r.Status = ReaderHasKey
			}
		}
		if r.Status != ReaderHasKey {
			rep.Lacking++
		}
		rep.Readers = append(rep.Readers, r)
	}
	rep.Ready = rep.Lacking == 0 && len(rep.Readers) > 0
	return rep
}

// Scrape reads the kids a reader has loaded from its metrics.
func Scrape(ctx context.Context, client *http.Client, raw string) Reader {
	r := Reader{URL: promscrape.URL(raw), Kids: []string{}}
	s, err := promscrape.Scrape(ctx, client, raw)
	if err != nil {
		r.Status, r.Error = ReaderUnreachable, err.Error()
		return r
	}
	kids, found := s.KidsLoaded()
	if !found {
		r.Status, r.Error = ReaderNoMetric, fmt.Sprintf("no %s metric (not a flecht or flechtwerk stage, or no keyring installed)", KeysLoadedMetric)
		return r
	}
	r.Kids = kids
	return r
}
