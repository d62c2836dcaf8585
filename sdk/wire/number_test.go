package wire

import (
	"bufio"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"
)

// Python's repr(float(x)) for each x, from CPython: the left column is read
// with strconv.ParseFloat, the right is what AppendFloat must write.
const pythonRepr = `
1 1.0
0.1 0.1
100 100.0
12345.678 12345.678
-2.5 -2.5
0 0.0
-0 -0.0
0.0001 0.0001
0.00012 0.00012
0.000015 1.5e-05
0.00009999 9.999e-05
1e15 1000000000000000.0
9999999999999998 9999999999999998.0
1e16 1e+16
1e22 1e+22
123456789012345678 1.2345678901234568e+17
5e-324 5e-324
1.7976931348623157e308 1.7976931348623157e+308
2.2250738585072014e-308 2.2250738585072014e-308
9007199254740993 9007199254740992.0
`

func TestAppendFloatIsPythonRepr(t *testing.T) {
	lines := bufio.NewScanner(strings.NewReader(pythonRepr))
	for lines.Scan() {
		in, want, ok := strings.Cut(lines.Text(), " ")
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(in, 64)
		if err != nil {
			t.Fatal(err)
		}
		if in == "-0" {
			f = math.Copysign(0, -1)
		}
		got, err := AppendFloat([]byte("x"), f)
		if err != nil || string(got) != "x"+want {
			t.Errorf("AppendFloat(%s) = %s, %v; Python writes %s", in, got, err, want)
		}
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if out, err := AppendFloat([]byte("x"), f); err == nil || string(out) != "x" {
			t.Errorf("AppendFloat(%v) = %q, %v; JSON cannot spell it", f, out, err)
		}
	}
}

func TestValidNumber(t *testing.T) {
	for _, s := range strings.Fields("0 -0 1 -12 1.5 1e3 1E+3 1.0e-3 0.0 -0e0 12345678901234567890") {
		if !ValidNumber(s) {
			t.Errorf("ValidNumber(%q) = false", s)
		}
	}
	for _, s := range []string{"", "-", "01", "-01", "1.", ".5", "1e", "+1", "1e+", "1.e1", "NaN", "Infinity", "0x1", "1 ", " 1", "1_000", "--1"} {
		if ValidNumber(s) {
			t.Errorf("ValidNumber(%q) = true", s)
		}
	}
}

func TestIsIntegerLiteral(t *testing.T) {
	for s, want := range map[string]bool{
		"0": true, "-0": true, "12345678901234567890": true,
		"1.0": false, "1e3": false, "1E3": false, "-0.0": false,
	} {
		if IsIntegerLiteral(s) != want {
			t.Errorf("IsIntegerLiteral(%q) = %v", s, !want)
		}
	}
}

func TestCanonicalNumberAndCheckNumber(t *testing.T) {
	for in, want := range map[string]string{
		"0": "0", "-0": "0", "-0.0": "-0.0", "7": "7", "1.50": "1.5", "1e2": "100.0",
		"2.5E-3": "0.0025", "1e16": "1e+16", "1e-400": "0.0",
		"123456789012345678901234567890":      "123456789012345678901234567890",
		strings.Repeat("9", 4300):             strings.Repeat("9", 4300),
		"-" + strings.Repeat("9", 4300):       "-" + strings.Repeat("9", 4300),
		"0." + strings.Repeat("0", 400) + "1": "0.0",
	} {
		got, err := CanonicalNumber(in)
		if err != nil || got != want {
			t.Errorf("CanonicalNumber(%.40s) = %.40s, %v; want %.40s", in, got, err, want)
		}
		if err := CheckNumber(in); err != nil {
			t.Errorf("CheckNumber(%.40s): %v", in, err)
		}
	}
	for _, in := range []string{
		"1e400", "-1E+309", "1" + strings.Repeat("0", 309) + ".5", strings.Repeat("9", 4301),
		"-" + strings.Repeat("9", 4301), "", "abc", "1.", "0x10",
	} {
		if got, err := CanonicalNumber(in); err == nil {
			t.Errorf("CanonicalNumber(%.40s) = %.40s, want an error", in, got)
		}
		if CheckNumber(in) == nil {
			t.Errorf("CheckNumber(%.40s) accepted it", in)
		}
	}
}

// FuzzNumber holds the three views of a number literal to each other:
// CanonicalNumber's spelling, CheckNumber's verdict and SetMember's
// canonical check (which never builds a spelling for an integer). The
// spelling means the same int or float as the literal, and is a fixed point.
func FuzzNumber(f *testing.F) {
	for _, s := range strings.Fields("0 -0 -0.0 1e2 2.5E-3 1.50 1.5 1e16 1e+16 1e-05 5e-324 1E400 0.1e-400 " +
		"9007199254740993.0 12345678901234567890 100.0 1e22 -1.7976931348623157e+308 abc") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out, err := CanonicalNumber(s)
		if (err == nil) != (CheckNumber(s) == nil) {
			t.Fatalf("%q: CanonicalNumber error %v, CheckNumber error %v", s, err, CheckNumber(s))
		}
		end, spliceOK := canonicalNumber([]byte(s), 0)
		spliceOK = spliceOK && end == len(s)
		if spliceOK != (err == nil && out == s) {
			t.Fatalf("%q: splice check says canonical=%v, CanonicalNumber says %q, %v", s, spliceOK, out, err)
		}
		if err != nil {
			if ValidNumber(s) && !strings.ContainsAny(s, "eE") && len(s) <= 308 {
				t.Fatalf("%q: refused, but short and without an exponent: %v", s, err)
			}
			return
		}
		if again, err := CanonicalNumber(out); err != nil || again != out {
			t.Fatalf("%q → %q → %q, %v: not a fixed point", s, out, again, err)
		}
		if IsIntegerLiteral(s) {
			a, _ := new(big.Int).SetString(s, 10)
			if out != a.String() {
				t.Fatalf("%q → %q: not the integer %s", s, out, a)
			}
			return
		}
		if IsIntegerLiteral(out) {
			t.Fatalf("%q → %q: a float became an int", s, out)
		}
		a, _ := strconv.ParseFloat(s, 64)
		b, _ := strconv.ParseFloat(out, 64)
		if math.Float64bits(a) != math.Float64bits(b) {
			t.Fatalf("%q → %q: another float", s, out)
		}
	})
}
