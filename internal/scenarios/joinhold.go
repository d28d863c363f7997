package scenarios

import (
	"context"
	"encoding/binary"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// Kafka API keys of the requests a requestHold delays.
const (
	apiFetch                  int16 = 1
	apiJoinGroup              int16 = 11
	apiConsumerGroupHeartbeat int16 = 68
)

// requestHold is a client-side fault injector: a kgo.Dialer whose
// connections delay chosen requests. It works on a real broker and on kfake
// alike, since it sits in the client. Plaintext only (it reads the request
// frames on the wire). Two kinds of hold:
//
//   - a write hold (arm): while a request kind is armed, every write of a
//     request of that kind waits until it is released. kgo writes one whole
//     request frame per Write (broker.go, writeConn: one conn.Write of the
//     appended request) from a single request loop per broker, so a held
//     write also holds every later request of that client to that broker
//     (heartbeats, fetches, commits) until it goes out;
//   - a response hold (armResponses): while armed, reads on every connection
//     that has carried a request of that kind wait. kgo gives fetches a
//     connection of their own (cxnFetch), so holding the responses of Fetch
//     starves the client's consumption without touching its other requests.
//
// A hold honours the connection's deadline as a real socket would: kgo sets
// one before every write and read (its request timeout overhead, plus the
// request's own timeout for reads) and moves it to now when the request's
// context is cancelled (a fetch session stopped by a revoke); the operation
// then fails with a timeout, kgo kills the connection and retries on a new
// one — held again while armed. The frame scanner follows frames across
// writes, so a split frame is never misread.
type requestHold struct {
	d net.Dialer

	mu         sync.Mutex
	armed      map[int16]chan struct{} // write holds, closed on release
	armedReads map[int16]chan struct{} // response holds, closed on release
	held       map[int16]int           // writes held so far, per api key
	heldReads  map[int16]int           // reads held so far, per api key
	changed    chan struct{}           // closed and replaced whenever a count changes
}

func newRequestHold() *requestHold {
	return &requestHold{
		armed: map[int16]chan struct{}{}, armedReads: map[int16]chan struct{}{},
		held: map[int16]int{}, heldReads: map[int16]int{}, changed: make(chan struct{}),
	}
}

// dial is the kgo.Dialer.
func (h *requestHold) dial(ctx context.Context, network, host string) (net.Conn, error) {
	c, err := h.d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return newHeldConn(c, h), nil
}

func armIn(m map[int16]chan struct{}, keys []int16) {
	for _, k := range keys {
		if m[k] == nil {
			m[k] = make(chan struct{})
		}
	}
}

func releaseIn(m map[int16]chan struct{}, keys []int16) {
	for _, k := range keys {
		if ch := m[k]; ch != nil {
			close(ch)
			delete(m, k)
		}
	}
}

// arm makes every later write of these requests wait for release.
func (h *requestHold) arm(keys ...int16) {
	h.mu.Lock()
	defer h.mu.Unlock()
	armIn(h.armed, keys)
}

// release lets the held and later writes of these requests through.
func (h *requestHold) release(keys ...int16) {
	h.mu.Lock()
	defer h.mu.Unlock()
	releaseIn(h.armed, keys)
}

// armResponses makes every later read on a connection that has carried
// one of these requests wait for releaseResponses.
func (h *requestHold) armResponses(keys ...int16) {
	h.mu.Lock()
	defer h.mu.Unlock()
	armIn(h.armedReads, keys)
}

// releaseResponses lets the reads held by armResponses through.
func (h *requestHold) releaseResponses(keys ...int16) {
	h.mu.Lock()
	defer h.mu.Unlock()
	releaseIn(h.armedReads, keys)
}

// releaseAll releases every hold.
func (h *requestHold) releaseAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range h.armed {
		releaseIn(h.armed, []int16{k})
	}
	for k := range h.armedReads {
		releaseIn(h.armedReads, []int16{k})
	}
}

// gate returns the channel an operation of key waits on, nil when not
// armed, and counts the held operation.
func (h *requestHold) gate(armed map[int16]chan struct{}, held map[int16]int, key int16) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := armed[key]
	if ch != nil {
		held[key]++
		close(h.changed)
		h.changed = make(chan struct{})
	}
	return ch
}

// awaitHeld waits until more than n writes of key have been held.
func (h *requestHold) awaitHeld(t *testing.T, key int16, n int, timeout time.Duration, what string) {
	t.Helper()
	h.await(t, h.held, key, n, timeout, what)
}

// awaitHeldResponse waits until more than n reads on connections that
// carried key have been held.
func (h *requestHold) awaitHeldResponse(t *testing.T, key int16, n int, timeout time.Duration, what string) {
	t.Helper()
	h.await(t, h.heldReads, key, n, timeout, what)
}

