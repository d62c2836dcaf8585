package lineage

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Stamp is the lineage a record's headers carry.
type Stamp struct {
	Source     Source
	Logic      string
	Generation int64
}

// Read reads a record's lineage headers. found says whether it carries
// any of them; a record with some but not all, or with a value that does
// not parse, is an error naming the header: something other than a flecht
// stage wrote it, or changed it. When a header repeats, the last counts,
// as Kafka clients read them.
func Read(headers []kgo.RecordHeader) (s Stamp, found bool, err error) {
	var src, logic, gen *string
	for i := range headers {
		h := &headers[i]
		v := string(h.Value)
		switch h.Key {
		case HeaderSource:
			src = &v
		case HeaderLogic:
			logic = &v
		case HeaderGeneration:
			gen = &v
		}
	}
	if src == nil && logic == nil && gen == nil {
		return Stamp{}, false, nil
	}
	for _, h := range []struct {
		name string
		v    *string
	}{{HeaderSource, src}, {HeaderLogic, logic}, {HeaderGeneration, gen}} {
		if h.v == nil {
			return Stamp{}, true, fmt.Errorf("header %s is missing beside the other lineage headers", h.name)
		}
	}
	if s.Source, err = ParseSource(*src); err != nil {
		return Stamp{}, true, fmt.Errorf("header %s: %w", HeaderSource, err)
	}
	if s.Generation, err = ParseGeneration(*gen); err != nil {
		return Stamp{}, true, fmt.Errorf("header %s: %w", HeaderGeneration, err)
	}
	if *logic == "" {
		return Stamp{}, true, fmt.Errorf("header %s is empty", HeaderLogic)
	}
	s.Logic = *logic
	return s, true, nil
}

// Headers are a stamp's headers, in the order Read takes them.
func (s Stamp) Headers() []kgo.RecordHeader {
	return []kgo.RecordHeader{
		{Key: HeaderSource, Value: []byte(s.Source.String())},
		{Key: HeaderLogic, Value: []byte(s.Logic)},
		{Key: HeaderGeneration, Value: []byte(fmt.Sprint(s.Generation))},
	}
}

// OriginOf is a record's origin header, if it carries one.
func OriginOf(headers []kgo.RecordHeader) (string, bool) {
	for i := len(headers) - 1; i >= 0; i-- {
		if headers[i].Key == HeaderOrigin {
			return string(headers[i].Value), true
		}
	}
	return "", false
}
