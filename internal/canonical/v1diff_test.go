package canonical

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// sameAsV1 fails unless JSON, appendJSON and Hash give
// exactly what the frozen implementation (v1_test.go) gives for
// data: the same text, the same hash, or the same error message. The frozen
// implementation predates the printed-double rule (refPrinted), which reads
// such a number as its double: it gets data with those numbers respelt as
// the doubles' shortest decimals (respellPrinted), and RequestHashes'
// previous hash is its hash of data as it is.
func sameAsV1(t *testing.T, data []byte) {
	t.Helper()
	v1data := respellPrinted(data)
	got, err := JSON(data)
	want, werr := v1Canonicalize(v1data)
	want = plainPrintedIntegers(want)
	if fmt.Sprint(err) != fmt.Sprint(werr) || string(got) != string(want) {
		t.Fatalf("Canonicalize(%q)\n got %q, %v\nwant %q, %v", data, got, err, want, werr)
	}
	app, err := appendJSON([]byte("x"), data)
	wapp, werr := v1appendJSON([]byte("x"), v1data)
	if werr == nil {
		wapp = append([]byte("x"), want...)
	}
	if fmt.Sprint(err) != fmt.Sprint(werr) || string(app) != string(wapp) {
		t.Fatalf("appendJSON(%q)\n got %q, %v\nwant %q, %v", data, app, err, wapp, werr)
	}
	h, err := Hash(data)
	wh, werr := v1RequestHash(v1data)
	if werr == nil && !Absent(data) {
		sum := sha256.Sum256(want)
		wh = "sha256:" + hex.EncodeToString(sum[:])
	}
	if fmt.Sprint(err) != fmt.Sprint(werr) || h != wh {
		t.Fatalf("RequestHash(%q)\n got %s, %v\nwant %s, %v", data, h, err, wh, werr)
	}
	h2, prev, err := Hashes(data)
	if fmt.Sprint(err) != fmt.Sprint(werr) || h2 != h {
		t.Fatalf("RequestHashes(%q) = %s, %v; RequestHash %s", data, h2, err, h)
	}
	if err == nil {
		wprev, _ := v1RequestHash(data)
		if wprev == h {
			wprev = ""
		}
		if prev != wprev {
			t.Fatalf("RequestHashes(%q) previous %q, want %q", data, prev, wprev)
		}
	}
}

// plainPrintedIntegers returns canonical, a canonical form under the frozen
// implementation, with each integer in exact notation that refPrinted would
// read as a double written in plain digits instead, as the current rule
// writes it. A number token in canonical text starts with '-' or a digit
// outside strings; strings hold no unescaped quote.
func plainPrintedIntegers(canonical []byte) []byte {
	var out []byte
	inString := false
	for i := 0; i < len(canonical); i++ {
		ch := canonical[i]
		switch {
		case inString && ch == '\\':
			out = append(out, ch, canonical[i+1])
			i++
			continue
		case ch == '"':
			inString = !inString
		case !inString && (ch == '-' || ch >= '0' && ch <= '9'):
			j := i + 1
			for j < len(canonical) && strings.IndexByte("0123456789.e+-", canonical[j]) >= 0 {
				j++
			}
			tok := string(canonical[i:j])
			if v := exactValue(strings.TrimPrefix(tok, "-")); exactNumberForm.MatchString(tok) && v.IsInt() && refPrinted(tok) && !isDoubleForm(tok) {
				if tok[0] == '-' {
					out = append(out, '-')
				}
				out = append(out, v.Num().String()...)
			} else {
				out = append(out, tok...)
			}
			i = j - 1
			continue
		}
		out = append(out, ch)
	}
	if out == nil {
		return canonical
	}
	return out
}

// isDoubleForm reports whether the number tok has the exact value of its
// nearest double's shortest decimal.
func isDoubleForm(tok string) bool {
	f, err := strconv.ParseFloat(tok, 64)
	if err != nil {
		return false
	}
	double, err := jcs.NumberToJSON(f)
	return err == nil && exactValue(double).Cmp(exactValue(tok)) == 0
}

