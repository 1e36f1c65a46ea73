package canonical

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
)

// plainNumber returns the length n of the number at p[0] and the length of
// its canonical form when that form is the number as written, cut after the
// last nonzero digit of its fraction (1234.50 is 1234.5, 10.00 is 10):
// optionally '-', an integer part without a leading zero or a lone 0, a
// fraction of at most 8 digits, at most 15 digits in all, no exponent, not
// below 1e-6 and not -0 (see appendShortDecimal). Otherwise n is 0. It finds
// the digits eight at a time.
func plainNumber(p *[24]byte) (n, canon int) {
	const lo = 0x0101010101010101
	i := 0
	if p[0] == '-' {
		i = 1
	}
	n = digitRun(binary.LittleEndian.Uint64(p[i : i+8]))
	if n == 8 {
		n += digitRun(binary.LittleEndian.Uint64(p[i+8 : i+16]))
	}
	if n == 0 || n > 15 || p[i] == '0' && n > 1 {
		return 0, 0
	}
	d := i + n // the byte after the integer part
	canon = d
	if p[d] == '.' {
		if n > 14 {
			return 0, 0
		}
		w := binary.LittleEndian.Uint64(p[d+1 : d+9])
		f := digitRun(w)
		// Below 1e-6 (0.000000ddd) the canonical form has an exponent.
		if f == 0 || n+f > 15 || p[i] == '0' && w&(1<<48-1) == 0x303030303030 {
			return 0, 0
		}
		// The fraction up to its last nonzero digit, without the point if
		// it has none.
		if x := (w ^ lo*'0') & (math.MaxUint64 >> (64 - 8*uint(f))); x != 0 {
			canon = d + 1 + 8 - bits.LeadingZeros64(x)/8
		}
		d += 1 + f
	}
	if i > 0 && canon == 2 && p[1] == '0' { // -0 is written 0
		return 0, 0
	}
	// A digit here (past eight of the fraction or fifteen in all) leaves
	// the number to number, as an exponent does.
	if c := p[d]; c >= '0' && c <= '9' || c == 'e' || c == 'E' || c == '.' {
		return 0, 0
	}
	return d, canon
}

// digitRun returns how many of the bytes of w (little-endian) are ASCII
// digits before the first that is not, 8 if all are.
func digitRun(w uint64) int {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	x := w ^ (lo * '0') // a digit is now 0..9
	// A byte of x at or above 10 carries into its high bit, one at or above
	// 0x80 has it already; carries out of a byte come only from one marked.
	return bits.TrailingZeros64((x+lo*(0x80-10)|x)&hi) / 8
}

// number parses the number at c.pos and appends its ECMAScript form.
func (c *canonicalizer) number() error {
	in := c.in
	start := c.pos
	i := start
	if in[i] == '-' {
		i++
	}
	digits := i
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case i < len(in) && in[i] >= '1' && in[i] <= '9':
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
	default:
		return c.errorf(start, "invalid number")
	}
	intEnd := i
	fracStart, fracEnd := i, i
	if i < len(in) && in[i] == '.' {
		i++
		if i >= len(in) || in[i] < '0' || in[i] > '9' {
			return c.errorf(start, "invalid number (no digit after the decimal point)")
		}
		fracStart = i
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
		fracEnd = i
	}
	exponent := i < len(in) && (in[i] == 'e' || in[i] == 'E')
	if exponent {
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		if i >= len(in) || in[i] < '0' || in[i] > '9' {
			return c.errorf(start, "invalid number (no digit in the exponent)")
		}
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
	}
	c.pos = i
	exp := in[i:i]
	if exponent {
		exp = in[fracEnd+1 : i]
	}
	if !exponent && c.appendPlain(in[start:i], in[digits:intEnd], in[fracStart:fracEnd]) {
		return nil
	}
	if c.appendShortDecimal(start != digits, in[digits:intEnd], in[fracStart:fracEnd], exp) {
		return nil
	}
	return c.appendLongNumber(start, in[digits:intEnd], in[fracStart:fracEnd], exp)
}

