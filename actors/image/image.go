// Package image holds the ImageActor: it makes images present according to
// the pull policy, runs at most one pull per image at a time (later requests
// wait for that pull's result), pulls different images concurrently, and
// backs off per image after a failed pull, as the upstream kubelet's image
// manager does; and, given WithGC, collects unused images as the upstream
// kubelet's image garbage collector does (gc.go): periodically when the
// image filesystem is fuller than a high threshold, down to a low one,
// least recently used first, and on ReclaimImages from the EvictionActor.
package image

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/messages"
)

// ImageService is what the actor needs from the CRI image service.
type ImageService interface {
	// ImageStatus returns nil, nil when the image is absent.
	ImageStatus(ctx context.Context, ref string) (*runtimeapi.Image, error)
	// PullImage pulls the image and returns the runtime's image reference.
	PullImage(ctx context.Context, ref string, sandbox *runtimeapi.PodSandboxConfig) (string, error)
}

// Config tunes the actor. Zero values take the defaults.
type Config struct {
	// BackoffBase is the first back-off after a failed pull (10s), doubled
	// after each further failure up to BackoffCap (300s).
	BackoffBase time.Duration
	BackoffCap  time.Duration
	// PullTimeout bounds one pull; 0 means no bound (upstream has none).
	PullTimeout time.Duration
	// StatusTimeout bounds one status check (2m, the runtime request
	// timeout), and each runtime call of a garbage collection.
	StatusTimeout time.Duration

	// Image garbage collection (used with WithGC), upstream's
	// --image-gc-high-threshold, --image-gc-low-threshold,
	// --image-minimum-gc-age and --image-maximum-gc-age. When the image
	// filesystem is HighThresholdPercent full or more, unused images are
	// deleted until it is LowThresholdPercent full. Both zero take the
	// defaults (85, 80); otherwise they are taken as given (Validate).
	HighThresholdPercent int
	LowThresholdPercent  int
	// MinimumGCAge: an image first seen less than this ago is never
	// deleted for space (upstream default 2m, see DefaultConfig; 0: none).
	MinimumGCAge time.Duration
	// MaximumGCAge: an unused image not used for this long is deleted
	// whatever the usage (0: off, the default).
	MaximumGCAge time.Duration
	// GCPeriod is the period of the collection (upstream ImageGCPeriod,
	// 5m).
	GCPeriod time.Duration
}

// DefaultConfig is the upstream kubelet's defaults.
func DefaultConfig() Config {
	return Config{
		BackoffBase: 10 * time.Second, BackoffCap: 300 * time.Second, StatusTimeout: 2 * time.Minute,
		HighThresholdPercent: 85, LowThresholdPercent: 80, MinimumGCAge: 2 * time.Minute,
		GCPeriod: 5 * time.Minute,
	}
}

func (c Config) withDefaults() Config {
	if c.BackoffBase <= 0 {
		c.BackoffBase = 10 * time.Second
	}
	if c.BackoffCap <= 0 {
		c.BackoffCap = 300 * time.Second
	}
	if c.BackoffCap < c.BackoffBase {
		c.BackoffCap = c.BackoffBase
	}
	if c.StatusTimeout <= 0 {
		c.StatusTimeout = 2 * time.Minute
	}
	if c.HighThresholdPercent == 0 && c.LowThresholdPercent == 0 {
		c.HighThresholdPercent, c.LowThresholdPercent = 85, 80
	}
	if c.GCPeriod <= 0 {
		c.GCPeriod = 5 * time.Minute
	}
	return c
}

