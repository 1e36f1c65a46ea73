package main

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"math/rand/v2"
)

// Row 5's vendor answers, kept as fixtures: a Stripe-style charge (ids,
// timestamps, nested billing and card details, metadata) and the wrapper of
// a list of charges. Every stored record gets its own copy with every value
// varied (see vary), so that neither Redis nor a compressing store can
// share or shrink what real answers would not let them.
var (
	//go:embed testdata/charge.json
	chargeFixture []byte
	//go:embed testdata/charge_list.json
	chargeListFixture []byte
)

// Sizes of row 5's bodies.
const (
	smallBody = 1 << 10
	largeBody = 64 << 10
)

// compactFixture returns a fixture without insignificant white space.
func compactFixture(fixture []byte) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, fixture); err != nil {
		panic(fmt.Sprintf("bench: fixture is not JSON: %v", err)) // embedded: a broken build
	}
	return b.Bytes()
}

// chargeBody is a charge of about 1 KiB whose values are varied from seed.
func chargeBody(seed uint64) []byte {
	return vary(compactFixture(chargeFixture), rand.New(rand.NewPCG(seed, 0x0b01)))
}

// chargeListBody is a list of charges of about size bytes (never more),
// each with its own values, all varied from seed.
func chargeListBody(seed uint64, size int) []byte {
	r := rand.New(rand.NewPCG(seed, 0x0b02))
	wrapper := compactFixture(chargeListFixture)
	head, tail, ok := bytes.Cut(wrapper, []byte(`"data":[]`))
	if !ok {
		panic(`bench: charge_list.json has no "data": []`)
	}
	charge := compactFixture(chargeFixture)
	out := append(append([]byte(nil), head...), `"data":[`...)
	for n := 0; len(out)+len(charge)+1+len(`]`)+len(tail) <= size; n++ {
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, vary(charge, r)...)
	}
	return append(append(out, ']'), vary(tail, r)...)
}

// vary returns doc, compact JSON, with every value replaced by a random one
// of the same shape and length: each digit of a number by a digit (the
// first never 0), each letter and digit of a string by one of its class
// (lower case, upper case, digit). Member names, literals (true, false,
// null) and punctuation inside strings stay, and so does the prefix of an
// id such as "ch_" or "cus_", as a vendor's ids keep theirs.
func vary(doc []byte, r *rand.Rand) []byte {
	out := make([]byte, 0, len(doc))
	for i := 0; i < len(doc); {
		c := doc[i]
		switch {
		case c == '"':
			j := i + 1
			for j < len(doc) && doc[j] != '"' {
				if doc[j] == '\\' {
					j++
				}
				j++
			}
			s := doc[i : j+1]
			k := j + 1
			for k < len(doc) && (doc[k] == ' ' || doc[k] == '\n' || doc[k] == '\t' || doc[k] == '\r') {
				k++
			}
			if k < len(doc) && doc[k] == ':' || bytes.IndexByte(s, '\\') >= 0 {
				out = append(out, s...) // a member name, or escaped: kept
			} else {
				out = append(out, varyString(s, r)...)
			}
			i = j + 1
		case c >= '0' && c <= '9':
			first := true
			for ; i < len(doc) && doc[i] >= '0' && doc[i] <= '9'; i++ {
				d := byte('0' + r.IntN(10))
				if first {
					d = byte('1' + r.IntN(9))
					first = false
				}
				out = append(out, d)
			}
		default:
			out = append(out, c)
			i++
		}
	}
	return out
}

// varyString varies the quoted string s; see vary.
func varyString(s []byte, r *rand.Rand) []byte {
	out := append([]byte(nil), s...)
	body := out[1 : len(out)-1]
	if p := bytes.IndexByte(body, '_'); p > 0 && p <= 5 && isLower(body[:p]) {
		body = body[p+1:] // an id prefix
	}
	const (
		lower = "abcdefghijklmnopqrstuvwxyz"
		upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		digit = "0123456789"
	)
	for i, c := range body {
		switch {
		case c >= 'a' && c <= 'z':
			body[i] = lower[r.IntN(len(lower))]
		case c >= 'A' && c <= 'Z':
			body[i] = upper[r.IntN(len(upper))]
		case c >= '0' && c <= '9':
			body[i] = digit[r.IntN(len(digit))]
		}
	}
	return out
}

func isLower(b []byte) bool {
	for _, c := range b {
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}
