package canonical

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// TestCanonicalizeRFC8785Examples: the examples of RFC 8785 section 3.2.
// The serialization example writes 333333333.33333329, two digits more than
// its double prints back to, so that number keeps its exact value (the one
// departure from RFC 8785, see Canonicalize); written as a double encoder
// writes it, the example is the RFC's to the byte.
func TestCanonicalizeRFC8785Examples(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{
			"3.2.2 serialization",
			`{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`,
			`{"literals":[null,true,false],"numbers":[3.3333333333333329e+8,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
		},
		{
			"3.2.2 serialization, numbers as doubles print",
			`{
  "numbers": [333333333.3333333, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}`,
			`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`,
		},
		{
			"3.2.3 sorting",
			`{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`,
			"{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\"," +
				"\"€\":\"Euro Sign\",\"😀\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := JSON([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("Canonicalize:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestCanonicalizeNumbers covers the table of RFC 8785 appendix B, each double
// written in several JSON spellings of its shortest decimal, ECMAScript
// corner cases and numbers kept exactly.
func TestCanonicalizeNumbers(t *testing.T) {
	appendixB := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, tt := range appendixB {
		f := math.Float64frombits(tt.bits)
		short := strconv.FormatFloat(f, 'e', -1, 64)
		mant, exp, _ := strings.Cut(short, "e")
		if !strings.Contains(mant, ".") {
			mant += "."
		}
		for _, in := range []string{
			strconv.FormatFloat(f, 'g', -1, 64),
			short,
			mant + "000E" + exp,
			tt.want,
		} {
			if got, err := JSON([]byte(in)); err != nil || string(got) != tt.want {
				t.Errorf("%016x: Canonicalize(%s) = %s, %v; want %s", tt.bits, in, got, err, tt.want)
			}
		}
	}

	more := []struct{ in, want string }{
		{"-0", "0"}, {"-0.0", "0"}, {"0e10", "0"}, {"-0E-5", "0"}, {"0.000", "0"},
		{"1.0", "1"}, {"1e2", "100"}, {"1E+2", "100"}, {"100e-2", "1"}, {"0.1", "0.1"},
		{"1e21", "1e+21"}, {"1e20", "100000000000000000000"}, {"123e18", "123000000000000000000"},
		{"1e-7", "1e-7"}, {"1.5e-7", "1.5e-7"}, {"0.0000015", "0.0000015"}, {"1e-6", "0.000001"},
		{"5e-324", "5e-324"}, {"4.9406564584124654e-324", "5e-324"},
		{"2.5e-324", "2.5e-324"}, {"1e-400", "1e-400"}, {"-1e-400", "-1e-400"}, {"-0.000e-400", "0"},
		{"1e-9999", "1e-9999"}, {"0.0001e-9995", "1e-9999"}, {"-12.5000e-10000", "-1.25e-9999"},
		{"1e308", "1e+308"}, {"1.5e300", "1.5e+300"}, {"-1.5e-300", "-1.5e-300"},
		{"9007199254740993", "9.007199254740993e+15"}, {"9007199254740995", "9.007199254740995e+15"},
		{"9007199254740992", "9007199254740992"}, {"9007199254740992.000", "9007199254740992"},
		{"9007199254740996", "9007199254740996"}, {"9007199254740993e0", "9.007199254740993e+15"},
		{"1234567890123456789012345", "1.234567890123456789012345e+24"},
		{"0.1000000000000000055511151231257827021181583404541015625", "1.000000000000000055511151231257827021181583404541015625e-1"},
		{"1.00000000000000000000", "1"}, {"1.00000000000000000001", "1.00000000000000000001e+0"},
		{"-100000000000000000001e-20", "-1.00000000000000000001e+0"},
		{"0.10000000000000001", "0.1"}, {"1.7976931348623158e308", "1.7976931348623158e+308"},
		{"123456789012345", "123456789012345"}, {"-123456789012345", "-123456789012345"},
		{"1234567890123456", "1234567890123456"}, {"12345678901234567890", "1.234567890123456789e+19"},
		{"12345678901234567000", "12345678901234567000"}, {"18446744073709552000", "18446744073709552000"},
		{"123456789012345678901234", "1.23456789012345678901234e+23"},
		{"18446744073709551616", "1.8446744073709551616e+19"},
		{"0.30000000000000004", "0.30000000000000004"}, {"0.1e1", "1"},
		{"15e-1", "1.5"}, {"12.5e-1", "1.25"}, {"0.00012e2", "0.012"}, {"123e-8", "0.00000123"},
		{"123e-9", "1.23e-7"}, {"1.5e20", "150000000000000000000"}, {"1.5e21", "1.5e+21"},
		{"0e999999999", "0"}, {"-0.0e5", "0"}, {"1E-6", "0.000001"}, {"1e-06", "0.000001"},
		{"123456789012345e6", "123456789012345000000"}, {"1234567890123456e5", "123456789012345600000"},
		{"1e+0000000000000000000000000000000000000001", "10"}, {"1e99999999999999999999", ""},
		{"1e-10000", ""}, {"1e-99999999999999999999", ""}, {"0.00001e-9995", ""},
		{"1" + strings.Repeat("0", 99) + "1", ""}, {"1" + strings.Repeat("0", 98) + "1", "1." + strings.Repeat("0", 98) + "1e+99"},
		{"1" + strings.Repeat("0", 400), ""}, {"1" + strings.Repeat("0", 300), "1e+300"},
	}
	for _, tt := range more {
		if tt.want == "" {
			if _, err := JSON([]byte(tt.in)); !errors.Is(err, ErrInvalidJSON) {
				t.Errorf("Canonicalize(%s) error = %v, want ErrInvalidJSON", tt.in, err)
			}
			continue
		}
		if got, err := JSON([]byte(tt.in)); err != nil || string(got) != tt.want {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
		inArray := "[" + tt.in + "," + tt.in + "]"
		if got, err := JSON([]byte(inArray)); err != nil || string(got) != "["+tt.want+","+tt.want+"]" {
			t.Errorf("Canonicalize(%s) = %s, %v", inArray, got, err)
		}
	}
}

func TestCanonicalizeStrings(t *testing.T) {
	tests := []struct{ in, want string }{
		{`""`, `""`},
		{`"plain"`, `"plain"`},
		{`"\u0000\u0001\u001f\u001F"`, `"\u0000\u0001\u001f\u001f"`},
		{`"\u0008\u0009\u000a\u000c\u000d"`, `"\b\t\n\f\r"`},
		{`"\b\t\n\f\r"`, `"\b\t\n\f\r"`},
		{`"\u000b"`, `"\u000b"`},
		{`"\u0022\u005c\"\\"`, `"\"\\\"\\"`},
		{`"\/\u002f/"`, `"///"`},
		{`"\u007f"`, "\"\x7f\""},
		{"\"\x7f\"", "\"\x7f\""},
		{`"\u00e9\u00C9é"`, `"éÉé"`},
		{`"\u20ac\uFFFF\ufeff"`, "\"€\uffff\ufeff\""},
		{`"\ud83d\ude00\uD83D\uDE00😀"`, `"😀😀😀"`},
		{`"\udbff\udfff"`, "\"\U0010ffff\""},
		{`"<>&\u2028\u2029"`, "\"<>&\u2028\u2029\""},
		{`"a\u0041\u0000b"`, `"aA\u0000b"`},
	}
	for _, tt := range tests {
		got, err := JSON([]byte(tt.in))
		if err != nil || string(got) != tt.want {
			t.Errorf("Canonicalize(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

func TestCanonicalizeSortsByUTF16CodeUnits(t *testing.T) {
	// In UTF-8 (and code point) order U+E000..U+FFFF come before the
	// supplementary planes; in UTF-16 order after them.
	in := `{"\ufffd":1,"\ue000":2,"\ud800\udc00":3,"\udbff\udfff":4,"\ud7ff":5,"\uffff":6,"😀":7,"":8,"a":9,"ab":10,"a\u0000":11}`
	want := "{\"\":8,\"a\":9,\"a\\u0000\":11,\"ab\":10,\"\ud7ff\":5,\"\U00010000\":3,\"😀\":7,\"\U0010ffff\":4,\"\ue000\":2,\"\ufffd\":1,\"\uffff\":6}"
	got, err := JSON([]byte(in))
	if err != nil || string(got) != want {
		t.Errorf("Canonicalize:\n got %s, %v\nwant %s", got, err, want)
	}

	// Names that differ only after an escape sort by the unescaped text:
	// "\"" (U+0022) before "#" (U+0023) and "\n" (U+000A) before "\u000b".
	in = `{"#":1,"\"":2,"\u000b":3,"\n":4,"\\":5,"[":6}`
	want = `{"\n":4,"\u000b":3,"\"":2,"#":1,"[":6,"\\":5}`
	if got, err := JSON([]byte(in)); err != nil || string(got) != want {
		t.Errorf("Canonicalize(%s) = %s, %v; want %s", in, got, err, want)
	}
}

func TestCanonicalizeNested(t *testing.T) {
	in := ` { "b" : { "d" : [ {"z":1,"y":[{"q":0,"p":1}]}, 2 ], "c" : {} }, "a" : [ [ ] , { } , {"k":{"j":1,"i":2}} ] } `
	want := `{"a":[[],{},{"k":{"i":2,"j":1}}],"b":{"c":{},"d":[{"y":[{"p":1,"q":0}],"z":1},2]}}`
	got, err := JSON([]byte(in))
	if err != nil || string(got) != want {
		t.Errorf("Canonicalize:\n got %s, %v\nwant %s", got, err, want)
	}
	// An object in order whose child is not: the parent is copied, the child sorted.
	in = `{"a":{"y":1,"x":2},"b":{"m":1,"n":[{"b":1,"a":2}]}}`
	want = `{"a":{"x":2,"y":1},"b":{"m":1,"n":[{"a":2,"b":1}]}}`
	if got, err := JSON([]byte(in)); err != nil || string(got) != want {
		t.Errorf("Canonicalize(%s) = %s, %v; want %s", in, got, err, want)
	}
	for _, in := range []string{`null`, `true`, `false`, `0`, `"x"`, `[]`, `{}`, ` [ 1 , "a" ] `} {
		want := strings.ReplaceAll(strings.TrimSpace(in), " ", "")
		if got, err := JSON([]byte(in)); err != nil || string(got) != want {
			t.Errorf("Canonicalize(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
}

func TestCanonicalizeDepth(t *testing.T) {
	deep := func(n int) []byte {
		var b bytes.Buffer
		for i := range n {
			if i%2 == 0 {
				b.WriteString(`[`)
			} else {
				b.WriteString(`{"b":1,"a":`)
			}
		}
		b.WriteString("0")
		for i := n - 1; i >= 0; i-- {
			if i%2 == 0 {
				b.WriteString(`]`)
			} else {
				b.WriteString(`}`)
			}
		}
		return b.Bytes()
	}
	in := deep(maxJSONDepth)
	got, err := JSON(in)
	if err != nil {
		t.Fatalf("depth %d: %v", maxJSONDepth, err)
	}
	want, err := jcs.Transform(in)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("depth %d: differs from jcs (%v)", maxJSONDepth, err)
	}
	for _, in := range [][]byte{deep(maxJSONDepth + 1), []byte(strings.Repeat("[", 1<<20))} {
		if _, err := JSON(in); !errors.Is(err, ErrInvalidJSON) || !strings.Contains(err.Error(), "nesting deeper than 10000") {
			t.Errorf("len %d: err = %v, want nesting error", len(in), err)
		}
	}
}

func TestCanonicalizeErrors(t *testing.T) {
	tests := []struct {
		in   string
		want string // in the message, after "idempotency: invalid JSON: "
	}{
		{``, "at offset 0: no JSON value"},
		{" \n\t", "at offset 3: no JSON value"},
		{`{`, "at offset 1: unexpected end of input in object"},
		{`[`, "at offset 1: unexpected end of input in array"},
		{`[1`, "at offset 2: unexpected end of input in array"},
		{`{"a"`, "at offset 4: unexpected end of input in object"},
		{`{"a":`, "at offset 5: unexpected end of input in object"},
		{`{"a":1`, "at offset 6: unexpected end of input in object"},
		{`{"a":1,"a":2}`, "at offset 7: duplicate member name"},
		{`{"a":1,"\u0061":2}`, "at offset 7: duplicate member name"},
		{`{"b":1,"a":2,"b":3}`, "at offset 13: duplicate member name"},
		{`{"b":1,"a":2,"\u0062":3}`, "at offset 13: duplicate member name"},
		{`{"\n":1,"\u000a":2}`, "at offset 8: duplicate member name"},
		{`{"😀":1,"\ud83d\ude00":2}`, "at offset 10: duplicate member name"},
		{`[{"a":1},{"a":1,"a":1}]`, "at offset 16: duplicate member name"},
		{`"\ud800"`, "at offset 1: lone high surrogate escape"},
		{`"\ud800\u0041"`, "at offset 1: lone high surrogate escape"},
		{`"\ud800\ud800"`, "at offset 1: lone high surrogate escape"},
		{`"\ud800x"`, "at offset 1: lone high surrogate escape"},
		{"\"\\ud800\xf0\x9f\x98\x80\"", "at offset 1: lone high surrogate escape"},
		{`"\udc00"`, "at offset 1: lone low surrogate escape"},
		{`"a\ude00\ud83d"`, "at offset 2: lone low surrogate escape"},
		{"\"\xff\"", "at offset 1: invalid UTF-8 in string"},
		{"\"ab\xc3\"", "at offset 3: invalid UTF-8 in string"},
		{"\"\xed\xa0\x80\"", "at offset 1: invalid UTF-8 in string"}, // an encoded surrogate
		{"\"\xc0\xaf\"", "at offset 1: invalid UTF-8 in string"},     // overlong
		{"\"\xf4\x90\x80\x80\"", "at offset 1: invalid UTF-8 in string"},
		{"\"a\x01\"", "at offset 2: unescaped control character in string"},
		{"\"a\tb\"", "at offset 2: unescaped control character in string"},
		{`"\q"`, "at offset 1: invalid escape in string"},
		{`"\u12"`, "at offset 1: invalid \\u escape"},
		{`"\u12G4"`, "at offset 1: invalid \\u escape"},
		{`"abc`, "at offset 0: unterminated string"},
		{`"abc\`, "at offset 0: unterminated string"},
		{`1e400`, "at offset 0: number out of the double range"},
		{`[-1e400]`, "at offset 1: number out of the double range"},
		{strings.Repeat("9", 400), "at offset 0: number with more than 100 significant digits"},
		{`01`, "at offset 1: unexpected number after the top-level value"},
		{`1.`, "at offset 0: invalid number (no digit after the decimal point)"},
		{`.5`, "at offset 0: unexpected character where a value was expected"},
		{`+1`, "at offset 0: unexpected character where a value was expected"},
		{`-`, "at offset 0: invalid number"},
		{`-a`, "at offset 0: invalid number"},
		{`1e`, "at offset 0: invalid number (no digit in the exponent)"},
		{`1e+`, "at offset 0: invalid number (no digit in the exponent)"},
		{`NaN`, "at offset 0: unexpected character where a value was expected"},
		{`-Infinity`, "at offset 0: invalid number"},
		{`tru`, "at offset 0: invalid literal (want true)"},
		{`nul`, "at offset 0: invalid literal (want null)"},
		{`falsey`, "at offset 5: unexpected character after the top-level value"},
		{`[1,]`, "at offset 3: unexpected ']' where a value was expected"},
		{`[,1]`, "at offset 1: unexpected ',' where a value was expected"},
		{`[1 2]`, "at offset 3: unexpected number after array element (want ',' or ']')"},
		{`{"a":1,}`, "at offset 7: unexpected '}' where a member name was expected"},
		{`{,}`, "at offset 1: unexpected ',' where a member name was expected"},
		{`{"a" 1}`, "at offset 5: unexpected number after member name (want ':')"},
		{`{1:2}`, "at offset 1: unexpected number where a member name was expected"},
		{`{"a":1 "b":2}`, "at offset 7: unexpected '\"' after object member (want ',' or '}')"},
		{`{} x`, "at offset 3: unexpected character after the top-level value"},
		{`{}{}`, "at offset 2: unexpected '{' after the top-level value"},
		{"\xef\xbb\xbf{}", "at offset 0: unexpected non-ASCII byte where a value was expected"},
		{"[\x00]", "at offset 1: unexpected control character where a value was expected"},
		{"\f1", "at offset 0: unexpected control character where a value was expected"},
		{`]`, "at offset 0: unexpected ']' where a value was expected"},
	}
	for _, tt := range tests {
		dst := []byte("keep")
		got, err := appendJSON(dst, []byte(tt.in))
		if !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("appendJSON(%q) error = %v, want ErrInvalidJSON", tt.in, err)
			continue
		}
		if want := "idempotency: invalid JSON: " + tt.want; err.Error() != want {
			t.Errorf("appendJSON(%q) error\n got %q\nwant %q", tt.in, err, want)
		}
		if string(got) != "keep" || len(got) != len(dst) {
			t.Errorf("appendJSON(%q) on error returned %q, want dst unchanged", tt.in, got)
		}
		if _, herr := Hash([]byte(tt.in)); tt.in != "" && strings.TrimSpace(tt.in) != "" && !errors.Is(herr, ErrInvalidJSON) {
			t.Errorf("RequestHash(%q) error = %v, want ErrInvalidJSON", tt.in, herr)
		}
		if _, jerr := jcs.Transform([]byte(tt.in)); jerr == nil {
			t.Errorf("jcs accepts %q: the test case is not invalid", tt.in)
		}
	}
}

func TestCanonicalizeErrorsDoNotQuoteInput(t *testing.T) {
	const secret = "sk_live_9f8e7d6c"
	for _, in := range []string{
		`{"token":"` + secret + `","token":"` + secret + `"}`,
		`{"token":` + secret + `}`,
		`{"token":"` + secret,
		`{"token":"` + secret + `\x"}`,
		`{"` + secret + `":1,"` + secret + `":1}`,
		`{"token":"` + secret + `"} ` + secret,
		`[1e999` + secret + `]`,
		`[` + strings.Repeat("4242", 30) + `]`,
		`[4242e-424242]`,
	} {
		_, err := JSON([]byte(in))
		if err == nil {
			t.Errorf("Canonicalize(%q) succeeded", in)
			continue
		}
		if strings.Contains(err.Error(), "sk_") || strings.Contains(err.Error(), "9f8e") || strings.Contains(err.Error(), "4242") {
			t.Errorf("error quotes the input: %v", err)
		}
	}
}

func TestAppendJSON(t *testing.T) {
	dst := make([]byte, 0, 64)
	dst = append(dst, "prefix:"...)
	got, err := appendJSON(dst, []byte(`{"b":[1.0,{"d":1,"c":2}],"a":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `prefix:{"a":true,"b":[1,{"c":2,"d":1}]}`; string(got) != want {
		t.Errorf("appendJSON = %s, want %s", got, want)
	}
	if &got[0] != &dst[:1][0] {
		t.Error("appendJSON reallocated although dst had room")
	}
}

func TestRequestHash(t *testing.T) {
	empty := sha256.Sum256([]byte("{}"))
	emptyHash := "sha256:" + hex.EncodeToString(empty[:])
	if emptyHash != emptyObjectHash {
		t.Fatalf("emptyObjectHash = %s, want %s", emptyObjectHash, emptyHash)
	}
	for _, in := range []string{"", " ", "\n\t\r ", "{}", " { } ", "null", " null\n"} {
		got, err := Hash([]byte(in))
		if err != nil || got != emptyHash {
			t.Errorf("RequestHash(%q) = %s, %v; want %s", in, got, err, emptyHash)
		}
	}
	if got, err := Hash(nil); err != nil || got != emptyHash {
		t.Errorf("RequestHash(nil) = %s, %v", got, err)
	}

	format := regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	seen := map[string]string{}
	for _, in := range []string{
		`{"a":1}`, `{"a":"1"}`, `{"a":1.5}`, `{"a":[1]}`, `{"b":1}`, `[]`, `[{}]`, `0`, `false`, `""`, `"{}"`,
		`{"a":{"b":{"c":{}}}}`, `{"a":{"b":{"c":[]}}}`, `{"a":null}`,
	} {
		got, err := Hash([]byte(in))
		if err != nil || !format.MatchString(got) {
			t.Errorf("RequestHash(%s) = %q, %v", in, got, err)
			continue
		}
		canon, err := jcs.Transform([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(canon)
		if want := "sha256:" + hex.EncodeToString(sum[:]); got != want {
			t.Errorf("RequestHash(%s) = %s, want %s", in, got, want)
		}
		if prev, ok := seen[got]; ok {
			t.Errorf("RequestHash(%s) == RequestHash(%s)", in, prev)
		}
		seen[got] = in
	}
}

// TestCanonicalizeDifferential compares Canonicalize and RequestHash with
// github.com/gowebpki/jcs over generated documents in random spellings.
func TestCanonicalizeDifferential(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0x0b01))
	n := 3000
	if testing.Short() {
		n = 300
	}
	for i := range n {
		g := &docGen{r: r, maxDepth: 1 + r.IntN(6), maxWidth: 1 + r.IntN(8)}
		doc := g.value(0)
		if i%50 == 0 {
			doc = g.chain(doc, r.IntN(3000))
		}
		in := spelling{r}.text(doc)
		checkAgainstJCS(t, in)
		if t.Failed() {
			t.Fatalf("seed %d, document %d", seed, i)
		}
	}
}

func checkAgainstJCS(t *testing.T, in []byte) {
	t.Helper()
	want, werr := jcs.Transform(in)
	got, err := JSON(in)
	if werr != nil {
		if err == nil {
			t.Errorf("Canonicalize accepts what jcs rejects (%v):\n%q", werr, in)
		}
		return
	}
	if err != nil {
		t.Errorf("Canonicalize: %v\ninput %q", err, in)
		return
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Canonicalize differs from jcs\ninput %q\n got %q\nwant %q", in, got, want)
		return
	}
	h, err := Hash(in)
	sum := sha256.Sum256(want)
	if wantHash := "sha256:" + hex.EncodeToString(sum[:]); string(want) != "null" && (err != nil || h != wantHash) {
		t.Errorf("RequestHash = %s, %v; want %s\ninput %q", h, err, wantHash, in)
	}
}

// TestRequestHashIgnoresSpelling: shuffled members, other whitespace, other
// number and string spellings never change the hash.
func TestRequestHashIgnoresSpelling(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0x0b02))
	n := 1000
	if testing.Short() {
		n = 100
	}
	for i := range n {
		g := &docGen{r: r, maxDepth: 1 + r.IntN(5), maxWidth: 1 + r.IntN(10), exact: i%2 == 0}
		doc := &jnode{kind: 'o'}
		for j := range 1 + r.IntN(8) {
			doc.names = append(doc.names, fmt.Sprintf("%s%d", g.string(3), j))
			doc.values = append(doc.values, g.value(1))
		}
		plain := spelling{}.text(doc)
		want, err := Hash(plain)
		if err != nil {
			t.Fatalf("seed %d: RequestHash(%q): %v", seed, plain, err)
		}
		for range 4 {
			other := spelling{r}.text(doc)
			if got, err := Hash(other); err != nil || got != want {
				t.Fatalf("seed %d, document %d: hash changed with spelling\n%q -> %s\n%q -> %s, %v", seed, i, plain, want, other, got, err)
			}
		}
	}
}

func TestCompareUTF16(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	g := &docGen{r: r}
	for range 20000 {
		a, b := g.string(4), g.string(4)
		if r.IntN(4) == 0 {
			b = a + b
		}
		want := compareUTF16Reference(a, b)
		if got := compareUTF16([]byte(a), []byte(b)); cmpSign(got) != want {
			t.Fatalf("compareUTF16(%+q, %+q) = %d, want sign %d", a, b, got, want)
		}
	}
}

func compareUTF16Reference(a, b string) int {
	ua, ub := utf16Units(a), utf16Units(b)
	for i := 0; i < len(ua) && i < len(ub); i++ {
		if ua[i] != ub[i] {
			return cmpSign(int(ua[i]) - int(ub[i]))
		}
	}
	return cmpSign(len(ua) - len(ub))
}

func utf16Units(s string) []uint16 {
	var u []uint16
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			u = append(u, uint16(0xd800+r>>10), uint16(0xdc00+r&0x3ff))
		} else {
			u = append(u, uint16(r))
		}
	}
	return u
}

func cmpSign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

func TestSkipSafe(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	special := []byte{0x00, 0x1f, 0x20, '"', '\\', 0x7f, 0x80, 0xff, '!', '#', '[', ']', 0x21, 0x5b, 0x5d}
	for range 100000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			if r.IntN(8) == 0 {
				b[i] = special[r.IntN(len(special))]
			} else {
				b[i] = byte(0x20 + r.IntN(0x60))
			}
		}
		start := r.IntN(len(b) + 1)
		want := start
		for want < len(b) && strSafe[b[want]] {
			want++
		}
		if got := skipSafe(b, start); got != want {
			t.Fatalf("skipSafe(%q, %d) = %d, want %d", b, start, got, want)
		}
	}
}

func TestCanonicalizeSizeLimit(t *testing.T) {
	// A fresh large allocation is not touched before the size check, so this
	// costs address space, not memory.
	big := make([]byte, maxCanonicalInput+1)
	for _, f := range []func([]byte) error{
		func(b []byte) error { _, err := JSON(b); return err },
		func(b []byte) error { _, err := Hash(b); return err },
	} {
		if err := f(big); !errors.Is(err, ErrInvalidJSON) || !strings.Contains(err.Error(), "larger than 256 MiB") {
			t.Errorf("err = %v, want size error", err)
		}
	}
}

// TestCanonicalizeLargeObjects covers objects beyond the small-object sort:
// many members, long names with shared prefixes, and a duplicate among them.
func TestCanonicalizeLargeObjects(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	g := &docGen{r: r}
	for _, n := range []int{17, 100, 2000} {
		doc := &jnode{kind: 'o'}
		for i := range n {
			name := fmt.Sprintf("%s%d", g.string(3), i)
			if i%3 == 0 {
				name = "a_long_shared_prefix_" + name
			}
			doc.names = append(doc.names, name)
			doc.values = append(doc.values, &jnode{kind: '#', num: float64(i)})
		}
		in := spelling{r}.text(doc)
		checkAgainstJCS(t, in)

		doc.names = append(doc.names, doc.names[r.IntN(n)])
		doc.values = append(doc.values, &jnode{kind: 'n'})
		in = spelling{r}.text(doc)
		if _, err := JSON(in); !errors.Is(err, ErrInvalidJSON) || !strings.Contains(err.Error(), "duplicate member name") {
			t.Errorf("%d members with a duplicate: err = %v", n+1, err)
		}
	}
}

// TestCanonicalizeBeyondSortBudget covers documents whose out-of-order objects
// nest so deep that sorting each in place would copy far more than the input:
// the outer ones are left to the emit pass, which must agree with jcs, also
// when the output is hashed in chunks.
func TestCanonicalizeBeyondSortBudget(t *testing.T) {
	for _, tt := range []struct{ depth, pad int }{{4, 30 << 10}, {200, 64}, {3000, 0}} {
		var b strings.Builder
		for range tt.depth {
			b.WriteString(`{"z":`)
		}
		fmt.Fprintf(&b, `{"y":"%s","x":[{"b":1,"a":2}]}`, strings.Repeat("é", tt.pad))
		for i := range tt.depth {
			fmt.Fprintf(&b, `,"a%d":{"d":%d,"c":[]}}`, i, i)
		}
		in := []byte(b.String())
		checkAgainstJCS(t, in)
		// The parse must leave work to the emit pass, or this covers nothing.
		c := getCanonicalizer()
		if err := c.parse(in); err != nil {
			t.Fatal(err)
		}
		if !c.reorder {
			t.Errorf("depth %d: every object sorted in place; the emit pass is not exercised", tt.depth)
		}
		putCanonicalizer(c)
	}
}

func TestSkipTextAndHasHighRune(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	special := []byte{0x00, 0x1f, '"', '\\', 0x7f, 0x80, 0xbf, 0xc3, 0xed, 0xee, 0xef, 0xf0, 0xff}
	for range 100000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			if r.IntN(6) == 0 {
				b[i] = special[r.IntN(len(special))]
			} else {
				b[i] = byte(0x20 + r.IntN(0x60))
			}
		}
		start := r.IntN(len(b) + 1)
		want := start
		for want < len(b) && (b[want] >= 0x80 || strSafe[b[want]]) {
			want++
		}
		if got := skipText(b, start); got != want {
			t.Fatalf("skipText(%q, %d) = %d, want %d", b, start, got, want)
		}
		if got, want := v1hasHighRune(b), slices.ContainsFunc(b, func(c byte) bool { return c >= 0xee }); got != want {
			t.Fatalf("v1hasHighRune(%q) = %v, want %v", b, got, want)
		}
	}
	for _, s := range []string{"abcdefgh퟿", "abcdefgh", "￿", "𐀀", "abÿ߿ࠀ퟿xyz", "𠜎"} {
		want := strings.ContainsFunc(s, func(r rune) bool { return r >= 0xe000 })
		if got := v1hasHighRune([]byte(s)); got != want {
			t.Errorf("v1hasHighRune(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestCanonicalizeInvalidUTF8Offset: the offset names the first bad byte
// also when it follows valid non-ASCII text in a long string.
func TestCanonicalizeInvalidUTF8Offset(t *testing.T) {
	for _, tt := range []struct {
		in  string
		off int
	}{
		{"\"abcdefghé\xffxyz\"", 11},
		{"\"ééééééééé\xe2\x82\"", 19},
		{"\"ab😀cdefghijklmn\xed\xa0\x80\"", 19},
		{"\"é\\n\xc3\x28\"", 5},
		{"[\"ok\",\"\u00e9\u00e9\xf8\"]", 11},
	} {
		_, err := JSON([]byte(tt.in))
		if want := fmt.Sprintf("at offset %d: invalid UTF-8 in string", tt.off); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Canonicalize(%q): err = %v, want %q", tt.in, err, want)
		}
	}
}
