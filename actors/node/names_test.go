package node

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/actorlet/actorlet/messages"
)

// named is a pod of uid called namespace/name.
func named(uid, namespace, name string) *v1.Pod {
	p := mkPod(uid, "img")
	p.Namespace, p.Name = namespace, name
	return p
}

// Issue 9: pushing deploy/examples/web.yaml while it runs as a static pod
// listed two default/web-actorlet-demo. One namespace/name runs once,
// whatever the sources: the first admitted pod keeps it, the others are
// rejected, and the name is free again once its holder goes.
func TestOneNamespaceNameRunsOnce(t *testing.T) {
	h := newHarness(t, Config{NodeName: "n1"})
	web := func(uid string) *v1.Pod { return named(uid, "default", "web-n1") }
	dup := "update %s Failed " + ReasonDuplicatePodName
	rejected := func(uids ...string) []string {
		var out []string
		for _, uid := range uids {
			out = append(out, strings.Replace(dup, "%s", uid, 1))
		}
		return out
	}
	h.run([]step{
		{
			name: "the first pod of a name runs",
			do:   sendAll(set(messages.SourceFile, web("s"))),
			pods: map[string]string{"s": "SyncPod img"},
		},
		{
			name:   "a pushed pod with the same namespace/name is rejected",
			do:     sendAll(add(messages.SourcePush, web("p"))),
			pods:   map[string]string{"s": "SyncPod img", "p": ""},
			status: rejected("p"),
		},
		{
			name: "so is one from the API server and a second one of the same source",
			do: sendAll(add(messages.SourceAPI, web("q")),
				set(messages.SourceFile, web("s"), web("s2"))),
			pods:   map[string]string{"s": "SyncPod img", "q": "", "s2": ""},
			status: rejected("p", "q", "s2"),
		},
		{
			name:   "the same name in another namespace runs",
			do:     sendAll(add(messages.SourcePush, named("o", "other", "web-n1"))),
			pods:   map[string]string{"o": "SyncPod img"},
			status: rejected("p", "q", "s2"),
		},
		{
			name:   "an edited static pod (new UID, same name) replaces the old one",
			do:     sendAll(set(messages.SourceFile, web("s3"))),
			pods:   map[string]string{"s": "SyncPod img,KillPod", "s3": "SyncPod img", "p": "", "q": ""},
			status: append(rejected("p", "q", "s2"), "forget s2"),
		},
		{
			name:   "once the holder goes, the name is free again",
			do:     sendAll(set(messages.SourceFile), add(messages.SourcePush, web("r"))),
			pods:   map[string]string{"s3": "SyncPod img,KillPod", "r": "SyncPod img", "p": "", "q": ""},
			status: append(rejected("p", "q", "s2"), "forget s2"),
		},
	})

	h.rec.mu.Lock()
	got := h.rec.last[types.UID("p")]
	h.rec.mu.Unlock()
	if got == nil {
		t.Fatal("no status for the rejected pod p")
	}
	msg := got.Status.Message
	for _, want := range []string{"default/web-n1", "UID s ", "source file"} {
		if !strings.Contains(msg, want) {
			t.Errorf("rejection message %q does not name the holder (%q)", msg, want)
		}
	}
}

// The name is held by admitted pods only: a pod being deleted from the API
// that never ran here (a rejected duplicate) does not take it, and frees
// nothing it did not hold.
func TestNameHeldByAdmittedPodsOnly(t *testing.T) {
	a := &Actor{table: newPodTable()}
	s := &entry{pod: named("s", "default", "web"), source: messages.SourceFile}
	a.table.add("s", s)
	a.track(s, 1)
	tests := []struct {
		name   string
		pod    *v1.Pod
		reason string
	}{
		{name: "the holder itself", pod: named("s", "default", "web")},
		{name: "another UID", pod: named("p", "default", "web"), reason: ReasonDuplicatePodName},
		{name: "another namespace", pod: named("p", "other", "web")},
		{name: "another name", pod: named("p", "default", "web2")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if reason, msg := a.nameConflict(tt.pod); reason != tt.reason {
				t.Fatalf("reason %q (%s), want %q", reason, msg, tt.reason)
			}
		})
	}
	// Another pod's share going away leaves the holder's name alone.
	a.admitted.trackName(named("p", "default", "web"), 1)
	a.admitted.trackName(named("p", "default", "web"), -1)
	if reason, _ := a.nameConflict(named("p", "default", "web")); reason != ReasonDuplicatePodName {
		t.Fatal("a pod that never held the name freed it")
	}
	// A killed holder frees it.
	a.track(s, -1)
	s.killing = &messages.KillPod{UID: "s"}
	if reason, _ := a.nameConflict(named("p", "default", "web")); reason != "" {
		t.Fatalf("name still held after its holder was killed: %s", reason)
	}
}
