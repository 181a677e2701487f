// Command actorlet is a Kubernetes node agent built as an actor system.
//
//	actorlet [flags]                       run the node agent
//	actorlet --version                     print the version
//	actorlet simruntime --listen unix:///path/sim.sock [sim flags]
//	                                       run the simulated CRI runtime alone
//
// The benchmark harness and upstream's fake CRI runtime are their own
// command, actorlet-bench (cmd/actorlet-bench): the agent links neither.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"syscall"

	"github.com/spf13/pflag"
)

const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// version is actorlet's version, set at build time with
// -ldflags "-X main.version=v0.3.0". Without it: the main module's version
// that Go records in the binary (from the VCS tag), else "dev" with the VCS
// revision Go records ("dev-0123456789ab", "-dirty" for a modified tree).
var version string

// stdout takes what --help and --version print (tests replace it).
var stdout io.Writer = os.Stdout

// versionString is what --version prints: actorlet <version> (<go version>).
func versionString() string {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok && v == "" {
		v = buildVersion(bi)
	}
	if v == "" {
		v = "dev"
	}
	return fmt.Sprintf("actorlet %s (%s)", v, runtime.Version())
}

// buildVersion is the version Go recorded in the binary, or "".
func buildVersion(bi *debug.BuildInfo) string {
	if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision" && len(s.Value) >= 12:
			rev = s.Value[:12]
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if rev == "" {
		return ""
	}
	return "dev-" + rev + dirty
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) > 0 {
		switch args[0] {
		case "simruntime":
			return runSimRuntime(ctx, args[1:])
		case "bench", "fake-cri":
			return movedToBench(os.Stderr, args[0])
		}
	}
	return runAgent(ctx, args)
}

// movedToBench answers the subcommands that left the agent for
// actorlet-bench: a usage error (exit 2) that names the new command,
// rather than running the agent with a stray argument.
func movedToBench(w io.Writer, sub string) int {
	newForm := "actorlet-bench [flags]"
	if sub == "fake-cri" {
		newForm = "actorlet-bench fake-cri [flags]"
	}
	fmt.Fprintf(w, "actorlet: %q is no longer part of the agent: run %s (cmd/actorlet-bench; make bench builds bin/actorlet-bench)\n", sub, newForm)
	return exitUsage
}

// parseFlags parses args into fs; a bad flag is a usage error (exit 2).
func parseFlags(fs *pflag.FlagSet, args []string) (done bool, code int) {
	fs.SetOutput(os.Stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return true, exitOK
		}
		fmt.Fprintf(os.Stderr, "%s: %v\nRun '%s --help' for usage.\n", fs.Name(), err, fs.Name())
		return true, exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "%s: unexpected arguments: %v\n", fs.Name(), fs.Args())
		return true, exitUsage
	}
	return false, exitOK
}
