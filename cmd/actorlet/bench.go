package main

import (
	"context"
	"fmt"
	"os"
)

// runBench drives a real actorlet process from the outside and measures it.
func runBench(_ context.Context, _ []string) int {
	fmt.Fprintln(os.Stderr, "actorlet bench: not implemented yet")
	return exitError
}
