package retry_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/obol-gateway/obol/retry"
)

// TestSendDeadlineStopsAnUnsentAttempt: a dial that completes only after the
// send deadline never carries the request: before_send, the vendor read
// nothing.
func TestSendDeadlineStopsAnUnsentAttempt(t *testing.T) {
	var seen atomic.Int64
	v := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Add(1)
		w.WriteHeader(201)
	}))
	defer v.Close()
	for _, name := range []string{"dial in progress", "conn handed over late"} {
		t.Run(name, func(t *testing.T) {
			release := make(chan struct{})
			ex := &retry.Executor{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				if name == "dial in progress" {
					<-ctx.Done() // the send deadline cancels the dial
					return nil, ctx.Err()
				}
				<-release // the dial finishes after the deadline passed
				return (&net.Dialer{}).DialContext(context.Background(), network, addr)
			}}
			by := time.Now().Add(20 * time.Millisecond)
			ctx, cancel := context.WithTimeout(retry.WithSendDeadline(context.Background(), by), 5*time.Second)
			defer cancel()
			go func() {
				time.Sleep(time.Until(by) + 50*time.Millisecond)
				close(release)
			}()
			req, _ := http.NewRequest(http.MethodPost, v.URL, strings.NewReader(`{}`))
			res := ex.Do(ctx, req)
			if res.Phase != retry.BeforeSend || !errors.Is(res.Err, retry.ErrSendDeadline) {
				t.Fatalf("result %+v, want before_send with ErrSendDeadline", res)
			}
			if seen.Load() != 0 {
				t.Fatalf("vendor saw %d requests", seen.Load())
			}
		})
	}
}

// TestSendDeadlineLetsAStartedAttemptFinish: once the request was written in
// time, the attempt goes on past the send deadline until its ctx ends.
func TestSendDeadlineLetsAStartedAttemptFinish(t *testing.T) {
	by := time.Now().Add(50 * time.Millisecond)
	v := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		time.Sleep(time.Until(by) + 50*time.Millisecond) // answer after the send deadline
		w.WriteHeader(201)
		io.WriteString(w, `{"ok":true}`)
	}))
	defer v.Close()
	ctx, cancel := context.WithTimeout(retry.WithSendDeadline(context.Background(), by), time.Minute)
	defer cancel()
	req, _ := http.NewRequest(http.MethodPost, v.URL, strings.NewReader(`{}`))
	res := (&retry.Executor{}).Do(ctx, req)
	if res.Phase != retry.Responded || res.Status != 201 || string(res.Body) != `{"ok":true}` {
		t.Fatalf("result %+v, want the vendor's 201", res)
	}
}
