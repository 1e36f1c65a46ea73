// Package faultproxy is a TCP proxy between a Redis client and Redis that
// understands RESP well enough to pair every reply with its command, so that
// a test or the chaos soak can put a call into one precise window of the
// protocol: Redis never saw the command, Redis ran it but the reply never
// came back, or the network died right after Redis ran it.
//
// Redis answers in order on a connection, so the proxy queues one Action
// per forwarded command and applies it to the next reply; RESP3 pushes
// answer no command and pass through. A replica that replicates through the
// proxy (PSYNC or SYNC, as when a Cluster node announces the proxy's port)
// turns its connection into a raw stream both ways after the command's
// reply, since replication is not request/reply.
//
//	p, err := faultproxy.New(redisAddr)
//	...
//	defer p.Close()
//	p.SetRule(faultproxy.OnScript("finalize", key, faultproxy.HoldReply))
//	// connect the client to p.Addr(), make the call, then:
//	e := <-p.Events() // the rule hit
//
// The proxy listens on loopback only: it is a fault injector for tests and
// soaks, never a production component.
package faultproxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
)

// Action is what the proxy does with a command or with its reply.
type Action int

const (
	// Pass forwards the command and its reply.
	Pass Action = iota
	// HoldCommand never forwards the command, nor anything after it on the
	// connection: Redis never ran it, and the client waits for a reply
	// until it gives up or the connection is cut.
	HoldCommand
	// HoldReply forwards the command, which Redis runs, and withholds its
	// reply and every later one on the connection.
	HoldReply
	// DropReplyCut forwards the command, which Redis runs, drops its reply
	// and cuts the connection, as when the network dies after the script
	// ran.
	DropReplyCut

	// rawStream passes the reply, then everything both ways unparsed.
	rawStream
)

// String names the action as events report it.
func (a Action) String() string {
	switch a {
	case Pass:
		return "pass"
	case HoldCommand:
		return "hold_command"
	case HoldReply:
		return "hold_reply"
	case DropReplyCut:
		return "drop_reply_cut"
	case rawStream:
		return "raw_stream"
	}
	return fmt.Sprintf("action(%d)", int(a))
}

// A Rule looks at every command (its arguments, the name first) on its way
// to Redis and says what happens to it. Rules run on the connections'
// goroutines, concurrently: a rule with state must lock it.
type Rule func(cmd []string) Action

// Event reports a command the proxy did not simply pass: a rule hit, or a
// reply dropped by DropReplies.
type Event struct {
	Action Action
	Kind   string // ScriptKind of the command
	Key    string // the record key the script runs on, if any
}

// String is "<action> <kind> <key>".
func (e Event) String() string { return fmt.Sprintf("%s %s %s", e.Action, e.Kind, e.Key) }

// eventBuffer is how many events wait unread before later ones are dropped:
// a proxy nobody reads events from must never block a connection.
const eventBuffer = 1024

// dialTimeout bounds the dial to the target for each accepted connection.
const dialTimeout = time.Second

// Proxy is one listening fault proxy in front of one Redis address. Its
// methods are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	rule     Rule
	latency  time.Duration
	dropped  func(cmd []string)
	dropNext int // replies of script commands still to drop
	conns    map[*conn]struct{}
	closed   bool

	events chan Event
	wg     sync.WaitGroup
}

