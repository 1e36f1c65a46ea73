package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// faultProxy is a TCP proxy between the gateways and Redis that pairs every
// reply with its command (Redis answers in order on a connection; RESP3
// pushes pass through). It can drop the reply of a script that Redis ran
// and cut that connection (the network dying after the script ran), and cut
// every connection at once. It is a trimmed copy of the proof suite's.
type faultProxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	dropNext int // replies of script commands still to drop
	conns    map[*proxyConn]struct{}
	closed   bool

	wg sync.WaitGroup
}

func newFaultProxy(target string) (*faultProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("soak: fault proxy: %w", err)
	}
	p := &faultProxy{ln: ln, target: target, conns: map[*proxyConn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

func (p *faultProxy) Addr() string { return p.ln.Addr().String() }

// dropReplies makes the proxy drop the replies of the next n scripts (each
// after Redis ran it) and cut their connections.
func (p *faultProxy) dropReplies(n int) {
	p.mu.Lock()
	p.dropNext += n
	p.mu.Unlock()
}

// cutAll closes every open connection, both sides, at once.
func (p *faultProxy) cutAll() int {
	p.mu.Lock()
	cs := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	for _, c := range cs {
		c.cut()
	}
	return len(cs)
}

func (p *faultProxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.ln.Close()
	p.cutAll()
	p.wg.Wait()
}

func (p *faultProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.DialTimeout("tcp", p.target, time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		pc := &proxyConn{p: p, c: c, s: s, queue: make(chan action, 1<<16)}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			_ = s.Close()
			return
		}
		p.conns[pc] = struct{}{}
		// Added under mu, which close takes before it waits: an Add never
		// runs concurrently with the Wait.
		p.wg.Add(2)
		p.mu.Unlock()
		go pc.up()
		go pc.down()
	}
}

// action is what the proxy does with a command's reply.
type action int

const (
	pass      action = iota
	drop             // drop the reply and cut the connection
	rawStream        // pass the reply, then everything both ways unparsed
)

type proxyConn struct {
	p     *faultProxy
	c, s  net.Conn
	queue chan action // per forwarded command, in order: what to do with its reply
	once  sync.Once
}

func (pc *proxyConn) cut() {
	pc.once.Do(func() {
		_ = pc.c.Close()
		_ = pc.s.Close()
		pc.p.mu.Lock()
		delete(pc.p.conns, pc)
		pc.p.mu.Unlock()
	})
}

// up carries commands from the client to Redis.
func (pc *proxyConn) up() {
	defer pc.p.wg.Done()
	defer pc.cut()
	r := bufio.NewReader(pc.c)
	w := bufio.NewWriter(pc.s)
	for {
		rawCmd, cmd, err := readCommand(r)
		if err != nil {
			return
		}
		a := pass
		name := ""
		if len(cmd) > 0 {
			name = strings.ToUpper(cmd[0])
		}
		switch {
		case name == "PSYNC" || name == "SYNC":
			// A replica of a Cluster node that announces the proxy's port
			// replicates through it: after this command the stream is not
			// request/reply any more.
			a = rawStream
		case strings.HasPrefix(name, "EVAL"):
			pc.p.mu.Lock()
			if pc.p.dropNext > 0 {
				pc.p.dropNext--
				a = drop
			}
			pc.p.mu.Unlock()
		}
		pc.queue <- a
		if _, err := w.Write(rawCmd); err != nil {
			return
		}
		if a == rawStream {
			if w.Flush() == nil {
				_, _ = io.Copy(pc.s, r)
			}
			return
		}
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
}

// down carries replies from Redis to the client.
func (pc *proxyConn) down() {
	defer pc.p.wg.Done()
	defer pc.cut()
	r := bufio.NewReader(pc.s)
	w := bufio.NewWriter(pc.c)
	for {
		raw, err := readValue(r)
		if err != nil {
			return
		}
		if raw[0] != '>' { // a push answers no command
			var a action
			select {
			case a = <-pc.queue:
			default:
				return // a reply without a command: give up on this connection
			}
			switch a {
			case drop:
				_ = w.Flush()
				return // the deferred cut closes both sides
			case rawStream:
				if _, err := w.Write(raw); err == nil && w.Flush() == nil {
					_, _ = io.Copy(pc.c, r)
				}
				return
			}
		}
		if _, err := w.Write(raw); err != nil {
			return
		}
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return
			}
		}
	}
}

// readCommand reads one RESP array of bulk strings (how every client sends
// commands) and returns its raw bytes and arguments.
func readCommand(r *bufio.Reader) ([]byte, []string, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, nil, err
	}
	raw := append([]byte(nil), line...)
	if len(line) < 3 || line[0] != '*' {
		return nil, nil, fmt.Errorf("fault proxy: not a command array: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(line[1:])))
	if err != nil {
		return nil, nil, err
	}
	args := make([]string, 0, n)
	for range n {
		hdr, err := r.ReadSlice('\n')
		if err != nil {
			return nil, nil, err
		}
		raw = append(raw, hdr...)
		if hdr[0] != '$' {
			return nil, nil, fmt.Errorf("fault proxy: not a bulk string: %q", hdr)
		}
		l, err := strconv.Atoi(strings.TrimSpace(string(hdr[1:])))
		if err != nil {
			return nil, nil, err
		}
		buf := make([]byte, l+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, nil, err
		}
		raw = append(raw, buf...)
		args = append(args, string(buf[:l]))
	}
	return raw, args, nil
}

// readValue reads one complete RESP2/RESP3 value, attributes included.
func readValue(r *bufio.Reader) ([]byte, error) {
	var raw []byte
	if err := appendValue(r, &raw); err != nil {
		return nil, err
	}
	return raw, nil
}

func appendValue(r *bufio.Reader, raw *[]byte) error {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return err
	}
	*raw = append(*raw, line...)
	if len(line) < 3 {
		return errors.New("fault proxy: short RESP line")
	}
	head := strings.TrimSpace(string(line[1:]))
	switch line[0] {
	case '+', '-', ':', '_', '#', ',', '(':
		return nil
	case '$', '!', '=':
		n, err := strconv.Atoi(head)
		if err != nil {
			return err
		}
		if n < 0 {
			return nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		*raw = append(*raw, buf...)
		return nil
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(head)
		if err != nil {
			return err
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for range n {
			if err := appendValue(r, raw); err != nil {
				return err
			}
		}
		if line[0] == '|' { // an attribute precedes the actual reply
			return appendValue(r, raw)
		}
		return nil
	}
	return fmt.Errorf("fault proxy: unknown RESP type %q", line[0])
}
