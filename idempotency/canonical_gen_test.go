package idempotency

import (
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
	kind   byte // 'n' null, 't' true, 'f' false, '#' number, 's' string, 'a' array, 'o' object
	num    float64
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

func (g *docGen) value(depth int) *jnode {
	k := g.r.IntN(10)
	if depth >= g.maxDepth {
		k = g.r.IntN(6)
	}
	switch k {
	case 0:
		return &jnode{kind: "ntf"[g.r.IntN(3)]}
	case 1, 2, 3:
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

// number spells f in one of several ways that all parse to f.
func (s spelling) number(f float64) string {
	var t string
	switch s.n(7) {
	case 0:
		t = strconv.FormatFloat(f, 'g', -1, 64)
	case 1:
		t = strconv.FormatFloat(f, 'e', -1, 64)
	case 2:
		t = strconv.FormatFloat(f, 'E', 16, 64) // 17 significant digits
	case 3:
		t = strconv.FormatFloat(f, 'e', 25, 64) // more digits than needed
	case 4:
		if math.Abs(f) < 1e25 && (f == 0 || math.Abs(f) > 1e-25) {
			t = strconv.FormatFloat(f, 'f', -1, 64)
			if !strings.Contains(t, ".") {
				t += ".000"
			}
		} else {
			t = strconv.FormatFloat(f, 'g', -1, 64)
		}
	case 5: // mantissa shifted into the exponent: 1.5 -> 15e-1, 100 -> 1e2
		m := strconv.FormatFloat(f, 'e', -1, 64)
		mant, exp, _ := strings.Cut(m, "e")
		e, _ := strconv.Atoi(exp)
		if whole, frac, ok := strings.Cut(mant, "."); ok {
			mant, e = whole+frac, e-len(frac)
		}
		t = mant + "e" + strconv.Itoa(e)
	default:
		t = strconv.FormatFloat(f, 'g', 17, 64)
	}
	// JSON has no "+" mantissa and needs a digit before any "."; Go never
	// writes either. Go may write "e+": JSON allows it.
	return t
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
