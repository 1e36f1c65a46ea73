package redistest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RequireEnv names the environment variable that turns a missing redis-server
// from a skip into a failure. CI sets it to 1.
const RequireEnv = "OBOL_REQUIRE_REDIS"

const (
	startAttempts = 8                // fresh ports tried before giving up
	readyTimeout  = 15 * time.Second // a loaded 2-core machine can be slow
	// assembleTimeout bounds a new cluster's first agreement. Without
	// replicas its nodes learn each other's slots only from gossip (one
	// random ping a second; cluster-node-timeout is 15 s there), and under
	// a race-built test run on 2 cores one node still reported
	// cluster_state:fail after 15 s. It returns as soon as every node is ok.
	assembleTimeout = 60 * time.Second
	cmdTimeout      = 15 * time.Second // set-up commands: a starved new node once took over 5 s during assembly
)

// Server is one redis-server process. Its methods are safe for concurrent use.
type Server struct {
	tb    owner
	bin   string
	dir   string
	port  int
	cport int // cluster bus port; 0 unless cluster-enabled
	// nodeTimeout is the cluster-node-timeout in ms (cluster nodes only).
	nodeTimeout int
	args        []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
}

// Start starts a redis-server on a free loopback port with persistence off
// (--save "" --appendonly no); args follow the configuration and override it.
// The server is killed when the test ends. Start skips the test when
// redis-server is missing, or fails it when OBOL_REQUIRE_REDIS=1.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	bin := lookup(t)
	s := &Server{tb: testOwner{t}, bin: bin, dir: t.TempDir(), args: append([]string(nil), args...)}
	t.Cleanup(s.cleanup)
	if err := s.startFresh(false); err != nil {
		t.Fatal(err)
	}
	return s
}

// Addr returns "127.0.0.1:port".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port returns the TCP port, which Restart keeps.
func (s *Server) Port() int { return s.port }

// Dir returns the server's working directory (AOF, RDB, nodes.conf, redis.log).
func (s *Server) Dir() string { return s.dir }

// Running reports whether the process is alive.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// Kill sends SIGKILL and waits for the process to exit: a crash, nothing is
// flushed. Killing a stopped server does nothing.
func (s *Server) Kill() { s.signal(syscall.SIGKILL, 0) }

// Stop shuts the server down with SIGTERM (which lets Redis flush its AOF),
// and kills it if it has not exited within 10 seconds.
func (s *Server) Stop() { s.signal(syscall.SIGTERM, 10*time.Second) }

// Restart kills the server if it runs, then starts it again with the same
// port, directory and arguments, and waits until it answers PING.
func (s *Server) Restart() {
	s.tb.Helper()
	if err := s.Relaunch(); err != nil {
		s.tb.Fatalf("%v", err)
	}
}

