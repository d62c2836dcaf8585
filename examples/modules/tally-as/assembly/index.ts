// tally-as: a flecht transform module written in AssemblyScript, straight
// from the ABI in docs/modules.md ("The ABI, version 1"), with no SDK.
//
// For each record it forwards the value unchanged (same bytes, same key) to
// the stage's one output topic, and keeps per state key {"records":N}, the
// number of records of that key. A tombstone is forwarded as a tombstone and
// deletes the state; a value that is not a JSON object is rejected.
//
// Memory: everything crossing the ABI lives in raw memory that this file
// manages (heap.alloc under the "stub" runtime, no GC), so a call allocates
// nothing once its buffers are big enough. Integers in the ABI are
// little-endian, as WebAssembly's loads and stores are.
//
// Loops that leave early are while loops on purpose: asc 0.28.20
// miscompiles a `for (;;)` whose body ends in a return and that also
// breaks: the code after the loop becomes a trap.

// ---------------------------------------------------------------------------
// Imports: flecht.log only. Nothing else is imported (abort is routed to
// tallyAbort below by asconfig.json's "use": ["abort=..."]).

// @ts-ignore: decorator
@external("flecht", "log")
declare function hostLog(level: i32, ptr: usize, len: usize): void;

const LOG_INFO: i32 = 1;
const LOG_ERROR: i32 = 3;

// ABI constants (docs/modules.md).
const REC_VALUE_NULL: u32 = 1;
const REC_KEY_NULL: u32 = 2;
const REC_HAS_STATE: u32 = 4;
const REC_NO_STATE_KEY: u32 = 8;

const MSG_VALUE_NULL: u32 = 1;
const MSG_KEY_NULL: u32 = 2;

const RESULT_DONE: u32 = 0;
const RESULT_REJECTED: u32 = 1;
const RESULT_FAILED: u32 = 2;

const STATE_KEEP: u32 = 0;
const STATE_SET: u32 = 1;
const STATE_DELETE: u32 = 2;

const HEADER_NULL: u32 = 0xFFFFFFFF;
const CURSOR_OFFSET: usize = 4;
// The smallest record: flags, partition, offset, timestamp, five empty
// bytes fields and a header count.
const MIN_RECORD: usize = 4 + 4 + 8 + 8 + 5 * 4 + 4;

// ---------------------------------------------------------------------------
// abort: AssemblyScript calls abort(message, file, line, column) on a failed
// assertion or an impossible allocation, and imports it from env by default,
// which flecht refuses. Routed here, it logs one error line and traps: a trap
// stops the stage with nothing of the open transaction committed, and the
// record (from the cursor) named. It must not allocate: it may run because
// memory ran out.

const ABORT_LINE_CAP: usize = 512;
const abortLine = memory.data(<i32>ABORT_LINE_CAP);
let abortLen: usize = 0;

function abortPut(s: string | null): void {
  if (s === null) return;
  const str = changetype<string>(s);
  for (let i = 0; i < str.length && abortLen + 3 <= ABORT_LINE_CAP; i++) {
    const c = <u32>str.charCodeAt(i);
    // UTF-16 to UTF-8 by hand (no allocation); a surrogate becomes '?'.
    if (c < 0x80) {
      store<u8>(abortLine + abortLen++, <u8>c);
    } else if (c < 0x800) {
      store<u8>(abortLine + abortLen++, <u8>(0xC0 | (c >> 6)));
      store<u8>(abortLine + abortLen++, <u8>(0x80 | (c & 0x3F)));
    } else if (c >= 0xD800 && c < 0xE000) {
      store<u8>(abortLine + abortLen++, 0x3F);
    } else {
      store<u8>(abortLine + abortLen++, <u8>(0xE0 | (c >> 12)));
      store<u8>(abortLine + abortLen++, <u8>(0x80 | ((c >> 6) & 0x3F)));
      store<u8>(abortLine + abortLen++, <u8>(0x80 | (c & 0x3F)));
    }
  }
}

