package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/obol-gateway/obol/retry"
)

// TestMaxResponseBytesConfig: max_response_bytes sets the read limit of
// every vendor call; left out it is the Executor's default; a bad value is
// refused by name and changes nothing.
func TestMaxResponseBytesConfig(t *testing.T) {
	with := func(v string) []byte {
		return []byte(strings.Replace(goodConfig, `{`, `{"max_response_bytes": `+v+`, `, 1))
	}
	exec := &retry.Executor{}
	if _, err := loadConfig(with("1048576"), testEnv, exec); err != nil || exec.MaxResponseBytes != 1<<20 {
		t.Fatalf("err %v, MaxResponseBytes %d", err, exec.MaxResponseBytes)
	}
	exec = &retry.Executor{}
	if _, err := loadConfig([]byte(goodConfig), testEnv, exec); err != nil || exec.MaxResponseBytes != 0 {
		t.Fatalf("err %v, MaxResponseBytes %d: want the default", err, exec.MaxResponseBytes)
	}
	for _, v := range []string{"-1", "1073741825", `"10MiB"`, "1.5"} {
		exec := &retry.Executor{}
		_, err := loadConfig(with(v), testEnv, exec)
		if err == nil || !strings.Contains(err.Error(), "max_response_bytes") || exec.MaxResponseBytes != 0 {
			t.Errorf("%s: err %v, MaxResponseBytes %d", v, err, exec.MaxResponseBytes)
		}
	}
}

// TestLargeAnswersMemory runs the built gateway against a vendor that
// answers 10 MiB to four concurrent calls, and reads the gateway's peak
// resident set (VmHWM) afterwards. The figure is logged; the test asserts
// that every answer came back whole, that the gateway grew by at most about
// twice an answer per call, and that with max_response_bytes below the
// answer's size the body is dropped and the status kept.
func TestLargeAnswersMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc: cannot read a process's resident set")
	}
	const size = 10 << 20
	body := bytes.Repeat([]byte(`{"row":"0123456789abcdef"},`), size/27)
	body = append([]byte(`{"rows":[`), body[:len(body)-1]...)
	body = append(body, []byte(`]}`)...)
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusCreated)
		w.Write(body)
	}))
	t.Cleanup(vendor.Close)
	for _, tc := range []struct {
		name  string
		limit string
		whole bool
	}{{"default limit", "0", true}, {"limit below the answer", "1048576", false}} {
		t.Run(tc.name, func(t *testing.T) {
			// Development: production refuses the embedded store.
			cfg := strings.NewReplacer("{{VENDOR}}", vendor.URL, `"environment": "production"`, `"environment": "development"`).Replace(e2eConfig)
			cfg = strings.Replace(cfg, `{`, `{"max_response_bytes": `+tc.limit+`, `, 1)
			path := filepath.Join(t.TempDir(), "config.json")
			if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			p := startRefserver(t, "-config", path)
			base := peakRSS(t, p.Cmd.Process.Pid)
			// Raw JSON-RPC, so that the test's own decoding of four 20 MiB
			// answers (text and structuredContent) does not weigh on it.
			var wg sync.WaitGroup
			answers := make([][]byte, 4)
			for i := range answers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					resp, b := rawPost(t, p.base, http.MethodPost, e2eKeyOne, "",
						`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay.charge","arguments":{"n":`+strconv.Itoa(i)+`}}}`)
					if resp.StatusCode != 200 {
						t.Errorf("call %d: status %d %.300s", i, resp.StatusCode, b)
					}
					answers[i] = b
				}()
			}
			wg.Wait()
			for i, b := range answers {
				whole := bytes.Contains(b, []byte(`{\"row\":\"0123456789abcdef\"}]}`))
				if !bytes.Contains(b, []byte(`"outcome":"accepted"`)) || !bytes.Contains(b, []byte(`"status":201`)) || whole != tc.whole {
					t.Errorf("call %d: %d bytes, want accepted 201 with the whole body: %v: %.300s", i, len(b), tc.whole, b)
				}
			}
			peak := peakRSS(t, p.Cmd.Process.Pid)
			t.Logf("gateway peak RSS: %d MiB at start, %d MiB after 4 concurrent %d MiB answers", base>>20, peak>>20, size>>20)
			// About twice a vendor body per call in flight (the body is held
			// once, the answer written from it in pieces), plus the
			// runtime's slack.
			if bound := base + int64(len(answers))*2*size + 32<<20; peak > bound {
				t.Errorf("peak RSS %d MiB, want at most %d MiB", peak>>20, bound>>20)
			}
		})
	}
}

// peakRSS is the process's peak resident set in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}
