package idempotency

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"

	"github.com/gowebpki/jcs"
)

// exactNumberForm is the canonical form of a number kept exactly.
var exactNumberForm = regexp.MustCompile(`^-?[1-9](\.[0-9]*[1-9])?e[+-](0|[1-9][0-9]*)$`)

var jsonNumber = regexp.MustCompile(`^(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?$`)

var errRefNumber = errors.New("number outside the canonical range")

// refNumber is a slow, independent statement of the number rule: the
// ECMAScript form of the nearest double (gowebpki/jcs) when that has the exact
// value of the text (compared as big.Rat), else the exact value in exponent
// notation; more than 100 significant digits, an exponent below -9999 and
// overflow are errors.
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
	if exactValue(double).Cmp(exactValue(exact)) == 0 {
		return double, exact, nil
	}
	return exact, exact, nil
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
