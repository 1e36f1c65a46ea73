package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
)

// runServer runs main's run in this process and returns its base URL (""
// when it exited first), its output, and its exit code channel.
func runServer(t *testing.T, args ...string) (base string, stdout, stderr *syncBuffer, exit chan int) {
	t.Helper()
	base, stdout, stderr, exit, _ = runServerStop(t, args...)
	return base, stdout, stderr, exit
}

// runServerStop is runServer that also returns what stops the server (as
// SIGTERM does).
func runServerStop(t *testing.T, args ...string) (base string, stdout, stderr *syncBuffer, exit chan int, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	exit = make(chan int, 1)
	go func() {
		exit <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), pw, stderr)
		pw.Close()
	}()
	lines := make(chan string, 64)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := pr.Read(buf)
			stdout.Write(buf[:n])
			for _, l := range strings.Split(string(buf[:n]), "\n") {
				lines <- l
			}
			if err != nil {
				close(lines)
				return
			}
		}
	}()
	for l := range lines {
		if _, rest, ok := strings.Cut(l, "listening on "); ok {
			base, _, _ = strings.Cut(rest, " ")
			break
		}
	}
	go func() {
		for range lines {
		}
	}()
	var once sync.Once
	code := 0
	stop = func() {
		once.Do(func() {
			cancel()
			if base != "" {
				code = <-exit
				exit <- code
			}
		})
	}
	t.Cleanup(stop)
	return base, stdout, stderr, exit, stop
}

// TestRedisURLFromEnvironment: OBOL_REDIS_URL gives the -redis URL, so a
// password never has to be in argv; -redis wins when both are set; a bad
// URL from either place is reported without its password.
func TestRedisURLFromEnvironment(t *testing.T) {
	rs := redistest.Start(t)

	t.Run("environment", func(t *testing.T) {
		t.Setenv(envRedisURL, "redis://"+rs.Addr())
		base, stdout, stderr, _ := runServer(t)
		if base == "" {
			t.Fatalf("did not start:\n%s", stderr.String())
		}
		if strings.Contains(stdout.String(), "EMBEDDED") || strings.Contains(stderr.String(), "NOT DURABLE") {
			t.Errorf("embedded store with %s set:\n%s%s", envRedisURL, stdout.String(), stderr.String())
		}
		k := idempotency.NewKey().String()
		call(t, newSession(t, base, demoKeyAcme, k), "payments.create_charge", map[string]any{"amount": 1}, "").wantOutcome(t, "accepted", false)
		keys, err := rs.Do("KEYS", "*"+strings.TrimPrefix(k, "idt_")+"*")
		if list, _ := keys.([]any); err != nil || len(list) == 0 {
			t.Errorf("the call's record is not in the Redis of %s: %v %v", envRedisURL, keys, err)
		}
	})

	t.Run("flag wins", func(t *testing.T) {
		t.Setenv(envRedisURL, "redis://:env-password-zz91@127.0.0.1:1")
		base, _, stderr, _ := runServer(t, "-redis", "redis://"+rs.Addr())
		if base == "" {
			t.Fatalf("did not start:\n%s", stderr.String())
		}
		if !strings.Contains(stderr.String(), envRedisURL+" is ignored") || strings.Contains(stderr.String(), "env-password-zz91") {
			t.Errorf("stderr:\n%s", stderr.String())
		}
	})

	t.Run("bad URL hides its password", func(t *testing.T) {
		t.Setenv(envRedisURL, "redis://:env-password-zz91@127.0.0.1:1/x?y=%zz")
		base, stdout, stderr, exit := runServer(t)
		if base != "" {
			t.Fatal("started on a bad URL")
		}
		if code := <-exit; code != 1 {
			t.Errorf("exit %d", code)
		}
		if out := stdout.String() + stderr.String(); strings.Contains(out, "env-password-zz91") || !strings.Contains(out, "redis") {
			t.Errorf("output:\n%s", out)
		}
	})
}

// TestProfiles: -cpuprofile and -exectrace write a CPU profile and an
// execution trace of serving, complete once the server has shut down; a
// path that cannot be created stops the server before it listens.
func TestProfiles(t *testing.T) {
	dir := t.TempDir()
	cpu, exe := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "exec.trace")
	base, _, stderr, exit, stop := runServerStop(t, "-cpuprofile", cpu, "-exectrace", exe)
	if base == "" {
		t.Fatalf("did not start:\n%s", stderr.String())
	}
	call(t, newSession(t, base, demoKeyAcme, idempotency.NewKey().String()), "payments.create_charge", map[string]any{"amount": 1}, "").wantOutcome(t, "accepted", false)
	stop()
	if code := <-exit; code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	// A CPU profile is gzipped protobuf; an execution trace starts with
	// its Go version header.
	if b, err := os.ReadFile(cpu); err != nil || len(b) < 20 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("CPU profile: %d bytes, %v", len(b), err)
	} else if zr, err := gzip.NewReader(bytes.NewReader(b)); err != nil {
		t.Errorf("CPU profile: %v", err)
	} else if _, err := io.Copy(io.Discard, zr); err != nil {
		t.Errorf("CPU profile cut short: %v", err)
	}
	if b, err := os.ReadFile(exe); err != nil || !bytes.HasPrefix(b, []byte("go 1.")) || len(b) < 1000 {
		t.Errorf("execution trace: %d bytes, %v", len(b), err)
	}

	base, _, stderr, exit, _ = runServerStop(t, "-cpuprofile", filepath.Join(dir, "missing", "cpu.pprof"))
	if base != "" {
		t.Fatal("started with a profile it cannot write")
	}
	if code := <-exit; code != 1 || !strings.Contains(stderr.String(), "-cpuprofile") {
		t.Errorf("exit %d:\n%s", code, stderr.String())
	}
}
