// Package source holds the inbound pod sources: the manifest-directory and
// manifest-URL pollers and the push source behind the node API. Each sends
// messages.PodUpdate to the NodeActor PID it is given.
package source

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
)

// Lister lists a source's desired pods, decoded, defaulted and validated.
//
// errs name the file (or URL) and field of each pod left out; the pods
// returned are still the source's whole set. When the listing failed as a
// whole (an unreadable directory, an unreachable URL) errs holds an error of
// class errdefs.ErrUnavailable and the source keeps the set it last sent. A
// missing directory is not that: it lists as empty.
//
// An error may name the content it is about (a method ContentDigest()
// string, anywhere in its chain): the poller then warns about it once per
// content, else once per message, and logs it again at Debug while it
// repeats unchanged.
//
// adapters/manifest.DirLister and URLLister satisfy it.
type Lister interface {
	List(ctx context.Context) ([]*v1.Pod, []error)
}

// seenAnnotation is the upstream kubelet's kubernetes.io/config.seen: the
// time a pod was first seen. It changes on every listing, so the poller keeps
// the first value for a pod UID it has already sent.
const seenAnnotation = "kubernetes.io/config.seen"

// listed is a Lister's result, sent back to the poller.
type listed struct {
	actorkit.Tag
	pods []*v1.Pod
	errs []error
}

// poller is the file and URL source: it lists on start and then every
// `every` after the previous listing finished, and sends an OpSet when the
// set changed and always the first time (which marks the source synced).
//
// A pod whose file no longer decodes or validates is left out of the next
// set, so the NodeActor stops it: that is what the upstream kubelet's file
// source does (extractFromDir skips the file and replaceStore drops its
// pod). Other files are not disturbed. A listing that failed as a whole
// (errdefs.ErrUnavailable) changes nothing, as upstream's HTTP source, which
// sends no update when a fetch fails (the source stays unsynced until one
// succeeds).
type poller struct {
	node   *actor.PID
	lister Lister
	every  time.Duration
	clk    clock.WithDelayedExecution
	log    *slog.Logger
	source string

	self   actorkit.Self
	calls  context.Context // cancelled when the poller stops: ends a listing in flight
	cancel context.CancelFunc
	timer  actorkit.Timer
	sent   bool
	last   []*v1.Pod       // sorted by UID, as sent
	warned map[string]bool // errors of the last listing (errKey), warned about already
}

// NewFile returns the manifest-directory source (messages.SourceFile),
// listing every `every` (upstream FileCheckFrequency: 20s).
func NewFile(node *actor.PID, lister Lister, every time.Duration, clk clock.WithDelayedExecution, log *slog.Logger) actor.Producer {
	return newPoller(messages.SourceFile, node, lister, every, clk, log)
}

// NewURL returns the manifest-URL source (messages.SourceURL), listing every
// `every` (upstream HTTPCheckFrequency: 20s).
func NewURL(node *actor.PID, lister Lister, every time.Duration, clk clock.WithDelayedExecution, log *slog.Logger) actor.Producer {
	return newPoller(messages.SourceURL, node, lister, every, clk, log)
}

func newPoller(source string, node *actor.PID, lister Lister, every time.Duration, clk clock.WithDelayedExecution, log *slog.Logger) actor.Producer {
	if node == nil || lister == nil || clk == nil {
		panic("source: node, lister and clock are required")
	}
	if every <= 0 {
		every = 20 * time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	log = log.With("source", source)
	return func() actor.Actor {
		return &poller{node: node, lister: lister, every: every, clk: clk, log: log, source: source}
	}
}

// Receive implements actor.Actor.
func (p *poller) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.handleStarted(ctx)
	case *actor.Restarting:
		p.handleStop()
	case *actor.Stopping:
		p.handleStop()
	case *actorkit.Fired:
		if p.timer.Fired(p.self, m) {
			p.startList()
		}
	case *listed:
		p.handleListed(ctx, m)
	case *messages.Resync:
		p.handleResync(ctx)
	}
}

