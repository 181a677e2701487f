package devices

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/internal/actorkit"
	"github.com/actorlet/actorlet/internal/checkpoint"
)

// The DevicesActor as a DRA driver (--gpu-allocation=dra): a built-in
// provider's devices (the GPUs) are not reported as an extended resource
// but published in a ResourceSlice, and handed to pods through
// ResourceClaims that the node's DRA manager prepares through the driver's
// gRPC (adapters/draplugin), which asks this actor by message. A device is
// given once: to one claim, never also to a pod through the device plugin
// path. The prepared claims are checkpointed in their own Store, so a
// restarted agent neither prepares a claim again nor leaks one.

// DRAConfig turns the DRA driver on for one built-in resource.
type DRAConfig struct {
	// Resource is the built-in provider's resource served through DRA
	// ("nvidia.com/gpu"); its capacity is no longer reported.
	Resource string
	// Slices receives the devices and their health whenever they change;
	// it must not block (the adapter publishes off the mailbox, retrying).
	Slices SliceSink
	// CDI writes and removes the CDI spec of a prepared claim. Called off
	// the mailbox.
	CDI CDISpecs
	// Store keeps the checkpoint of prepared claims.
	Store Store
}

// SliceSink is told the devices the driver publishes, sorted by ID: an
// unhealthy one is published with a NoSchedule device taint (GA in v1.37),
// so the scheduler allocates it to no new claim and the claims holding it
// keep it.
type SliceSink interface {
	SetDevices(devices []SliceDevice)
}

// SliceDevice is a device of the slice and its health.
type SliceDevice struct {
	ID      string
	Healthy bool
}

// CDISpecs writes the CDI spec of a prepared claim (one spec per claim,
// naming each device's CDI ID as PreparedDevice.CDIDevices say) and
// removes it when the claim is unprepared (a missing spec is no error).
type CDISpecs interface {
	Write(claim ClaimRef, devices []PreparedDevice) error
	Remove(claim ClaimRef) error
}

