package brokertest

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Request is one request as a [Fake] read it.
type Request struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   []byte
}

// Fake is a broker that records every request, whole, before reply answers
// it. It is closed when the test ends.
type Fake struct {
	*httptest.Server
	mu    sync.Mutex
	reqs  []Request
	reply http.HandlerFunc
}

// NewFake starts a Fake answering with reply.
func NewFake(t testing.TB, reply http.HandlerFunc) *Fake {
	t.Helper()
	f := &Fake{reply: reply}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, Request{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), body})
		f.mu.Unlock()
		f.reply(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

// Requests returns the requests seen so far, in order.
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.reqs...)
}

// Answer replies status with a JSON body.
func Answer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// ResetAfterRead resets the connection (RST, not FIN) after the request was
// read: the broker may have acted, and no status came back.
func ResetAfterRead(w http.ResponseWriter, r *http.Request) {
	c, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	c.(*net.TCPConn).SetLinger(0)
	c.Close()
}
