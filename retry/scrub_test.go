package retry_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/secrettest"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

// echoVendor answers 201 with every request header and the raw request
// body in a JSON body, the way a debugging or misbehaving vendor does: as
// encoding/json writes them, "/" escaped as "\/" too, and base64-encoded.
// It also echoes the Authorization header into Request-Id, a kept header,
// and a Basic credential decoded. It counts the requests it saw.
func echoVendor(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	seen := new(atomic.Int64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		body, _ := io.ReadAll(r.Body)
		auth := r.Header.Get("Authorization")
		echo := map[string]any{"headers": r.Header, "body": string(body)}
		if _, cred, ok := strings.Cut(auth, "Basic "); ok {
			dec, _ := base64.StdEncoding.DecodeString(cred)
			echo["basic_decoded"] = string(dec)
		}
		enc, _ := json.Marshal(echo)
		// A PHP-style copy ("/" as "\/") and a base64 copy, inside the object.
		php := strings.ReplaceAll(string(enc), "/", `\/`)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req_"+auth)
		w.Header().Set("X-Request-Id", base64.StdEncoding.EncodeToString([]byte(auth)))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"echo":%s,"php":%s,"b64":%q}`, enc, php, base64.StdEncoding.EncodeToString(enc))
	}))
	t.Cleanup(srv.Close)
	return srv, seen
}

func resultBytes(r *idempotency.StoredResult) []byte {
	if r == nil {
		return nil
	}
	var b bytes.Buffer
	b.Write(r.Body)
	for k, vs := range r.Header {
		fmt.Fprintf(&b, "\n%s: %s", k, strings.Join(vs, ", "))
	}
	return b.Bytes()
}

func TestEchoedCredentialsAreScrubbed(t *testing.T) {
	// The secret has characters that JSON and base64 write differently.
	const secret = "sk_live_9f/8e<7d>&c+Q"
	const user = "acct_42"
	for _, tc := range []struct {
		name, auth string
		secrets    []string // every form of the credential that must not come back
	}{
		{"bearer", "Bearer " + secret, []string{secret}},
		{"basic", "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+secret)), []string{secret}},
		{"basic key only", "Basic " + base64.StdEncoding.EncodeToString([]byte(secret+":")), []string{secret}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, seen := echoVendor(t)
			m := miniredis.RunT(t)
			st := openStore(t, rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true}, 5*time.Second, true)
			o := orch(st, 5*time.Second)
			c := call(v.URL, spec(effectspec.BindingHeader), idempotency.NewKey(), &retry.Executor{})
			c.Target.(*retry.HTTPTarget).Header.Set("Authorization", tc.auth)

			out, err := o.Do(context.Background(), c)
			if err != nil || out.Receipt.Outcome != effectspec.Accepted || seen.Load() != 1 {
				t.Fatalf("err %v outcome %s seen %d", err, out.Receipt.Outcome, seen.Load())
			}
			if !bytes.Contains(out.Result.Body, []byte(receipt.Redacted)) || !json.Valid(out.Result.Body) {
				t.Errorf("answer not scrubbed, or no longer JSON: %s", out.Result.Body)
			}
			if got := out.Result.Header.Get("Request-Id"); got == "" || !strings.Contains(got, receipt.Redacted) {
				t.Errorf("Request-Id %q: the kept header was not scrubbed, or not kept", got)
			}
			again, err := o.Do(context.Background(), c)
			if err != nil || !again.Receipt.Replayed || seen.Load() != 1 {
				t.Fatalf("replay: err %v replayed %v seen %d", err, again.Receipt.Replayed, seen.Load())
			}
			rec, err := st.Lookup(context.Background(), c.Scope, c.Key)
			if err != nil {
				t.Fatal(err)
			}
			enc, _ := json.Marshal(out.Receipt)
			for what, b := range map[string][]byte{
				"answer":         resultBytes(out.Result),
				"replay":         resultBytes(again.Result),
				"stored result":  resultBytes(rec.Result),
				"raw redis hash": secrettest.DumpRedis(t, m),
				"receipt":        enc,
			} {
				if l := secrettest.Leak(b, tc.secrets...); l != "" {
					t.Errorf("%s holds the secret (%s): %s", what, l, b)
				}
			}
			// The check above can see a leak: the vendor did echo it.
			if l := secrettest.Leak([]byte(tc.auth+" "+base64.StdEncoding.EncodeToString([]byte(tc.auth))), tc.secrets...); l == "" {
				t.Fatal("the leak check sees nothing in the credential itself")
			}
		})
	}
}

// A TargetFunc cannot report its credentials; Call.Secrets names them.
func TestCallSecretsScrubTargetFunc(t *testing.T) {
	m := miniredis.RunT(t)
	st := openStore(t, rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true}, 5*time.Second, true)
	const secret = "token_in_the_query_0123"
	c := call("http://unused", spec(effectspec.BindingHeader), idempotency.NewKey(), nil)
	c.Target = retry.TargetFunc(func(context.Context, retry.Attempt) retry.Result {
		return retry.Result{Phase: retry.Responded, Status: 201,
			Header: http.Header{"Request-Id": {"r-" + secret}, "Content-Type": {"application/json"}},
			Body:   []byte(`{"url":"https://vendor/x?token=` + secret + `"}`)}
	})
	c.Secrets = []string{secret}
	out, err := orch(st, 5*time.Second).Do(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	for what, b := range map[string][]byte{"answer": resultBytes(out.Result), "redis": secrettest.DumpRedis(t, m)} {
		if l := secrettest.Leak(b, secret); l != "" {
			t.Errorf("%s holds the secret (%s): %s", what, l, b)
		}
	}
	if string(out.Result.Body) != `{"url":"https://vendor/x?token=[redacted]"}` {
		t.Errorf("body %s", out.Result.Body)
	}
}

// A short secret is a configuration error: refused before the claim, with an
// error that names the field and not the value.
func TestShortSecretRefusedBeforeClaim(t *testing.T) {
	v, seen := echoVendor(t)
	m := miniredis.RunT(t)
	st := openStore(t, rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true}, 5*time.Second, true)
	o := orch(st, 5*time.Second)
	for name, mutate := range map[string]func(*retry.Call){
		"Call.Secrets": func(c *retry.Call) { c.Secrets = []string{"", "s3cr3t"} },
		"bearer":       func(c *retry.Call) { c.Target.(*retry.HTTPTarget).Header.Set("Authorization", "Bearer s3cr3t") },
		"basic": func(c *retry.Call) {
			c.Target.(*retry.HTTPTarget).URL = "http://user:s3cr3t@" + strings.TrimPrefix(v.URL, "http://")
		},
		"x-api-key": func(c *retry.Call) { c.Target.(*retry.HTTPTarget).Header.Set("X-Api-Key", "s3cr3t") },
	} {
		c := call(v.URL, spec(effectspec.BindingHeader), idempotency.NewKey(), &retry.Executor{})
		mutate(&c)
		_, err := o.Do(context.Background(), c)
		if !errors.Is(err, receipt.ErrShortSecret) || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: err %v", name, err)
		}
		if _, err := st.Lookup(context.Background(), c.Scope, c.Key); !errors.Is(err, idempotency.ErrNotFound) {
			t.Errorf("%s: the refused call left a record: %v", name, err)
		}
	}
	var records []string
	for _, k := range m.Keys() {
		if !strings.Contains(k, ":meta:") { // the deployment id is written at start
			records = append(records, k)
		}
	}
	if seen.Load() != 0 || len(records) != 0 {
		t.Errorf("vendor saw %d requests; redis holds %v", seen.Load(), records)
	}
}

func TestHTTPTargetSecrets(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		url    string
		header http.Header
		want   []string
	}{
		{"http://h/x", nil, nil},
		{"http://h/x", http.Header{"Authorization": {"Bearer tok_0123456789"}}, []string{"tok_0123456789"}},
		{"http://h/x", http.Header{"Authorization": {"Basic " + b64("acct:pw_0123456789")}},
			[]string{b64("acct:pw_0123456789"), "acct:pw_0123456789", "pw_0123456789"}},
		{"http://h/x", http.Header{"Authorization": {"Basic " + b64("sk_live_abcdef:")}},
			[]string{b64("sk_live_abcdef:"), "sk_live_abcdef:", "sk_live_abcdef"}},
		{"http://h/x", http.Header{"Proxy-Authorization": {"rawtoken_0123"}, "X-Api-Key": {"key_0123456789"},
			"Stripe-Version": {"2024-06-20"}}, []string{"rawtoken_0123", "key_0123456789"}},
		{"http://u:pw_0123456789@h/x", nil, []string{"u:pw_0123456789", "pw_0123456789"}},
	} {
		got := (&retry.HTTPTarget{URL: tc.url, Header: tc.header}).Secrets()
		slices.Sort(got)
		slices.Sort(tc.want)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s %v: got %q, want %q", tc.url, tc.header, got, tc.want)
		}
	}
}

// A record stored before its secrets were known (or before scrubbing
// existed) is scrubbed when it is replayed.
func TestReplayScrubsOldRecords(t *testing.T) {
	m := miniredis.RunT(t)
	st := openStore(t, rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true}, 5*time.Second, true)
	const secret = "sk_rotated_0123456789"
	c := call("http://unused", spec(effectspec.BindingHeader), idempotency.NewKey(), nil)
	c.Target = retry.TargetFunc(func(context.Context, retry.Attempt) retry.Result {
		return retry.Result{Phase: retry.Responded, Status: 201, Body: []byte(`{"auth":"Bearer ` + secret + `"}`)}
	})
	o := orch(st, 5*time.Second)
	if _, err := o.Do(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if secrettest.Leak(secrettest.DumpRedis(t, m), secret) == "" {
		t.Fatal("setup: the record was stored without the secret")
	}
	c.Secrets = []string{secret}
	again, err := o.Do(context.Background(), c)
	if err != nil || !again.Receipt.Replayed {
		t.Fatalf("err %v receipt %+v", err, again.Receipt)
	}
	if string(again.Result.Body) != `{"auth":"Bearer [redacted]"}` {
		t.Errorf("replayed %s", again.Result.Body)
	}
}
