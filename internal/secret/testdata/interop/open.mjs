// Opens flenc:jwe: tokens that flecht wrote, with panva jose, using a
// keyring file that flecht wrote. The other half of the interop proof: the
// e2e test (e2e/secret_interop_test.go) compares what this prints with what
// it encrypted.
//
//   node open.mjs <keyring.json> <tokens.json>
//
// tokens.json is a JSON array of strings. Prints a JSON array, one entry per
// token: {"header": <protected header>, "plaintext": <payload as text>}, or
// {"error": "..."} when jose refuses the token.
import { readFileSync } from 'node:fs';
import { webcrypto } from 'node:crypto';

// jose reads Web Crypto from globalThis.crypto, which Node has without a
// flag only from 19 on; Debian bookworm's nodejs is 18. Provide it, then
// load jose (a static import would be evaluated before this line).
if (!globalThis.crypto) globalThis.crypto = webcrypto;
const { compactDecrypt, importJWK } = await import('jose');

const [keyringPath, tokensPath] = process.argv.slice(2);
if (!keyringPath || !tokensPath) {
  console.error('usage: node open.mjs <keyring.json> <tokens.json>');
  process.exit(2);
}
const keyring = JSON.parse(readFileSync(keyringPath, 'utf8'));
const tokens = JSON.parse(readFileSync(tokensPath, 'utf8'));

// The keyring is a JWK Set; jose imports each oct key as it stands.
const keys = new Map();
for (const jwk of keyring.keys) {
  keys.set(jwk.kid, await importJWK({ kty: jwk.kty, k: jwk.k }, 'dir'));
}
if (!keys.has(keyring.primary)) {
  console.error(`primary ${keyring.primary} is not among the keys`);
  process.exit(1);
}

const out = [];
for (const token of tokens) {
  const prefix = 'flenc:jwe:';
  if (!token.startsWith(prefix)) {
    out.push({ error: 'missing flenc:jwe: prefix' });
    continue;
  }
  try {
    const { plaintext, protectedHeader } = await compactDecrypt(
      token.slice(prefix.length),
      async (header) => {
        const key = keys.get(header.kid);
        if (!key) throw new Error(`unknown kid ${header.kid}`);
        return key;
      },
      // The same allowlist flecht enforces.
      { keyManagementAlgorithms: ['dir'], contentEncryptionAlgorithms: ['A256GCM'] },
    );
    out.push({ header: protectedHeader, plaintext: new TextDecoder('utf-8', { fatal: true }).decode(plaintext) });
  } catch (e) {
    out.push({ error: String(e && e.message ? e.message : e) });
  }
}
process.stdout.write(JSON.stringify(out) + '\n');
