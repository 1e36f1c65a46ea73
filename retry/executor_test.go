package retry

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/obol-gateway/obol/idempotency"
)

// vendor is a raw HTTP/1.1 server that counts the requests it read in full.
// serve decides what happens after the n-th request (from 0) of a
// connection has been read; it returns false to close the connection.
type vendor struct {
	ln       net.Listener
	scheme   string
	serve    func(c net.Conn, n int, req *http.Request) bool
	seen     atomic.Int64 // requests read in full
	accepted atomic.Int64 // connections accepted

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool // finish has begun: a connection accepted now is closed at once
	wg     sync.WaitGroup
	once   sync.Once
}

func newVendor(t *testing.T, tlsConf *tls.Config, serve func(c net.Conn, n int, req *http.Request) bool) *vendor {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	v := &vendor{ln: ln, scheme: "http", serve: serve, conns: map[net.Conn]bool{}}
	if tlsConf != nil {
		v.ln, v.scheme = tls.NewListener(ln, tlsConf), "https"
	}
	v.wg.Add(1)
	go v.acceptLoop()
	t.Cleanup(v.finish)
	return v
}

func (v *vendor) url(path string) string { return v.scheme + "://" + v.ln.Addr().String() + path }

func (v *vendor) acceptLoop() {
	defer v.wg.Done()
	for {
		c, err := v.ln.Accept()
		if err != nil {
			return
		}
		v.accepted.Add(1)
		v.mu.Lock()
		v.conns[c] = true
		if v.closed {
			// finish has already closed the others; a handler for this one
			// would wait for a client that may keep it idle.
			c.Close()
		}
		v.mu.Unlock()
		v.wg.Add(1)
		go v.handle(c)
	}
}

func (v *vendor) handle(c net.Conn) {
	defer v.wg.Done()
	defer c.Close()
	br := bufio.NewReader(c)
	for n := 0; ; n++ {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return
		}
		v.seen.Add(1)
		if !v.serve(c, n, req) {
			return
		}
	}
}

// finish stops the vendor and waits until every connection is done, so that
// seen is final.
func (v *vendor) finish() {
	v.once.Do(func() {
		v.ln.Close()
		v.mu.Lock()
		v.closed = true
		for c := range v.conns {
			c.Close()
		}
		v.mu.Unlock()
		v.wg.Wait()
	})
}

func respond(c net.Conn, req *http.Request, status int, body string) bool {
	if req.Method == "HEAD" {
		body = ""
	}
	_, err := fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Length: %d\r\n\r\n%s", status, http.StatusText(status), len(body), body)
	return err == nil
}

// dialCounter is an Executor.DialContext that counts dials.
type dialCounter struct{ n atomic.Int64 }

func (d *dialCounter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.n.Add(1)
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

func newRequest(t *testing.T, method, url, body string) *http.Request {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body) // http.NewRequest then sets GetBody
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Idempotency-Key", "idt_5c1f0a9e3b7d4c2a8e6f1b0d9c8a7e6f")
	return req
}

func phaseErr(t *testing.T, res Result, want Phase) {
	t.Helper()
	if res.Phase != want {
		t.Fatalf("phase = %q (status %d, err %v), want %q", res.Phase, res.Status, res.Err, want)
	}
	if want == Responded {
		if res.Err != nil {
			t.Fatalf("Responded with err %v", res.Err)
		}
		return
	}
	var e *Error
	if !errors.As(res.Err, &e) || e.Phase != want {
		t.Fatalf("err = %#v, want an *Error of phase %q", res.Err, want)
	}
}

func TestDoConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: the vendor sees nothing

	var e Executor
	res := e.Do(context.Background(), newRequest(t, "POST", "http://"+addr+"/charge", `{"amount":1}`))
	phaseErr(t, res, BeforeSend)
	if !errors.Is(res.Err, syscall.ECONNREFUSED) {
		t.Errorf("err %v does not wrap ECONNREFUSED", res.Err)
	}
	if got, want := res.Err.Error(), "retry: before_send: round trip: connection refused"; got != want {
		t.Errorf("err = %q, want %q", got, want)
	}
	if !errors.Is(res.Err, idempotency.ErrVendorUnreachable) {
		t.Errorf("err %v does not wrap idempotency.ErrVendorUnreachable", res.Err)
	}
}

