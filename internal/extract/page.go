package extract

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/lease"
	"github.com/flecht-dev/flecht/internal/lineage"
	"github.com/flecht-dev/flecht/internal/stage"
	"github.com/flecht-dev/flecht/internal/state"
)

// pollOne runs Poll for one config with page transactions on its token's
// producer. Poll is re-entered for this config only in the next cycle, so
// never before its previous page committed.
func (r *Runner) pollOne(ctx context.Context, tk *lease.Lease, c owned) error {
	st, err := r.loadState(tk, c.stateKey)
	if err != nil {
		return err
	}
	p := &page{r: r, tk: tk, configKey: c.key, stateKey: c.stateKey, ctx: ctx}
	start := time.Now()
	err = r.ex.Poll(ctx, c.key, c.cfg, st, p)
	r.obs.MessageProcessing.Observe(time.Since(start).Seconds())
	if err == nil && p.err != nil {
		err = p.err // Poll went on after a failed page
	}
	if err == nil && p.open {
		err = p.commit(ctx, nil) // the trailing page
	}
	if err != nil {
		p.abort()
		if IsConfigError(err) {
			return err
		}
		return fmt.Errorf("polling config %q: %w", c.key, err)
	}
	return nil
}

func (r *Runner) loadState(tk *lease.Lease, key string) (attr.State, error) {
	v, ok, err := tk.Store.Get(key)
	if err != nil || !ok {
		return attr.State{}, err
	}
	st, _, err := attr.Decode[attr.State](v)
	if err != nil {
		return attr.State{}, fmt.Errorf("state of %q in the changelog does not decode: %w", key, err)
	}
	return st, nil
}

// page is the open transaction of one config's poll.
type page struct {
	r         *Runner
	tk        *lease.Lease
	configKey string
	stateKey  string
	ctx       context.Context

	open     bool
	produced int
	mu       sync.Mutex
	prodErr  error
	// changelogEnd is the offset after the page's changelog record.
	changelogEnd int64
	err          error
}

func (p *page) begin() error {
	if p.open {
		return nil
	}
	p.tk.Settler.Settle(p.ctx)
	if err := p.tk.Prod.BeginTransaction(); err != nil {
		return fmt.Errorf("begin page: %w", err)
	}
	p.open, p.produced = true, 0
	return nil
}

// Message adds a record to the open page (opening one if needed).
func (p *page) Message(m stage.Message) {
	if p.err != nil {
		return
	}
	if err := p.begin(); err != nil {
		p.err = err
		return
	}
	rec, err := m.Record(p.ctx, p.r.counts)
	if err != nil {
		p.err = p.recordError(m, err)
		return
	}
	// A copy: the extractor may share its headers between messages.
	rec.Headers = append(rec.Headers[:len(rec.Headers):len(rec.Headers)],
		kgo.RecordHeader{Key: lineage.HeaderOrigin, Value: []byte(lineage.ExtractorOrigin(p.r.stage.ApplicationID, p.configKey))})
	p.produce(rec)
	p.r.obs.MessageOut(rec.Topic, len(rec.Key)+len(rec.Value))
}

// recordError classifies a message that could not be placed. An output
// topic that does not exist (or cannot exist) is named by this config
// alone: a ConfigError, so its page aborts and the other configs go on,
// rather than a crash that would recur on every restart.
func (p *page) recordError(m stage.Message, err error) error {
	var missing *kafkax.MissingTopicsError
	switch {
	case errors.As(err, &missing):
		err = fmt.Errorf("output topic %q does not exist: create it, or point the config at an existing topic", m.Topic)
	case errors.Is(err, kerr.InvalidTopicException):
		err = fmt.Errorf("output topic %q is not a valid topic name: fix the config", m.Topic)
	default:
		return err
	}
	return &ConfigError{ConfigKey: p.configKey, Err: err}
}

// State closes the page with the new cursor.
func (p *page) State(ctx context.Context, s attr.State) error {
	if p.err != nil {
		return p.err
	}
	if err := p.begin(); err != nil {
		p.err = err
		return err
	}
	if err := p.commit(ctx, &s); err != nil {
		p.err = err
		return err
	}
	return nil
}

func (p *page) produce(rec *kgo.Record) {
	p.produced++
	p.tk.Prod.Produce(p.ctx, rec, func(r *kgo.Record, err error) {
		if err != nil {
			p.mu.Lock()
			if p.prodErr == nil {
				p.prodErr = kafkax.ProduceError(r.Topic, err)
			}
			p.mu.Unlock()
		}
	})
}

// produceChangelog adds the page's changelog record, noting the offset
// after it for the store's position.
func (p *page) produceChangelog(rec *kgo.Record) {
	p.produced++
	p.tk.Prod.Produce(p.ctx, rec, func(r *kgo.Record, err error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if err != nil {
			if p.prodErr == nil {
				p.prodErr = kafkax.ProduceError(r.Topic, err)
			}
			return
		}
		p.changelogEnd = r.Offset + 1
	})
}

// commit writes the state (if given and changed) to the token's changelog
// partition and commits the page.
func (p *page) commit(ctx context.Context, s *attr.State) error {
	var write *state.Write
	if s != nil {
		var value []byte
		if s.Len() > 0 {
			b, err := s.Bytes()
			if err != nil {
				return err
			}
			value = b
		}
		old, had, err := p.tk.Store.Get(p.stateKey)
		if err != nil {
			return err
		}
		if (value != nil || had) && !(had && string(old) == string(value)) {
			p.produceChangelog(state.ChangelogRecord(p.r.changelog, p.tk.N, p.stateKey, value))
			p.r.obs.StateWritten(len(value))
			write = &state.Write{Key: p.stateKey, Value: value}
		}
	}
	// Nothing after this page's changelog record is written before now:
	// the store's position may say so once the page committed.
	sealed := time.Now()
	if err := p.tk.Prod.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	p.mu.Lock()
	prodErr, changelogEnd := p.prodErr, p.changelogEnd
	p.mu.Unlock()
	if prodErr != nil {
		return fmt.Errorf("produce: %w", prodErr)
	}
	// A page that wrote nothing (no messages, cursor unchanged) has nothing
	// to commit; franz-go ends such a transaction without a round trip.
	if err := p.tk.Prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("commit page: %w", err)
	}
	if p.produced > 0 {
		p.tk.Settler.Ended()
	}
	p.open = false
	p.r.beat.Beat() // a committed page is progress, however long the cycle
	if p.produced > 0 {
		p.r.obs.TxnCommitted.Inc()
	}
	if write != nil {
		at := state.Position{Offset: changelogEnd, Since: sealed}
		if err := p.tk.Store.Apply([]state.Write{*write}, at); err != nil {
			return err
		}
	}
	return nil
}

// abort ends an open page without committing it.
func (p *page) abort() {
	if !p.open {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(p.ctx), 10*time.Second)
	defer cancel()
	if err := p.tk.Prod.EndTransaction(ctx, kgo.TryAbort); err != nil && !errors.Is(err, context.Canceled) {
		p.r.log.Debug("abort page", "token", p.tk.N, "error", err)
	}
	p.open = false
}