// appendPlain appends a number written without exponent as it is when that
// is its canonical form (see appendShortDecimal): at most 15 digits, no
// trailing fraction zero, at least 1e-6, and not -0.
func (c *canonicalizer) appendPlain(num, integer, frac []byte) bool {
	if len(integer)+len(frac) > 15 || len(frac) > 0 && frac[len(frac)-1] == '0' {
		return false
	}
	if integer[0] == '0' {
		if len(frac) == 0 { // 0 or -0
			c.tape = append(c.tape, '0')
			return true
		}
		if len(frac) > 5 && string(frac[:6]) == "000000" {
			return false
		}
	}
	c.tape = append(c.tape, num...)
	return true
}

// appendShortDecimal appends the canonical form of the number with the
// given integer, fraction and exponent digits when it can do so without
// converting to binary: a decimal of at most 15 significant digits (DBL_DIG)
// is the shortest decimal that rounds to its double, and from 1e-6 to 1e21
// ECMAScript prints that decimal in plain notation. It reports false for
// other numbers.
func (c *canonicalizer) appendShortDecimal(neg bool, integer, frac, exp []byte) bool {
	// The significant digits are hi followed by lo, without leading or
	// trailing zeros; first is the index of the first one in integer+frac.
	// The grammar allows a leading zero only as the whole integer part.
	hi, lo, first := integer, frac, 0
	if integer[0] == '0' {
		f := 0
		for f < len(frac) && frac[f] == '0' {
			f++
		}
		if f == len(frac) { // zero, or -0
			c.tape = append(c.tape, '0')
			return true
		}
		hi, lo, first = nil, frac[f:], 1+f
	}
	for len(lo) > 0 && lo[len(lo)-1] == '0' {
		lo = lo[:len(lo)-1]
	}
	if len(lo) == 0 {
		for hi[len(hi)-1] == '0' {
			hi = hi[:len(hi)-1]
		}
	}
	k := len(hi) + len(lo)
	if k > 15 {
		return false
	}
	var d [16]byte
	copy(d[:], hi)
	copy(d[len(hi):], lo)
	// The value is 0.d * 10^n.
	n := len(integer) - first
	if len(exp) > 0 {
		e, sign := 0, 1
		switch exp[0] {
		case '-':
			sign = -1
			fallthrough
		case '+':
			exp = exp[1:]
		}
		for _, ch := range exp {
			if e > 1000 {
				return false
			}
			e = e*10 + int(ch-'0')
		}
		n += sign * e
	}
	if n < -5 || n > 21 { // below 1e-6 or from 1e21: exponent notation
		return false
	}
	c.tape = appendECMAScript(c.tape, neg, d[:k], n)
	return true
}

const (
	// maxExactDigits and minExactExponent bound the numbers whose exact
	// value the canonical form keeps (see appendLongNumber), so that a
	// hostile number can neither make the canonical text long nor its
	// conversion to binary slow; no real argument comes near them.
	maxExactDigits   = 100
	minExactExponent = -9999
)

// maxDoubleDigits is the most significant digits that a double encoder
// writes (C's %.17g, JavaScript's toPrecision(17)): enough to tell every
// double from its neighbours.
const maxDoubleDigits = 17

