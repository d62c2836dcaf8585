package topicio

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/flecht-dev/flecht/internal/kafkax"
	"github.com/flecht-dev/flecht/internal/secret"
	"github.com/flecht-dev/flecht/internal/textfmt"
)

// How `flecht topic produce` accounts for what it wrote, the invariant
// Produce keeps: the records of the input's first Produced.Lines lines are
// in the topic, each once, and no record of a later line is, as a
// read_committed reader sees it. Records go out in transactions of at
// most MaxBatch records, each committed before the next line is read
// into a new one; a transaction that fails is aborted, so nothing of it
// is visible, and then the lines of it before the failing line are
// written again in a transaction of their own. A run that stops (a bad
// line, a refused record, an interrupt) has written exactly the lines
// before the one it names, and a run given SkipLines: Lines writes the
// rest without duplicates.

// ProduceOptions are the inputs of Produce.
type ProduceOptions struct {
	Topic   string
	Fields  []Field
	Keyring *secret.Keyring
	// SkipLines reads the input's first SkipLines lines without writing
	// them: the resume point a failed run reported (Produced.Lines).
	SkipLines int
	// MaxWait is how long a line read waits for its transaction to
	// commit while the input pauses (DefaultMaxWait when 0).
	MaxWait time.Duration
	// MaxBatch is the most records of one transaction (DefaultMaxBatch
	// when 0).
	MaxBatch int
}

// DefaultMaxWait and DefaultMaxBatch: a line waits at most a second for
// its transaction while the input pauses (`tail -f log | flecht topic
// produce` writes as it goes), and a transaction holds at most 500
// records, which keeps the one-by-one search for a refused record short.
const (
	DefaultMaxWait  = time.Second
	DefaultMaxBatch = 500
)

// Produced is what Produce wrote: Records records, those of the input's
// first Lines lines (blank lines hold none; skipped lines count as lines,
// not records).
type Produced struct {
	Topic   string `json:"topic"`
	Records int    `json:"records"`
	Lines   int    `json:"lines"`
	Skipped int    `json:"skipped_lines,omitempty"`
}

// ProduceError says why Produce stopped and where: the line at fault (0
// when none is: an interrupt, a failed read of the input), whether the
// line itself is bad input (Usage), and, in Uncertain, a transaction
// whose commit was sent but not answered: its lines (after Produced.Lines)
// may or may not be in the topic.
type ProduceError struct {
	Line        int
	Usage       bool
	Interrupted bool
	Uncertain   [2]int // first and last line of an unanswered commit; zero when none
	Err         error
}

func (e *ProduceError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %v", e.Line, e.Err)
	}
	return e.Err.Error()
}

func (e *ProduceError) Unwrap() error { return e.Err }

// ProducerOpts are the client options Produce needs: a transactional ID
// of its own (flecht-produce-<random>), so that each run's records
// commit or abort as a whole and two runs never fence each other.
func ProducerOpts() []kgo.Opt {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return []kgo.Opt{
		kgo.TransactionalID(kafkax.ProduceTransactionalIDPrefix + hex.EncodeToString(b)),
		kgo.TransactionTimeout(30 * time.Second),
	}
}

// inLine is one line read from the input, numbered from 1.
type inLine struct {
	n    int
	text []byte
	err  error // the line is too long, or the input failed (n is then 0)
}

// readLines sends each line of in, numbered, until EOF, a failure or
// stop; a line longer than MaxLine is sent as an error naming it, and
// reading stops there.
func readLines(in io.Reader, out chan<- inLine, stop <-chan struct{}) {
	defer close(out)
	r := bufio.NewReaderSize(in, 64<<10)
	send := func(l inLine) bool {
		select {
		case out <- l:
			return true
		case <-stop:
			return false
		}
	}
	for n := 1; ; n++ {
		var line []byte
		for {
			chunk, err := r.ReadSlice('\n')
			if len(line)+len(chunk) > MaxLine+1 { // +1: the line feed
				send(inLine{n: n, err: fmt.Errorf("the line is over the limit of %s a line", textfmt.FormatBytes(MaxLine))})
				return
			}
			line = append(line, chunk...)
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if err != nil && !errors.Is(err, io.EOF) {
				send(inLine{err: fmt.Errorf("reading standard input after line %d: %w", n-1, err)})
				return
			}
			if len(line) > 0 && !send(inLine{n: n, text: line}) {
				return
			}
			if err != nil { // EOF
				return
			}
			break
		}
	}
}

