package abi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

var le = binary.LittleEndian

// BatchWriter builds the batch the host hands a module. Reuse one: Reset
// keeps its buffer.
type BatchWriter struct {
	buf []byte
	n   uint32
}

// Reset empties the batch.
func (w *BatchWriter) Reset() {
	w.buf = append(w.buf[:0], make([]byte, BatchHeaderSize)...)
	w.n = 0
}

// Add appends one record.
func (w *BatchWriter) Add(r *Record) {
	if len(w.buf) < BatchHeaderSize {
		w.Reset()
	}
	b := w.buf
	b = le.AppendUint32(b, r.Flags)
	b = le.AppendUint32(b, uint32(r.Partition))
	b = le.AppendUint64(b, uint64(r.Offset))
	b = le.AppendUint64(b, uint64(r.Timestamp))
	b = appendBytes(b, r.Topic)
	b = appendBytes(b, r.Key)
	b = appendBytes(b, r.Value)
	b = appendBytes(b, r.StateKey)
	b = appendBytes(b, r.State)
	b = appendHeaders(b, r.Headers)
	w.buf = b
	w.n++
	le.PutUint32(w.buf[0:], w.n)
}

// Len is the number of records added.
func (w *BatchWriter) Len() int { return int(w.n) }

// Bytes is the batch; it aliases the writer's buffer.
func (w *BatchWriter) Bytes() []byte {
	if len(w.buf) < BatchHeaderSize {
		w.Reset()
	}
	return w.buf
}

// Size is the batch's length in bytes so far.
func (w *BatchWriter) Size() int { return len(w.Bytes()) }

func appendBytes(b, v []byte) []byte {
	b = le.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

func appendHeaders(b []byte, hs []Header) []byte {
	b = le.AppendUint32(b, uint32(len(hs)))
	for _, h := range hs {
		b = appendBytes(b, h.Key)
		if h.Value == nil {
			b = le.AppendUint32(b, nullLength)
			continue
		}
		b = appendBytes(b, h.Value)
	}
	return b
}

// ErrTruncated is wrapped by every reader error about a length or field
// that runs past the end of the input.
var ErrTruncated = errors.New("runs past the end")

// reader reads fields from b, remembering the first error.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s at byte %d %w (%d bytes in all)", what, r.off, ErrTruncated, len(r.b))
	}
}

