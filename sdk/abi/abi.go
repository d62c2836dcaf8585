// Package abi is flecht's WebAssembly transform ABI: the names a module
// exports and imports, and the byte layout of what crosses between the
// host (flecht run) and the module. docs/modules.md describes the same
// contract for any language; the host and the Go SDK both use this
// package, so the two sides cannot drift apart.
//
// Every integer is little-endian. A "bytes" field is a u32 length followed
// by that many bytes. Batches go host → module, results module → host.
//
// The readers never trust a length: what a module returns is input to the
// host, and a length past the end is an error, never a panic.
package abi

import (
	"strconv"
	"strings"
)

// Version is the ABI version this package speaks. A module declares the
// versions it speaks by exporting a function named VersionExport(v) for
// each; the host picks the highest it knows.
const Version = 1

// Names a module exports.
const (
	// ExportVersionPrefix + the version number ("flecht_abi_v1"): a
	// function taking and returning nothing, never called, that declares
	// the ABI version.
	ExportVersionPrefix = "flecht_abi_v"
	// ExportMemory is the module's linear memory.
	ExportMemory = "memory"
	// ExportBuffer is `flecht_buffer(size i32) -> i32`: the address of a
	// module-owned buffer of at least size bytes, where the host writes
	// the input of the next call. 0 means the module could not allocate.
	ExportBuffer = "flecht_buffer"
	// ExportTransform is `flecht_transform(len i32) -> i64`: transform the
	// batch of len bytes in the buffer; the result is address<<32 | length
	// of the results, which stay valid until the next call.
	ExportTransform = "flecht_transform"
	// ExportInit is the optional `flecht_init(len i32) -> i64`: called once
	// per instance, before any batch, with the setup document (JSON) in
	// the buffer. An empty result accepts it; otherwise the result is a
	// UTF-8 message saying why the module refuses its configuration.
	ExportInit = "flecht_init"
	// ExportInitialize is a WASI reactor's initialiser, called first.
	ExportInitialize = "_initialize"
	// ExportStart is a WASI command's entry point; a transform module is a
	// reactor and must not export it.
	ExportStart = "_start"
)

// VersionExport is the export that declares ABI version v.
func VersionExport(v int) string { return ExportVersionPrefix + strconv.Itoa(v) }

// ParseVersionExport reads the version an export name declares: ok is
// false for any other name, and for a suffix that is not a plain
// positive decimal number.
func ParseVersionExport(name string) (v int, ok bool) {
	digits, found := strings.CutPrefix(name, ExportVersionPrefix)
	if !found || digits == "" || len(digits) > 9 || digits[0] == '0' {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.Atoi(digits)
	return v, err == nil
}

// The host module a module may import from, besides the WASI stand-ins.
const (
	HostModule = "flecht"
	// HostConfigGet is `config_get(key_ptr, key_len, buf_ptr, buf_cap i32)
	// -> i32`: the config record of that key from the stage's config
	// topics, as canonical JSON. It returns -1 when there is none, else the
	// record's length; the record is written to buf only when it fits.
	HostConfigGet = "config_get"
	// HostLog is `log(level, ptr, len i32)`: one line into the stage's
	// log, rate-limited, with the module's name.
	HostLog = "log"
	// HostJSONSet is `json_set(obj_ptr, obj_len, name_ptr, name_len,
	// value_ptr, value_len, out_ptr, out_cap i32) -> i32`: the canonical
	// JSON of object obj (empty: {}) with member name set to the JSON value
	// value, as the Python library would write it. It returns the length,
	// writing it to out only when it fits, or JSONNotAnObject or
	// JSONBadValue.
	HostJSONSet = "json_set"
)

// What json_set returns instead of a length.
const (
	JSONNotAnObject = -1 // obj is not one JSON object
	JSONBadValue    = -2 // value is not one JSON value
)

// Log levels of HostLog.
const (
	LogDebug = 0
	LogInfo  = 1
	LogWarn  = 2
	LogError = 3
)

// The batch header: the record count, then the cursor, which the module
// sets to the index of the record it is working on before it works on it.
// The host's clock and random stand-ins read it: each record sees its own
// event time and its own random seed.
const (
	BatchHeaderSize = 8
	CursorOffset    = 4
)

// Record flags.
const (
	// RecordValueNull: the value is null (a tombstone).
	RecordValueNull = 1 << 0
	// RecordKeyNull: the key is null.
	RecordKeyNull = 1 << 1
	// RecordHasState: the state key has state (State holds it).
	RecordHasState = 1 << 2
	// RecordNoStateKey: the record has no state key (a tombstone under a
	// state_key that reads the value); it may not set state.
	RecordNoStateKey = 1 << 3
)

// Result kinds.
const (
	// ResultDone: the record was transformed; a state action and messages
	// follow.
	ResultDone = 0
	// ResultRejected: the record is invalid (bad data, not a bug); a reason
	// follows and the stage's invalid_messages policy decides.
	ResultRejected = 1
	// ResultFailed: the module failed on the record (a bug); a message
	// follows and the stage stops, committing nothing of the open
	// transaction.
	ResultFailed = 2
)

// State actions of a done result.
const (
	StateKeep   = 0
	StateSet    = 1
	StateDelete = 2
)

// Message flags.
const (
	// MessageValueNull: write a null value (a tombstone).
	MessageValueNull = 1 << 0
	// MessageKeyNull: write a null key.
	MessageKeyNull = 1 << 1
	// MessagePartition: an explicit partition follows the value.
	MessagePartition = 1 << 2
	// MessageTimestamp: an explicit timestamp (ms) follows; otherwise the
	// input record's event time.
	MessageTimestamp = 1 << 3
	// MessageHeaders: headers follow; otherwise the input record's.
	MessageHeaders = 1 << 4
)

// nullLength is the length of a null header value.
const nullLength = 0xFFFFFFFF

// Header is a Kafka record header; a nil Value is null.
type Header struct {
	Key   []byte
	Value []byte
}

// Record is one input record of a batch. The byte slices alias the batch
// they were read from.
type Record struct {
	Flags     uint32
	Partition int32
	Offset    int64
	// Timestamp is the record's event time in milliseconds since the Unix
	// epoch.
	Timestamp int64
	Topic     []byte
	Key       []byte
	Value     []byte
	StateKey  []byte
	// State is the state key's state, a JSON object (RecordHasState).
	State   []byte
	Headers []Header
}

// Message is one output record of a done result.
type Message struct {
	Flags     uint32
	Topic     []byte
	Key       []byte
	Value     []byte
	Partition int32
	Timestamp int64
	Headers   []Header
}

// Result is what a module answers for one record.
type Result struct {
	Kind uint32
	// Reason is the rejection's reason or the failure's message.
	Reason      []byte
	StateAction uint32
	State       []byte
	Messages    []Message
}
