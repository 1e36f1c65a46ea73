package receipt_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/obol-gateway/obol/internal/secrettest"
	"github.com/obol-gateway/obol/receipt"
)

// unescape reads every JSON escape in b, leniently: \uXXXX in any case
// (surrogate pairs joined), \X as X or its control character.
func unescape(b []byte) []byte {
	var out []byte
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 == len(b) {
			out = append(out, b[i])
			continue
		}
		if b[i+1] == 'u' && i+6 <= len(b) {
			if r, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 32); err == nil {
				i += 5
				if utf16.IsSurrogate(rune(r)) && i+7 <= len(b) && b[i+1] == '\\' && b[i+2] == 'u' {
					if r2, err := strconv.ParseUint(string(b[i+3:i+7]), 16, 32); err == nil {
						if c := utf16.DecodeRune(rune(r), rune(r2)); c != utf8.RuneError {
							out = utf8.AppendRune(out, c)
							i += 6
							continue
						}
					}
				}
				out = utf8.AppendRune(out, rune(r))
				continue
			}
		}
		i++
		c := b[i]
		if j := strings.IndexByte("btnfr", c); j >= 0 {
			c = "\b\t\n\f\r"[j]
		}
		out = append(out, c)
	}
	return out
}

const testSecret = "sk_live_4f/9<a>&b+c"

func TestRedactorEveryForm(t *testing.T) {
	s := testSecret
	red := receipt.NewRedactor(s)
	basic := func(cred string) string { return base64.StdEncoding.EncodeToString([]byte(cred)) }
	bodies := map[string]string{
		"raw":             "token " + s + " end",
		"bearer header":   `{"headers":{"Authorization":"Bearer ` + s + `"}}`,
		"basic user:pass": `{"headers":{"Authorization":"Basic ` + basic("acct_1:"+s) + `"}}`,
		"basic pass:":     "Basic " + basic(s+":"),
		"basic :pass":     "Basic " + basic(":"+s),
		"basic url":       base64.URLEncoding.EncodeToString([]byte("u:" + s)),
		"basic escaped":   strings.ReplaceAll(basic("ab:"+s+"?"), "/", `\/`),
		"unpadded":        base64.RawStdEncoding.EncodeToString([]byte("xy" + s)),
	}
	for i, f := range secrettest.JSONForms(s) {
		bodies["json form "+string(rune('a'+i))] = `{"echo":"` + f + `"}`
	}
	for name, body := range bodies {
		if secrettest.Leak([]byte(body), s) == "" {
			t.Fatalf("%s: the test body does not hold the secret: %s", name, body)
		}
		out := red.Bytes([]byte(body))
		if l := secrettest.Leak(out, s); l != "" {
			t.Errorf("%s: %s form survived in %s", name, l, out)
		}
		if !bytes.Contains(out, []byte(receipt.Redacted)) {
			t.Errorf("%s: nothing redacted: %s", name, out)
		}
		if json.Valid([]byte(body)) && !json.Valid(out) {
			t.Errorf("%s: JSON became invalid: %s", name, out)
		}
		if got := red.String(body); got != string(out) {
			t.Errorf("%s: String %q, Bytes %q", name, got, out)
		}
	}
}

func TestRedactorNoMatchUnchanged(t *testing.T) {
	red := receipt.NewRedactor(testSecret, "another_secret_value")
	body := []byte(`{"id":"ch_1","amount":100,"note":"sk_live_4f/9 is only a prefix","b64":"c2tfbGl2ZQ=="}`)
	out := red.Bytes(body)
	if &out[0] != &body[0] || string(out) != string(body) {
		t.Fatalf("a body without the secret changed or was copied: %s", out)
	}
	if n := testing.AllocsPerRun(100, func() { red.Bytes(body) }); n != 0 {
		t.Errorf("Bytes allocated %v times for a body without secrets", n)
	}
	if n := testing.AllocsPerRun(100, func() { red.String(string(body)) }); n > 1 { // the conversion in the closure
		t.Errorf("String allocated %v times for text without secrets", n)
	}
	var zero receipt.Redactor
	if got := zero.Bytes(body); &got[0] != &body[0] {
		t.Error("the zero Redactor copied")
	}
}

func TestRedactorOverlappingSecrets(t *testing.T) {
	red := receipt.NewRedactor("12345678", "5678abcdefgh", "abcdefgh")
	for body, want := range map[string]string{
		"x12345678abcdefghy":    "x[redacted]y",
		"x5678abcdefgh12345678": "x[redacted]",
		"12345678 abcdefgh":     "[redacted] [redacted]",
	} {
		if got := red.String(body); got != want {
			t.Errorf("%q: got %q, want %q", body, got, want)
		}
	}
}

// A match that starts right after a JSON escape's backslash takes the
// backslash with it, so the document stays valid.
func TestRedactorKeepsJSONEscapes(t *testing.T) {
	red := receipt.NewRedactor("nabcdefgh")
	for _, body := range []string{`{"a":"\nabcdefgh"}`, `{"a":"\\nabcdefgh"}`, `{"a":"\\\nabcdefgh"}`} {
		out := red.String(body)
		if !json.Valid([]byte(out)) || strings.Contains(out, "abcdefgh") {
			t.Errorf("%s -> %s", body, out)
		}
	}
}

// A secret that reappears across an inserted Redacted is scrubbed again.
func TestRedactorSecretAcrossReplacement(t *testing.T) {
	red := receipt.NewRedactor("abcdefgh", "d]zzzzzz")
	out := red.String("abcdefghzzzzzz")
	if strings.Contains(out, "d]zzzzzz") || strings.Contains(out, "abcdefgh") {
		t.Errorf("got %q", out)
	}
}