func (r *reader) u32(what string) uint32 {
	if r.err != nil {
		return 0
	}
	if len(r.b)-r.off < 4 {
		r.fail(what)
		return 0
	}
	v := le.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

func (r *reader) u64(what string) uint64 {
	if r.err != nil {
		return 0
	}
	if len(r.b)-r.off < 8 {
		r.fail(what)
		return 0
	}
	v := le.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

func (r *reader) bytes(what string) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b)-r.off < 4 {
		r.fail(what + " length") // only on the error path: no allocation per field
		return nil
	}
	n := le.Uint32(r.b[r.off:])
	r.off += 4
	if uint64(n) > uint64(len(r.b)-r.off) {
		r.off -= 4
		r.fail(fmt.Sprintf("%s of %d bytes", what, n))
		return nil
	}
	v := r.b[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return v
}

// headers reads a header list into dst (reused).
func (r *reader) headers(dst []Header) []Header {
	n := r.u32("header count")
	dst = dst[:0]
	// Each header takes at least 8 bytes: a count past that is a lie, and
	// must not make the reader allocate for it.
	if r.err == nil && uint64(n)*8 > uint64(len(r.b)-r.off) {
		r.fail(fmt.Sprintf("%d headers", n))
	}
	for i := uint32(0); i < n && r.err == nil; i++ {
		k := r.bytes("header name")
		var v []byte
		if r.err == nil && len(r.b)-r.off >= 4 && le.Uint32(r.b[r.off:]) == nullLength {
			r.off += 4
		} else {
			v = r.bytes("header value")
			if v == nil {
				v = []byte{}
			}
		}
		dst = append(dst, Header{Key: k, Value: v})
	}
	return dst
}

// BatchReader reads a batch (the module's side).
type BatchReader struct {
	r     reader
	count int
	read  int
}

// Reset starts reading batch b.
func (br *BatchReader) Reset(b []byte) error {
	br.r = reader{b: b}
	br.read = 0
	n := br.r.u32("record count")
	br.r.u32("cursor")
	if br.r.err != nil {
		return br.r.err
	}
	// Each record takes at least 48 bytes.
	if uint64(n)*48 > uint64(len(b)) {
		return fmt.Errorf("batch claims %d records in %d bytes: %w", n, len(b), ErrTruncated)
	}
	br.count = int(n)
	return nil
}

// Len is the number of records in the batch.
func (br *BatchReader) Len() int { return br.count }

// Next reads the next record into rec; its slices alias the batch.
func (br *BatchReader) Next(rec *Record) error {
	if br.read >= br.count {
		return errors.New("no more records in the batch")
	}
	r := &br.r
	// The fixed part at once, the byte fields by a fast path: a module
	// reads every record, and each call costs it more than natively.
	if r.err == nil && len(r.b)-r.off >= 24 {
		b := r.b[r.off:]
		rec.Flags = le.Uint32(b)
		rec.Partition = int32(le.Uint32(b[4:]))
		rec.Offset = int64(le.Uint64(b[8:]))
		rec.Timestamp = int64(le.Uint64(b[16:]))
		r.off += 24
	} else {
		r.fail("record")
	}
	// The five byte fields in one loop, each a slice of the batch: a
	// function call per field costs a module more than the field itself.
	fields := [5]*[]byte{&rec.Topic, &rec.Key, &rec.Value, &rec.StateKey, &rec.State}
	for i, f := range fields {
		if r.err == nil && len(r.b)-r.off >= 4 {
			if n := int(le.Uint32(r.b[r.off:])); n >= 0 && n <= len(r.b)-r.off-4 {
				*f = r.b[r.off+4 : r.off+4+n : r.off+4+n]
				r.off += 4 + n
				continue
			}
		}
		*f = r.bytes(fieldNames[i])
	}
	if r.err == nil && len(r.b)-r.off >= 4 && le.Uint32(r.b[r.off:]) == 0 {
		r.off += 4 // no headers, the usual case
		rec.Headers = rec.Headers[:0]
	} else {
		rec.Headers = r.headers(rec.Headers)
	}
	if r.err != nil {
		return fmt.Errorf("record %d: %w", br.read, r.err)
	}
	br.read++
	return nil
}

// fieldNames name a record's byte fields in reader errors.
var fieldNames = [5]string{"topic", "key", "value", "state key", "state"}

// ResultWriter builds a module's results (the module's side), one per
// record in the batch's order. Reuse one: Reset keeps its buffer.
type ResultWriter struct {
	buf []byte
	// countAt is where the open done result's message count sits, or -1.
	countAt int
	// valueAt is where the open message's value length sits.
	valueAt int
}

// Reset empties the results.
func (w *ResultWriter) Reset() {
	w.buf = w.buf[:0]
	w.countAt = -1
}

// Grow makes room for n more bytes of results, so that results of that
// size need no allocation.
func (w *ResultWriter) Grow(n int) { w.buf = slices.Grow(w.buf, n) }

// Begin starts the result of a transformed record: its messages, added
// with Message, then its state action, given to End.
func (w *ResultWriter) Begin() {
	w.buf = le.AppendUint32(w.buf, ResultDone)
	w.countAt = len(w.buf)
	w.buf = le.AppendUint32(w.buf, 0)
}

// Message adds an output record to the result begun last.
func (w *ResultWriter) Message(m *Message) {
	if w.countAt < 0 {
		panic("abi: Message outside Begin and End")
	}
	b := w.buf
	b = le.AppendUint32(b, m.Flags)
	b = appendBytes(b, m.Topic)
	b = appendBytes(b, m.Key)
	if m.Flags&MessageValueNull == 0 {
		b = appendBytes(b, m.Value)
	}
	if m.Flags&MessagePartition != 0 {
		b = le.AppendUint32(b, uint32(m.Partition))
	}
	if m.Flags&MessageTimestamp != 0 {
		b = le.AppendUint64(b, uint64(m.Timestamp))
	}
	if m.Flags&MessageHeaders != 0 {
		b = appendHeaders(b, m.Headers)
	}
	w.buf = b
	le.PutUint32(w.buf[w.countAt:], le.Uint32(w.buf[w.countAt:])+1)
}

// OpenMessage starts an output record whose value the caller appends to
// the returned bytes (the results so far), then hands them to
// CloseMessage; m.Value is ignored. To drop the record instead, Truncate
// to the Mark taken before.
func (w *ResultWriter) OpenMessage(m *Message) []byte {
	if w.countAt < 0 {
		panic("abi: Message outside Begin and End")
	}
	b := le.AppendUint32(w.buf, m.Flags&^MessageValueNull)
	b = appendBytes(b, m.Topic)
	b = appendBytes(b, m.Key)
	w.valueAt = len(b)
	return le.AppendUint32(b, 0)
}

// CloseMessage ends the record OpenMessage started: b is what it returned
// with the value appended.
func (w *ResultWriter) CloseMessage(b []byte, m *Message) {
	le.PutUint32(b[w.valueAt:], uint32(len(b)-w.valueAt-4))
	if m.Flags&MessagePartition != 0 {
		b = le.AppendUint32(b, uint32(m.Partition))
	}
	if m.Flags&MessageTimestamp != 0 {
		b = le.AppendUint64(b, uint64(m.Timestamp))
	}
	if m.Flags&MessageHeaders != 0 {
		b = appendHeaders(b, m.Headers)
	}
	w.buf = b
	le.PutUint32(w.buf[w.countAt:], le.Uint32(w.buf[w.countAt:])+1)
}

// End ends the result begun last with its state action; state is the new
// state for StateSet.
func (w *ResultWriter) End(action uint32, state []byte) {
	if w.countAt < 0 {
		panic("abi: End without Begin")
	}
	w.buf = le.AppendUint32(w.buf, action)
	if action == StateSet {
		w.buf = appendBytes(w.buf, state)
	}
	w.countAt = -1
}

// Rejected answers that the record is invalid.
func (w *ResultWriter) Rejected(reason string) {
	w.buf = le.AppendUint32(w.buf, ResultRejected)
	w.buf = appendBytes(w.buf, []byte(reason))
	w.countAt = -1
}

// Failed answers that the module failed on the record.
func (w *ResultWriter) Failed(msg string) {
	w.buf = le.AppendUint32(w.buf, ResultFailed)
	w.buf = appendBytes(w.buf, []byte(msg))
	w.countAt = -1
}

// Bytes is the results; they alias the writer's buffer.
func (w *ResultWriter) Bytes() []byte { return w.buf }

// Mark is the results' length so far, for Truncate.
func (w *ResultWriter) Mark() int { return len(w.buf) }

// Truncate drops what was written after mark: a result abandoned half
// way, to be answered differently, or a message of the open result.
func (w *ResultWriter) Truncate(mark int) {
	w.buf = w.buf[:mark]
	if mark <= w.countAt {
		w.countAt = -1 // the result begun last is dropped too
	}
}

// ResultReader reads a module's results (the host's side).
type ResultReader struct {
	r    reader
	read int
}

// Reset starts reading results b.
func (rr *ResultReader) Reset(b []byte) {
	rr.r = reader{b: b}
	rr.read = 0
}

// Next reads the next result into res; its slices alias the results, and
// res.Messages is reused.
func (rr *ResultReader) Next(res *Result) error {
	r := &rr.r
	res.Kind = r.u32("result kind")
	res.Reason, res.State, res.StateAction = nil, nil, StateKeep
	res.Messages = res.Messages[:0]
	switch res.Kind {
	case ResultRejected, ResultFailed:
		res.Reason = r.bytes("reason")
	case ResultDone:
		n := r.u32("message count")
		// A message takes at least 12 bytes.
		if r.err == nil && uint64(n)*12 > uint64(len(r.b)-r.off) {
			r.fail(fmt.Sprintf("%d messages", n))
		}
		for i := uint32(0); i < n && r.err == nil; i++ {
			res.Messages = append(res.Messages, Message{})
			readMessage(r, &res.Messages[len(res.Messages)-1])
			if r.err != nil {
				r.err = fmt.Errorf("message %d: %w", i, r.err)
			}
		}
		res.StateAction = r.u32("state action")
		switch res.StateAction {
		case StateKeep, StateDelete:
		case StateSet:
			res.State = r.bytes("state")
		default:
			if r.err == nil {
				r.err = fmt.Errorf("unknown state action %d", res.StateAction)
			}
		}
	default:
		if r.err == nil {
			r.err = fmt.Errorf("unknown result kind %d", res.Kind)
		}
	}
	if r.err != nil {
		return fmt.Errorf("result %d: %w", rr.read, r.err)
	}
	rr.read++
	return nil
}

// End checks that every byte of the results was read.
func (rr *ResultReader) End() error {
	if rest := len(rr.r.b) - rr.r.off; rest != 0 {
		return fmt.Errorf("%d bytes after the last of %d results", rest, rr.read)
	}
	return nil
}

func readMessage(r *reader, m *Message) {
	hs := m.Headers
	*m = Message{Flags: r.u32("message flags")}
	m.Topic = r.bytes("topic")
	m.Key = r.bytes("key")
	if m.Flags&MessageValueNull == 0 {
		m.Value = r.bytes("value")
	}
	if m.Flags&MessagePartition != 0 {
		m.Partition = int32(r.u32("partition"))
	}
	if m.Flags&MessageTimestamp != 0 {
		m.Timestamp = int64(r.u64("timestamp"))
	}
	if m.Flags&MessageHeaders != 0 {
		m.Headers = r.headers(hs)
	}
}
