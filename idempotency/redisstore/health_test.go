package redisstore

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
)

func reasonOf(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var ue *idempotency.UnhealthyError
	if !errors.As(err, &ue) {
		t.Fatalf("health error %v is not an *idempotency.UnhealthyError", err)
	}
	return ue.Reason
}

// TestHealthFailsWhereClaimsFail: out of memory under noeviction, a
// read-only replica and an unreachable server each fail the health check,
// and a claim fails there too; a healthy server passes both.
func TestHealthFailsWhereClaimsFail(t *testing.T) {
	srv := redistest.Start(t)
	c := realClient(t, srv.Addr())
	s := realStore(t, c, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	claim := func() error {
		_, err := s.Claim(ctx, claimReq(idempotency.NewKey()))
		return err
	}
	if err := s.Health(ctx); err != nil {
		t.Fatalf("healthy server: %v", err)
	}

	// Out of memory: noeviction refuses writes, so claims fail.
	if _, err := srv.Do("CONFIG", "SET", "maxmemory", "1"); err != nil {
		t.Fatal(err)
	}
	if got := reasonOf(t, s.Health(ctx)); got != "out_of_memory" {
		t.Errorf("over maxmemory: health reason %q, want out_of_memory", got)
	}
	if claim() == nil {
		t.Error("a claim succeeded over maxmemory; the health check proves nothing")
	}
	if _, err := srv.Do("CONFIG", "SET", "maxmemory", "0"); err != nil {
		t.Fatal(err)
	}
	if err := s.Health(ctx); err != nil || claim() != nil {
		t.Fatalf("after the memory came back: health %v", err)
	}

	// A replica is read-only.
	primary := redistest.Start(t)
	if _, err := srv.Do("REPLICAOF", "127.0.0.1", strconv.Itoa(primary.Port())); err != nil {
		t.Fatal(err)
	}
	if got := reasonOf(t, s.Health(ctx)); got != "read_only" {
		t.Errorf("a replica: health reason %q, want read_only", got)
	}
	if claim() == nil {
		t.Error("a claim succeeded on a replica")
	}
	if _, err := srv.Do("REPLICAOF", "NO", "ONE"); err != nil {
		t.Fatal(err)
	}

	// Unreachable.
	srv.Stop()
	short, cancel2 := context.WithTimeout(ctx, time.Second)
	defer cancel2()
	if got := reasonOf(t, s.Health(short)); got != "unreachable" && got != "error" {
		t.Errorf("stopped server: health reason %q, want unreachable", got)
	}
}

func TestHealthOnCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 1)
	c := realClient(t, cl.Addrs()...)
	s := realStore(t, c, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := s.Health(ctx); err != nil {
		t.Fatalf("healthy cluster (replicas are read-only by design): %v", err)
	}
	if _, err := cl.Master(1).Do("CONFIG", "SET", "maxmemory", "1"); err != nil {
		t.Fatal(err)
	}
	if got := reasonOf(t, s.Health(ctx)); got != "out_of_memory" {
		t.Errorf("one master over maxmemory: health reason %q, want out_of_memory", got)
	}
}

func TestDurability(t *testing.T) {
	srv := redistest.Start(t)
	s := realStore(t, realClient(t, srv.Addr()), Options{})
	d, err := s.Describe(t.Context())
	if err != nil || d.Durability != "none" {
		t.Fatalf("save \"\" and appendonly no: %+v (%v), want none", d, err)
	}
	// Persistence from the start: turning AOF on at run time forks a
	// rewrite that may still write into the test's directory at cleanup.
	durable := redistest.Start(t, "--appendonly", "yes", "--save", "3600 1")
	s = realStore(t, realClient(t, durable.Addr()), Options{})
	d, err = s.Describe(t.Context())
	if err != nil || d.Durability != "aof+rdb" {
		t.Fatalf("appendonly yes, save 3600 1: %+v (%v), want aof+rdb", d, err)
	}
}

func TestHealthOnMiniredis(t *testing.T) {
	m := newMini(t, Options{})
	if err := m.store.Health(ctx); err != nil {
		t.Fatalf("miniredis: %v", err)
	}
	m.mr.SetError("LOADING Redis is loading the dataset in memory")
	if got := reasonOf(t, m.store.Health(ctx)); got != "loading" {
		t.Errorf("loading: health reason %q, want loading", got)
	}
}
