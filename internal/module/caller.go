package module

import "context"

// verifiedCallerKey marks a request's context when its caller presented a
// client certificate the server verified.
type verifiedCallerKey struct{}

// WithVerifiedCaller marks ctx as a request whose caller the server
// authenticated by its client certificate (the API server's, through its
// AdmissionConfiguration). Only the server sets it.
func WithVerifiedCaller(ctx context.Context) context.Context {
	return context.WithValue(ctx, verifiedCallerKey{}, true)
}

// VerifiedCaller says whether ctx's request came from a caller the server
// authenticated by client certificate. When it did not (the server runs
// without --client-ca-file, the chart's default), anyone who reaches the
// port may have posted the review, and its userInfo is whatever they
// wrote: a module must not spend work on that identity's behalf
// (SubjectAccessReviews) or tell it what only that identity may read.
func VerifiedCaller(ctx context.Context) bool {
	v, _ := ctx.Value(verifiedCallerKey{}).(bool)
	return v
}
