package nodestatus

import (
	"slices"
	"testing"
)

// v1.37.2's registry of node declared features
// (k8s.io/component-helpers/nodedeclaredfeatures/features.AllFeatures).
var registryV1372 = []string{
	"RestartAllContainersOnContainerExits",
	"InPlacePodLevelResourcesVerticalScaling",
	"ExtendWebSocketsToKubelet",
	"InPlacePodVerticalScalingInitContainers",
	"InPlacePodVerticalScalingMemoryBackedVolumes",
	"UserNamespacesHostNetworkSupport",
	"DRANodeAllocatableResources",
	"VolumeBindMountOptions",
	"DRAOptionalNodeOperations",
}

// Every registry feature is either declared or refused with a reason, never
// both; declared ones are registry names, sorted; what the node status
// carries is that list.
func TestDeclaredFeaturesAreDecided(t *testing.T) {
	for _, f := range registryV1372 {
		declared := slices.Contains(declaredFeatures, f)
		why, refused := notDeclared[f]
		if declared == refused {
			t.Errorf("%s: declared %v, refused %v: exactly one", f, declared, refused)
		}
		if refused && why == "" {
			t.Errorf("%s: refused without a reason", f)
		}
	}
	for _, f := range declaredFeatures {
		if !slices.Contains(registryV1372, f) {
			t.Errorf("declared %s is not a registry feature", f)
		}
	}
	if !slices.IsSorted(declaredFeatures) {
		t.Errorf("declared features not sorted: %v", declaredFeatures)
	}
	if got := DeclaredFeatures(); !slices.Equal(got, declaredFeatures) || (len(got) == 0 && got != nil) {
		t.Errorf("DeclaredFeatures() = %#v", got)
	}
	// port-forward over a WebSocket tunnel is refused by the node API,
	// so ExtendWebSocketsToKubelet must not be declared.
	if slices.Contains(DeclaredFeatures(), "ExtendWebSocketsToKubelet") {
		t.Error("ExtendWebSocketsToKubelet declared")
	}
}
