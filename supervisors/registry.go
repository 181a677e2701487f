package supervisors

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/ctxext"
	"k8s.io/utils/clock"

	"github.com/actorlet/actorlet/internal/actorkit"
)

// Registry keeps track of live actors: those whose props carry its
// Middleware. It is safe for concurrent use. The per-message cost is one
// context-extension lookup (a slice index) and one atomic add.
type Registry struct {
	once sync.Once
	ext  ctxext.ContextExtensionID
	clk  clock.PassiveClock

	mu     sync.RWMutex
	actors map[string]*entry
	shrink actorkit.Shrinker // of actors: a map of 10,000 pods' actors shrinks with them
	kinds  map[string]int
	stats  map[string]*kindStats // never shrinks: one per kind ever seen
}

type entry struct {
	ext      ctxext.ContextExtensionID
	pid      *actor.PID
	kind     string
	parent   string
	messages atomic.Uint64
	restarts atomic.Int64
	nanos    atomic.Int64 // handling time
	// chaosBusy: a chaos crash is on its way, or the actor failed and
	// waits for its restart; cleared when it starts again. The injector
	// skips busy actors, so crashes do not queue up in the mailbox of an
	// actor that backs off and then play back long after chaos stopped.
	chaosBusy atomic.Bool
	stats     *kindStats
	mailbox   atomic.Pointer[mailboxRef] // nil until found

	fmu           sync.Mutex
	lastFailure   string
	lastFailureAt time.Time
}

func (e *entry) ExtensionID() ctxext.ContextExtensionID { return e.ext }

// NewRegistry returns an empty registry. clk (may be nil: real time) stamps
// failures. The zero Registry is also ready to use, with real time.
func NewRegistry(clk clock.PassiveClock) *Registry {
	r := &Registry{clk: clk}
	r.init()
	return r
}

func (r *Registry) init() {
	r.once.Do(func() {
		r.ext = ctxext.NextContextExtensionID()
		if r.clk == nil {
			r.clk = clock.RealClock{}
		}
		r.actors = make(map[string]*entry)
		r.kinds = make(map[string]int)
		r.stats = make(map[string]*kindStats)
	})
}

// Middleware returns the receiver middleware that registers the actor on
// *actor.Started (again after each restart; counters survive restarts),
// counts every message it handles and the time it took (per actor and in
// a histogram per kind), counts restarts on *actor.Restarting and removes
// the actor on *actor.Stopped. Per message it costs two clock reads, a
// context-extension lookup and a few uncontended atomic adds (see
// BenchmarkMiddlewares).
func (r *Registry) Middleware() actor.ReceiverMiddleware {
	r.init()
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			var msg any
			if env != nil {
				msg = env.Message
			}
			var e *entry
			switch msg.(type) {
			case *actor.Started:
				e = r.add(c.Self())
				c.Set(e) // grows the extension slice: Get below is safe afterwards
				e.chaosBusy.Store(false)
				if e.mailbox.Load() == nil {
					if mb := mailboxOf(c); mb != nil {
						e.mailbox.Store(&mailboxRef{mb})
					}
				}
			case *actor.Stopped:
				next(c, env)
				r.remove(c.Self())
				return
			case *actor.Restarting:
				if e = r.entryOf(c); e != nil {
					e.restarts.Add(1)
				}
			default:
				e = r.entryOf(c)
			}
			if e == nil {
				next(c, env)
				return
			}
			t0 := time.Now()
			next(c, env) // a panic skips the accounting: Recover counts it
			e.observe(time.Since(t0))
		}
	}
}

func (e *entry) observe(d time.Duration) {
	e.messages.Add(1)
	e.nanos.Add(int64(d))
	e.stats.observe(d)
}

// mailboxRef boxes a mailbox for atomic.Pointer.
type mailboxRef struct{ mb actor.Mailbox }

// mailboxOf finds the actor's mailbox, to read its length on demand.
// protoactor keeps it in an unexported field of *actor.ActorProcess; it is
// read once per actor start, by reflection (a protoactor upgrade that
// renames the field gives "unknown" lengths, and TestMailboxLength fails).
func mailboxOf(c actor.ReceiverContext) (mb actor.Mailbox) {
	defer func() {
		if recover() != nil {
			mb = nil
		}
	}()
	sys, self := c.ActorSystem(), c.Self()
	if sys == nil || self == nil {
		return nil
	}
	p, ok := sys.ProcessRegistry.GetLocal(self.Id)
	if !ok {
		return nil
	}
	ap, ok := p.(*actor.ActorProcess)
	if !ok {
		return nil
	}
	f := reflect.ValueOf(ap).Elem().FieldByName("mailbox")
	if !f.IsValid() {
		return nil
	}
	mb, _ = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(actor.Mailbox)
	return mb
}