// producer holds one run's transactions and its account.
type producer struct {
	cl    *kgo.Client
	res   Produced
	batch []*kgo.Record
	lines []int // the input line of each record of batch
	// first is the first line of the open batch, last the last line read
	// into it (blank lines too).
	first, last int
}

// Produce writes one record per JSON line of in to the topic, in
// transactions (see the invariant above). cl must be made with
// ProducerOpts. It returns what is in the topic, also with an error
// (*ProduceError) saying where and why it stopped.
func Produce(ctx context.Context, cl *kgo.Client, in io.Reader, o ProduceOptions) (Produced, error) {
	p := &producer{cl: cl, res: Produced{Topic: o.Topic}}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if _, err := kafkax.DescribeTopics(ctx, kadm.NewClient(cl), o.Topic); err != nil {
		return p.res, err
	}
	lines := make(chan inLine)
	stop := make(chan struct{})
	defer close(stop)
	go readLines(in, lines, stop)
	timer := time.NewTimer(o.MaxWait)
	timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return p.interrupted(ctx)
		case <-timer.C:
			if err := p.commit(ctx); err != nil {
				return p.res, err
			}
			continue
		case l, ok := <-lines:
			if !ok {
				err := p.commit(ctx)
				return p.res, err
			}
			if l.err != nil {
				err := p.stop(ctx, &ProduceError{Line: l.n, Usage: l.n > 0, Err: l.err})
				return p.res, err
			}
			if l.n <= o.SkipLines {
				p.res.Lines, p.res.Skipped = l.n, l.n
				continue
			}
			if p.first == 0 {
				p.first = l.n
				timer.Reset(o.MaxWait)
			}
			text := bytes.Trim(l.text, " \t\r\n") // JSON's whitespace
			if len(text) > 0 {
				rec, err := Record(o.Topic, text, o.Fields, o.Keyring)
				if err != nil {
					err := p.stop(ctx, &ProduceError{Line: l.n, Usage: true, Err: err})
					return p.res, err
				}
				p.batch, p.lines = append(p.batch, rec), append(p.lines, l.n)
			}
			p.last = l.n
			if len(p.batch) >= o.MaxBatch {
				timer.Stop()
				if err := p.commit(ctx); err != nil {
					return p.res, err
				}
			}
		}
	}
}

// stop commits what was read before a bad line, then returns why it
// stopped (or why the commit failed, which names an earlier line).
func (p *producer) stop(ctx context.Context, why *ProduceError) error {
	if err := p.commit(ctx); err != nil {
		return err
	}
	return why
}

// interrupted ends the run at an interrupt: the lines read since the
// last commit are dropped (their records are sent only inside transact,
// which aborts a transaction it does not commit), so an interrupt writes
// nothing more.
func (p *producer) interrupted(ctx context.Context) (Produced, error) {
	return p.res, &ProduceError{Interrupted: true, Err: fmt.Errorf("interrupted (%w)", context.Cause(ctx))}
}

// settle bounds the end of a transaction, which must run even after an
// interrupt: an abort, or a commit already under way.
const settle = 10 * time.Second

func (p *producer) abort() {
	ctx, cancel := context.WithTimeout(context.Background(), settle)
	defer cancel()
	_ = p.cl.AbortBufferedRecords(ctx)
	// An abort that fails leaves the transaction to the coordinator,
	// which aborts it after the transaction timeout: invisible either way.
	_ = p.cl.EndTransaction(ctx, kgo.TryAbort)
}

