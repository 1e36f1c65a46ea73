package canonical

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// TestRequestHashExactNumbers: requests that differ only beyond a double's
// precision are different requests; spellings of one value are one request.
func TestRequestHashExactNumbers(t *testing.T) {
	hash := func(args string) string {
		t.Helper()
		h, err := Hash([]byte(args))
		if err != nil {
			t.Fatalf("RequestHash(%s): %v", args, err)
		}
		return h
	}
	for _, pair := range [][2]string{
		{`{"amount":9007199254740992}`, `{"amount":9007199254740993}`},
		{`{"id":1234567890123456789012345}`, `{"id":1234567890123456789012346}`},
		{`{"x":1e-400}`, `{"x":2e-400}`},
		{`{"x":1e-400}`, `{"x":0}`},
		{`{"x":1e23}`, `{"x":99999999999999991611392}`},
		{`{"x":0.1}`, `{"x":0.1000000000000000055511151231257827}`},
		{`{"id":72057594037927936}`, `{"id":72057594037927940}`},
		{`{"x":0.1}`, `{"x":0.10000000000000002}`},
	} {
		if a, b := hash(pair[0]), hash(pair[1]); a == b {
			t.Errorf("%s and %s share hash %s", pair[0], pair[1], a)
		}
	}
	for _, same := range [][]string{
		{`{"amount":9007199254740993}`, `{"amount":9007199254740993.0}`, `{"amount":9.007199254740993e15}`, `{"amount":90071992547409930e-1}`},
		{`{"id":1234567890123456789012345}`, `{"id":1.234567890123456789012345E+24}`, `{ "id" : 12345678901234567890123450000e-4 }`},
		{`{"x":1e-400}`, `{"x":0.1e-399}`, `{"x":10E-401}`},
		{`{"amount":9007199254740992}`, `{"amount":9007199254740992.00}`, `{"amount":9.007199254740992e15}`},
		{`{}`, ``, `null`, ` `},
		{`{"x":0.1}`, `{"x":0.10000000000000001}`, `{"x":1.0000000000000001e-1}`, `{"x":0.100000000000000010}`},
		{`{"x":5e-324}`, `{"x":4.9406564584124654e-324}`},
	} {
		want := hash(same[0])
		for _, in := range same[1:] {
			if got := hash(in); got != want {
				t.Errorf("RequestHash(%s) = %s, want %s as for %s", in, got, want, same[0])
			}
		}
	}
}