// TestDoUnreachable: every failure before the transport hands the attempt a
// connection, while nothing stopped the attempt, is marked
// idempotency.ErrVendorUnreachable: a failed host lookup, a dial that timed
// out, a TLS handshake that failed (an untrusted certificate, a server that
// does not speak TLS). The vendor's handler never ran.
func TestDoUnreachable(t *testing.T) {
	var served atomic.Int64
	count := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served.Add(1) })
	tlsSrv := httptest.NewUnstartedServer(count)
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake errors it logs are expected
	tlsSrv.StartTLS()
	defer tlsSrv.Close()
	plain := httptest.NewServer(count)
	defer plain.Close()
	for _, tc := range []struct {
		name, url, reason string
		ex                *Executor
	}{
		{"host lookup", "http://vendor.example/charge", "host lookup failed", &Executor{DialContext: func(context.Context, string, string) (net.Conn, error) {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "vendor.example", IsNotFound: true}}
		}}},
		{"dial timeout", "http://vendor.example/charge", "timeout", &Executor{DialTimeout: 20 * time.Millisecond,
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				<-ctx.Done()
				return nil, &net.OpError{Op: "dial", Net: "tcp", Err: &timeoutErr{}}
			}}},
		{"untrusted certificate", tlsSrv.URL + "/charge", "tls certificate verification failed", &Executor{}},
		{"not TLS", strings.Replace(plain.URL, "http:", "https:", 1) + "/charge", "tls handshake failed", &Executor{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := tc.ex.Do(context.Background(), newRequest(t, "POST", tc.url, `{"amount":1}`))
			phaseErr(t, res, BeforeSend)
			var e *Error
			if !errors.Is(res.Err, idempotency.ErrVendorUnreachable) || !errors.As(res.Err, &e) || e.Reason != tc.reason {
				t.Errorf("err %v (reason %q), want idempotency.ErrVendorUnreachable, reason %q", res.Err, e.Reason, tc.reason)
			}
		})
	}
	if n := served.Load(); n != 0 {
		t.Errorf("the vendors served %d requests", n)
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestDoNotUnreachable: a before_send attempt that its context or send
// deadline stopped while it dialled, an invalid request, and a failure on
// a connection the attempt was given are not marked unreachable.
func TestDoNotUnreachable(t *testing.T) {
	hang := func(ctx context.Context, _, _ string) (net.Conn, error) {
		<-ctx.Done()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: ctx.Err()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	res := (&Executor{DialContext: hang}).Do(ctx, newRequest(t, "POST", "http://vendor.example/charge", `{}`))
	if res.Phase != BeforeSend || errors.Is(res.Err, idempotency.ErrVendorUnreachable) {
		t.Errorf("context ended while dialling: %+v, want before_send, not unreachable", res)
	}
	sctx := WithSendDeadline(context.Background(), time.Now().Add(20*time.Millisecond))
	res = (&Executor{DialContext: hang}).Do(sctx, newRequest(t, "POST", "http://vendor.example/charge", `{}`))
	if !errors.Is(res.Err, ErrSendDeadline) || errors.Is(res.Err, idempotency.ErrVendorUnreachable) {
		t.Errorf("send deadline while dialling: %+v, want ErrSendDeadline, not unreachable", res)
	}
	v := newVendor(t, nil, func(net.Conn, int, *http.Request) bool { return true })
	bad := newRequest(t, "POST", v.url("/charge"), `{}`)
	bad.Method = "BAD METHOD"
	res = (&Executor{}).Do(context.Background(), bad)
	if !errors.Is(res.Err, idempotency.ErrInvalidRequest) || errors.Is(res.Err, idempotency.ErrVendorUnreachable) {
		t.Errorf("invalid method: %+v, want ErrInvalidRequest, not unreachable", res)
	}
	v.finish()
	closed := newVendor(t, nil, func(net.Conn, int, *http.Request) bool { return false })
	res = (&Executor{}).Do(context.Background(), newRequest(t, "POST", closed.url("/charge"), `{}`))
	if res.Phase != PostSend || errors.Is(res.Err, idempotency.ErrVendorUnreachable) {
		t.Errorf("closed after reading: %+v, want post_send, not unreachable", res)
	}
	closed.finish()
}

func TestDoVendorClosesWithoutAnswer(t *testing.T) {
	v := newVendor(t, nil, func(net.Conn, int, *http.Request) bool { return false })
	var dials dialCounter
	e := Executor{DialContext: dials.dial}
	res := e.Do(context.Background(), newRequest(t, "POST", v.url("/charge"), `{"amount":1}`))
	phaseErr(t, res, PostSend)
	v.finish()
	if got := v.seen.Load(); got != 1 {
		t.Errorf("vendor saw %d requests, want 1", got)
	}
	if got := dials.n.Load(); got != 1 {
		t.Errorf("%d dials, want 1", got)
	}
}

// keepAliveThenClose answers the first request of each connection with
// keep-alive and reads the second one in full, then closes without an answer.
func keepAliveThenClose(c net.Conn, n int, req *http.Request) bool {
	if n == 0 {
		return respond(c, req, 200, "first")
	}
	return false
}

// TestDoKeepAliveClosedAfterRead: the vendor reads the request on a pooled
// connection and closes it. net/http would re-send each of these requests
// on a new connection (see TestHiddenRetryControl); the Executor reports
// post_send and the vendor saw it once.
func TestDoKeepAliveClosedAfterRead(t *testing.T) {
	cert := newCert(t)
	for _, tc := range []struct{ method, body string }{
		{"POST", `{"amount":1}`}, // GetBody set by http.NewRequest
		{"POST", ""},
		{"PUT", `{}`},
		{"GET", ""},
		{"HEAD", ""},
		{"DELETE", ""},
	} {
		for _, secure := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s_body%d_tls%v", tc.method, len(tc.body), secure), func(t *testing.T) {
				var serverConf *tls.Config
				e := Executor{}
				if secure {
					serverConf, e.TLSClientConfig = cert.server, cert.client
				}
				v := newVendor(t, serverConf, keepAliveThenClose)
				var dials dialCounter
				e.DialContext = dials.dial

				phaseErr(t, e.Do(context.Background(), newRequest(t, tc.method, v.url("/first"), "")), Responded)
				res := e.Do(context.Background(), newRequest(t, tc.method, v.url("/second"), tc.body))
				phaseErr(t, res, PostSend)
				e.CloseIdleConnections()
				v.finish()
				if got := v.seen.Load(); got != 2 {
					t.Errorf("vendor saw %d requests, want 2", got)
				}
				if got := dials.n.Load(); got != 1 {
					t.Errorf("%d dials, want 1 (no new connection for a re-send)", got)
				}
			})
		}
	}
}

