package canonical

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"unicode/utf16"
)

// jnode is a JSON value for generated tests. Its canonical text is computed
// independently of the code under test only where the tests say so; mostly it
// is rendered in many spellings that must all canonicalize alike.
type jnode struct {
	kind   byte // 'n' null, 't' true, 'f' false, '#' number, 'd' decimal, 's' string, 'a' array, 'o' object
	num    float64
	neg    bool   // a decimal is -0.digits * 10^exp if neg, else 0.digits * 10^exp
	digits string // no leading or trailing zero
	exp    int
	str    string
	elems  []*jnode
	names  []string
	values []*jnode
}

// docGen generates random documents. Its knobs are fixed per test.
type docGen struct {
	r        *rand.Rand
	maxDepth int
	maxWidth int
	exact    bool // also decimals that no double prints (see decimal)
}

// Runes that stress escaping and UTF-16 ordering: ASCII, controls, the
// characters JCS escapes, U+007F, Latin-1, BMP below the surrogates, BMP
// above U+E000 (which UTF-16 sorts after the supplementary planes), and
// supplementary-plane characters.
var genRunes = []rune{
	'a', 'b', 'c', 'z', 'A', '0', '9', ' ', '_', '/', '\'', '"', '\\',
	0x00, 0x01, 0x08, 0x09, 0x0a, 0x0c, 0x0d, 0x1f, 0x7f,
	0x80, 0xe9, 0xf6, 0xff, 0x100, 0x7ff, 0x800, 0x20ac, 0xd7ff,
	0xe000, 0xe001, 0xfb33, 0xfeff, 0xfffd, 0xffff,
	0x10000, 0x1f600, 0x1f601, 0x10ffff, 0x2070e,
}

func (g *docGen) rune() rune {
	if g.r.IntN(3) == 0 {
		return rune('a' + g.r.IntN(4)) // shared prefixes make sorting work harder
	}
	return genRunes[g.r.IntN(len(genRunes))]
}

func (g *docGen) string(maxLen int) string {
	var b strings.Builder
	for n := g.r.IntN(maxLen + 1); n > 0; n-- {
		b.WriteRune(g.rune())
	}
	return b.String()
}

// Doubles whose shortest form or ECMAScript notation is easy to get wrong.
var hardDoubles = []float64{
	0, math.Copysign(0, -1), 1, -1, 0.1, 0.2, 0.3, 1.0 / 3, 2.0 / 3, 100, 1e2, 123.456,
	1e21, math.Nextafter(1e21, 0), math.Nextafter(1e21, math.Inf(1)), 1e20, 1e22, 1e23,
	1e-6, math.Nextafter(1e-6, 0), math.Nextafter(1e-6, 1), 1e-7, 1.5e-7,
	5e-324, -5e-324, 1e-323, math.SmallestNonzeroFloat64 * 3, math.MaxFloat64, -math.MaxFloat64,
	2.2250738585072014e-308, 2.225073858507201e-308,
	1 << 53, 1<<53 + 2, -(1 << 53), 1<<53 - 1, 1 << 63, 1 << 64, 9007199254740993,
	333333333.33333329, 1e30, 4.5, 2e-3, 1e-27, 295147905179352830000,
	9.999999999999997e+22, 1.0000000000000001e+23, 999999999999999700000,
	9.999999999999997e-7, 1424953923781206.2, -0.0000033333333333333333,
	123456789012345680000, 1e15, 1e16, 999999999999999, 1e300, 1.7e-300,
}

func (g *docGen) number() float64 {
	switch g.r.IntN(6) {
	case 0:
		return hardDoubles[g.r.IntN(len(hardDoubles))]
	case 1:
		return float64(g.r.IntN(2000) - 1000)
	case 2:
		return float64(g.r.Int64() >> g.r.IntN(64))
	case 3:
		return g.r.Float64() * math.Pow(10, float64(g.r.IntN(60)-30))
	default:
		for {
			f := math.Float64frombits(g.r.Uint64())
			if !math.IsNaN(f) && !math.IsInf(f, 0) {
				return f
			}
		}
	}
}

