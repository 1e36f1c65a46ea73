package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/internal/redistest"
)

func getHealth(t *testing.T, p *proc) (int, map[string]string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: time.Minute}).Get(p.base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, m
}

// TestHealthzSaysWhetherAClaimWouldSucceed: /healthz is 200 only when a
// claim could be written now; a Redis out of memory (noeviction refuses
// every claim) or turned replica is 503 with the reason, while reads still
// work there.
func TestHealthzSaysWhetherAClaimWouldSucceed(t *testing.T) {
	rs := redistest.Start(t)
	p := gatewayAt(t, rs.Addr(), newGateVendor(t).URL, 2*time.Second)
	if code, m := getHealth(t, p); code != 200 || m["status"] != "ok" {
		t.Fatalf("healthy: %d %v", code, m)
	}
	if _, err := rs.Do("CONFIG", "SET", "maxmemory", "1"); err != nil {
		t.Fatal(err)
	}
	if code, m := getHealth(t, p); code != 503 || m["reason"] != "out_of_memory" {
		t.Errorf("out of memory: %d %v, want 503 out_of_memory", code, m)
	}
	if _, err := rs.Do("CONFIG", "SET", "maxmemory", "0"); err != nil {
		t.Fatal(err)
	}
	if code, m := getHealth(t, p); code != 200 {
		t.Errorf("memory back: %d %v, want 200", code, m)
	}
	// The primary first copies rs (its replica, then a master), so that rs
	// turned its replica keeps its data: a replica of an empty primary
	// would lose it (store_data_lost).
	primary := redistest.Start(t)
	if _, err := primary.Do("REPLICAOF", "127.0.0.1", rs.Addr()[strings.LastIndex(rs.Addr(), ":")+1:]); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		info, err := primary.Do("INFO", "replication")
		if s, _ := info.(string); err == nil && strings.Contains(s, "master_link_status:up") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the primary did not copy rs: %v %v", info, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := primary.Do("REPLICAOF", "NO", "ONE"); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Do("REPLICAOF", "127.0.0.1", primary.Addr()[strings.LastIndex(primary.Addr(), ":")+1:]); err != nil {
		t.Fatal(err)
	}
	if code, m := getHealth(t, p); code != 503 || m["reason"] != "read_only" {
		t.Errorf("a replica: %d %v, want 503 read_only", code, m)
	}
	if _, err := rs.Do("REPLICAOF", "NO", "ONE"); err != nil {
		t.Fatal(err)
	}
	if code, m := getHealth(t, p); code != 200 {
		t.Errorf("a master again: %d %v, want 200", code, m)
	}
	rs.Kill()
	if code, m := getHealth(t, p); code != 503 || m["reason"] != "unreachable" {
		t.Errorf("Redis down: %d %v, want 503 unreachable", code, m)
	}
	// Back without its data (it persists nothing): the unreachable node has
	// the sentinels read again at once.
	rs.Restart()
	if code, m := getHealth(t, p); code != 503 || m["reason"] != "store_data_lost" {
		t.Errorf("Redis back empty: %d %v, want 503 store_data_lost", code, m)
	}
}

// TestDurabilityWarning: in production, a Redis that persists nothing is a
// loud warning at startup, and /healthz shows the persistence it found.
func TestDurabilityWarning(t *testing.T) {
	rs := redistest.Start(t) // save "" and appendonly no
	c, release, err := openStore(t.Context(), redisstore.Options{Prefix: "dw:", Retention: time.Hour, Lease: 10 * time.Second}, "redis://"+rs.Addr(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	var stderr, logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if got := checkDurability(t.Context(), c, false, effectspec.Production, log, &stderr); got != "none" {
		t.Errorf("durability %q, want none", got)
	}
	if !strings.Contains(stderr.String(), "persists NOTHING") || !strings.Contains(logs.String(), "Redis persists nothing") {
		t.Errorf("no loud warning in production:\nstderr %q\nlog %q", stderr.String(), logs.String())
	}
	// AOF from the start: turning it on at run time forks a rewrite that
	// may still write into the test's directory at cleanup.
	aof := redistest.Start(t, "--appendonly", "yes")
	c, release2, err := openStore(t.Context(), redisstore.Options{Prefix: "dw:", Retention: time.Hour, Lease: 10 * time.Second}, "redis://"+aof.Addr(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer release2()
	stderr.Reset()
	logs.Reset()
	if got := checkDurability(t.Context(), c, false, effectspec.Production, log, &stderr); got != "aof" || stderr.Len() != 0 || logs.Len() != 0 {
		t.Errorf("with AOF: %q, stderr %q, log %q; want aof and no warning", got, stderr.String(), logs.String())
	}
	var _ *redisstore.Store = c
}
