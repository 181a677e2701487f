package messages

// ProbeKind names a container probe.
type ProbeKind string

// Probe kinds, as in the container spec.
const (
	ProbeLiveness  ProbeKind = "liveness"
	ProbeReadiness ProbeKind = "readiness"
	ProbeStartup   ProbeKind = "startup"
)

// ProbeResult is sent by a ProbeActor to its PodActor when the result of its
// probe changes (thresholds applied), and once after the ProbeActor (re)starts
// so that a restarted prober never leaves its parent with a stale view.
type ProbeResult struct {
	Container   string
	ContainerID string
	Kind        ProbeKind
	Success     bool
	// Message says why the probe failed (the handler's output or error).
	Message string
}

// ProbeWarning is sent by a ProbeActor when a probe succeeded with a
// warning (an httpGet probe that was redirected to another host and did not
// follow it), once per distinct warning; the PodActor records a
// ProbeWarning event, as upstream.
type ProbeWarning struct {
	Container   string
	ContainerID string
	Kind        ProbeKind
	Message     string
}
