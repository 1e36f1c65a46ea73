package retry

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// Phase says how far an attempt got on the wire.
type Phase string

const (
	// BeforeSend: proven that no request byte was written to a socket, or
	// (a Target's own proof) that the vendor refused the request before
	// running anything of it, as an MCP upstream's stale-session answer.
	BeforeSend Phase = "before_send"
	// PostSend: the attempt failed after request bytes may have left,
	// including timeouts and a response body cut short.
	PostSend Phase = "post_send"
	// Responded: the status, the headers and the whole body were read (or
	// the body was dropped for its size; see [Result].Truncated).
	Responded Phase = "responded"
)

// Result is what one attempt did.
type Result struct {
	Phase Phase
	// Status is the vendor's status code: set when Responded, and when
	// PostSend if the status line arrived before the failure; else 0.
	Status int
	// Header is the vendor's response header when Responded.
	Header http.Header
	// Body is the whole response body when Responded; nil when Truncated.
	// It is not decompressed (no Accept-Encoding is added): it holds the
	// bytes the vendor sent.
	Body []byte
	// Truncated reports that the body exceeded MaxResponseBytes. Status and
	// Header are kept and Body is nil. The rest of the body is not read:
	// the connection is closed rather than reused. The vendor did answer,
	// so the phase is Responded, but the response is not complete: a
	// caller must not treat it as a consistent answer.
	Truncated bool
	// Err is the failure of a [BeforeSend] or [PostSend] attempt, an [*Error].
	// It is nil when Responded.
	Err error
	// Outcome, when set, is the Target's own classification of a Responded
	// answer (an MCP upstream's: docs/DESIGN.md, "EffectSpec"); the
	// [Orchestrator] then does not classify Status by the spec. It is never
	// Accepted unless Responded.
	Outcome effectspec.Outcome
	// Retryable, set by a Target that classifies its own answer, says a
	// complete Responded answer may earn the one immediate second attempt
	// (the Target has checked that the vendor deduplicates on the key).
	Retryable bool
}

// DefaultMaxResponseBytes is the most of a vendor's response body an
// [Executor] reads when its MaxResponseBytes is not set.
const DefaultMaxResponseBytes = 10 << 20

// Default limits of an Executor.
const (
	defaultDialTimeout         = 5 * time.Second
	defaultTLSHandshakeTimeout = 10 * time.Second
	defaultIdleConnTimeout     = 90 * time.Second
	defaultMaxIdleConnsPerHost = 16
)

// An Executor makes exactly one outbound HTTP/1.1 attempt per Do and reports
// how far it got ([Phase]; conn.go proves before_send). It never
// retries, never follows a redirect and never lets its transport re-send a
// request.
//
// A [Target] of its own keeps one long-lived Executor and calls Do once per
// reserved attempt:
//
//	var exec retry.Executor // keep it: it pools keep-alive connections
//
//	res := exec.Do(ctx, req) // ctx: the dispatch deadline inside the lease
//	switch res.Phase {
//	case retry.BeforeSend: // proven: the vendor got no byte; may be attempted again
//	case retry.PostSend:   // the vendor may have seen it: the outcome is unknown
//	case retry.Responded:  // res.Status, res.Header, res.Body (or res.Truncated)
//	}
//
// net/http's Transport silently re-sends a request on a new connection when
// a reused keep-alive connection fails and the request is "replayable" (a
// GET, HEAD, OPTIONS or TRACE, or any request with an Idempotency-Key or
// X-Idempotency-Key header, whose body is nil, http.NoBody or rewindable
// through GetBody), and also when the transport wrote nothing to the
// connection and the body is empty or rewindable. The Executor closes each
// path:
//
//   - The request handed to the transport always has a non-nil body other
//     than http.NoBody, and no GetBody. Such a request is never replayable,
//     and its outgoing length is never zero, so the transport's own rules
//     retry nothing, not even when nothing was written. (The transport
//     judges "nothing written" by bytes the connection accepted; the
//     Executor does not rely on that judgement but leaves the second
//     attempt to the caller, after a proven BeforeSend.) A keep-alive
//     connection is still reused whenever the previous response was read
//     in full.
//   - An empty body is sent as Do says, never as a nil body.
//   - HTTP/1.1 only: no HTTP/2, whose transport re-sends on GOAWAY,
//     REFUSED_STREAM and some protocol errors. ALPN offers only http/1.1.
//   - Transport.RoundTrip, not http.Client: a redirect is a Responded
//     result with its 3xx status and Location header, never followed.
//   - No proxy: the environment's proxy settings are ignored, since a
//     forward proxy may retry on its own.
//   - One Transport per Executor, so no other code shares its pool.
//   - Should the transport still ask for a second connection within one
//     Do, that connection is sealed before the request is handed to it and
//     the attempt is canceled: at most one connection ever receives a byte
//     of an attempt.
//
// The zero Executor is ready to use. Its fields must not be changed after the
// first call to Do. An Executor is safe for concurrent use and keeps
// keep-alive connections between calls; it should be reused.
type Executor struct {
	// MaxResponseBytes limits the vendor's response body that is read. If
	// zero or negative, [DefaultMaxResponseBytes] (10 MiB). A body is
	// allocated once, of its Content-Length; without one it is read in
	// 64 KiB pieces joined at the end, so a call holds at most about twice
	// it while reading.
	MaxResponseBytes int64

	// DialTimeout bounds each dial, including one made by DialContext. If
	// zero, 5s.
	DialTimeout time.Duration

	// TLSHandshakeTimeout bounds each TLS handshake. If zero, 10s.
	TLSHandshakeTimeout time.Duration

	// TLSClientConfig configures TLS for https. If nil, the defaults of
	// crypto/tls. It is cloned, and its NextProtos is replaced by
	// "http/1.1": HTTP/2 is never negotiated.
	TLSClientConfig *tls.Config

	// IdleConnTimeout is how long an idle keep-alive connection is kept.
	// If zero, 90s.
	IdleConnTimeout time.Duration

	// MaxIdleConnsPerHost is how many idle keep-alive connections are kept
	// per host. If zero, 16.
	MaxIdleConnsPerHost int

	// DialContext dials the vendor (or a tunnel to it). If nil, a
	// net.Dialer with TCP keep-alive. Whatever it returns is wrapped to
	// count written bytes, so it must not write request bytes itself.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)

	once sync.Once
	tr   *http.Transport
}