// respellPrinted returns data with each number that refPrinted reads as a
// double replaced by that double's shortest decimal, padded with spaces to
// the number's length so that every offset (and so every error) stays. It
// takes any input: a string runs from a quote to the next unescaped quote,
// and only a whole run of number characters outside strings that is one
// JSON number is replaced, so up to the input's first error it sees the
// tokens the parser sees.
func respellPrinted(data []byte) []byte {
	out := data
	inString := false
	for i := 0; i < len(data); i++ {
		ch := data[i]
		switch {
		case inString && ch == '\\':
			i++
		case ch == '"':
			inString = !inString
		case !inString && (ch == '-' || ch >= '0' && ch <= '9'):
			j := i + 1
			for j < len(data) && strings.IndexByte("0123456789.eE+-", data[j]) >= 0 {
				j++
			}
			// Up to 15 significant digits a normal number is its double's
			// shortest decimal: no rule to respell for, and the common case.
			tok := string(data[i:j])
			if (mantissaDigits(tok) > 15 || (strings.Contains(tok, "e-") || strings.Contains(tok, "E-")) && subnormal(tok)) && refPrinted(tok) {
				short := shortSpelling(tok)
				if len(short) > len(tok) {
					panic("respellPrinted: no spelling of " + tok + " fits")
				}
				if &out[0] == &data[0] {
					out = append([]byte(nil), data...)
				}
				copy(out[i:j], short+strings.Repeat(" ", j-i-len(short)))
			}
			i = j - 1
		}
	}
	return out
}

// subnormal reports whether the number tok rounds to a subnormal double
// (or to zero), whose shortest decimal may have fewer digits than 15.
func subnormal(tok string) bool {
	f, _ := strconv.ParseFloat(tok, 64)
	return math.Abs(f) < 0x1p-1022
}

// mantissaDigits counts the digits of tok before any exponent.
func mantissaDigits(tok string) int {
	n := 0
	for _, ch := range []byte(tok) {
		if ch == 'e' || ch == 'E' {
			break
		}
		if ch >= '0' && ch <= '9' {
			n++
		}
	}
	return n
}

// shortSpelling is the shortest of a few spellings of the shortest decimal
// of the double nearest to the JSON number tok.
func shortSpelling(tok string) string {
	f, _ := strconv.ParseFloat(tok, 64)
	m := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(m, "e")
	x, _ := strconv.Atoi(exp)
	digits := strings.Replace(mant, ".", "", 1)
	sign := ""
	if digits[0] == '-' {
		sign, digits = "-", digits[1:]
	}
	best := strconv.FormatFloat(f, 'f', -1, 64)
	for _, s := range []string{
		mant + "e" + strconv.Itoa(x),
		sign + digits + "e" + strconv.Itoa(x-len(digits)+1),
	} {
		if len(s) < len(best) {
			best = s
		}
	}
	return best
}

// v1NumberTokens are numbers around the fast paths' edges: integers near
// 2^53 and 1e15..1e21, negative zero, trailing and leading zeros, fractions
// near 1e-6, exponents of every sign and size, and too many digits.
func v1NumberTokens(r *rand.Rand) []string {
	toks := []string{
		"0", "-0", "0.0", "-0.0", "0e0", "-0e-0", "0.000", "00", "01", "-", "-a", "1.", "1.e1", ".5", "1e", "1e+", "1E5",
		"1", "-1", "10", "100", "1.5", "1.50", "1.05", "0.25", "0.000001", "0.0000001", "0.0000010", "0.00000123",
		"-0.000001", "0.1000000", "1234.50", "1e3", "1.5e1", "15e-1", "1e21", "1e20", "1e-6", "1e-7", "1E+2", "1e-0",
		"999999999999999", "9999999999999999", "99999999999999999", "100000000000000000000", "1000000000000000000000",
		"123456789012345", "1234567890123456", "12345678901234567", "123456789012345.6", "12345678901234.56",
		"9007199254740991", "9007199254740992", "9007199254740993", "-9007199254740993", "18014398509481984",
		"0.1", "0.30000000000000004", "5e-324", "1e-400", "1e400", "-1e400", "1.7976931348623157e308",
		"1e-9999", "1e-10000", "1e-10001", "123e-10001", "0.5e-9998", "1" + strings.Repeat("0", 100),
		strings.Repeat("1", 100), strings.Repeat("1", 101), "0." + strings.Repeat("0", 50) + "1",
		"1.000000000000000000000000001", "100e-2", "0.0001e4", "12.34e1", "1e0000000000000000000000001",
	}
	for range 3000 {
		var b strings.Builder
		if r.IntN(3) == 0 {
			b.WriteByte('-')
		}
		switch r.IntN(4) {
		case 0: // an integer near a power of ten or of two
			base := []uint64{1 << 53, 1e15, 1e16, 1e17, 1e18, 1e19, 1 << 52, 1 << 63}[r.IntN(8)]
			b.WriteString(strconv.FormatUint(base+uint64(r.IntN(2001))-1000, 10))
		case 1: // a short decimal
			b.WriteString(strconv.Itoa(r.IntN(1000)))
			if r.IntN(2) == 0 {
				b.WriteByte('.')
				b.WriteString(strings.Repeat("0", r.IntN(8)))
				b.WriteString(strconv.Itoa(r.IntN(100000)))
			}
		case 2: // digits at random scale, with an exponent
			b.WriteString(strconv.Itoa(r.IntN(10)))
			if r.IntN(2) == 0 {
				b.WriteByte('.')
				for range 1 + r.IntN(20) {
					b.WriteByte(byte('0' + r.IntN(10)))
				}
			}
			b.WriteString([]string{"e", "E", "e+", "e-", "E-"}[r.IntN(5)])
			b.WriteString(strconv.Itoa(r.IntN(330)))
		default: // a double as Go or JavaScript writes it
			f := math.Float64frombits(r.Uint64())
			if math.IsNaN(f) || math.IsInf(f, 0) {
				f = r.Float64() * math.Pow(10, float64(r.IntN(50)-25))
			}
			b.WriteString(strconv.FormatFloat(math.Abs(f), []byte("gef")[r.IntN(3)], -1, 64))
		}
		toks = append(toks, b.String())
	}
	return toks
}

