package redisstore

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

func miniClient(t *testing.T) (*miniredis.Miniredis, rueidis.Client) {
	t.Helper()
	mr := miniredis.RunT(t)
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return mr, client
}

// refusedOptions are Options that New must refuse, each with what the error
// must say.
var refusedOptions = []struct {
	want string
	o    Options
}{
	{"Lease: must not be negative", Options{Lease: -time.Second}},
	{"Retention: must not be negative", Options{Retention: -time.Hour}},
	{"WaitTimeout: must not be negative", Options{WaitTimeout: -time.Millisecond}},
	{"ReadTimeout: must not be negative", Options{ReadTimeout: -1}},
	{"MigrationWait: must not be negative", Options{MigrationWait: -1}},
	{"MaxResultBytes: must not be negative", Options{MaxResultBytes: -1}},
	{"MaxResultBytes: at most 67108864", Options{MaxResultBytes: 64<<20 + 1}},
	{"WaitReplicas: must not be negative", Options{WaitReplicas: -1}},
	{"Lease: must be at least 1ms", Options{Lease: time.Microsecond}},
	{"WaitTimeout: must be at least 1ms", Options{WaitTimeout: time.Microsecond}},
	{"Retention: must be at least 2 times the lease 1m0s", Options{Lease: time.Minute, Retention: time.Minute}},
	{"Retention: must be at least 2 times the lease 1m0s", Options{Lease: time.Minute, Retention: 2*time.Minute - 1}},
	{"Retention: must be at least 2 times the lease 10s", Options{Retention: 10 * time.Second}}, // against the default lease
	{"UnknownRetention: must not be negative", Options{UnknownRetention: -time.Second}},
	{"UnknownRetention: must be at least the retention 24h0m0s", Options{UnknownRetention: time.Hour}},
	{"UnknownRetention: must be at least the retention 48h0m0s", Options{Retention: 48 * time.Hour, UnknownRetention: 48*time.Hour - time.Second}},
	{"Retention: must be at least 2 times the lease 13h0m0s", Options{Lease: 13 * time.Hour}}, // the default retention
	{"must be at least 2 times the lease", Options{Lease: 1 << 62, Retention: math.MaxInt64}}, // 2*Lease overflows
	{"at most half the lease", Options{WaitReplicas: 1, Lease: time.Second, WaitTimeout: 600 * time.Millisecond}},
	{"at most half the lease", Options{WaitReplicas: 1, Lease: time.Hour, WaitTimeout: 1 << 62}}, // 2*WaitTimeout overflows
	{"braces", Options{Prefix: "{obol}:"}},
}

func TestOptionsRefused(t *testing.T) {
	_, client := miniClient(t)
	for _, c := range refusedOptions {
		o := c.o
		o.SkipEvictionCheck = true
		_, err := New(ctx, client, o)
		if !errors.Is(err, ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "redisstore: options: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want ErrInvalidConfig saying %q", c.o, err, c.want)
		}
	}
	for _, o := range []Options{
		{WaitReplicas: 1, Lease: time.Second, WaitTimeout: 500 * time.Millisecond}, // half the lease
		{Lease: time.Minute, Retention: 2 * time.Minute},                           // exactly two leases
		{Lease: 12 * time.Hour},  // the default retention, two leases
		{WaitTimeout: time.Hour}, // no WaitReplicas: the WAIT never runs
		{Lease: time.Millisecond, Retention: 2 * time.Millisecond},
		{Retention: time.Hour, UnknownRetention: time.Hour}, // unknown retention may equal retention
	} {
		if _, err := o.Resolve(); err != nil {
			t.Errorf("%+v refused: %v", o, err)
		}
		if o.WaitReplicas > 0 {
			continue // miniredis has no INFO replication; see TestWaitReplicas
		}
		o.SkipEvictionCheck = true
		if _, err := New(ctx, client, o); err != nil {
			t.Errorf("%+v refused: %v", o, err)
		}
	}
}

// TestUnknownRetentionDefault: the zero UnknownRetention is 7 days, or the
// retention when that is longer.
func TestUnknownRetentionDefault(t *testing.T) {
	for _, c := range []struct{ retention, want time.Duration }{
		{0, 7 * 24 * time.Hour},
		{time.Hour, 7 * 24 * time.Hour},
		{30 * 24 * time.Hour, 30 * 24 * time.Hour},
	} {
		o, err := Options{Retention: c.retention}.Resolve()
		if err != nil || o.UnknownRetention != c.want {
			t.Errorf("retention %v: unknown retention %v, %v; want %v", c.retention, o.UnknownRetention, err, c.want)
		}
	}
}