func (h *requestHold) await(t *testing.T, counts map[int16]int, key int16, n int, timeout time.Duration, what string) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		h.mu.Lock()
		got, changed := counts[key], h.changed
		h.mu.Unlock()
		if got > n {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("timed out after %s waiting for %s (api key %d: %d held)", timeout, what, key, got)
		}
	}
}

// heldConn is one connection of a requestHold.
type heldConn struct {
	net.Conn
	h *requestHold

	wmu  sync.Mutex // serializes Write, which owns scan
	scan frameScanner

	mu      sync.Mutex
	carried map[int16]bool // request kinds written on this connection

	rdl, wdl deadline

	closeOnce sync.Once
	closed    chan struct{}
}

func newHeldConn(c net.Conn, h *requestHold) *heldConn {
	return &heldConn{Conn: c, h: h, carried: map[int16]bool{},
		rdl: deadline{changed: make(chan struct{})}, wdl: deadline{changed: make(chan struct{})}, closed: make(chan struct{})}
}

func (c *heldConn) Write(b []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for _, key := range c.scan.starts(b) {
		c.mu.Lock()
		c.carried[key] = true
		c.mu.Unlock()
		if rel := c.h.gate(c.h.armed, c.h.held, key); rel != nil {
			if err := c.wait(rel, &c.wdl, "write"); err != nil {
				return 0, err // kgo kills a connection whose write failed: the scan state dies with it
			}
		}
	}
	return c.Conn.Write(b)
}

func (c *heldConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	var keys []int16
	for k := range c.carried {
		keys = append(keys, k)
	}
	c.mu.Unlock()
	for _, key := range keys {
		if rel := c.h.gate(c.h.armedReads, c.h.heldReads, key); rel != nil {
			if err := c.wait(rel, &c.rdl, "read"); err != nil {
				return 0, err
			}
		}
	}
	return c.Conn.Read(b)
}

// deadline is one direction's deadline, as last set by the client.
type deadline struct {
	mu      sync.Mutex
	at      time.Time
	changed chan struct{} // closed and replaced on every change
}

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.at = t
	close(d.changed)
	d.changed = make(chan struct{})
}

func (d *deadline) load() (time.Time, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at, d.changed
}

// wait blocks until rel is closed, the connection closes or dl passes.
func (c *heldConn) wait(rel <-chan struct{}, dl *deadline, op string) error {
	timeout := &net.OpError{Op: op, Net: "tcp", Addr: c.RemoteAddr(), Err: os.ErrDeadlineExceeded}
	for {
		at, changed := dl.load()
		var expired <-chan time.Time
		var timer *time.Timer
		if !at.IsZero() {
			d := time.Until(at)
			if d <= 0 {
				return timeout
			}
			timer = time.NewTimer(d)
			expired = timer.C
		}
		var err error
		again := false
		select {
		case <-rel:
		case <-c.closed:
			err = net.ErrClosed
		case <-changed:
			again = true
		case <-expired:
			err = timeout
		}
		if timer != nil {
			timer.Stop()
		}
		if !again {
			return err
		}
	}
}

func (c *heldConn) SetWriteDeadline(t time.Time) error {
	c.wdl.set(t)
	return c.Conn.SetWriteDeadline(t)
}

func (c *heldConn) SetReadDeadline(t time.Time) error {
	c.rdl.set(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *heldConn) SetDeadline(t time.Time) error {
	c.wdl.set(t)
	c.rdl.set(t)
	return c.Conn.SetDeadline(t)
}

func (c *heldConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// frameScanner follows Kafka request frames across writes: each frame is a
// 4-byte big-endian size of the rest, then the request header, whose first
// field is the int16 api key.
type frameScanner struct {
	hdr  [6]byte
	nhdr int
	left int64 // bytes of the current frame after its first 6 not yet seen
}

// starts returns the api keys of the frames whose first 6 bytes complete
// in b, in order.
func (s *frameScanner) starts(b []byte) []int16 {
	var keys []int16
	for len(b) > 0 {
		if s.left > 0 {
			n := min(int64(len(b)), s.left)
			s.left -= n
			b = b[n:]
			continue
		}
		n := copy(s.hdr[s.nhdr:], b)
		s.nhdr += n
		b = b[n:]
		if s.nhdr < len(s.hdr) {
			break
		}
		size := int64(int32(binary.BigEndian.Uint32(s.hdr[:4])))
		keys = append(keys, int16(binary.BigEndian.Uint16(s.hdr[4:6])))
		s.left = max(size-2, 0)
		s.nhdr = 0
	}
	return keys
}
