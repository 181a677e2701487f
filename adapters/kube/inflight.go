package kube

import (
	"io"
	"net/http"
	"sync"
)

// DefaultMaxInFlight bounds the agent's API requests in flight, watches
// aside. An HTTP/2 connection carries at most the server's
// MaxConcurrentStreams (kube-apiserver v1.36: 100 unless
// --http2-max-streams-per-connection says otherwise; watches hold one
// each for their life). Past it the transport dials one more TLS
// connection for each request that finds no free stream, and closes most
// of them again: a full handshake on both sides, for nothing (130 of them
// in a 1,000-pod start unthrottled, 10 % of the agent's CPU). Requests past
// the bound wait here for a slot instead.
const DefaultMaxInFlight = 80

// inFlight is a round tripper that lets at most cap(slots) requests other
// than watches be in flight at once. A slot is held until the response
// body is closed (the stream is in use until then).
type inFlight struct {
	next  http.RoundTripper
	slots chan struct{}
}

// limitInFlight returns a WrapTransport that bounds requests in flight to
// n across every transport it wraps (the configs copied from one keep the
// same bound).
func limitInFlight(n int) func(http.RoundTripper) http.RoundTripper {
	slots := make(chan struct{}, n)
	return func(rt http.RoundTripper) http.RoundTripper {
		return &inFlight{next: rt, slots: slots}
	}
}

func isWatch(req *http.Request) bool {
	q := req.URL.Query()
	w := q.Get("watch")
	return w == "true" || w == "1"
}

// WrappedRoundTripper lets client-go reach the transport underneath (it
// cancels requests and closes idle connections through it).
func (l *inFlight) WrappedRoundTripper() http.RoundTripper { return l.next }

func (l *inFlight) RoundTrip(req *http.Request) (*http.Response, error) {
	if isWatch(req) {
		return l.next.RoundTrip(req)
	}
	select {
	case l.slots <- struct{}{}:
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	resp, err := l.next.RoundTrip(req)
	if err != nil || resp == nil || resp.Body == nil {
		<-l.slots
		return resp, err
	}
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: func() { <-l.slots }}
	return resp, nil
}

// releasingBody gives the slot back once, when the body is closed.
type releasingBody struct {
	io.ReadCloser
	once    sync.Once
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}
