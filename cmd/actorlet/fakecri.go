package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/cri-client/pkg/fake"
)

// runFakeCRI serves upstream's in-memory fake CRI runtime (k8s.io/cri-api's
// FakeRuntimeService and FakeImageService, served by k8s.io/cri-client's
// fake RemoteRuntime) on a unix socket until ctx is done: the runtime of
// `actorlet bench --against upstream`, the same for actorlet and the
// upstream kubelet. Its containers run nothing: a started container is
// RUNNING until stopped, an image is present once pulled.
func runFakeCRI(ctx context.Context, args []string) int {
	fs := pflag.NewFlagSet("actorlet fake-cri", pflag.ContinueOnError)
	listen := fs.String("listen", "", "Endpoint to serve CRI v1 on: unix:///path (required).")
	imageSize := fs.Uint64("image-size", 1<<20, "Size in bytes of every image the fake pulls (the upstream kubelet refuses an image of size 0).")
	if done, code := parseFlags(fs, args); done {
		return code
	}
	path, ok := strings.CutPrefix(*listen, "unix://")
	if !ok || path == "" {
		fmt.Fprintf(os.Stderr, "actorlet fake-cri: --listen %q: want unix:///path\n", *listen)
		return exitUsage
	}
	// A socket left by a killed run would make the listen fail.
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		fmt.Fprintf(os.Stderr, "actorlet fake-cri: remove the old socket: %v\n", err)
		return exitError
	}
	rt := fake.NewFakeRemoteRuntime()
	rt.ImageService.SetFakeImageSize(*imageSize)
	if err := rt.Start(*listen); err != nil {
		fmt.Fprintf(os.Stderr, "actorlet fake-cri: %v\n", err)
		return exitError
	}
	slog.Info("fake CRI runtime listening", "endpoint", *listen)
	<-ctx.Done()
	rt.Stop()
	_ = os.Remove(path)
	return exitOK
}