function abortPutU32(v: u32): void {
  let digits: usize = 1;
  for (let t = v; t >= 10; t /= 10) digits++;
  if (abortLen + digits > ABORT_LINE_CAP) return;
  for (let i = <isize>digits - 1; i >= 0; i--) {
    store<u8>(abortLine + abortLen + <usize>i, <u8>(0x30 + v % 10));
    v /= 10;
  }
  abortLen += digits;
}

function tallyAbort(message: string | null, fileName: string | null, line: u32, column: u32): void {
  abortLen = 0;
  abortPut("tally-as aborted: ");
  abortPut(message !== null ? message : "(no message)");
  if (fileName !== null) {
    abortPut(" at ");
    abortPut(fileName);
    abortPut(":");
    abortPutU32(line);
    abortPut(":");
    abortPutU32(column);
  }
  hostLog(LOG_ERROR, abortLine, abortLen);
  unreachable();
}

// fatal is for what the host should never send (a batch that does not
// read): a bug on one side or the other, so the stage must stop.
function fatal(message: string): void {
  tallyAbort(message, null, 0, 0);
}

// ---------------------------------------------------------------------------
// Memory the module owns.

// The input buffer: the host writes each call's input here.
let inPtr: usize = 0;
let inCap: usize = 0;

// The output buffer: each call's results (or setup refusal), valid until
// the next call, as the ABI requires.
let outPtr: usize = 0;
let outCap: usize = 0;
let outLen: usize = 0;

// The output topic from the setup document, as UTF-8.
let topicPtr: usize = 0;
let topicLen: usize = 0;
let ready = false;

// Grow memory ourselves before heap.alloc: the stub allocator traps when
// memory cannot grow, and flecht_buffer must answer 0 instead. Growing by
// size (plus slack) past the current end guarantees heap.alloc fits.
function reserve(size: usize): bool {
  const pages = <i32>((size + 64 + 0xFFFF) >> 16);
  return memory.grow(pages) >= 0;
}

export function flecht_abi_v1(): void {}

// The stub allocator's largest block is just under 1 GiB; asking for more
// would abort, and the ABI wants 0 instead.
const MAX_BUFFER: usize = (1 << 30) - 64;

export function flecht_buffer(size: i32): i32 {
  if (size < 0 || <usize>size > MAX_BUFFER) return 0;
  if (<usize>size > inCap || inPtr == 0) {
    // At least 64 KiB, so small batches never reallocate.
    const cap = max<usize>(<usize>size, 64 << 10);
    // The old buffer is the host's to forget: valid only until this call.
    if (inPtr != 0) heap.free(inPtr);
    inPtr = 0;
    inCap = 0;
    if (!reserve(cap)) return 0;
    inPtr = heap.alloc(cap);
    inCap = cap;
  }
  return <i32>inPtr;
}

// Make room for n more bytes of output, doubling so a call reallocates
// rarely. Running out of memory here traps (the stage stops on the record).
function need(n: usize): void {
  if (outLen + n <= outCap) return;
  let cap = max<usize>(outCap << 1, 64 << 10);
  while (cap < outLen + n) cap <<= 1;
  outPtr = outPtr == 0 ? heap.alloc(cap) : heap.realloc(outPtr, cap);
  outCap = cap;
}

function putU32(v: u32): void {
  need(4);
  store<u32>(outPtr + outLen, v);
  outLen += 4;
}

function putRaw(ptr: usize, len: usize): void {
  need(len);
  memory.copy(outPtr + outLen, ptr, len);
  outLen += len;
}

// An ABI "bytes" field: a u32 length, then the bytes.
function putBytes(ptr: usize, len: usize): void {
  putU32(<u32>len);
  putRaw(ptr, len);
}

// A string's UTF-8 bytes, without a length.
function putText(s: string): void {
  const n = <usize>String.UTF8.byteLength(s);
  need(n);
  String.UTF8.encodeUnsafe(changetype<usize>(s), s.length, outPtr + outLen);
  outLen += n;
}

// A string as an ABI "bytes" field.
function putTextBytes(s: string): void {
  putU32(<u32>String.UTF8.byteLength(s));
  putText(s);
}