func (e *Executor) transport() *http.Transport {
	e.once.Do(func() {
		dial := e.DialContext
		if dial == nil {
			dial = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
		}
		dialTimeout := orDefault(e.DialTimeout, defaultDialTimeout)
		var tlsConf *tls.Config
		if e.TLSClientConfig != nil {
			tlsConf = e.TLSClientConfig.Clone()
		} else {
			tlsConf = &tls.Config{}
		}
		tlsConf.NextProtos = []string{"http/1.1"}
		var protos http.Protocols
		protos.SetHTTP1(true)
		e.tr = &http.Transport{
			// No Proxy: the environment's proxy settings are ignored, since
			// a forward proxy could retry on its own.
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				ctx, cancel := context.WithTimeout(ctx, dialTimeout)
				defer cancel()
				nc, err := dial(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &conn{Conn: nc}, nil
			},
			TLSClientConfig:     tlsConf,
			TLSHandshakeTimeout: orDefault(e.TLSHandshakeTimeout, defaultTLSHandshakeTimeout),
			// A non-nil empty map and HTTP/1 alone: no HTTP/2, whose
			// transport re-sends on GOAWAY and REFUSED_STREAM.
			TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
			Protocols:           &protos,
			DisableCompression:  true,
			IdleConnTimeout:     orDefault(e.IdleConnTimeout, defaultIdleConnTimeout),
			MaxIdleConnsPerHost: orDefault(e.MaxIdleConnsPerHost, defaultMaxIdleConnsPerHost),
		}
	})
	return e.tr
}

func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// CloseIdleConnections closes the idle keep-alive connections. It does not
// interrupt attempts in flight.
func (e *Executor) CloseIdleConnections() {
	e.transport().CloseIdleConnections()
}

// Do makes exactly one attempt to send req and reads the whole response, up
// to MaxResponseBytes (see [Result].Truncated). It never returns an error of its
// own: every outcome is a [Result], and Result.Err, an [*Error], explains a
// [BeforeSend] or [PostSend] attempt.
//
// ctx governs the attempt (dial, write, wait and body read); req's own
// context is ignored. req is not modified, and its body is consumed and
// closed. req.GetBody is never called. A nil body, or http.NoBody, is sent
// as an empty body: with no body framing for GET, HEAD, DELETE and OPTIONS
// (exactly as net/http sends a nil body, since the transport probes such
// bodies and finds them empty), and as an empty chunked body
// (Transfer-Encoding: chunked) for POST, PUT, PATCH and other methods,
// since a Content-Length of 0 is only sent for a nil body, which the
// transport would treat as replayable.
func (e *Executor) Do(ctx context.Context, req *http.Request) Result {
	out, err := outgoing(ctx, req)
	if err != nil {
		return Result{Phase: BeforeSend, Err: newError(BeforeSend, "request", err)}
	}
	return e.send(out)
}

