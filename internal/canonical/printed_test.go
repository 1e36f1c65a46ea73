package canonical

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// printedDoubleVectors are the test vectors of docs/DESIGN.md, "Request hash
// and dispatch fingerprint": a number written with a '.' or an exponent, of at
// most 17 significant digits, that its nearest double prints as at that many
// digits is that double; an integer literal, a number of more digits or one no
// double prints as keeps its exact value. changed marks the numbers whose form
// the printed-double rule changed, whose request hash under the previous rule
// differs.
var printedDoubleVectors = []struct {
	in, want string
	changed  bool
}{
	// %.17g, toPrecision(17) and PHP's serialize_precision=17 of doubles.
	{"0.10000000000000001", "0.1", true},                  // 0.1
	{"-0.10000000000000001", "-0.1", true},                // -0.1
	{"47839.395003393292", "47839.39500339329", true},     // 47839.39500339329
	{"1.0000000000000001e-5", "0.00001", true},            // 1e-5
	{"9.9999999999999992e+22", "1e+23", true},             // 1e23 at 17 digits
	{"4.9406564584124654e-324", "5e-324", true},           // the least double
	{"7.2057594037927936E+16", "72057594037927940", true}, // 2^56 at 17 digits
	{"2.5000000000000000e-1", "0.25", false},              // its exact value: never changed
	// Spellings of one value are one number: trailing and leading zeros
	// are not significant digits.
	{"0.100000000000000010", "0.1", true},
	{"1.0000000000000001e-1", "0.1", true},
	{"10000000000000001e-17", "0.1", true},
	{"0.0000100000000000000010e0", "0.00001", true},
	// Fewer digits: the double printed at 16 digits (%.16g of 2^56 + 2^4),
	// a subnormal (fewer bits than 15 digits need) printed at 10.
	{"7.205759403792795e16", "72057594037927950", false}, // already its shortest decimal
	{"4.144069561e-315", "4.14406956e-315", true},
	// A tie (the double 1234567890123456.25 is halfway): printf rounds to
	// even, toPrecision up; both are the double, rounding down is not.
	{"1234567890123456.2", "1234567890123456.2", false},
	{"1234567890123456.3", "1234567890123456.2", true},
	{"1571742410925541.7", "1.5717424109255417e+15", false}, // 1571742410925541.75 prints .8 both ways
	{"335435653856583.89", "3.3543565385658389e+14", false}, // 335435653856583.875 prints .88 both ways
	{"-3.3543565385658389000E+14", "-3.3543565385658389e+14", false},
	// Integer literals keep their exact value: two int64 ids that are one
	// double stay apart, and so do ids beyond 2^53. Where the exact
	// notation would read as a printed double (2^56 printed at 17 digits),
	// the plain digits are the exact form.
	{"72057594037927936", "72057594037927936", true},
	{"-70000000000000704", "-70000000000000704", true},
	{"70000000000000705", "7.0000000000000705e+16", false}, // no double prints as it
	{"72057594037927940", "72057594037927940", false},
	{"9007199254740993", "9.007199254740993e+15", false},
	{"99999999999999991611392", "9.9999999999999991611392e+22", false},
	{"1234567890123456789012345", "1.234567890123456789012345e+24", false},
	// Numbers no double prints as keep their exact value.
	{"9007199254740993.0", "9.007199254740993e+15", false},                                    // 9007199254740992 prints ...92
	{"0.1000000000000000055511151231257827", "1.000000000000000055511151231257827e-1", false}, // 34 digits
	{"0.010000000000000001", "1.0000000000000001e-2", false},                                  // %.17g of 0.01 is 0.01
	{"0.10000000000000002", "0.10000000000000002", false},                                     // another double, its shortest decimal
	{"1.7976931348623158e308", "1.7976931348623158e+308", false},                              // %.17g of the largest double ends in 57
	{"1234567890123456.4", "1.2345678901234564e+15", false},
	{"2.5e-324", "2.5e-324", false}, // rounds to 5e-324, which prints 4.9e-324 at 2 digits
	{"1e-400", "1e-400", false},     // rounds to 0
}

