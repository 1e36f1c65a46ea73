package proof

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// faultProxy is a TCP proxy between a Redis client and Redis that
// understands RESP well enough to pair every reply with its command (Redis
// answers in order on a connection; RESP3 pushes are passed through). A rule
// looks at each command and decides what happens to it or to its reply, so
// that a test reaches a window of the protocol deterministically:
//
//   - holdCommand: the command (and everything after it on the connection)
//     is never forwarded: Redis never ran it.
//   - holdReply: the command is forwarded and ran; its reply (and every later
//     one on the connection) is withheld.
//   - dropReplyCut: the command ran; its reply is dropped and the connection
//     is cut, as when the network dies after the script ran.
type faultProxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	rule    func(cmd []string) action
	latency time.Duration
	conns   map[*proxyConn]struct{}
	closed  bool

	events chan string // "<action> <kind> <key>" for every rule hit
	wg     sync.WaitGroup
}

type action int

const (
	pass action = iota
	holdCommand
	holdReply
	dropReplyCut
)

func (a action) String() string {
	return [...]string{"pass", "hold_command", "hold_reply", "drop_reply_cut"}[a]
}

func newFaultProxy(t testing.TB, target string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{ln: ln, target: target, conns: map[*proxyConn]struct{}{}, events: make(chan string, 1024)}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *faultProxy) Addr() string { return p.ln.Addr().String() }

// setRule replaces the rule; nil passes everything.
func (p *faultProxy) setRule(r func(cmd []string) action) {
	p.mu.Lock()
	p.rule = r
	p.mu.Unlock()
}

// setLatency delays every batch of commands on its way to Redis.
func (p *faultProxy) setLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
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
	p.ln.Close()
	p.cutAll()
	p.wg.Wait()
}

// waitEvent waits for a rule hit.
func (p *faultProxy) waitEvent(t testing.TB, d time.Duration) string {
	t.Helper()
	select {
	case e := <-p.events:
		return e
	case <-time.After(d):
		t.Fatalf("fault proxy: no rule hit within %v", d)
		return ""
	}
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
			c.Close()
			continue
		}
		pc := &proxyConn{p: p, c: c, s: s, queue: make(chan action, 1<<16)}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns[pc] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go pc.up()
		go pc.down()
	}
}

type proxyConn struct {
	p     *faultProxy
	c, s  net.Conn
	queue chan action // actions of forwarded commands, in order
	once  sync.Once
}

func (pc *proxyConn) cut() {
	pc.once.Do(func() {
		pc.c.Close()
		pc.s.Close()
		pc.p.mu.Lock()
		delete(pc.p.conns, pc)
		pc.p.mu.Unlock()
	})
}

func (pc *proxyConn) event(a action, cmd []string) {
	kind, key := scriptKind(cmd)
	select {
	case pc.p.events <- fmt.Sprintf("%s %s %s", a, kind, key):
	default:
	}
}

// up carries commands from the client to Redis.
func (pc *proxyConn) up() {
	defer pc.p.wg.Done()
	defer pc.cut()
	r := bufio.NewReader(pc.c)
	w := bufio.NewWriter(pc.s)
	for {
		raw, cmd, err := readCommand(r)
		if err != nil {
			return
		}
		pc.p.mu.Lock()
		rule, lat := pc.p.rule, pc.p.latency
		pc.p.mu.Unlock()
		a := pass
		if rule != nil {
			a = rule(cmd)
		}
		if a == holdCommand {
			w.Flush()
			pc.event(a, cmd)
			// Swallow the rest: Redis sees nothing more of this connection.
			io.Copy(io.Discard, r)
			return
		}
		pc.queue <- a
		if a != pass {
			pc.event(a, cmd)
		}
		if _, err := w.Write(raw); err != nil {
			return
		}
		if r.Buffered() == 0 {
			if lat > 0 {
				time.Sleep(lat)
			}
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
			case holdReply:
				w.Flush()
				io.Copy(io.Discard, r)
				return
			case dropReplyCut:
				w.Flush()
				return // the deferred cut closes both sides
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

// scriptKind names the redisstore script a command runs, by its shape:
// claim has 16 arguments, finalize at least 7 with an outcome code second,
// reserve 6 with a numeric token first, lookup none. key is the record key.
func scriptKind(cmd []string) (kind, key string) {
	if len(cmd) < 4 {
		if len(cmd) > 0 {
			return strings.ToLower(cmd[0]), ""
		}
		return "", ""
	}
	switch strings.ToUpper(cmd[0]) {
	case "EVALSHA", "EVAL", "EVALSHA_RO", "EVAL_RO":
	default:
		return strings.ToLower(cmd[0]), ""
	}
	if cmd[2] != "1" {
		return "script?", ""
	}
	key, argv := cmd[3], cmd[4:]
	switch {
	case len(argv) == 0:
		return "lookup", key
	case len(argv) == 16:
		return "claim", key
	case len(argv) >= 7 && (argv[1] == "a" || argv[1] == "r" || argv[1] == "u"):
		return "finalize", key
	case len(argv) == 4 && strings.HasPrefix(argv[0], "apt_"):
		return "decide", key
	case len(argv) == 6:
		return "reserve", key
	}
	return "script?", key
}

// onScript returns a rule that applies a to the first command running the
// script kind on a record key containing sub, and passes everything else.
func onScript(kind, sub string, a action) func([]string) action {
	var once sync.Once
	return func(cmd []string) action {
		k, key := scriptKind(cmd)
		hit := pass
		if k == kind && strings.Contains(key, sub) {
			once.Do(func() { hit = a })
		}
		return hit
	}
}
