package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/cri-client/pkg/fake"

	"github.com/actorlet/actorlet/internal/bench"
)

// runFakeCRI serves upstream's in-memory fake CRI runtime (k8s.io/cri-api's
// FakeRuntimeService and FakeImageService, served by k8s.io/cri-client's
// fake RemoteRuntime) on a unix socket until ctx is done: the runtime of
// `actorlet-bench --against upstream`, the same for actorlet and the
// upstream kubelet. Its containers run nothing: a started container is
// RUNNING until stopped, an image is present once pulled.
func runFakeCRI(ctx context.Context, args []string) int {
	fs := pflag.NewFlagSet("actorlet-bench fake-cri", pflag.ContinueOnError)
	listen := fs.String("listen", "", "Endpoint to serve CRI v1 on: unix:///path (required).")
	imageSize := fs.Uint64("image-size", 1<<20, "Size in bytes of every image the fake pulls (the upstream kubelet refuses an image of size 0).")
	callsFile := fs.String("calls-file", "", "On SIGUSR1, write the CRI calls served so far, counted by method, to this file as JSON ({\"seq\": N, \"calls\": {...}}; N counts the signals), replacing it whole.")
	if done, code := parseFlags(fs, args); done {
		return code
	}
	path, ok := strings.CutPrefix(*listen, "unix://")
	if !ok || path == "" {
		fmt.Fprintf(os.Stderr, "actorlet-bench fake-cri: --listen %q: want unix:///path\n", *listen)
		return exitUsage
	}
	// A socket left by a killed run would make the listen fail.
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		fmt.Fprintf(os.Stderr, "actorlet-bench fake-cri: remove the old socket: %v\n", err)
		return exitError
	}
	rt := fake.NewFakeRemoteRuntime()
	if *callsFile != "" {
		// Caught from before the socket listens: a SIGUSR1 that came
		// first would end the process (its default action).
		usr1 := make(chan os.Signal, 1)
		signal.Notify(usr1, syscall.SIGUSR1)
		defer signal.Stop(usr1)
		go func() {
			for seq := 1; ; seq++ {
				select {
				case <-ctx.Done():
					return
				case <-usr1:
					if err := writeCalls(*callsFile, seq, criCalls(rt)); err != nil {
						slog.Error("fake CRI runtime: calls not written", "file", *callsFile, "err", err)
					}
				}
			}
		}()
	}
	rt.ImageService.SetFakeImageSize(*imageSize)
	if err := rt.Start(*listen); err != nil {
		fmt.Fprintf(os.Stderr, "actorlet-bench fake-cri: %v\n", err)
		return exitError
	}
	slog.Info("fake CRI runtime listening", "endpoint", *listen)
	<-ctx.Done()
	rt.Stop()
	_ = os.Remove(path)
	return exitOK
}

// criCalls counts the calls rt served so far by CRI method (the fakes
// record each by name; Close and the streaming calls they do not record
// are not counted).
func criCalls(rt *fake.RemoteRuntime) map[string]int {
	n := map[string]int{}
	for _, c := range rt.RuntimeService.GetCalls() {
		n[c]++
	}
	rt.ImageService.Lock()
	for _, c := range rt.ImageService.Called {
		n[c]++
	}
	rt.ImageService.Unlock()
	delete(n, "Close")
	return n
}

// writeCalls replaces path with the counts (a temporary file renamed over
// it: a reader sees the last whole answer).
func writeCalls(path string, seq int, calls map[string]int) error {
	b, err := json.Marshal(bench.FakeCRICalls{Seq: seq, Calls: calls})
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(b)
	if err := errors.Join(werr, tmp.Close()); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	return nil
}