// TestCanonicalizePrintedDoubles checks the vectors of docs/DESIGN.md, "Request
// hash and dispatch fingerprint", alone and inside arguments, and
// RequestHashes: its previous hash is the hash of the arguments under the rule
// before printed doubles, given only where a number changed.
func TestCanonicalizePrintedDoubles(t *testing.T) {
	for _, tt := range printedDoubleVectors {
		if got, err := JSON([]byte(tt.in)); err != nil || string(got) != tt.want {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
		if form, _, err := refNumber(tt.in); err != nil || form != tt.want {
			t.Errorf("refNumber(%s) = %s, %v; want %s", tt.in, form, err, tt.want)
		}
		args := `{"b":[` + tt.in + `],"a":` + tt.in + `}`
		if got, err := JSON([]byte(args)); err != nil || string(got) != `{"a":`+tt.want+`,"b":[`+tt.want+`]}` {
			t.Errorf("Canonicalize(%s) = %s, %v", args, got, err)
		}
	}
}

// TestDesignNumberVectors: the vectors published in docs/DESIGN.md, "Request
// hash and dispatch fingerprint" are what Canonicalize does, and each is one of
// printedDoubleVectors.
func TestDesignNumberVectors(t *testing.T) {
	design, err := os.ReadFile("../../docs/DESIGN.md")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]string{}
	for _, tt := range printedDoubleVectors {
		known[tt.in] = tt.want
	}
	_, table, ok := strings.Cut(string(design), "| number as written | canonical | why |\n")
	if !ok {
		t.Fatal("DESIGN.md has no table of number vectors")
	}
	rows := 0
	for _, line := range strings.Split(table, "\n")[1:] { // after the |---| line
		cells := strings.Split(strings.TrimSpace(line), " | ")
		if len(cells) != 3 || !strings.HasPrefix(cells[0], "| `") {
			break
		}
		want := strings.Trim(cells[1], "`")
		for _, in := range strings.Split(strings.TrimPrefix(cells[0], "| "), ", ") {
			in = strings.Trim(in, "`")
			if got, err := JSON([]byte(in)); err != nil || string(got) != want {
				t.Errorf("DESIGN.md: %s -> %s, but Canonicalize gives %s, %v", in, want, got, err)
			}
			if known[in] != want {
				t.Errorf("DESIGN.md: %s -> %s is not in printedDoubleVectors", in, want)
			}
			rows++
		}
	}
	if rows < 14 {
		t.Fatalf("found %d vectors in DESIGN.md section 5", rows)
	}
}

func TestRequestHashesPrevious(t *testing.T) {
	sum := func(canonical string) string {
		s := sha256.Sum256([]byte(canonical))
		return "sha256:" + hex.EncodeToString(s[:])
	}
	for _, tt := range printedDoubleVectors {
		args := `{"b":[` + tt.in + `, 1.5],"a":"x"}`
		hash, previous, err := Hashes([]byte(args))
		if err != nil {
			t.Fatalf("RequestHashes(%s): %v", args, err)
		}
		if want := sum(`{"a":"x","b":[` + tt.want + `,1.5]}`); hash != want {
			t.Errorf("RequestHashes(%s) hash = %s, want %s", args, hash, want)
		}
		if h, _ := Hash([]byte(args)); h != hash {
			t.Errorf("RequestHash(%s) = %s, RequestHashes %s", args, h, hash)
		}
		want := ""
		if tt.changed {
			old, err := v1Canonicalize([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if want = sum(`{"a":"x","b":[` + string(old) + `,1.5]}`); want == hash {
				t.Fatalf("%s: the previous rule gives the same form %s", tt.in, old)
			}
		}
		if previous != want {
			t.Errorf("RequestHashes(%s) previous = %q, want %q", args, previous, want)
		}
	}
	for _, args := range []string{"", "null", " {} ", `{"a":1.5}`, `[72057594037927940]`, `[9007199254740993]`} {
		if _, previous, err := Hashes([]byte(args)); err != nil || previous != "" {
			t.Errorf("RequestHashes(%q) previous = %q, %v; want none", args, previous, err)
		}
	}
	if _, _, err := Hashes([]byte(`{"a":0.10000000000000001,}`)); err == nil {
		t.Errorf("RequestHashes of invalid JSON: no error")
	}
}