// decimal returns a number that is, mostly, not a double's shortest decimal:
// a shortest decimal with a digit more, an integer near 2^53, up to 100
// random digits at any scale from the least the canonical form keeps
// (1e-9999) to the largest double, or below the smallest double.
func (g *docGen) decimal() *jnode {
	n := &jnode{kind: 'd', neg: g.r.IntN(2) == 0}
	var d string
	switch g.r.IntN(4) {
	case 0:
		m := strconv.FormatFloat(math.Abs(g.number()), 'e', -1, 64)
		mant, exp, _ := strings.Cut(m, "e")
		n.exp, _ = strconv.Atoi(exp)
		n.exp++
		d = strings.Replace(mant, ".", "", 1) + strconv.Itoa(1+g.r.IntN(9))
	case 1:
		d = strconv.FormatUint(1<<53+uint64(g.r.IntN(1<<12)), 10)
		n.exp = len(d)
	default:
		for range 1 + g.r.IntN(100) {
			d += strconv.Itoa(g.r.IntN(10))
		}
		n.exp = -9998 + g.r.IntN(9998+309)
		if g.r.IntN(2) == 0 {
			n.exp = -330 + g.r.IntN(350)
		}
	}
	trimmed := strings.TrimLeft(d, "0")
	n.exp -= len(d) - len(trimmed)
	n.digits = strings.TrimRight(trimmed, "0")
	if n.digits == "" || n.exp-1 < -9999 || n.exp > 308 {
		n.digits, n.exp = "1", 1
	}
	return n
}

func (g *docGen) value(depth int) *jnode {
	k := g.r.IntN(10)
	if depth >= g.maxDepth {
		k = g.r.IntN(6)
	}
	switch k {
	case 0:
		return &jnode{kind: "ntf"[g.r.IntN(3)]}
	case 1, 2, 3:
		if g.exact && g.r.IntN(2) == 0 {
			return g.decimal()
		}
		return &jnode{kind: '#', num: g.number()}
	case 4, 5:
		return &jnode{kind: 's', str: g.string(6)}
	case 6, 7:
		n := &jnode{kind: 'a'}
		for i := g.r.IntN(g.maxWidth + 1); i > 0; i-- {
			n.elems = append(n.elems, g.value(depth+1))
		}
		return n
	default:
		n := &jnode{kind: 'o'}
		seen := map[string]bool{}
		for i := g.r.IntN(g.maxWidth + 1); i > 0; i-- {
			name := g.string(4)
			if seen[name] {
				continue
			}
			seen[name] = true
			n.names = append(n.names, name)
			n.values = append(n.values, g.value(depth+1))
		}
		return n
	}
}

// chain wraps v in depth arrays and objects.
func (g *docGen) chain(v *jnode, depth int) *jnode {
	for range depth {
		if g.r.IntN(2) == 0 {
			v = &jnode{kind: 'a', elems: []*jnode{v}}
		} else {
			v = &jnode{kind: 'o', names: []string{g.string(2)}, values: []*jnode{v}}
		}
	}
	return v
}

// spelling chooses among equivalent renderings; a nil rand gives the plain one.
type spelling struct {
	r *rand.Rand
}

func (s spelling) n(k int) int {
	if s.r == nil {
		return 0
	}
	return s.r.IntN(k)
}

func (s spelling) ws(b *strings.Builder) {
	for range s.n(3) {
		b.WriteByte(" \t\n\r"[s.n(4)])
	}
}