// appendLongNumber appends the canonical form of a nonzero number that
// appendShortDecimal left undecided. When the shortest decimal that rounds
// to the number's nearest double has the number's exact value, the number
// is what a double encoder writes and its form is ECMAScript's. So is a
// number written with a '.' or an exponent whose k <= 17 significant digits
// are its nearest double printed, correctly rounded, at k digits: what an
// encoder that prints doubles at a fixed precision writes (%.17g writes
// the double 0.1 as 0.10000000000000001). Otherwise rounding would lose
// digits the client wrote (9007199254740993, a 25-digit id, 1e-400), so the
// form is the exact value in exponent notation, d.ddde±n, a text that no
// double prints as: requests that differ only beyond a double's precision
// never share a hash. An integer literal (no '.', no exponent) is never
// read as a printed double: 72057594037927936 and 72057594037927940, two
// int64 ids that are one double, stay apart; where its exact form would
// read back as one, it is written as its plain digits instead.
//
// With c.previousRule set, the printed-double reading is off: the numbers
// that it changes (c.refined reports them) keep their exact form in
// exponent notation, as they did before it existed (see [Hashes]).
func (c *canonicalizer) appendLongNumber(start int, integer, frac, exp []byte) error {
	printed := len(frac) > 0 || len(exp) > 0 // written with a '.' or an exponent
	// The significant digits, hi followed by lo, without leading or
	// trailing zeros; first is the index of the first one in integer+frac.
	var hi, lo []byte
	first := 0
	for first < len(integer) && integer[first] == '0' {
		first++
	}
	last := len(frac) - 1
	for last >= 0 && frac[last] == '0' {
		last--
	}
	switch {
	case first == len(integer): // 0.000ddd: appendShortDecimal took zero
		f := 0
		for frac[f] == '0' {
			f++
		}
		first += f
		lo = frac[f : last+1]
	case last >= 0:
		hi, lo = integer[first:], frac[:last+1]
	default:
		n := len(integer)
		for integer[n-1] == '0' {
			n--
		}
		hi = integer[first:n]
	}
	k := len(hi) + len(lo)
	if k > maxExactDigits {
		return c.errorf(start, "number with more than %d significant digits", maxExactDigits)
	}
	x, neg := 0, false // the exponent as written, saturated
	if len(exp) > 0 {
		switch exp[0] {
		case '-':
			neg = true
			fallthrough
		case '+':
			exp = exp[1:]
		}
		for _, ch := range exp {
			if x < 1<<40 {
				x = x*10 + int(ch-'0')
			}
		}
		if neg {
			x = -x
		}
	}
	// The value is d.ddd * 10^e.
	e := len(integer) - first - 1 + x
	if e < minExactExponent {
		return c.errorf(start, "number with an exponent below %d", minExactExponent)
	}
	f, err := strconv.ParseFloat(string(c.in[start:c.pos]), 64)
	if err != nil { // the grammar is checked, so only out of range
		return c.errorf(start, "number out of the double range")
	}
	// The shortest decimal of f, whose digits ECMAScript prints: d[.ddd]e±nn.
	var buf [32]byte
	s := strconv.AppendFloat(buf[:0], math.Abs(f), 'e', -1, 64)
	i := len(s) - 4 // the 'e': the exponent has 2 or 3 digits
	if s[i] != 'e' {
		i--
	}
	es := int(s[i+2]-'0')*10 + int(s[i+3]-'0')
	if i+4 < len(s) {
		es = es*10 + int(s[i+4]-'0')
	}
	if s[i+1] == '-' {
		es = -es
	}
	var d [17]byte
	d[0] = s[0]
	ks := 1
	if i > 1 {
		ks += copy(d[1:], s[2:i])
	}
	neg = c.in[start] == '-'
	// ks == k, tested first, keeps the slices of d in range.
	if f != 0 && es == e && ks == k &&
		string(d[:len(hi)]) == string(hi) && string(d[len(hi):k]) == string(lo) {
		c.tape = appendECMAScript(c.tape, neg, d[:ks], es+1)
		return nil
	}
	if f != 0 && k <= maxDoubleDigits && !c.previousRule && printsAs(f, hi, lo, e) {
		c.refined = true
		if printed {
			c.tape = appendECMAScript(c.tape, neg, d[:ks], es+1)
			return nil
		}
		// An integer literal keeps its exact value, but not the exact
		// form's spelling d.ddde+n, which would read back as a printed
		// double (70000000000000704 is also the double 70000000000000700
		// printed at 17 digits): it stays plain digits, which is canonical.
		if neg {
			c.tape = append(c.tape, '-')
		}
		c.tape = append(c.tape, integer[first:]...)
		return nil
	}
	if neg {
		c.tape = append(c.tape, '-')
	}
	if len(hi) == 0 {
		hi, lo = lo, nil
	}
	c.tape = append(c.tape, hi[0])
	if k > 1 {
		c.tape = append(c.tape, '.')
		c.tape = append(c.tape, hi[1:]...)
		c.tape = append(c.tape, lo...)
	}
	c.tape = append(c.tape, 'e', '+')
	if e < 0 {
		c.tape[len(c.tape)-1] = '-'
		e = -e
	}
	c.tape = strconv.AppendInt(c.tape, int64(e), 10)
	return nil
}

