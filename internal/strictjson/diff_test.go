package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// sameCheck fails t unless Check and the oracle agree on data: the same
// sentinel, and for every error but ErrSyntax the same path.
func sameCheck(t *testing.T, data []byte) {
	t.Helper()
	got, want := Check(data), oracleCheck(data)
	if (got == nil) != (want == nil) {
		t.Fatalf("%.200q: Check %v, oracle %v", data, got, want)
	}
	if want == nil {
		return
	}
	var g, w *Error
	if !errors.As(got, &g) || !errors.As(want, &w) || g.Err != w.Err {
		t.Fatalf("%.200q: Check %v, oracle %v", data, got, want)
	}
	if w.Err != ErrSyntax && g.Path != w.Path {
		t.Fatalf("%.200q: Check path %q, oracle %q (%v)", data, g.Path, w.Path, w.Err)
	}
}

// sameObject fails t unless Object agrees with the oracle on data: exactly
// (members, sentinel, path) when data passed Check; otherwise Object may
// refuse more but accepts nothing the oracle refuses, and both read the
// same members.
func sameObject(t *testing.T, data []byte) {
	t.Helper()
	got, gerr := Object(data)
	want, werr := oracleObject(data)
	ms, merr := Members(make([]Member, 1, 2), data)
	if fmt.Sprint(merr) != fmt.Sprint(gerr) || merr == nil && len(ms) != 1+len(got) {
		t.Fatalf("%.200q: Members %v (%d), Object %v (%d)", data, merr, len(ms), gerr, len(got))
	}
	for _, m := range ms[1:] {
		if merr == nil && !bytes.Equal(got[string(m.Name)], m.Value) {
			t.Fatalf("%.200q: Members read %q as %q, Object as %q", data, m.Name, m.Value, got[string(m.Name)])
		}
	}
	if Check(data) == nil {
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("%.200q: Object %v, oracle %v", data, gerr, werr)
		}
		if werr != nil {
			var g, w *Error
			if !errors.As(gerr, &g) || !errors.As(werr, &w) || g.Err != w.Err || g.Path != w.Path {
				t.Fatalf("%.200q: Object %v, oracle %v", data, gerr, werr)
			}
		}
	} else if gerr == nil && werr != nil {
		t.Fatalf("%.200q: Object accepted what the oracle refuses (%v)", data, werr)
	}
	if gerr != nil || werr != nil {
		return
	}
	if len(got) != len(want) {
		t.Fatalf("%.200q: Object %d members, oracle %d", data, len(got), len(want))
	}
	for k, v := range want {
		if gv, ok := got[k]; !ok || !bytes.Equal(gv, v) {
			t.Fatalf("%.200q: member %q: Object %q (%v), oracle %q", data, k, gv, ok, v)
		}
	}
}

func same(t *testing.T, data []byte) {
	t.Helper()
	sameCheck(t, data)
	sameObject(t, data)
}