// TestHiddenRetryControl shows that the vendor of
// TestDoKeepAliveClosedAfterRead catches a hidden retry: a plain
// net/http Transport re-sends the second request.
func TestHiddenRetryControl(t *testing.T) {
	for _, method := range []string{"POST", "GET"} {
		t.Run(method, func(t *testing.T) {
			v := newVendor(t, nil, keepAliveThenClose)
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			for i, body := range []string{"", `{"amount":1}`} {
				resp, err := tr.RoundTrip(newRequest(t, method, v.url("/"), body))
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				if i == 0 && err != nil {
					t.Fatal(err)
				}
			}
			tr.CloseIdleConnections()
			v.finish()
			if got := v.seen.Load(); got != 3 {
				t.Errorf("vendor saw %d requests, want 3: the control no longer shows a hidden retry", got)
			}
		})
	}
}

// TestSecondConnectionSealed drives the transport into a hidden retry with
// a replayable request (nil body, Idempotency-Key) and shows that the
// backstop in attempt.gotConn still lets no byte reach a second connection.
func TestSecondConnectionSealed(t *testing.T) {
	for _, method := range []string{"GET", "POST"} {
		t.Run(method, func(t *testing.T) {
			v := newVendor(t, nil, keepAliveThenClose)
			var dials dialCounter
			e := Executor{DialContext: dials.dial}
			phaseErr(t, e.Do(context.Background(), newRequest(t, method, v.url("/"), "")), Responded)

			req := newRequest(t, method, v.url("/"), "") // nil body: replayable
			res := e.send(req.WithContext(context.Background()))
			phaseErr(t, res, PostSend)
			e.CloseIdleConnections()
			v.finish()
			if got := v.seen.Load(); got != 2 {
				t.Errorf("vendor saw %d requests, want 2", got)
			}
			if got := dials.n.Load(); got != 2 {
				t.Errorf("%d dials, want 2: the control case for a re-send is gone", got)
			}
		})
	}
}

