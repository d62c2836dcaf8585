// Mints flenc:jwe: test vectors with panva jose, an implementation that
// shares no code with flecht, and writes vectors.json beside this file.
//
//   npm ci && node mint.mjs
//
// The keys are fixed so that the keyring in vectors.json stays readable; the
// IVs are random, so every run writes new tokens. Commit the result: the Go
// test (interop_test.go) needs no node at run time.
import { readFileSync, writeFileSync } from 'node:fs';
import { randomBytes, webcrypto } from 'node:crypto';

// jose needs globalThis.crypto, unflagged in Node only from 19 on (see open.mjs).
if (!globalThis.crypto) globalThis.crypto = webcrypto;
const { CompactEncrypt, exportJWK } = await import('jose');

const keyA = Uint8Array.from({ length: 32 }, (_, i) => i);          // kid test-key
const keyB = Uint8Array.from({ length: 32 }, (_, i) => 255 - i * 7); // kid prod-2026-07

async function jwk(kid, key) {
  const { kty, k } = await exportJWK(key);
  return { kty, kid, k };
}

// payload: the exact plaintext bytes (the JSON encoding of the field's wire
// value), given as text.
async function mint(kid, key, scope, payload, extraHeader = {}) {
  const header = { alg: 'dir', enc: 'A256GCM', kid, ...extraHeader };
  if (scope) header.flenc_scope = scope;
  const jwe = await new CompactEncrypt(new TextEncoder().encode(payload))
    .setProtectedHeader(header)
    .encrypt(key);
  return 'flenc:jwe:' + jwe;
}

const tokens = [];
async function add(name, kid, key, scope, payload) {
  tokens.push({ name, kid, scope, plaintext: payload, token: await mint(kid, key, scope, payload) });
}

await add('unscoped string', 'test-key', keyA, '', JSON.stringify('sk-live-123'));
await add('scoped string', 'test-key', keyA, 'api_key', JSON.stringify('from-panva-jose'));
await add('scoped record with unicode', 'test-key', keyA, 'creds',
  JSON.stringify({ pass: 'p\u{1F600}', user: 'ü' }));
await add('second key, big integer', 'prod-2026-07', keyB, 'counter', '12345678901234567890');
await add('empty string', 'prod-2026-07', keyB, '', JSON.stringify(''));
await add('list', 'test-key', keyA, 'scopes', JSON.stringify(['read', 'write']));

// Tokens a strict reader must refuse before any cryptography.
const rejects = [];
{
  // enc outside the profile (A128GCM needs a 16-byte key).
  const jwe = await new CompactEncrypt(new TextEncoder().encode('"s"'))
    .setProtectedHeader({ alg: 'dir', enc: 'A128GCM', kid: 'test-key' })
    .encrypt(keyA.slice(0, 16));
  rejects.push({ name: 'enc A128GCM', kind: 'header_rejected', token: 'flenc:jwe:' + jwe });
}
{
  // Key wrapping instead of dir: the encrypted-key segment is not empty.
  const jwe = await new CompactEncrypt(new TextEncoder().encode('"s"'))
    .setProtectedHeader({ alg: 'A256KW', enc: 'A256GCM', kid: 'test-key' })
    .encrypt(keyA);
  rejects.push({ name: 'alg A256KW', kind: 'header_rejected', token: 'flenc:jwe:' + jwe });
}
{
  // PBES2: the CPU-exhaustion vector the acceptance rule exists for.
  const jwe = await new CompactEncrypt(new TextEncoder().encode('"s"'))
    .setProtectedHeader({ alg: 'PBES2-HS256+A128KW', enc: 'A256GCM', kid: 'test-key' })
    .setKeyManagementParameters({ p2c: 1000, p2s: randomBytes(16) })
    .encrypt(new TextEncoder().encode('password'));
  rejects.push({ name: 'alg PBES2', kind: 'header_rejected', token: 'flenc:jwe:' + jwe });
}
{
  // A well-formed profile token whose header carries an extra member.
  const jwe = await new CompactEncrypt(new TextEncoder().encode('"s"'))
    .setProtectedHeader({ alg: 'dir', enc: 'A256GCM', kid: 'test-key', x5u: 'https://example.invalid/' })
    .encrypt(keyA);
  rejects.push({ name: 'unknown header member', kind: 'header_rejected', token: 'flenc:jwe:' + jwe });
}

const joseVersion = JSON.parse(readFileSync(new URL('./node_modules/jose/package.json', import.meta.url))).version;
const vectors = {
  generator: `jose ${joseVersion} via mint.mjs`,
  keyring: { keys: [await jwk('test-key', keyA), await jwk('prod-2026-07', keyB)], primary: 'prod-2026-07' },
  tokens,
  rejects,
};
writeFileSync(new URL('./vectors.json', import.meta.url), JSON.stringify(vectors, null, 2) + '\n');
console.log(`wrote ${tokens.length} tokens and ${rejects.length} rejects`);