// Validate checks the garbage collection policy as the upstream kubelet
// checks its configuration: thresholds within 0..100, the low one below the
// high one, ages not negative and a maximum age, when set, not below the
// minimum age. Zero values are checked as New takes them (defaults filled).
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.HighThresholdPercent < 0 || c.HighThresholdPercent > 100 {
		errs = append(errs, fmt.Errorf("image GC high threshold (--image-gc-high-threshold) %d must be between 0 and 100, inclusive", c.HighThresholdPercent))
	}
	if c.LowThresholdPercent < 0 || c.LowThresholdPercent > 100 {
		errs = append(errs, fmt.Errorf("image GC low threshold (--image-gc-low-threshold) %d must be between 0 and 100, inclusive", c.LowThresholdPercent))
	}
	if c.LowThresholdPercent >= c.HighThresholdPercent {
		errs = append(errs, fmt.Errorf("image GC low threshold (--image-gc-low-threshold) %d must be less than the high threshold (--image-gc-high-threshold) %d",
			c.LowThresholdPercent, c.HighThresholdPercent))
	}
	if c.MinimumGCAge < 0 {
		errs = append(errs, fmt.Errorf("image minimum GC age (--image-minimum-gc-age) %v must not be negative", c.MinimumGCAge))
	}
	if c.MaximumGCAge < 0 {
		errs = append(errs, fmt.Errorf("image maximum GC age (--image-maximum-gc-age) %v must not be negative", c.MaximumGCAge))
	}
	if c.MaximumGCAge > 0 && c.MaximumGCAge < c.MinimumGCAge {
		errs = append(errs, fmt.Errorf("image maximum GC age (--image-maximum-gc-age) %v must be greater than the minimum GC age (--image-minimum-gc-age) %v",
			c.MaximumGCAge, c.MinimumGCAge))
	}
	return errors.Join(errs...)
}

type opKind int

const (
	opStatus opKind = iota
	opPull
)

// op is the one CRI call in flight for an image and who waits for it.
type op struct {
	kind    opKind
	waiters []*messages.EnsureImage
}

// statusDone and pullDone are the results of the async CRI calls.
type statusDone struct {
	actorkit.Tag
	image string
	img   *runtimeapi.Image
	err   error
}

type pullDone struct {
	actorkit.Tag
	image string
	ref   string
	err   error
}

// Actor is the ImageActor.
type Actor struct {
	svc ImageService
	clk clock.WithDelayedExecution
	cfg Config
	log *slog.Logger

	gcDeps *GC // nil: no garbage collection

	self     actorkit.Self
	ops      map[string]*op
	backoff  *flowcontrol.Backoff // per image, as the upstream kubelet's image puller
	cancel   context.CancelFunc   // cancels every call of this incarnation
	callsCtx context.Context
	gc       *gcState // this incarnation's collector; nil without WithGC
}

// Option adds to the ImageActor.
type Option func(*Actor)

// New returns the ImageActor's producer. cfg must pass Validate (check it
// where flags are parsed): New panics on a bad policy, as on a missing
// service or clock.
func New(svc ImageService, clk clock.WithDelayedExecution, cfg Config, log *slog.Logger, opts ...Option) actor.Producer {
	if svc == nil || clk == nil {
		panic("image: service and clock are required")
	}
	if err := cfg.Validate(); err != nil {
		panic("image: " + err.Error())
	}
	if log == nil {
		log = slog.Default()
	}
	cfg = cfg.withDefaults()
	proto := Actor{svc: svc, clk: clk, cfg: cfg, log: log}
	for _, o := range opts {
		o(&proto)
	}
	return func() actor.Actor {
		a := proto
		return &a
	}
}

// Receive implements actor.Actor.
func (a *Actor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.handleStarted(ctx)
	case *actor.Restarting:
		a.handleStop(ctx, "image actor restarted")
	case *actor.Stopping:
		a.handleStop(ctx, "image actor stopped")
	case *messages.EnsureImage:
		a.handleEnsureImage(ctx, m)
	case *statusDone:
		a.handleStatusDone(ctx, m)
	case *pullDone:
		a.handlePullDone(ctx, m)
	case *messages.ReclaimImages:
		a.handleReclaimImages(ctx, m)
	case *actorkit.Fired:
		a.handleFired(m)
	case *gcScanned:
		a.handleGCScanned(ctx, m)
	case *gcDone:
		a.handleGCDone(ctx, m)
	}
}