var handWritten = []string{
	// Names: escapes of every kind compare as what they stand for.
	`{"a":1,"\u0061":2}`, `{"\u0061":1,"a":2}`, `{"a":1,"\u0041":2}`, `{"A":1,"a":2}`,
	`{"/":1,"\/":2}`, `{"\/":1,"/":2}`, `{"\\":1,"\u005c":2}`, `{"\"":1,"\u0022":2}`,
	`{"\b\f\n\r\t":1,"\u0008\u000c\u000a\u000d\u0009":2}`, `{"\b":1,"\f":2,"\n":3,"\r":4,"\t":5}`,
	`{"😀":1,"\ud83d\ude00":2}`, `{"\ud83d\ude00":1,"\uD83D\uDE00":2}`, `{"é":1,"\u00e9":2}`, `{"é":1,"\u00E9":2}`,
	`{"é":1,"É":2}`, `{"k":1,"\u212a":2}`, `{"K":1,"\u212a":2}`, `{"s":1,"\u017f":2}`, `{"\u017f":1,"S":2}`,
	`{"\u0000":1,"":2}`, `{"":1,"":2}`, `{"\u0000":1,"\u0000":2}`, `{"":1}`,
	`{"a b":1,"a b":2}`, `{"x":{"y":[{"z":1,"z":1}]}}`, `[{"a":1},{"a":1}]`, `{"a":{"a":{"a":1}}}`,
	`{"a":1,"b":{"a":1,"b":2},"a":3}`, `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"r":18,"a":19}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"r":18,"R":19}`,
	`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,"n":14,"o":15,"p":16,"q":17,"r":18,"\u0072":19}`,
	"{\"[\":1,\"{\":2}", "{\"@\":1,\"`\":2}", "{\"^\":1,\"~\":2}", "{\"_\":1,\"\x7f\":2}", `{"Z":1,"z":2}`, `{"a1":1,"A!":2}`,
	`{"secret sk_live":1,"secret sk_live":2}`, `[[{"a":[1,{"b":1,"b":2}]}]]`,
	// Invalid UTF-8 and surrogates, in names and values.
	"{\"\xff\":1}", "{\"a\":\"\xff\"}", "{\"a\":\"\xc3\"}", "{\"a\":\"\xed\xa0\x80\"}", "{\"a\":\"\xe0\x80\x80\"}",
	"{\"a\":\"\xf4\x90\x80\x80\"}", "{\"a\":1,\"a\":2}\xff", "{\"a\":1,\"a\":2} \"\\ud800\"", "\xef\xbb\xbf{}",
	`"\ud800"`, `"\udc00"`, `"\ud800\udc00"`, `"\udbff\udfff"`, `"\ud800\ud800"`, `"\ud800\u0041"`, `"\ud800\\"`, `"\ud800x"`,
	`{"\ud800":1}`, `{"a\udc00":1}`, `"\u12"`, `"\u12g4"`, `"\U0041"`, `"\x41"`, `"\'"`, `"\a"`, "\"\x00\"", "\"\x1f\"", "\"\x7f\"",
	`"\ud800\udc0"`, `"\ud800\u"`, `"\ud800\`, `"\`, `"`, `"abc`, `{"a":1,"a":"\ud800"}`, `{"a":1,"a":2,"b":"\udc00"}`,
	// Numbers.
	`1e308`, `1e309`, `-1e309`, `1e-400`, `-1e-400`, `0e999999`, `0.0e999999`, `1.7976931348623157e308`, `1.7976931348623159e308`,
	`-1.7976931348623157e308`, `4.9e-324`, `2e-324`, `179769313486231580000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000`,
	"1" + strings.Repeat("0", 308), "1" + strings.Repeat("0", 307), "9" + strings.Repeat("9", 307), "1" + strings.Repeat("0", 308) + ".5",
	"0." + strings.Repeat("0", 400) + "1", "0." + strings.Repeat("0", 400) + "1e-5", "1" + strings.Repeat("0", 400) + "e-300",
	"1" + strings.Repeat("0", 400) + "e-100", "0." + strings.Repeat("0", 400) + "1e700",
	`01`, `00`, `-01`, `-0`, `-0.0`, `-`, `--1`, `1.`, `.5`, `+1`, `1e`, `1e+`, `1e-`, `1E5`, `1e+5`, `1.5e-5`, `1.e5`,
	`0x10`, `1_000`, `Infinity`, `-Infinity`, `NaN`, `1e999x`, `[1e999x]`, `{"a":1e999,"a":1}`, `{"a":1,"a":1e999}`,
	`[1e999,`, `1e999 1`, `{"a":[` + "1" + strings.Repeat("0", 400) + `]}`,
	// Shapes and whitespace.
	``, ` `, "\t\n\r ", `{}`, `[]`, ` {} `, "\t{}\n", "\r\n[]\r\n", "\f{}", "\v{}", "{}\f", "\u00a0{}", "{}\x00",
	`{} {}`, `{}{}`, `1 2`, `"a""b"`, `{"a":1}x`, `{"a":1,}`, `{,}`, `[,]`, `[1,]`, `[,1]`, `[1 2]`, `{"a" 1}`, `{"a":}`,
	`{"a"}`, `{a:1}`, `{'a':1}`, `{"a":1 "b":2}`, `{"a":1]`, `[1}`, `{"a":1,"a"}`, `{"a":1,"a"`, `{"a":1,"a":`, `{"a":1,"a" x`,
	`{1:2}`, `{"a":1:2}`, `[1:2]`, `true`, `false`, `null`, `tru`, `nul`, `truex`, `[truex]`, `[true false]`, `True`, `nulll`,
	`{"a":1`, `[`, `]`, `{`, `}`, `:`, `,`, `"a":1`, `{"a":[}`, `{"a":{]}`, `[{]`, `[{"a":1,"a":2]`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":1,"a":2}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","Method":"x"}`,
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{"dev.obol/idempotency-key":"k","DEV.OBOL/IDEMPOTENCY-KEY":"k"}}}`,
}

