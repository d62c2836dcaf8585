package transform

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/flecht-dev/flecht/sdk/abi"
	"github.com/flecht-dev/flecht/sdk/internal/bridge"
	"github.com/flecht-dev/flecht/sdk/wire"
)

// Handler transforms one record. What it sends and the state it sets
// with out are the record's result. Returning a Reject error makes the
// record invalid (the stage's invalid_messages policy decides); any other
// error, or a panic, stops the stage with nothing of the open transaction
// committed, and the record is read again once the module is fixed.
//
// A handler must be deterministic: its result may depend on the record,
// the state, the setup and the config records, and on nothing else, so a
// replay writes what the first run wrote. flecht runs every record on the
// instance as it was after setup (isolation: record, the default), so
// what a handler leaves in variables is gone before the next record: keep
// what must outlive a record in the state.
type Handler func(rec *Record, out *Output) error

// Setup is what the stage file gives the module: its config, and the
// output topics it may send to.
type Setup struct {
	ApplicationID string
	// Partition is the task's partition: one instance runs per task.
	Partition    int32
	OutputTopics []string
	// Module is the module file's name, as the stage file gives it.
	Module string
	// Config is the stage file's transform.config ({} when unset).
	Config wire.Object
	// Stateless: the stage keeps no state (transform.stateless); setting
	// state stops it.
	Stateless bool
}

var (
	handler Handler
	setupFn func(Setup) error
)

// Handle registers the module's handler. Call it from an init function:
// a module is a WebAssembly reactor, whose main never runs.
func Handle(h Handler) { handler = h }

// OnSetup registers a function that checks and keeps the module's setup;
// it runs once per instance before any record. Its error refuses the
// stage file: `flecht run` exits 2 before it connects, saying why.
func OnSetup(f func(Setup) error) { setupFn = f }

func init() {
	bridge.Transform = transformBatch
	bridge.Setup = setup
}

// Lookup finds the config record of key in the stage's config topics. The
// lookup is eventually consistent and outside the record's transaction:
// the same record may see another config after a replay.
func Lookup(key string) (wire.Object, bool) {
	b, ok := LookupBytes(key)
	if !ok {
		return nil, false
	}
	obj, err := wire.DecodeObject(b)
	if err != nil {
		return nil, false
	}
	return obj, true
}

// LookupBytes is Lookup without the decoding: the record's canonical JSON.
func LookupBytes(key string) ([]byte, bool) {
	if bridge.Lookup == nil {
		return nil, false
	}
	return bridge.Lookup(key)
}

// Level is a log line's level.
type Level int

// Log levels.
const (
	Debug Level = abi.LogDebug
	Info  Level = abi.LogInfo
	Warn  Level = abi.LogWarn
	Error Level = abi.LogError
)

// Logf writes one line into the stage's log, with the module's name and
// the task's partition. The host limits how many lines a module may write
// per second and says how many it dropped. Never log secrets.
func Logf(level Level, format string, args ...any) {
	if bridge.Log != nil {
		bridge.Log(int(level), fmt.Sprintf(format, args...))
	}
}

func setup(doc []byte) string {
	obj, err := wire.DecodeObject(doc)
	if err != nil {
		return "the setup document does not decode: " + err.Error()
	}
	s := Setup{Config: wire.Object{}}
	s.ApplicationID, _ = obj.String("application_id")
	s.Module, _ = obj.String("module")
	s.Stateless, _ = obj.Bool("stateless")
	if p, ok := obj.Int("partition"); ok {
		s.Partition = int32(p)
	}
	if c, ok := obj.Object("config"); ok {
		s.Config = c
	}
	if ts, ok := obj["output_topics"].([]any); ok {
		for _, t := range ts {
			if t, ok := t.(string); ok {
				s.OutputTopics = append(s.OutputTopics, t)
			}
		}
	}
	if handler == nil {
		return "the module registers no handler: call transform.Handle from an init function"
	}
	if setupFn == nil {
		return ""
	}
	if err := setupFn(s); err != nil {
		return err.Error()
	}
	return ""
}

var (
	batchReader abi.BatchReader
	results     abi.ResultWriter
	record      Record
	output      Output
)

// transformBatch runs the handler over every record of a batch, in order.
func transformBatch(batch []byte, cursor func(i int)) []byte {
	results.Reset()
	if err := batchReader.Reset(batch); err != nil {
		panic("flecht SDK: the host sent a batch that does not read: " + err.Error())
	}
	for i := 0; i < batchReader.Len(); i++ {
		cursor(i)
		// Read in place: a copy of the record per record costs a module
		// more than reading it.
		if err := batchReader.Next(&record.raw); err != nil {
			panic("flecht SDK: the host sent a batch that does not read: " + err.Error())
		}
		record.reset()
		runOne(&record)
	}
	return results.Bytes()
}

// runOne answers one record: its messages and state, a rejection, or a
// failure (a handler error or panic).
func runOne(rec *Record) {
	mark := results.Mark()
	results.Begin()
	output = Output{results: &results, scratch: output.scratch[:0], state: output.state[:0]}
	err := callHandler(rec, &output)
	if err == nil {
		err = output.err
	}
	if err == nil {
		results.End(output.action, output.state)
		return
	}
	results.Truncate(mark)
	var rejected *RejectError
	if errors.As(err, &rejected) {
		results.Rejected(rejected.Reason)
		return
	}
	results.Failed(err.Error())
}

func callHandler(rec *Record, out *Output) (err error) {
	defer func() {
		if p := recover(); p != nil {
			stack := string(debug.Stack())
			printPanic(fmt.Sprintf("panic: %v\n%s", p, stack))
			err = fmt.Errorf("panic: %v%s", p, panicSite(stack))
		}
	}()
	return handler(rec, out)
}

// printPanic shows a recovered panic's whole stack where the module runs:
// inside WebAssembly on standard error, which the host logs (wasm.go); the
// failure itself names only where the panic happened.
var printPanic = func(string) {}

// panicSite finds, in a stack from debug.Stack inside a deferred recover,
// the frame that panicked: the function after the runtime's panic call,
// and its file and line.
func panicSite(stack string) string {
	lines := strings.Split(stack, "\n")
	for i, l := range lines {
		// "panic(...)", its file, then the frame that called it.
		if strings.HasPrefix(l, "panic(") && i+3 < len(lines) {
			fn := lines[i+2]
			if j := strings.LastIndexByte(fn, '('); j > 0 {
				fn = fn[:j]
			}
			at := strings.TrimSpace(lines[i+3])
			if j := strings.LastIndexByte(at, ' '); j > 0 {
				at = at[:j]
			}
			return fmt.Sprintf(" (in %s at %s)", fn, at)
		}
	}
	return ""
}