// outgoing returns the request that is handed to the transport: a shallow
// copy of req on ctx whose body is never nil and cannot be rewound. With
// such a body net/http's Transport retries nothing: isReplayable is false
// (the body is not nil, not NoBody, and there is no GetBody), and the
// nothing-written retry needs a zero outgoing length or a GetBody.
func outgoing(ctx context.Context, req *http.Request) (*http.Request, error) {
	if req == nil {
		return nil, fmt.Errorf("%w: nil request", idempotency.ErrInvalidRequest)
	}
	bad := func(what string) (*http.Request, error) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("%w: %s", idempotency.ErrInvalidRequest, what)
	}
	switch {
	case req.URL == nil:
		return bad("no URL")
	case req.URL.Scheme != "http" && req.URL.Scheme != "https":
		return bad("scheme is not http or https")
	case req.URL.Host == "":
		return bad("no host")
	case req.Method == http.MethodConnect:
		return bad("CONNECT")
	case req.ContentLength != 0 && (req.Body == nil || req.Body == http.NoBody):
		return bad("Content-Length without a body")
	case req.Header == nil:
		return bad("nil header")
	}
	out := req.WithContext(ctx)
	out.GetBody = nil
	if out.Body == nil || out.Body == http.NoBody {
		out.Body = emptyBody{}
		out.ContentLength = 0
	}
	return out, nil
}

// emptyBody is an empty body that is neither nil nor http.NoBody.
type emptyBody struct{}

func (emptyBody) Read([]byte) (int, error) { return 0, io.EOF }
func (emptyBody) Close() error             { return nil }

type sendDeadlineKey struct{}

// WithSendDeadline returns a copy of ctx that makes an Executor attempt
// start writing its request before t: an attempt that has not written a
// byte by then is stopped and reports [BeforeSend] with [ErrSendDeadline] (its
// connection is sealed, so no byte of it leaves later). An attempt that
// started writing in time goes on until ctx ends. The [Orchestrator] sets it
// to the lease deadline minus its safety margin, and ctx's deadline to the
// attempt's timeout: a renewed lease keeps the slot, never allows a send.
func WithSendDeadline(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, sendDeadlineKey{}, t)
}

// attempt tracks the connection of one Do.
type attempt struct {
	cancel context.CancelCauseFunc

	mu    sync.Mutex
	conns int   // GotConn calls
	c     *conn // the first connection, if it is ours
	base  int64 // c's attempted bytes at GotConn
	late  bool  // the send deadline passed before a byte was written
}

// sendDeadline stops the attempt if it has not written a byte yet. A
// connection handed over later is sealed in gotConn.
func (a *attempt) sendDeadline() {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.conns == 0:
	case a.c != nil && a.c.written() == a.base:
		a.c.seal()
	default:
		return // writing started in time (or on a conn we cannot seal)
	}
	a.late = true
	a.cancel(ErrSendDeadline)
}

// gotConn records the connection the request is about to be written to. A
// second connection would carry a hidden retry. The transport cannot ask for
// one for our requests, but if it ever did, the connection is sealed before
// the request is handed to it and the attempt is canceled, so at most one
// connection ever receives a byte of an attempt.
func (a *attempt) gotConn(info httptrace.GotConnInfo) {
	c := connOf(info.Conn)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.conns++
	if a.late && c != nil && a.conns == 1 {
		// The send deadline passed while this conn was being made: seal it
		// before the request reaches it.
		a.c, a.base = c, c.written()
		c.seal()
		return
	}
	if a.conns > 1 {
		if c != nil {
			c.seal()
		}
		a.cancel(errSecondConn)
		return
	}
	if c != nil {
		a.c, a.base = c, c.written()
	}
}

// connected reports whether the transport handed the attempt a connection:
// until it does, the dial, the host lookup and the TLS handshake are all
// that happened.
func (a *attempt) connected() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.conns > 0
}

// settle decides the phase of a failed round trip. It seals the connection,
// so a late write of the transport cannot contradict a before_send verdict.
func (a *attempt) settle() Phase {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.conns == 0:
		return BeforeSend // failed before a connection was handed over
	case a.c == nil:
		return PostSend // a connection we cannot account for
	case a.c.seal() != a.base:
		return PostSend
	}
	return BeforeSend
}

