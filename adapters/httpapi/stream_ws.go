package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rcconst "k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/client-go/tools/remotecommand"
	clientspdy "k8s.io/client-go/transport/spdy"
	clientexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream/spdy"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// Newer clients (client-go's WebSocket executor, kubectl with WebSockets to
// the kubelet) speak the v5.channel.k8s.io WebSocket protocol, which runtime
// streaming servers do not: as the upstream kubelet does, actorlet accepts
// the WebSocket itself and runs the exec or attach against the runtime's
// URL over SPDY, copying the streams and the final status across. Older
// WebSocket protocols (v4 and before) and SPDY are proxied unchanged.

const (
	wsIdleTimeout       = 4 * time.Hour // as the runtimes' streaming servers
	wsStatusWriteWindow = 10 * time.Second
	spdyPingPeriod      = 5 * time.Second
)

// isWebSocketV5 tells whether r asks for the v5 WebSocket protocol.
func isWebSocketV5(r *http.Request) bool {
	return wsstream.IsWebSocketRequestWithStreamCloseProtocol(r)
}

// translateWebSocket serves one exec or attach for a v5 WebSocket client
// with the runtime's SPDY streaming URL u.
func (h *streaming) translateWebSocket(w http.ResponseWriter, r *http.Request, u *url.URL, o streamOptions) {
	channels := make([]wsstream.ChannelType, 5)
	channels[rcconst.StreamStdIn] = wsChannel(o.stdin, wsstream.ReadChannel)
	channels[rcconst.StreamStdOut] = wsChannel(o.stdout, wsstream.WriteChannel)
	channels[rcconst.StreamStdErr] = wsChannel(o.stderr, wsstream.WriteChannel)
	channels[rcconst.StreamErr] = wsstream.WriteChannel
	channels[rcconst.StreamResize] = wsstream.ReadChannel
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{
		rcconst.StreamProtocolV5Name: {Binary: true, Channels: channels},
	})
	conn.SetIdleTimeout(wsIdleTimeout)
	_, streams, err := conn.Open(w, r) // answers the client itself on failure
	if err != nil {
		h.log.Info("websocket upgrade failed", "path", r.URL.Path, "err", err)
		return
	}
	defer func() { _ = conn.Close() }()

	// The client waits for a first (empty) message on its lowest channel.
	first := rcconst.StreamErr
	switch {
	case o.stdout:
		first = rcconst.StreamStdOut
	case o.stderr:
		first = rcconst.StreamStdErr
	}
	if _, err := streams[first].Write(nil); err != nil {
		return
	}
	writeStatus := func(st metav1.Status) {
		b, err := json.Marshal(st)
		if err != nil {
			return
		}
		conn.SetWriteDeadline(wsStatusWriteWindow)
		_, _ = streams[rcconst.StreamErr].Write(b)
	}

	rt, err := spdy.NewRoundTripperWithConfig(spdy.RoundTripperConfig{PingPeriod: spdyPingPeriod})
	if err != nil {
		writeStatus(apierrors.NewInternalError(err).Status())
		return
	}
	ex, err := remotecommand.NewSPDYExecutorRejectRedirects(rt, clientspdy.NewUpgraderForStreaming(rt), http.MethodPost, u)
	if err != nil {
		writeStatus(apierrors.NewInternalError(err).Status())
		return
	}
	opts := remotecommand.StreamOptions{Tty: o.tty}
	if o.stdin {
		opts.Stdin = streams[rcconst.StreamStdIn]
	}
	if o.stdout {
		opts.Stdout = streams[rcconst.StreamStdOut]
	}
	if o.stderr {
		opts.Stderr = streams[rcconst.StreamStdErr]
	}
	if o.tty {
		opts.TerminalSizeQueue = newSizeQueue(r, streams[rcconst.StreamResize])
	}
	err = ex.StreamWithContext(r.Context(), opts)
	writeStatus(streamStatus(err))
}

func wsChannel(on bool, t wsstream.ChannelType) wsstream.ChannelType {
	if on {
		return t
	}
	return wsstream.IgnoreChannel
}

// streamStatus is the status the v5 client reads at the end: success, the
// command's exit code, or the failure.
func streamStatus(err error) metav1.Status {
	var exitErr clientexec.ExitError
	var statusErr *apierrors.StatusError
	switch {
	case err == nil:
		return metav1.Status{Status: metav1.StatusSuccess}
	case errors.As(err, &exitErr) && exitErr.Exited():
		return metav1.Status{
			Status:  metav1.StatusFailure,
			Reason:  rcconst.NonZeroExitCodeReason,
			Message: fmt.Sprintf("command terminated with non-zero exit code: %v", exitErr),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{
				{Type: rcconst.ExitCodeCauseType, Message: strconv.Itoa(exitErr.ExitStatus())},
			}},
		}
	case errors.As(err, &statusErr):
		return statusErr.Status()
	default:
		return apierrors.NewInternalError(err).Status()
	}
}

// sizeQueue hands the client's terminal resizes (JSON on the resize
// channel) to the SPDY executor.
type sizeQueue struct {
	c chan remotecommand.TerminalSize
}

func newSizeQueue(r *http.Request, stream io.Reader) *sizeQueue {
	q := &sizeQueue{c: make(chan remotecommand.TerminalSize)}
	go func() {
		defer close(q.c)
		dec := json.NewDecoder(stream)
		for {
			var s remotecommand.TerminalSize
			if err := dec.Decode(&s); err != nil {
				return
			}
			select {
			case q.c <- s:
			case <-r.Context().Done():
				return
			}
		}
	}()
	return q
}

func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	s, ok := <-q.c
	if !ok {
		return nil
	}
	return &s
}
