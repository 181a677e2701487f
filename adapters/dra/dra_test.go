package dra

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func TestChooseServicesAsUpstream(t *testing.T) {
	for _, tc := range []struct {
		announced       []string
		service, health string
		err             string
	}{
		{announced: []string{"v1beta1.DRAPlugin", "v1.DRAPlugin", "v1alpha1.DRAResourceHealth", "v1.DRAResourceHealth"}, service: "v1.DRAPlugin", health: "v1.DRAResourceHealth"},
		{announced: []string{"v1beta1.DRAPlugin", "v1alpha1.DRAResourceHealth"}, service: "v1beta1.DRAPlugin", health: "v1alpha1.DRAResourceHealth"},
		{announced: []string{"v1.DRAPlugin"}, service: "v1.DRAPlugin"},
		{announced: nil, err: "empty list of supported gRPC services"},
		{announced: []string{"v1alpha4.DRAPlugin", "v1.DRAResourceHealth"}, err: "none of services supported by the plugin"},
	} {
		s, h, err := ChooseServices(tc.announced)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err %v, want %q", tc.announced, err, tc.err)
			}
			continue
		}
		if err != nil || s != tc.service || h != tc.health {
			t.Errorf("%v: %q %q %v, want %q %q", tc.announced, s, h, err, tc.service, tc.health)
		}
	}
}

func TestWiperSelectsTheNodesSlices(t *testing.T) {
	cs := fake.NewSimpleClientset()
	w := Wiper{Client: cs, Node: "n1"}
	if err := w.WipeSlices(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if err := w.WipeSlices(context.Background(), "gpu.example.com"); err != nil {
		t.Fatal(err)
	}
	var sels []string
	for _, a := range cs.Actions() {
		if dc, ok := a.(k8stesting.DeleteCollectionAction); ok && a.GetResource().Resource == "resourceslices" {
			sels = append(sels, dc.GetListRestrictions().Fields.String())
		}
	}
	if len(sels) != 2 || sels[0] != "spec.nodeName=n1" || !strings.Contains(sels[1], "spec.driver=gpu.example.com") || !strings.Contains(sels[1], "spec.nodeName=n1") {
		t.Fatalf("delete collections %v", sels)
	}
}

func TestDialRefusesUnknownServices(t *testing.T) {
	if _, err := Dial("d", "/nonexistent.sock", []string{"v9.DRAPlugin"}, 0, nil, nil); err == nil || !strings.Contains(err.Error(), "invalid supported gRPC versions of DRA driver plugin d") {
		t.Fatalf("err %v", err)
	}
}
