// Package reencrypt scans config topics for secret values and sweeps them to
// their scope's sealing key: the engine of `flecht secrets scan`,
// `flecht secrets reencrypt` and the key-rotation guard rails.
//
// # Fields
//
// A declared field (ParseFields, the stage file's syntax
// NAME[:scope[:mode]]) has a mode after the upstream codec that reads it:
// encrypted (ENCRYPTED: a flenc token of either generation), signed (SIGNED:
// a flsig value in the clear) or encrypted-signed (ENCRYPTED(SIGNED): a
// token whose payload is a signed value).
//
// # Scan
//
// A scan reads topics read_committed to the end offsets captured when it
// starts and keeps the latest record per (partition, key), the compacted
// view every reader of a config topic builds. Each declared field's value
// is judged (Judge): its status on the wire (encrypted, signed, plaintext,
// corrupt), its header's kid, scope and alg, and with a keyring the outcome
// of opening the token and verifying the signature (also the one inside a
// token, in an encrypted field as in an encrypted-signed one: a key is
// needed by every signature it made, whatever mode the field is declared
// with), and what is wrong with it for its field (a finding; a signature
// is one only where the field signs). With a keyring each scope's target is named (ScopeTarget:
// its sealing and signing kid). Absent and null values are skipped. A
// missing topic is an error. No plaintext is ever reported, only a length
// range and a fingerprint keyed from the keyring (or, without one, from a
// random key of the run).
//
// # Sweep
//
// A sweep plans first (a pure function of the view, BuildPlan) and writes
// only when executed. Each record whose values need their scope's sealing
// key, their field's scope, (on request) sealing or (on request, --resign)
// a signature by their scope's signing key is re-produced with the same key
// bytes, headers and timestamp, explicitly to the partition it was read
// from, with every other byte of the value unchanged (attr.ReplaceField), in
// transactions of a transactional producer whose ID is fixed per set of
// topics. The sweep never signs an unsigned value, and never wraps a signed
// field's value in a token (decide says what each mode allows).
//
// # Why a concurrent edit is never reverted
//
// The danger is a writer that appends a version of key K after the sweep
// read K and before the sweep's rewrite of K lands: the rewrite, derived
// from the older version, would then be the newest record and silently undo
// the edit. (The worst case is a writer that still holds the old keyring
// and writes the old token back.)
//
// Kafka gives every append to a partition the next offset: a record, a
// transaction marker, anything. For each partition the engine keeps an
// offset below which everything has been read (read_committed, up to the
// last stable offset, so every offset below is decided) or verified, and
// counts the offsets it has appended itself since (its records, and one
// marker per transaction that wrote to the partition). Before committing a
// transaction it lists the end offsets (high watermarks) of the partitions
// the transaction wrote, whose records are already appended and
// acknowledged: if a partition's end equals that offset plus its own count,
// every offset in between is the sweep's, so no version of any key was
// appended between the version a rewrite derives from (below the read
// offset) and the rewrite itself. The transaction then commits. A writer
// that appends after the check gets an offset above all of the
// transaction's records: its version is the newer one and wins, in
// compaction and in every reader's latest-per-key view.
//
// If the end is anything else, something else was appended in between
// (possibly the old value, right after the read): the transaction is
// aborted, so its records never become visible, and the partition is
// re-read from the offset it was read to before. The re-read's records
// update the view, and the partition is re-planned from it: a record whose
// latest version (the other writer's) still needs the sweep is swept again,
// one that does not is left as the other writer wrote it. Should a
// committed sweep record ever be found shadowing another writer's newer
// version, that version is re-produced so the edit still wins.
//
// After the last transaction every partition is compared once more, and
// re-read where another writer appended after the checks, since its latest
// versions may still hold old tokens. Rounds are bounded: a partition
// re-read MaxRounds times in a row without a sweep transaction committing
// there, or still written to after MaxRounds final passes, stops the sweep
// with an error naming it. Before a
// check counts a transaction's marker, the engine waits until the last
// stable offset passes the transaction's records, which happens only once
// its marker is appended; another producer's open transaction is waited for
// up to SettleTimeout.
//
// A sweep that is killed leaves at most one open transaction. Running it
// again initialises the same transactional ID, which fences the killed
// producer and aborts that transaction; the rerun reads the view again,
// where everything already committed is at its target and is not
// touched again. Finally a scan verifies, scope by scope, that every token
// is under its scope's sealing kid and opens and every signature verifies;
// a value it cannot judge leaves the sweep unverified.
package reencrypt