// ClaimRef names a ResourceClaim.
type ClaimRef struct {
	UID       types.UID `json:"uid"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
}

// ClaimDevice is one device of a claim's allocation, for this driver.
type ClaimDevice struct {
	Requests []string `json:"requests,omitempty"` // the claim's request names it serves
	Pool     string   `json:"pool"`
	Device   string   `json:"device"` // its name in the ResourceSlice ("gpu-0")
	ID       string   `json:"id"`     // the provider's device ID (the GPU's UUID)
}

// PreparedDevice is a device of a prepared claim and its CDI device IDs.
type PreparedDevice struct {
	ClaimDevice
	CDIDevices []string `json:"cdiDevices"`
}

// CDI names of the claims' devices: one spec per claim, of this kind, a
// device named <claim UID>-<device name>. Not nvidia.com/gpu: NVIDIA's
// container toolkit writes that kind's spec (/etc/cdi/nvidia.yaml, devices
// "0", "all", UUIDs) and two specs naming one device clash.
const (
	CDIVendor = "k8s.gpu.nvidia.com"
	CDIClass  = "claim"
	CDIKind   = CDIVendor + "/" + CDIClass
)

// CDIDeviceID is the CDI device ID of a claim's device.
func CDIDeviceID(claim types.UID, device string) string {
	return CDIKind + "=" + string(claim) + "-" + device
}

// PrepareClaims asks the actor to prepare claims (the DRA gRPC's
// NodePrepareResources); the answer is *ClaimsPrepared.
type PrepareClaims struct {
	Claims []ClaimToPrepare
}

// ClaimToPrepare is a claim and its devices for this driver.
type ClaimToPrepare struct {
	ClaimRef
	Devices []ClaimDevice
}

// ClaimsPrepared answers PrepareClaims: one result per claim UID.
type ClaimsPrepared struct {
	Results map[types.UID]ClaimResult
}

// ClaimResult is one claim's devices or its error.
type ClaimResult struct {
	Devices []PreparedDevice
	Err     error
}

// UnprepareClaims asks the actor to unprepare claims (the DRA gRPC's
// NodeUnprepareResources); the answer is *ClaimsUnprepared. A claim not
// prepared is unprepared at once.
type UnprepareClaims struct {
	Claims []ClaimRef
}

// ClaimsUnprepared answers UnprepareClaims: nil or the error per claim.
type ClaimsUnprepared struct {
	Results map[types.UID]error
}

// Errors of preparing a claim.
var (
	ErrUnknownDevice   = errors.New("unknown device")
	ErrDeviceUnhealthy = errors.New("device unhealthy")
	ErrDeviceInUse     = errors.New("device in use")
)

// claimRecord is a prepared claim, in the actor's state and checkpoint.
type claimRecord struct {
	ClaimRef
	Devices []PreparedDevice `json:"devices"`
	// busy: its CDI spec or checkpoint is being written (prepare) or
	// removed (unpreparing); not checkpointed.
	busy, unpreparing bool
}

// draState is the driver's state in the actor.
type draState struct {
	claims    map[types.UID]*claimRecord
	saver     *saver
	published []SliceDevice // the devices last given to the SliceSink (nil: none yet)
	// waiting are the prepares that came before the provider first
	// listed its devices (after a restart): answered once it has.
	waiting []waitingPrepare
}

type waitingPrepare struct {
	m  *PrepareClaims
	to *actor.PID
}

// claimsCheckpoint is the claims' checkpoint data.
type claimsCheckpoint struct {
	Claims []*claimRecord `json:"claims"`
}

// draOp is an off-mailbox write of a claim's CDI spec and the checkpoint.
type draOpDone struct {
	actorkit.Tag
	prepare bool
	claims  []ClaimRef
	errs    map[types.UID]error
	to      *actor.PID
	results map[types.UID]ClaimResult // prepare: the answers of claims already prepared or refused
}

// draStart loads the claims' checkpoint (handleStarted calls it).
func (a *Actor) draStart() {
	d := a.cfg.DRA
	if d == nil {
		return
	}
	if a.sh.draSaver == nil {
		a.sh.draSaver = &saver{store: d.Store}
	}
	a.dra = &draState{claims: map[types.UID]*claimRecord{}, saver: a.sh.draSaver}
	b, err := a.dra.saver.load()
	if err == nil {
		err = decodeClaims(b, a.dra.claims)
	}
	switch {
	case err != nil:
		a.log.Warn("DRA claim checkpoint ignored: starting with no prepared claim", "err", err)
		a.dra.claims = map[types.UID]*claimRecord{}
	case len(a.dra.claims) > 0:
		a.log.Info("prepared DRA claims restored from the checkpoint", "claims", len(a.dra.claims))
	}
}

// draServes: the resource is served through DRA (no capacity reported).
func (a *Actor) draServes(resource string) bool {
	return a.cfg.DRA != nil && a.cfg.DRA.Resource == resource
}

// draClaimed adds the devices of resource held by prepared claims to busy.
func (a *Actor) draClaimed(resource string, busy map[string]bool) {
	if a.dra == nil || !a.draServes(resource) {
		return
	}
	for _, c := range a.dra.claims {
		for _, d := range c.Devices {
			busy[d.ID] = true
		}
	}
}

// draPublish answers the prepares that waited for the provider's first
// listing, and gives the SliceSink the devices and their health when they
// changed (publish calls it). Nothing before the provider listed.
func (a *Actor) draPublish() {
	if a.dra == nil {
		return
	}
	r := a.res[a.cfg.DRA.Resource]
	if r == nil || !r.listed {
		return
	}
	if w := a.dra.waiting; len(w) > 0 {
		a.dra.waiting = nil
		for _, p := range w {
			a.prepareClaims(p.m, p.to)
		}
	}
	if a.cfg.DRA.Slices == nil {
		return
	}
	devs := []SliceDevice{}
	for _, id := range sortedKeys(r.devices) {
		devs = append(devs, SliceDevice{ID: id, Healthy: r.devices[id]})
	}
	if a.dra.published != nil && slices.Equal(devs, a.dra.published) {
		return
	}
	a.dra.published = devs
	a.cfg.DRA.Slices.SetDevices(slices.Clone(devs))
}

func (a *Actor) handlePrepareClaims(ctx actor.Context, m *PrepareClaims) {
	if a.dra != nil {
		if r := a.res[a.cfg.DRA.Resource]; r == nil || !r.listed {
			a.dra.waiting = append(a.dra.waiting, waitingPrepare{m: m, to: ctx.Sender()})
			return
		}
	}
	a.prepareClaims(m, ctx.Sender())
}

func (a *Actor) prepareClaims(m *PrepareClaims, to *actor.PID) {
	results := map[types.UID]ClaimResult{}
	if a.dra == nil {
		for _, c := range m.Claims {
			results[c.UID] = ClaimResult{Err: errors.New("DRA is off (--gpu-allocation=device-plugin)")}
		}
		a.self.SendTo(to, &ClaimsPrepared{Results: results})
		return
	}
	var fresh []*claimRecord
	for _, c := range m.Claims {
		if _, dup := results[c.UID]; dup {
			continue
		}
		rec, err := a.reserveClaim(c)
		switch {
		case err != nil:
			a.log.Warn("DRA claim refused", "claim", c.Namespace+"/"+c.Name, "uid", c.UID, "err", err)
			results[c.UID] = ClaimResult{Err: err}
		case rec.busy:
			fresh = append(fresh, rec)
		default: // prepared before (a retry, or after a restart)
			results[c.UID] = ClaimResult{Devices: clonePrepared(rec.Devices)}
		}
	}
	if len(fresh) == 0 {
		a.self.SendTo(to, &ClaimsPrepared{Results: results})
		return
	}
	a.runClaimOp(true, fresh, to, results)
}

// reserveClaim checks a claim's devices and records it (busy) when new; a
// claim prepared before with the same devices is returned as it is.
func (a *Actor) reserveClaim(c ClaimToPrepare) (*claimRecord, error) {
	if c.UID == "" {
		return nil, errors.New("claim without its UID")
	}
	if old := a.dra.claims[c.UID]; old != nil {
		if old.busy {
			return nil, fmt.Errorf("claim %s is being prepared or unprepared: retry", c.UID)
		}
		if !sameDevices(old.Devices, c.Devices) {
			return nil, fmt.Errorf("claim %s was prepared with other devices (%s)", c.UID, deviceNames(old.Devices))
		}
		return old, nil
	}
	if len(c.Devices) == 0 {
		return nil, fmt.Errorf("claim %s: no device of this driver allocated", c.UID)
	}
	r := a.res[a.cfg.DRA.Resource]
	busy := a.allocatedOf(a.cfg.DRA.Resource) // pods' and claims'
	for _, pa := range a.pending {
		for _, id := range pa.reserved[a.cfg.DRA.Resource] {
			busy[id] = true
		}
	}
	seen := map[string]bool{}
	for _, d := range c.Devices {
		healthy, known := false, false
		if r != nil {
			healthy, known = r.devices[d.ID]
		}
		switch {
		case d.ID == "" || !known:
			return nil, fmt.Errorf("%w %q (pool %q) in the allocation of claim %s", ErrUnknownDevice, d.Device, d.Pool, c.UID)
		case !healthy:
			return nil, fmt.Errorf("%w: %s (%s) of claim %s", ErrDeviceUnhealthy, d.Device, d.ID, c.UID)
		case busy[d.ID] || seen[d.ID]:
			return nil, fmt.Errorf("%w: %s (%s) is held by another claim or pod", ErrDeviceInUse, d.Device, d.ID)
		}
		seen[d.ID] = true
	}
	rec := &claimRecord{ClaimRef: c.ClaimRef, busy: true}
	for _, d := range c.Devices {
		rec.Devices = append(rec.Devices, PreparedDevice{ClaimDevice: d, CDIDevices: []string{CDIDeviceID(c.UID, d.Device)}})
	}
	a.dra.claims[c.UID] = rec
	return rec, nil
}

func (a *Actor) handleUnprepareClaims(ctx actor.Context, m *UnprepareClaims) {
	to := ctx.Sender()
	errs := map[types.UID]error{}
	if a.dra == nil {
		a.self.SendTo(to, &ClaimsUnprepared{Results: errs})
		return
	}
	var gone []*claimRecord
	for _, c := range m.Claims {
		rec := a.dra.claims[c.UID]
		switch {
		case rec == nil:
			errs[c.UID] = nil // never prepared, or unprepared before
		case rec.busy:
			errs[c.UID] = fmt.Errorf("claim %s is being prepared or unprepared: retry", c.UID)
		default:
			rec.busy, rec.unpreparing = true, true
			gone = append(gone, rec)
		}
	}
	if len(gone) == 0 {
		a.self.SendTo(to, &ClaimsUnprepared{Results: errs})
		return
	}
	prior := map[types.UID]ClaimResult{}
	for uid, err := range errs {
		prior[uid] = ClaimResult{Err: err}
	}
	a.runClaimOp(false, gone, to, prior)
}

// runClaimOp writes (prepare) or removes (unprepare) the claims' CDI specs
// and the checkpoint off the mailbox; draOpDone answers to.
func (a *Actor) runClaimOp(prepare bool, recs []*claimRecord, to *actor.PID, prior map[types.UID]ClaimResult) {
	// The checkpoint holds the claims prepared and those being prepared,
	// not those being unprepared: a crash mid-write re-prepares (the spec
	// is written again) or forgets (the spec is removed again).
	keep := map[types.UID]*claimRecord{}
	for uid, c := range a.dra.claims {
		if !c.unpreparing {
			keep[uid] = c
		}
	}
	data, encErr := encodeClaims(keep)
	sv, seq := a.dra.saver, a.dra.saver.next()
	cdi, log := a.cfg.DRA.CDI, a.log
	refs := make([]ClaimRef, len(recs))
	devs := make([][]PreparedDevice, len(recs))
	for i, r := range recs {
		refs[i], devs[i] = r.ClaimRef, clonePrepared(r.Devices)
	}
	actorkit.Go(a.self, 0, func(context.Context) *draOpDone {
		errs := map[types.UID]error{}
		if encErr != nil {
			for _, r := range refs {
				errs[r.UID] = encErr
			}
			return &draOpDone{prepare: prepare, claims: refs, errs: errs, to: to, results: prior}
		}
		var ok []ClaimRef
		if prepare {
			for i, r := range refs {
				if err := cdi.Write(r, devs[i]); err != nil {
					errs[r.UID] = fmt.Errorf("write the CDI spec of claim %s: %w", r.UID, err)
					continue
				}
				ok = append(ok, r)
			}
		}
		if err := sv.save(seq, data); err != nil {
			for _, r := range refs {
				if errs[r.UID] == nil {
					errs[r.UID] = fmt.Errorf("write the DRA claim checkpoint: %w", err)
				}
			}
			for _, r := range ok { // not checkpointed: not prepared
				_ = cdi.Remove(r)
			}
			return &draOpDone{prepare: prepare, claims: refs, errs: errs, to: to, results: prior}
		}
		if !prepare {
			for _, r := range refs {
				if err := cdi.Remove(r); err != nil {
					// Forgotten in the checkpoint: the claim is unprepared;
					// the stale spec names a device no claim uses.
					log.Warn("CDI spec of an unprepared claim not removed", "uid", r.UID, "err", err)
				}
			}
		}
		return &draOpDone{prepare: prepare, claims: refs, errs: errs, to: to, results: prior}
	})
}

func (a *Actor) handleDRAOpDone(m *draOpDone) {
	if a.dra == nil {
		return
	}
	if m.prepare {
		out := &ClaimsPrepared{Results: m.results}
		if out.Results == nil {
			out.Results = map[types.UID]ClaimResult{}
		}
		for _, r := range m.claims {
			rec := a.dra.claims[r.UID]
			if err := m.errs[r.UID]; err != nil {
				a.log.Error("DRA claim not prepared", "claim", r.Namespace+"/"+r.Name, "uid", r.UID, "err", err)
				if rec != nil && rec.busy {
					delete(a.dra.claims, r.UID)
				}
				out.Results[r.UID] = ClaimResult{Err: err}
				continue
			}
			if rec == nil {
				out.Results[r.UID] = ClaimResult{Err: fmt.Errorf("claim %s vanished while prepared", r.UID)}
				continue
			}
			rec.busy = false
			a.log.Info("DRA claim prepared", "claim", r.Namespace+"/"+r.Name, "uid", r.UID, "devices", deviceNames(rec.Devices))
			out.Results[r.UID] = ClaimResult{Devices: clonePrepared(rec.Devices)}
		}
		a.setCounts(false)
		if m.to != nil {
			a.self.SendTo(m.to, out)
		}
		return
	}
	out := &ClaimsUnprepared{Results: map[types.UID]error{}}
	for uid, r := range m.results {
		out.Results[uid] = r.Err
	}
	for _, r := range m.claims {
		rec := a.dra.claims[r.UID]
		if err := m.errs[r.UID]; err != nil {
			a.log.Error("DRA claim not unprepared", "claim", r.Namespace+"/"+r.Name, "uid", r.UID, "err", err)
			if rec != nil {
				rec.busy, rec.unpreparing = false, false
			}
			out.Results[r.UID] = err
			continue
		}
		delete(a.dra.claims, r.UID)
		a.log.Info("DRA claim unprepared", "claim", r.Namespace+"/"+r.Name, "uid", r.UID)
		out.Results[r.UID] = nil
	}
	a.setCounts(false)
	if m.to != nil {
		a.self.SendTo(m.to, out)
	}
}

func sameDevices(have []PreparedDevice, want []ClaimDevice) bool {
	if len(have) != len(want) {
		return false
	}
	key := func(pool, dev, id string) string { return pool + "/" + dev + "/" + id }
	a := make([]string, len(have))
	for i, d := range have {
		a[i] = key(d.Pool, d.Device, d.ID)
	}
	b := make([]string, len(want))
	for i, d := range want {
		b[i] = key(d.Pool, d.Device, d.ID)
	}
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func deviceNames(ds []PreparedDevice) string {
	names := make([]string, len(ds))
	for i, d := range ds {
		names[i] = d.Device
	}
	return strings.Join(names, ",")
}

func clonePrepared(ds []PreparedDevice) []PreparedDevice {
	out := make([]PreparedDevice, len(ds))
	for i, d := range ds {
		out[i] = d
		out[i].Requests = slices.Clone(d.Requests)
		out[i].CDIDevices = slices.Clone(d.CDIDevices)
	}
	return out
}

// encodeClaims is the claims' checkpoint, in the device checkpoint's
// envelope (version, checksum), sorted by UID.
func encodeClaims(claims map[types.UID]*claimRecord) ([]byte, error) {
	d := claimsCheckpoint{Claims: make([]*claimRecord, 0, len(claims))}
	for _, c := range claims {
		d.Claims = append(d.Claims, c)
	}
	sort.Slice(d.Claims, func(i, j int) bool { return d.Claims[i].UID < d.Claims[j].UID })
	b, err := checkpoint.Encode(checkpointVersion, &d)
	if err != nil {
		return nil, fmt.Errorf("encode DRA claim checkpoint: %w", err)
	}
	return b, nil
}

// decodeClaims reads a claims' checkpoint into claims (nil or empty: none).
func decodeClaims(b []byte, claims map[types.UID]*claimRecord) error {
	if len(b) == 0 {
		return nil
	}
	var d claimsCheckpoint
	if err := checkpoint.DecodeCanonical(b, checkpointVersion, &d); err != nil {
		return fmt.Errorf("%w: %w", errCorrupt, err)
	}
	for _, c := range d.Claims {
		if c == nil || c.UID == "" || len(c.Devices) == 0 {
			return fmt.Errorf("%w: a claim without its UID or devices", errCorrupt)
		}
		for _, dev := range c.Devices {
			if dev.ID == "" || dev.Device == "" {
				return fmt.Errorf("%w: claim %s: a device without its ID or name", errCorrupt, c.UID)
			}
		}
		claims[c.UID] = c
	}
	return nil
}
