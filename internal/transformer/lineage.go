package transformer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flecht-dev/flecht/internal/lineage"
)

// Every record a task writes, outputs and dead letters, names where it
// came from in the lineage headers (docs/contract.md §12): its input
// record, the logic that made it and the generation of the stage's
// output. The generation is read from the task's committed input offsets
// when the task starts and committed back with them in every transaction,
// so a replay, which resets those offsets with the next generation, starts
// the next one.

// LogicNamer is a transformer that names its logic for the lineage
// headers: lineage.ModuleLogic or lineage.BuiltinLogic. The runner asks
// once, when it starts.
type LogicNamer interface {
	Logic() string
}

// unnamedLogic labels the outputs of a transformer that names no logic
// (Go code handed to the runner directly, as the tests do).
const unnamedLogic = "unnamed"

// lineagePrefix starts the name of every lineage header.
const lineagePrefix = "flecht.lineage."

// stamper gives a task's outputs their lineage headers. Outputs live
// until their transaction commits, so nothing handed out is ever written
// again: headers and source values are cut from chunks that only grow,
// and a full chunk is left to the records that hold parts of it. A
// record's outputs share its source value; the logic and generation
// values are the task's, shared by all.
type stamper struct {
	on         bool
	logic, gen []byte
	headers    []kgo.RecordHeader
	bytes      []byte
	// src is the source value of rec, the record last stamped for, and
	// prefix its "topic/partition@" (a task reads one partition number).
	rec    *kgo.Record
	src    []byte
	topic  string
	part   int32
	prefix []byte
}

// Chunk sizes: a chunk serves hundreds of outputs.
const (
	headerChunk = 1024
	byteChunk   = 16 << 10
)

func newStamper(on bool, logic string, generation int64) stamper {
	return stamper{on: on, logic: []byte(logic), gen: strconv.AppendInt(nil, generation, 10)}
}

// stamp gives out, made from rec, the lineage headers in place of any it
// inherited from rec (a builtin keeps its input's headers, and the input
// of a stage may be another stage's output): a record names only the
// record it was made from. Lineage off, it only drops inherited ones.
func (s *stamper) stamp(out, rec *kgo.Record) {
	inherited := lineageHeaders(out.Headers)
	if !s.on && inherited == 0 {
		return
	}
	n := len(out.Headers) - inherited
	if s.on {
		n += 3
	}
	hs := s.cutHeaders(n)
	for _, h := range out.Headers {
		if !isLineage(h.Key) {
			hs = append(hs, h)
		}
	}
	if s.on {
		hs = append(hs,
			kgo.RecordHeader{Key: lineage.HeaderSource, Value: s.source(rec)},
			kgo.RecordHeader{Key: lineage.HeaderLogic, Value: s.logic},
			kgo.RecordHeader{Key: lineage.HeaderGeneration, Value: s.gen},
		)
	}
	out.Headers = hs
}

func isLineage(key string) bool { return strings.HasPrefix(key, lineagePrefix) }

// lineageHeaders counts the lineage headers among hs.
func lineageHeaders(hs []kgo.RecordHeader) int {
	n := 0
	for i := range hs {
		if isLineage(hs[i].Key) {
			n++
		}
	}
	return n
}

// cutHeaders is an empty slice with room for n headers, its own.
func (s *stamper) cutHeaders(n int) []kgo.RecordHeader {
	if cap(s.headers)-len(s.headers) < n {
		s.headers = make([]kgo.RecordHeader, 0, max(headerChunk, n))
	}
	l := len(s.headers)
	s.headers = s.headers[:l+n]
	return s.headers[l : l : l+n]
}

// source is rec's "topic/partition@offset", made once per record.
func (s *stamper) source(rec *kgo.Record) []byte {
	if s.rec == rec && s.src != nil {
		return s.src
	}
	if rec.Topic != s.topic || rec.Partition != s.part || s.prefix == nil {
		s.topic, s.part, s.prefix = rec.Topic, rec.Partition, []byte(lineage.SourcePrefix(rec.Topic, rec.Partition))
	}
	need := len(s.prefix) + 20 // and the offset
	if cap(s.bytes)-len(s.bytes) < need {
		s.bytes = make([]byte, 0, max(byteChunk, need))
	}
	l := len(s.bytes)
	s.bytes = strconv.AppendInt(append(s.bytes, s.prefix...), rec.Offset, 10)
	s.rec, s.src = rec, s.bytes[l:len(s.bytes):len(s.bytes)]
	return s.src
}

// readGeneration reads the generation the task's committed input offsets
// carry: the highest among its input topics (they agree, unless a topic
// was added since), FirstGeneration when none carries one (never
// committed, committed before lineage, or by the Python library). A
// generation that does not read is one too, said in the log. The fence
// before it aborted the previous owner's open transaction, so the offsets
// are stable once its markers are written.
func (r *Runner) readGeneration(ctx context.Context, n int32) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, recoveryTimeout)
	defer cancel()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group, req.RequireStable = r.stage.ApplicationID, true
	for _, topic := range r.stage.InputTopics {
		t := kmsg.NewOffsetFetchRequestTopic()
		t.Topic, t.Partitions = topic, []int32{n}
		req.Topics = append(req.Topics, t)
	}
	backoff := 10 * time.Millisecond
	for {
		metas, err := fetchMetadata(ctx, r.admin, req)
		if err == nil {
			gen := int64(lineage.FirstGeneration)
			for _, m := range metas {
				g, err := lineage.GenerationOf(m)
				if err != nil && !errors.Is(err, lineage.ErrNoGeneration) {
					r.log.Warn("committed offset metadata names no generation flecht reads; the task writes generation "+strconv.Itoa(lineage.FirstGeneration),
						"partition", n, "error", err)
				}
				gen = max(gen, g)
			}
			return gen, nil
		}
		if !errors.Is(err, kerr.UnstableOffsetCommit) && !errors.Is(err, kerr.CoordinatorLoadInProgress) &&
			!errors.Is(err, kerr.NotCoordinator) && !errors.Is(err, kerr.CoordinatorNotAvailable) {
			return 0, fmt.Errorf("task %d: reading the generation of its committed offsets: %w", n, err)
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("task %d: reading the generation of its committed offsets: %w (last: %v)", n, ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 500*time.Millisecond)
	}
}

// fetchMetadata sends req and returns the metadata of every partition's
// committed offset ("" where none is committed).
func fetchMetadata(ctx context.Context, cl *kgo.Client, req *kmsg.OffsetFetchRequest) ([]string, error) {
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	var metas []string
	add := func(code int16, meta *string) error {
		if err := kerr.ErrorForCode(code); err != nil {
			return err
		}
		if meta != nil {
			metas = append(metas, *meta)
		}
		return nil
	}
	for _, g := range resp.Groups { // v8+
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return nil, err
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				if err := add(p.ErrorCode, p.Metadata); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := add(p.ErrorCode, p.Metadata); err != nil {
				return nil, err
			}
		}
	}
	return metas, nil
}