// commit writes the open batch in one transaction. When a record is
// refused it aborts, finds the first refused line by writing the records
// one by one, aborts that too, and commits the lines before it alone.
func (p *producer) commit(ctx context.Context) error {
	if p.first == 0 {
		return nil
	}
	if len(p.batch) == 0 { // blank lines only
		p.res.Lines, p.first = p.last, 0
		return nil
	}
	_, err := p.transact(ctx, p.batch, p.lines, false)
	if err == nil {
		return nil
	}
	var unsure *ProduceError
	if errors.As(err, &unsure) {
		return unsure
	}
	if ctx.Err() != nil {
		_, ierr := p.interrupted(ctx)
		return ierr
	}
	// Which record was refused: write them one at a time.
	bad, berr := p.transact(ctx, p.batch, p.lines, true)
	if ctx.Err() != nil {
		_, ierr := p.interrupted(ctx)
		return ierr
	}
	if berr == nil { // each went through alone: the refusal passed
		line, err := p.transact(ctx, p.batch, p.lines, false)
		if err == nil {
			return nil
		}
		if errors.As(err, &unsure) {
			return unsure
		}
		bad, berr = line, err
	}
	if bad == 0 { // no line at fault (a transaction that did not begin)
		return &ProduceError{Err: fmt.Errorf("writing to %s: %w", p.res.Topic, berr)}
	}
	i := 0
	for i < len(p.lines) && p.lines[i] < bad {
		i++
	}
	why := &ProduceError{Line: bad, Err: fmt.Errorf("writing to %s: %w", p.res.Topic, berr)}
	if i > 0 {
		batch, lines := p.batch[:i], p.lines[:i]
		p.last = bad - 1
		if _, err := p.transact(ctx, batch, lines, false); err != nil {
			if errors.As(err, &unsure) {
				return unsure
			}
			why.Err = fmt.Errorf("%w; then writing the lines before it failed too: %v", why.Err, err)
			return why
		}
		return why
	}
	p.batch, p.lines, p.first = nil, nil, 0
	p.res.Lines = bad - 1
	return why
}

// transact writes batch in one transaction and commits it, accounting
// the lines up to p.last as written; alone writes each record on its own
// (to find the refused one) and never commits. It returns the line of the
// first refused record.
func (p *producer) transact(ctx context.Context, batch []*kgo.Record, lines []int, alone bool) (int, error) {
	for _, r := range batch { // a retried record is a new record
		r.Partition, r.Offset, r.ProducerID, r.ProducerEpoch, r.LeaderEpoch = 0, 0, 0, 0, 0
	}
	if err := p.cl.BeginTransaction(); err != nil {
		return 0, err
	}
	failed := func(line int, err error) (int, error) {
		p.abort()
		return line, err
	}
	if alone {
		for i, r := range batch {
			if err := p.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				return failed(lines[i], err)
			}
		}
		p.abort()
		return 0, nil
	}
	// Results come in the order the records completed: the first
	// refused line is the least line of a failed record.
	lineOf := make(map[*kgo.Record]int, len(batch))
	for i, r := range batch {
		lineOf[r] = lines[i]
	}
	first, firstErr := 0, error(nil)
	for _, r := range p.cl.ProduceSync(ctx, batch...) {
		if l := lineOf[r.Record]; r.Err != nil && (first == 0 || l < first) {
			first, firstErr = l, r.Err
		}
	}
	if firstErr != nil {
		return failed(first, firstErr)
	}
	// The records are written; a commit that is sent is seen through
	// even after an interrupt, so the account stays known.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settle)
	defer cancel()
	if err := p.cl.EndTransaction(cctx, kgo.TryCommit); err != nil {
		return 0, &ProduceError{Uncertain: [2]int{p.first, p.last}, Err: fmt.Errorf("committing %s to %s: %w", LineRange(p.first, p.last), p.res.Topic, err)}
	}
	p.res.Records += len(batch)
	p.res.Lines = p.last
	p.batch, p.lines, p.first = p.batch[:0], p.lines[:0], 0
	return 0, nil
}

// LineRange names input lines from to to: "line 3", "lines 1-3".
func LineRange(from, to int) string {
	if from == to {
		return fmt.Sprintf("line %d", from)
	}
	return fmt.Sprintf("lines %d-%d", from, to)
}
