package status

import (
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/errdefs"
	"github.com/actorlet/actorlet/internal/actorkit"
)

// Recorder records events (client-go's record.EventRecorder satisfies it).
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// Metrics is what the StatusActor counts. May be nil.
type Metrics interface {
	// IncTerminatedContainers: a container's status turned terminated
	// (kubelet_terminated_containers_total, as upstream's status manager).
	IncTerminatedContainers(containerType, exitCode, reason string)
	// IncPodStatusRefused: the API server refused a pod status write, by
	// its reason (Invalid, Forbidden, Conflict).
	IncPodStatusRefused(reason string)
	// ObservePodStatusSync: the time from a pod status change to the API
	// server holding it, intervening changes included
	// (kubelet_pod_status_sync_duration_seconds, as upstream).
	ObservePodStatusSync(d time.Duration)
}

// Container types of kubelet_terminated_containers_total, as upstream.
const (
	containerTypeContainer = "container"
	containerTypeInit      = "init_container"
	containerTypeEphemeral = "ephemeral_container"
)

// ReasonFailedStatusUpdate is the event reason of a pod status write the API
// server refused.
const ReasonFailedStatusUpdate = "FailedStatusUpdate"

// ConditionStatusRefused is the pod condition the node's /pods shows while
// the API server refuses the pod's status. It is served by the node only,
// never written to the API server (what is written is what was refused);
// upstream's /pods shows nothing there. A domain-prefixed type, as
// readiness gates use, keeps the served status valid.
const ConditionStatusRefused v1.PodConditionType = "actorlet.io/StatusWriteRefused"

// refusal is what the API server said when it refused a status write.
type refusal struct {
	reason  string // the Status reason: Invalid, Forbidden, Conflict
	code    int32
	field   string // the field the first cause names ("" when none)
	message string
	since   time.Time
}

// apiStatus is what an API server error carries (apierrors.APIStatus).
type apiStatus interface{ Status() metav1.Status }

// isRefusal: the API server answered the write and refused it.
func isRefusal(err error) bool {
	return errors.Is(err, errdefs.ErrInvalidArgument) || errors.Is(err, errdefs.ErrForbidden) ||
		errors.Is(err, errdefs.ErrConflict)
}

// refusalOf reads the reason, the field named and the message of a refusal.
func refusalOf(err error) *refusal {
	r := &refusal{message: err.Error()}
	var s apiStatus
	if errors.As(err, &s) {
		st := s.Status()
		r.reason, r.code, r.message = string(st.Reason), st.Code, st.Message
		if st.Details != nil {
			for _, c := range st.Details.Causes {
				if c.Field != "" {
					r.field = c.Field
					if c.Message != "" {
						r.message = c.Message
					}
					break
				}
			}
		}
	}
	if r.reason == "" {
		switch {
		case errors.Is(err, errdefs.ErrInvalidArgument):
			r.reason, r.code = string(metav1.StatusReasonInvalid), 422
		case errors.Is(err, errdefs.ErrForbidden):
			r.reason, r.code = string(metav1.StatusReasonForbidden), 403
		default:
			r.reason, r.code = string(metav1.StatusReasonConflict), 409
		}
	}
	return r
}

// text is the refusal for a log line, an event and a condition.
func (r *refusal) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the API server refused the pod status (%d %s)", r.code, r.reason)
	if r.field != "" {
		fmt.Fprintf(&b, " at %s", r.field)
	}
	b.WriteString(": ")
	b.WriteString(r.message)
	return b.String()
}

// refuse handles a write refused after a re-read: logged, an event and a
// condition in /pods the first time (or when the reason or field
// changes), counted every time, and retried with back-off up to
// RefusedRetryMax. A write taken later clears it (accepted).
func (w *writer) refuse(st *apiPod, err error) {
	r := refusalOf(err)
	st.refusals++
	if w.metrics != nil {
		w.metrics.IncPodStatusRefused(r.reason)
	}
	d := actorkit.Backoff{Base: w.cfg.RetryBase, Cap: w.cfg.RefusedRetryMax}.Delay(st.refusals)
	st.retryAt = w.clk.Now().Add(d)
	if old := st.refused; old != nil && old.reason == r.reason && old.field == r.field {
		old.message = r.message
		return
	}
	r.since = w.clk.Now()
	st.refused = r
	w.log.Warn("pod status refused by the API server, retrying with back-off", "pod", st.ns+"/"+st.name,
		"reason", r.reason, "code", r.code, "field", r.field, "message", r.message, "retry_in", d)
	if w.events != nil && st.apiUID != "" {
		ref := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: st.ns, Name: st.name, UID: st.apiUID}}
		w.events.Eventf(ref, v1.EventTypeWarning, ReasonFailedStatusUpdate, "%s", r.text())
	}
	if w.changed != nil {
		w.changed()
	}
}

// accepted: a write was taken; a refusal is over.
func (w *writer) accepted(st *apiPod) {
	st.reread = false
	if st.refused == nil {
		return
	}
	w.log.Info("pod status taken by the API server again", "pod", st.ns+"/"+st.name,
		"refused_for", w.clk.Since(st.refused.since), "refusals", st.refusals)
	st.refused, st.refusals = nil, 0
	if w.changed != nil {
		w.changed()
	}
}

// changedIf: st leaves the writer; /pods changes if it showed a refusal.
func (w *writer) changedIf(st *apiPod) {
	if st.refused != nil && w.changed != nil {
		w.changed()
	}
}

// refusedCondition is the condition /pods shows for a pod whose status is
// refused, or nil.
func (w *writer) refusedCondition(uid types.UID) *v1.PodCondition {
	st := w.pods[uid]
	if st == nil || st.refused == nil {
		return nil
	}
	return &v1.PodCondition{
		Type: ConditionStatusRefused, Status: v1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(st.refused.since),
		Reason:             st.refused.reason,
		Message:            st.refused.text(),
	}
}

// countTerminated counts the containers whose status turned terminated
// from old to new, as upstream's status manager
// (kubelet_terminated_containers_total).
func countTerminated(m Metrics, old, new *v1.PodStatus) {
	if m == nil {
		return
	}
	var empty v1.PodStatus
	if old == nil {
		old = &empty
	}
	count := func(o, n []v1.ContainerStatus, ctype string) {
		for i := range n {
			t := n[i].State.Terminated
			if t == nil {
				continue
			}
			was := false
			for j := range o {
				if o[j].Name == n[i].Name {
					was = o[j].State.Terminated != nil
					break
				}
			}
			if !was {
				m.IncTerminatedContainers(ctype, fmt.Sprint(t.ExitCode), t.Reason)
			}
		}
	}
	count(old.InitContainerStatuses, new.InitContainerStatuses, containerTypeInit)
	count(old.ContainerStatuses, new.ContainerStatuses, containerTypeContainer)
	count(old.EphemeralContainerStatuses, new.EphemeralContainerStatuses, containerTypeEphemeral)
}
