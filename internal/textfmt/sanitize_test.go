package textfmt

import (
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/flecht-dev/flecht/internal/ui/uitest"
)

func TestEscapeForms(t *testing.T) {
	for in, want := range map[string][4]string{ // Escape, Text, Printable, ShellQuote
		"api":        {"api", "api", "api", "api"},
		"a b":        {"a b", "a b", "a b", "'a b'"},
		"it's":       {"it's", "it's", "it's", `'it'\''s'`},
		"a\nb":       {`a\nb`, "a\nb", `"a\nb"`, `$'a\x0ab'`},
		"\x1b[2J":    {`\x1b[2J`, `\x1b[2J`, `"\x1b[2J"`, `$'\x1b[2J'`},
		"\x9b2J":     {`\x9b2J`, `\x9b2J`, `"\x9b2J"`, `$'\x9b2J'`},
		"\u009b2J":   {`\u009b2J`, `\u009b2J`, `"\u009b2J"`, `$'\xc2\x9b2J'`},
		"x\u202ey":   {`x\u202ey`, `x\u202ey`, `"x\u202ey"`, `$'x\xe2\x80\xaey'`},
		"\\'\x07":    {`\'\a`, `\'\a`, `"\\'\a"`, `$'\\\'\x07'`},
		"":           {"", "", "", "''"},
		"tab\there":  {`tab\there`, "tab\there", `"tab\there"`, `$'tab\x09here'`},
		"\rover":     {`\rover`, `\rover`, `"\rover"`, `$'\x0dover'`},
		"\x7fdel":    {`\x7fdel`, `\x7fdel`, `"\x7fdel"`, `$'\x7fdel'`},
		"ok-name_1.": {"ok-name_1.", "ok-name_1.", "ok-name_1.", "ok-name_1."},
	} {
		got := [4]string{Escape(in), Text(in), Printable(in), ShellQuote(in)}
		if got != want {
			t.Errorf("%q:\n got %q\nwant %q", in, got, want)
		}
	}
}

// A shell reads every quoted word back as exactly the string: the
// suggested commands are copy-pasteable.
func TestShellQuoteReadsBack(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	for _, s := range append(uitest.Hostile(t), "a'b\\c", "-n", "~", "*") {
		if strings.IndexByte(s, 0) >= 0 {
			continue // no shell word holds NUL
		}
		out, err := exec.Command(bash, "-c", "printf %s "+ShellQuote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("%q quoted as %s reads back as %q (%v)", s, ShellQuote(s), out, err)
		}
	}
}

func TestJoinSurrogates(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":"\ud83d\ude00"}`:   `{"a":"\U0001f600"}`,
		`{"a":"\ud800x"}`:        `{"a":"\ufffdx"}`,
		`{"a":"\\ud83d"}`:        `{"a":"\\ud83d"}`,
		`{"\udc00":1}`:           `{"\ufffd":1}`,
		`{"a":"\u00e9\ud800"}`:   `{"a":"\u00e9\ufffd"}`,
		`["\ud83d\ud83d\ude00"]`: `["\ufffd\U0001f600"]`,
	} {
		if got := string(JoinSurrogates([]byte(in))); got != want {
			t.Errorf("%s: got %s want %s", in, got, want)
		}
	}
}

func TestHex2IsUTF8(t *testing.T) {
	if !utf8.ValidString(hex2(0x9b)) || hex2(0x9b) != "9b" {
		t.Error(hex2(0x9b))
	}
}
