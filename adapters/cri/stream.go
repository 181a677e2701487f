package cri

import (
	"context"
	"fmt"
	"net/url"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Operation names of the streaming calls (upstream's operation_type label).
const (
	opExec        = "exec"
	opAttach      = "attach"
	opPortForward = "port_forward"
)

// Exec asks the runtime to prepare a streaming exec (req: container, command,
// stdin, stdout, stderr, tty) and returns the URL of its streaming server, to
// which the caller proxies the client's upgraded connection. The URL is
// single use and short lived.
func (c *Client) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*url.URL, error) {
	id, cmd := req.GetContainerId(), req.GetCmd()
	if len(cmd) == 0 {
		return nil, fmt.Errorf("exec in container %s: %w", id, invalid("empty command"))
	}
	ctx, done := c.call(ctx, opExec, c.timeout)
	resp, err := c.runtime().Exec(ctx, req)
	u, err := streamURL(resp.GetUrl(), err)
	if err = done(err); err != nil {
		return nil, fmt.Errorf("exec %q in container %s: %w", cmd[0], id, err)
	}
	return u, nil
}

// Attach asks the runtime to prepare a streaming attach to a container's
// main process and returns the URL to proxy to.
func (c *Client) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*url.URL, error) {
	ctx, done := c.call(ctx, opAttach, c.timeout)
	resp, err := c.runtime().Attach(ctx, req)
	u, err := streamURL(resp.GetUrl(), err)
	if err = done(err); err != nil {
		return nil, fmt.Errorf("attach to container %s: %w", req.GetContainerId(), err)
	}
	return u, nil
}

// PortForward asks the runtime to prepare a port forward into pod sandbox
// podID and returns the URL to proxy to. ports may be empty: the client
// then names them in its streams (the SPDY port-forward protocol).
func (c *Client) PortForward(ctx context.Context, podID string, ports []int32) (*url.URL, error) {
	ctx, done := c.call(ctx, opPortForward, c.timeout)
	resp, err := c.runtime().PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: podID, Port: ports})
	u, err := streamURL(resp.GetUrl(), err)
	if err = done(err); err != nil {
		return nil, fmt.Errorf("port forward to pod sandbox %s: %w", podID, err)
	}
	return u, nil
}

// streamURL parses the URL a streaming call returned; an empty or
// malformed one is the runtime's fault (ErrUnknown).
func streamURL(raw string, err error) (*url.URL, error) {
	if err != nil {
		return nil, err
	}
	if raw == "" {
		return nil, unknown("empty streaming URL")
	}
	u, perr := url.Parse(raw)
	if perr != nil {
		return nil, unknown("streaming URL %q: %v", raw, perr)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, unknown("streaming URL %q: want http(s)://host/...", raw)
	}
	return u, nil
}