// TestDoKeepAliveCloseRacesWrite: the vendor closes a keep-alive connection
// right after its response, racing the next request. Whatever the race
// gives, the vendor never saw more than the one attempt reported, a
// failed attempt never opened a second connection, and before_send means
// the vendor saw nothing.
func TestDoKeepAliveCloseRacesWrite(t *testing.T) {
	phases := map[Phase]int{}
	for range 40 {
		v := newVendor(t, nil, func(c net.Conn, n int, req *http.Request) bool {
			respond(c, req, 200, "ok")
			return false // close right after the response
		})
		var dials dialCounter
		e := Executor{DialContext: dials.dial}
		phaseErr(t, e.Do(context.Background(), newRequest(t, "POST", v.url("/"), "a")), Responded)
		res := e.Do(context.Background(), newRequest(t, "POST", v.url("/"), "b"))
		e.CloseIdleConnections()
		v.finish()
		phases[res.Phase]++
		second := v.seen.Load() - 1
		switch res.Phase {
		case Responded:
			if second != 1 || dials.n.Load() != 2 {
				t.Fatalf("responded: vendor saw %d of the second request over %d dials", second, dials.n.Load())
			}
		case BeforeSend, PostSend:
			if dials.n.Load() != 1 {
				t.Fatalf("%s: %d dials, want 1", res.Phase, dials.n.Load())
			}
			if second > 1 || (res.Phase == BeforeSend && second != 0) {
				t.Fatalf("%s: vendor saw %d of the second request", res.Phase, second)
			}
		default:
			t.Fatalf("phase %q", res.Phase)
		}
	}
	t.Logf("phases over 40 races: %v", phases)
}

func TestDoRedirectNotFollowed(t *testing.T) {
	var first, next atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/next" {
			next.Add(1)
			return
		}
		first.Add(1)
		http.Redirect(w, r, "/next", http.StatusTemporaryRedirect)
	}))
	defer srv.Close()
	var e Executor
	defer e.CloseIdleConnections()
	for _, method := range []string{"POST", "GET"} {
		res := e.Do(context.Background(), newRequest(t, method, srv.URL+"/charge", ""))
		phaseErr(t, res, Responded)
		if res.Status != http.StatusTemporaryRedirect || res.Header.Get("Location") != "/next" {
			t.Errorf("%s: status %d, Location %q; want 307 to /next", method, res.Status, res.Header.Get("Location"))
		}
	}
	if first.Load() != 2 || next.Load() != 0 {
		t.Errorf("vendor saw %d first and %d redirected requests, want 2 and 0", first.Load(), next.Load())
	}
}

// expiringCtx is a context whose deadline passes when expire is called, so
// that a test puts the deadline after what the vendor has seen instead of
// racing a timer against a loaded machine.
type expiringCtx struct {
	context.Context
	done   chan struct{}
	expire func()
}

func newExpiringCtx() *expiringCtx {
	c := &expiringCtx{Context: context.Background(), done: make(chan struct{})}
	c.expire = sync.OnceFunc(func() { close(c.done) })
	return c
}

func (c *expiringCtx) Done() <-chan struct{} { return c.done }

