package secret

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"unicode/utf8"

	"github.com/flecht-dev/flecht/internal/attr"
	"github.com/flecht-dev/flecht/internal/jose"
)

// A password-protected keyring file is an encrypted JWK Set (RFC 7517 §7),
// upstream's encrypt_keyring: a compact JWE over the plain document, header
// {"alg":"PBES2-HS512+A256KW","cty":"jwk-set+json","enc":"A256GCM",
// "p2c":210000,"p2s":<16 random bytes>}, followed by a newline.
const (
	ProtectedAlg = "PBES2-HS512+A256KW"
	ProtectedCty = "jwk-set+json"
	// ProtectedIterations is the p2c written: OWASP's figure for
	// PBKDF2-HMAC-SHA512, and upstream's.
	ProtectedIterations = 210000
	// MinPasswordBytes: shorter passwords are refused on write and on read,
	// as upstream refuses them.
	MinPasswordBytes = 14
	// MinProtectedIterations and MaxProtectedIterations bound the p2c a
	// reader accepts, checked before any derivation: p2c is the work an
	// attacker who writes the file makes every reader do. joserfc, which
	// opens these files upstream, refuses p2c above 300000; this reader
	// also refuses counts under 1000 (RFC 7518 §4.8.1.2's minimum), which
	// joserfc only warns about and no writer uses.
	MinProtectedIterations = 1000
	MaxProtectedIterations = 300000
)

// checkPasswordLength refuses a password under MinPasswordBytes, on write
// and on read alike.
func checkPasswordLength(password []byte) error {
	if len(password) < MinPasswordBytes {
		return &Error{Kind: KindKeyringPassword, Detail: fmt.Sprintf("a keyring password must be at least %d bytes", MinPasswordBytes)}
	}
	return nil
}

// writeIterations is the p2c Protect writes; tests lower it to stay fast.
var writeIterations = ProtectedIterations

// protection is how a keyring is written: protected with this password.
type protection struct{ password []byte }

func (*protection) String() string { return "protection(redacted)" }

// Format redacts under every verb.
func (p *protection) Format(f fmt.State, _ rune) { fmt.Fprint(f, p.String()) }

// PasswordFunc supplies a keyring password when, and only when, a file
// turns out to be protected: the CLI reads --password-file, the file
// FLECHT_KEYRING_PASSWORD_FILE names, or a terminal prompt.
type PasswordFunc func() ([]byte, error)

// maxPasswordFileBytes bounds what is read of a password file.
const maxPasswordFileBytes = 64 << 10

// PasswordFile reads the password from the file at path as flechtctl's
// --password-file does (Python's text mode): UTF-8 text whose line breaks
// ("\r\n", "\r") read as "\n", one trailing "\n" dropped. So a password
// file written on Windows opens the same keyring in both tools, and a file
// that is not UTF-8, which flechtctl cannot read, is refused rather than
// protecting a keyring flechtctl could never open.
func PasswordFile(path string) PasswordFunc {
	return func() ([]byte, error) {
		b, err := readBounded(path, maxPasswordFileBytes, func() error {
			return &Error{Kind: KindKeyringPassword, Detail: fmt.Sprintf(
				"the password file %s is larger than %d KiB: not a password file", path, maxPasswordFileBytes>>10)}
		})
		var se *Error
		if errors.As(err, &se) {
			return nil, err
		}
		if err != nil {
			// Not wrapped: a missing password file must never read as a
			// missing keyring (fs.ErrNotExist) to the caller.
			reason := err
			var pe *fs.PathError
			if errors.As(err, &pe) {
				reason = pe.Err
			}
			return nil, &Error{Kind: KindKeyringPassword, Detail: fmt.Sprintf("cannot read the password file %s: %v", path, reason)}
		}
		if !utf8.Valid(b) {
			return nil, &Error{Kind: KindKeyringPassword, Detail: fmt.Sprintf(
				"the password file %s is not UTF-8 text (flechtctl reads a password file as UTF-8 and could not use it)", path)}
		}
		b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
		b = bytes.ReplaceAll(b, []byte("\r"), []byte("\n"))
		return bytes.TrimSuffix(b, []byte("\n")), nil
	}
}

