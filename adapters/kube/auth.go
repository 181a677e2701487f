package kube

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Reviewer asks the API server who a bearer token belongs to (TokenReview)
// and whether a user may do something (SubjectAccessReview), with the
// node's credentials: the node API's webhook authentication and
// authorization. The node's Node authorizer allows both.
type Reviewer struct {
	cs kubernetes.Interface
}

// Reviewer returns the node API's reviewer. It has its own rate limiter
// (the client's QPS and burst), so a burst of status writes never delays a
// `kubectl logs`.
func (c *Client) Reviewer() (*Reviewer, error) {
	if c.cfg == nil {
		return &Reviewer{cs: c.cs}, nil
	}
	cfg := rest.CopyConfig(c.cfg)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes review client: %w", err)
	}
	return &Reviewer{cs: cs}, nil
}

// NewReviewer wraps a clientset (tests).
func NewReviewer(cs kubernetes.Interface) *Reviewer { return &Reviewer{cs: cs} }

// ReviewToken sends a TokenReview (no audiences: the API server's own).
func (r *Reviewer) ReviewToken(ctx context.Context, token string) (*authenticationv1.TokenReviewStatus, error) {
	res, err := r.cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create tokenreview: %w", classify(err))
	}
	return &res.Status, nil
}

// ReviewAccess sends a SubjectAccessReview.
func (r *Reviewer) ReviewAccess(ctx context.Context, spec authorizationv1.SubjectAccessReviewSpec) (*authorizationv1.SubjectAccessReviewStatus, error) {
	res, err := r.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: spec,
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create subjectaccessreview: %w", classify(err))
	}
	return &res.Status, nil
}
