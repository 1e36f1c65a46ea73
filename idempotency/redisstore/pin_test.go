package redisstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
)

// checkPins runs the pin life cycle on s, whose client is c: absent, seeded
// by InitPin, kept by a second InitPin, moved by SetPin, stored without TTL
// under {prefix}pin:{capability}.
func checkPins(t *testing.T, s *Store, c rueidis.Client) {
	t.Helper()
	ctx := context.Background()
	const capName = "cap.send_email"
	if p, ok, err := s.Pin(ctx, capName); err != nil || ok || p != "" {
		t.Fatalf("Pin before any: %q %v %v, want absent", p, ok, err)
	}
	if p, err := s.InitPin(ctx, capName, "email.a"); err != nil || p != "email.a" {
		t.Fatalf("InitPin on an absent pin: %q %v, want email.a", p, err)
	}
	if prev, err := s.SetPin(ctx, capName, "email.b"); err != nil || prev != "email.a" {
		t.Fatalf("SetPin: previous %q %v, want email.a", prev, err)
	}
	// A restart with the configured pin keeps the operator's change.
	if p, err := s.InitPin(ctx, capName, "email.a"); err != nil || p != "email.b" {
		t.Fatalf("InitPin over a stored pin: %q %v, want email.b", p, err)
	}
	if p, ok, err := s.Pin(ctx, capName); err != nil || !ok || p != "email.b" {
		t.Fatalf("Pin: %q %v %v, want email.b", p, ok, err)
	}
	key := s.prefix + "pin:" + capName
	if v, err := c.Do(ctx, c.B().Get().Key(key).Build()).ToString(); err != nil || v != "email.b" {
		t.Fatalf("GET %s: %q %v", key, v, err)
	}
	if ttl, err := c.Do(ctx, c.B().Pttl().Key(key).Build()).AsInt64(); err != nil || ttl != -1 {
		t.Fatalf("PTTL %s: %d %v, want -1 (no expiry)", key, ttl, err)
	}
	// Pins of two capabilities are independent.
	if p, ok, err := s.Pin(ctx, "cap.other"); err != nil || ok {
		t.Fatalf("Pin of another capability: %q %v %v", p, ok, err)
	}
}

func TestPinMiniredis(t *testing.T) {
	m := newMini(t, Options{Prefix: "t:"})
	checkPins(t, m.store, m.client)
}

func TestPinRealRedis(t *testing.T) {
	srv := redistest.Start(t)
	c := realClient(t, srv.Addr())
	checkPins(t, realStore(t, c, Options{Prefix: "t:"}), c)
}

func TestPinRealCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	c := realClient(t, cl.Addrs()...)
	checkPins(t, realStore(t, c, Options{}), c)
}

func TestPinRefusesBadNamesAndChangesNothing(t *testing.T) {
	m := newMini(t, Options{})
	ctx := context.Background()
	if _, err := m.store.SetPin(ctx, "cap.mail", "mail.a"); err != nil {
		t.Fatal(err)
	}
	before := m.snapshot(t)
	badCaps := []string{"", "cap.", "mail", "Cap.mail", "cap.{x}", "cap.a:b", "cap.a b", "cap.\x00", "cap." + strings.Repeat("a", 125)}
	for _, name := range badCaps {
		if _, _, err := m.store.Pin(ctx, name); !errors.Is(err, idempotency.ErrInvalidRequest) {
			t.Errorf("Pin(%q): %v, want ErrInvalidRequest", name, err)
		}
		if _, err := m.store.SetPin(ctx, name, "mail.b"); !errors.Is(err, idempotency.ErrInvalidRequest) {
			t.Errorf("SetPin(%q): %v, want ErrInvalidRequest", name, err)
		}
		if _, err := m.store.InitPin(ctx, name, "mail.b"); !errors.Is(err, idempotency.ErrInvalidRequest) {
			t.Errorf("InitPin(%q): %v, want ErrInvalidRequest", name, err)
		}
	}
	badProviders := []string{"", "cap.mail", "mail{b}", "mail:b", "mail\nb", strings.Repeat("m", 129)}
	for _, p := range badProviders {
		if _, err := m.store.SetPin(ctx, "cap.mail", p); !errors.Is(err, idempotency.ErrInvalidRequest) {
			t.Errorf("SetPin(provider %q): %v, want ErrInvalidRequest", p, err)
		} else if strings.Contains(err.Error(), p) && p != "" && p != "cap.mail" {
			t.Errorf("the error echoes the input: %v", err)
		}
		if _, err := m.store.InitPin(ctx, "cap.other", p); !errors.Is(err, idempotency.ErrInvalidRequest) {
			t.Errorf("InitPin(provider %q): %v, want ErrInvalidRequest", p, err)
		}
	}
	if after := m.snapshot(t); after != before {
		t.Errorf("refused calls changed the store:\n%s\nwas\n%s", after, before)
	}
	// The longest valid names are accepted.
	long := "cap." + strings.Repeat("a", 124)
	if _, err := m.store.SetPin(ctx, long, strings.Repeat("p", 128)); err != nil {
		t.Errorf("128-byte names: %v", err)
	}
}

func TestPinCorruptValue(t *testing.T) {
	m := newMini(t, Options{})
	ctx := context.Background()
	m.mr.Set("obol:pin:cap.mail", "not a {tool}")
	if _, _, err := m.store.Pin(ctx, "cap.mail"); !errors.Is(err, errCorruptRecord) || errors.Is(err, idempotency.ErrStoreUnavailable) {
		t.Errorf("Pin of a corrupt value: %v, want errCorruptRecord only", err)
	}
	if _, err := m.store.InitPin(ctx, "cap.mail", "mail.a"); !errors.Is(err, errCorruptRecord) {
		t.Errorf("InitPin over a corrupt value: %v, want errCorruptRecord", err)
	}
	if v, _ := m.mr.Get("obol:pin:cap.mail"); v != "not a {tool}" {
		t.Errorf("InitPin overwrote a stored value: %q", v)
	}
}

func TestPinStoreUnavailable(t *testing.T) {
	m := newMini(t, Options{})
	m.mr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var oe *unavailableError
	if _, _, err := m.store.Pin(ctx, "cap.mail"); !errors.Is(err, idempotency.ErrStoreUnavailable) || !errors.As(err, &oe) || oe.Op != "pin" {
		t.Errorf("Pin with Redis down: %v", err)
	}
	if _, err := m.store.SetPin(ctx, "cap.mail", "mail.b"); !errors.Is(err, idempotency.ErrStoreUnavailable) || !errors.As(err, &oe) || oe.Op != "setpin" {
		t.Errorf("SetPin with Redis down: %v", err)
	}
	if _, err := m.store.InitPin(ctx, "cap.mail", "mail.b"); !errors.Is(err, idempotency.ErrStoreUnavailable) || !errors.As(err, &oe) || oe.Op != "initpin" {
		t.Errorf("InitPin with Redis down: %v", err)
	}
}
