package scenarios

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"testing"
	"time"
)

// frame is a request frame of api key key with a body of n bytes after the
// key (version, correlation id, client id, ... all zero here).
func frame(key int16, n int) []byte {
	b := make([]byte, 6+n)
	binary.BigEndian.PutUint32(b, uint32(2+n))
	binary.BigEndian.PutUint16(b[4:], uint16(key))
	return b
}

func TestFrameScannerFollowsFramesAcrossWrites(t *testing.T) {
	stream := slices.Concat(frame(apiJoinGroup, 40), frame(apiFetch, 0), frame(3, 7), frame(apiConsumerGroupHeartbeat, 300))
	want := []int16{apiJoinGroup, apiFetch, 3, apiConsumerGroupHeartbeat}
	for _, chunk := range []int{1, 2, 5, 6, 7, 13, len(stream)} {
		var s frameScanner
		var got []int16
		for b := stream; len(b) > 0; {
			n := min(chunk, len(b))
			got = append(got, s.starts(b[:n])...)
			b = b[n:]
		}
		if !slices.Equal(got, want) {
			t.Errorf("writes of %d bytes: keys %v, want %v", chunk, got, want)
		}
	}
}

// heldPipe returns a heldConn over one end of a pipe whose other end is
// drained into got.
func heldPipe(t *testing.T, h *requestHold) (*heldConn, <-chan []byte) {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	got := make(chan []byte, 16)
	go func() {
		buf := make([]byte, 1024)
		for {
			n, err := b.Read(buf)
			if err != nil {
				return
			}
			got <- slices.Clone(buf[:n])
		}
	}()
	return newHeldConn(a, h), got
}

func TestRequestHoldDelaysArmedRequestsUntilReleased(t *testing.T) {
	h := newRequestHold()
	c, got := heldPipe(t, h)
	h.arm(apiJoinGroup)
	if _, err := c.Write(frame(apiFetch, 4)); err != nil { // not armed: through at once
		t.Fatal(err)
	}
	if b := <-got; int16(binary.BigEndian.Uint16(b[4:])) != apiFetch {
		t.Fatalf("first frame through: %x", b)
	}
	wrote := make(chan error, 1)
	go func() { _, err := c.Write(frame(apiJoinGroup, 4)); wrote <- err }()
	h.awaitHeld(t, apiJoinGroup, 0, 10*time.Second, "the join held")
	select {
	case err := <-wrote:
		t.Fatalf("held write returned before the release: %v", err)
	case b := <-got:
		t.Fatalf("held frame reached the other end before the release: %x", b)
	default:
	}
	h.release(apiJoinGroup)
	if err := <-wrote; err != nil {
		t.Fatalf("released write: %v", err)
	}
	if b := <-got; int16(binary.BigEndian.Uint16(b[4:])) != apiJoinGroup {
		t.Fatalf("released frame: %x", b)
	}
}

func TestRequestHoldHonoursWriteDeadlineAndClose(t *testing.T) {
	h := newRequestHold()
	h.arm(apiFetch)

	// kgo moves the deadline to now when the request's context ends.
	c, _ := heldPipe(t, h)
	wrote := make(chan error, 1)
	go func() { _, err := c.Write(frame(apiFetch, 1)); wrote <- err }()
	h.awaitHeld(t, apiFetch, 0, 10*time.Second, "the fetch held")
	if err := c.SetWriteDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("held write after the deadline moved to now: %v, want a timeout", err)
	}

	c2, _ := heldPipe(t, h)
	go func() { _, err := c2.Write(frame(apiFetch, 1)); wrote <- err }()
	h.awaitHeld(t, apiFetch, 1, 10*time.Second, "the second fetch held")
	c2.Close()
	if err := <-wrote; !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("held write after close: %v, want closed", err)
	}
}

func TestRequestHoldDelaysResponsesOnConnectionsThatCarriedTheRequest(t *testing.T) {
	h := newRequestHold()
	fetchConn, fetchPeer := net.Pipe()
	otherConn, otherPeer := net.Pipe()
	t.Cleanup(func() { fetchConn.Close(); fetchPeer.Close(); otherConn.Close(); otherPeer.Close() })
	fc, oc := newHeldConn(fetchConn, h), newHeldConn(otherConn, h)
	go io.Copy(io.Discard, fetchPeer)
	go io.Copy(io.Discard, otherPeer)
	if _, err := fc.Write(frame(apiFetch, 4)); err != nil {
		t.Fatal(err)
	}
	if _, err := oc.Write(frame(3, 4)); err != nil {
		t.Fatal(err)
	}
	h.armResponses(apiFetch)

	// The connection that never carried a fetch reads at once.
	go otherPeer.Write([]byte("meta"))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(oc, buf); err != nil || string(buf) != "meta" {
		t.Fatalf("read on the other connection: %q, %v", buf, err)
	}

	read := make(chan string, 1)
	go func() {
		b := make([]byte, 5)
		_, err := io.ReadFull(fc, b)
		read <- fmt.Sprintf("%s %v", b, err)
	}()
	h.awaitHeldResponse(t, apiFetch, 0, 10*time.Second, "the fetch response held")
	wrote := make(chan error, 1)
	go func() { _, err := fetchPeer.Write([]byte("fetch")); wrote <- err }()
	select {
	case got := <-read:
		t.Fatalf("held read returned before the release: %s", got)
	case <-wrote:
		t.Fatal("the response was consumed before the release")
	case <-time.After(50 * time.Millisecond): // an absence: bounded, asserts nothing about speed
	}
	h.releaseResponses(apiFetch)
	if got := <-read; got != "fetch <nil>" {
		t.Fatalf("released read: %s", got)
	}
}