// printsAs reports whether the double f, printed correctly rounded at
// k = len(hi)+len(lo) significant digits, is d.ddd * 10^e, where d.ddd
// are the digits hi followed by lo, the last one not zero. A tie (f exactly
// halfway between two such decimals) prints both ways: C's printf and
// strconv round it to even, JavaScript's toPrecision up. The digits are
// compared as text, not as floats.
func printsAs(f float64, hi, lo []byte, e int) bool {
	k := len(hi) + len(lo)
	var v, p [maxDoubleDigits]byte
	copy(v[copy(v[:], hi):], lo)
	var buf [32]byte
	if x := eDigits(p[:], strconv.AppendFloat(buf[:0], math.Abs(f), 'e', k-1, 64)); x != e {
		return false
	}
	if string(p[:k]) == string(v[:k]) {
		return true
	}
	// Rounding a tie up instead prints other digits only where rounding to
	// even went down, to an even last digit, so without a carry.
	last := k - 1
	if p[last]%2 != 0 || v[last] != p[last]+1 || string(p[:last]) != string(v[:last]) {
		return false
	}
	// The exact value of f (767 digits are enough for any double): a tie
	// when its digit k+1 is 5 and all after it are zeros.
	var exact [800]byte
	t := strconv.AppendFloat(exact[:0], math.Abs(f), 'e', 767, 64)
	if t[k+1] != '5' {
		return false
	}
	// And rounding to even went down: f's own digit at last is p's. Where
	// it went up (an odd digit), rounding up prints the same p.
	own := t[0] // t is d.ddd...: f's digit at last
	if last > 0 {
		own = t[last+1]
	}
	if own != p[last] {
		return false
	}
	for _, ch := range t[k+2 : 2+767] {
		if ch != '0' {
			return false
		}
	}
	return true
}

// eDigits copies the mantissa digits of s, a float in strconv's 'e' format
// (d[.ddd]e±dd[d]), to d, which has room for them, and returns the exponent.
func eDigits(d, s []byte) (exp int) {
	d[0] = s[0]
	i := 1
	if s[1] == '.' {
		for i = 2; s[i] != 'e'; i++ {
			d[i-1] = s[i]
		}
	}
	for _, ch := range s[i+2:] {
		exp = exp*10 + int(ch-'0')
	}
	if s[i+1] == '-' {
		exp = -exp
	}
	return exp
}

// appendECMAScript appends the decimal 0.d * 10^n, d of at most 21 digits
// without leading or trailing zeros, as ECMAScript's Number.prototype.toString
// prints it (RFC 8785 section 3.2.2.3): plain from 1e-6 up to 1e21, otherwise
// in exponent notation with an explicit exponent sign.
func appendECMAScript(dst []byte, neg bool, d []byte, n int) []byte {
	if neg {
		dst = append(dst, '-')
	}
	k := len(d)
	switch {
	case n > 21 || n < -5:
		dst = append(dst, d[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, d[1:]...)
		}
		dst = append(dst, 'e', '+')
		if n--; n < 0 {
			dst[len(dst)-1] = '-'
			n = -n
		}
		return strconv.AppendInt(dst, int64(n), 10)
	case n >= k:
		dst = append(dst, d...)
		return append(dst, "000000000000000000000"[:n-k]...)
	case n > 0:
		dst = append(dst, d[:n]...)
		dst = append(dst, '.')
		return append(dst, d[n:]...)
	default:
		dst = append(dst, "0.00000"[:2-n]...)
		return append(dst, d...)
	}
}