func TestCheckSecret(t *testing.T) {
	for s, ok := range map[string]bool{"": false, "1234567": false, "12345678": true, testSecret: true} {
		err := receipt.CheckSecret(s)
		if (err == nil) != ok || (err != nil && !errors.Is(err, receipt.ErrShortSecret)) {
			t.Errorf("CheckSecret(%q) = %v", s, err)
		}
		if err != nil && s != "" && strings.Contains(err.Error(), s) {
			t.Errorf("error quotes the secret: %v", err)
		}
	}
}

func FuzzRedactor(f *testing.F) {
	f.Add([]byte(`{"a":"b"}`), "sk_live_0123456789", "user", uint16(5), uint8(0))
	f.Add([]byte("plain text"), "p/w<&>\"x\\y", "", uint16(3), uint8(3))
	f.Add([]byte(""), "ключ-секрет-01", "u", uint16(0), uint8(6))
	f.Add([]byte("AAAAAAAAAAAA"), "AAAAAAAAAA", "", uint16(4), uint8(9))
	f.Fuzz(func(t *testing.T, body []byte, secret, user string, pos uint16, mode uint8) {
		if len(secret) < receipt.MinSecretLen || strings.Contains(receipt.Redacted, secret) {
			return // refused by CheckSecret; or the replacement text itself
		}
		red := receipt.NewRedactor(secret)
		once := unescape(body)
		if secrettest.Leak(body, secret) == "" && !bytes.Contains(once, []byte(secret)) &&
			!bytes.Contains(unescape(once), []byte(secret)) && !secrettest.Decodes(body, secret[1:len(secret)-1]) {
			// Nothing of the secret in any form: the body must not change.
			if out := red.Bytes(body); !bytes.Equal(out, body) {
				t.Fatalf("a body without the secret changed:\n%q\n%q", body, out)
			}
		}
		var form string
		switch forms := secrettest.JSONForms(secret); {
		case int(mode) < len(forms):
			form = forms[mode]
		case mode%4 == 0:
			form = base64.StdEncoding.EncodeToString([]byte(user + ":" + secret))
		case mode%4 == 1:
			form = base64.URLEncoding.EncodeToString([]byte(secret + ":"))
		case mode%4 == 2:
			form = strings.ReplaceAll(base64.StdEncoding.EncodeToString([]byte(user+secret+user)), "/", `\/`)
		default:
			form = secret
		}
		p := int(pos) % (len(body) + 1)
		in := append(append(append([]byte(nil), body[:p]...), form...), body[p:]...)
		out := red.Bytes(in)
		if l := secrettest.Leak(out, secret); l != "" {
			t.Fatalf("%s form survived:\nin  %q\nout %q", l, in, out)
		}
	})
}

// StringFold finds a secret in any mix of case, also JSON-escaped, as a
// person may retype an API key in a note; text without one is unchanged.
func TestRedactorStringFold(t *testing.T) {
	const apiKey = "ob_Live_AcmeKey_2"
	red := receipt.NewRedactor(testSecret, apiKey)
	mixed := func(s string) string {
		b := []byte(s)
		for i := range b {
			if i%2 == 0 {
				b[i] = strings.ToUpper(string(b[i]))[0]
			} else {
				b[i] = strings.ToLower(string(b[i]))[0]
			}
		}
		return string(b)
	}
	for _, sec := range []string{testSecret, apiKey} {
		notes := map[string]string{
			"as is": sec,
			"upper": strings.ToUpper(sec),
			"lower": strings.ToLower(sec),
			"mixed": mixed(sec),
		}
		for i, f := range secrettest.JSONForms(strings.ToUpper(sec)) {
			notes["upper, JSON form "+string(rune('a'+i))] = f
		}
		for i, f := range secrettest.JSONForms(mixed(sec)) {
			notes["mixed, JSON form "+string(rune('a'+i))] = f
		}
		for name, copy := range notes {
			note := "checked by phone: " + copy + " -- ok"
			got := red.StringFold(note)
			if !strings.HasPrefix(got, "checked by phone: ") || !strings.HasSuffix(got, " -- ok") || !strings.Contains(got, receipt.Redacted) {
				t.Errorf("%s of %q: StringFold(%q) = %q", name, sec, note, got)
			}
			if l := secrettest.Leak([]byte(strings.ToLower(got)), strings.ToLower(sec)); l != "" {
				t.Errorf("%s of %q: a %s form survived in %q", name, sec, l, got)
			}
		}
	}
	for _, note := range []string{"the vendor shows the charge as paid", "SK_LIVE is only a prefix", ""} {
		if got := red.StringFold(note); got != note {
			t.Errorf("StringFold(%q) = %q, want it unchanged", note, got)
		}
	}
	if got := (receipt.Redactor{}).StringFold("SK_LIVE_4F/9<A>&B+C"); got != "SK_LIVE_4F/9<A>&B+C" {
		t.Errorf("the zero Redactor changed %q", got)
	}
}

// The case-folding index is built on first use: concurrent first uses
// (run with -race) build it once and agree.
func TestRedactorStringFoldConcurrent(t *testing.T) {
	red := receipt.NewRedactor(testSecret)
	note := "pasted " + strings.ToUpper(testSecret)
	outs := make(chan string, 8)
	for range 8 {
		go func() { outs <- red.StringFold(note) }()
	}
	for range 8 {
		if got := <-outs; got != "pasted "+receipt.Redacted {
			t.Errorf("StringFold = %q", got)
		}
	}
}
