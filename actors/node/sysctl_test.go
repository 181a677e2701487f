package node

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/messages"
	"github.com/actorlet/actorlet/podspec"
)

// Pods asking for a sysctl the node does not allow are rejected at
// admission, whatever their source, with upstream's reason and message;
// safe ones and --allowed-unsafe-sysctls run.
func TestSysctlAdmission(t *testing.T) {
	allow, err := podspec.NewSysctlAllowlist(append(podspec.SafeSysctls("6.1.0"), "kernel.msgmnb"))
	if err != nil {
		t.Fatal(err)
	}
	withSysctls := func(uid string, names ...string) *v1.Pod {
		p := mkPod(uid, "img:1")
		p.Spec.SecurityContext = &v1.PodSecurityContext{}
		for _, n := range names {
			p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, v1.Sysctl{Name: n, Value: "1"})
		}
		return p
	}
	h := newHarness(t, Config{NodeName: "n1", Sysctls: allow})
	h.run([]step{{
		name: "unsafe sysctls not allowed are refused",
		do: sendAll(
			set(messages.SourceFile, withSysctls("safe", "kernel.shm_rmid_forced"), withSysctls("unsafe", "kernel.shm_rmid_forced", "kernel.msgmax")),
			add(messages.SourcePush, withSysctls("allowed", "kernel.msgmnb")),
		),
		pods:   map[string]string{"safe": "SyncPod img:1", "allowed": "SyncPod img:1", "unsafe": ""},
		status: []string{"update unsafe Failed SysctlForbidden"},
	}})
	h.rec.mu.Lock()
	defer h.rec.mu.Unlock()
	if p := h.rec.last[types.UID("unsafe")]; p == nil || p.Status.Message != `forbidden sysctl: "kernel.msgmax" not allowlisted` {
		t.Errorf("status of the refused pod: %v", p)
	}
}