// An integer in decimal, as JSON spells it.
function putDecimal(v: i64): void {
  need(20);
  let u: u64 = <u64>v;
  if (v < 0) {
    store<u8>(outPtr + outLen++, 0x2D); // '-'
    u = <u64>(-v); // i64.MIN wraps to itself, which is right as u64
  }
  let digits = 1;
  for (let t = u; t >= 10; t /= 10) digits++;
  for (let i = digits - 1; i >= 0; i--) {
    store<u8>(outPtr + outLen + <usize>i, <u8>(0x30 + u % 10));
    u /= 10;
  }
  outLen += <usize>digits;
}

// address << 32 | length: how the host finds a call's answer.
function answer(): i64 {
  if (outLen == 0) return 0;
  return (<i64>outPtr << 32) | <i64>outLen;
}

// ---------------------------------------------------------------------------
// A small JSON scanner over raw bytes [jp, jEnd), enough to find a
// top-level member of an object without decoding the rest. It does not
// validate: the host sends the setup document and state as valid JSON.

let jp: usize = 0;
let jEnd: usize = 0;

function isWs(c: u32): bool {
  return c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D;
}

function skipWs(): void {
  while (jp < jEnd && isWs(<u32>load<u8>(jp))) jp++;
}

function peek(): i32 {
  return jp < jEnd ? <i32>load<u8>(jp) : -1;
}

function hex4(): i32 {
  if (jp + 4 > jEnd) return -1;
  let v = 0;
  for (let i = 0; i < 4; i++) {
    const c = <i32>load<u8>(jp++);
    v <<= 4;
    if (c >= 0x30 && c <= 0x39) v |= c - 0x30;
    else if (c >= 0x61 && c <= 0x66) v |= c - 0x61 + 10;
    else if (c >= 0x41 && c <= 0x46) v |= c - 0x41 + 10;
    else return -1;
  }
  return v;
}

// The next character of a string (jp just after its opening quote), as a
// code point, or a UTF-8 byte as it stands (non-ASCII bytes need no
// decoding to be compared or copied); -1 at the closing quote, -2 when the
// string is broken. Escapes are decoded, so "output\u005ftopics" is found.
const STR_END: i32 = -1;
const STR_BAD: i32 = -2;
let strIsByte = false;