// Relaunch is Restart for a program that is not a test: it returns the
// failure instead of failing a test.
func (s *Server) Relaunch() error {
	s.Kill()
	var err error
	// The port was ours a moment ago; another process grabbing it in between
	// is possible but rare, so retry only briefly.
	for i := 0; i < 3; i++ {
		var inUse bool
		if inUse, err = s.spawn(); err == nil || !inUse {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("redistest: restart %s: %w", s.Addr(), err)
	}
	return nil
}

// Do sends one command on a fresh connection and returns the reply: string,
// int64, nil, []any, or an ErrorReply error. It is meant for test set-up
// (CONFIG SET, DEBUG SLEEP, CLUSTER INFO), not for the code under test.
func (s *Server) Do(args ...string) (any, error) { return do(s.Addr(), cmdTimeout, args...) }

// DoAsking is Do after ASKING on the same connection, as a client that
// follows an ASK redirect to a node importing the slot sends it.
func (s *Server) DoAsking(args ...string) (any, error) {
	return doAll(s.Addr(), cmdTimeout, [][]string{{"ASKING"}, args})
}

func (s *Server) signal(sig syscall.Signal, grace time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(sig)
	if grace > 0 {
		select {
		case <-s.exited:
		case <-time.After(grace):
			_ = s.cmd.Process.Kill()
		}
	}
	<-s.exited
	s.cmd = nil
}

func (s *Server) cleanup() {
	if s.tb.Failed() {
		if tail := s.logTail(20); tail != "" {
			s.tb.Logf("redistest: last lines of %s's log:\n%s", s.Addr(), tail)
		}
	}
	s.Kill()
}

// startFresh picks free ports and starts the process, retrying with new ports
// when it loses the race for one.
func (s *Server) startFresh(cluster bool) error {
	var err error
	for range startAttempts {
		if s.port, err = freePort(); err != nil {
			return err
		}
		if cluster {
			if s.cport, err = freePort(); err != nil {
				return err
			}
		}
		var inUse bool
		if inUse, err = s.spawn(); err == nil || !inUse {
			return err
		}
	}
	return fmt.Errorf("redistest: no free port after %d attempts: %w", startAttempts, err)
}

func (s *Server) conf() string {
	var b strings.Builder
	fmt.Fprintf(&b, "bind 127.0.0.1\nport %d\ndir %q\nlogfile %q\n", s.port, s.dir, filepath.Join(s.dir, "redis.log"))
	b.WriteString("save \"\"\nappendonly no\ndaemonize no\nrepl-diskless-sync-delay 0\n")
	if s.cport != 0 {
		fmt.Fprintf(&b, "cluster-enabled yes\ncluster-config-file %q\ncluster-node-timeout %d\ncluster-port %d\n",
			filepath.Join(s.dir, "nodes.conf"), s.nodeTimeout, s.cport)
		// Redis 7 turns a master that lost its last slot into a replica of
		// the node that took it (and its replicas follow): a master emptied
		// to be removed, or whose slots moved in a test, would change role
		// under it. Topology changes are the tests' own.
		b.WriteString("cluster-allow-replica-migration no\n")
	}
	return b.String()
}

// spawn starts the process and waits until it answers PING. inUse reports a
// failure to bind the port (so that a new port may help).
func (s *Server) spawn() (inUse bool, err error) {
	confPath := filepath.Join(s.dir, "redis.conf")
	if err := os.WriteFile(confPath, []byte(s.conf()), 0o600); err != nil {
		return false, err
	}
	logPath := filepath.Join(s.dir, "redis.log")
	logStart := fileSize(logPath)

	// Errors before the log file is open (bad arguments) go to stdout. A file,
	// not a pipe: Wait never waits for a forked child (a BGSAVE or AOF
	// rewrite) that inherited it.
	outPath := filepath.Join(s.dir, "stdout.log")
	out, err := os.Create(outPath)
	if err != nil {
		return false, err
	}
	defer out.Close() // the child has its own copy
	cmd := exec.Command(s.bin, append([]string{confPath}, s.args...)...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return false, fmt.Errorf("redistest: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()

	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()

	deadline := time.Now().Add(readyTimeout)
	for {
		select {
		case <-exited:
			s.mu.Lock()
			s.cmd = nil
			s.mu.Unlock()
			early, _ := os.ReadFile(outPath)
			msg := strings.TrimSpace(string(early) + "\n" + s.logSince(logStart))
			inUse := strings.Contains(msg, "in use") || strings.Contains(msg, "Could not create server TCP listening socket")
			return inUse, fmt.Errorf("redistest: redis-server on port %d exited during start-up:\n%s", s.port, lastLines(msg, 15))
		default:
		}
		// Ready when our process answers PING (not LOADING): a redis-server
		// of another test that won the race for this port answers as well,
		// and a test would then assemble or flush someone else's server.
		if r, err := do(s.Addr(), time.Second, "INFO", "server"); err == nil {
			if pid := infoFields(r)["process_id"]; pid != strconv.Itoa(cmd.Process.Pid) {
				s.Kill()
				return true, fmt.Errorf("redistest: port %d is answered by another redis-server (process %s)", s.port, pid)
			}
			if r, err := do(s.Addr(), time.Second, "PING"); err == nil && r == "PONG" {
				return false, nil
			}
		}
		if time.Now().After(deadline) {
			s.Kill()
			return false, fmt.Errorf("redistest: redis-server on port %d did not answer PING within %v:\n%s",
				s.port, readyTimeout, lastLines(s.logSince(logStart), 15))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *Server) logSince(off int64) string {
	b, err := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	if err != nil || int64(len(b)) < off {
		return ""
	}
	return string(b[off:])
}

func (s *Server) logTail(n int) string { return lastLines(s.logSince(0), n) }

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redistest: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

var serverVersion = sync.OnceValues(func() (string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", err
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("redis-server --version: %w", err)
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("redis-server --version: unexpected output %q", bytes.TrimSpace(out))
	}
	if major, _ := strconv.Atoi(string(m[2])); major < 7 {
		return "", fmt.Errorf("redis-server %s is too old: 7.0 or newer is required", m[1])
	}
	return bin, nil
})

var versionRE = regexp.MustCompile(`v=((\d+)\.\d+\.\d+)`)

// lookup returns the redis-server binary, or skips (fails, when required) the
// test.
func lookup(t testing.TB) string {
	t.Helper()
	return lookupWith(t, serverVersion)
}

func lookupWith(t testing.TB, find func() (string, error)) string {
	t.Helper()
	bin, err := find()
	if err == nil {
		return bin
	}
	if errors.Is(err, exec.ErrNotFound) {
		err = errors.New("redis-server not found in PATH")
	}
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("redistest: %v, and %s=1 requires it", err, RequireEnv)
		return ""
	}
	t.Skipf("redistest: SKIPPING real-Redis test: %v. Install redis-server 7+ to run it; %s=1 makes this a failure.", err, RequireEnv)
	return ""
}