// entryOf returns the entry stored in the actor's context, nil if the
// actor was never started through this middleware.
func (r *Registry) entryOf(c actor.ReceiverContext) (e *entry) {
	defer func() {
		// ContextExtensions.Get indexes a slice that Set grows; an actor
		// that never ran Started through us may not have it.
		if recover() != nil {
			e = nil
		}
	}()
	x, _ := c.Get(r.ext).(*entry)
	return x
}

func (r *Registry) add(pid *actor.PID) *entry {
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.actors[pid.Id]; ok {
		return e
	}
	e := &entry{ext: r.ext, pid: pid, kind: KindOf(pid), parent: parentID(pid.Id)}
	e.stats = r.stats[e.kind]
	if e.stats == nil {
		e.stats = &kindStats{}
		r.stats[e.kind] = e.stats
	}
	r.actors[pid.Id] = e
	r.actors = actorkit.Shrink(&r.shrink, r.actors) // sees the peak
	r.kinds[e.kind]++
	return e
}

func (r *Registry) remove(pid *actor.PID) {
	r.init()
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.actors[pid.Id]
	if !ok {
		return
	}
	delete(r.actors, pid.Id)
	r.actors = actorkit.Shrink(&r.shrink, r.actors)
	if r.kinds[e.kind]--; r.kinds[e.kind] <= 0 {
		delete(r.kinds, e.kind)
	}
}

func (r *Registry) lookup(pid *actor.PID) *entry {
	r.init()
	if pid == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.actors[pid.Id]
}

// NoteRestart counts a restart of pid. The registry middleware already
// counts restarts when it sees *actor.Restarting; call this only for
// actors that run without it.
func (r *Registry) NoteRestart(pid *actor.PID) {
	if e := r.lookup(pid); e != nil {
		e.restarts.Add(1)
	}
}

// NoteFailure records reason as pid's last failure, stamped now.
func (r *Registry) NoteFailure(pid *actor.PID, reason any) {
	e := r.lookup(pid)
	if e == nil {
		return
	}
	e.chaosBusy.Store(true)
	s := fmt.Sprint(reason)
	now := r.clk.Now()
	e.fmu.Lock()
	e.lastFailure, e.lastFailureAt = s, now
	e.fmu.Unlock()
}

// Live returns the PIDs of live actors of the given kinds (all kinds when
// none is given), sorted by id.
func (r *Registry) Live(kinds ...string) []*actor.PID {
	r.init()
	r.mu.RLock()
	out := make([]*actor.PID, 0, len(r.actors))
	for _, e := range r.actors {
		if len(kinds) == 0 || slices.Contains(kinds, e.kind) {
			out = append(out, e.pid)
		}
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b *actor.PID) int { return strings.Compare(a.Id, b.Id) })
	return out
}

// chaosVictims returns the live actors of the given kinds (all when none
// is given) that neither wait for a restart nor have a chaos crash on its
// way, sorted by id.
func (r *Registry) chaosVictims(kinds ...string) []*entry {
	r.init()
	r.mu.RLock()
	out := make([]*entry, 0, len(r.actors))
	for _, e := range r.actors {
		if (len(kinds) == 0 || slices.Contains(kinds, e.kind)) && !e.chaosBusy.Load() {
			out = append(out, e)
		}
	}
	r.mu.RUnlock()
	slices.SortFunc(out, func(a, b *entry) int { return strings.Compare(a.pid.Id, b.pid.Id) })
	return out
}

// Count returns the number of live actors of kind.
func (r *Registry) Count(kind string) int {
	r.init()
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.kinds[kind]
}

// Counts returns the number of live actors per kind.
func (r *Registry) Counts() map[string]int {
	r.init()
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make(map[string]int, len(r.kinds))
	for k, n := range r.kinds {
		out[k] = n
	}
	return out
}

// Snapshot returns every live actor, sorted by PID.
func (r *Registry) Snapshot() []actorkit.ActorInfo {
	r.init()
	r.mu.RLock()
	es := make([]*entry, 0, len(r.actors))
	for _, e := range r.actors {
		es = append(es, e)
	}
	r.mu.RUnlock()
	out := make([]actorkit.ActorInfo, 0, len(es))
	for _, e := range es {
		e.fmu.Lock()
		lf, lfa := e.lastFailure, e.lastFailureAt
		e.fmu.Unlock()
		msgs, nanos := e.messages.Load(), e.nanos.Load()
		var mean float64
		if msgs > 0 {
			mean = float64(nanos) / float64(msgs) / 1e3
		}
		out = append(out, actorkit.ActorInfo{
			PID:                e.pid.Id,
			Kind:               e.kind,
			Parent:             e.parent,
			Restarts:           int(e.restarts.Load()),
			Messages:           msgs,
			Mailbox:            e.mailboxLen(),
			HandlingNanos:      nanos,
			MeanHandlingMicros: mean,
			LastFailure:        lf,
			LastFailureAt:      lfa,
		})
	}
	slices.SortFunc(out, func(a, b actorkit.ActorInfo) int { return strings.Compare(a.PID, b.PID) })
	return out
}
