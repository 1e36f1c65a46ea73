package refservertest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// HangUpVendor is a vendor on loopback that reads each request whole and
// then closes the connection without answering: the request may have
// acted, so the call's outcome is unknown. It counts the requests it got
// by Idempotency-Key header.
type HangUpVendor struct {
	*httptest.Server
	// HangUp is on from the start; while it is off, requests go to the
	// answer handler.
	HangUp atomic.Bool
	path   string
	answer http.Handler
	hungUp atomic.Int64
	mu     sync.Mutex
	byKey  map[string]int
}

// StartHangUpVendor starts a [HangUpVendor] that hangs up on requests to
// path (every path if ""), closed when the test ends. Requests it does not
// hang up on go to answer; nil answers 201 {"id":"obj_1"}.
func StartHangUpVendor(t testing.TB, path string, answer http.Handler) *HangUpVendor {
	t.Helper()
	if answer == nil {
		answer = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"id":"obj_1"}`)
		})
	}
	v := &HangUpVendor{path: path, answer: answer, byKey: map[string]int{}}
	v.HangUp.Store(true)
	v.Server = httptest.NewServer(http.HandlerFunc(v.serve))
	t.Cleanup(v.Close)
	return v
}

func (v *HangUpVendor) serve(w http.ResponseWriter, r *http.Request) {
	// The whole request is read first: the vendor may have acted on it.
	body, _ := io.ReadAll(r.Body)
	v.mu.Lock()
	v.byKey[r.Header.Get("Idempotency-Key")]++
	v.mu.Unlock()
	if !v.HangUp.Load() || v.path != "" && r.URL.Path != v.path {
		r.Body = io.NopCloser(bytes.NewReader(body))
		v.answer.ServeHTTP(w, r)
		return
	}
	v.hungUp.Add(1)
	if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
		c.Close()
	}
}

// HungUp is how many requests it hung up on.
func (v *HangUpVendor) HungUp() int { return int(v.hungUp.Load()) }

// Requests is how many requests carried Idempotency-Key key, whether hung
// up on or answered ("" counts those without one).
func (v *HangUpVendor) Requests(key string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.byKey[key]
}

// MostPerKey is the highest count of requests under one Idempotency-Key
// other than none.
func (v *HangUpVendor) MostPerKey() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	most := 0
	for k, n := range v.byKey {
		if k != "" {
			most = max(most, n)
		}
	}
	return most
}
