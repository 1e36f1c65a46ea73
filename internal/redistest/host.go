package redistest

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// owner is what a Server needs from whoever started it: a test (through
// testOwner) or a Host.
type owner interface {
	Helper()
	Fatalf(format string, args ...any)
	Failed() bool
	Logf(format string, args ...any)
	Cleanup(func())
	MkDir() (string, error)
}

// testOwner adapts a test: its directories are the test's temporary ones.
type testOwner struct{ testing.TB }

func (t testOwner) MkDir() (string, error) { return t.TempDir(), nil }

// Host starts servers and clusters for a program that is not a test (a long
// soak run): every failure is an error, each server gets a directory under
// the host's, and Close kills every process it started. A server is also
// killed when the host process dies (Linux), so a crash leaves none behind.
type Host struct{ o *hostOwner }

// hostOwner is the owner of a Host's servers.
type hostOwner struct {
	dir string

	mu       sync.Mutex
	cleanups []func()
	failed   bool
}

// NewHost returns a Host whose servers live in directories under dir, which
// must exist; the caller removes it after Close.
func NewHost(dir string) *Host { return &Host{o: &hostOwner{dir: dir}} }

// Start starts a redis-server as the package-level Start does.
func (h *Host) Start(args ...string) (*Server, error) {
	bin, err := serverVersion()
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	dir, err := h.o.MkDir()
	if err != nil {
		return nil, err
	}
	s := &Server{tb: h.o, bin: bin, dir: dir, args: append([]string(nil), args...)}
	h.o.Cleanup(s.cleanup)
	if err := s.startFresh(false); err != nil {
		return nil, err
	}
	return s, nil
}

// StartCluster starts a cluster as the package-level StartCluster does.
func (h *Host) StartCluster(masters, replicasPerMaster int, args ...string) (*Cluster, error) {
	if masters < 1 || replicasPerMaster < 0 {
		return nil, fmt.Errorf("redistest: StartCluster(%d, %d): need at least one master and no negative replica count", masters, replicasPerMaster)
	}
	bin, err := serverVersion()
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	return startCluster(h.o, bin, masters, replicasPerMaster, args)
}

// Close kills every server the host started, newest first. It may be
// called more than once.
func (h *Host) Close() {
	h.o.mu.Lock()
	cs := h.o.cleanups
	h.o.cleanups = nil
	h.o.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}

func (h *hostOwner) Helper() {}

// Fatalf: a Host's methods report failures as errors, so
// only a Server method that exists for tests (Restart) reaches it; it
// panics rather than let a program continue on a server it believes runs.
func (h *hostOwner) Fatalf(format string, args ...any) {
	h.mu.Lock()
	h.failed = true
	h.mu.Unlock()
	panic(fmt.Errorf(format, args...))
}

func (h *hostOwner) Failed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failed
}

// Logf: a server's log tail goes to standard error.
func (h *hostOwner) Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

func (h *hostOwner) Cleanup(f func()) {
	h.mu.Lock()
	h.cleanups = append(h.cleanups, f)
	h.mu.Unlock()
}

func (h *hostOwner) MkDir() (string, error) {
	d, err := os.MkdirTemp(h.dir, "redis-")
	if err != nil {
		return "", fmt.Errorf("redistest: %w", err)
	}
	return d, nil
}