func (a *Actor) handleStarted(ctx actor.Context) {
	a.self = actorkit.Start(ctx, a.clk)
	a.ops = map[string]*op{}
	// NewFakeBackOff is NewBackOff on an injected clock (no jitter).
	a.backoff = flowcontrol.NewFakeBackOff(a.cfg.BackoffBase, a.cfg.BackoffCap, a.clk)
	a.callsCtx, a.cancel = context.WithCancel(context.Background())
	a.startGC()
}

// handleStop cancels the calls in flight and answers everyone waiting, so
// that no requester waits forever for a reply a new incarnation cannot give.
func (a *Actor) handleStop(ctx actor.Context, why string) {
	if a.cancel != nil {
		a.cancel()
	}
	a.self = actorkit.Self{} // results of the calls in flight are now stale
	for image, o := range a.ops {
		for _, w := range o.waiters {
			a.reply(ctx, w, messages.ImageResult{Reason: messages.ReasonErrImagePull,
				Message: fmt.Sprintf("Failed to pull image %q: %s", image, why)})
		}
	}
	a.ops = map[string]*op{}
	a.stopGC(ctx, why)
}

func (a *Actor) handleEnsureImage(ctx actor.Context, m *messages.EnsureImage) {
	if err := validateReference(m.Image); err != nil {
		a.reply(ctx, m, messages.ImageResult{Reason: messages.ReasonInvalidImageName,
			Message: fmt.Sprintf("Failed to apply default image tag %q: %v", m.Image, err)})
		return
	}
	a.noteUsed(m.Image)
	if o, ok := a.ops[m.Image]; ok {
		o.waiters = append(o.waiters, m)
		return
	}
	switch m.Policy {
	case v1.PullAlways:
		a.pullOrBackOff(ctx, m.Image, []*messages.EnsureImage{m})
	case v1.PullNever, v1.PullIfNotPresent, "":
		a.startStatus(m.Image, []*messages.EnsureImage{m})
	default:
		a.reply(ctx, m, messages.ImageResult{Reason: messages.ReasonErrImagePull,
			Message: fmt.Sprintf("unknown image pull policy %q", m.Policy)})
	}
}

// finish ends and returns the op of kind on image that result m answers;
// nil where m is stale (from an earlier incarnation or another op).
func (a *Actor) finish(m interface{ TagGen() uint64 }, image string, kind opKind) *op {
	if !a.self.Mine(m) {
		return nil
	}
	o := a.ops[image]
	if o == nil || o.kind != kind {
		return nil
	}
	delete(a.ops, image)
	return o
}

func (a *Actor) handleStatusDone(ctx actor.Context, m *statusDone) {
	o := a.finish(m, m.image, opStatus)
	if o == nil {
		return
	}
	var needPull []*messages.EnsureImage
	for _, w := range o.waiters {
		switch {
		case m.err != nil:
			a.reply(ctx, w, messages.ImageResult{Reason: messages.ReasonErrImagePull,
				Message: fmt.Sprintf("Failed to inspect image %q: %v", m.image, m.err)})
		case m.img != nil && w.Policy != v1.PullAlways:
			a.noteUsed(m.img.GetId())
			a.reply(ctx, w, messages.ImageResult{ImageRef: m.img.GetId()})
		case m.img == nil && w.Policy == v1.PullNever:
			a.reply(ctx, w, messages.ImageResult{Reason: messages.ReasonErrImageNeverPull,
				Message: fmt.Sprintf("Container image %q is not present with pull policy of Never", m.image)})
		default:
			needPull = append(needPull, w)
		}
	}
	if len(needPull) > 0 {
		a.pullOrBackOff(ctx, m.image, needPull)
	}
}

