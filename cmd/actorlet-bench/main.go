// Command actorlet-bench is actorlet's benchmark harness: it starts a real
// actorlet process (or measures one already running) and drives load at it
// from the outside (internal/bench). It is its own command so that the node
// agent links neither the harness, its load generators, the upstream
// side-by-side driver nor upstream's fake CRI runtime.
//
//	actorlet-bench --scenario NAME [--pods N] [--duration D] [--out FILE.json]
//	                                       measure a real actorlet process
//	actorlet-bench --against upstream [--pods N] ...
//	                                       the same load on actorlet and on the upstream kubelet
//	actorlet-bench fake-cri --listen unix:///path/fake.sock [--calls-file F]
//	                                       serve upstream's in-memory fake CRI runtime (the bench
//	                                       against upstream; its CRI calls counted by method into F
//	                                       at each SIGUSR1)
//
// The agent it starts is --actorlet, by default the actorlet binary in the
// same directory as this one (make bench builds both into bin/), else the
// actorlet on PATH.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
)

const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// helpColumns is the width --help wraps the flags' help at.
const helpColumns = 100

// stdout takes what --help prints (tests replace it).
var stdout io.Writer = os.Stdout

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) > 0 {
		switch args[0] {
		case "fake-cri":
			return runFakeCRI(ctx, args[1:])
		case "bench":
			// `actorlet bench ...` with the binary's name changed.
			fmt.Fprintln(os.Stderr, "actorlet-bench: no bench subcommand: the flags follow the command (actorlet-bench --scenario NAME ...)")
			return exitUsage
		}
	}
	return runBench(ctx, args)
}

// usages names each flag set's command lines, printed above its flags by
// --help.
var usages = map[string]string{
	"actorlet-bench": "Usage:\n" +
		"  actorlet-bench [flags]            measure a real actorlet process\n" +
		"  actorlet-bench fake-cri [flags]   serve upstream's fake CRI runtime (its flags: fake-cri --help)\n",
	"actorlet-bench fake-cri": "Usage:\n" +
		"  actorlet-bench fake-cri --listen unix:///path/fake.sock [flags]\n",
}

// parseFlags parses args into fs. --help prints the usage and the flags,
// wrapped at helpColumns, on stdout (exit 0); a bad flag or a stray
// argument is a usage error on stderr (exit 2).
func parseFlags(fs *pflag.FlagSet, args []string) (done bool, code int) {
	fs.SetOutput(io.Discard) // pflag's own usage: replaced by help below
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		fmt.Fprintf(stdout, "%s\nFlags:\n%s", usages[fs.Name()], fs.FlagUsagesWrapped(helpColumns))
		return true, exitOK
	case err != nil:
		fmt.Fprintf(os.Stderr, "%s: %v\nRun '%s --help' for usage.\n", fs.Name(), err, fs.Name())
		return true, exitUsage
	case fs.NArg() > 0:
		fmt.Fprintf(os.Stderr, "%s: unexpected arguments: %v\nRun '%s --help' for usage.\n", fs.Name(), fs.Args(), fs.Name())
		return true, exitUsage
	}
	return false, exitOK
}
