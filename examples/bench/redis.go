package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency/redisstore"
)

// redisProc is the private redis-server of -redis-server.
type redisProc struct {
	addr   string
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// startRedis starts redis-server on a free loopback port with persistence
// off, retrying with another port when it loses the race for one.
func startRedis(ctx context.Context, bin string) (*redisProc, error) {
	path, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	dir, err := os.MkdirTemp("", "obol-bench-redis-")
	if err != nil {
		return nil, err
	}
	var last error
	for range 5 {
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		p, err := spawnRedis(ctx, path, dir, port)
		if err == nil {
			return p, nil
		}
		last = err
	}
	os.RemoveAll(dir)
	return nil, last
}

func spawnRedis(ctx context.Context, path, dir string, port int) (*redisProc, error) {
	p := &redisProc{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, exited: make(chan struct{})}
	var out bytes.Buffer
	p.cmd = exec.Command(path, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--maxmemory-policy", "noeviction")
	p.cmd.Stdout, p.cmd.Stderr = &out, &out
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	go func() { p.cmd.Wait(); close(p.exited) }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if pingRedis(p.addr) == nil {
			return p, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("redis-server on port %d exited: %s", port, strings.TrimSpace(lastLine(out.String())))
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("redis-server on port %d: no PONG within 15s", port)
		}
	}
}

func (p *redisProc) stop() {
	select {
	case <-p.exited:
	default:
		p.cmd.Process.Kill()
		<-p.exited
	}
	os.RemoveAll(p.dir)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func pingRedis(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// moduleRoot finds the directory of this module's go.mod above the working
// directory: the harness reads the claim script from the source tree and
// builds refserver from it.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("module github.com/obol-gateway/obol\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run the harness inside the obol module (go run ./examples/bench from the repository root)")
		}
		dir = parent
	}
}

// env is what every row shares: one Redis, one rueidis client and the Store
// on it, and the claim script as Redis runs it.
type env struct {
	o            *options
	client       rueidis.Client
	store        *redisstore.Store
	claimSHA     string
	redisVersion string
}

func openEnv(ctx context.Context, o *options) (*env, error) {
	// No client-side caching, which is of no use to scripts, as refserver;
	// but auto-pipelined (rueidis' default), the configuration for a
	// Redis-bound embedding: refserver trades that for latency with pooled
	// connections (row 4 measures it).
	client, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  []string{o.redisHostPort},
		SelectDB:     o.db,
		DisableCache: true,
	})
	if err != nil {
		return nil, fmt.Errorf("redis %s: %w", o.redisHostPort, err)
	}
	e := &env{o: o, client: client}
	if !o.ownRedis {
		n, err := client.Do(ctx, client.B().Dbsize().Build()).AsInt64()
		if err != nil {
			client.Close()
			return nil, fmt.Errorf("redis %s: DBSIZE: %w", o.redisHostPort, err)
		}
		if n != 0 {
			client.Close()
			return nil, fmt.Errorf("redis %s database %d holds %d keys: the harness flushes its database between measurements, so give an empty one with -db", o.redisHostPort, o.db, n)
		}
	}
	info, err := client.Do(ctx, client.B().Info().Section("server").Build()).ToString()
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("redis %s: INFO: %w", o.redisHostPort, err)
	}
	e.redisVersion = infoField(info, "redis_version")
	if e.store, err = redisstore.New(ctx, client, redisstore.Options{}); err != nil {
		client.Close()
		return nil, err
	}
	// redis-benchmark runs the claim script compiled into this binary, by
	// its SHA, with arguments of its layout (benchArgs); New has just
	// loaded it, which SCRIPT EXISTS proves.
	for _, sc := range redisstore.Scripts() {
		if sc.Name == "claim" {
			e.claimSHA = sc.SHA1
		}
	}
	ex, err := client.Do(ctx, client.B().ScriptExists().Sha1(e.claimSHA).Build()).AsIntSlice()
	if err != nil || len(ex) != 1 || ex[0] != 1 {
		client.Close()
		return nil, fmt.Errorf("the claim script %q is not loaded in Redis: %v", e.claimSHA, err)
	}
	return e, nil
}

func (e *env) close() { e.client.Close() }

// flush empties the harness's database, so that every measurement starts
// from the same memory and key count, but for the fleet's meta keys (scope
// version, deployment id, sentinels): a running store that finds its
// sentinel gone stops claiming (store_data_lost), so they are never deleted,
// not even for a moment.
func (e *env) flush(ctx context.Context) error {
	for cursor := uint64(0); ; {
		sc, err := e.client.Do(ctx, e.client.B().Scan().Cursor(cursor).Count(1000).Build()).AsScanEntry()
		if err != nil {
			return err
		}
		var del []string
		for _, k := range sc.Elements {
			if !strings.Contains(k, "meta:") {
				del = append(del, k)
			}
		}
		if len(del) > 0 {
			if err := e.client.Do(ctx, e.client.B().Del().Key(del...).Build()).Error(); err != nil {
				return err
			}
		}
		if sc.Cursor == 0 {
			return nil
		}
		cursor = sc.Cursor
	}
}

func (e *env) dbsize(ctx context.Context) (int64, error) {
	return e.client.Do(ctx, e.client.B().Dbsize().Build()).AsInt64()
}

// quiesce waits until no ZCOUNT has reached Redis for 50ms (at most 3s):
// the end of the obol_unknown_calls reading that a scrape of refserver's
// /metrics starts in the background at most every 30s (promhooks). One
// reads every bucket of the workspace's unknown index, 16,385 ZCOUNTs; a
// gateway amortizes it over 30s of calls, while a 3s measurement that
// began with it would carry ten times its share.
func (e *env) quiesce(ctx context.Context) error {
	calls := func() (string, error) {
		info, err := e.client.Do(ctx, e.client.B().Info().Section("commandstats").Build()).ToString()
		if err != nil {
			return "", err
		}
		v, _, _ := strings.Cut(infoField(info, "cmdstat_zcount"), ",")
		return v, nil
	}
	last, err := calls()
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		now, err := calls()
		if err != nil {
			return err
		}
		if now == last {
			return nil
		}
		last = now
	}
	return nil
}

// infoField returns one field of an INFO reply.
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
