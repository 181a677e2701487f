package supervisors

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/actorlet/actorlet/messages"
)

// ChaosConfig configures the chaos injector.
type ChaosConfig struct {
	// Rate is the average number of crashes per second (a Poisson
	// process). Zero or less disables the injector.
	Rate float64
	// Seed seeds the random choices (intervals and victims).
	Seed int64
	// Kinds limits victims to these actor kinds (see KindOf). Empty means
	// every kind but root.
	Kinds []string
}

// ChaosKinds are the kinds ParseKinds accepts.
var ChaosKinds = []string{
	KindPod, KindProbe, KindPLEG, KindImage, KindStatus, KindNode, KindSource,
	KindVolume, KindEviction, KindDevice,
}

// ParseKinds parses a comma-separated list of actor kinds for chaos
// injection ("pod,probe"). Blank input gives nil. Unknown or empty names
// are an error; duplicates are dropped.
func ParseKinds(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		k := strings.ToLower(strings.TrimSpace(f))
		if k == "" {
			return nil, fmt.Errorf("chaos kinds %q: empty name", s)
		}
		if !slices.Contains(ChaosKinds, k) {
			return nil, fmt.Errorf("chaos kinds: unknown kind %q (valid: %s)", k, strings.Join(ChaosKinds, ", "))
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out, nil
}

// StartChaos starts a goroutine that, as a Poisson process of cfg.Rate
// events per second, picks a random live actor of cfg.Kinds from reg and
// sends it messages.ChaosPanic (the Chaos middleware then crashes it).
// Actors with a crash on its way or waiting for their restart (backoff)
// are not picked: crashes happen when injected, never queued behind a
// suspended mailbox to play back after chaos stopped. It
// returns at once; the goroutine ends when ctx is done. Nothing happens
// when cfg.Rate <= 0.
func StartChaos(ctx context.Context, sys *actor.ActorSystem, reg *Registry, cfg ChaosConfig, log *slog.Logger) {
	if cfg.Rate <= 0 || sys == nil || reg == nil {
		return
	}
	if log == nil {
		log = slog.Default()
	}
	kinds := slices.Clone(cfg.Kinds)
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(cfg.Seed)^0x9e3779b97f4a7c15))
	log.Info("chaos injector started", "rate", cfg.Rate, "seed", cfg.Seed, "kinds", kinds)
	go func() {
		timer := time.NewTimer(nextInterval(rng, cfg.Rate))
		defer timer.Stop()
		var crashes uint64
		for {
			select {
			case <-ctx.Done():
				log.Info("chaos injector stopped", "crashes", crashes)
				return
			case <-timer.C:
			}
			if pid := pickVictim(rng, reg, kinds); pid != nil {
				crashes++
				log.Debug("chaos: crashing actor", "pid", pid.Id, "kind", KindOf(pid))
				sys.Root.Send(pid, messages.ChaosPanic{Reason: fmt.Sprintf("injected #%d", crashes)})
			}
			timer.Reset(nextInterval(rng, cfg.Rate))
		}
	}()
}

func nextInterval(rng *rand.Rand, rate float64) time.Duration {
	d := time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
	return max(d, time.Microsecond)
}

// pickVictim picks a random live actor of kinds that is not already
// crashing or backing off (see entry.chaosBusy) and marks it busy.
func pickVictim(rng *rand.Rand, reg *Registry, kinds []string) *actor.PID {
	live := reg.chaosVictims(kinds...)
	if len(kinds) == 0 {
		live = slices.DeleteFunc(live, func(e *entry) bool { return e.kind == KindRoot })
	}
	if len(live) == 0 {
		return nil
	}
	e := live[rng.IntN(len(live))]
	e.chaosBusy.Store(true)
	return e.pid
}