function strNext(): i32 {
  if (jp >= jEnd) return STR_BAD;
  const c = <i32>load<u8>(jp++);
  strIsByte = c >= 0x80;
  if (c == 0x22) return STR_END; // '"'
  if (c != 0x5C) return c; // not '\'
  if (jp >= jEnd) return STR_BAD;
  const e = <i32>load<u8>(jp++);
  switch (e) {
    case 0x22: return 0x22;
    case 0x5C: return 0x5C;
    case 0x2F: return 0x2F;
    case 0x62: return 0x08;
    case 0x66: return 0x0C;
    case 0x6E: return 0x0A;
    case 0x72: return 0x0D;
    case 0x74: return 0x09;
    case 0x75: {
      let cp = hex4();
      if (cp < 0) return STR_BAD;
      // A high surrogate followed by \uDC00..\uDFFF is one code point.
      if (cp >= 0xD800 && cp < 0xDC00 && jp + 6 <= jEnd &&
          load<u8>(jp) == 0x5C && load<u8>(jp + 1) == 0x75) {
        const save = jp;
        jp += 2;
        const lo = hex4();
        if (lo >= 0xDC00 && lo < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        else jp = save;
      }
      return cp;
    }
  }
  return STR_BAD;
}

// Writes a code point from strNext as UTF-8 at dst; returns the byte count.
function utf8At(dst: usize, cp: i32): usize {
  if (strIsByte || cp < 0x80) {
    store<u8>(dst, <u8>cp);
    return 1;
  }
  if (cp < 0x800) {
    store<u8>(dst, <u8>(0xC0 | (cp >> 6)));
    store<u8>(dst + 1, <u8>(0x80 | (cp & 0x3F)));
    return 2;
  }
  if (cp < 0x10000) {
    store<u8>(dst, <u8>(0xE0 | (cp >> 12)));
    store<u8>(dst + 1, <u8>(0x80 | ((cp >> 6) & 0x3F)));
    store<u8>(dst + 2, <u8>(0x80 | (cp & 0x3F)));
    return 3;
  }
  store<u8>(dst, <u8>(0xF0 | (cp >> 18)));
  store<u8>(dst + 1, <u8>(0x80 | ((cp >> 12) & 0x3F)));
  store<u8>(dst + 2, <u8>(0x80 | ((cp >> 6) & 0x3F)));
  store<u8>(dst + 3, <u8>(0x80 | (cp & 0x3F)));
  return 4;
}

// Compares the string at jp (after its opening quote) with an ASCII name,
// consuming the string; false also when the string is broken.
function keyIs(name: string): bool {
  let i = 0;
  let same = true;
  let c = strNext();
  while (c >= 0) {
    if (strIsByte || i >= name.length || c != <i32>name.charCodeAt(i)) same = false;
    i++;
    c = strNext();
  }
  return c == STR_END && same && i == name.length;
}

// Skips the value at jp; false when it runs past the end.
function skipValue(): bool {
  const c = peek();
  if (c == 0x22) { // a string
    jp++;
    let s = strNext();
    while (s >= 0) s = strNext();
    return s == STR_END;
  }
  if (c == 0x7B || c == 0x5B) { // an object or array: count brackets, mind strings
    let depth = 0;
    while (jp < jEnd) {
      const b = <i32>load<u8>(jp++);
      if (b == 0x22) {
        let s = strNext();
        while (s >= 0) s = strNext();
        if (s == STR_BAD) return false;
      } else if (b == 0x7B || b == 0x5B) {
        depth++;
      } else if (b == 0x7D || b == 0x5D) {
        if (--depth == 0) return true;
      }
    }
    return false;
  }
  // a number, true, false or null: up to the next delimiter
  const start = jp;
  while (jp < jEnd) {
    const b = <u32>load<u8>(jp);
    if (b == 0x2C || b == 0x7D || b == 0x5D || isWs(b)) break;
    jp++;
  }
  return jp > start;
}

// Finds the top-level member name of the object [ptr, ptr+len): leaves jp
// at its value and returns 1; 0 when there is none, -1 when the bytes are
// not an object.
function findMember(ptr: usize, len: usize, name: string): i32 {
  jp = ptr;
  jEnd = ptr + len;
  skipWs();
  if (peek() != 0x7B) return -1;
  jp++;
  skipWs();
  if (peek() == 0x7D) return 0;
  while (true) {
    skipWs();
    if (peek() != 0x22) return -1;
    jp++;
    const match = keyIs(name);
    skipWs();
    if (peek() != 0x3A) return -1; // ':'
    jp++;
    skipWs();
    if (match) return 1;
    if (!skipValue()) return -1;
    skipWs();
    const c = peek();
    if (c == 0x2C) { jp++; continue; }
    return c == 0x7D ? 0 : -1;
  }
}

// Reads a JSON integer at jp: sets intValue and returns true; false for
// anything else (a string, a fraction, an exponent, more than fits an i64).
let intValue: i64 = 0;

function readInt(): bool {
  let neg = false;
  if (peek() == 0x2D) { neg = true; jp++; }
  let v: i64 = 0;
  let digits = 0;
  while (jp < jEnd) {
    const c = <i32>load<u8>(jp);
    if (c < 0x30 || c > 0x39) break;
    const d = <i64>(c - 0x30);
    if (v > (i64.MAX_VALUE - d) / 10) return false; // too big for a count
    v = v * 10 + d;
    digits++;
    jp++;
  }
  if (digits == 0) return false;
  const next = peek();
  if (next == 0x2E || next == 0x65 || next == 0x45) return false; // . e E
  intValue = neg ? -v : v;
  return true;
}

// ---------------------------------------------------------------------------
// Setup: the setup document names the output topics; tally writes to
// exactly one. A non-empty answer refuses the setup (flecht run exits 2).

// A refusal of the setup: its reason is the answer.
function refuse(reason: string): i64 {
  outLen = 0;
  putText(reason);
  return answer();
}

export function flecht_init(len: i32): i64 {
  outLen = 0;
  ready = false;
  if (len < 0 || <usize>len > inCap) {
    return refuse("tally-as: the setup document does not fit the buffer it was written to");
  }
  const found = findMember(inPtr, <usize>len, "output_topics");
  if (found < 0) return refuse("tally-as: the setup document is not a JSON object");
  if (found == 0 || peek() != 0x5B) return refuse("tally-as: the setup document has no output_topics list");
  jp++; // '['
  // Count the topics and keep the first; each must be a string.
  let count = 0;
  let firstStart: usize = 0;
  let firstEnd: usize = 0;
  skipWs();
  let more = peek() != 0x5D;
  if (!more) jp++;
  while (more) {
    skipWs();
    if (peek() != 0x22) return refuse("tally-as: output_topics holds something that is not a topic name");
    const start = jp;
    if (!skipValue()) return refuse("tally-as: the setup document's output_topics does not read");
    if (count == 0) {
      firstStart = start;
      firstEnd = jp;
    }
    count++;
    skipWs();
    const c = peek();
    jp++;
    if (c == 0x5D) more = false;
    else if (c != 0x2C) return refuse("tally-as: the setup document's output_topics does not read");
  }
  if (count != 1) {
    refuse("tally-as writes to one topic: give output_topics exactly one (it has ");
    putDecimal(count);
    putText(")");
    return answer();
  }
  // Decode the topic (escapes and all) into memory of our own: the input
  // buffer is overwritten by the next call. Decoded is never longer.
  if (topicPtr != 0) heap.free(topicPtr);
  topicPtr = heap.alloc(firstEnd - firstStart);
  topicLen = 0;
  jp = firstStart + 1;
  jEnd = firstEnd;
  let c = strNext();
  while (c >= 0) {
    topicLen += utf8At(topicPtr + topicLen, c);
    c = strNext();
  }
  if (c == STR_BAD) return refuse("tally-as: the output topic's name does not read");
  ready = true;
  // One line at setup, through flecht.log. The output buffer serves as
  // scratch: the answer is empty (the setup is accepted).
  putText("tally-as ready, writing to ");
  putRaw(topicPtr, topicLen);
  hostLog(LOG_INFO, outPtr, outLen);
  outLen = 0;
  return 0;
}

// ---------------------------------------------------------------------------
// Reading a batch: a cursor over [rp, rEnd) that stops the stage if the
// host's batch does not read (the Go SDK panics there too).

let rp: usize = 0;
let rEnd: usize = 0;
// The last "bytes" field read.
let fPtr: usize = 0;
let fLen: usize = 0;

function readU32(): u32 {
  if (rp + 4 > rEnd) fatal("the host sent a batch that does not read (a field runs past its end)");
  const v = load<u32>(rp);
  rp += 4;
  return v;
}

function readBytes(): void {
  const n = <usize>readU32();
  if (n > rEnd - rp) fatal("the host sent a batch that does not read (a length runs past its end)");
  fPtr = rp;
  fLen = n;
  rp += n;
}

function skipHeaders(): void {
  const n = readU32();
  for (let i: u32 = 0; i < n; i++) {
    readBytes(); // name
    if (rp + 4 <= rEnd && load<u32>(rp) == HEADER_NULL) rp += 4; // a null value
    else readBytes();
  }
}

// N from the state: the count the previous record of this state key left.
// The state is {"records":N} when this module wrote it; anything else
// (another module's, a hand-made --state) counts from the integer member
// "records" when there is one, else from 0.
function recordsIn(ptr: usize, len: usize): i64 {
  // Fast path: exactly {"records":N} (the canonical form the host stores).
  const prefix = "{\"records\":";
  const plen = <usize>prefix.length;
  if (len > plen + 1 && load<u8>(ptr + len - 1) == 0x7D) {
    let same = true;
    for (let i: usize = 0; i < plen; i++) {
      if (<i32>load<u8>(ptr + i) != <i32>prefix.charCodeAt(<i32>i)) { same = false; break; }
    }
    if (same) {
      jp = ptr + plen;
      jEnd = ptr + len - 1;
      if (readInt() && jp == jEnd) return intValue;
    }
  }
  if (findMember(ptr, len, "records") == 1 && readInt()) return intValue;
  return 0;
}

// The reason a value that is not a JSON object is rejected with.
const NOT_OBJECT = "value is not a JSON object";

export function flecht_transform(len: i32): i64 {
  outLen = 0;
  if (len < 0 || <usize>len > inCap || <usize>len < 8) {
    fatal("the host sent a batch that does not read (shorter than its header, or longer than the buffer)");
  }
  const base = inPtr;
  rp = base;
  rEnd = base + <usize>len;
  const count = readU32();
  readU32(); // the cursor, ours to write
  if (<u64>count * <u64>MIN_RECORD > <u64>(rEnd - rp)) {
    fatal("the host sent a batch that does not read (more records than bytes)");
  }
  for (let i: u32 = 0; i < count; i++) {
    // The cursor first: the host's clock and random stand-ins, and its
    // error messages, read it to know which record we are on.
    store<u32>(base + CURSOR_OFFSET, i);

    const flags = readU32();
    rp += 4 + 8 + 8; // partition, offset, timestamp: tally needs none
    if (rp > rEnd) fatal("the host sent a batch that does not read (a record runs past its end)");
    readBytes(); // topic
    readBytes(); const keyPtr = fPtr, keyLen = fLen;
    readBytes(); const valPtr = fPtr, valLen = fLen;
    readBytes(); // state key: the host keys the state, tally need not know it
    readBytes(); const statePtr = fPtr, stateLen = fLen;
    skipHeaders(); // not sending flag 16 keeps the input's headers

    if (!ready) {
      // No setup, no topic: a bug in the host or the module, not the data.
      putU32(RESULT_FAILED);
      putTextBytes("tally-as was not set up (flecht_init did not accept a setup)");
      continue;
    }

    const keyNull = (flags & REC_KEY_NULL) != 0;
    const noStateKey = (flags & REC_NO_STATE_KEY) != 0;

    if ((flags & REC_VALUE_NULL) != 0) {
      // A tombstone: forward it, and forget the count. Without state there
      // is nothing to delete; without a state key nothing may be deleted.
      putU32(RESULT_DONE);
      putU32(1);
      putU32(MSG_VALUE_NULL | (keyNull ? MSG_KEY_NULL : 0));
      putBytes(topicPtr, topicLen);
      putBytes(keyPtr, keyLen);
      putU32(!noStateKey && (flags & REC_HAS_STATE) != 0 ? STATE_DELETE : STATE_KEEP);
      continue;
    }

    // Only the first byte is checked: the value is forwarded as it is,
    // never decoded. (The host checks every output value in full.)
    let v = valPtr;
    const vEnd = valPtr + valLen;
    while (v < vEnd && isWs(<u32>load<u8>(v))) v++;
    if (v == vEnd || load<u8>(v) != 0x7B) {
      putU32(RESULT_REJECTED);
      putTextBytes(NOT_OBJECT);
      continue;
    }

    putU32(RESULT_DONE);
    putU32(1);
    putU32(keyNull ? MSG_KEY_NULL : 0);
    putBytes(topicPtr, topicLen);
    putBytes(keyPtr, keyLen);
    putBytes(valPtr, valLen);
    if (noStateKey) {
      putU32(STATE_KEEP);
      continue;
    }
    const n = (flags & REC_HAS_STATE) != 0 ? recordsIn(statePtr, stateLen) : 0;
    // {"records":N}: canonical JSON, written without a JSON library.
    putU32(STATE_SET);
    const lenAt = outLen;
    putU32(0);
    const start = outLen;
    putText("{\"records\":");
    putDecimal(n < i64.MAX_VALUE ? n + 1 : n);
    putText("}");
    store<u32>(outPtr + lenAt, <u32>(outLen - start));
  }
  if (rp != rEnd) fatal("the host sent a batch that does not read (bytes after its last record)");
  return answer();
}