func nested(open, close string, n int, inner string) string {
	return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
}

func TestCheckAgreesWithOracle(t *testing.T) {
	docs := append([]string(nil), handWritten...)
	for _, n := range []int{MaxDepth - 1, MaxDepth, MaxDepth + 1, MaxDepth + 2} {
		docs = append(docs,
			nested("[", "]", n, ""), nested("[", "]", n, "1"), nested("[", "]", n, "1e999"),
			nested(`{"a":`, "}", n, "1"), nested(`{"a":`, "}", n, "{}"), nested(`{"a":`, "}", n, `{"b":1,"b":2}`),
			nested(`{"a":[`, "]}", n/2, "1"), nested(`[{"a":`, "}]", n/2, `{"b":[]}`),
			nested("[", "]", n, "")[:n+3], nested("[", "", n, ""), nested(`{"a":1,"a":[`, "]}", n, ""),
		)
	}
	for _, d := range docs {
		same(t, []byte(d))
	}
}

// gen makes random documents that are mostly valid JSON, with names drawn
// from a small set of spellings of few names, so repeats (exact, escaped,
// or up to case) are common.
type gen struct {
	r *rand.Rand
	b []byte
}

var (
	genNames = []string{`a`, `\u0061`, `A`, `b`, `\/`, `/`, `\u002f`, `k`, `K`, `\u212a`, `\u212A`, `s`, `\u017f`, `é`, `\u00e9`, `É`,
		`😀`, `\ud83d\ude00`, ``, `\u0000`, `x y`, `id`, `method`, `meth\u006fd`, `Method`, `params`, `_meta`, `\"`, `\\`, `\n`, `\u000a`,
		`dev.obol/idempotency-key`, `DEV.obol/idempotency-key`, `n1`, `n2`, `n3`, `n4`, `n5`, `n6`, `n7`, `n8`, `n9`}
	genNumbers = []string{`0`, `-0`, `1`, `-1`, `12.5`, `1e308`, `1e309`, `-1e309`, `1e-400`, `0e999999`, `1.5E+3`, `123456789012345678901234567890`,
		"1" + strings.Repeat("0", 309), "1" + strings.Repeat("0", 300), `4.9e-324`, `1.7976931348623159e308`}
	genStrings = []string{`""`, `"x"`, `"\u0041\n\t\"\\\/"`, `"😀"`, `"\ud83d\ude00"`, `"é"`, `"\u00e9"`, `"a b c"`}
	genSpace   = []string{``, ``, ``, ` `, "\t", "\n", "\r", " \n "}
	genBytes   = []string{`{`, `}`, `[`, `]`, `,`, `:`, `"`, `\`, `\u`, `\ud800`, `\udc00`, `e`, `.`, `-`, `0`, `9`, " ", "\x00", "\x1f", "\xff", "\xc3", "\xed\xa0\x80", "\u00a0", "\f", `1e999`, `{"a":1}`, `"a":`, `t`, `null`}
)

func (g *gen) space() { g.b = append(g.b, genSpace[g.r.IntN(len(genSpace))]...) }

func (g *gen) value(depth int) {
	k := g.r.IntN(10)
	if depth > 6 {
		k = g.r.IntN(5)
	}
	switch k {
	case 0:
		g.b = append(g.b, genNumbers[g.r.IntN(len(genNumbers))]...)
	case 1:
		g.b = append(g.b, genStrings[g.r.IntN(len(genStrings))]...)
	case 2:
		g.b = append(g.b, []string{"true", "false", "null"}[g.r.IntN(3)]...)
	case 3, 4:
		g.b = append(g.b, genNumbers[g.r.IntN(4)]...)
	case 5, 6:
		g.b = append(g.b, '[')
		for i, n := 0, g.r.IntN(4); i < n; i++ {
			if i > 0 {
				g.b = append(g.b, ',')
			}
			g.space()
			g.value(depth + 1)
			g.space()
		}
		g.b = append(g.b, ']')
	default:
		g.b = append(g.b, '{')
		n := g.r.IntN(5)
		if g.r.IntN(8) == 0 {
			n = 10 + g.r.IntN(20)
		}
		for i := 0; i < n; i++ {
			if i > 0 {
				g.b = append(g.b, ',')
			}
			g.space()
			g.b = append(g.b, '"')
			g.b = append(g.b, genNames[g.r.IntN(len(genNames))]...)
			g.b = append(g.b, '"')
			g.space()
			g.b = append(g.b, ':')
			g.space()
			g.value(depth + 1)
			g.space()
		}
		g.b = append(g.b, '}')
	}
}

// mutate inserts, deletes or replaces a few bytes.
func (g *gen) mutate() {
	for range g.r.IntN(3) {
		at := 0
		if len(g.b) > 0 {
			at = g.r.IntN(len(g.b) + 1)
		}
		switch g.r.IntN(3) {
		case 0:
			ins := genBytes[g.r.IntN(len(genBytes))]
			g.b = append(g.b[:at], append([]byte(ins), g.b[at:]...)...)
		case 1:
			if at < len(g.b) {
				g.b = append(g.b[:at], g.b[at+1:]...)
			}
		default:
			if at < len(g.b) {
				g.b[at] = genBytes[g.r.IntN(len(genBytes))][0]
			}
		}
	}
}

func TestCheckAgreesWithOracleGenerated(t *testing.T) {
	g := &gen{r: rand.New(rand.NewPCG(1, 2))}
	n := 60000
	if testing.Short() {
		n = 5000
	}
	valid, refused := 0, map[error]int{}
	for i := range n {
		g.b = g.b[:0]
		g.space()
		g.value(0)
		g.space()
		if i%2 == 1 {
			g.mutate()
		}
		same(t, g.b)
		var e *Error
		if err := oracleCheck(g.b); err == nil {
			valid++
		} else if errors.As(err, &e) {
			refused[e.Err]++
		}
	}
	// The generator must reach every outcome, or the comparison proves
	// little.
	for _, e := range []error{ErrSyntax, ErrRepeated, ErrNumber} {
		if refused[e] < n/100 {
			t.Errorf("only %d of %d documents refused with %v", refused[e], n, e)
		}
	}
	if valid < n/10 {
		t.Errorf("only %d of %d documents valid", valid, n)
	}
	t.Logf("%d valid, refused %v", valid, refused)
}

// TestObjectValues: values are the exact bytes of each member, shared with
// the document but capped, so appending to one never writes into the next.
func TestObjectValues(t *testing.T) {
	doc := []byte(` { "a" : [1, 2] , "b":"x\u0041" ,"c" : {"d":null}, "\u0065":-1.5e3 } `)
	m, err := Object(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": `[1, 2]`, "b": `"x\u0041"`, "c": `{"d":null}`, "e": `-1.5e3`}
	if len(m) != len(want) {
		t.Fatalf("%v", m)
	}
	for k, v := range want {
		if string(m[k]) != v {
			t.Errorf("%s: %q, want %q", k, m[k], v)
		}
	}
	_ = append(m["a"], 'X')
	if m["b"][0] != '"' {
		t.Fatal("appending to a value wrote into the document")
	}
	ms, err := Members(nil, doc)
	if err != nil || len(ms) != 4 || string(ms[0].Name) != "a" || string(ms[3].Name) != "e" {
		t.Fatalf("Members: %v %q", err, ms)
	}
	_ = append(ms[0].Name, 'X')
	if doc[5] != '"' {
		t.Fatal("appending to a name wrote into the document")
	}
	for _, d := range []string{`[]`, `"x"`, ``, ` `, `1`, `}`} {
		if _, err := Object([]byte(d)); !errors.Is(err, ErrType) {
			t.Errorf("%q: %v, want ErrType", d, err)
		}
	}
	for _, d := range []string{`{`, `{"a":1`, `{"a":1,}`, `{"a":tru}`, `{"a":1} x`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}"} {
		if _, err := Object([]byte(d)); !errors.Is(err, ErrSyntax) {
			t.Errorf("%q: %v, want ErrSyntax", d, err)
		}
	}
	if _, err := Object([]byte(`{"Id":1,"iD":2}`)); !errors.Is(err, ErrRepeated) {
		t.Errorf("names equal up to case: %v", err)
	}
}

func FuzzObject(f *testing.F) {
	for _, d := range handWritten {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sameObject(t, data)
		if ms, err := Members(nil, data); err == nil {
			for _, m := range ms {
				sameUnquote(t, m.Value)
			}
		}
		if m, err := Object(data); err == nil {
			// What Object accepts, encoding/json reads as the same object.
			var v map[string]json.RawMessage
			if json.Unmarshal(data, &v) != nil || len(v) != len(m) {
				t.Fatalf("Object read %q as %d members", data, len(m))
			}
		}
	})
}

// sameUnquote fails unless Unquote reads raw, a checked value, as
// encoding/json reads it into a string.
func sameUnquote(t *testing.T, raw []byte) {
	t.Helper()
	got, ok := Unquote(raw)
	var want string
	isString := json.Unmarshal(raw, &want) == nil && len(raw) > 0 && raw[0] == '"'
	if ok != isString || ok && string(got) != want {
		t.Fatalf("Unquote(%q) = %q, %v; encoding/json: %q, %v", raw, got, ok, want, isString)
	}
}

// TestUnquote: every escape and every kind of byte that ends a fast run,
// at every position, and values that are not strings, read as
// encoding/json reads them; an escaped string is a copy.
func TestUnquote(t *testing.T) {
	specials := []string{`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u0041`, `\u0000`, `\u00e9`, `\ud83d\ude00`, "\u00e9", "\u20ac", "\U0001F600", "~", " "}
	for n := range 10 {
		for at := 0; at <= n; at++ {
			for _, sp := range specials {
				raw := []byte(`"` + strings.Repeat("x", at) + sp + strings.Repeat("y", n-at) + `"`)
				if err := Check(raw); err != nil {
					t.Fatalf("%q: %v", raw, err)
				}
				sameUnquote(t, raw)
			}
		}
	}
	for _, raw := range []string{`""`, `1`, `null`, `{}`, `["a"]`, `true`} {
		sameUnquote(t, []byte(raw))
	}
	raw := []byte(`"a\\nb"`)
	s, _ := Unquote(raw)
	s[0] = 'z'
	if raw[1] != 'a' {
		t.Error("an escaped string's value shares the document")
	}
}

// TestCheckAgreesWithOracleStrings puts each kind of byte that ends the
// fast run of plain string bytes at every position of strings up to a few
// words long, in values and names.
func TestCheckAgreesWithOracleStrings(t *testing.T) {
	specials := []string{`"`, `\`, `\"`, `\\`, `\/`, `\n`, `\u0041`, `\ud83d\ude00`, `\ud800`, `\udc00`, "\x00", "\x1f", " ", "~", "\x7f",
		"\x80", "\xff", "\xc3", "é", "\xe2\x82", "€", "😀", "\xf0\x9f\x98", "\xed\xa0\x80"}
	for n := range 26 {
		for at := 0; at <= n; at++ {
			for _, sp := range specials {
				str := strings.Repeat("x", at) + sp + strings.Repeat("y", n-at)
				for _, doc := range []string{
					`"` + str + `"`, `["` + str + `"]`, `{"` + str + `":1}`, `{"` + str + `":1,"` + str + `":2}`,
					`{"k":"` + str + `","k":1}`, `"` + str, `{"a` + str + `":1,"A` + str + `":2}`,
				} {
					same(t, []byte(doc))
				}
			}
		}
	}
}
