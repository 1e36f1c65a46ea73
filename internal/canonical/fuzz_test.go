package canonical

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// FuzzCanonicalize: never panics; accepts only JSON; its output is valid JSON
// and UTF-8, canonical (a fixed point) and hashed by RequestHash; it agrees
// with gowebpki/jcs on what is valid and on the canonical form, except that
// every number keeps its exact value (canonicalReference, checkNumber).
// Seeds: testdata/fuzz/FuzzCanonicalize.
func FuzzCanonicalize(f *testing.F) {
	f.Add([]byte(`{"b":[1.0,1e21,-0,"\u00e9\ud83d\ude00"],"a":{"\ue000":1,"\ud800\udc00":2}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := JSON(data)
		hash, herr := Hash(data)
		want, werr := canonicalReference(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidJSON) {
				t.Fatalf("error %v is not ErrInvalidJSON", err)
			}
			if herr == nil && !isBlankJSON(data) {
				t.Fatalf("Canonicalize fails (%v) but RequestHash = %s", err, hash)
			}
			if werr == nil {
				t.Fatalf("Canonicalize rejects what the reference accepts: %v\ninput %q", err, data)
			}
			return
		}
		if werr != nil {
			t.Fatalf("Canonicalize accepts what the reference rejects (%v)\ninput %q", werr, data)
		}
		if !bytes.Equal(out, want) {
			t.Fatalf("differs from the reference\ninput %q\n got %q\nwant %q", data, out, want)
		}
		for _, num := range numberTokens(data) {
			checkNumber(t, string(data[num[0]:num[1]]))
		}
		if !json.Valid(data) {
			t.Fatalf("accepted input that encoding/json rejects: %q", data)
		}
		if !json.Valid(out) || !utf8.Valid(out) {
			t.Fatalf("output is not valid JSON and UTF-8: %q", out)
		}
		again, err := JSON(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("output is not canonical: %q -> %q, %v", out, again, err)
		}
		if herr != nil {
			t.Fatalf("RequestHash: %v", herr)
		}
		if h2, _ := Hash(out); h2 != hash {
			t.Fatalf("RequestHash(input) %s != RequestHash(output) %s", hash, h2)
		}
		if string(out) != "null" {
			sum := sha256.Sum256(out)
			if w := "sha256:" + hex.EncodeToString(sum[:]); hash != w {
				t.Fatalf("RequestHash = %s, want %s", hash, w)
			}
		}
		app, err := appendJSON([]byte("x"), data)
		if err != nil || string(app) != "x"+string(out) {
			t.Fatalf("appendJSON = %q, %v", app, err)
		}
	})
}

// FuzzCanonicalizeSpelling: one generated document written in two random
// spellings (member order, whitespace, escapes, number notation) has one
// hash; it is jcs's when the numbers are doubles' shortest decimals, and the
// reference's when some are decimals kept exactly (seed >= 2^63).
// Seeds: testdata/fuzz/FuzzCanonicalizeSpelling.
func FuzzCanonicalizeSpelling(f *testing.F) {
	f.Add(uint64(1), uint64(2), uint8(3))
	f.Fuzz(func(t *testing.T, seed, spell uint64, shape uint8) {
		g := &docGen{r: rand.New(rand.NewPCG(seed, 0)), maxDepth: 1 + int(shape%6), maxWidth: 1 + int(shape/6%10), exact: seed>>63 == 1}
		doc := g.value(0)
		if shape >= 240 {
			doc = g.chain(doc, int(seed%2000))
		}
		a := spelling{}.text(doc)
		b := spelling{rand.New(rand.NewPCG(spell, 1))}.text(doc)
		ha, err := Hash(a)
		if err != nil {
			t.Fatalf("RequestHash(%q): %v", a, err)
		}
		hb, err := Hash(b)
		if err != nil || ha != hb {
			t.Fatalf("spellings hash apart\n%q -> %s\n%q -> %s, %v", a, ha, b, hb, err)
		}
		if g.exact {
			checkAgainstReference(t, b)
		} else {
			checkAgainstJCS(t, b)
		}
	})
}

// FuzzValidText: validText agrees with utf8.Valid, and on valid text with
// the frozen canonicalizer's v1hasHighRune.
func FuzzValidText(f *testing.F) {
	f.Add([]byte("öße 😀 \xed\xa0\x80 \xf4\x90\x80\x80 \xe0\x80\x80 \xc0\x80 \xee\x80\x80 \xef\xbf\xbf"))
	f.Fuzz(func(t *testing.T, b []byte) {
		valid, high := validText(b)
		if valid != utf8.Valid(b) || valid && high != v1hasHighRune(b) {
			t.Fatalf("validText(%q) = %v, %v", b, valid, high)
		}
	})
}
