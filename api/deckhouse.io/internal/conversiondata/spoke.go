package conversiondata

import (
	"context"
	"regexp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/gatehouse-dev/gatehouse/api/deckhouse.io/v1"
)

// What v1alpha1 and v1alpha2 do alike when they convert to and from the
// hub lives here; each version keeps only what it alone differs in.

var (
	// spokeChaosPeriod is the period pattern of both older versions.
	spokeChaosPeriod = regexp.MustCompile(`^[0-9]+[mh]{1}$`)
	// hubChaosPeriod is the wider v1 pattern, which also accepts 2h30m.
	hubChaosPeriod = regexp.MustCompile(`^([0-9]+h([0-9]+m)?|[0-9]+m)$`)
)

// ChaosPeriodFromHub is the period an older version shows: empty for one
// only the v1 pattern accepts, so that the object can be written back
// through that version; SaveFromHub keeps the period.
func ChaosPeriodFromHub(period string) string {
	if hubChaosPeriod.MatchString(period) && !spokeChaosPeriod.MatchString(period) {
		return ""
	}
	return period
}

// NodeTypeFromHub is the type an older version shows: Cloud for
// CloudEphemeral, Hybrid for CloudPermanent and CloudStatic.
func NodeTypeFromHub[T ~string](t v1.NodeType) T {
	switch t {
	case v1.NodeTypeCloudEphemeral:
		return "Cloud"
	case v1.NodeTypeCloudPermanent, v1.NodeTypeCloudStatic:
		return "Hybrid"
	}
	return T(t)
}

// CRITypeFromHub shows ContainerdV2, which the older enums lack, as the
// nearest type they have.
func CRITypeFromHub[T ~string](t v1.CRIType) T {
	if t == v1.CRITypeContainerdV2 {
		return T(v1.CRITypeContainerd)
	}
	return T(t)
}

// BeginToHub reads the conversion data of src, a NodeGroup of an older
// version, and takes the hub's section out of it.
func BeginToHub(src metav1.Object) (Sections, *HubData, error) {
	sections, err := Read(src, v1.ConversionDataAnnotation)
	if err != nil {
		return nil, nil, err
	}
	data := &HubData{}
	if _, err := sections.Take(HubSection, data); err != nil {
		return nil, nil, err
	}
	return sections, data, nil
}

// FinishToHub completes dst, just converted field by field from src, an
// object that shows nodeType and criType in its version's terms: it
// resolves the node type and puts back what the hub held beyond that
// version.
func (d *HubData) FinishToHub(ctx context.Context, src metav1.Object, nodeType, criType string, dst *v1.NodeGroup) error {
	t, err := d.nodeTypeToHub(ctx, src, nodeType)
	if err != nil {
		return err
	}
	dst.Spec.NodeType = t
	d.Restore(dst)
	if c := dst.Spec.CRI; c != nil {
		// The saved settings belong to the saved type: they come back
		// only while the older version still shows that type.
		if saved := d.Spec.CRI; saved != (HubCRI{}) && CRITypeFromHub[string](saved.Type) == criType {
			c.Type, c.ContainerdV2 = saved.Type, saved.ContainerdV2
			if saved.NotManaged != nil {
				c.NotManaged = saved.NotManaged
			}
		}
	}
	if c := dst.Spec.Chaos; c != nil && c.Period == "" && d.Spec.Chaos.Period != "" {
		c.Period = d.Spec.Chaos.Period
	}
	return nil
}

func (d *HubData) nodeTypeToHub(ctx context.Context, src metav1.Object, shown string) (v1.NodeType, error) {
	// The saved type is what is stored; it wins while the older version
	// still shows the type it was converted to, so a read-modify-write
	// through it cannot flip CloudStatic to CloudPermanent or back. Only
	// the two types behind Hybrid are ever saved (SaveFromHub): any other
	// saved value was written by a client, and trusting it would store an
	// older version's name, such as Hybrid or Cloud, as the v1 type.
	if saved := d.Spec.NodeType; (saved == v1.NodeTypeCloudPermanent || saved == v1.NodeTypeCloudStatic) && NodeTypeFromHub[string](saved) == shown {
		return saved, nil
	}
	switch shown {
	case "Cloud":
		return v1.NodeTypeCloudEphemeral, nil
	case "Hybrid":
		return v1.HybridNodeType(ctx, src)
	}
	return v1.NodeType(shown), nil
}

// SaveFromHub records what hub holds that an older version showing
// chaosPeriod cannot. keepsNotManaged is true for a version without
// cri.notManaged (v1alpha1).
func SaveFromHub(hub *v1.NodeGroup, chaosPeriod string, keepsNotManaged bool) *HubData {
	d := &HubData{}
	d.Save(hub)
	if t := hub.Spec.NodeType; t == v1.NodeTypeCloudPermanent || t == v1.NodeTypeCloudStatic {
		d.Spec.NodeType = t // the exact type behind Hybrid
	}
	if c := hub.Spec.CRI; c != nil {
		saved := &d.Spec.CRI
		saved.ContainerdV2 = c.ContainerdV2
		if keepsNotManaged {
			saved.NotManaged = c.NotManaged
		}
		if saved.ContainerdV2 != nil || saved.NotManaged != nil || CRITypeFromHub[v1.CRIType](c.Type) != c.Type {
			saved.Type = c.Type
		}
	}
	if c := hub.Spec.Chaos; c != nil && chaosPeriod != c.Period {
		d.Spec.Chaos.Period = c.Period
	}
	return d
}

// Finish stores d as the hub's section of sections and writes them to
// obj's annotation.
func (d *HubData) Finish(obj metav1.Object, sections Sections) error {
	sections, err := Put(sections, HubSection, d)
	if err != nil {
		return err
	}
	return Write(obj, v1.ConversionDataAnnotation, sections)
}