// handleResync re-sends the last set (a restarted NodeActor lost it).
func (p *poller) handleResync(ctx actor.Context) {
	if !p.sent {
		return // the first listing is still to come and will be sent
	}
	ctx.Send(p.node, &messages.PodUpdate{Source: p.source, Op: messages.OpSet, Pods: slices.Clone(p.last)})
}

func (p *poller) handleStarted(ctx actor.Context) {
	p.self = actorkit.Start(ctx, p.clk)
	p.timer = actorkit.NewTimer("list")
	p.calls, p.cancel = context.WithCancel(context.Background())
	p.startList()
}

func (p *poller) handleStop() {
	p.self = actorkit.Self{} // anything still in flight is now stale
	p.timer.Stop()
	if p.cancel != nil {
		p.cancel()
		p.cancel = nil
	}
}

// startList runs the Lister off the mailbox; its result comes back as
// listed.
func (p *poller) startList() {
	lister, calls := p.lister, p.calls
	// A listing may take up to the period plus a margin; a hung URL must not
	// stop the polling for good.
	actorkit.GoIn(p.self, calls, p.every+30*time.Second, func(ctx context.Context) *listed {
		pods, errs := lister.List(ctx)
		return &listed{pods: pods, errs: errs}
	})
}

func (p *poller) handleListed(ctx actor.Context, m *listed) {
	if !p.self.Mine(m) {
		return
	}
	defer p.timer.Arm(p.self, p.every) // the next listing

	if p.logErrs(m.errs) {
		return
	}

	next := p.normalise(m.pods)
	if p.sent && equality.Semantic.DeepEqual(next, p.last) {
		return
	}
	// The pods are shared read only from here on (messages' package doc):
	// the set kept to compare the next listing with is the one sent.
	ctx.Send(p.node, &messages.PodUpdate{Source: p.source, Op: messages.OpSet, Pods: slices.Clone(next)})
	p.log.Info("pods updated", "pods", len(next), "first", !p.sent)
	p.sent = true
	p.last = next
}

// logErrs logs a listing's errors: a warning for each the previous listing
// did not have (a file broken anew, or changed and still broken), Debug for
// the same again at every check after. It reports whether the listing failed
// as a whole.
func (p *poller) logErrs(errs []error) (failed bool) {
	warned := make(map[string]bool, len(errs))
	for _, err := range errs {
		key := errKey(err)
		level := slog.LevelWarn
		if p.warned[key] {
			level = slog.LevelDebug
		}
		warned[key] = true
		if errors.Is(err, errdefs.ErrUnavailable) {
			failed = true
			p.log.Log(context.Background(), level, "listing failed, keeping the previous pods", "pods", len(p.last), "synced", p.sent, "err", err)
			continue
		}
		p.log.Log(context.Background(), level, "pod manifest skipped", "err", err)
	}
	p.warned = warned
	return failed
}

// errKey tells a listing error from another: its message and, when it names
// one, the content it is about.
func errKey(err error) string {
	var c interface{ ContentDigest() string }
	if errors.As(err, &c) {
		return err.Error() + "\x00" + c.ContentDigest()
	}
	return err.Error()
}

// normalise sorts pods by UID and keeps the first config.seen of each UID
// already sent. The Lister's pods are left as they are: a pod whose
// config.seen is kept is a shallow copy with its own annotations (its spec
// is shared with the Lister's, read only), the others are the Lister's.
func (p *poller) normalise(pods []*v1.Pod) []*v1.Pod {
	seen := make(map[string]string, len(p.last))
	for _, pod := range p.last {
		if v, ok := pod.Annotations[seenAnnotation]; ok {
			seen[string(pod.UID)] = v
		}
	}
	next := make([]*v1.Pod, 0, len(pods))
	for _, pod := range pods {
		if pod == nil {
			continue
		}
		if v, ok := seen[string(pod.UID)]; ok {
			if cur, has := pod.Annotations[seenAnnotation]; has && cur != v {
				cp := *pod
				cp.Annotations = maps.Clone(pod.Annotations)
				cp.Annotations[seenAnnotation] = v
				pod = &cp
			}
		}
		next = append(next, pod)
	}
	sort.SliceStable(next, func(i, j int) bool { return next[i].UID < next[j].UID })
	return next
}
