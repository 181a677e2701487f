// Command actorlet is a Kubernetes node agent built as an actor system.
//
//	actorlet [flags]                       run the node agent
//	actorlet simruntime --listen unix:///path/sim.sock [sim flags]
//	                                       run the simulated CRI runtime alone
//	actorlet bench --scenario NAME [--pods N] [--duration D] [--out FILE.json]
//	                                       measure a real actorlet process
package main

import (
	"context"
	"errors"
	"fmt"
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
		case "bench":
			return runBench(ctx, args[1:])
		}
	}
	return runAgent(ctx, args)
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
