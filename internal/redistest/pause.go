package redistest

import "syscall"

// Pause stops the server with SIGSTOP: a stalled Redis. Its connections
// stay open and the kernel still accepts new ones into the listen backlog,
// but nothing is read or answered until Resume; what was written to it
// meanwhile runs then, in order per connection, even on connections their
// client has closed since.
func (s *Server) Pause() { s.send(syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() { s.send(syscall.SIGCONT) }

func (s *Server) send(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(sig)
	}
}
