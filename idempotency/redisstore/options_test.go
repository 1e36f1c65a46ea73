package redisstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency"
)

func TestOptionsRefused(t *testing.T) {
	mr := miniredis.RunT(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for want, o := range map[string]Options{
		"must exceed the lease":              {Lease: time.Minute, Retention: time.Minute},
		"lease 1µs: must be at least 1ms":    {Lease: time.Microsecond},
		"must not be negative":               {MaxResultBytes: -1},
		"at most half the lease":             {WaitReplicas: 1, Lease: time.Second, WaitTimeout: 600 * time.Millisecond},
		"braces":                             {Prefix: "{obol}:"},
		"wait timeout 1µs: must be at least": {WaitTimeout: time.Microsecond},
	} {
		o.SkipEvictionCheck = true
		_, err := New(ctx, client, o)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: err %v, want it to say %q", o, err, want)
		}
	}
	if _, err := New(ctx, client, Options{WaitReplicas: 1, Lease: time.Second, WaitTimeout: 500 * time.Millisecond, SkipEvictionCheck: true}); err != nil {
		t.Errorf("wait timeout of half the lease refused: %v", err)
	}
}

// A read-only call on a Redis that keeps answering LOADING (rueidis retries
// read-only commands on it until ctx ends) ends at ReadTimeout instead of
// hanging a caller whose ctx has no deadline.
func TestReadOnlyCallsAreBounded(t *testing.T) {
	mr := miniredis.RunT(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	st, err := New(ctx, client, Options{SkipEvictionCheck: true, ReadTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	mr.SetError("LOADING Redis is loading the dataset in memory")
	k := idempotency.NewKey()
	scope := idempotency.Scope{Workspace: "ws", Connection: "c", Tool: "t"}
	if _, err := st.Lookup(context.Background(), scope, k); !errors.Is(err, idempotency.ErrStoreUnavailable) {
		t.Errorf("Lookup: %v, want ErrStoreUnavailable", err)
	}
	if _, err := st.Ticket(context.Background(), idempotency.NewTicketID()); !errors.Is(err, idempotency.ErrStoreUnavailable) {
		t.Errorf("Ticket: %v, want ErrStoreUnavailable", err)
	}
	if _, _, err := st.Pin(context.Background(), "cap.send_email"); !errors.Is(err, idempotency.ErrStoreUnavailable) {
		t.Errorf("Pin: %v, want ErrStoreUnavailable", err)
	}
}