func (c *expiringCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// readWatch is a client connection that reports, on wanting, the first Read
// called after it has received want bytes: the client has consumed what the
// vendor sent and waits for more.
type readWatch struct {
	net.Conn
	want    int64
	got     atomic.Int64
	wanting chan struct{}
	once    sync.Once
}

func (c *readWatch) Read(p []byte) (int, error) {
	if c.got.Load() >= c.want {
		c.once.Do(func() { close(c.wanting) })
	}
	n, err := c.Conn.Read(p)
	c.got.Add(int64(n))
	return n, err
}

// TestDoSlowVendor: the deadline passes while the vendor holds the request
// (no answer) or the body (a partial one). Either is post_send, wrapping
// DeadlineExceeded, with the status when the header had arrived.
func TestDoSlowVendor(t *testing.T) {
	const partial = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial"
	release, read := make(chan struct{}), make(chan struct{}, 2)
	v := newVendor(t, nil, func(c net.Conn, n int, r *http.Request) bool {
		if r.URL.Path == "/slow-body" {
			io.WriteString(c, partial)
		}
		read <- struct{}{}
		<-release
		return false
	})
	t.Cleanup(func() { close(release) }) // before v.finish, which waits for the handlers
	for _, path := range []string{"/slow", "/slow-body"} {
		t.Run(path, func(t *testing.T) {
			watch := &readWatch{want: int64(len(partial)), wanting: make(chan struct{})}
			e := Executor{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				var d net.Dialer
				c, err := d.DialContext(ctx, network, addr)
				watch.Conn = c
				return watch, err
			}}
			ctx := newExpiringCtx()
			go func() {
				// The deadline passes once the vendor holds the request and,
				// for /slow-body, once the client read the partial answer and
				// waits for the rest. The timer only keeps a broken client
				// from hanging the test; it makes it fail instead.
				guard := time.After(time.Minute)
				select {
				case <-read:
					if path == "/slow-body" {
						select {
						case <-watch.wanting:
						case <-guard:
						}
					}
				case <-guard:
				}
				ctx.expire()
			}()
			res := e.Do(ctx, newRequest(t, "POST", v.url(path), `{"amount":1}`))
			ctx.expire()
			phaseErr(t, res, PostSend)
			if !errors.Is(res.Err, context.DeadlineExceeded) {
				t.Errorf("err %v does not wrap DeadlineExceeded", res.Err)
			}
			if wantStatus := map[string]int{"/slow": 0, "/slow-body": 200}[path]; res.Status != wantStatus {
				t.Errorf("status %d, want %d", res.Status, wantStatus)
			}
		})
	}
	if got := v.seen.Load(); got != 2 {
		t.Errorf("vendor saw %d requests, want 2", got)
	}
}

func TestDoBodyCut(t *testing.T) {
	v := newVendor(t, nil, func(c net.Conn, n int, r *http.Request) bool {
		io.WriteString(c, "HTTP/1.1 201 Created\r\nContent-Length: 100\r\n\r\npartial")
		return false
	})
	var e Executor
	res := e.Do(context.Background(), newRequest(t, "POST", v.url("/"), `{}`))
	phaseErr(t, res, PostSend)
	if res.Status != 201 || res.Body != nil {
		t.Errorf("status %d body %q, want 201 and no body", res.Status, res.Body)
	}
	if got, want := res.Err.Error(), "retry: post_send: read body: connection closed"; got != want {
		t.Errorf("err = %q, want %q", got, want)
	}
	v.finish()
	if got := v.seen.Load(); got != 1 {
		t.Errorf("vendor saw %d requests, want 1", got)
	}
}

func TestDoBodyLimit(t *testing.T) {
	const limit = 16
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscan(r.URL.Query().Get("n"), &n)
		if r.URL.Query().Get("chunked") != "" {
			w.(http.Flusher).Flush() // no Content-Length
		} else {
			w.Header().Set("Content-Length", fmt.Sprint(n))
		}
		w.Write(bytes.Repeat([]byte("x"), n))
	}))
	defer srv.Close()
	e := Executor{MaxResponseBytes: limit}
	defer e.CloseIdleConnections()
	head := e.Do(context.Background(), newRequest(t, "HEAD", srv.URL+"/?n=1048576", ""))
	phaseErr(t, head, Responded)
	if head.Truncated || len(head.Body) != 0 || head.Header.Get("Content-Length") != "1048576" {
		t.Errorf("HEAD: truncated %v, body of %d bytes, Content-Length %q", head.Truncated, len(head.Body), head.Header.Get("Content-Length"))
	}
	for _, tc := range []struct {
		n       int
		chunked bool
		trunc   bool
	}{
		{0, false, false}, {limit, false, false}, {limit + 1, false, true}, {1 << 20, false, true},
		{limit, true, false}, {limit + 1, true, true}, {1 << 20, true, true},
	} {
		url := fmt.Sprintf("%s/?n=%d", srv.URL, tc.n)
		if tc.chunked {
			url += "&chunked=1"
		}
		res := e.Do(context.Background(), newRequest(t, "GET", url, ""))
		phaseErr(t, res, Responded)
		if res.Truncated != tc.trunc || res.Status != 200 {
			t.Errorf("n=%d chunked=%v: truncated %v status %d, want %v and 200", tc.n, tc.chunked, res.Truncated, res.Status, tc.trunc)
		}
		if tc.trunc && res.Body != nil || !tc.trunc && len(res.Body) != tc.n {
			t.Errorf("n=%d chunked=%v: body of %d bytes (nil %v)", tc.n, tc.chunked, len(res.Body), res.Body == nil)
		}
	}
}

