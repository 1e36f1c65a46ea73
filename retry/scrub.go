package retry

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/receipt"
)

// A SecretHolder is a [Target] that sends credentials. The [Orchestrator]
// replaces each of its Secrets, and the [Call]'s, by [receipt.Redacted] in the
// vendor's answer (body and kept headers; raw, JSON-escaped and inside
// base64, see [receipt.Redactor]) before the answer is stored (finalize) or
// returned (fresh or replayed), so that a vendor which echoes its request
// cannot hand a credential to the caller or to the store. Replays are
// scrubbed too, so a record stored before a secret was known comes back
// clean. [HTTPTarget] and the broker adapters are SecretHolders.
//
// Secrets returns every credential value the Target sends; empty strings
// are ignored. Each must be at least [receipt.MinSecretLen] bytes long, else
// Do refuses the call before its claim (an error wrapping
// [receipt.ErrShortSecret], naming where it came from): it could not be
// replaced without corrupting answers. It must be safe for concurrent use.
type SecretHolder interface {
	Target
	Secrets() []string
}

// credentialHeaders are the request headers whose values HTTPTarget reports
// as secrets.
var credentialHeaders = []string{"Authorization", "Proxy-Authorization", "X-Api-Key"}

// Secrets returns the credentials t sends: for each Authorization,
// Proxy-Authorization and X-Api-Key value in Header, the credential after
// its scheme ("Bearer ", "Basic ", ...) or the whole value when it has none;
// for a Basic credential also its decoded "user:password" and the password
// (the user when the password is empty, as in "sk_live_...:"); and the same
// of the URL's userinfo, which net/http sends as Basic. A credential sent in
// another header, in the URL's query or in the body goes in [Call].Secrets.
func (t *HTTPTarget) Secrets() []string {
	var out []string
	basic := func(user, pass string) {
		out = append(out, user+":"+pass)
		if pass != "" {
			out = append(out, pass)
		} else {
			out = append(out, user)
		}
	}
	for _, name := range credentialHeaders {
		for _, v := range t.Header.Values(name) {
			v = strings.TrimSpace(v)
			scheme, cred, ok := strings.Cut(v, " ")
			if !ok {
				out = append(out, v)
				continue
			}
			cred = strings.TrimSpace(cred)
			out = append(out, cred)
			if strings.EqualFold(scheme, "Basic") {
				if dec, err := base64.StdEncoding.DecodeString(cred); err == nil {
					user, pass, _ := strings.Cut(string(dec), ":")
					basic(user, pass)
				}
			}
		}
	}
	if u, err := url.Parse(t.URL); err == nil && u.User != nil {
		pass, _ := u.User.Password()
		basic(u.User.Username(), pass)
	}
	return out
}

// callSecrets returns the secrets to scrub from call's answers: Call.Secrets
// and those its Target reports, without empty strings. A secret shorter than
// [receipt.MinSecretLen] is an error naming where it came from, not its value.
func callSecrets(call *Call) ([]string, error) {
	var out []string
	for i, s := range call.Secrets {
		if s == "" {
			continue
		}
		if err := receipt.CheckSecret(s); err != nil {
			return nil, fmt.Errorf("retry: Call.Secrets[%d]: %w", i, err)
		}
		out = append(out, s)
	}
	if h, ok := call.Target.(SecretHolder); ok {
		for i, s := range h.Secrets() {
			if s == "" {
				continue
			}
			if err := receipt.CheckSecret(s); err != nil {
				return nil, fmt.Errorf("retry: secret %d of the Target (%T): %w", i, call.Target, err)
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// scrubbed returns res with the secrets of d replaced in its body and kept
// headers: res itself when none was found, else a copy (res may be shared
// with the store).
func scrubbed(d *Dispatch, res *idempotency.StoredResult) *idempotency.StoredResult {
	if res == nil || len(d.secrets) == 0 {
		return res
	}
	red := d.red
	var hdr http.Header // a clone, made at the first change
	for k, vs := range res.Header {
		for i, v := range vs {
			if r := red.String(v); r != v {
				if hdr == nil {
					hdr = res.Header.Clone()
				}
				hdr[k][i] = r
			}
		}
	}
	body := red.Bytes(res.Body)
	if hdr == nil && (len(body) == 0 || &body[0] == &res.Body[0]) {
		return res
	}
	out := *res
	out.Body = body
	if hdr != nil {
		out.Header = hdr
	}
	return &out
}

// redactors caches a Redactor per set of secrets: building one costs
// microseconds, and a gateway sends the same few credential sets on every
// call. Bounded, since Call.Secrets may vary per call.
var redactors struct {
	sync.Mutex
	m map[string]receipt.Redactor
}

const maxCachedRedactors = 256

func redactorFor(secrets ...string) receipt.Redactor {
	id := strings.Join(secrets, "\x00")
	redactors.Lock()
	r, ok := redactors.m[id]
	redactors.Unlock()
	if ok {
		return r
	}
	r = receipt.NewRedactor(secrets...)
	redactors.Lock()
	if redactors.m == nil {
		redactors.m = make(map[string]receipt.Redactor)
	}
	if len(redactors.m) < maxCachedRedactors {
		redactors.m[id] = r
	}
	redactors.Unlock()
	return r
}

// scrubbedRecord is rec with its result scrubbed: rec itself when nothing
// changed, else a copy.
func scrubbedRecord(d *Dispatch, rec *idempotency.Record) *idempotency.Record {
	if rec == nil || rec.Result == nil {
		return rec
	}
	res := scrubbed(d, rec.Result)
	if res == rec.Result {
		return rec
	}
	out := *rec
	out.Result = res
	return &out
}

var _ SecretHolder = (*HTTPTarget)(nil)
