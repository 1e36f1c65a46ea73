package refservertest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Options say how to run a server. The zero value runs the built reference
// server in its demo mode.
type Options struct {
	// Bin is the program to run; empty means the reference server [Binary]
	// builds. Another program must print "listening on URL" as it does.
	Bin string
	// Args follow "-addr 127.0.0.1:0" on the command line.
	Args []string
	// Env is added to this process's environment.
	Env []string
	// Log, if set, receives stderr instead of the buffer [Server.Log] reads.
	Log io.Writer
	// Ready bounds the wait for the listening line; zero means a minute.
	Ready time.Duration
	// Stopped, if set, is called by [Start]'s cleanup with the log once the
	// process has exited: the place for checks of the whole log.
	Stopped func(log string)
	// LogTail is how many lines of the log a failed test shows; zero means
	// all.
	LogTail int
}

// Server is a running server process.
type Server struct {
	// Base is the URL the server listens on, http://127.0.0.1:PORT.
	Base string
	// Listening is the line of standard output that announced Base.
	Listening string
	// Cmd is the process; it has been started.
	Cmd *exec.Cmd

	log  Buffer
	done chan struct{}
	err  error
}

// Buffer is a bytes.Buffer safe for concurrent use: one goroutine writes a
// process's output while a test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Wait waits until s occurs at least n times in what was written, or until
// timeout passes, and returns everything written so far. A gateway writes a
// call's log line once the answer has left (mcpgateway's direct path), so a
// test that reads the line of a call it just made waits for it.
func (b *Buffer) Wait(s string, n int, timeout time.Duration) string {
	deadline := time.Now().Add(timeout)
	for {
		out := b.String()
		if strings.Count(out, s) >= n || time.Now().After(deadline) {
			return out
		}
		time.Sleep(time.Millisecond)
	}
}

// Launch runs a server and waits until it listens, ctx ends, or the bound
// of o.Ready passes. It does not stop the server: see [Server.Stop]. Tests
// use [Start].
func Launch(ctx context.Context, o Options) (*Server, error) {
	bin := o.Bin
	if bin == "" {
		var err error
		if bin, err = Binary(); err != nil {
			return nil, err
		}
	}
	s := &Server{done: make(chan struct{})}
	s.Cmd = exec.Command(bin, append([]string{"-addr", "127.0.0.1:0"}, o.Args...)...)
	s.Cmd.Env = append(os.Environ(), o.Env...)
	s.Cmd.Stderr = &s.log
	if o.Log != nil {
		s.Cmd.Stderr = o.Log
	}
	out, err := s.Cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.Cmd.Start(); err != nil {
		return nil, fmt.Errorf("refservertest: start %s: %w", bin, err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on ") {
				select {
				case found <- sc.Text():
				default:
				}
			}
		}
		io.Copy(io.Discard, out) // keep the pipe drained
	}()
	go func() { s.err = s.Cmd.Wait(); close(s.done) }()
	ready := o.Ready
	if ready == 0 {
		ready = time.Minute
	}
	timer := time.NewTimer(ready)
	defer timer.Stop()
	select {
	case s.Listening = <-found:
		_, rest, _ := strings.Cut(s.Listening, "listening on ")
		s.Base, _, _ = strings.Cut(rest, " ")
		return s, nil
	case <-s.done:
		return nil, fmt.Errorf("refservertest: %s exited before listening (%v)%s", bin, s.err, s.logNote())
	case <-timer.C:
		err = fmt.Errorf("refservertest: %s did not listen within %v%s", bin, ready, s.logNote())
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.Kill()
	return nil, err
}

// Start is [Launch] for a test: it fails t when the server does not come
// up, and stops the server when the test ends, showing its log if the test
// failed.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s, err := Launch(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop(20 * time.Second)
		log := s.Log()
		if o.Stopped != nil {
			o.Stopped(log)
		}
		if t.Failed() && o.Log == nil {
			t.Logf("refserver %s stderr:\n%s", s.Base, tail(log, o.LogTail))
		}
	})
	return s
}

// logNote is the log for an error message, or "" when [Options.Log] took it.
func (s *Server) logNote() string {
	if s.Cmd.Stderr != &s.log {
		return ""
	}
	return ":\n" + s.Log()
}

// Log is what the server wrote to stderr so far ("" when [Options.Log]
// took it).
func (s *Server) Log() string { return s.log.String() }

// WaitLog is [Buffer.Wait] on the server's stderr, for up to 10 seconds.
func (s *Server) WaitLog(substr string, n int) string { return s.log.Wait(substr, n, 10*time.Second) }

// Signal sends sig to the process.
func (s *Server) Signal(sig os.Signal) error { return s.Cmd.Process.Signal(sig) }

// Done is closed when the process has exited.
func (s *Server) Done() <-chan struct{} { return s.done }

// Err is how the process exited; it is valid once [Server.Done] is closed.
func (s *Server) Err() error { return s.err }

// Wait waits up to d for the process to exit and returns how it exited, or
// an error saying it still runs.
func (s *Server) Wait(d time.Duration) error {
	select {
	case <-s.done:
		return s.err
	case <-time.After(d):
		return fmt.Errorf("refservertest: %s still runs after %v", s.Base, d)
	}
}

// Stop ends the process as an operator does, SIGTERM, and kills it if it
// has not exited after grace. It returns how the process exited; a process
// that already exited is left as it is.
func (s *Server) Stop(grace time.Duration) error {
	select {
	case <-s.done:
		return s.err
	default:
	}
	s.Resume() // a paused process could not act on SIGTERM
	s.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		return s.err
	case <-time.After(grace):
		s.Kill()
		return fmt.Errorf("refservertest: %s did not exit within %v of SIGTERM: killed", s.Base, grace)
	}
}

// Kill crashes the process, SIGKILL: nothing is flushed or finalized. It
// waits for the exit.
func (s *Server) Kill() {
	s.Cmd.Process.Kill()
	<-s.done
}

// Pause stops the process, SIGSTOP, without ending it: it holds its
// connections and leases but does nothing until [Server.Resume].
func (s *Server) Pause() error { return s.Cmd.Process.Signal(syscall.SIGSTOP) }

// Resume lets a paused process run again, SIGCONT.
func (s *Server) Resume() error { return s.Cmd.Process.Signal(syscall.SIGCONT) }

// tail is the last n lines of s, or s when n is zero.
func tail(s string, n int) string {
	if n <= 0 {
		return s
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
