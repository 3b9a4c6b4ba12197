package configcheck

import (
	"encoding/json"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation/field"

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

// phaseBounds is the denial reason (and metrics phase) of an object past
// its watched resource's bounds: decided from the request alone.
const phaseBounds = "object-bounds"

// objectBounds are one watched resource's bounds on an object.
type objectBounds struct {
	maxBytes int64
	maxList  int
}

func compileBounds(spec gatehousev1alpha1.WatchedResource) objectBounds {
	b := objectBounds{maxBytes: spec.MaxObjectBytes, maxList: int(spec.MaxListLength)}
	if b.maxBytes <= 0 {
		b.maxBytes = defaultMaxObjectBytes
	}
	if b.maxList <= 0 {
		b.maxList = defaultMaxListLength
	}
	return b
}

// objectSize is what bounds measure of an object as its store holds it:
// its JSON size, and its longest list with that list's path.
type objectSize struct {
	bytes   int64
	longest int
	path    string
}

// measure measures obj (as stored: w.stored).
func measure(obj map[string]any) objectSize {
	var s objectSize
	if data, err := json.Marshal(obj); err == nil {
		s.bytes = int64(len(data))
	}
	longestList(obj, "", &s)
	return s
}

// longestList finds the longest list under v, whose path is at.
func longestList(v any, at string, s *objectSize) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			p := k
			if at != "" {
				p = at + "." + k
			}
			longestList(e, p, s)
		}
	case []any:
		if len(v) > s.longest {
			s.longest, s.path = len(v), at
		}
		for i, e := range v {
			longestList(e, at+"["+strconv.Itoa(i)+"]", s)
		}
	}
}

// exceeds says whether s passes b.
func (b objectBounds) exceeds(s objectSize) bool {
	return s.bytes > b.maxBytes || s.longest > b.maxList
}

// validateBounds checks the object a create or update would store (obj)
// against w's bounds. old is what the store holds of it (nil if nothing):
// an object stored before the bounds were stated may stay as large as it
// is, or shrink, so that its owner can always get under the bound step by
// step; it may not grow. kind and config name the object's kind and the
// config, for the refusal, which says what the user can do. It reads the
// request alone, never the stores.
func validateBounds(w *watchedSpec, obj, old map[string]any, kind, config string) field.ErrorList {
	b := w.bounds
	size := measure(obj)
	if !b.exceeds(size) {
		return nil
	}
	if old != nil {
		before := measure(old)
		if b.exceeds(before) && size.bytes <= before.bytes && size.longest <= before.longest {
			return nil
		}
	}
	spec := field.NewPath("spec", "watchedResources").Key(w.name)
	var errs field.ErrorList
	if size.bytes > b.maxBytes {
		errs = append(errs, field.TooLong(field.NewPath("<object>"), formatSize(size.bytes), int(b.maxBytes)))
		errs[len(errs)-1].Detail = fmt.Sprintf(
			"this %s is %s as the templates see it; HAProxyTemplateConfig %s accepts %s objects of watched resource %s up to %s: "+
				"every admission renders all of the config's objects, so one object this large would slow every tenant's changes. "+
				"Split it into smaller objects, or ask the config's author to raise %s",
			kind, formatSize(size.bytes), config, kind, w.name, formatSize(b.maxBytes), spec.Child("maxObjectBytes"))
	}
	if size.longest > b.maxList {
		errs = append(errs, field.TooMany(field.NewPath(size.path), size.longest, b.maxList))
		errs[len(errs)-1].Detail = fmt.Sprintf(
			"%s of this %s has %d items; HAProxyTemplateConfig %s accepts lists of at most %d items in watched resource %s: "+
				"split the object into several, or ask the config's author to raise %s",
			size.path, kind, size.longest, config, b.maxList, w.name, spec.Child("maxListLength"))
	}
	return errs
}

// boundsDenial is the refusal of errs, one line per bound passed.
func boundsDenial(errs field.ErrorList) string {
	msg := "the object exceeds the bounds its config sets on each object:"
	for _, e := range errs {
		msg += "\n" + e.Detail
	}
	return msg
}

// formatSize writes n bytes as a person reads them.
func formatSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