func TestDoCanceledBeforeDial(t *testing.T) {
	v := newVendor(t, nil, func(c net.Conn, n int, r *http.Request) bool { return respond(c, r, 200, "") })
	var dials dialCounter
	e := Executor{DialContext: dials.dial}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := e.Do(ctx, newRequest(t, "POST", v.url("/"), `{"amount":1}`))
	phaseErr(t, res, BeforeSend)
	if !errors.Is(res.Err, context.Canceled) {
		t.Errorf("err %v does not wrap context.Canceled", res.Err)
	}
	v.finish()
	if v.seen.Load() != 0 || dials.n.Load() != 0 {
		t.Errorf("vendor saw %d requests over %d dials, want none", v.seen.Load(), dials.n.Load())
	}
}

// TestDoCanceledAtGotConn cancels the attempt as soon as it has a pooled
// connection: the race with the write and the answer may give any phase,
// but the vendor never contradicts it.
func TestDoCanceledAtGotConn(t *testing.T) {
	phases := map[Phase]int{}
	for range 40 {
		v := newVendor(t, nil, func(c net.Conn, n int, r *http.Request) bool { return respond(c, r, 200, "") })
		var e Executor
		phaseErr(t, e.Do(context.Background(), newRequest(t, "POST", v.url("/"), "a")), Responded)
		ctx, cancel := context.WithCancel(context.Background())
		ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { cancel() }})
		res := e.Do(ctx, newRequest(t, "POST", v.url("/"), "b"))
		cancel()
		e.CloseIdleConnections()
		v.finish()
		phases[res.Phase]++
		second := v.seen.Load() - 1
		if second > 1 || res.Phase == BeforeSend && second != 0 || res.Phase == Responded && second != 1 {
			t.Fatalf("%s: vendor saw %d of the second request", res.Phase, second)
		}
	}
	t.Logf("phases over 40 cancellations: %v", phases)
}