// v1StringTokens are string bodies with every kind of character: each
// control character raw and escaped, every escape, U+2028, U+007F,
// surrogate pairs and lone surrogates, invalid UTF-8, long ASCII runs.
func v1StringTokens(r *rand.Rand) []string {
	var toks []string
	for b := range 0x80 {
		toks = append(toks, string(rune(b)), fmt.Sprintf(`\u%04x`, b), fmt.Sprintf(`\u%04X`, b))
	}
	toks = append(toks, `\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\x`, `\`, `\u`, `\u12`, `\u12g4`,
		"\u2028", "\u2029", `\u2028`, "\x7f", `\ud83d\ude00`, "😀", `\ud83d`, `\ude00`, `\ud83d\u0041`, `\ud83dx`,
		`\uDBFF\uDFFF`, `\ue000`, "\ue000", "\uffff", "\xff", "\xc3", "\xc3(", "\xed\xa0\x80", "\xf4\x90\x80\x80",
		"\xe2\x82", "é", "Größe", strings.Repeat("a", 7), strings.Repeat("a", 8), strings.Repeat("a", 15),
		strings.Repeat("a", 16), strings.Repeat("a", 17), strings.Repeat("x", 40), strings.Repeat("é", 20))
	pieces := toks
	for range 2000 {
		var b strings.Builder
		for range r.IntN(6) {
			b.WriteString(pieces[r.IntN(len(pieces))])
			if r.IntN(2) == 0 {
				b.WriteString("abcdefghijklmnopq"[:r.IntN(17)])
			}
		}
		toks = append(toks, b.String())
	}
	return toks
}

// mutate breaks data in one of a few ways, to reach the error paths.
func mutate(r *rand.Rand, data []byte) []byte {
	if len(data) == 0 {
		return data
	}
	d := append([]byte(nil), data...)
	i := r.IntN(len(d))
	switch r.IntN(4) {
	case 0:
		return d[:i]
	case 1:
		const subst = " \t\n,:{}[]\"\\0-.eE+a\x00\x80\xff"
		d[i] = subst[r.IntN(len(subst))]
	case 2:
		return append(d[:i:i], append([]byte{"{}[]\",: 1\\"[r.IntN(10)]}, d[i:]...)...)
	default:
		return append(d[:i:i], d[i+1:]...)
	}
	return d
}

// TestCanonicalizeMatchesV1 compares the package with its frozen former
// implementation on numbers and strings around the fast paths' edges, in
// every position (alone, as names, in records), on generated documents in
// many spellings, on arrays of records that share their names (whose member
// order is reused) or almost do, and on all of these broken.
func TestCanonicalizeMatchesV1(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	nums, strs := v1NumberTokens(r), v1StringTokens(r)
	var docs []string
	// The fast paths need some input after a token: pad makes sure of it.
	const pad = `"padding past the fast paths' bounds"`
	for _, n := range nums {
		docs = append(docs, n, " "+n+" ", "["+n+"]", `{"a":`+n+`}`, `{"b":`+n+`,"a":1}`, "["+n+","+n+"]",
			"["+n+","+pad+"]", "["+n+" ,"+pad+"]", `{"a":`+n+`, "b":`+pad+`}`, n+strings.Repeat(" ", 30))
	}
	for _, s := range strs {
		q := `"` + s + `"`
		docs = append(docs, q, "["+q+"]", `{`+q+`:1}`, `{"b":1,`+q+`:2}`, `{`+q+`:1,"b":`+q+`}`,
			`{`+q+`:1,"`+s+`x":2,"`+s+`":3}`, `{"x":[`+q+`, `+q+`], `+q+` : {}}`,
			"["+q+","+pad+"]", `{`+q+`:`+pad+`}`, `{"b":1,`+q+` :`+q+`,"a":`+pad+`}`, q+strings.Repeat(" ", 30))
	}
	for i := range 3000 {
		g := &docGen{r: r, maxDepth: 1 + i%6, maxWidth: 1 + i%12, exact: i%2 == 0}
		doc := g.value(0)
		docs = append(docs, string(spelling{}.text(doc)), string(spelling{r}.text(doc)))
	}
	docs = append(docs, v1RecordDocs(r)...)
	for _, d := range docs {
		sameAsV1(t, []byte(d))
		for range 3 {
			sameAsV1(t, mutate(r, []byte(d)))
		}
	}
	for _, size := range []int{1 << 10, 64 << 10, 300 << 10} {
		doc := benchDocument(size)
		sameAsV1(t, doc)
		for range 20 {
			sameAsV1(t, mutate(r, doc))
		}
	}
}

// v1RecordDocs returns arrays of objects that share their member names, in
// the same or a varied order, some with one name changed, duplicated,
// lengthened past 8 bytes, escaped or above U+E000.
func v1RecordDocs(r *rand.Rand) []string {
	names := []string{"sku", "quantity", "price", "name", "tags", "dims", "note", "a", "ab", "abcdefgh",
		"abcdefghi", "abcdefgh2", "é", "\ue000", "😀", `\u0061`, `a\n`, "", "quantity2", "prices"}
	var docs []string
	for range 3000 {
		k := 1 + r.IntN(18)
		set := make([]string, k)
		for i := range set {
			set[i] = names[r.IntN(len(names))]
		}
		var b strings.Builder
		b.WriteString("[")
		for j := range 1 + r.IntN(6) {
			if j > 0 {
				b.WriteString(",")
			}
			rec := set
			switch r.IntN(5) {
			case 0:
				rec = append([]string(nil), set...)
				rec[r.IntN(k)] = names[r.IntN(len(names))]
			case 1:
				rec = append([]string(nil), set...)
				r.Shuffle(k, func(i, j int) { rec[i], rec[j] = rec[j], rec[i] })
			case 2:
				rec = set[:r.IntN(k+1)]
			}
			b.WriteString("{")
			for i, n := range rec {
				if i > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, `"%s": %d`, n, i)
			}
			b.WriteString("}")
		}
		b.WriteString("]")
		docs = append(docs, b.String())
	}
	return docs
}

// FuzzCanonicalizeV1: the package and its frozen former implementation agree
// on every input, to the byte and to the error message.
func FuzzCanonicalizeV1(f *testing.F) {
	f.Add([]byte(`{"b":[1.0,1e21,-0,"\u00e9\ud83d\ude00"],"a":{"\ue000":1,"\ud800\udc00":2}}`))
	f.Add([]byte(`[{"sku": "SKU-1", "quantity": 2, "price": 10.50}, {"sku": "SKU-2", "quantity": 3, "price": 11.05}]`))
	f.Add(benchDocument(1 << 10))
	// Numbers and strings the parse loop copies in line, past 24 bytes from
	// the end: trailing fraction zeros, lone and negative zeros, 15 bytes.
	f.Add([]byte(`{"n":[0,-0,10.00,-0.00,1234.50,0.0000010,2.0,123456789012345,1.12345678,1.123456789],"abcdefghijklmno":"abcdefghijklmno","s":"abcdefghijklmnop"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		sameAsV1(t, data)
	})
}
