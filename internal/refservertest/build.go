package refservertest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// pkgPath is the reference server's import path.
const pkgPath = "github.com/obol-gateway/obol/refserver"

// build is the one build of this process; dir is where it went, for [Main].
var build struct {
	once sync.Once
	mu   sync.Mutex
	dir  string
	bin  string
	err  error
}

func buildOnce() (string, error) {
	build.once.Do(func() { build.bin, build.err = goBuild() })
	return build.bin, build.err
}

func goBuild() (string, error) {
	dir, err := os.MkdirTemp("", "refservertest-")
	if err != nil {
		return "", fmt.Errorf("refservertest: build directory: %w", err)
	}
	build.mu.Lock()
	build.dir = dir
	build.mu.Unlock()
	bin := filepath.Join(dir, "refserver")
	out, err := exec.Command("go", "build", "-o", bin, pkgPath).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("refservertest: go build %s: %v\n%s", pkgPath, err, out)
	}
	return bin, nil
}

// Binary builds the reference server on its first call in this process and
// returns the path of the binary; later calls return the same path, or the
// same build error. [Main] removes the binary when the tests end.
func Binary() (string, error) { return buildOnce() }

// Build is [Binary] for a test: it fails t when the build failed.
func Build(t testing.TB) string {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// Main runs the tests of m, removes the binary [Binary] built, if any, and
// exits with the tests' code. Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	build.mu.Lock()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	build.mu.Unlock()
	os.Exit(code)
}