func TestDoConcurrent(t *testing.T) {
	var seen atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen.Add(1)
		w.Write(b)
	}))
	defer srv.Close()
	var e Executor
	defer e.CloseIdleConnections()
	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				body := fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)
				res := e.Do(context.Background(), newRequest(t, "POST", srv.URL, body))
				if res.Phase != Responded || string(res.Body) != body {
					errs <- fmt.Errorf("phase %s body %q, want the echo of %q (err %v)", res.Phase, res.Body, body, res.Err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := seen.Load(); got != workers*each {
		t.Errorf("vendor saw %d requests, want %d", got, workers*each)
	}
}

// TestDoWire checks what reaches the vendor: HTTP/1.1 even when the vendor
// offers HTTP/2, connections reused, the caller's request untouched, and the
// body framed as net/http frames it, except for an empty POST (chunked).
func TestDoWire(t *testing.T) {
	type framing struct {
		te    string
		cl    int64
		hasCL bool
	}
	type seenReq struct {
		framing
		proto   int
		method  string
		body    string
		remote  string
		idemKey string
	}
	var mu sync.Mutex
	var got []seenReq
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, hasCL := r.Header["Content-Length"]
		mu.Lock()
		got = append(got, seenReq{framing{fmt.Sprint(r.TransferEncoding), r.ContentLength, hasCL},
			r.ProtoMajor, r.Method, string(b), r.RemoteAddr, r.Header.Get("Idempotency-Key")})
		mu.Unlock()
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	plain := srv.Client().Transport.(*http.Transport)
	plain.Protocols = new(http.Protocols)
	plain.Protocols.SetHTTP1(true)

	var dials dialCounter
	e := Executor{TLSClientConfig: plain.TLSClientConfig, DialContext: dials.dial}
	defer e.CloseIdleConnections()
	cases := []struct {
		method, body string
		chunked      bool // else framed as net/http frames it
	}{
		{"GET", "", false},
		{"HEAD", "", false},
		{"DELETE", "", false},
		{"OPTIONS", "", false},
		{"POST", `{"a":1}`, false},
		{"PUT", `{"a":1}`, false},
		{"POST", "", true},
		{"PATCH", "", true},
	}
	var want []framing
	for _, tc := range cases {
		resp, err := plain.RoundTrip(newRequest(t, tc.method, srv.URL+"/", tc.body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		mu.Lock()
		want = append(want, got[len(got)-1].framing)
		got = got[:0]
		mu.Unlock()
	}
	for _, tc := range cases {
		req := newRequest(t, tc.method, srv.URL+"/", tc.body)
		getBody := req.GetBody
		res := e.Do(context.Background(), req)
		phaseErr(t, res, Responded)
		if req.GetBody == nil != (getBody == nil) || req.Context() != context.Background() {
			t.Errorf("%s: Do modified the caller's request", tc.method)
		}
	}
	if len(got) != len(cases) {
		t.Fatalf("vendor saw %d requests, want %d", len(got), len(cases))
	}
	for i, tc := range cases {
		g := got[i]
		if g.proto != 1 || g.method != tc.method || g.body != tc.body || g.idemKey == "" {
			t.Errorf("%s: proto %d method %s body %q key %q", tc.method, g.proto, g.method, g.body, g.idemKey)
		}
		w := want[i]
		if tc.chunked {
			w = framing{"[chunked]", -1, false}
		}
		if g.framing != w {
			t.Errorf("%s body %q: framing %+v, want %+v", tc.method, tc.body, g.framing, w)
		}
		if g.remote != got[0].remote {
			t.Errorf("%s: new connection %s, want reuse of %s", tc.method, g.remote, got[0].remote)
		}
	}
	if dials.n.Load() != 1 {
		t.Errorf("%d dials, want 1", dials.n.Load())
	}
}

func TestDoInvalidRequest(t *testing.T) {
	var dials dialCounter
	e := Executor{DialContext: dials.dial}
	withCL := newRequest(t, "POST", "http://127.0.0.1:1/", "")
	withCL.ContentLength = 5
	badHeader := newRequest(t, "POST", "http://127.0.0.1:1/", "")
	badHeader.Header.Set("X-Token", "sk_live_secret\r\nInjected: 1")
	noHeader := newRequest(t, "POST", "http://127.0.0.1:1/", "")
	noHeader.Header = nil
	for name, req := range map[string]*http.Request{
		"nil":       nil,
		"no URL":    {Method: "GET", Header: http.Header{}},
		"scheme":    newRequest(t, "GET", "ftp://127.0.0.1:1/", ""),
		"no host":   newRequest(t, "GET", "http:///path", ""),
		"CONNECT":   newRequest(t, "CONNECT", "http://127.0.0.1:1/", ""),
		"CL":        withCL,
		"header":    badHeader,
		"no header": noHeader,
	} {
		res := e.Do(context.Background(), req)
		phaseErr(t, res, BeforeSend)
		if !errors.Is(res.Err, idempotency.ErrInvalidRequest) {
			t.Errorf("%s: err %v does not wrap idempotency.ErrInvalidRequest", name, res.Err)
		}
		if strings.Contains(res.Err.Error(), "secret") {
			t.Errorf("%s: err %q leaks a header value", name, res.Err)
		}
	}
	if dials.n.Load() != 0 {
		t.Errorf("%d dials for invalid requests", dials.n.Load())
	}
}

// TestErrorsHoldNoSecret puts credentials into the URL, a header and the
// vendor's reply, and finds them in no error message.
func TestErrorsHoldNoSecret(t *testing.T) {
	const secret = "sk_live_0123456789"
	v := newVendor(t, nil, func(c net.Conn, n int, r *http.Request) bool {
		switch r.URL.Path {
		case "/malformed":
			io.WriteString(c, "HTTP/1.1 "+secret+"\r\n\r\n")
		case "/header":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Echo "+secret+"\r\n\r\n")
		case "/cut":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n"+secret)
		}
		return false
	})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	refused := ln.Addr().String()
	ln.Close()
	var e Executor
	urls := []string{
		"http://user:" + secret + "@" + refused + "/" + secret + "?token=" + secret,
		"http://user:" + secret + "@" + v.ln.Addr().String() + "/malformed?token=" + secret,
		v.url("/header?token=" + secret),
		v.url("/cut?token=" + secret),
		v.url("/close?token=" + secret),
	}
	for _, u := range urls {
		req := newRequest(t, "POST", u, `{"card":"`+secret+`"}`)
		req.Header.Set("Authorization", "Bearer "+secret)
		res := e.Do(context.Background(), req)
		if res.Err == nil {
			t.Fatalf("%s: no error (phase %s)", u, res.Phase)
		}
		if msg := res.Err.Error(); strings.Contains(msg, secret) || strings.Contains(msg, "token") {
			t.Errorf("error %q holds a secret", msg)
		}
	}
}

func TestConnSeal(t *testing.T) {
	client, server := net.Pipe()
	c := &conn{Conn: client}
	a := &attempt{cancel: func(error) {}}
	a.gotConn(httptrace.GotConnInfo{Conn: tls.Client(c, &tls.Config{})}) // found under TLS
	if a.c != c {
		t.Fatal("gotConn did not find the conn under a *tls.Conn")
	}
	if p := a.settle(); p != BeforeSend {
		t.Errorf("nothing written: phase %s, want before_send", p)
	}
	if n, err := c.Write([]byte("late")); n != 0 || !errors.Is(err, errSealed) {
		t.Errorf("write after seal = %d, %v; want 0, errSealed", n, err)
	}
	if n, err := server.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("the vendor read %d bytes after the seal", n)
	}

	client, server = net.Pipe()
	go io.Copy(io.Discard, server)
	c = &conn{Conn: client}
	c.Write([]byte("handshake"))
	a = &attempt{cancel: func(error) {}}
	a.gotConn(httptrace.GotConnInfo{Conn: c})
	c.Write([]byte("P"))
	if p := a.settle(); p != PostSend {
		t.Errorf("a byte written after GotConn: phase %s, want post_send", p)
	}

	a = &attempt{cancel: func(error) {}}
	a.gotConn(httptrace.GotConnInfo{Conn: &net.TCPConn{}})
	if p := a.settle(); p != PostSend {
		t.Errorf("unknown conn: phase %s, want post_send", p)
	}
}

func BenchmarkDo(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte(`{"id":"ch_1","status":"succeeded"}`))
	}))
	defer srv.Close()
	body := []byte(`{"amount":1000,"currency":"usd"}`)
	b.Run("Executor", func(b *testing.B) {
		var e Executor
		defer e.CloseIdleConnections()
		b.ReportAllocs()
		for b.Loop() {
			req, _ := http.NewRequest("POST", srv.URL, bytes.NewReader(body))
			req.Header.Set("Idempotency-Key", "idt_5c1f0a9e3b7d4c2a8e6f1b0d9c8a7e6f")
			if res := e.Do(context.Background(), req); res.Phase != Responded {
				b.Fatal(res.Err)
			}
		}
	})
	// The plain transport, for the cost of the guards.
	b.Run("Transport", func(b *testing.B) {
		tr := &http.Transport{}
		defer tr.CloseIdleConnections()
		b.ReportAllocs()
		for b.Loop() {
			req, _ := http.NewRequest("POST", srv.URL, bytes.NewReader(body))
			req.Header.Set("Idempotency-Key", "idt_5c1f0a9e3b7d4c2a8e6f1b0d9c8a7e6f")
			resp, err := tr.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			io.ReadAll(resp.Body)
			resp.Body.Close()
		}
	})
}

type testCert struct{ server, client *tls.Config }

func newCert(t *testing.T) testCert {
	t.Helper()
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	return testCert{
		server: &tls.Config{Certificates: srv.TLS.Certificates},
		client: srv.Client().Transport.(*http.Transport).TLSClientConfig,
	}
}