// New listens on a free loopback port and forwards every connection to
// target (host:port). Close releases the port and every connection.
func New(target string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("faultproxy: target %q is not host:port: %w", target, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target, conns: map[*conn]struct{}{}, events: make(chan Event, eventBuffer)}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients connect to instead of Redis.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetRule replaces the rule for the commands read from now on; nil passes
// everything (but DropReplies still applies).
func (p *Proxy) SetRule(r Rule) {
	p.mu.Lock()
	p.rule = r
	p.mu.Unlock()
}

// SetOnDropped sets f to be called with every command whose reply the
// proxy dropped (DropReplyCut), when it drops it: Redis ran that command.
// A command the rule marked DropReplyCut may never reach Redis, when the
// connection is cut first for an earlier one; f is not called for it.
func (p *Proxy) SetOnDropped(f func(cmd []string)) {
	p.mu.Lock()
	p.dropped = f
	p.mu.Unlock()
}

// SetLatency delays every batch of commands on its way to Redis by d; 0
// removes the delay.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// DropReplies makes the proxy treat the next n script commands (EVAL,
// EVALSHA and their read-only forms) that the rule passes as DropReplyCut:
// Redis runs each, its reply is dropped and its connection cut.
func (p *Proxy) DropReplies(n int) {
	p.mu.Lock()
	p.dropNext += n
	p.mu.Unlock()
}

// Events delivers an Event for every command the proxy did not pass. Events
// that nobody reads in time are dropped once the buffer is full.
func (p *Proxy) Events() <-chan Event { return p.events }

// CutAll closes every open connection, both sides, at once, and returns how
// many it cut. New connections are accepted as before.
func (p *Proxy) CutAll() int {
	p.mu.Lock()
	cs := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	for _, c := range cs {
		c.cut()
	}
	return len(cs)
}

// Close stops listening, cuts every connection and waits for the proxy's
// goroutines. Closing twice is a no-op.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.CutAll()
	p.wg.Wait()
	if err != nil {
		return fmt.Errorf("faultproxy: close: %w", err)
	}
	return nil
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.DialTimeout("tcp", p.target, dialTimeout)
		if err != nil {
			_ = c.Close()
			continue
		}
		pc := &conn{p: p, c: c, s: s, queue: make(chan pending, 1<<16)}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = c.Close()
			_ = s.Close()
			return
		}
		p.conns[pc] = struct{}{}
		// Added under mu, which Close takes before it waits: an Add never
		// runs concurrently with the Wait.
		p.wg.Add(2)
		p.mu.Unlock()
		go pc.up()
		go pc.down()
	}
}

// decide is what happens to cmd: replication turns the connection raw,
// then the rule decides, then a pending DropReplies budget applies to
// scripts the rule passed.
func (p *Proxy) decide(cmd []string) (Action, time.Duration) {
	name := ""
	if len(cmd) > 0 {
		name = strings.ToUpper(cmd[0])
	}
	if name == "PSYNC" || name == "SYNC" {
		return rawStream, 0
	}
	p.mu.Lock()
	rule, lat := p.rule, p.latency
	p.mu.Unlock()
	a := Pass
	if rule != nil {
		a = rule(cmd)
	}
	if a == Pass && strings.HasPrefix(name, "EVAL") {
		p.mu.Lock()
		if p.dropNext > 0 {
			p.dropNext--
			a = DropReplyCut
		}
		p.mu.Unlock()
	}
	return a, lat
}

func (p *Proxy) event(a Action, cmd []string) {
	kind, key := ScriptKind(cmd)
	select {
	case p.events <- Event{Action: a, Kind: kind, Key: key}:
	default:
	}
}

// pending is a forwarded command awaiting its reply.
type pending struct {
	a   Action
	cmd []string
}

// conn is one client connection and its connection to Redis.
type conn struct {
	p     *Proxy
	c, s  net.Conn     // client side, Redis side
	queue chan pending // per forwarded command, in order: what to do with its reply
	once  sync.Once
}

func (pc *conn) cut() {
	pc.once.Do(func() {
		_ = pc.c.Close()
		_ = pc.s.Close()
		pc.p.mu.Lock()
		delete(pc.p.conns, pc)
		pc.p.mu.Unlock()
	})
}

// up carries commands from the client to Redis.
func (pc *conn) up() {
	defer pc.p.wg.Done()
	defer pc.cut()
	r := bufio.NewReader(pc.c)
	w := bufio.NewWriter(pc.s)
	for {
		raw, cmd, err := readCommand(r)
		if err != nil {
			return
		}
		a, lat := pc.p.decide(cmd)
		if a == HoldCommand {
			_ = w.Flush()
			pc.p.event(a, cmd)
			// Swallow the rest: Redis sees nothing more of this connection.
			_, _ = io.Copy(io.Discard, r)
			return
		}
		pc.queue <- pending{a, cmd}
		if a != Pass && a != rawStream {
			pc.p.event(a, cmd)
		}
		if _, err := w.Write(raw); err != nil {
			return
		}
		if a == rawStream {
			if w.Flush() == nil {
				_, _ = io.Copy(pc.s, r)
			}
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
func (pc *conn) down() {
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
			var pd pending
			select {
			case pd = <-pc.queue:
			default:
				return // a reply without a command: give up on this connection
			}
			switch pd.a {
			case HoldReply:
				_ = w.Flush()
				_, _ = io.Copy(io.Discard, r)
				return
			case DropReplyCut:
				_ = w.Flush()
				pc.p.mu.Lock()
				f := pc.p.dropped
				pc.p.mu.Unlock()
				if f != nil {
					f(pd.cmd)
				}
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