func (a *Actor) handlePullDone(ctx actor.Context, m *pullDone) {
	o := a.finish(m, m.image, opPull)
	if o == nil {
		return
	}
	if m.err == nil {
		a.backoff.Reset(m.image)
		a.noteUsed(m.ref)
		a.log.Info("image pulled", "image", m.image, "ref", m.ref)
		for _, w := range o.waiters {
			a.reply(ctx, w, messages.ImageResult{ImageRef: m.ref, Pulled: w.Policy != v1.PullNever})
		}
		return
	}
	// The first failure (or one long after the last) backs off BackoffBase,
	// each further one twice the previous, up to BackoffCap; an entry idle
	// for twice the cap starts over.
	a.backoff.Next(m.image, a.clk.Now())
	a.log.Warn("image pull failed", "image", m.image, "err", m.err, "backoff", a.backoff.Get(m.image))
	var never []*messages.EnsureImage
	for _, w := range o.waiters {
		if w.Policy == v1.PullNever {
			// It joined a pull it did not ask for; whether the image is
			// present is still its question.
			never = append(never, w)
			continue
		}
		a.reply(ctx, w, messages.ImageResult{Reason: messages.ReasonErrImagePull,
			Message: fmt.Sprintf("Failed to pull image %q: %v", m.image, m.err)})
	}
	if len(never) > 0 {
		a.startStatus(m.image, never)
	}
}

// pullOrBackOff answers ImagePullBackOff while the image is backing off,
// else starts a pull for waiters.
func (a *Actor) pullOrBackOff(ctx actor.Context, image string, waiters []*messages.EnsureImage) {
	if a.inBackOff(image) {
		for _, w := range waiters {
			a.reply(ctx, w, messages.ImageResult{Reason: messages.ReasonImagePullBackOff,
				Message: fmt.Sprintf("Back-off pulling image %q", image)})
		}
		return
	}
	a.ops[image] = &op{kind: opPull, waiters: waiters}
	svc, calls := a.svc, a.callsCtx
	// PullTimeout 0: no bound, as upstream.
	actorkit.GoIn(a.self, calls, a.cfg.PullTimeout, func(ctx context.Context) *pullDone {
		ref, err := svc.PullImage(ctx, image, nil)
		return &pullDone{image: image, ref: ref, err: err}
	})
}

func (a *Actor) startStatus(image string, waiters []*messages.EnsureImage) {
	a.ops[image] = &op{kind: opStatus, waiters: waiters}
	svc, calls := a.svc, a.callsCtx
	actorkit.GoIn(a.self, calls, a.cfg.StatusTimeout, func(ctx context.Context) *statusDone {
		img, err := svc.ImageStatus(ctx, image)
		return &statusDone{image: image, img: img, err: err}
	})
}

// inBackOff reports whether the image's last failed pull is less than its
// back-off ago.
func (a *Actor) inBackOff(image string) bool {
	return a.backoff.IsInBackOffSinceUpdate(image, a.clk.Now())
}

func (a *Actor) reply(ctx actor.Context, req *messages.EnsureImage, r messages.ImageResult) {
	r.RequestID = req.RequestID
	r.Image = req.Image
	if req.ReplyTo == nil {
		a.log.Warn("image request without ReplyTo", "image", req.Image, "request", req.RequestID)
		return
	}
	ctx.Send(req.ReplyTo, &r)
}

// The grammar of distribution/reference, enough to refuse what a runtime
// would refuse: path components are lower case; a domain, a tag and a digest
// are optional.
var (
	pathComponent = `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`
	domainPart    = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
	domain        = `(?:` + domainPart + `(?:\.` + domainPart + `)*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?`
	tag           = `[\w][\w.-]{0,127}`
	digest        = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}`
	referenceRE   = regexp.MustCompile(`^(?:(` + domain + `)/)?(` + pathComponent + `(?:/` + pathComponent + `)*)(?::(` + tag + `))?(?:@(` + digest + `))?$`)
)

func validateReference(ref string) error {
	switch {
	case ref == "":
		return fmt.Errorf("invalid reference format: empty")
	case strings.ContainsAny(ref, " \t\n\r"):
		return fmt.Errorf("invalid reference format: contains whitespace")
	}
	m := referenceRE.FindStringSubmatch(ref)
	if m == nil {
		if strings.ToLower(ref) != ref {
			return fmt.Errorf("invalid reference format: repository name must be lowercase")
		}
		return fmt.Errorf("invalid reference format")
	}
	if len(m[1])+1+len(m[2]) > 255 {
		return fmt.Errorf("invalid reference format: repository name must not be more than 255 characters")
	}
	return nil
}