func (e *Executor) send(req *http.Request) Result {
	return e.exchange(req, readAll)
}

// exchange makes the one round trip of req and hands a response to read,
// which reads (or streams) its body: a Target whose answer arrives as a
// stream reads it as it comes, under the same rules of the round trip.
// read gets the Executor's response limit and returns Responded, or
// PostSend for a body that failed; it must not close resp.Body.
func (e *Executor) exchange(req *http.Request, read func(resp *http.Response, limit int64) Result) Result {
	ctx, cancel := context.WithCancelCause(req.Context())
	defer cancel(nil)
	a := &attempt{cancel: cancel}
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: a.gotConn})
	if by, ok := ctx.Value(sendDeadlineKey{}).(time.Time); ok {
		t := time.AfterFunc(time.Until(by), a.sendDeadline)
		defer t.Stop()
	}

	resp, err := e.transport().RoundTrip(req.WithContext(ctx))
	if err != nil {
		phase := a.settle()
		if cause := context.Cause(ctx); phase == BeforeSend && errors.Is(cause, ErrSendDeadline) {
			err = cause
		}
		switch {
		case isInvalidHeader(err):
			err = fmt.Errorf("%w: %w", idempotency.ErrInvalidRequest, err)
		case phase == BeforeSend && !a.connected() && ctx.Err() == nil:
			// No connection was handed over and nothing stopped the
			// attempt: the dial, the host lookup or the TLS handshake
			// failed. The vendor was not reached.
			err = fmt.Errorf("%w: %w", idempotency.ErrVendorUnreachable, err)
		}
		return Result{Phase: phase, Err: newError(phase, "round trip", err)}
	}
	defer resp.Body.Close()
	return read(resp, e.maxResponseBytes())
}

func (e *Executor) maxResponseBytes() int64 {
	if e.MaxResponseBytes <= 0 {
		return DefaultMaxResponseBytes
	}
	return e.MaxResponseBytes
}

// readAll reads the whole body of resp, up to limit.
func readAll(resp *http.Response, limit int64) Result {
	res := Result{Phase: Responded, Status: resp.StatusCode, Header: resp.Header}
	if resp.ContentLength > limit && resp.Body != http.NoBody { // HEAD, 204, 304 carry no body
		res.Truncated = true
		return res
	}
	length := resp.ContentLength
	if resp.Body == http.NoBody { // a HEAD's Content-Length describes no body
		length = 0
	}
	body, err := readBody(resp.Body, length, limit)
	switch {
	case err != nil:
		return Result{Phase: PostSend, Status: resp.StatusCode, Err: newError(PostSend, "read body", err)}
	case int64(len(body)) > limit:
		res.Truncated = true
	default:
		res.Body = body
	}
	return res
}

// readChunk is the piece a body of unknown length is read in.
const readChunk = 64 << 10

// readBody reads at most limit+1 bytes of r, allocating the body once: of
// its declared length when there is one (the transport fails a body that
// ends early or runs long), else read in pieces and joined at the end, so
// that a call holds at most about twice the body while it is read, never
// the up to three times of a slice grown by doubling.
func readBody(r io.Reader, length, limit int64) ([]byte, error) {
	if length >= 0 && length <= limit {
		body := make([]byte, length)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, err
		}
		// A body longer than declared is the transport's error to report.
		if n, err := r.Read(make([]byte, 1)); n > 0 || (err != nil && err != io.EOF) {
			if err == nil {
				err = errors.New("body longer than its Content-Length")
			}
			return nil, err
		}
		return body, nil
	}
	var (
		pieces [][]byte
		total  int64
	)
	for total <= limit {
		piece := make([]byte, min(readChunk, limit+1-total))
		n, err := fill(r, piece)
		pieces = append(pieces, piece[:n])
		total += int64(n)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if len(pieces) == 1 {
		return pieces[0], nil
	}
	body := make([]byte, 0, total)
	for _, p := range pieces {
		body = append(body, p...)
	}
	return body, nil
}

// fill reads into p until it is full or r fails; io.EOF is returned as it
// is, never turned into io.ErrUnexpectedEOF, which a cut body reports.
func fill(r io.Reader, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := r.Read(p[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// isInvalidHeader reports the transport's refusals of a request it cannot
// write: a header, trailer or method that is not valid HTTP.
func isInvalidHeader(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "net/http: invalid header") || strings.HasPrefix(msg, "net/http: invalid trailer") ||
		strings.HasPrefix(msg, "net/http: invalid method")
}