// IsProtectedDocument reports whether doc is a password-protected keyring,
// the way upstream tells: five dot-separated segments whose first decodes to
// a JSON object with "cty":"jwk-set+json". Never fails.
func IsProtectedDocument(doc []byte) bool {
	cty, ok := compactJWECty(doc)
	return ok && cty == ProtectedCty
}

// compactJWECty reports whether doc is a compact JWE (five segments, the
// first a JSON object), and the string its header's cty holds ("" when
// none, or not a string).
func compactJWECty(doc []byte) (cty string, ok bool) {
	segs, ok := jose.SplitCompact(string(bytes.TrimSpace(doc)), 5)
	if !ok || len(segs[0]) > maxHdr {
		return "", false
	}
	hdr, ok := decodeKeyMember(json.RawMessage(`"` + segs[0] + `"`))
	if !ok || strings.ContainsAny(segs[0], `"\`) {
		return "", false
	}
	members, err := attr.Members(hdr)
	if err != nil || len(hdr) == 0 {
		return "", false
	}
	for _, m := range members {
		if m.Key == "cty" {
			s, _ := jsonString(m.Value)
			return s, true
		}
	}
	return "", true
}

// ReadKeyring parses a keyring document, plain or protected. A protected
// one asks password for its password and returns a keyring that remembers
// it: Document and Save write it protected again with the same password,
// never silently plain. A protected document and a nil password is
// KindKeyringPassword.
func ReadKeyring(doc []byte, password PasswordFunc) (*Keyring, error) {
	if !IsProtectedDocument(doc) {
		return ParseKeyring(doc)
	}
	if password == nil {
		return nil, &Error{Kind: KindKeyringPassword, Detail: "the keyring is password-protected and no password was given"}
	}
	pw, err := password()
	if err != nil {
		return nil, err
	}
	return OpenProtected(doc, pw)
}

// OpenProtected opens a password-protected keyring document. The header must
// be exactly the profile's (alg PBES2-HS512+A256KW, enc A256GCM, cty
// jwk-set+json, an integer p2c within [MinProtectedIterations,
// MaxProtectedIterations], a p2s of at least 8 bytes; kid and typ
// tolerated; nothing else, no zip, no crit), checked before any derivation:
// KindKeyringInvalid. A password under MinPasswordBytes, a wrong password or
// a damaged ciphertext: KindKeyringPassword. The inner document then
// validates as ParseKeyring does.
func OpenProtected(doc []byte, password []byte) (*Keyring, error) {
	invalid := func(format string, args ...any) error {
		return &Error{Kind: KindKeyringInvalid, Detail: "protected keyring: " + fmt.Sprintf(format, args...)}
	}
	if err := checkPasswordLength(password); err != nil {
		return nil, err
	}
	segs, ok := jose.SplitCompact(string(bytes.TrimSpace(doc)), 5)
	if !ok {
		return nil, invalid("a compact JWE has 5 segments")
	}
	if len(segs[0]) > maxHdr {
		return nil, invalid("protected header longer than %d characters", maxHdr)
	}
	hdr, err := jose.DecodeSegment(segs[0])
	if err != nil {
		return nil, invalid("protected header is not %s", b64Name)
	}
	p2s, p2c, err := acceptProtectedHeader(hdr)
	if err != nil {
		return nil, err
	}
	wrapped, err := jose.DecodeSegment(segs[1])
	if err != nil || len(wrapped) != KeySize+8 {
		return nil, invalid("the encrypted key must be %d bytes of %s", KeySize+8, b64Name)
	}
	iv, err := jose.DecodeSegment(segs[2])
	if err != nil || len(iv) != ivSize {
		return nil, invalid("IV must be %d bytes of %s", ivSize, b64Name)
	}
	ct, err := jose.DecodeSegment(segs[3])
	if err != nil {
		return nil, invalid("ciphertext is not %s", b64Name)
	}
	tag, err := jose.DecodeSegment(segs[4])
	if err != nil || len(tag) != tagLen {
		return nil, invalid("tag must be %d bytes of %s", tagLen, b64Name)
	}
	if beforeOpen != nil {
		beforeOpen()
	}
	wrong := &Error{Kind: KindKeyringPassword, Detail: "cannot open the password-protected keyring: wrong password or damaged file"}
	kek, err := jose.PBES2Key(ProtectedAlg, password, p2s, p2c)
	if err != nil {
		return nil, wrong
	}
	cek, err := jose.KeyUnwrap(kek, wrapped)
	if err != nil {
		return nil, wrong
	}
	plain, err := gcmOpen(cek, iv, append(ct, tag...), []byte(segs[0]))
	if err != nil {
		return nil, wrong
	}
	kr, err := ParseKeyring(plain)
	if err != nil {
		return nil, err
	}
	kr.protect = &protection{password: bytes.Clone(password)}
	return kr, nil
}

// acceptProtectedHeader is the protected file's acceptance rule.
func acceptProtectedHeader(hdr []byte) (p2s []byte, p2c int, err error) {
	invalid := func(format string, args ...any) error {
		return &Error{Kind: KindKeyringInvalid, Detail: "protected keyring: " + fmt.Sprintf(format, args...)}
	}
	members, merr := attr.Members(hdr)
	if merr != nil || len(hdr) == 0 {
		return nil, 0, invalid("protected header is not a JSON object")
	}
	var alg, enc, cty string
	p2c = -1
	seen := map[string]bool{}
	for _, m := range members {
		if seen[m.Key] {
			return nil, 0, invalid("duplicate header member %s", Echo(m.Key, knownHeaders))
		}
		seen[m.Key] = true
		switch m.Key {
		case "alg", "enc", "cty", "kid", "typ":
			s, ok := jsonString(m.Value)
			if !ok {
				return nil, 0, invalid("header %q must be a string", m.Key)
			}
			switch m.Key {
			case "alg":
				alg = s
			case "enc":
				enc = s
			case "cty":
				cty = s
			}
		case "p2c":
			if p2c, err = jsonSmallInt(m.Value); err != nil {
				return nil, 0, invalid("p2c must be an integer from %d to %d", MinProtectedIterations, MaxProtectedIterations)
			}
		case "p2s":
			s, ok := jsonString(m.Value)
			if !ok {
				return nil, 0, invalid("p2s must be a string")
			}
			if p2s, err = jose.DecodeSegment(s); err != nil || len(p2s) < 8 {
				return nil, 0, invalid("p2s must be at least 8 bytes of %s", b64Name)
			}
		case "zip":
			return nil, 0, invalid("compression (zip) is not accepted")
		case "crit":
			return nil, 0, invalid("critical extensions (crit) are not accepted")
		default:
			return nil, 0, invalid("header member %s is outside the protected-keyring profile", Echo(m.Key, knownHeaders))
		}
	}
	switch {
	case alg != ProtectedAlg:
		return nil, 0, invalid("alg %s is not accepted, only %s", Echo(alg, knownAlgs), ProtectedAlg)
	case enc != encGCM:
		return nil, 0, invalid("enc %s is not accepted, only %s", Echo(enc, knownEncs), encGCM)
	case cty != ProtectedCty:
		return nil, 0, invalid("cty must be %s", ProtectedCty)
	case p2c == hugeCount:
		return nil, 0, invalid("p2c of more than 9 digits is outside the accepted %d to %d iterations; refused before any key derivation",
			MinProtectedIterations, MaxProtectedIterations)
	case p2c < 0:
		return nil, 0, invalid("header has no p2c")
	case p2c < MinProtectedIterations || p2c > MaxProtectedIterations:
		return nil, 0, invalid("p2c %d is outside the accepted %d to %d iterations; refused before any key derivation",
			p2c, MinProtectedIterations, MaxProtectedIterations)
	case p2s == nil:
		return nil, 0, invalid("header has no p2s")
	}
	return p2s, p2c, nil
}

// hugeCount stands for a p2c of more than 9 digits: out of bounds, and not
// worth printing.
const hugeCount = -2

// jsonSmallInt decodes a JSON integer literal (no fraction, exponent or
// sign); one of more than 9 digits reads as hugeCount.
func jsonSmallInt(raw json.RawMessage) (int, error) {
	s := string(raw)
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("not an integer")
	}
	if len(s) > 9 {
		return hugeCount, nil
	}
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n, nil
}

// SealProtected returns the keyring as a password-protected document with a
// fresh random salt and CEK, refusing a password under MinPasswordBytes
// (KindKeyringPassword).
func (kr *Keyring) SealProtected(password []byte) ([]byte, error) {
	if err := checkPasswordLength(password); err != nil {
		return nil, err
	}
	plain, err := kr.JWKS()
	if err != nil {
		return nil, err
	}
	p2s := make([]byte, 16)
	cek := make([]byte, KeySize)
	iv := make([]byte, ivSize)
	rand.Read(p2s) // never fails (crypto/rand)
	rand.Read(cek)
	rand.Read(iv)
	hdr := fmt.Sprintf(`{"alg":%q,"cty":%q,"enc":%q,"p2c":%d,"p2s":%q}`,
		ProtectedAlg, ProtectedCty, encGCM, writeIterations, base64.RawURLEncoding.EncodeToString(p2s))
	protected := jose.EncodeSegment([]byte(hdr))
	kek, err := jose.PBES2Key(ProtectedAlg, password, p2s, writeIterations)
	if err != nil {
		return nil, err
	}
	wrapped, err := jose.KeyWrap(kek, cek)
	if err != nil {
		return nil, err
	}
	block, _ := aes.NewCipher(cek)
	gcm, _ := cipher.NewGCM(block)
	sealed := gcm.Seal(nil, iv, plain, []byte(protected))
	ct, tag := sealed[:len(sealed)-tagLen], sealed[len(sealed)-tagLen:]
	doc := strings.Join([]string{protected, jose.EncodeSegment(wrapped), jose.EncodeSegment(iv),
		jose.EncodeSegment(ct), jose.EncodeSegment(tag)}, ".") + "\n"
	return []byte(doc), nil
}

// Protect returns a copy that Document and Save write password-protected
// with password (refused under MinPasswordBytes: KindKeyringPassword).
func (kr *Keyring) Protect(password []byte) (*Keyring, error) {
	if err := checkPasswordLength(password); err != nil {
		return nil, err
	}
	out := kr.clone()
	out.protect = &protection{password: bytes.Clone(password)}
	return out, nil
}

// Unprotect returns a copy that Document and Save write as a plain JWK Set.
func (kr *Keyring) Unprotect() *Keyring {
	out := kr.clone()
	out.protect = nil
	return out
}

// Protected reports whether Document and Save write the keyring
// password-protected: it was read from a protected file, or Protect made it so.
func (kr *Keyring) Protected() bool { return kr != nil && kr.protect != nil }

// Document is the keyring file's content: the protected document when
// Protected, else JWKS. It holds key bytes (plain) or a ciphertext: never
// print it.
func (kr *Keyring) Document() ([]byte, error) {
	if kr.protect != nil {
		return kr.SealProtected(kr.protect.password)
	}
	return kr.JWKS()
}

// gcmOpen opens an AES-GCM ciphertext||tag with a one-use key.
func gcmOpen(key, iv, sealed, aad []byte) ([]byte, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return gcm.Open(nil, iv, sealed, aad)
}
