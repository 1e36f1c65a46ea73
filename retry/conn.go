package retry

import (
	"crypto/tls"
	"net"
	"sync"
)

// conn is the net.Conn that every dial of an Executor returns. It counts the
// bytes handed to Write and can be sealed. Together these prove before_send:
// the count grows before the underlying Write starts, and seal, under the
// same mutex, makes every later Write fail without writing.
//
// An httptrace GotConn hook finds the conn the request is about to be
// written to (connOf) and notes its count. When the round trip fails, the
// conn is sealed and closed. If the count at the seal equals the count at
// GotConn, no request byte of the attempt has reached the socket and none
// ever will: BeforeSend; otherwise PostSend. A failure before GotConn (a
// refused dial, a context done before a connection was found) is
// BeforeSend. httptrace's WroteHeaders and WroteRequest callbacks are not
// used: they fire while bytes may still sit in a buffer. TLS handshake bytes
// are written before GotConn and are not request bytes.
//
// Bytes are counted when attempted, not when the kernel accepts them: a Write
// that fails still counts. This errs towards post_send, the safe side.
type conn struct {
	net.Conn

	mu        sync.Mutex
	attempted int64
	sealed    bool
}

func (c *conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.sealed {
		c.mu.Unlock()
		return 0, errSealed
	}
	c.attempted += int64(len(p))
	c.mu.Unlock()
	return c.Conn.Write(p)
}

// written reports the bytes attempted so far.
func (c *conn) written() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attempted
}

// seal makes every later Write fail without writing, closes the connection
// so that it never serves another request, and reports the bytes attempted
// before the seal.
func (c *conn) seal() int64 {
	c.mu.Lock()
	c.sealed = true
	n := c.attempted
	c.mu.Unlock()
	c.Conn.Close()
	return n
}

// connOf finds the counting conn under a connection that the transport
// reports in httptrace.GotConnInfo: the conn itself for http, or the one
// under the *tls.Conn for https. It returns nil for any other connection.
func connOf(nc net.Conn) *conn {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	c, _ := nc.(*conn)
	return c
}