// TestCanonicalizeNumberLimits: the numbers whose exact value would be too
// long to keep are errors with the number's offset, never its digits.
func TestCanonicalizeNumberLimits(t *testing.T) {
	card := strings.Repeat("4242", 26) // 104 digits
	for _, tt := range []struct{ in, want string }{
		{`{"a":` + card + `}`, "at offset 5: number with more than 100 significant digits"},
		{`[1,-0.` + card + `]`, "at offset 3: number with more than 100 significant digits"},
		{`[` + card[:101] + `e-50]`, "at offset 1: number with more than 100 significant digits"},
		{`[1e-10000]`, "at offset 1: number with an exponent below -9999"},
		{`{"a":[true,-4242e-10004]}`, "at offset 11: number with an exponent below -9999"},
		{`0.0000042e-9994`, "at offset 0: number with an exponent below -9999"},
		{`1e-4242424242424242424242424242`, "at offset 0: number with an exponent below -9999"},
		{`[1e400]`, "at offset 1: number out of the double range"},
		{`[-1.8e308]`, "at offset 1: number out of the double range"},
		{`{"a":0.1e310}`, "at offset 5: number out of the double range"},
	} {
		_, err := JSON([]byte(tt.in))
		if !errors.Is(err, ErrInvalidJSON) || err.Error() != "idempotency: invalid JSON: "+tt.want {
			t.Errorf("Canonicalize(%.40s...) error = %v, want %q", tt.in, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "4242") {
			t.Errorf("error quotes the input: %v", err)
		}
		if _, err := Hash([]byte(tt.in)); !errors.Is(err, ErrInvalidJSON) {
			t.Errorf("RequestHash(%.40s...) error = %v, want ErrInvalidJSON", tt.in, err)
		}
	}
	// Just inside the limits.
	for _, tt := range []struct{ in, want string }{
		{"-" + card[:100], "-4." + card[1:100] + "e+99"},
		{"0." + strings.Repeat("0", 500) + card[:100] + "e-9498", "4." + card[1:100] + "e-9999"},
		{"1" + strings.Repeat("0", 5000) + "e-5000", "1"},
		{"0e-99999999999999999999", "0"},
	} {
		if got, err := JSON([]byte(tt.in)); err != nil || string(got) != tt.want {
			t.Errorf("Canonicalize(%.40s...) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

// TestCanonicalizeDoubleEncoders: every number that strconv or encoding/json
// writes from a double has its RFC 8785 form, as gowebpki/jcs computes it.
func TestCanonicalizeDoubleEncoders(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	g := &docGen{r: rand.New(rand.NewPCG(seed, 0x0b03))}
	n := 10000
	if testing.Short() {
		n = 1000
	}
	for i := range n {
		f := g.number()
		if i < len(hardDoubles) {
			f = hardDoubles[i]
		}
		js, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range []string{
			strconv.FormatFloat(f, 'g', -1, 64),
			strconv.FormatFloat(f, 'e', -1, 64),
			strconv.FormatFloat(f, 'f', -1, 64),
			string(js),
		} {
			want, werr := jcs.Transform([]byte(in))
			got, err := JSON([]byte(in))
			if werr != nil || err != nil || string(got) != string(want) {
				t.Fatalf("seed %d: Canonicalize(%s) = %s, %v; jcs %s, %v", seed, in, got, err, want, werr)
			}
			checkNumber(t, in)
		}
	}
}

// TestCanonicalizeExactValue: for random decimals, near doubles and far from
// them, the canonical form is the ECMAScript form of the nearest double when
// that has the value as written or the number is that double printed
// (refPrinted), and otherwise the exact value in the exact notation.
func TestCanonicalizeExactValue(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0x0b04))
	g := &docGen{r: r}
	exactSeen, doubleSeen := 0, 0
	n := 10000
	if testing.Short() {
		n = 1000
	}
	for range n {
		d := g.decimal()
		sign := ""
		if d.neg {
			sign = "-"
		}
		in := spelling{r}.decimal(sign, d.digits, d.exp)
		if checkNumber(t, in) {
			exactSeen++
		} else {
			doubleSeen++
		}
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
	if exactSeen < n/5 || doubleSeen < n/50 {
		t.Errorf("exact forms %d, double forms %d: the generator misses a branch", exactSeen, doubleSeen)
	}
}

// checkNumber checks the canonical form of one JSON number against
// refNumber and, where it is not the double's form, its exact value, and
// reports whether it is the exact form.
func checkNumber(t *testing.T, in string) (exactForm bool) {
	t.Helper()
	got, err := JSON([]byte(in))
	form, exact, rerr := refNumber(in)
	if (err == nil) != (rerr == nil) {
		t.Errorf("Canonicalize(%.120s) error %v, reference %v", in, err, rerr)
		return false
	}
	if err != nil {
		return false
	}
	if string(got) != form {
		t.Errorf("Canonicalize(%.120s) = %s, want %s", in, got, form)
	}
	f, _ := strconv.ParseFloat(in, 64)
	double, _ := jcs.NumberToJSON(f)
	exactForm = string(got) != double
	if (exactForm || !refPrinted(in)) && exactValue(string(got)).Cmp(exactValue(exact)) != 0 {
		t.Errorf("Canonicalize(%.120s) = %s: not the exact value %s", in, got, exact)
	}
	switch {
	case !exactForm:
	case plainInteger.Match(got):
		// Plain digits only where exact notation would read back as a
		// printed double.
		if !refPrinted(exact) {
			t.Errorf("Canonicalize(%.120s) = %s: plain digits, but exact notation %s is no printed double", in, got, exact)
		}
	case !exactNumberForm.Match(got):
		t.Errorf("Canonicalize(%.120s) = %s: neither the double's form %s nor exact notation", in, got, double)
	case refPrinted(string(got)):
		t.Errorf("Canonicalize(%.120s) = %s: exact notation that reads back as a printed double", in, got)
	}
	return exactForm
}

// TestCanonicalizeExactDocuments compares generated documents holding
// numbers kept exactly, in random spellings, with canonicalReference.
func TestCanonicalizeExactDocuments(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0x0b05))
	for i := range 1000 {
		g := &docGen{r: r, maxDepth: 1 + r.IntN(5), maxWidth: 1 + r.IntN(8), exact: true}
		in := spelling{r}.text(g.value(0))
		checkAgainstReference(t, in)
		if t.Failed() {
			t.Fatalf("seed %d, document %d", seed, i)
		}
	}
}

func checkAgainstReference(t *testing.T, in []byte) {
	t.Helper()
	want, werr := canonicalReference(in)
	got, err := JSON(in)
	if (err == nil) != (werr == nil) {
		t.Errorf("Canonicalize error %v, reference %v\ninput %q", err, werr, in)
		return
	}
	if err == nil && string(got) != string(want) {
		t.Errorf("Canonicalize differs from the reference\ninput %q\n got %q\nwant %q", in, got, want)
	}
}
