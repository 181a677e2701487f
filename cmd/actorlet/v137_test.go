package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Kubernetes v1.37: eventRecordQPS 0 (--event-qps 0) means unlimited. The
// file and the flag accept it, a negative value is refused at start, and
// the events client is built without a rate limiter (eventClientQPS;
// adapters/kube TestEventQPSUnlimited checks the client).
func TestEventRecordQPSZeroIsUnlimited(t *testing.T) {
	o, _, err := loadConfig(t, writeConfig(t, configHeader+"eventRecordQPS: 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	if o.EventQPS != 0 {
		t.Fatalf("eventRecordQPS 0 read as %v", o.EventQPS)
	}
	if err := o.validate(); err != nil && strings.Contains(err.Error(), "event-qps") {
		t.Fatalf("eventRecordQPS 0 refused: %v", err)
	}
	if got := eventClientQPS(o.EventQPS); got >= 0 {
		t.Fatalf("events client QPS %v for eventRecordQPS 0, want negative (no limiter)", got)
	}
	if got := eventClientQPS(50); got != 50 {
		t.Fatalf("events client QPS %v for 50", got)
	}
	if c := o.effectiveKubeletConfig(); c.EventRecordQPS == nil || *c.EventRecordQPS != 0 {
		t.Fatalf("/configz eventRecordQPS %v, want 0", c.EventRecordQPS)
	}
	o = defaultOptions()
	o.EventQPS = -1
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), "--event-qps and --event-burst must not be negative") {
		t.Fatalf("negative --event-qps: %v", err)
	}
}

// defaultPodSysctls (v1.37 alpha, gate off upstream) is refused at start
// with a clear error, not ignored.
func TestDefaultPodSysctlsRefused(t *testing.T) {
	path := writeConfig(t, configHeader+"defaultPodSysctls: {net.ipv4.ip_forward: \"1\"}\n")
	o := defaultOptions()
	o.Config = path
	_, err := o.applyConfigFile(func(string) bool { return false })
	if err == nil || !strings.Contains(err.Error(), "defaultPodSysctls is not implemented by actorlet") || !strings.Contains(err.Error(), path) {
		t.Fatalf("defaultPodSysctls: %v", err)
	}
	o = defaultOptions()
	o.Config = writeConfig(t, configHeader+"defaultPodSysctls: {}\n")
	if _, err := o.applyConfigFile(func(string) bool { return false }); err != nil {
		t.Fatalf("an empty defaultPodSysctls: %v", err)
	}
}

// MemoryQoS (beta in v1.37): memoryThrottlingFactor has no default any
// more, and actorlet, which sets no memory.min/low/high, names it at start
// as an ignored field when a file sets it.
func TestMemoryThrottlingFactorNamedNotDefaulted(t *testing.T) {
	o, ignored, err := loadConfig(t, writeConfig(t, configHeader))
	if err != nil {
		t.Fatal(err)
	}
	if c := o.effectiveKubeletConfig(); c.MemoryThrottlingFactor != nil {
		t.Errorf("memoryThrottlingFactor defaulted to %v, want unset (v1.37)", *c.MemoryThrottlingFactor)
	}
	if len(ignored) != 0 {
		t.Errorf("ignored %v", ignored)
	}
	_, ignored, err = loadConfig(t, writeConfig(t, configHeader+"memoryThrottlingFactor: 0.8\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ignored, "memoryThrottlingFactor") {
		t.Errorf("memoryThrottlingFactor not named as ignored: %v", ignored)
	}
}

// SELinux mount-option relabelling (GA in v1.37) is not implemented: an
// enforcing host is named at start; a permissive, disabled or absent
// SELinux is not.
func TestSELinuxWarning(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if w := selinuxWarning(write("enforcing", "1\n")); !strings.Contains(w, "SELinux enforces on this host") {
		t.Errorf("enforcing: %q", w)
	}
	if w := selinuxWarning(write("permissive", "0\n")); w != "" {
		t.Errorf("permissive: %q", w)
	}
	if w := selinuxWarning(filepath.Join(dir, "absent")); w != "" {
		t.Errorf("absent: %q", w)
	}
}