// render writes n as JSON. With a rand it shuffles members, respells numbers
// and strings and adds whitespace; the value stays the same.
func (s spelling) render(b *strings.Builder, n *jnode) {
	s.ws(b)
	switch n.kind {
	case 'n':
		b.WriteString("null")
	case 't':
		b.WriteString("true")
	case 'f':
		b.WriteString("false")
	case '#':
		b.WriteString(s.number(n.num))
	case 'd':
		sign := ""
		if n.neg {
			sign = "-"
		}
		b.WriteString(s.decimal(sign, n.digits, n.exp))
	case 's':
		s.string(b, n.str)
	case 'a':
		b.WriteByte('[')
		for i, e := range n.elems {
			if i > 0 {
				b.WriteByte(',')
			}
			s.render(b, e)
		}
		s.ws(b)
		b.WriteByte(']')
	case 'o':
		b.WriteByte('{')
		order := make([]int, len(n.names))
		for i := range order {
			order[i] = i
		}
		if s.r != nil {
			s.r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		for i, j := range order {
			if i > 0 {
				b.WriteByte(',')
			}
			s.ws(b)
			s.string(b, n.names[j])
			s.ws(b)
			b.WriteByte(':')
			s.render(b, n.values[j])
		}
		s.ws(b)
		b.WriteByte('}')
	}
	s.ws(b)
}

// number spells f in one of several ways that all have the exact value of
// f's shortest decimal, the value a double encoder means: any other value
// (17 digits of 0.1, say) is another number, kept exactly.
func (s spelling) number(f float64) string {
	switch s.n(8) {
	case 0:
		return strconv.FormatFloat(f, 'g', -1, 64)
	case 1:
		return strconv.FormatFloat(f, 'e', -1, 64)
	case 2:
		b, err := json.Marshal(f)
		if err != nil {
			panic(err)
		}
		return string(b)
	case 3:
		if math.Abs(f) < 1e25 && (f == 0 || math.Abs(f) > 1e-25) {
			t := strconv.FormatFloat(f, 'f', -1, 64)
			if !strings.Contains(t, ".") {
				t += ".000"
			}
			return t
		}
	}
	m := strconv.FormatFloat(f, 'e', -1, 64)
	sign := ""
	if m[0] == '-' {
		sign, m = "-", m[1:]
	}
	mant, exp, _ := strings.Cut(m, "e")
	n, _ := strconv.Atoi(exp)
	return s.decimal(sign, strings.Replace(mant, ".", "", 1), n+1)
}

// decimal spells sign 0.d * 10^n in one of several ways.
func (s spelling) decimal(sign, d string, n int) string {
	switch s.n(5) {
	case 0: // trailing zeros, upper-case E: 1.5 -> 1.5000E+0
		return sign + d[:1] + "." + d[1:] + "000E" + expText(n-1, "+")
	case 1: // leading zeros after the point: 1.5 -> 0.0015e3
		return sign + "0.00" + d + "e" + expText(n+2, "")
	case 2: // mantissa shifted into the exponent: 1.5 -> 15e-1, 100 -> 1e2
		return sign + d + "e" + expText(n-len(d), "")
	case 3: // plain, when that is short: 1.5e-7 -> 0.00000015, 1.5e7 -> 15000000
		switch {
		case n > 40 || n < -40:
		case n <= 0:
			return sign + "0." + strings.Repeat("0", -n) + d
		case n >= len(d):
			// An integer literal is never read as a printed double
			// (refPrinted): where the other spellings are one, so is this.
			if refPrinted(d + "e" + strconv.Itoa(n-len(d))) {
				return sign + d + strings.Repeat("0", n-len(d)) + ".0"
			}
			return sign + d + strings.Repeat("0", n-len(d))
		default:
			return sign + d[:n] + "." + d[n:]
		}
		fallthrough
	default: // zero-padded exponent: 1.5 -> 1.5e-0000
		return sign + d[:1] + "." + d[1:] + "0e" + expText(n-1, "+000")
	}
}

// expText writes an exponent with an explicit sign, plus prefixed to a
// non-negative one, and with zeros padded when plus ends in them.
func expText(e int, plus string) string {
	pad := strings.TrimLeft(plus, "+")
	if e < 0 {
		return "-" + pad + strconv.Itoa(-e)
	}
	return plus + strconv.Itoa(e)
}

// string spells str, escaping what JSON requires and, at random, more.
func (s spelling) string(b *strings.Builder, str string) {
	b.WriteByte('"')
	for _, r := range str {
		switch {
		case r == '"' || r == '\\':
			if s.n(3) == 0 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteByte('\\')
				b.WriteRune(r)
			}
		case r < 0x20:
			short := map[rune]string{'\b': `\b`, '\t': `\t`, '\n': `\n`, '\f': `\f`, '\r': `\r`}[r]
			if short != "" && s.n(2) == 0 {
				b.WriteString(short)
			} else {
				fmt.Fprintf(b, `\u%04X`, r)
			}
		case r == '/' && s.n(2) == 0:
			b.WriteString(`\/`)
		case s.n(4) == 0: // escape an ordinary character
			if r >= 0x10000 {
				hi, lo := utf16.EncodeRune(r)
				fmt.Fprintf(b, `\u%04x\u%04X`, hi, lo)
			} else {
				fmt.Fprintf(b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

func (s spelling) text(n *jnode) []byte {
	var b strings.Builder
	s.render(&b, n)
	return []byte(b.String())
}
