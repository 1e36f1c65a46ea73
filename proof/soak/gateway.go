package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// buildRefserver builds the reference server into dir, with the obolmutant
// tag when a broken store is asked for.
func buildRefserver(ctx context.Context, dir string, mutant bool) (string, error) {
	bin := filepath.Join(dir, "refserver")
	args := []string{"build", "-o", bin}
	if mutant {
		args = append(args, "-tags", "obolmutant")
	}
	args = append(args, "github.com/obol-gateway/obol/refserver")
	out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("soak: go build refserver: %v\n%s", err, out)
	}
	return bin, nil
}

// gateway is one refserver process on a fixed loopback port, so that a
// restart after kill -9 comes back where the clients look for it.
type gateway struct {
	idx     int
	bin     string
	cfgPath string
	redis   string
	env     []string
	logPath string

	mu   sync.Mutex
	base string // http://127.0.0.1:port; a restart may move it
	cmd  *exec.Cmd
	done chan struct{}
}

// freePort picks a free loopback port below the kernel's ephemeral range: a
// gateway restarts on its port after kill -9, and a port from the
// ephemeral range may meanwhile be the local end of some outgoing
// connection (a client's, the proxy's), which would keep it from binding.
func freePort() (int, error) {
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 11000 {
				lo = n
			}
		}
	}
	for range 100 {
		port := 10000 + rand.IntN(lo-10000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			l.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("soak: no free port below %d after 100 tries", lo)
}

// start runs the process and waits until it listens. A start may fail
// while Redis is failing over (a promoted master without a replica fails
// the wait_replicas check): the caller retries.
func (g *gateway) start() error {
	logf, err := os.OpenFile(g.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own copy
	cmd := exec.Command(g.bin, "-addr", strings.TrimPrefix(g.url(), "http://"), "-config", g.cfgPath, "-redis", g.redis)
	cmd.Env = append(os.Environ(), g.env...)
	cmd.Stderr = logf
	// Its own process group, so that a terminal's Ctrl-C reaches only the
	// soak, which then kills every gateway itself; and killed with the soak
	// if the soak dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("soak: start gateway %d: %w", g.idx, err)
	}
	done := make(chan struct{})
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		once := sync.Once{}
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on ") {
				once.Do(func() { close(listening) })
			}
		}
	}()
	go func() { _ = cmd.Wait(); close(done) }()
	g.mu.Lock()
	g.cmd, g.done = cmd, done
	g.mu.Unlock()
	select {
	case <-listening:
		return nil
	case <-done:
		tail := g.logTail()
		if strings.Contains(tail, "address already in use") {
			// A connection of the killed process may hold the port for a
			// while (FIN_WAIT): move to another one.
			if port, err := freePort(); err == nil {
				g.mu.Lock()
				g.base = fmt.Sprintf("http://127.0.0.1:%d", port)
				g.mu.Unlock()
			}
		}
		return fmt.Errorf("soak: gateway %d exited during start-up: %s", g.idx, tail)
	case <-time.After(60 * time.Second):
		g.kill()
		return fmt.Errorf("soak: gateway %d did not listen within 60s (see %s)", g.idx, g.logPath)
	}
}

// logTail is the last line of the gateway's log.
func (g *gateway) logTail() string {
	b, _ := os.ReadFile(g.logPath)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// startRetrying starts the gateway, retrying for up to a minute.
func (g *gateway) startRetrying(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := g.start()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// kill sends SIGKILL to the gateway's process group and waits for it:
// nothing is flushed or finalized. Killing a stopped gateway does nothing.
func (g *gateway) kill() {
	g.mu.Lock()
	cmd, done := g.cmd, g.done
	g.cmd = nil
	g.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// stop shuts the gateway down with SIGTERM (it lets calls in flight
// finish), and kills it after grace.
func (g *gateway) stop(grace time.Duration) {
	g.mu.Lock()
	cmd, done := g.cmd, g.done
	g.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
	}
	g.kill()
}

// url is the gateway's base URL.
func (g *gateway) url() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.base
}

func (g *gateway) running() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cmd != nil
}
