package canonical

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"github.com/gowebpki/jcs"
)

// exactNumberForm is the canonical form of a number kept exactly.
var exactNumberForm = regexp.MustCompile(`^-?[1-9](\.[0-9]*[1-9])?e[+-](0|[1-9][0-9]*)$`)

// plainInteger is the canonical form of an integer kept exactly whose
// exact notation would read as a printed double.
var plainInteger = regexp.MustCompile(`^-?[1-9][0-9]*$`)

var jsonNumber = regexp.MustCompile(`^(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?$`)

var errRefNumber = errors.New("number outside the canonical range")

// refNumber is a slow, independent statement of the number rule: the
// ECMAScript form of the nearest double (gowebpki/jcs) when that has the exact
// value of the text (compared as big.Rat) or the text is that double printed
// (refPrinted), else the exact value: in plain digits for an integer whose
// exponent notation refPrinted would read as a double, else in exponent
// notation; more than 100
// significant digits, an exponent below -9999 and overflow are errors.
// It also returns the exact value of text in the exact notation.
func refNumber(text string) (form, exact string, err error) {
	m := jsonNumber.FindStringSubmatch(text)
	if m == nil {
		return "", "", fmt.Errorf("not a JSON number: %q", text)
	}
	all := m[2] + m[3]
	sig := strings.TrimLeft(all, "0")
	if sig == "" {
		return "0", "0", nil
	}
	e := new(big.Int) // the exponent of d.ddd
	if m[4] != "" {
		e.SetString(strings.TrimPrefix(m[4], "+"), 10)
	}
	e.Add(e, big.NewInt(int64(len(m[2])-(len(all)-len(sig))-1)))
	sig = strings.TrimRight(sig, "0")
	if len(sig) > 100 || e.Cmp(big.NewInt(-9999)) < 0 || e.Cmp(big.NewInt(400)) > 0 {
		return "", "", errRefNumber
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		return "", "", errRefNumber
	}
	exact = m[1] + sig[:1]
	if len(sig) > 1 {
		exact += "." + sig[1:]
	}
	if e.Sign() >= 0 {
		exact += "e+" + e.String()
	} else {
		exact += "e" + e.String()
	}
	double, err := jcs.NumberToJSON(f)
	if err != nil {
		return "", "", err
	}
	if exactValue(double).Cmp(exactValue(exact)) == 0 || refPrinted(text) {
		return double, exact, nil
	}
	if e.Sign() >= 0 && e.Cmp(big.NewInt(int64(len(sig)-1))) >= 0 && refPrinted(exact) {
		// An integer whose exact notation would be read as a printed
		// double: its plain digits.
		return m[1] + sig + strings.Repeat("0", int(e.Int64())-len(sig)+1), exact, nil
	}
	return exact, exact, nil
}

// strictNumber is the JSON number grammar (RFC 8259): which text the parser
// reads as one number token.
var strictNumber = regexp.MustCompile(`^-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// refPrinted is an independent statement of the printed-double rule: text
// is a JSON number written with a '.' or an exponent, of k <= 17
// significant digits (leading and trailing zeros not counted), whose
// nearest double d is nonzero and rounds to it at k digits: |v - d| is
// below half a unit of the k-th digit, or is half a unit and v is the even
// neighbour (ties to even, as printf) or the one above d (ties up, as
// JavaScript's toPrecision), compared as big.Rat.
func refPrinted(text string) bool {
	m := strictNumber.FindStringSubmatch(text)
	if m == nil || m[1] == "" && m[2] == "" {
		return false
	}
	mant, _, _ := strings.Cut(strings.TrimPrefix(text, "-"), "e")
	mant, _, _ = strings.Cut(mant, "E")
	whole, frac, _ := strings.Cut(mant, ".")
	sig := strings.Trim(whole+frac, "0")
	if len(sig) == 0 || len(sig) > 17 {
		return false
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || f == 0 {
		return false
	}
	v := exactValue(strings.TrimPrefix(text, "-"))
	d := new(big.Rat).SetFloat64(math.Abs(f))
	// The unit of the k-th digit: 10^(p-k+1) where 10^p <= v < 10^(p+1).
	p := len(strings.TrimLeft(whole, "0")) - 1
	if p < 0 {
		p = -1 - (len(frac) - len(strings.TrimLeft(frac, "0")))
	}
	if m[2] != "" {
		x, err := strconv.Atoi(strings.TrimPrefix(m[2][1:], "+"))
		if err != nil {
			return false
		}
		p += x
	}
	n := p - len(sig) + 1
	unit := new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(abs(n))), nil))
	if n < 0 {
		unit.Inv(unit)
	}
	diff := new(big.Rat).Sub(v, d)
	up := diff.Sign() > 0
	diff.Abs(diff)
	switch diff.Mul(diff, big.NewRat(2, 1)).Cmp(unit) {
	case -1:
		return true
	case 0: // a tie: rounded to even (printf, strconv) or up (toPrecision)
		return up || (sig[len(sig)-1]-'0')%2 == 0
	}
	return false
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// exactValue is the value of a JSON number; its exponent must be moderate.
func exactValue(text string) *big.Rat {
	r, ok := new(big.Rat).SetString(text)
	if !ok {
		panic("exactValue: " + text)
	}
	return r
}

// canonicalReference canonicalizes valid JSON as gowebpki/jcs does, except
// that numbers follow refNumber: each number is swapped for a string that
// no input can hold, jcs sorts and formats the document, and the strings are
// swapped back for the numbers' reference forms.
func canonicalReference(data []byte) ([]byte, error) {
	if _, err := jcs.Transform(data); err != nil {
		return nil, err
	}
	var nonce [16]byte
	rand.Read(nonce[:])
	tag := hex.EncodeToString(nonce[:])
	var marked []byte
	var forms []string
	rest := 0
	for _, num := range numberTokens(data) {
		form, _, err := refNumber(string(data[num[0]:num[1]]))
		if err != nil {
			return nil, err
		}
		marked = append(marked, data[rest:num[0]]...)
		marked = fmt.Appendf(marked, `"%s:%d"`, tag, len(forms))
		forms = append(forms, form)
		rest = num[1]
	}
	marked = append(marked, data[rest:]...)
	out, err := jcs.Transform(marked)
	if err != nil {
		return nil, fmt.Errorf("marked document: %v", err)
	}
	for k := len(forms) - 1; k >= 0; k-- {
		out = bytes.Replace(out, fmt.Appendf(nil, `"%s:%d"`, tag, k), []byte(forms[k]), 1)
	}
	return out, nil
}

// numberTokens returns the start and end of each number in valid JSON.
func numberTokens(data []byte) [][2]int {
	var nums [][2]int
	for i := 0; i < len(data); {
		switch ch := data[i]; {
		case ch == '"':
			i++
			for data[i] != '"' {
				if data[i] == '\\' {
					i++
				}
				i++
			}
			i++
		case ch == '-' || ch >= '0' && ch <= '9':
			j := i + 1
			for j < len(data) && bytes.IndexByte([]byte("0123456789.eE+-"), data[j]) >= 0 {
				j++
			}
			nums = append(nums, [2]int{i, j})
			i = j
		default:
			i++
		}
	}
	return nums
}
