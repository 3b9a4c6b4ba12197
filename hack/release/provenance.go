package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	slsa "github.com/in-toto/attestation/go/predicates/provenance/v1"
	intoto "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// SLSA provenance v1's predicate type, and the build type this release's
// parameters follow (docs/releasing.md describes them).
const (
	provenancePredicateType = "https://slsa.dev/provenance/v1"
	releaseBuildType        = "https://github.com/gatehouse-dev/gatehouse/blob/main/docs/releasing.md#make-release-v1"
	defaultBuilderID        = "https://github.com/gatehouse-dev/gatehouse/blob/main/docs/releasing.md#a-local-make-release"
)

// imageSubjectName names the image index among the statement's subjects:
// the index is pushed under any registry's path, so its name is the
// repository's last element, and its digest what identifies it.
const imageSubjectName = "gatehouse-image"

// provenance is the release's in-toto statement: every file of the
// release and the image index (by the digest a registry serves it under)
// as subjects, an SLSA provenance v1 predicate saying what was built from
// what. It holds no time of building, so that it is reproducible too.
func provenance(o distOptions, n names, dir string, files []string, indexDigest string, platforms []string) ([]byte, error) {
	var subjects []*intoto.ResourceDescriptor
	algorithm, hex, ok := strings.Cut(indexDigest, ":")
	if !ok {
		return nil, fmt.Errorf("image index digest %q", indexDigest)
	}
	subjects = append(subjects, &intoto.ResourceDescriptor{
		Name:      imageSubjectName,
		Digest:    map[string]string{algorithm: hex},
		MediaType: "application/vnd.oci.image.index.v1+json",
	})
	for _, f := range files {
		sum, err := fileSHA256(filepath.Join(dir, f))
		if err != nil {
			return nil, err
		}
		subjects = append(subjects, &intoto.ResourceDescriptor{Name: f, Digest: map[string]string{"sha256": sum}})
	}

	external, err := structpb.NewStruct(map[string]any{
		"version": o.Version,
		"source":  map[string]any{"uri": o.SourceURI, "revision": o.Revision},
	})
	if err != nil {
		return nil, err
	}
	platformList := make([]any, len(platforms))
	for i, p := range platforms {
		platformList[i] = p
	}
	internal, err := structpb.NewStruct(map[string]any{
		"sourceDateEpoch":  float64(o.Epoch),
		"cliPlatforms":     platformList,
		"workTreeModified": o.Modified,
	})
	if err != nil {
		return nil, err
	}
	deps := []*intoto.ResourceDescriptor{{
		Uri:    o.SourceURI + "@" + o.Revision,
		Digest: map[string]string{"gitCommit": o.Revision},
	}}
	if o.GoVersion != "" {
		deps = append(deps, &intoto.ResourceDescriptor{Name: "go", Uri: "pkg:golang/stdlib@" + strings.TrimPrefix(o.GoVersion, "go")})
	}
	for _, d := range o.Dependencies {
		uri, path, ok := strings.Cut(d, "=")
		if !ok {
			return nil, fmt.Errorf("--dependency %q: want URI=PATH", d)
		}
		sum, err := fileSHA256(path)
		if err != nil {
			return nil, err
		}
		deps = append(deps, &intoto.ResourceDescriptor{Uri: uri, Digest: map[string]string{"sha256": sum}})
	}
	predicate := &slsa.Provenance{
		BuildDefinition: &slsa.BuildDefinition{
			BuildType:            releaseBuildType,
			ExternalParameters:   external,
			InternalParameters:   internal,
			ResolvedDependencies: deps,
		},
		RunDetails: &slsa.RunDetails{Builder: &slsa.Builder{Id: o.BuilderID}},
	}
	if err := predicate.Validate(); err != nil {
		return nil, err
	}
	predicateStruct, err := toStruct(predicate)
	if err != nil {
		return nil, err
	}
	statement := &intoto.Statement{
		Type:          intoto.StatementTypeUri,
		Subject:       subjects,
		PredicateType: provenancePredicateType,
		Predicate:     predicateStruct,
	}
	if err := statement.Validate(); err != nil {
		return nil, err
	}
	return stableJSON(statement)
}

// toStruct converts a message to the Struct a statement's predicate is.
func toStruct(m proto.Message) (*structpb.Struct, error) {
	raw, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	s := &structpb.Struct{}
	return s, protojson.Unmarshal(raw, s)
}

// stableJSON is protojson's encoding made byte-stable: protojson varies
// its whitespace from build to build on purpose, so the output is
// compacted and indented again (map keys it already sorts).
func stableJSON(m proto.Message) ([]byte, error) {
	raw, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	var compact, indented bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil {
		return nil, err
	}
	if err := json.Indent(&indented, compact.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	indented.WriteByte('\n')
	return indented.Bytes(), nil
}
