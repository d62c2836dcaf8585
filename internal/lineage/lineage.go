// Package lineage names where a record written by a flecht stage came
// from, in headers any Kafka tool can read (docs/contract.md §12):
// the source record, the logic that made it, and the generation of the
// stage's output it belongs to. Values are never touched: a reader that
// ignores headers sees what it saw before lineage existed.
//
// The generation travels with the stage's committed input offsets, in
// their metadata, so it commits in the same transaction as the outputs
// it labels: a replay that resets the offsets starts the next one.
package lineage

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Header names. Every record a transformer writes (outputs and dead
// letters) carries Source, Logic and Generation.
const (
	// HeaderSource is the record it was made from, as Source.String:
	// "topic/partition@offset".
	HeaderSource = "flecht.lineage.source"
	// HeaderLogic is the logic that made it, as Logic.
	HeaderLogic = "flecht.lineage.logic"
	// HeaderGeneration is the output generation, a decimal from 1.
	HeaderGeneration = "flecht.lineage.generation"
)

// Source is one record's place in Kafka.
type Source struct {
	Topic     string
	Partition int32
	Offset    int64
}

// String is the header's form, "topic/partition@offset". Kafka topic
// names hold neither '/' nor '@', so it reads back unambiguously.
func (s Source) String() string {
	return s.Topic + "/" + strconv.FormatInt(int64(s.Partition), 10) + "@" + strconv.FormatInt(s.Offset, 10)
}

// AppendSource appends s.String() to b without allocating a string: the
// runner stamps it on every output.
func AppendSource(b []byte, topic string, partition int32, offset int64) []byte {
	b = append(b, topic...)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(partition), 10)
	b = append(b, '@')
	return strconv.AppendInt(b, offset, 10)
}

// SourcePrefix is Source.String up to the offset, "topic/partition@": a
// stage that names many records of one partition appends each offset to
// it (strconv.AppendInt).
func SourcePrefix(topic string, partition int32) string {
	return topic + "/" + strconv.FormatInt(int64(partition), 10) + "@"
}

// ParseSource reads "topic/partition@offset" (a header value, or what an
// operator typed), refusing anything else with a message that shows the
// form.
func ParseSource(s string) (Source, error) {
	bad := func(why string) (Source, error) {
		return Source{}, fmt.Errorf("%q is not a record's place (want topic/partition@offset): %s", s, why)
	}
	slash := strings.LastIndexByte(s, '/')
	if slash <= 0 {
		return bad("no topic")
	}
	at := strings.IndexByte(s[slash+1:], '@')
	if at < 0 {
		return bad("no @offset")
	}
	topic, part, off := s[:slash], s[slash+1:slash+1+at], s[slash+2+at:]
	if strings.ContainsAny(topic, "/@") {
		return bad("a topic name holds neither / nor @")
	}
	p, err := strconv.ParseInt(part, 10, 32)
	if err != nil || p < 0 || part != strconv.FormatInt(p, 10) {
		return bad("the partition is not a number from 0")
	}
	o, err := strconv.ParseInt(off, 10, 64)
	if err != nil || o < 0 || off != strconv.FormatInt(o, 10) {
		return bad("the offset is not a number from 0")
	}
	return Source{Topic: topic, Partition: int32(p), Offset: o}, nil
}

// ModuleLogic names a module by the first 16 hex digits of its sha256,
// "module:sha256:0123456789abcdef".
func ModuleLogic(sha256Hex string) string {
	if len(sha256Hex) > 16 {
		sha256Hex = sha256Hex[:16]
	}
	return "module:sha256:" + strings.ToLower(sha256Hex)
}

// BuiltinLogic names a builtin by its name and the flecht version that
// carries it, "builtin:count@0.31.0".
func BuiltinLogic(name, version string) string {
	return "builtin:" + name + "@" + version
}

// ModuleDigest is the sha256 prefix a ModuleLogic value names, and
// whether it names one.
func ModuleDigest(logic string) (string, bool) {
	d, ok := strings.CutPrefix(logic, "module:sha256:")
	return d, ok && d != ""
}

// MatchesModule says whether a module file's full hex sha256 is the one
// the logic value names.
func MatchesModule(logic, sha256Hex string) bool {
	d, ok := ModuleDigest(logic)
	return ok && strings.HasPrefix(strings.ToLower(sha256Hex), d)
}

// FirstGeneration is the generation of a stage whose committed offsets
// carry none: one never replayed, or one that ran before lineage.
const FirstGeneration = 1

// generationKey prefixes the generation in offset commit metadata.
const generationKey = "flecht.generation="

// OffsetMetadata is the metadata a stage commits its input offsets with.
func OffsetMetadata(generation int64) string {
	return generationKey + strconv.FormatInt(generation, 10)
}

// ErrNoGeneration: offset metadata that names no generation (empty, or
// written by another client such as the Python library).
var ErrNoGeneration = errors.New("no generation in the offset metadata")

// GenerationOf reads the generation from committed offset metadata.
// Metadata without one answers FirstGeneration and ErrNoGeneration, so a
// caller that does not care can ignore the error.
func GenerationOf(metadata string) (int64, error) {
	v, ok := strings.CutPrefix(metadata, generationKey)
	if !ok {
		return FirstGeneration, ErrNoGeneration
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < FirstGeneration || v != strconv.FormatInt(n, 10) {
		return FirstGeneration, fmt.Errorf("offset metadata %q: the generation is not a number from %d", metadata, FirstGeneration)
	}
	return n, nil
}

// ParseGeneration reads a generation header's value.
func ParseGeneration(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < FirstGeneration || v != strconv.FormatInt(n, 10) {
		return 0, fmt.Errorf("generation %q is not a number from %d", v, FirstGeneration)
	}
	return n, nil
}
