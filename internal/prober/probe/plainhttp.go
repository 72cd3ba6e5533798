package probe

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// plainHTTP is the round tripper of plain-HTTP probes: one connection per
// request, written and read on the probe's own goroutine with net/http's
// wire format (Request.Write, ReadResponse), closed with the body. It is
// what http.Transport does with keep-alives off, without what a probe
// does not use and pays for on every request: the connection pool's
// bookkeeping, a dial goroutine and the read and write goroutines of each
// connection with their 4 KiB buffers (net/http's share was a quarter of
// berth's CPU at 100 pods probed every second; BenchmarkHTTPProbe: 7.6
// against 19 KiB and 100 against 138 allocations per probe, the test
// server's included). HTTPS goes to tls, the shared Transport: its
// handshake dwarfs the rest.
//
// The request on the wire is the same (http.Transport writes it with
// Request.Write too, and adds "Connection: close" when keep-alives are
// off); the http.Client on top still follows redirects.
type plainHTTP struct {
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
	tls  http.RoundTripper
}

// A probe's buffers are reused across probes: hundreds of probes a second
// would otherwise allocate two 4 KiB buffers each.
var (
	probeReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}
	probeWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 1<<10) }}
)

func (t *plainHTTP) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" {
		return t.tls.RoundTrip(req)
	}
	ctx := req.Context()
	conn, err := t.dial(ctx, "tcp", canonicalAddr(req))
	if err != nil {
		return nil, err
	}
	// A context that ends (the probe's timeout) interrupts whatever read
	// or write is waiting. Not a deadline on the connection as well: it
	// could fire before the context's own timer, and the failure would
	// not read as a timeout.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*http.Response, error) {
		stop()
		_ = conn.Close()
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, err
	}
	bw := probeWriters.Get().(*bufio.Writer)
	bw.Reset(conn)
	// A redirect the client follows is a new request without Close set;
	// every request of a probe asks the server to close.
	out := *req
	out.Close = true
	err = out.Write(bw)
	if err == nil {
		// Write flushes only a buffer it made itself.
		err = bw.Flush()
	}
	bw.Reset(nil)
	probeWriters.Put(bw)
	if err != nil {
		return fail(err)
	}
	br := probeReaders.Get().(*bufio.Reader)
	br.Reset(conn)
	resp, err := readFinalResponse(br, req)
	if err != nil {
		br.Reset(nil)
		probeReaders.Put(br)
		return fail(err)
	}
	resp.Body = &plainBody{body: resp.Body, conn: conn, br: br, stop: stop}
	return resp, nil
}

// readFinalResponse reads the response to req, skipping informational
// ones (1xx but 101), as http.Transport does.
func readFinalResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
		_ = resp.Body.Close()
	}
}

// canonicalAddr is req's host and port, port 80 when the URL names none.
func canonicalAddr(req *http.Request) string {
	port := req.URL.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(req.URL.Hostname(), port)
}

// plainBody is a response body whose Close closes its connection and
// gives its buffer back.
type plainBody struct {
	body io.ReadCloser
	conn net.Conn
	br   *bufio.Reader
	stop func() bool
	once sync.Once
}

func (b *plainBody) Read(p []byte) (int, error) { return b.body.Read(p) }

func (b *plainBody) Close() error {
	b.once.Do(func() {
		b.stop()
		_ = b.conn.Close()
		// Only now, with the connection closed, is the reader no one's.
		b.br.Reset(nil)
		probeReaders.Put(b.br)
	})
	return nil
}
