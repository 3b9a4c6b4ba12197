package spec

import (
	gatehousev1alpha1 "github.com/gatehouse-dev/gatehouse/api/gatehouse.dev/v1alpha1"
)

// Every admission of a config renders all of its objects, so one tenant's
// large object slows every other tenant's admissions of that config (six
// Ingresses of 10,000 paths each made a shared config's admissions take
// 10 s, past their timeout). A watched resource therefore bounds its
// objects, and an object past the bounds is refused when it is written,
// naming its own size and the bound, instead of making everyone time out.
//
// The defaults fit what a watched kind normally holds: 128 KiB is a
// hundred times an ordinary Ingress or Service, and holds a Secret with a
// certificate chain; 1000 is the most endpoints an EndpointSlice may hold.
// A config whose objects are legitimately larger states its own bounds.
const (
	defaultMaxObjectBytes = 128 << 10
	defaultMaxListLength  = 1000
)

// Bounds are one watched resource's bounds on an object.
type Bounds struct {
	MaxBytes int64
	MaxList  int
}

func CompileBounds(spec gatehousev1alpha1.WatchedResource) Bounds {
	b := Bounds{MaxBytes: spec.MaxObjectBytes, MaxList: int(spec.MaxListLength)}
	if b.MaxBytes <= 0 {
		b.MaxBytes = defaultMaxObjectBytes
	}
	if b.MaxList <= 0 {
		b.MaxList = defaultMaxListLength
	}
	return b
}
