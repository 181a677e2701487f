package kube

import (
	"context"
	"errors"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/actorlet/actorlet/errdefs"
)

func TestReviewerSendsReviews(t *testing.T) {
	cs := fake.NewClientset()
	var gotToken string
	var gotSpec authorizationv1.SubjectAccessReviewSpec
	cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		gotToken = tr.Spec.Token
		tr = tr.DeepCopy()
		tr.Status = authenticationv1.TokenReviewStatus{Authenticated: tr.Spec.Token == "good",
			User: authenticationv1.UserInfo{Username: "system:serviceaccount:default:sa"}}
		return true, tr, nil
	})
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		gotSpec = sar.Spec
		sar = sar.DeepCopy()
		sar.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: sar.Spec.User == "alice", Reason: "rbac"}
		return true, sar, nil
	})
	r := NewReviewer(cs)
	ctx := context.Background()

	st, err := r.ReviewToken(ctx, "good")
	if err != nil || !st.Authenticated || st.User.Username != "system:serviceaccount:default:sa" || gotToken != "good" {
		t.Fatalf("token review: %+v %v (sent %q)", st, err, gotToken)
	}
	spec := authorizationv1.SubjectAccessReviewSpec{
		User: "alice", Groups: []string{"devs"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Version: "v1", Resource: "nodes", Subresource: "proxy", Name: "n1"},
	}
	ast, err := r.ReviewAccess(ctx, spec)
	if err != nil || !ast.Allowed {
		t.Fatalf("access review: %+v %v", ast, err)
	}
	if gotSpec.User != "alice" || gotSpec.ResourceAttributes.Subresource != "proxy" || gotSpec.ResourceAttributes.Name != "n1" {
		t.Fatalf("sent %+v", gotSpec)
	}
}

func TestReviewerClassifiesErrors(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}, "", errors.New("no"))
	})
	r := NewReviewer(cs)
	if _, err := r.ReviewToken(context.Background(), "x"); !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("token review error %v, want ErrForbidden", err)
	}
	if _, err := r.ReviewAccess(context.Background(), authorizationv1.SubjectAccessReviewSpec{}); !errors.Is(err, errdefs.ErrForbidden) {
		t.Fatalf("access review error %v, want ErrForbidden", err)
	}
}