// New refuses bad Options before it sends a single command: the server sees
// nothing, and a dead server makes no difference to the answer.
func TestOptionsRefusedBeforeAnyCommand(t *testing.T) {
	mr, client := miniClient(t)
	before := mr.CommandCount()
	for _, c := range refusedOptions {
		o := c.o
		o.SkipEvictionCheck = false // would send CONFIG GET first otherwise
		if _, err := New(ctx, client, o); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("%+v: %v", c.o, err)
		}
	}
	if n := mr.CommandCount() - before; n != 0 {
		t.Fatalf("refused options sent %d commands", n)
	}
	// The count does move when New gets to talk to the server.
	if _, err := New(ctx, client, Options{SkipEvictionCheck: true}); err != nil {
		t.Fatal(err)
	}
	if mr.CommandCount() == before {
		t.Fatal("New sent nothing with valid options: the count above proves nothing")
	}

	mr.Close()
	dctx, cancel := context.WithTimeout(ctx, time.Minute) // a bound, never an assertion
	defer cancel()
	for _, c := range refusedOptions {
		if _, err := New(dctx, client, c.o); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v on a dead server: %v, want ErrInvalidConfig", c.o, err)
		}
	}
	if _, err := New(dctx, client, Options{}); err == nil || errors.Is(err, ErrInvalidConfig) {
		t.Errorf("valid options on a dead server: %v, want a connection error", err)
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

// TestOptionsFieldError: every refusal is an effectspec.FieldError naming the Go
// field, so a program that reads options from elsewhere can name its own
// field; the problem comes without the refused value.
func TestOptionsFieldError(t *testing.T) {
	for _, c := range []struct {
		o             Options
		field, reason string
	}{
		{Options{Lease: -time.Second}, "Lease", "must not be negative"},
		{Options{Lease: time.Microsecond}, "Lease", "must be at least 1ms"},
		{Options{Retention: 10 * time.Second}, "Retention", "must be at least 2 times the lease 10s"},
		{Options{UnknownRetention: time.Hour}, "UnknownRetention", "must be at least the retention 24h0m0s"},
		{Options{WaitReplicas: -1}, "WaitReplicas", "must not be negative"},
		{Options{WaitReplicas: 1, Lease: time.Second}, "WaitTimeout", "must be at most half the lease 1s"},
		{Options{MaxResultBytes: -1}, "MaxResultBytes", "must not be negative"},
		{Options{ReadTimeout: -1}, "ReadTimeout", "must not be negative"},
		{Options{MigrationWait: -1}, "MigrationWait", "must not be negative"},
	} {
		err := c.o.validate()
		var fe *effectspec.FieldError
		if !errors.As(err, &fe) || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v, want a FieldError wrapping ErrInvalidConfig", c.o, err)
			continue
		}
		if fe.Field != c.field || fe.Problem != c.reason {
			t.Errorf("%+v: field %q problem %q, want %q %q", c.o, fe.Field, fe.Problem, c.field, c.reason)
		}
	}
	err := Options{Prefix: "{obol}:"}.validate()
	var oe *effectspec.FieldError
	if !errors.As(err, &oe) || oe.Field != "Prefix" || !errors.Is(err, idempotency.ErrInvalidScope) || !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("bad prefix: %v, want a FieldError for Prefix wrapping idempotency.ErrInvalidScope", err)
	}
	// Validate and New agree: every refused case refuses, every accepted
	// one passes.
	for _, c := range refusedOptions {
		if err := c.o.validate(); !errors.As(err, &oe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: Validate %v, want %q", c.o, err, c.want)
		}
	}
}

// TestResolveDefaults: the zero Options resolve to the exported defaults,
// which a program that documents its own defaults may show.
func TestResolveDefaults(t *testing.T) {
	o, err := Options{}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	want := Options{Prefix: idempotency.DefaultPrefix, Retention: defaultRetention, UnknownRetention: defaultUnknownRetention,
		Lease: defaultLease, MaxResultBytes: defaultMaxResultBytes, WaitTimeout: defaultWaitTimeout, ReadTimeout: defaultReadTimeout,
		MigrationWait: defaultMigrationWait}
	if o != want {
		t.Errorf("resolved %+v, want %+v", o, want)
	}
	if defaultRetention/MinRetentionLeases < defaultLease || defaultUnknownRetention < defaultRetention {
		t.Error("the defaults break the bounds")
	}
	// Resolve is idempotent: resolved Options resolve to themselves.
	if again, err := o.Resolve(); err != nil || again != o {
		t.Errorf("resolved twice: %+v, %v", again, err)
	}
}

// validate is Resolve without the result.
func (o Options) validate() error {
	_, err := o.Resolve()
	return err
}
