package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// ErrorReply is an error reply of the server (a RESP "-ERR ..." line).
type ErrorReply string

func (e ErrorReply) Error() string { return "redistest: server replied: " + string(e) }

// do sends one command on a fresh connection and reads one reply: test set-up
// is rare enough that a connection per command costs nothing worth saving.
func do(addr string, timeout time.Duration, args ...string) (any, error) {
	return doAll(addr, timeout, [][]string{args})
}

// doAll sends commands on one fresh connection and returns the last reply;
// an error reply to an earlier one is returned as the error.
func doAll(addr string, timeout time.Duration, cmds [][]string) (any, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	w := bufio.NewWriter(c)
	for _, args := range cmds {
		fmt.Fprintf(w, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(w, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	r := bufio.NewReader(c)
	var v any
	for range cmds {
		if v, err = readReply(r); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// readReply reads one RESP2 reply: string for simple and bulk strings, int64,
// nil, []any, or an ErrorReply as the error.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, errors.New("redistest: malformed reply line")
	}
	kind, body := line[0], line[1:len(line)-2]
	switch kind {
	case '+':
		return body, nil
	case '-':
		return nil, ErrorReply(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = readReply(r); err != nil {
				var er ErrorReply
				if !errors.As(err, &er) {
					return nil, err
				}
				out[i] = er
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("redistest: unknown reply type %q", kind)
}
