package replay

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/flecht-dev/flecht/internal/boundedread"
	"github.com/flecht-dev/flecht/internal/stagefile"
)

// Target kinds.
const (
	TargetEarliest = "earliest"
	TargetDatetime = "datetime"
	TargetDuration = "duration"
	TargetOffset   = "offset"
	TargetFile     = "file"
)

// Target is where the input offsets go.
type Target struct {
	Kind string
	// Time is the instant of a datetime or duration target.
	Time time.Time
	// Duration is the --by-duration value (Time = now - Duration).
	Duration time.Duration
	// Offset is the --to-offset value, for every input partition.
	Offset int64
	// File holds the --from-file offsets, and FilePath where they came
	// from.
	File     map[TP]int64
	FilePath string
}

// TimeBased reports whether the target is resolved from record timestamps.
func (t Target) TimeBased() bool { return t.Kind == TargetDatetime || t.Kind == TargetDuration }

// BeforeEpoch reports whether a time target lies before 1970: record
// timestamps cannot, and ListOffsets reads negative times as special
// queries (-1 latest, -2 earliest) or refuses them.
func (t Target) BeforeEpoch() bool { return t.TimeBased() && t.Time.UnixMilli() < 0 }

// String describes the target for the plan.
func (t Target) String() string {
	switch t.Kind {
	case TargetDatetime:
		return "datetime " + t.Time.UTC().Format(time.RFC3339Nano)
	case TargetDuration:
		return fmt.Sprintf("duration %s (since %s)", t.Duration, t.Time.UTC().Format(time.RFC3339))
	case TargetOffset:
		return "offset " + strconv.FormatInt(t.Offset, 10)
	case TargetFile:
		return "file " + t.FilePath
	default:
		return TargetEarliest
	}
}

// OffsetsFile is what a --from-file is to a read: a line per partition
// of a few hundred bytes at most, so 16 MiB holds tens of thousands.
var OffsetsFile = boundedread.Kind{Name: "offsets file", Limit: 16 << 20}

// ReadOffsetsFile reads and parses the --from-file at path
// (ParseOffsetsCSV); errors name the file.
func ReadOffsetsFile(path string) (map[TP]int64, error) {
	data, err := OffsetsFile.ReadFile(path)
	if err != nil {
		return nil, err
	}
	offs, err := ParseOffsetsCSV(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("offsets file %s: %w", path, err)
	}
	return offs, nil
}

// ParseOffsetsCSV reads --from-file offsets: one "topic,partition,offset"
// record per line, as `kafka-consumer-groups --reset-offsets --export`
// writes them. A first line "topic,partition,offset" is a header; empty
// lines and lines starting with # are skipped; surrounding spaces are
// trimmed. Every value is checked: a valid topic name, a partition and an
// offset that are whole numbers of 0 or more, no partition twice.
func ParseOffsetsCSV(r io.Reader) (map[TP]int64, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true
	out := map[TP]int64{}
	first := true
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, fmt.Errorf("line %d: %v", pe.Line, pe.Err)
			}
			return nil, err
		}
		line, _ := cr.FieldPos(0)
		if len(rec) != 3 {
			return nil, fmt.Errorf("line %d: want topic,partition,offset, got %d fields", line, len(rec))
		}
		topic, ps, offs := strings.TrimSpace(rec[0]), strings.TrimSpace(rec[1]), strings.TrimSpace(rec[2])
		if first {
			first = false
			if strings.EqualFold(topic, "topic") && strings.EqualFold(ps, "partition") && strings.EqualFold(offs, "offset") {
				continue
			}
		}
		if !stagefile.ValidTopicName(topic) {
			return nil, fmt.Errorf("line %d: %s is not a Kafka topic name", line, boundedread.Quote(topic))
		}
		p, err := strconv.ParseInt(ps, 10, 32)
		if err != nil || p < 0 {
			return nil, fmt.Errorf("line %d: partition %s: want a whole number, 0 or more", line, boundedread.Quote(ps))
		}
		o, err := strconv.ParseInt(offs, 10, 64)
		if err != nil || o < 0 {
			return nil, fmt.Errorf("line %d: offset %s: want a whole number, 0 or more", line, boundedread.Quote(offs))
		}
		tp := TP{Topic: topic, Partition: int32(p)}
		if _, dup := out[tp]; dup {
			return nil, fmt.Errorf("line %d: %s/%d is listed twice", line, topic, p)
		}
		out[tp] = o
	}
	if len(out) == 0 {
		return nil, errors.New("no offsets in the file")
	}
	return out, nil
}
